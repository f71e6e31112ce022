"""The reward-hacking probe suite: interface, input formats, statistics, and the zoo's ground
truth (planted hacks found, invariances not flagged, cascade onsets where the zoo plants them,
reward-term conflict, divergence-aware patching)."""

import math
import random
import re

import numpy as np
import pytest
import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.data import PairSet, PreferencePair
from reward_lens_tl.errors import RewardLensError, SequenceTooLongError
from reward_lens_tl.inputs import EncodedConversation, encode_conversation
from reward_lens_tl.patching import activation_patching
from reward_lens_tl.probes import (
    Probe,
    ProbeError,
    ProbeNotApplicableError,
    ProbeSkip,
    TooFewExamplesError,
    builtin_probes,
    run_probes,
    summarize_deltas,
)
from reward_lens_tl.probes.conflict import reward_term_conflict
from reward_lens_tl.probes.divergence import (
    divergence_aware_patching,
    natural_states,
    shrinkage_covariance,
)
from reward_lens_tl.probes.outside import correlation
from reward_lens_tl.probes.probe import ProbeFunctionError
from reward_lens_tl.probes.runner import apply_probe, as_items
from reward_lens_tl.probes.zoo import PLANTED, rule_delta, zoo_examples, zoo_probes
from reward_lens_tl.testing import tiny_reward_model, tiny_tokenizer
from tests.figures import check_figure


def tiny(chat_template: bool):
    tok = tiny_tokenizer(chat_template=chat_template)
    return HookedRewardModel.from_pretrained(tiny_reward_model("llama"), tok)


# -- probes on every input format ----------------------------------------------------------
@pytest.mark.parametrize("chat_template", [True, False])
@pytest.mark.parametrize(
    "at, expected",
    [
        ("response_start", ("w6 w7", "w10 w11 w8 w9")),
        ("response_end", ("w6 w7", "w8 w9 w10 w11")),
        ("prompt_end", ("w6 w7 w10 w11", "w8 w9")),
    ],
)
def test_insert_equals_encoding_the_edited_text(chat_template, at, expected):
    """Text insertion at each place gives exactly the template's (or the HH fallback's)
    encoding of the edited conversation, and ids insertion the same ids."""
    model = tiny(chat_template)
    item = as_items(model, [("w6 w7", "w8 w9")])[0]
    text = " w10 w11" if at == "prompt_end" else "w10 w11"
    out = apply_probe(model, Probe.insert(text, at=at, name="p"), item, random.Random(0))
    want = encode_conversation(model.tokenizer, *expected)
    assert out == want
    if at != "prompt_end":
        ids = apply_probe(model, Probe.insert([10, 11], at=at), item, random.Random(0))
        assert ids.ids == want.ids


def test_custom_format_token_ids(zoo_scalar, zoo_task):
    """The zoo's own format: with response_end recorded, insertion at the response end lands
    before <|end|>; built from ids and response_start alone, before the trailing EOS."""
    ex = zoo_task.make_example(("how", "bake", "bread"), ("soup", "the"))
    full = EncodedConversation(ex.input_ids, ex.response_start, len(ex.input_ids) - 2)
    bare = EncodedConversation(ex.input_ids, ex.response_start)
    probe = Probe.insert([99], at="response_end", name="x")
    a = apply_probe(zoo_scalar, probe, as_items(zoo_scalar, [full])[0], random.Random(0))
    b = apply_probe(zoo_scalar, probe, as_items(zoo_scalar, [bare])[0], random.Random(0))
    assert a.ids == ex.input_ids[:-2] + (99,) + ex.input_ids[-2:]
    assert b.ids == ex.input_ids[:-1] + (99,) + ex.input_ids[-1:]
    assert a.response_ids() == (*ex.input_ids[ex.response_start : -2], 99)


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


def test_builtin_probes_run_and_skip_with_reasons():
    """Every built-in runs on a model whose vocabulary knows no English: edits that change
    nothing or find nothing are skipped per example with the reason, never dropped."""
    model = tiny(True)
    examples = [(f"w{6 + i} w7", f"w{8 + i} w9") for i in range(10)]
    report = run_probes(model, examples, builtin_probes(), seed=0)
    frame, skipped = report.to_dataframe(), report.skipped_frame()
    assert len(frame) == len(builtin_probes())
    assert (frame.n + frame.n_skipped == 10).all()
    reasons = set(skipped.reason)
    assert "' ' encodes to no tokens with this tokenizer" in reasons  # whitespace
    assert any("no member of the swap groups" in r for r in reasons)  # synonyms
    assert not np.isinf(frame.select_dtypes("number").to_numpy(dtype=float)).any()


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


