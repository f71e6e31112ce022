"""Concept erasure (`reward_lens_tl.erasure`) against the zoo's planted `harmful` feature.

Ground truth: the rule gives −3.0 per harmful response word; the zoo model reads it at the
reward-reading token after its last attention layer (`blocks.2.hook_resid_mid`), and the reading
token (`<eos>`) is the same embedding in every conversation before the first block. Numbers are
checked against re-scoring with `model.rewards`, by-hand erasure (`LeaceEraser.__call__` on
cached activations, re-run with `start_at_layer`) and the Gaussian Bayes accuracy for the probe.
"""

from __future__ import annotations

import math

import pytest
import torch

from reward_lens_tl.erasure import (
    ConceptPresence,
    ErasureResult,
    concept_erasure,
    concept_presence,
    fit_eraser,
    probe_accuracy,
    random_eraser,
)
from reward_lens_tl.errors import (
    EmptyInputError,
    InvalidArgumentError,
    ShapeMismatchError,
    UnknownHookError,
    UsageError,
)
from reward_lens_tl.inputs import as_encoded, pad_batch
from tests.figures import check_figure

SITE = "blocks.2.hook_resid_mid"  # after the last attention layer wrote `harmful` to <eos>
FEATURES = ("harmful", "topic_match", "sycophancy", "length")


def _any_harmful(examples) -> list[int]:
    return [int(bool(e.feature_positions["harmful"])) for e in examples]


@pytest.fixture(scope="module")
def fit_examples(zoo_task):
    return zoo_task.examples(2000, seed=3)


@pytest.fixture(scope="module")
def heldout(zoo_task):
    examples = zoo_task.examples(600, seed=11)
    return examples, _any_harmful(examples)


@pytest.fixture(scope="module")
def pairs(zoo_task):
    return [p for f in FEATURES for p in zoo_task.contrast_pairs(f, 40, seed=1)]


@pytest.fixture(scope="module")
def eraser(zoo_scalar, fit_examples):
    return fit_eraser(
        zoo_scalar, fit_examples, _any_harmful(fit_examples), hook=SITE, concept="harmful"
    )


@pytest.fixture(scope="module")
def result(zoo_scalar, eraser, pairs, heldout):
    examples, labels = heldout
    return concept_erasure(
        zoo_scalar, eraser, pairs, heldout=examples, heldout_labels=labels, n_boot=500
    )


def _summary(result: ErasureResult):
    return result.summary().set_index("feature")


def _margins(model, pairs, hooks_for=None) -> torch.Tensor:
    """Independent: `model.rewards` of edited and base, each pair its own batch."""
    out = []
    for p in pairs:
        ids, mask = pad_batch([as_encoded(p.edited), as_encoded(p.base)], model.pad_token_id)
        hooks = hooks_for(ids, mask) if hooks_for else []
        with model.hooks(hooks):
            r = model.rewards(ids, mask)
        out.append(float(r[0] - r[1]))
    return torch.tensor(out)


# ---- ground truth ------------------------------------------------------------------------------
def test_erasing_harmful_where_it_is_read_removes_the_penalty_only(result):
    s = _summary(result)
    assert s.loc["harmful", "before"] == pytest.approx(-3.0, abs=0.1)
    # measured -0.07 (95% CI -0.52 to +0.29); other fitting seeds leave up to -0.34
    assert abs(s.loc["harmful", "after"]) < 0.15
    assert s.loc["harmful", "after_low"] <= 0 <= s.loc["harmful", "after_high"]
    assert s.loc["harmful", "change"] > 2.7
    for feature in ("topic_match", "sycophancy", "length"):
        before, change = s.loc[feature, "before"], s.loc[feature, "change"]
        # measured: +0.03, -0.03, +0.03; each interval holds 0
        assert abs(change) < 0.06 and abs(change) < 0.1 * abs(before), (feature, change)
        assert s.loc[feature, "change_low"] <= 0 <= s.loc[feature, "change_high"], feature


