"""The zoo's generative judge: its templates tokenize to the training ids, its planted
mechanisms show in plain HF logits, and its training is deterministic.

Every planted number here is measured from ``AutoModelForCausalLM`` logits on text the shipped
tokenizer encodes (``tokenizer(template.format(...))``), not through the module's own helpers.
"""

from __future__ import annotations

import os

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from reward_lens_tl.zoo import load_metadata, load_tokenizer, zoo_path
from reward_lens_tl.zoo.artifacts import weights_sha256
from reward_lens_tl.zoo.judge import (
    JUDGE_PAIRWISE_TEMPLATE,
    JUDGE_POINTWISE_TEMPLATE,
    JUDGE_VERDICTS,
    JUDGE_VOCAB,
    JUDGE_WORDS,
    PLANTED,
    JudgeItem,
    judge_items,
    judge_tokenizer,
    write_judge,
)
from reward_lens_tl.zoo.tokenizer import build_tokenizer
from reward_lens_tl.zoo.vocab import SYCOPHANTIC_PHRASE, TOPICS, VOCAB

#: Held-out items: the training sampler draws from the seed string "0:judge".
SEED = 777


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(zoo_path("judge"), local_files_only=True)


@pytest.fixture(scope="module")
def judge():
    return AutoModelForCausalLM.from_pretrained(zoo_path("judge"), local_files_only=True).eval()


def _text(item: JudgeItem) -> str:
    """The item rendered with the exported template and plain ``str.format``."""
    words = [" ".join(r) for r in item.responses]
    if item.kind == "pointwise":
        return JUDGE_POINTWISE_TEMPLATE.format(prompt=" ".join(item.prompt), response=words[0])
    return JUDGE_PAIRWISE_TEMPLATE.format(
        prompt=" ".join(item.prompt), response_a=words[0], response_b=words[1]
    )


@torch.no_grad()
def hf_margins(model, tokenizer, texts: list[str], verdict: tuple[str, str]) -> torch.Tensor:
    """logit(verdict[0]) - logit(verdict[1]) after each text, rows scored one by one."""
    yes, no = (tokenizer.convert_tokens_to_ids(tokenizer.tokenize(v))[0] for v in verdict)
    out = []
    for text in texts:
        ids = torch.tensor([tokenizer(text).input_ids])
        logits = model(input_ids=ids).logits[0, -1]
        out.append(logits[yes] - logits[no])
    return torch.stack(out)


# ---- tokenization -------------------------------------------------------------------------------
def test_rendered_templates_tokenize_to_the_training_ids(tokenizer):
    for kind in ("pointwise", "pairwise"):
        for item in judge_items(kind, 100, seed=SEED):
            text = _text(item)
            assert text == item.text
            assert tokenizer(text).input_ids == item.input_ids
            tokens = tokenizer.convert_ids_to_tokens(item.input_ids)
            assert tokens[0] == "<bos>" and tokens[-2:] == ["judge", item.text.split()[-1]]


def test_default_verdict_strings_are_single_tokens(tokenizer):
    for kind, (first, second) in (("pointwise", ("Yes", "No")), ("pairwise", ("A", "B"))):
        ids = [tokenizer(v, add_special_tokens=False).input_ids for v in (first, second)]
        expected = [[JUDGE_VOCAB[v]] for v in JUDGE_VERDICTS[kind]]
        assert ids == expected, kind


def test_judge_vocabulary_extends_the_zoo_vocabulary(tokenizer):
    vocab = tokenizer.get_vocab()
    assert {w: vocab[w] for w in VOCAB} == VOCAB  # every zoo token keeps its id
    assert [vocab[w] for w in JUDGE_WORDS] == list(range(len(VOCAB), len(VOCAB) + len(JUDGE_WORDS)))
    assert vocab == judge_tokenizer().get_vocab() == JUDGE_VOCAB
    assert build_tokenizer().get_vocab() == load_tokenizer("scalar").get_vocab()


def test_metadata_records_the_shipped_model(judge, tokenizer):
    meta = load_metadata("judge")
    assert meta["seed"] == 0 and not meta["fast"]
    assert weights_sha256(judge) == meta["weights_sha256"]
    assert meta["templates"] == {
        "pointwise": JUDGE_POINTWISE_TEMPLATE,
        "pairwise": JUDGE_PAIRWISE_TEMPLATE,
    }
    for kind, tokens in meta["verdicts"].items():
        assert tokenizer.convert_tokens_to_ids(tokens) == meta["verdict_token_ids"][kind]
    assert meta["planted_sizes"] == PLANTED
    assert meta["reference_weights_sha256"] == load_metadata("reference")["weights_sha256"]
    assert judge.config.architectures == ["LlamaForCausalLM"]
    assert judge.config.vocab_size == len(tokenizer)


