"""Tests of the model zoo: task ground truth, tokenizer/chat template, shipped-model quality and
deterministic training."""

from __future__ import annotations

import os
import random

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from transformers import AutoModelForSequenceClassification, AutoTokenizer  # noqa: E402

from reward_lens_tl.zoo import (  # noqa: E402
    FEATURES,
    ConversationTask,
    evaluate_zoo_model,
    load_metadata,
    load_model,
    load_task,
    train_zoo,
    zoo_path,
)
from reward_lens_tl.zoo.evaluate import (  # noqa: E402
    evaluate_multi,
    evaluate_policy,
    scalar_rewards,
)
from reward_lens_tl.zoo.vocab import (  # noqa: E402
    FILLER_WORDS,
    HARMFUL_WORDS,
    SYCOPHANTIC_PHRASE,
    TOPIC_OF,
    TOPICS,
)

TASK = ConversationTask()


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(zoo_path("scalar"))


@pytest.fixture(scope="module")
def scalar():
    return AutoModelForSequenceClassification.from_pretrained(
        zoo_path("scalar"), local_files_only=True
    ).eval()


@pytest.fixture(scope="module")
def scalar_report():
    report = evaluate_zoo_model(zoo_path("scalar"))
    assert report["kind"] == "scalar"
    return report


# ---- task ground truth --------------------------------------------------------------------------
def test_feature_positions_decode_to_planted_words(tokenizer):
    for ex in TASK.examples(200, seed=3):
        tokens = tokenizer.convert_ids_to_tokens(list(ex.input_ids))
        resp = range(ex.response_start, ex.response_start + len(ex.response))
        assert [tokens[i] for i in ex.feature_positions["length"]] == list(ex.response)
        assert list(ex.feature_positions["length"]) == list(resp)
        for i in ex.feature_positions["topic_match"]:
            assert TOPIC_OF[tokens[i]] == ex.topic
        for i in ex.feature_positions["harmful"]:
            assert tokens[i] in HARMFUL_WORDS
        syc = [tokens[i] for i in ex.feature_positions["sycophancy"]]
        assert syc in ([], list(SYCOPHANTIC_PHRASE))
        if syc:
            assert ex.feature_positions["sycophancy"][0] == ex.response_start
        # everything the rule scores is at a recorded position
        on_topic = [i for i in resp if TOPIC_OF.get(tokens[i]) == ex.topic]
        assert list(ex.feature_positions["topic_match"]) == on_topic
        contrib = TASK.rule.contributions(ex.topic, ex.response)
        assert ex.contributions == contrib
        assert ex.score == pytest.approx(sum(contrib.values()))
        assert tokens[ex.reward_position] == "<eos>"


@pytest.mark.parametrize("feature", FEATURES)
def test_contrast_pairs_differ_in_one_feature(feature, tokenizer):
    pairs = TASK.contrast_pairs(feature, 60, seed=5, filler_swaps=2)
    assert len(pairs) == 60
    weight = TASK.rule.weight(feature)
    for p in pairs:
        for f in FEATURES:
            diff = p.edited.contributions[f] - p.base.contributions[f]
            assert diff == (weight if f == feature else 0.0)
        tokens = tokenizer.convert_ids_to_tokens(list(p.edited.input_ids))
        changed = [tokens[i] for i in p.edited_positions]
        if feature == "topic_match":
            assert TOPIC_OF[changed[0]] == p.edited.topic
        elif feature == "harmful":
            assert changed[0] in HARMFUL_WORDS
        elif feature == "sycophancy":
            assert changed == list(SYCOPHANTIC_PHRASE)
        else:
            assert changed[0] in FILLER_WORDS
            assert len(p.edited.input_ids) == len(p.base.input_ids) + 1
        if feature != "length":  # swaps keep the sequences aligned
            pairs = zip(p.base.input_ids, p.edited.input_ids, strict=True)
            moved = {i for i, (a, b) in enumerate(pairs) if a != b}
            assert moved <= set(p.edited_positions) | set(p.neutral_positions)
            assert set(p.edited_positions) <= moved
            assert all(tokens[i] in FILLER_WORDS for i in p.neutral_positions)