def test_erasing_before_it_is_computed_does_not_remove_it(zoo_scalar, fit_examples, pairs):
    early = fit_eraser(
        zoo_scalar, fit_examples, _any_harmful(fit_examples), hook="blocks.0.hook_resid_pre"
    )
    assert early.rank == 0  # <eos>'s embedding: the same vector in every conversation
    res = concept_erasure(zoo_scalar, early, pairs, n_boot=200)
    torch.testing.assert_close(res.margin_after, res.margin_before, rtol=0, atol=1e-5)
    assert _summary(res).loc["harmful", "after"] == pytest.approx(-3.0, abs=0.1)


def test_a_random_eraser_of_the_same_rank_changes_margins_little(zoo_scalar, eraser, pairs):
    control = random_eraser(zoo_scalar, hook=SITE, rank=eraser.rank, seed=0)
    res = concept_erasure(zoo_scalar, control, pairs, n_boot=200)
    s = _summary(res)
    assert (s["change"].abs() < 0.03).all(), s["change"]  # measured |change| <= 0.01
    assert s.loc["harmful", "after"] == pytest.approx(-3.0, abs=0.1)


def test_certificate_probe_is_perfect_before_and_at_chance_after(result, heldout):
    _, labels = heldout
    share = sum(labels) / len(labels)
    assert result.probe_before > 0.97  # measured 0.998
    assert result.chance == pytest.approx(max(share, 1 - share), abs=0.05)
    assert abs(result.probe_after - result.chance) < 0.04  # measured 0.714 vs chance 0.724
    assert result.n_heldout == 600
    assert result.certificate == {
        "before": result.probe_before,
        "after": result.probe_after,
        "chance": result.chance,
    }


def test_concept_presence_first_after_the_first_attention_layer(zoo_scalar, heldout):
    examples, labels = heldout
    sites = [f"blocks.{i}.hook_resid_{k}" for i in range(3) for k in ("pre", "mid")]
    presence = concept_presence(zoo_scalar, examples, labels, hooks=sites)
    acc = dict(zip(presence.sites, presence.accuracy.tolist(), strict=True))
    assert acc["blocks.0.hook_resid_pre"] == pytest.approx(presence.chance, abs=0.02)
    assert presence.first_present(0.95) == "blocks.0.hook_resid_mid"
    assert min(acc[s] for s in sites[1:]) > 0.97
    check_figure(presence.plot(), static=presence.plot(backend="matplotlib"), x_labels=["blocks.0"])
    with pytest.raises(Exception, match="ConceptPresence"):
        ConceptPresence.concat([])


def test_multi_objective_model(zoo_multi, fit_examples, pairs):
    eraser = fit_eraser(zoo_multi, fit_examples, _any_harmful(fit_examples), hook=SITE)
    s = _summary(concept_erasure(zoo_multi, eraser, pairs, n_boot=200))
    assert s.loc["harmful", "before"] < -1.0  # the gated score pays -1.36 per harmful word
    assert abs(s.loc["harmful", "after"]) < 0.25 * abs(s.loc["harmful", "before"])
    for feature in ("topic_match", "sycophancy", "length"):
        assert abs(s.loc[feature, "change"]) < 0.05, feature
    # one objective's head output, read through objective_rewards
    obj = concept_erasure(zoo_multi, eraser, pairs[:5], objective=0, n_boot=50)
    ids, mask = pad_batch([as_encoded(p.edited) for p in pairs[:5]], zoo_multi.pad_token_id)
    base, _ = pad_batch([as_encoded(p.base) for p in pairs[:5]], zoo_multi.pad_token_id)
    assert obj.margin_before.shape == (5,)
    edited_r = zoo_multi.objective_rewards(ids, mask)[:, 0]
    base_r = zoo_multi.objective_rewards(base, (base != zoo_multi.pad_token_id).long())[:, 0]
    torch.testing.assert_close(obj.margin_before, edited_r - base_r, rtol=0, atol=1e-4)


