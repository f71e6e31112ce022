"""Activation patching against the zoo's planted ground truth (50 contrast pairs per feature,
each with two score-neutral filler swaps): localisation, minimal head sets, AtP recall."""

from collections import Counter

import pytest
import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.contrast import encode_contrast
from reward_lens_tl.errors import InvalidArgumentError
from reward_lens_tl.patching import (
    PatchingError,
    activation_patching,
    atp_agreement,
)
from reward_lens_tl.patching import mechanisms as gt
from tests.figures import check_figure
from tests.patching.conftest import N


@pytest.fixture(scope="module")
def table(zoo, pairs):
    model, _ = zoo
    return gt.localization(model, [p for f in gt.SWAP_FEATURES for p in pairs[f]])


def test_first_layer_localizes_the_planted_tokens(table):
    """Only the planted tokens differ in meaning at the embedding, so at resid_pre 0 the planted
    span is the top unit in every pair, and it alone restores the whole effect (the filler swaps
    restore nothing)."""
    df = table.to_dataframe()
    first = df[df.site == "resid_pre 0"]
    assert (first.top1_planted == 1.0).all(), first
    assert ((first.planted_restored - 1).abs() < 0.05).all(), first
    assert (first.top1_neutral == 0).all()


def test_effect_moves_to_the_reward_token(table):
    """After the last block only the reward-reading token can matter; the attention-dependent
    feature (topic_match) stays on the planted word until the last layer moves it, while the
    sycophancy bonus has moved to the reward token by resid_pre 2."""
    last = "resid_post 2"
    for feature in gt.SWAP_FEATURES:
        assert table.share("reward", last, feature) == 1.0
    assert table.share("planted", "resid_pre 2", "topic_match") >= 0.9
    assert table.first_site("reward", "topic_match") == last
    assert table.first_site("reward", "sycophancy") == "resid_pre 2"
    assert table.share("reward", "resid_pre 2", "sycophancy") >= 0.9
    df = table.to_dataframe().set_index(["feature", "site"])
    assert df.loc[("sycophancy", "resid_pre 2"), "reward_restored"] > 0.6
    assert df.loc[("harmful", "resid_pre 2"), "reward_restored"] > 0.3  # half moved


@pytest.mark.slow  # tens of seconds: the slow tier (make test-all / CI)
def test_smallest_head_set_for_the_lookup_is_found_consistently(zoo, pairs):
    """topic_match needs the response word to look up the prompt's topic. Patching head outputs
    at the planted position, the smallest set restoring ≥ 90% of the effect in ≥ 90% of pairs is
    stable under bootstrap and holds on fresh pairs; the identity feature 'harmful' has no such
    set there (it is not an attention lookup)."""
    model, task = zoo
    found = gt.minimal_head_sets(model, pairs["topic_match"], at="planted")
    summary = found.summary()
    shared = summary["shared_set"]
    assert shared is not None and len(shared) <= 4, summary
    assert summary["shared_set_share"] >= 0.9 and summary["shared_set_stability"] >= 0.9
    assert summary["per_pair_found"] >= 0.9
    fresh = gt.minimal_head_sets(
        model, task.contrast_pairs("topic_match", N, 1, filler_swaps=2), at="planted"
    )
    column = fresh.subsets.index(found.subsets[found.shared_set()])
    assert float((fresh.restored[:, column] >= 0.9).float().mean()) >= 0.85
    harmful = gt.minimal_head_sets(model, pairs["harmful"][:10], at="planted", max_size=2)
    assert harmful.summary()["per_pair_found"] == 0.0
    assert len(found.to_dataframe()) == N


