"""The pressure package checks what it is given (issue on untrusted inputs, item 4).

Counts are true integers in a documented range (a ``bool`` is not a count, ``n_max × prompts``
is bounded by ``MAX_SAMPLES``); reward functions give exactly one finite number per text;
feature functions the same names with finite values; a tokenizer with more token ids than the
policy embeds is refused up front, by ``best_of_n`` and by the callback's policy mode (through
its error policy, never as silent records). Every refusal is a ``PressureError`` whose message
says what was wrong. All tests use the tiny random models (milliseconds), and the bad-count
tests fail before any sampling (``sample_responses`` is replaced by one that fails the test).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from transformers import TrainerControl, TrainerState

from reward_lens_tl.errors import MonitorFailedError, PressureError, RewardLensError
from reward_lens_tl.pressure import (
    RewardLensCallback,
    best_of_n,
    best_of_n_kl_exact,
    kl_best_of_n,
    ladders,
    sample_responses,
    score_texts,
)
from reward_lens_tl.pressure.validate import MAX_SAMPLES
from reward_lens_tl.testing import tiny_causal_lm, tiny_tokenizer


def lengths(prompts, responses):
    """A reward function of the lists: one finite number per response."""
    return [float(len(r)) for r in responses]


@pytest.fixture(scope="module")
def tiny_policy():
    return tiny_causal_lm("llama")  # (model, tokenizer): 97 token ids both


@pytest.fixture
def no_sampling(monkeypatch):
    """``best_of_n`` must refuse bad counts before it samples anything."""

    def fail(*args, **kwargs):
        raise AssertionError("best_of_n sampled despite a bad input")

    monkeypatch.setattr(ladders, "sample_responses", fail)


def ladder_args(policy, tokenizer, **kwargs):
    args = dict(policy=policy, reward_model=lengths, prompts=["w6 w7", "w8"], n_max=2,
                tokenizer=tokenizer, features=None, max_new_tokens=2)  # fmt: skip
    args.update(kwargs)
    return args


def run_events(cb, model, tokenizer):
    state, control = TrainerState(), TrainerControl()
    cb.on_train_begin(None, state, control, model=model, processing_class=tokenizer)
    return state, control


# ---- counts ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (dict(n_max=True), "n_max must be an integer, got True (a bool, which would count as 1)"),
        (dict(n_max=np.True_), "n_max must be an integer, got True (a bool"),
        (dict(n_max=2.0), "n_max must be an integer, got 2.0 (a float); pass an int, e.g. n_max=2"),
        (dict(max_new_tokens=True), "max_new_tokens must be an integer, got True (a bool"),
        (dict(max_new_tokens=100_000), "max_new_tokens=100000 is above the limit of 8,192"),
        (dict(seed=0.5), "seed must be an integer, got 0.5"),
        (dict(n_boot=True), "n_boot must be an integer, got True (a bool"),
        (dict(temperature=float("nan")), "temperature must be a finite number > 0, got nan"),
        (dict(temperature=True), "temperature must be a number > 0, got True"),
    ],
)  # fmt: skip
def test_best_of_n_counts_are_true_integers_in_range(tiny_policy, no_sampling, kwargs, fragment):
    with pytest.raises(PressureError) as info:
        best_of_n(**ladder_args(*tiny_policy, **kwargs))
    assert fragment in str(info.value)


def test_best_of_n_refuses_more_samples_than_one_call_draws(tiny_policy, no_sampling):
    with pytest.raises(PressureError) as info:
        best_of_n(**ladder_args(*tiny_policy, n_max=10_000_000))
    message = str(info.value)
    assert "n_max=10000000 for 2 prompts would draw 20,000,000 samples" in message
    assert f"above the limit of {MAX_SAMPLES:,} per call" in message
    assert "split the prompts over several calls" in message
    # the bound is on n_max × prompts, not n_max alone
    with pytest.raises(PressureError, match="would draw 65,540 samples"):
        best_of_n(**ladder_args(*tiny_policy, n_max=16_385, prompts=["w6"] * 4))


def test_sample_responses_counts_are_true_integers(tiny_policy):
    policy, tokenizer = tiny_policy
    with pytest.raises(PressureError, match=r"n must be an integer, got True \(a bool"):
        sample_responses(policy, tokenizer, ["w6 w7"], n=True)
    with pytest.raises(PressureError, match=r"max_new_tokens must be an integer, got 2\.0"):
        sample_responses(policy, tokenizer, ["w6 w7"], n=2, max_new_tokens=2.0)
    with pytest.raises(PressureError, match="would draw 20,000,000 samples"):
        sample_responses(policy, tokenizer, ["w6 w7"], n=20_000_000)


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (dict(every=True), "every must be an integer, got True (a bool, which would count as 1)"),
        (dict(samples_per_prompt=True), "samples_per_prompt must be an integer, got True"),
        (dict(samples_per_prompt=2.5), "samples_per_prompt must be an integer, got 2.5"),
        (dict(samples_per_prompt=10_000_000), "samples_per_prompt=10000000 is above the limit"),
        (dict(max_new_tokens=True), "max_new_tokens must be an integer, got True"),
        (dict(max_new_tokens=0), "max_new_tokens must be >= 1, got 0"),
        (dict(seed=1.5), "seed must be an integer, got 1.5"),
        (dict(flag_boot=False), "flag_boot must be an integer, got False"),
        (dict(max_probe_examples=True), "max_probe_examples must be an integer, got True"),
        (dict(beta=float("inf")), "beta must be a finite number > 0, got inf"),
        (dict(prompts="w6 w7"), "prompts must be a non-empty list of prompts"),
    ],
)  # fmt: skip
def test_callback_counts_are_true_integers_in_range(kwargs, fragment):
    with pytest.raises(PressureError) as info:
        RewardLensCallback("scalar", [("w6 w7", "w8")], **kwargs)
    assert fragment in str(info.value)


def test_callback_policy_mode_refuses_more_samples_than_one_record_draws(tiny_policy, monkeypatch):
    from reward_lens_tl.pressure import callback

    def fail(*args, **kwargs):
        raise AssertionError("the callback sampled despite a bad input")

    monkeypatch.setattr(callback, "measure_policy", fail)
    policy, tokenizer = tiny_policy
    prompts = [f"w{6 + i % 90}" for i in range(20_000)]
    cb = RewardLensCallback("scalar", [("w6 w7", "w8")], prompts=prompts, samples_per_prompt=4,
                            probes=None, on_error="raise")  # fmt: skip
    with pytest.raises(MonitorFailedError, match="would draw 80,000 samples") as info:
        run_events(cb, policy, tokenizer)
    assert isinstance(info.value.__cause__, PressureError)


# ---- reward functions --------------------------------------------------------------------------
def test_a_reward_function_giving_one_value_for_three_texts_is_refused():
    def one_value(prompts, responses):
        return [1.0]

    with pytest.raises(PressureError) as info:
        score_texts(one_value, ["p"] * 3, ["a", "b", "c"])
    message = str(info.value)
    assert "reward function" in message and "one_value" in message
    assert "gave 1 reward for 3 texts" in message and "returned [1.0] (a list)" in message


def test_a_reward_function_giving_another_count_is_refused():
    def two_values(prompts, responses):
        return [1.0, 2.0]

    with pytest.raises(PressureError, match="two_values gave 2 rewards for 3 texts"):
        score_texts(two_values, ["p"] * 3, ["a", "b", "c"])
    with pytest.raises(PressureError, match=r"returned 'good' \(a str\), not a number"):
        score_texts(lambda prompt, response: "good", ["p"] * 2, ["a", "b"])


def test_a_reward_function_giving_nan_or_inf_is_refused(tiny_policy):
    def inf_at_one(prompts, responses):
        return [0.0, math.inf, 2.0]

    with pytest.raises(PressureError) as info:
        score_texts(inf_at_one, ["p"] * 3, ["a", "b", "c"])
    message = str(info.value)
    assert "reward function" in message and "inf_at_one" in message
    assert "gave inf for text 1 of 3 (prompt 'p', response 'b')" in message
    nan_reward = lambda prompts, responses: [float("nan")] * len(responses)  # noqa: E731
    with pytest.raises(PressureError, match="gave nan for text 0 of 4"):
        best_of_n(**ladder_args(*tiny_policy, reward_model=nan_reward))
    with pytest.raises(PressureError, match="gave nan for text 0 of 4"):
        best_of_n(**ladder_args(*tiny_policy, gold=nan_reward))  # gold is checked the same


def test_a_failing_reward_function_is_a_typed_error_with_its_cause():
    def broken(prompt, response):
        return {"a": 1}[response]  # KeyError for "b"

    with pytest.raises(PressureError, match="failed on text 1 of 2") as info:
        score_texts(broken, ["p"] * 2, ["a", "b"])
    assert isinstance(info.value.__cause__, KeyError)


def test_feature_functions_are_checked(tiny_policy):
    def nan_feature(prompt, response):
        return {"length": float("nan")}

    with pytest.raises(PressureError, match="'length' = nan"):
        best_of_n(**ladder_args(*tiny_policy, features=nan_feature))
    calls = iter(range(100))

    def shifting_names(prompt, response):
        return {"a": 1.0} if next(calls) == 0 else {"b": 1.0}

    with pytest.raises(PressureError, match="the same names for every text"):
        best_of_n(**ladder_args(*tiny_policy, features=shifting_names))


def test_kl_helpers_refuse_bools_and_non_finite_input():
    with pytest.raises(PressureError, match="n must be an integer"):
        kl_best_of_n(True)
    with pytest.raises(PressureError, match="n must be an integer"):
        kl_best_of_n(float("nan"))
    with pytest.raises(PressureError, match="finite reward"):
        best_of_n_kl_exact([0.5, 0.5], [0.0, float("nan")], 2)


# ---- tokenizer against the policy's vocabulary -------------------------------------------------
def test_best_of_n_refuses_a_tokenizer_larger_than_the_policy_vocabulary(tiny_policy):
    policy, _ = tiny_policy
    big = tiny_tokenizer(200)  # ids up to 199; the policy embeds 97
    for prompts in (["w150 w7"], ["w6 w7"]):  # an id past the embeddings, and none (silent)
        with pytest.raises(PressureError) as info:
            best_of_n(**ladder_args(policy, big, prompts=prompts))
        message = str(info.value)
        assert "the tokenizer has 200 token ids but the LlamaForCausalLM policy embeds only 97" in (
            message
        )
        assert "resize_token_embeddings" in message and "tokenizer=" in message
    with pytest.raises(PressureError, match="embeds only 97"):
        sample_responses(policy, big, ["w6 w7"], n=1)


def test_best_of_n_refuses_a_tokenizer_larger_than_a_transformer_lens_policy():
    from reward_lens_tl.implicit import load_causal_lm

    hf, tok = tiny_causal_lm("llama")
    tl = load_causal_lm(hf, tok)
    assert tl.cfg.d_vocab == 97
    with pytest.raises(PressureError, match="HookedSAETransformer policy embeds only 97"):
        best_of_n(**ladder_args(tl, tiny_tokenizer(200)))


def test_callback_policy_mode_refuses_a_tokenizer_larger_than_the_policy_vocabulary(tiny_policy):
    policy, _ = tiny_policy
    big = tiny_tokenizer(200)
    kwargs = dict(every=1, prompts=["w6 w7"], samples_per_prompt=2, max_new_tokens=2,
                  probes=None)  # fmt: skip
    cb = RewardLensCallback("scalar", [("w6 w7", "w8")], **kwargs)
    _, control = run_events(cb, policy, big)
    assert not cb.enabled and len(cb.records.to_dataframe()) == 0  # no silent records
    assert len(cb.errors) == 1 and cb.errors[0][1].startswith("PressureError: ")
    assert "200 token ids" in cb.errors[0][1] and "embeds only 97" in cb.errors[0][1]
    stopping = RewardLensCallback("scalar", [("w6 w7", "w8")], on_error="stop", **kwargs)
    _, control = run_events(stopping, policy, big)
    assert control.should_training_stop
    raising = RewardLensCallback("scalar", [("w6 w7", "w8")], on_error="raise", **kwargs)
    with pytest.raises(MonitorFailedError, match="embeds only 97") as info:
        run_events(raising, policy, big)
    assert isinstance(info.value.__cause__, PressureError)
    assert isinstance(info.value, RewardLensError)


def test_the_policy_own_tokenizer_still_works(tiny_policy):
    """The checks refuse nothing valid: the same calls with the policy's own tokenizer run."""
    policy, tokenizer = tiny_policy
    result = best_of_n(**ladder_args(policy, tokenizer, n_max=np.int64(2)))
    assert result.proxy_samples.shape == (2, 2) and torch.isfinite(result.proxy_samples).all()
    verdicts = score_texts(lambda p, r: r == "a", ["p"] * 2, ["a", "b"])  # a bool is 1.0 / 0.0
    assert verdicts.tolist() == [1.0, 0.0]