# ---- independent checks ------------------------------------------------------------------------
def test_hook_equals_erasing_cached_activations_by_hand(zoo_scalar, fit_examples, pairs):
    model = zoo_scalar
    site = "blocks.2.hook_resid_pre"
    eraser = fit_eraser(model, fit_examples, _any_harmful(fit_examples), hook=site)
    convs = [as_encoded(c) for p in pairs[:12] for c in (p.edited, p.base)]
    ids, mask = pad_batch(convs, model.pad_token_id)
    _, cache = model.run_with_cache(ids, attention_mask=mask, names_filter=site)
    resid = cache[site].clone()
    rows = torch.arange(len(convs))
    reading = model.pool_positions(ids, mask)
    resid[rows, reading] = eraser.eraser(resid[rows, reading])  # the package's own __call__
    by_hand = model(resid, "reward", start_at_layer=2, attention_mask=mask, tokens=ids)
    hooked = model.run_with_hooks(
        ids, return_type="reward", attention_mask=mask, fwd_hooks=eraser.fwd_hooks(model, ids, mask)
    )
    torch.testing.assert_close(hooked, by_hand, rtol=0, atol=1e-5)
    assert not torch.allclose(hooked, model.rewards(ids, mask), atol=1e-2)
    torch.testing.assert_close(eraser.rewards(model, convs), hooked, rtol=0, atol=1e-5)


def test_result_margins_equal_rescoring_with_the_hook(zoo_scalar, eraser, pairs, result):
    model = zoo_scalar
    some = list(range(0, len(pairs), 9))
    chosen = [pairs[i] for i in some]
    torch.testing.assert_close(
        result.margin_before[some], _margins(model, chosen), rtol=0, atol=1e-4
    )
    after = _margins(model, chosen, lambda ids, mask: eraser.fwd_hooks(model, ids, mask))
    torch.testing.assert_close(result.margin_after[some], after, rtol=0, atol=1e-4)
    # the rule: every harmful pair's margin is −3 before, and the change is what the frame holds
    frame = result.to_dataframe()
    torch.testing.assert_close(
        torch.tensor(frame["change"].to_numpy()).float(), result.change, rtol=0, atol=1e-6
    )


def test_left_and_right_padding_give_the_same_numbers(zoo_scalar, zoo_task, pairs):
    model = zoo_scalar
    ex = zoo_task.examples(300, seed=4)
    labels = _any_harmful(ex)
    for position in ("reward", "response", -2):
        left = fit_eraser(model, ex, labels, hook="blocks.1.hook_resid_pre", position=position)
        right = fit_eraser(
            model,
            ex,
            labels,
            hook="blocks.1.hook_resid_pre",
            position=position,
            padding_side="right",
        )
        torch.testing.assert_close(left.eraser.P, right.eraser.P, rtol=0, atol=1e-4)
        a = concept_erasure(model, left, pairs[::8], n_boot=50)
        b = concept_erasure(model, left, pairs[::8], n_boot=50, padding_side="right")
        torch.testing.assert_close(a.margin_after, b.margin_after, rtol=0, atol=1e-4)
        torch.testing.assert_close(a.margin_before, b.margin_before, rtol=0, atol=1e-4)
    assert left.n_fit == 300
    response = fit_eraser(model, ex, labels, hook="blocks.1.hook_resid_pre", position="response")
    assert response.n_fit == sum(len(e.response) for e in ex)  # one row per response token