def test_figures_show_shares_counts_and_estimates(zoo, pairs, table):
    """The localisation heat map: shares on a fixed 0-1 scale, written in each cell and as a
    percent on hover; the head-set bars count pairs; the agreement scatter has the line y = x."""
    model, _ = zoo
    fig = check_figure(table.plot(), static=table.plot(backend="matplotlib"))
    heat = fig.data[0]
    assert (heat.zmin, heat.zmax, heat.zmid) == (0, 1, None) and heat.texttemplate
    assert "%{z:.1%}" in heat.hovertemplate
    frame = table.to_dataframe()
    sites = list(dict.fromkeys(frame.site))
    assert list(fig.layout.xaxis.ticktext) == sites
    features = list(fig.layout.yaxis.ticktext)
    expected = frame.pivot(index="feature", columns="site", values="top1_reward")
    shown = table.plot(kind="reward").data[0].z
    assert shown.tolist() == expected.loc[features, sites].to_numpy().tolist()
    found = gt.minimal_head_sets(model, pairs["sycophancy"][:4], max_size=1)
    sets = check_figure(found.plot(), static=found.plot(backend="matplotlib"))
    counts = Counter(" ".join(m) if m else "none" for m in found.minimal)
    assert dict(zip(sets.layout.yaxis.ticktext, sets.data[0].x.tolist(), strict=True)) == counts
    truth = gt.CausalGroundTruth(table, found, atp=())
    assert truth.plot().data[0].z.tolist() == heat.z.tolist()
    check_figure(truth.plot(), static=truth.plot(backend="matplotlib"))
    clean, corrupted = encode_contrast(pairs["harmful"][0])
    report = atp_agreement(model, clean, corrupted, site="z", alignment="exact")
    fig = check_figure(report.plot(), static=report.plot(backend="matplotlib"))
    assert [t.name.split(" ")[0] for t in fig.data] == ["atp", "atp*"]
    assert fig.data[0].x.tolist() == pytest.approx(report.reference.effects().tolist())
    assert fig.data[1].y.tolist() == pytest.approx(report.estimates[1].effects().tolist())
    assert list(fig.data[0].customdata) == list(report.reference.labels())
    assert fig.layout.shapes[0].x0 == fig.layout.shapes[0].y0  # the line y = x


def test_candidate_heads_and_search_size(zoo, pairs):
    """An integer picks the heads with the largest single-head effect; a search that would
    explode is refused with advice instead of hanging."""
    model, _ = zoo
    few = pairs["sycophancy"][:5]
    full = gt.minimal_head_sets(model, few, max_size=1)
    top = gt.minimal_head_sets(model, few, max_size=2, candidates=3)
    best = full.restored.mean(0).argsort(descending=True)[:3]
    assert set(top.heads) == {full.heads[i] for i in best.tolist()}
    assert len(top.subsets) == 3 + 3  # C(3,1) + C(3,2)
    explicit = gt.minimal_head_sets(model, few, max_size=2, candidates=list(top.heads))
    assert torch.allclose(explicit.restored, top.restored)
    with pytest.raises(PatchingError, match="max_subsets"):
        gt.minimal_head_sets(model, few, max_size=4, max_subsets=100)
    with pytest.raises(PatchingError, match="distinct"):
        gt.minimal_head_sets(model, few, candidates=[(0, 0), (9, 0)])
    with pytest.raises(PatchingError, match="candidates="):
        gt.minimal_head_sets(model, few, candidates=0)


def test_head_set_restoration_equals_activation_patching(zoo, pairs):
    """Single heads patched at every position are the heads grid of activation_patching."""
    model, _ = zoo
    p = pairs["topic_match"][0]
    found = gt.minimal_head_sets(model, [p], max_size=1)
    clean, corrupted = encode_contrast(p)
    grid = activation_patching(model, clean, corrupted, site="z", alignment="exact")
    assert torch.allclose(found.restored[0], grid.values.reshape(-1), atol=1e-5)


