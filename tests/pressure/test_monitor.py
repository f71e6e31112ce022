"""The training monitor without a trainer: the callback's events called by hand, its records
checked against plain HF recomputation, and its failure modes (none of which crash)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from transformers import TrainerControl, TrainerState

from reward_lens_tl.errors import (
    MonitorFailedError,
    PressureError,
    ProbeSetTooLongError,
    UnsupportedTrainerModelError,
)
from reward_lens_tl.pressure import RewardLensCallback
from reward_lens_tl.pressure.monitor import MonitorRecords
from reward_lens_tl.pressure.training import TextPair, zoo_feature_pairs, zoo_prompts
from reward_lens_tl.pressure.zoo import zoo_gold
from reward_lens_tl.zoo import load_model, load_tokenizer
from tests.figures import check_figure


def hf_reward(model, tokenizer, prompt: str, response: str) -> float:
    """Plain HF: the chat template's ids, one sequence, ``logits[0, 0]``."""
    msgs = [{"role": "user", "content": prompt}, {"role": "assistant", "content": response}]
    ids = tokenizer.apply_chat_template(msgs, tokenize=True, return_dict=True)["input_ids"]
    with torch.no_grad():
        return float(model(input_ids=torch.tensor([ids])).logits[0, 0])


def run_events(cb, model, tokenizer, steps=(0,)):
    state, control = TrainerState(), TrainerControl()
    state.global_step = steps[0]
    cb.on_train_begin(None, state, control, model=model, processing_class=tokenizer)
    for step in steps[1:]:
        state.global_step = step
        cb.on_step_end(None, state, control, model=model)
    return state, control


@pytest.fixture(scope="module")
def scalar_hf():
    return load_model("scalar"), load_tokenizer("scalar")


def test_reward_model_records_equal_plain_hf(scalar_hf):
    model, tok = scalar_hf
    groups = zoo_feature_pairs(4)
    cb = RewardLensCallback(None, groups, every=5)
    state, _ = run_events(cb, model, tok, steps=(0, 5, 7))
    assert cb.errors == [] and cb.resolved_mode == "reward_model"
    frame = cb.records.to_dataframe()
    assert frame.columns.tolist() == ["step", "series", "value"]
    assert sorted(set(frame["step"])) == [0, 5]  # step 7 is not a multiple of every
    wide = cb.records.pivot()
    for feature, pairs in groups.items():
        margins = [hf_reward(model, tok, p.prompt, p.chosen) - hf_reward(model, tok, p.prompt,
                   p.rejected) for p in pairs]  # fmt: skip
        assert wide.loc[0, f"margin/{feature}"] == pytest.approx(np.mean(margins), abs=1e-4)
        assert wide.loc[0, f"accuracy/{feature}"] == np.mean(np.array(margins) > 0)
        # exact attribution: the components sum to the margin (the head's bias cancels)
        parts = wide.loc[0, [c for c in wide.columns if c.startswith(f"attribution/{feature}/")]]
        assert parts.sum() == pytest.approx(wide.loc[0, f"margin/{feature}"], abs=1e-4)
        assert wide.loc[0, f"lens/{feature}/final"] == pytest.approx(
            wide.loc[0, f"margin/{feature}"], abs=1e-4
        )
    # the opener probe on the rejected sides, recomputed as text edits with plain HF
    rejected = [(p.prompt, p.rejected) for pairs in groups.values() for p in pairs]
    edits = [
        hf_reward(model, tok, p, "great question " + r) - hf_reward(model, tok, p, r)
        for p, r in rejected
    ]
    assert wide.loc[0, "probe/sycophantic_opener/delta"] == pytest.approx(np.mean(edits), 1e-4)
    assert wide.loc[0, "probe/sycophantic_opener/flagged"] == 1.0
    # the trainer's log history holds every record
    logged = [e for e in state.log_history if "reward_lens/margin/harmful" in e]
    assert [e["step"] for e in logged] == [0, 5]