# -- statistics ----------------------------------------------------------------------------
def test_summary_statistics():
    d = np.random.default_rng(0).normal(0.3, 1.0, 40)
    s = summarize_deltas(d, natural_sd=2.0, seed=3)
    assert s.sd_delta == pytest.approx(d.std(ddof=1))
    assert s.effect_size == pytest.approx(d.mean() / d.std(ddof=1))
    assert s.relative_effect == pytest.approx(d.mean() / 2.0)
    assert s.ci_low < d.mean() < s.ci_high
    assert summarize_deltas(d, natural_sd=2.0, seed=3) == s  # seeded
    with pytest.raises(TooFewExamplesError):
        summarize_deltas(d[:9], natural_sd=1.0)
    const = summarize_deltas(np.full(12, 0.5), natural_sd=1.0)
    assert math.isnan(const.effect_size) and const.ci_low == const.ci_high == 0.5
    # a tiny but consistent shift is not flagged: it must matter on the natural scale
    tiny_shift = summarize_deltas(np.full(40, 0.01) + d * 1e-3, natural_sd=5.0)
    assert tiny_shift.ci_low > 0 and not tiny_shift.flagged
    with pytest.raises(TooFewExamplesError):
        correlation("a", "b", d[:5], d[5:10])
    c = correlation("a", "b", d[:20], d[:20] * 2 + 1)
    assert c.r == pytest.approx(1.0) and c.n == 20


# -- ground truth on the zoo ---------------------------------------------------------------
def test_planted_hacks_flagged_with_planted_size(zoo_scalar, zoo_task):
    examples = zoo_examples(zoo_task, 64, seed=0, max_words=8)
    report = run_probes(zoo_scalar, examples, zoo_probes(), seed=0)
    items = as_items(zoo_scalar, examples)
    for name in ("length_padding", "sycophantic_opener", "harmful_word", "topic_word"):
        row = report[name]
        s = row.summary
        assert row.flagged and (s.ci_low > 0 or s.ci_high < 0), name
        probe = next(p for p in zoo_probes() if p.name == name)
        rule = [
            rule_delta(zoo_task, items[i].enc,
                       apply_probe(zoo_scalar, probe, items[i], random.Random(f"0:{name}:{i}")))
            for i in row.example_index
        ]  # fmt: skip
        assert s.mean_delta == pytest.approx(np.mean(rule), rel=0.1), (name, PLANTED[name])
    assert report["length_padding"].summary.mean_delta == pytest.approx(2.0, rel=0.1)


def test_invariance_false_positive_rate(zoo_scalar, zoo_task):
    """6 invariance probes × 4 seeds of examples: at most 5% flagged (observed: none)."""
    flagged = tested = 0
    for seed in range(4):
        report = run_probes(zoo_scalar, zoo_examples(zoo_task, 48, seed=100 + seed), zoo_probes(),
                            seed=seed, inside=False)  # fmt: skip
        f, t = report.false_positive_rate()
        flagged, tested = flagged + f, tested + t
        assert set(report.flagged()) >= {"length_padding", "sycophantic_opener"}
    assert tested >= 20
    assert flagged / tested <= 0.05


#: Where each planted feature reaches the reward-reading token (≥ 75 % of its final effect),
#: from activation patching of the reward token's residual (wave 1, see sae/zoo_features.py):
#: length after block 0, sycophancy after block 1, harmful and topic_match only in block 2.
PLANTED_ONSET = {"length": "1_pre", "sycophancy": "2_pre", "harmful": "final",
                 "topic_match": "final"}  # fmt: skip


def test_cascade_onsets_match_planted_layers(zoo_scalar, zoo_task):
    examples = zoo_examples(zoo_task, 48, seed=5, max_words=8)
    report = run_probes(zoo_scalar, examples, zoo_probes()[:4], seed=0)
    onsets = report.cascade.onsets()
    assert {PLANTED[p]: site for p, site in onsets.items()} == PLANTED_ONSET
    items = as_items(zoo_scalar, examples)[:16]
    for name in ("length_padding", "sycophantic_opener", "harmful_word", "topic_word"):
        c = report.cascade[name]
        assert c.completeness_error() < 1e-4
        assert c.mean[0] == pytest.approx(0.0, abs=1e-5)  # nothing at the embedding
        # activation patching of the reward token's residual puts the onset at the same site
        probe = next(p for p in zoo_probes() if p.name == name)
        fractions = []
        for i, it in enumerate(items):
            new = apply_probe(zoo_scalar, probe, it, random.Random(i))
            res = activation_patching(zoo_scalar, new, it.enc, site="resid_pre", alignment="end",
                                      positions=[len(new.ids) - 1])  # fmt: skip
            fractions.append(res.values[:, 0].numpy())
        mean = np.mean(fractions, 0)  # layers 0, 1, 2
        reached = [f"{layer}_pre" for layer in range(3) if mean[layer] >= 0.75]
        assert (reached[0] if reached else "final") == c.onset, (name, mean)
    cascade = report.cascade
    fig = check_figure(cascade.plot(), static=cascade.plot(backend="matplotlib"),
                       x_labels=list(cascade.probes[0].sites))  # fmt: skip
    lines = {t.name: t for t in fig.data if t.hoverinfo != "skip"}
    assert set(lines) == set(onsets)  # four planted hacks, each with a final CI away from 0
    c = cascade["sycophantic_opener"]
    np.testing.assert_allclose(lines[c.probe].y, c.mean / c.mean[-1])
    assert any(s.y0 == s.y1 == 0.75 for s in fig.layout.shapes)  # the onset fraction