@pytest.mark.slow  # tens of seconds: the slow tier (make test-all / CI)
def test_atp_recovers_the_top_cells(zoo, pairs):
    """AtP and AtP* against real patching: heads (all positions) top-3 recall ≥ 0.75 and rank
    correlation ≥ 0.8 for every feature; the residual grid is reported (recall there is lower:
    cells at the planted token and the reward token nearly tie)."""
    model, _ = zoo
    for feature in gt.SWAP_FEATURES:
        rows = {(r["site"], r["method"]): r for r in gt.atp_recall(model, pairs[feature])}
        for method in ("atp", "atp*"):
            assert rows[("z", method)]["top_k_recall"] >= 0.75, rows
            assert rows[("z", method)]["spearman"] >= 0.8, rows
            assert rows[("resid_pre", method)]["spearman"] >= 0.7, rows


def test_bad_requests(zoo, pairs):
    model, task = zoo
    with pytest.raises(PatchingError, match="one feature"):
        gt.minimal_head_sets(model, pairs["harmful"][:1] + pairs["topic_match"][:1])
    with pytest.raises(PatchingError, match="at="):
        gt.minimal_head_sets(model, pairs["harmful"][:1], at="everywhere")
    with pytest.raises(PatchingError, match="equal lengths"):
        gt.minimal_head_sets(model, task.contrast_pairs("length", 1, 0))
    with pytest.raises(PatchingError, match="different lengths"):
        gt.localization(model, task.contrast_pairs("length", 1, 0))
    for fn in (gt.localization, gt.minimal_head_sets):
        with pytest.raises(PatchingError, match="no pairs"):
            fn(model, [])


def test_more_bad_requests(zoo, pairs):
    """Equal rewards on both sides, mixed features, wrong argument types: typed errors."""
    from types import SimpleNamespace

    model, _ = zoo
    p = pairs["harmful"][0]
    same = SimpleNamespace(feature="harmful", edited=p.edited, base=p.edited, edited_positions=())
    with pytest.raises(InvalidArgumentError, match="at least one edited position"):
        gt.minimal_head_sets(model, [same], max_size=1)
    declared = SimpleNamespace(**{**vars(same), "edited_positions": p.edited_positions})
    with pytest.raises(PatchingError, match="rewards are equal"):
        gt.minimal_head_sets(model, [declared], max_size=1)
    with pytest.raises(PatchingError, match="one feature"):
        gt.atp_recall(model, [p, pairs["topic_match"][0]])
    with pytest.raises(PatchingError, match="no pairs"):
        gt.atp_recall(model, [])
    for bad in (dict(candidates=True), dict(candidates=[(1.7, 0)]), dict(max_size=0)):
        with pytest.raises(PatchingError):
            gt.minimal_head_sets(model, [p], **bad)
    with pytest.raises(ValueError, match="kind"):
        gt.localization(model, [p]).share("rewrd", "resid_pre 0")


def test_multi_objective_model_reads_the_chosen_objective():
    """On the multi-objective zoo model, localization and the head search read one head column
    (objective=) or the gated score (default); harmlessness carries the harmful effect."""
    from reward_lens_tl.zoo import load_task, zoo_path

    model = HookedRewardModel.from_pretrained(zoo_path("multi"))
    pairs = load_task().task.contrast_pairs("harmful", 4, 0, filler_swaps=2)
    table = gt.localization(model, pairs, objective="harmlessness")
    assert table.share("planted", "resid_pre 0") == 1.0
    found = gt.minimal_head_sets(model, pairs, max_size=1, objective="harmlessness")
    clean, corrupted = encode_contrast(pairs[0])
    grid = activation_patching(
        model, clean, corrupted, site="z", alignment="exact", objective="harmlessness"
    )
    assert torch.allclose(found.restored[0], grid.values.reshape(-1), atol=1e-5)


def test_table_lookups_are_unambiguous(table):
    with pytest.raises(ValueError, match="several features"):
        table.share("reward", "resid_pre 2")
    with pytest.raises(KeyError, match="harmfull"):
        table.first_site("reward", "harmfull")
    assert table.share("reward", "resid_pre 2", "sycophancy") >= 0.9