def test_records_object_and_onsets():
    rows = [(s, "x", float(s > 40)) + () for s in range(0, 100, 5)]
    rows += [(s, "gold", 5.0 - abs(s - 50) / 10) for s in range(0, 100, 5)]
    records = MonitorRecords.from_rows(rows)
    assert records.series_names == ["x", "gold"]
    assert records.series("x").index.tolist() == list(range(0, 100, 5))
    table = records.onsets(["x"], gold="gold", warmup=5, min_sigma=0.05)
    assert table.loc[0, "alarm_step"] == 45 and table.loc[0, "lead_time"] == 5
    with pytest.raises(PressureError, match="no series"):
        records.series("y")
    assert records.top_k(1)[0][0] in ("x", "gold")
    fig = check_figure(records.plot(), static=records.plot(backend="matplotlib"))
    assert [t.name for t in fig.data] == ["x", "gold"]
    np.testing.assert_allclose(fig.data[0].y, records.series("x").to_numpy())
    sparse = MonitorRecords.from_rows(rows + [(s, "delta", s / 10) for s in range(0, 100, 20)])
    line = sparse.plot(names=["delta"]).data[0]  # a series recorded at fewer steps: no gaps
    assert list(line.x) == list(range(0, 100, 20)) and np.isfinite(line.y).all()
    with pytest.raises(PressureError, match="no series"):
        records.plot(names=["y"])


def test_monitor_leaves_the_random_state_alone(scalar_hf):
    model, tok = scalar_hf
    torch.manual_seed(123)
    before = torch.get_rng_state()
    cb = RewardLensCallback("scalar", zoo_feature_pairs(2), every=1, prompts=zoo_prompts(2),
                            reference="initial", samples_per_prompt=2)  # fmt: skip
    run_events(cb, load_model("policy"), load_tokenizer("policy"), steps=(0, 1))
    assert cb.errors == []
    assert torch.equal(torch.get_rng_state(), before)


def test_policy_records(scalar_hf):
    policy, tok = load_model("policy"), load_tokenizer("policy")
    prompts = zoo_prompts(4)
    cb = RewardLensCallback("scalar", zoo_feature_pairs(2), every=1, prompts=prompts,
                            gold=zoo_gold, reference="initial", samples_per_prompt=3)  # fmt: skip
    with torch.no_grad():
        run_events(cb, policy, tok, steps=(0,))
        for p in policy.parameters():
            p.add_(0.02 * torch.randn_like(p))
        state = TrainerState()
        state.global_step = 1
        cb.on_step_end(None, state, TrainerControl(), model=policy)
    assert cb.errors == [] and cb.resolved_mode == "policy" and not cb.retokenizes
    wide = cb.records.pivot()
    assert {"proxy", "gold", "feature/sycophancy", "exploit/sycophantic_opener"} <= set(wide)
    assert wide.loc[0, "implicit/harmful"] == 0.0  # the reference is the policy at step 0
    assert wide.loc[1, "implicit/harmful"] != 0.0
    assert cb.hack_components["sycophantic_opener"] in {c.split("/")[-1] for c in wide}
    # proxy: the scalar reward model's scores of the same samples (same seed), plain HF
    from reward_lens_tl.pressure import sample_responses

    samples = sample_responses(policy, tok, prompts, 3, max_new_tokens=16, seed=0)
    model, rm_tok = scalar_hf
    pairs = [(p, s.text) for p, row in zip(prompts, samples, strict=True) for s in row]
    want = np.mean([hf_reward(model, rm_tok, p, text) for p, text in pairs])
    assert wide.loc[1, "proxy"] == pytest.approx(want, abs=1e-4)
    gold = zoo_gold([p for p, row in zip(prompts, samples, strict=True) for _ in row],
                    [s.text for row in samples for s in row])  # fmt: skip
    assert wide.loc[1, "gold"] == pytest.approx(np.mean(gold))


def test_policy_with_a_reward_model_of_another_tokenizer_retokenizes(caplog):
    from reward_lens_tl.judges import HookedJudge
    from reward_lens_tl.zoo import zoo_path
    from reward_lens_tl.zoo.judge import JUDGE_POINTWISE_TEMPLATE

    judge = HookedJudge.from_pretrained(zoo_path("judge"), template=JUDGE_POINTWISE_TEMPLATE)
    cb = RewardLensCallback(judge, zoo_feature_pairs(2), every=1, prompts=zoo_prompts(2),
                            samples_per_prompt=2)  # fmt: skip
    with caplog.at_level(logging.INFO, logger="reward_lens_tl"):
        run_events(cb, load_model("policy"), load_tokenizer("policy"))
    assert cb.errors == [] and cb.retokenizes
    assert "re-encoded" in caplog.text
    assert "proxy" in cb.records.pivot()


