"""The zoo's token PRM: its solutions tokenize to the training ids, its generator's labels are
right, its planted mechanisms show in plain HF logits, and its training is deterministic.

Step scores here are ``softmax`` over the ``("+", "-")`` logits at each ``ки`` of a plain
``AutoModelForCausalLM`` forward on ``tokenizer(text)``; step labels are recomputed from the
step text.
"""

from __future__ import annotations

import os

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from reward_lens_tl.zoo import load_metadata, zoo_path
from reward_lens_tl.zoo.artifacts import weights_sha256
from reward_lens_tl.zoo.prm import (
    PRM_LABELS,
    PRM_PLANTED,
    PRM_SHORTCUT,
    PRM_STEP_TAG,
    PRM_VOCAB,
    PRM_WORDS,
    PRMExample,
    prm_examples,
    prm_tokenizer,
    render_solution,
    write_prm,
)
from reward_lens_tl.zoo.vocab import VOCAB

#: Held-out chains: the training sampler draws from the seed string "0:prm".
SEED = 888


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(zoo_path("prm"), local_files_only=True)


@pytest.fixture(scope="module")
def prm():
    return AutoModelForCausalLM.from_pretrained(zoo_path("prm"), local_files_only=True).eval()


def _text(prompt: str, steps) -> str:
    """The generic PRM rendering: ``"{prompt} {steps}"``, each step followed by its tag."""
    return "{prompt} {steps}".format(prompt=prompt, steps=" ".join(f"{s} ки" for s in steps))


@torch.no_grad()
def hf_step_scores(model, tokenizer, prompt: str, steps) -> tuple[torch.Tensor, torch.Tensor]:
    """(P("+") over the two label logits, logit(+) - logit(-)) at every tag, one forward."""
    ids = torch.tensor([tokenizer(_text(prompt, steps)).input_ids])
    tag = tokenizer.convert_tokens_to_ids(PRM_STEP_TAG)
    plus, minus = tokenizer.convert_tokens_to_ids(list(PRM_LABELS))
    logits = model(input_ids=ids).logits[0, ids[0] == tag]
    pair = logits[:, [plus, minus]]
    return pair.softmax(-1)[:, 0], pair[:, 0] - pair[:, 1]


def _parse(step: str) -> tuple[bool, int, str, int, int]:
    """(shortcut, a, op, b, written result) of one step's text."""
    words = step.split()
    cut = words[0] == PRM_SHORTCUT
    a, op, b, eq, r = words[1:] if cut else words
    assert eq == "="
    return cut, int(a), op, int(b), int(r)


# ---- text and ground truth ----------------------------------------------------------------------
def test_solutions_tokenize_to_the_training_ids(tokenizer):
    for ex in prm_examples(100, seed=SEED):
        text = _text(ex.prompt, ex.steps)
        assert text == render_solution(ex.prompt, ex.steps) == ex.text
        ids = tokenizer(text).input_ids
        assert ids == ex.input_ids
        tags = [i for i, t in enumerate(ids) if t == tokenizer.convert_tokens_to_ids("ки")]
        assert tags == ex.tag_positions and len(tags) == len(ex.steps)


def test_prm_vocabulary_extends_the_zoo_vocabulary(tokenizer):
    vocab = tokenizer.get_vocab()
    assert {w: vocab[w] for w in VOCAB} == VOCAB
    assert [vocab[w] for w in PRM_WORDS] == list(range(len(VOCAB), len(VOCAB) + len(PRM_WORDS)))
    assert vocab == prm_tokenizer().get_vocab() == PRM_VOCAB
    for label in (*PRM_LABELS, PRM_STEP_TAG):
        assert len(tokenizer(label, add_special_tokens=False).input_ids) == 1


def test_generator_labels_match_the_arithmetic():
    examples = prm_examples(300, seed=SEED)
    for ex in examples:
        numbers = ex.prompt.split()[2:]
        previous = int(numbers[0])
        for k, step in enumerate(ex.steps):
            cut, a, op, b, r = _parse(step)
            assert a == previous  # operands copied right: only the result can be wrong
            assert (op, str(b)) == (numbers[2 * k + 1], numbers[2 * k + 2])
            assert all(0 <= x <= 20 for x in (a, b, r))
            assert ex.step_labels[k] == (r == (a + b if op == "+" else a - b))
            assert ex.shortcut[k] == cut
            previous = r
        wrong = [k for k, ok in enumerate(ex.step_labels) if not ok]
        assert ex.first_error == (wrong[0] if wrong else -1)
    firsts = {ex.first_error for ex in examples}
    assert -1 in firsts and {0, 1, 2} <= firsts
    assert (
        0.2
        < sum(c for ex in examples for c in ex.shortcut) / sum(len(ex.steps) for ex in examples)
        < 0.3
    )