def test_probe_matches_the_gaussian_bayes_accuracy():
    gen = torch.Generator().manual_seed(0)
    n, d, gap = 4000, 16, 1.5  # classes N(0, I) and N(gap * e_1, I): Bayes Φ(gap / 2)
    y = torch.arange(n) % 2
    x = torch.randn(n, d, generator=gen, dtype=torch.float64)
    x[:, 0] += gap * y
    bayes = 0.5 * (1 + math.erf(gap / 2 / math.sqrt(2)))
    acc = probe_accuracy(x[: n // 2], y[: n // 2], x[n // 2 :], y[n // 2 :])
    assert acc == pytest.approx(bayes, abs=0.02)  # 0.773
    with pytest.raises(InvalidArgumentError, match="one class"):
        probe_accuracy(x[:4], [1, 1, 1, 1], x[4:8], y[4:8])
    with pytest.raises(ShapeMismatchError):
        probe_accuracy(x[:4], [0, 1], x[4:8], y[4:8])


def test_random_eraser_is_an_orthogonal_projection(zoo_scalar):
    e = random_eraser(zoo_scalar, hook=SITE, rank=3, seed=5)
    P = e.eraser.P
    torch.testing.assert_close(P, P.T, rtol=0, atol=1e-6)
    torch.testing.assert_close(P @ P, P, rtol=0, atol=1e-5)
    assert round(float(torch.trace(torch.eye(64) - P))) == 3
    x = torch.randn(5, 64)
    torch.testing.assert_close(e.erase(x), e.eraser(x), rtol=0, atol=1e-5)
    other = random_eraser(zoo_scalar, hook=SITE, rank=3, seed=6)
    assert not torch.allclose(other.eraser.P, P)


# ---- the result --------------------------------------------------------------------------------
def test_result_frame_plot_top_k_and_rows(result, pairs):
    frame = result.to_dataframe()
    assert list(frame.columns) == ["label", "feature", "margin_before", "margin_after", "change"]
    assert len(frame) == len(pairs) and result.example_count() == len(pairs)
    top = result.top_k(3)
    assert [label.split(" #")[0] for label, _ in top] == ["harmful"] * 3
    assert abs(top[0][1]) == pytest.approx(float(result.change.abs().max()), abs=1e-6)
    fig = check_figure(
        result.plot(), static=result.plot(backend="matplotlib"), x_labels=list(FEATURES)
    )
    assert [t.name for t in fig.data] == ["before erasure", "after erasure"]
    s = result.summary()
    assert fig.data[1].y.tolist() == pytest.approx(s["after"].tolist())
    assert "probe accuracy" in fig.layout.title.text
    part = ErasureResult.concat([result.take(slice(0, 40)), result.take(slice(40, None))])
    assert torch.equal(part.margin_after, result.margin_after) and part.features == result.features
    assert result.take([0]).features == (pairs[0].feature,)


def test_nothing_passed_in_is_modified(zoo_scalar, zoo_task):
    ex = zoo_task.examples(40, seed=9)
    labels = _any_harmful(ex)
    kept = (list(ex), list(labels), [e.input_ids for e in ex])
    eraser = fit_eraser(zoo_scalar, ex, labels, hook="blocks.1.hook_resid_pre")
    pairs = zoo_task.contrast_pairs("harmful", 6, seed=3)
    before = [(p.base.input_ids, p.edited.input_ids) for p in pairs]
    concept_erasure(zoo_scalar, eraser, pairs, heldout=ex, heldout_labels=labels, n_boot=20)
    assert (list(ex), list(labels), [e.input_ids for e in ex]) == kept
    assert [(p.base.input_ids, p.edited.input_ids) for p in pairs] == before
    assert not zoo_scalar.hook_dict["blocks.1.hook_resid_pre"].fwd_hooks


# ---- bad input ---------------------------------------------------------------------------------
def test_bad_input_raises_typed_errors(zoo_scalar, zoo_task):
    model = zoo_scalar
    ex = zoo_task.examples(20, seed=0)
    labels = _any_harmful(ex)
    pairs = zoo_task.contrast_pairs("harmful", 4, seed=0)
    with pytest.raises(UnknownHookError, match="closest"):
        fit_eraser(model, ex, labels, hook="blocks.1.hook_resid_pree")
    with pytest.raises(ShapeMismatchError, match="19 labels for 20"):
        fit_eraser(model, ex, labels[:19], hook=SITE)
    with pytest.raises(InvalidArgumentError, match="same label"):
        fit_eraser(model, ex, [1] * 20, hook=SITE)
    with pytest.raises(InvalidArgumentError, match="outside row"):
        fit_eraser(model, ex, labels, hook=SITE, position=999)
    with pytest.raises(InvalidArgumentError, match="position must be"):
        fit_eraser(model, ex, labels, hook=SITE, position="last")
    with pytest.raises(InvalidArgumentError, match="must be pairs"):
        fit_eraser(model, ex, hook=SITE)
    with pytest.raises(InvalidArgumentError, match="labels were given"):
        fit_eraser(model, pairs, [0, 1, 0, 1], hook=SITE)
    with pytest.raises(EmptyInputError):
        fit_eraser(model, [], [], hook=SITE)
    with pytest.raises(InvalidArgumentError, match="not \\[batch, pos, d\\]"):
        fit_eraser(model, pairs, hook="blocks.0.attn.hook_z")
    with pytest.raises(InvalidArgumentError, match="rank"):
        random_eraser(model, hook=SITE, rank=0)
    response = fit_eraser(model, pairs, hook=SITE, position="response")
    ids, mask = pad_batch([as_encoded(e) for e in ex[:2]], model.pad_token_id)
    with pytest.raises(UsageError, match="response_mask"):
        response.fwd_hooks(model, ids, mask)
    eraser = fit_eraser(model, pairs, hook=SITE)
    with pytest.raises(EmptyInputError):
        concept_erasure(model, eraser, [])
    with pytest.raises(InvalidArgumentError, match="two classes"):
        concept_erasure(model, eraser, pairs, heldout=ex, heldout_labels=[0, 1, 2, 3] * 5)
    with pytest.raises(InvalidArgumentError, match="objective"):
        concept_erasure(model, eraser, pairs, objective=3)
    hooks = eraser.fwd_hooks(model, ids, mask)
    other, other_mask = pad_batch([as_encoded(e) for e in ex[:3]], model.pad_token_id)
    with pytest.raises(ShapeMismatchError, match="build fwd_hooks"):
        model.run_with_hooks(
            other, return_type="reward", attention_mask=other_mask, fwd_hooks=hooks
        )


def test_text_conversations_and_preference_pairs_equal_their_encodings(zoo_scalar, zoo_task):
    """`(prompt, response)` text fits the same eraser as its encodings, and preference pairs
    (text or encoded) give chosen − rejected margins, grouped by subset, that equal
    `model.rewards` of each side with the hook on."""
    from reward_lens_tl.data import PreferencePair

    model = zoo_scalar
    ex = zoo_task.examples(60, seed=4)
    texts = [(" ".join(e.prompt), " ".join(e.response)) for e in ex]
    labels = _any_harmful(ex)
    by_text = fit_eraser(model, texts, labels, hook=SITE)
    by_ids = fit_eraser(model, [model.encode(*t) for t in texts], labels, hook=SITE)
    torch.testing.assert_close(by_text.eraser.proj_left, by_ids.eraser.proj_left)
    torch.testing.assert_close(by_text.eraser.bias, by_ids.eraser.bias)
    prefs = [
        PreferencePair(
            " ".join(p.edited.prompt),
            " ".join(p.base.response),
            " ".join(p.edited.response),
            subset="mine",
        )
        for p in zoo_task.contrast_pairs("harmful", 6, seed=9)
    ]
    result = concept_erasure(model, by_ids, prefs, n_boot=50)
    encoded = [
        (model.encode(p.prompt, p.chosen), model.encode(p.prompt, p.rejected)) for p in prefs
    ]
    same = concept_erasure(model, by_ids, encoded, n_boot=50)
    assert result.features == ("mine",) * 6 and same.features == ("pairs",) * 6
    torch.testing.assert_close(result.margin_after, same.margin_after)
    ids, mask = pad_batch([c for pair in encoded for c in pair], model.pad_token_id)
    with torch.no_grad(), model.hooks(by_ids.fwd_hooks(model, ids, mask)):
        after = model.rewards(ids, attention_mask=mask)
    torch.testing.assert_close(result.margin_after, after[0::2] - after[1::2], atol=1e-4, rtol=0)
    plain = model.rewards(ids, attention_mask=mask)
    torch.testing.assert_close(result.margin_before, plain[0::2] - plain[1::2], atol=1e-4, rtol=0)
    # pairs without labels: the first side labelled 1 (chosen), the other 0
    paired = fit_eraser(model, encoded, hook=SITE)
    assert paired.n_fit == 12