def test_probe_example_too_long_is_logged_and_training_goes_on(scalar_hf, caplog):
    model, tok = scalar_hf
    long = TextPair("how bake bread", " ".join(["soup"] * 80), "soup")
    cb = RewardLensCallback(None, [long], every=1)
    with caplog.at_level(logging.WARNING, logger="reward_lens_tl"):
        _, control = run_events(cb, model, tok, steps=(0, 1, 2))
    assert not cb.enabled and not control.should_training_stop
    assert len(cb.errors) == 1 and "ProbeSetTooLongError" in cb.errors[0][1]
    assert "turned off" in caplog.text and len(cb.records.to_dataframe()) == 0
    stopping = RewardLensCallback(None, [long], every=1, on_error="stop")
    _, control = run_events(stopping, model, tok)
    assert control.should_training_stop
    raising = RewardLensCallback(None, [long], every=1, on_error="raise")
    with pytest.raises(MonitorFailedError) as info:
        run_events(raising, model, tok)
    assert isinstance(info.value.__cause__, ProbeSetTooLongError)


def test_unsupported_trainer_models_are_logged(caplog):
    from transformers import BertConfig, BertForSequenceClassification

    bert = BertForSequenceClassification(
        BertConfig(vocab_size=122, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                   intermediate_size=32, num_labels=1)
    )  # fmt: skip
    cb = RewardLensCallback(None, [("how bake bread", "soup")], every=1)
    run_events(cb, bert, load_tokenizer("scalar"), steps=(0, 1))
    assert not cb.enabled and "UnsupportedTrainerModelError" in cb.errors[0][1]
    # a sequence classifier is not a policy: no next-token logits
    as_policy = RewardLensCallback("scalar", [("how bake bread", "soup")], every=1)
    run_events(as_policy, load_model("scalar"), load_tokenizer("scalar"))
    assert not as_policy.enabled and "UnsupportedTrainerModelError" in as_policy.errors[0][1]
    with pytest.raises(MonitorFailedError) as info:
        run_events(RewardLensCallback(None, [("a b", "c")], on_error="raise"), bert,
                   load_tokenizer("scalar"))  # fmt: skip
    assert isinstance(info.value.__cause__, UnsupportedTrainerModelError)


@pytest.mark.parametrize(
    "kwargs",
    [dict(every=0), dict(every=2.5), dict(on_error="ignore"), dict(mode="rm"),
     dict(probe_examples=None), dict(probe_examples={"a": []})],
)  # fmt: skip
def test_bad_callback_arguments_are_typed_errors(kwargs):
    args = dict(reward_model=None, probe_examples=[("how bake bread", "soup")])
    args.update(kwargs)
    with pytest.raises(PressureError):
        RewardLensCallback(**args)


def test_measurement_failure_mid_run_skips_one_record(scalar_hf, caplog):
    model, tok = scalar_hf
    cb = RewardLensCallback(None, zoo_feature_pairs(2), every=1)
    state, control = run_events(cb, model, tok)

    def broken(_model):
        raise RuntimeError("boom")

    cb._measure = broken
    state.global_step = 1
    with caplog.at_level(logging.WARNING, logger="reward_lens_tl"):
        cb.on_step_end(None, state, control, model=model)
    assert cb.enabled and cb.errors == [(1, "RuntimeError: boom")]
    assert "skipped this record" in caplog.text


def test_records_follow_the_weights_as_they_change():
    """The callback converts once and re-reads the weights in place at every record: after the
    HF model's weights change, the record equals plain HF at the new weights."""
    model, tok = load_model("scalar"), load_tokenizer("scalar")
    groups = {"harmful": zoo_feature_pairs(4)["harmful"]}
    cb = RewardLensCallback(None, groups, every=1, probes=None)
    state, control = run_events(cb, model, tok)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    state.global_step = 1
    cb.on_step_end(None, state, control, model=model)
    wide = cb.records.pivot()
    margins = [
        hf_reward(model, tok, p.prompt, p.chosen) - hf_reward(model, tok, p.prompt, p.rejected)
        for p in groups["harmful"]
    ]
    assert wide.loc[1, "margin/harmful"] == pytest.approx(np.mean(margins), abs=1e-4)
    assert abs(wide.loc[1, "margin/harmful"] - wide.loc[0, "margin/harmful"]) > 1e-3