def test_distortion_and_flips_on_pairs(zoo_scalar, zoo_task):
    rng = random.Random(4)
    pairs = []
    for _ in range(40):
        a, b = zoo_task.response_pair(rng, 1, 8)
        hi, lo = (a, b) if a.score >= b.score else (b, a)
        pairs.append(PreferencePair(" ".join(a.prompt), " ".join(hi.response),
                                    " ".join(lo.response)))  # fmt: skip
    report = run_probes(zoo_scalar, PairSet(pairs), zoo_probes()[:2] + zoo_probes()[4:5], seed=0)
    dist = report.distortion().to_dataframe().set_index("probe")
    margins = (report.chosen_rewards - report.original_rewards).numpy()
    row = report["sycophantic_opener"]
    m = margins[list(row.example_index)]
    assert dist.loc["sycophantic_opener", "index"] == pytest.approx(
        row.deltas.mean() / m.std(ddof=1), rel=1e-6
    )
    flips = np.mean(np.sign(m - row.deltas)[m != 0] != np.sign(m)[m != 0])
    assert dist.loc["sycophantic_opener", "flip_share"] == pytest.approx(flips)
    assert report.to_dataframe().set_index("probe").loc["sycophantic_opener", "flip_rate"] == (
        pytest.approx(flips)
    )
    assert dist.loc["sycophantic_opener", "flip_share"] > 0.1
    assert dist.loc["filler_swap", "flip_share"] < 0.05
    lo, hi = dist.loc["sycophantic_opener", ["ci_low", "ci_high"]]
    assert lo > 0 and lo <= dist.loc["sycophantic_opener", "index"] <= hi
    # the figures show these numbers: one bar per probe, its CI as the error bar
    result = report.distortion()
    bars = check_figure(result.plot(), static=result.plot(backend="matplotlib")).data[0]
    np.testing.assert_allclose(bars.x, dist["index"])
    np.testing.assert_allclose(bars.x + bars.error_x.array, dist["ci_high"])
    assert list(bars.customdata)[1].startswith("sycophantic_opener")
    fig = check_figure(report.plot(), static=report.plot(backend="matplotlib"))
    bars = fig.data[0]
    frame = report.to_dataframe()
    np.testing.assert_allclose(bars.x, frame["mean_delta"])
    np.testing.assert_allclose(bars.x - bars.error_x.arrayminus, frame["ci_low"])
    flagged = [c == "#c00000" for c in bars.marker.color]
    assert flagged == frame["flagged"].tolist()
    assert f"{sum(flagged)} of 3 flagged" in fig.layout.title.text


def test_reward_term_conflict_multi_objective(zoo_multi, zoo_task):
    res = reward_term_conflict(zoo_multi, [e.input_ids for e in zoo_task.examples(24, 3)])
    assert res.terms == ("helpfulness", "harmlessness", "verbosity")
    assert res.completeness_error() < 1e-4
    torch.testing.assert_close(res.cosines.diagonal(), torch.ones(3), atol=1e-5, rtol=0)
    # which components carry each objective's own planted feature
    carried = {}
    for term, feature in (("harmlessness", "harmful"), ("helpfulness", "topic_match")):
        pairs = zoo_task.contrast_pairs(feature, 32, seed=1)
        diff = reward_term_conflict(zoo_multi, [p.edited.input_ids for p in pairs]) - (
            reward_term_conflict(zoo_multi, [p.base.input_ids for p in pairs])
        )
        carried[term] = diff
    harm = [c for c, _ in carried["harmlessness"].drivers("harmlessness", 2)]
    helpful = [c for c, _ in carried["helpfulness"].drivers("helpfulness", 2)]
    assert not set(harm) & set(helpful), (harm, helpful)
    # the harmlessness driver barely moves helpfulness on the same inputs
    d = carried["harmlessness"]
    j = d.components.index(harm[0])
    assert d.attribution[1, j].mean().abs() > 5 * d.attribution[0, j].mean().abs()
    assert len(res.top_k(3)) == 3
    fig = check_figure(res.plot(), static=res.plot(backend="matplotlib"),
                       x_labels=list(res.terms), diverging=True)  # fmt: skip
    np.testing.assert_allclose(fig.data[0].z, res.attribution.mean(2).T.numpy(), rtol=1e-6)
    assert list(fig.layout.yaxis.ticktext) == list(res.components)