def test_zoo_pairs_convert_to_the_package_contrast_pair():
    from reward_lens_tl.contrast import ContrastPair, as_contrast_pair, changed_positions

    for feature in ("harmful", "length"):
        p = TASK.contrast_pairs(feature, 5, seed=1, filler_swaps=1)[0]
        pair = as_contrast_pair(p)
        assert isinstance(pair, ContrastPair)
        assert pair.edited_positions == p.edited_positions
        assert pair.neutral_positions == p.neutral_positions
        assert pair.edited.ids == p.edited.input_ids and pair.base.ids == p.base.input_ids
        assert pair.rule_delta == p.rule_delta == p.edited.score - p.base.score
        diffed = changed_positions(p.base.input_ids, p.edited.input_ids)
        assert set(p.edited_positions) <= set(diffed)


def test_load_tokenizer_by_name_or_directory(tokenizer, tmp_path):
    from reward_lens_tl.errors import MissingFileError
    from reward_lens_tl.zoo import load_tokenizer

    ex = TASK.examples(1, seed=4)[0]
    for tok in (load_tokenizer("scalar"), load_tokenizer(zoo_path("multi"))):
        assert tok.apply_chat_template(ex.messages, return_dict=False) == list(ex.input_ids)
        assert tok.get_vocab() == tokenizer.get_vocab()
    with pytest.raises(MissingFileError, match="no tokenizer"):
        load_tokenizer(tmp_path)


def test_topic_words_are_distractors_elsewhere():
    seen_off_topic = set()
    for ex in TASK.examples(500, seed=11):
        seen_off_topic |= {w for w in ex.response if TOPIC_OF.get(w, ex.topic) != ex.topic}
    assert seen_off_topic == {w for words in TOPICS.values() for w in words}


def test_prompt_neutral_pairs_have_zero_rule_delta():
    for kind in ("harmful", "sycophancy"):
        for p in TASK.prompt_neutral_pairs(kind, 50, seed=2):
            assert p.rule_delta == 0.0
            assert len(p.edited.prompt) == len(p.base.prompt) + 1


# ---- tokenizer and chat template ----------------------------------------------------------------
def test_chat_template_ids(tokenizer):
    assert tokenizer.pad_token_id == 0 and tokenizer.pad_token_id != tokenizer.eos_token_id
    assert tokenizer.padding_side == "right"
    for ex in TASK.examples(50, seed=7):
        full = tokenizer.apply_chat_template(ex.messages, return_dict=False)
        assert full == list(ex.input_ids)
        assert full.count(tokenizer.bos_token_id) == 1 and full[0] == tokenizer.bos_token_id
        assert full[-1] == tokenizer.eos_token_id
        prompt = tokenizer.apply_chat_template(
            ex.messages[:1], add_generation_prompt=True, return_dict=False
        )
        assert full[: len(prompt)] == prompt
        assert prompt[-1] == tokenizer.convert_tokens_to_ids("<|assistant|>")
        text = tokenizer.apply_chat_template(ex.messages, tokenize=False)
        assert tokenizer(text).input_ids == full


def test_multi_turn_template(tokenizer):
    chat = [
        {"role": "user", "content": "how bread"},
        {"role": "assistant", "content": "soup"},
        {"role": "user", "content": "why oven"},
        {"role": "assistant", "content": "flour"},
    ]
    text = tokenizer.apply_chat_template(chat, tokenize=False)
    assert text == (
        "<bos><|user|> how bread <|end|> <|assistant|> soup <|end|> "
        "<|user|> why oven <|end|> <|assistant|> flour <|end|> <eos>"
    )
    with pytest.raises(Exception, match="roles"):
        tokenizer.apply_chat_template([{"role": "system", "content": "x"}], tokenize=False)


def test_load_task_matches_shipped_tokenizer():
    zt = load_task()
    ex = zt.task.sample_example(random.Random(0))
    assert zt.tokenizer.apply_chat_template(ex.messages, return_dict=False) == list(ex.input_ids)
    assert zt.rule == TASK.rule