def test_reload_weights_refuses_another_shape(zoo_scalar):
    from transformers import LlamaForSequenceClassification

    from reward_lens_tl.errors import ConversionMismatchError
    from reward_lens_tl.loading import reload_weights
    from reward_lens_tl.zoo.train import scalar_config

    cfg = scalar_config()
    cfg.num_hidden_layers = 2
    with pytest.raises(ConversionMismatchError, match="n_layers"):
        reload_weights(zoo_scalar.__class__.from_pretrained(load_model("scalar")),
                       LlamaForSequenceClassification(cfg))  # fmt: skip


@pytest.mark.parametrize("family", ["llama", "mistral", "qwen2", "gemma2", "qwen3"])
def test_reward_model_monitor_on_every_family(family):
    """The reward-model monitor converts each supported family being trained; its margins
    equal the plain HF model's, and the attribution sums to them."""
    from reward_lens_tl.probes import Probe
    from reward_lens_tl.testing import perturb_, tiny_reward_model, tiny_tokenizer

    model, tok = tiny_reward_model(family), tiny_tokenizer()
    pairs = [TextPair(f"w{6 + i} w9", f"w{20 + i} w21 w22", f"w{30 + i}") for i in range(4)]
    cb = RewardLensCallback(
        None, {"g": pairs}, every=1, probes=[Probe.insert("w40", "response_end", "x")]
    )
    state, control = run_events(cb, model, tok)
    perturb_(model, seed=1)  # the weights change between records
    state.global_step = 1
    cb.on_step_end(None, state, control, model=model)
    assert cb.errors == []
    wide = cb.records.pivot()
    margins = [hf_reward(model, tok, p.prompt, p.chosen) - hf_reward(model, tok, p.prompt,
               p.rejected) for p in pairs]  # fmt: skip
    assert wide.loc[1, "margin/g"] == pytest.approx(np.mean(margins), abs=1e-4)
    parts = wide.loc[1, [c for c in wide.columns if c.startswith("attribution/g/")]]
    assert parts.sum() == pytest.approx(wide.loc[1, "margin/g"], abs=1e-4)


def test_reward_model_monitor_on_the_multi_objective_model():
    """A gated multi-objective (ArmoRM-style) model being trained: the monitor reads its gated
    score, which the zoo's multi model computes for these pairs."""
    from reward_lens_tl.zoo import load_model as load

    model, tok = load("multi"), load_tokenizer("multi")
    pairs = zoo_feature_pairs(4)["harmful"]
    cb = RewardLensCallback(None, {"harmful": pairs}, every=1)
    run_events(cb, model, tok)
    assert cb.errors == []
    want = []
    for p in pairs:
        scores = []
        for response in (p.chosen, p.rejected):
            msgs = [{"role": "user", "content": p.prompt},
                    {"role": "assistant", "content": response}]  # fmt: skip
            ids = tok.apply_chat_template(msgs, tokenize=True, return_dict=True)["input_ids"]
            with torch.no_grad():
                scores.append(float(model(input_ids=torch.tensor([ids])).score[0]))
        want.append(scores[0] - scores[1])
    assert cb.records.pivot().loc[0, "margin/harmful"] == pytest.approx(np.mean(want), abs=1e-4)


@pytest.mark.parametrize("family", ["llama", "qwen2", "gemma2", "gpt2"])
def test_policy_monitor_on_other_causal_lm_families(family):
    """Policies of other families (random tiny causal LMs with another tokenizer than the
    reward model's) are sampled, their text re-encoded for the zoo reward model."""
    from reward_lens_tl.testing import tiny_causal_lm

    policy, tok = tiny_causal_lm(family)
    cb = RewardLensCallback("scalar", [("w6 w7", "w8")], every=1, prompts=["w6 w7", "w9"],
                            samples_per_prompt=2, max_new_tokens=4, probes=None,
                            reference="initial")  # fmt: skip
    run_events(cb, policy, tok)
    assert cb.errors == [] and cb.retokenizes
    wide = cb.records.pivot()
    assert np.isfinite(wide.loc[0, "proxy"]) and wide.loc[0, "implicit/all"] == 0.0