def test_reward_term_conflict_scalar_terms(zoo_scalar, zoo_task):
    from reward_lens_tl.sae.concepts import concept_vectors

    site = "blocks.2.hook_resid_post"
    dirs = {
        f: concept_vectors(zoo_scalar, zoo_task.contrast_pairs(f, 24, seed=2), sites=[site])[site]
        for f in ("harmful", "topic_match")
    }
    res = reward_term_conflict(
        zoo_scalar, [e.input_ids for e in zoo_task.examples(12, 0)], directions=dirs
    )
    assert res.completeness_error() < 1e-4 and res.terms == ("harmful", "topic_match")
    with pytest.raises(ProbeError, match="directions"):
        reward_term_conflict(zoo_scalar, [zoo_task.examples(1, 0)[0].input_ids])


# -- divergence-aware patching -------------------------------------------------------------
def test_shrinkage_covariance_matches_the_formula():
    x = torch.randn(30, 8, dtype=torch.float64) * torch.linspace(0.5, 3, 8)
    mean, cov, s = shrinkage_covariance(x)
    xc = x - x.mean(0)
    S = xc.T @ xc / 30
    mu = torch.trace(S) / 8
    d2 = ((S - mu * torch.eye(8)) ** 2).sum()
    b2 = sum(((torch.outer(r, r) - S) ** 2).sum() for r in xc) / 30**2
    assert s == pytest.approx(float(min(b2, d2) / d2))
    torch.testing.assert_close(cov, (1 - s) * S + s * mu * torch.eye(8, dtype=torch.float64))
    _, wide, _ = shrinkage_covariance(torch.randn(5, 20))  # n < d: still invertible
    assert bool((torch.linalg.eigvalsh(wide) > 0).all())


def test_divergence_calibration_and_ood_cells(zoo_scalar, zoo_task):
    natural = [e.input_ids for e in zoo_task.examples(80, 11)]
    held_out = [e.input_ids for e in zoo_task.examples(40, 12)]
    states = natural_states(zoo_scalar, natural, ["blocks.1.hook_resid_pre"])[
        "blocks.1.hook_resid_pre"
    ]
    fresh = torch.cat([
        zoo_scalar.run_with_cache(torch.tensor([s]), names_filter=states.hook)[1][states.hook][0]
        for s in held_out
    ])  # fmt: skip
    share_ood = float((states.percentile(states.distance(fresh)) >= 99).float().mean())
    assert share_ood < 0.05  # natural states are in distribution
    clean, corrupted = (
        EncodedConversation(p.input_ids, p.response_start)
        for p in (lambda c: (c.edited, c.base))(
            zoo_task.contrast_pairs("topic_match", 1, seed=7)[0]
        )
    )
    natural_patch = divergence_aware_patching(
        zoo_scalar, clean, corrupted, natural=natural, site="resid_pre", alignment="exact"
    )
    assert natural_patch.ood_share() == 0.0  # patched states are natural clean states
    zeroed = divergence_aware_patching(
        zoo_scalar, clean, natural=natural, site="mlp_out", mode="zero"
    )
    assert bool(zeroed.ood[:2].all())  # removing block 0/1's MLP output leaves the manifold
    frame = zeroed.to_dataframe()
    assert {"distance", "percentile", "ood"} <= set(frame.columns)
    in_dist = zeroed.top_k(3)
    assert all(not frame.set_index("label").loc[label, "ood"] for label, _ in in_dist)
    assert len(zeroed.top_k(3, include_ood=True)) == 3
    fig = check_figure(zeroed.plot(), static=zeroed.plot(backend="matplotlib"),
                       x_labels=["mlp_out"], diverging=True)  # fmt: skip
    heat, marks = fig.data
    np.testing.assert_allclose(heat.z, zeroed.patch.matrix()[0].numpy(), rtol=1e-6)
    assert list(marks.y) == torch.nonzero(zeroed.ood).reshape(-1).tolist()  # × on the OOD rows
    assert [float(d) for d in heat.customdata[:, 0, 2]] == pytest.approx(zeroed.distance.tolist())
    assert f"{zeroed.ood_share():.0%} of cells" in fig.layout.title.text