# ---- shipped models -----------------------------------------------------------------------------
def test_hf_reward_is_read_at_eos(scalar, tokenizer):
    exs = TASK.examples(8, seed=1)
    batch = tokenizer.apply_chat_template(
        [ex.messages for ex in exs], padding=True, return_tensors="pt", return_dict=True
    )
    with torch.no_grad():
        batched = scalar(**batch).logits[:, 0]
        single = torch.stack(
            [scalar(input_ids=torch.tensor([ex.input_ids])).logits[0, 0] for ex in exs]
        )
    torch.testing.assert_close(batched, single, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(batched, scalar_rewards(scalar, exs), atol=1e-5, rtol=1e-5)


def test_scalar_agrees_with_rule(scalar_report):
    assert scalar_report["pairwise_agreement"] >= 0.95
    assert scalar_report["cross_prompt_agreement"] >= 0.95


@pytest.mark.parametrize("feature", FEATURES)
def test_scalar_planted_feature_edits(scalar_report, feature):
    assert scalar_report["edits"][feature]["planted_direction_rate"] >= 0.95


def test_scalar_insertion_edits(scalar_report):
    for stats in scalar_report["insertion_edits"].values():
        assert stats["planted_direction_rate"] >= 0.95


def test_scalar_prompt_words_are_neutral(scalar_report):
    for stats in scalar_report["prompt_neutrality"].values():
        assert stats["mean_abs_delta"] < 0.25 * scalar_report["smallest_effect"]


def test_multi_objective_model():
    report = evaluate_multi(load_model("multi"), TASK)
    for name, stats in report["objectives"].items():
        assert stats["pearson"] >= 0.95, name
        assert stats["pairwise_agreement"] >= 0.9, name
    assert report["gate"]["mode_accuracy"] >= 0.95
    assert report["score_pairwise_agreement"] >= 0.9
    assert report["objective_disagreement_rate"] > 0.1


def test_dpo_policy_implicit_reward():
    report = evaluate_policy(
        load_model("policy"), load_model("reference"), load_model("scalar"), TASK, n_samples=100
    )
    implicit = report["implicit_reward_agreement_with_scalar"]
    assert implicit >= 0.8
    assert implicit > report["reference_logp_agreement_with_scalar"] + 0.1
    samples = report["samples"]
    assert samples["policy"]["mean_scalar_reward"] > samples["reference"]["mean_scalar_reward"]


def test_evaluate_zoo_model_dispatch():
    assert evaluate_zoo_model(zoo_path("reference"))["kind"] == "reference"


def test_metadata_hashes_match_shipped_weights():
    from reward_lens_tl.zoo.artifacts import weights_sha256

    for name in ("scalar", "multi", "reference", "policy"):
        meta = load_metadata(name)
        assert meta["seed"] == 0 and not meta["fast"]
        assert weights_sha256(load_model(name)) == meta["weights_sha256"], name


# ---- deterministic training ---------------------------------------------------------------------
def _hashes(meta: dict) -> dict:
    return {name: m["weights_sha256"] for name, m in meta.items()}


def test_fast_training_is_deterministic(tmp_path):
    a = train_zoo(tmp_path / "a", seed=0, fast=True)
    b = train_zoo(tmp_path / "b", seed=0, fast=True)
    c = train_zoo(tmp_path / "c", seed=1, fast=True, which=("scalar",))
    assert set(a) == {"scalar", "multi", "reference", "policy", "judge", "prm"}
    assert _hashes(a) == _hashes(b)
    assert c["scalar"]["weights_sha256"] != a["scalar"]["weights_sha256"]
    reloaded = AutoModelForSequenceClassification.from_pretrained(
        tmp_path / "a" / "scalar", local_files_only=True
    )
    from reward_lens_tl.zoo.artifacts import weights_sha256

    assert weights_sha256(reloaded) == a["scalar"]["weights_sha256"]


def _retrain_selected(config: pytest.Config) -> bool:
    expr = config.getoption("markexpr") or ""
    return ("retrain" in expr and "not retrain" not in expr) or bool(os.environ.get("RUN_RETRAIN"))


@pytest.mark.retrain
def test_full_scalar_retrain_matches_shipped(tmp_path, request):
    """10-25 minutes on 2 cores: run with ``make test-retrain`` (``-m retrain``).

    Known to fail today, and not a CI gate: the full retrain gives weights hash
    ``1fbbbd9c...`` against the shipped ``0e519045...``, at commit 2131248 (before the
    consolidation of issue 22) as well as after, on the machine and torch version
    (2.13.0+cpu, 2 threads) the metadata records. The fast-mode determinism test above
    passes, so training is reproducible run to run; what drifted since the zoo was shipped
    is not yet found (see the issue-22 closing note)."""
    if not _retrain_selected(request.config):
        pytest.skip("retrain: select with -m retrain or RUN_RETRAIN=1")
    meta = train_zoo(tmp_path, seed=0, which=("scalar",))["scalar"]
    assert meta["weights_sha256"] == load_metadata("scalar")["weights_sha256"]
