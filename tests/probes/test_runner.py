"""`reward_lens_tl.probes.runner`: `run_probes` and `apply_probe` on user-defined probes, the
deltas against the rewards of the edited sequences, and skips and refusals with their reasons."""

import math
import random
import re

import pytest
import torch

from reward_lens_tl.errors import ProbeFunctionError, RewardLensError, SequenceTooLongError
from reward_lens_tl.probes import (
    Probe,
    ProbeError,
    ProbeNotApplicableError,
    ProbeSkip,
    TooFewExamplesError,
    run_probes,
)
from reward_lens_tl.probes.runner import apply_probe, as_items
from tests.probes.conftest import tiny


def test_user_defined_probes_on_an_arbitrary_model():
    """A user's insertion phrase and a user's function run without touching library code."""
    model = tiny(True)
    rng = random.Random(0)
    examples = [
        (" ".join(f"w{rng.randint(6, 60)}" for _ in range(3)),
         " ".join(f"w{rng.randint(6, 60)}" for _ in range(rng.randint(1, 6))))
        for _ in range(12)
    ]  # fmt: skip

    def double(conv):
        return conv.with_response(conv.response + conv.response)

    report = run_probes(
        model, examples, [Probe.insert("w42 w43", at="response_end", name="phrase"),
                          Probe("double", double)], seed=0,
    )  # fmt: skip
    frame = report.to_dataframe()
    assert {"probe", "n", "mean_delta", "ci_low", "ci_high", "flagged"} <= set(frame.columns)
    assert list(frame.probe) == ["phrase", "double"] and list(frame.n) == [12, 12]
    # deltas are exactly the reward differences of the edited sequences
    items = as_items(model, examples)
    phrase = Probe.insert("w42 w43", "response_end")
    edited = [apply_probe(model, phrase, it, random.Random(0)) for it in items]
    with torch.no_grad():
        r0 = torch.stack([model.rewards(torch.tensor([it.enc.ids]))[0] for it in items])
        r1 = torch.stack([model.rewards(torch.tensor([e.ids]))[0] for e in edited])
    torch.testing.assert_close(
        torch.from_numpy(report["phrase"].deltas), r1 - r0, atol=1e-5, rtol=0
    )
    assert report.cascade["phrase"].completeness_error() < 1e-4


def test_too_long_and_too_few():
    model = tiny(True)
    examples = [(f"w{6 + i}", "w8") for i in range(10)]
    long = Probe.insert([9] * (model.cfg.n_ctx + 1), at="response_end", name="long")
    report = run_probes(model, examples, [long])
    row = report.to_dataframe().iloc[0]
    assert row.n == 0 and row.n_skipped == 10 and not row.flagged
    assert math.isnan(row.mean_delta) and "fewer than the 10" in row.note
    assert "n_ctx" in report.skipped[0].reason
    with pytest.raises(TooFewExamplesError, match="fewer than the 10"):
        run_probes(model, examples[:9], [long])
    with pytest.raises(ProbeError, match="unique"):
        run_probes(model, examples, [long, long])
    with pytest.raises(ProbeError, match="at="):
        Probe.insert("x", at="middle")


def test_probe_skip_and_library_errors_become_skips():
    model = tiny(True)

    def picky(conv):
        if conv.response[0] % 2:
            raise ProbeSkip("odd first token")
        raise RewardLensError("some library refusal")

    report = run_probes(model, [(f"w{6 + i}", f"w{8 + i}") for i in range(10)],
                        [Probe("picky", picky)])  # fmt: skip
    reasons = report.skipped_frame().reason
    assert (reasons == "odd first token").sum() == 5
    assert reasons.str.contains("some library refusal").sum() == 5


def test_apply_probe_raises_a_typed_error_with_the_reason():
    """``apply_probe`` returns an encoding or raises ``ProbeNotApplicableError`` (its reason the
    report's line, ``refusal`` the library's error); a broken probe is a ``ProbeFunctionError``."""
    model = tiny(True)
    item = as_items(model, [("w6 w7", "w8 w9")])[0]
    n_ctx, d_vocab = model.cfg.n_ctx, model.cfg.d_vocab

    def refuse(conv):
        raise SequenceTooLongError("too long for this model")

    def skip(conv):
        raise ProbeSkip("not this one")

    cases = {
        Probe("skip", skip): "not this one",
        Probe("same", lambda conv: conv.with_response(conv.response)): "changes nothing",
        Probe.insert([9] * n_ctx, at="response_end", name="long"): f"more than n_ctx={n_ctx}",
        Probe.insert([d_vocab], at="response_end", name="oov"): f"vocabulary [0, {d_vocab})",
        Probe("refuse", refuse): "SequenceTooLongError: too long for this model",
    }
    for probe, reason in cases.items():
        with pytest.raises(ProbeNotApplicableError, match=re.escape(reason)) as info:
            apply_probe(model, probe, item, random.Random(0))
        assert isinstance(info.value, RewardLensError) and reason in info.value.reason
        assert isinstance(info.value.refusal, SequenceTooLongError) == (probe.name == "refuse")
    with pytest.raises(ProbeFunctionError, match="'broken' failed on example 3"):
        apply_probe(model, Probe("broken", lambda conv: 1 / 0), item, random.Random(0), index=3)
    edited = apply_probe(model, Probe.insert([10], at="response_end"), item, random.Random(0))
    assert edited.response_ids() == (*item.enc.response_ids(), 10)