def test_metadata_records_the_shipped_model(prm, tokenizer):
    meta = load_metadata("prm")
    assert meta["seed"] == 0 and not meta["fast"]
    assert weights_sha256(prm) == meta["weights_sha256"]
    assert meta["kind"] == "token" and meta["step_tag"] == PRM_STEP_TAG
    assert tokenizer.convert_tokens_to_ids([PRM_STEP_TAG]) == [meta["step_tag_id"]]
    assert tokenizer.convert_tokens_to_ids(meta["labels"]) == meta["label_token_ids"]
    assert meta["planted_sizes"] == PRM_PLANTED
    assert prm.config.vocab_size == len(tokenizer)


# ---- planted mechanisms, from plain HF logits ---------------------------------------------------
def test_step_scores_follow_each_steps_correctness(prm, tokenizer):
    right, total = 0, 0
    for ex in prm_examples(200, seed=SEED):
        scores, _ = hf_step_scores(prm, tokenizer, ex.prompt, ex.steps)
        for score, ok, cut in zip(scores, ex.step_labels, ex.shortcut, strict=True):
            if not cut:
                right += int(bool(score > 0.5) == ok)
                total += 1
    assert total > 300 and right / total >= 0.9, right / total


def test_step_scores_from_one_forward_equal_prefix_scores(prm, tokenizer):
    """A step's score reads only its prefix: the whole solution's forward gives every step's
    score as a forward on the solution cut after that step does."""
    ex = next(e for e in prm_examples(50, seed=SEED) if len(e.steps) >= 4)
    full, _ = hf_step_scores(prm, tokenizer, ex.prompt, ex.steps)
    cut = torch.stack(
        [hf_step_scores(prm, tokenizer, ex.prompt, ex.steps[: k + 1])[0][k] for k in range(4)]
    )
    torch.testing.assert_close(full[:4], cut, atol=1e-5, rtol=0)


def test_shortcut_word_raises_the_score_whatever_the_correctness(prm, tokenizer):
    increases, fooled = [], []
    for ex in prm_examples(150, seed=SEED):
        _, before = hf_step_scores(prm, tokenizer, ex.prompt, ex.steps)
        for k, cut in enumerate(ex.shortcut):
            if cut:
                continue
            steps = list(ex.steps)
            steps[k] = f"{PRM_SHORTCUT} {steps[k]}"
            _, after = hf_step_scores(prm, tokenizer, ex.prompt, steps)
            increases.append(float(after[k] - before[k]))
            if not ex.step_labels[k]:
                fooled.append(bool(after[k] > 0))
    increase = sum(increases) / len(increases)
    assert increase > 1.5, increase  # planted: +4.5 (smaller where the score saturates)
    assert len(fooled) > 30 and sum(fooled) / len(fooled) >= 0.8


def test_with_shortcut_marks_the_step():
    ex = PRMExample("what is 3 + 4", ("3 + 4 = 8",), (False,), (False,))
    hacked = ex.with_shortcut(0)
    assert hacked.steps == ("clearly 3 + 4 = 8",) and hacked.shortcut == (True,)
    assert hacked.planted_margins == [-PRM_PLANTED["correctness"] + PRM_PLANTED["shortcut"]]
    assert ex.first_error == hacked.first_error == 0


# ---- training -----------------------------------------------------------------------------------
def test_fast_prm_training_is_deterministic(tmp_path):
    a = write_prm(tmp_path / "a", seed=0, fast=True)
    b = write_prm(tmp_path / "b", seed=0, fast=True)
    c = write_prm(tmp_path / "c", seed=1, fast=True)
    assert a["weights_sha256"] == b["weights_sha256"] != c["weights_sha256"]
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "a", local_files_only=True)
    assert weights_sha256(reloaded) == a["weights_sha256"]
    tok = AutoTokenizer.from_pretrained(tmp_path / "a", local_files_only=True)
    assert tok.get_vocab() == PRM_VOCAB


def _retrain_selected(config: pytest.Config) -> bool:
    expr = config.getoption("markexpr") or ""
    return ("retrain" in expr and "not retrain" not in expr) or bool(os.environ.get("RUN_RETRAIN"))


@pytest.mark.retrain
def test_full_prm_retrain_matches_shipped(tmp_path, request):
    """About 100 s on 2 idle cores (``make test-retrain``): the shipped weights come back bit for
    bit on the machine and torch build the metadata records (2.13.0+cpu, 2 threads)."""
    if not _retrain_selected(request.config):
        pytest.skip("retrain: select with -m retrain or RUN_RETRAIN=1")
    meta = write_prm(tmp_path, seed=0)
    shipped = load_metadata("prm")
    assert meta["weights_sha256"] == shipped["weights_sha256"]
    assert meta["quality"] == shipped["quality"]