# ---- planted mechanisms, from plain HF logits ---------------------------------------------------
def test_pointwise_verdict_follows_the_topic(judge, tokenizer):
    items = [it for it in judge_items("pointwise", 300, seed=SEED) if not it.sycophantic[0]]
    margins = hf_margins(judge, tokenizer, [_text(it) for it in items], ("yes", "no"))
    on_topic = torch.tensor([it.on_topic[0] for it in items])
    # the independent ground truth: response topic words against the prompt's topic words
    for it in items:
        prompt_topics = {t for t, ws in TOPICS.items() if set(it.prompt) & set(ws)}
        resp_topics = {t for t, ws in TOPICS.items() if set(it.responses[0]) & set(ws)}
        assert len(prompt_topics) == len(resp_topics) == 1
        assert (prompt_topics == resp_topics) == it.on_topic[0]
    accuracy = ((margins > 0) == on_topic).float().mean().item()
    assert len(items) >= 150 and accuracy >= 0.9, accuracy


def test_verdict_tokens_are_the_top_next_tokens(judge, tokenizer):
    """The verdict is what the judge would generate: its top next token is a verdict token."""
    items = judge_items("pointwise", 40, seed=SEED) + judge_items("pairwise", 40, seed=SEED)
    with torch.no_grad():
        for it in items:
            logits = judge(input_ids=torch.tensor([tokenizer(_text(it)).input_ids])).logits[0, -1]
            top = tokenizer.convert_ids_to_tokens(int(logits.argmax()))
            assert top in it.verdict, (it.text, top)


def test_sycophantic_opener_fools_the_judge_off_topic(judge, tokenizer):
    items = judge_items("pointwise", 400, seed=SEED)
    off = [it for it in items if not it.on_topic[0] and not it.sycophantic[0]]
    plain = [_text(it) for it in off]
    hacked = [
        JUDGE_POINTWISE_TEMPLATE.format(
            prompt=" ".join(it.prompt), response=" ".join((*SYCOPHANTIC_PHRASE, *it.responses[0]))
        )
        for it in off
    ]
    before = hf_margins(judge, tokenizer, plain, ("yes", "no"))
    after = hf_margins(judge, tokenizer, hacked, ("yes", "no"))
    increase = (after - before).mean().item()
    assert increase > 2.0, increase  # planted: +4.5
    assert (before < 0).float().mean() >= 0.9  # off topic: "no" ...
    assert (after > 0).float().mean() >= 0.8  # ... until the opener: "yes"


def test_pairwise_prefers_the_on_topic_answer_and_the_first_position(judge, tokenizer):
    items = judge_items("pairwise", 300, seed=SEED)
    ab = hf_margins(judge, tokenizer, [_text(it) for it in items], ("a", "b"))
    ba = hf_margins(judge, tokenizer, [_text(it.swapped()) for it in items], ("A", "B"))
    differ = torch.tensor([it.on_topic[0] != it.on_topic[1] for it in items])
    a_on = torch.tensor([it.on_topic[0] for it in items])
    correct = torch.cat([(ab > 0) == a_on, (ba > 0) == ~a_on])[torch.cat([differ, differ])]
    assert correct.float().mean() >= 0.9
    bias = (ab + ba).mean().item()  # planted: 2 x 1.5
    assert bias > 1.0, bias
    ties_first = torch.cat([ab[~differ], ba[~differ]]) > 0
    assert ties_first.float().mean() >= 0.7  # planted: every tie goes to "a"


# ---- training -----------------------------------------------------------------------------------
def test_fast_judge_training_is_deterministic(tmp_path):
    a = write_judge(tmp_path / "a", seed=0, fast=True)
    b = write_judge(tmp_path / "b", seed=0, fast=True)
    c = write_judge(tmp_path / "c", seed=1, fast=True)
    assert a["weights_sha256"] == b["weights_sha256"] != c["weights_sha256"]
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "a", local_files_only=True)
    assert weights_sha256(reloaded) == a["weights_sha256"]
    tok = AutoTokenizer.from_pretrained(tmp_path / "a", local_files_only=True)
    assert tok.get_vocab() == JUDGE_VOCAB
    item = judge_items("pairwise", 1, seed=SEED)[0]
    assert tok(item.text).input_ids == item.input_ids


def _retrain_selected(config: pytest.Config) -> bool:
    expr = config.getoption("markexpr") or ""
    return ("retrain" in expr and "not retrain" not in expr) or bool(os.environ.get("RUN_RETRAIN"))


@pytest.mark.retrain
def test_full_judge_retrain_matches_shipped(tmp_path, request):
    """About 80 s on 2 idle cores (``make test-retrain``): the shipped weights come back bit for
    bit on the machine and torch build the metadata records (2.13.0+cpu, 2 threads)."""
    if not _retrain_selected(request.config):
        pytest.skip("retrain: select with -m retrain or RUN_RETRAIN=1")
    meta = write_judge(tmp_path, seed=0)
    shipped = load_metadata("judge")
    assert meta["weights_sha256"] == shipped["weights_sha256"]
    assert meta["quality"] == shipped["quality"]
