"""Cross-model comparison: identities on a model compared with itself, a planted ablation found
by feature, objectives of the multi-objective model, intervals against scipy, and typed
errors."""

import copy
import random

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats as sps

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.crossmodel import (
    BackboneMismatchError,
    ExplicitReward,
    UnknownModelError,
    compare_models,
    feature_effects,
    sweep_tau,
)
from reward_lens_tl.errors import EmptyInputError, InvalidArgumentError
from reward_lens_tl.zoo import FEATURES, load_task, zoo_path
from reward_lens_tl.zoo.vocab import FILLER_WORDS, HARMFUL_WORDS, VOCAB
from tests.figures import check_figure


@pytest.fixture(scope="module")
def scalar(zoo_scalar):
    return zoo_scalar


@pytest.fixture(scope="module")
def ablated(scalar):
    """A copy of the scalar model whose harmful words embed like an average filler word."""
    model = copy.deepcopy(scalar)
    with torch.no_grad():
        filler = model.W_E[[VOCAB[w] for w in FILLER_WORDS]].mean(0)
        model.W_E[[VOCAB[w] for w in HARMFUL_WORDS]] = filler
    return model


@pytest.fixture(scope="module")
def irm(zoo_implicit):
    return zoo_implicit


@pytest.fixture(scope="module")
def pairs():
    task, rng = load_task().task, random.Random(11)
    out = []
    while len(out) < 24:
        a, b = task.response_pair(rng, max_words=10)
        if a.score != b.score:
            out.append((a, b) if a.score > b.score else (b, a))
    return out


@pytest.fixture(scope="module")
def self_comparison(scalar, pairs):
    return compare_models({"a": scalar, "b": scalar}, pairs, n_boot=200, batch_size=8)


def test_a_model_compared_with_itself(self_comparison):
    row = self_comparison.agreement().iloc[0]
    assert row["pairwise_agreement"] == 1.0
    assert row["reward_pearson"] == pytest.approx(1.0, abs=1e-6)
    assert row["margin_spearman"] == pytest.approx(1.0, abs=1e-9)
    assert row["pairwise_agreement_low"] == 1.0  # every resample agrees too
    cka = self_comparison.cka("a", "b")
    # the first site is the embedding of the reading token (<eos>, the same in every row): a
    # constant representation has no CKA (NaN); every other site matches itself exactly
    assert cka.shape == (4, 4) and bool(cka[0].isnan().all())
    assert torch.allclose(cka.diagonal()[1:], torch.ones(3), atol=1e-6)
    rho, lo, hi = self_comparison.attribution_rank_correlation("a", "b")
    assert rho == pytest.approx(1.0) and lo == pytest.approx(1.0)
    assert self_comparison.disagreements("a", "b").empty
    depth = self_comparison.crystallization()
    assert depth["depth"].iloc[0] == depth["depth"].iloc[1]


def test_sweep_tau_of_a_model_with_itself(self_comparison, scalar):
    sweep = pd.Series({tok: float(i % 7) + 0.1 * i for i, tok in enumerate(FILLER_WORDS)})
    cmp = type(self_comparison)(self_comparison.runs, n_boot=50, sweeps={"a": sweep, "b": sweep})
    assert cmp.sweep_tau()["tau"].iloc[0] == pytest.approx(1.0)
    assert cmp.summary()["sweep_tau"].iloc[0] == pytest.approx(1.0)
    reversed_sweep = {k: -v for k, v in sweep.items()}
    assert sweep_tau(sweep, reversed_sweep)["tau"] == pytest.approx(-1.0)
    with pytest.raises(EmptyInputError, match="share 0"):
        sweep_tau({"x": 1.0}, {"y": 2.0})


def test_ablated_copy_is_flagged_for_that_feature_only(scalar, ablated):
    task = load_task().task
    fx = feature_effects({"scalar": scalar, "ablated": ablated}, task, n=32, n_boot=300)
    assert fx.flagged("scalar", "ablated") == ["harmful"]
    assert fx.flagged("scalar", "scalar") == []
    assert fx.flagged("rule", "scalar") == []  # the explicit RM learned what was planted
    table = fx.compare("scalar", "ablated").set_index("feature")
    assert abs(table.loc["harmful", "effect_ablated"]) < 0.1 * abs(
        table.loc["harmful", "effect_scalar"]
    )
    # matched to the rule, the scalar model's effects are the planted weights
    frame = fx.to_dataframe().query("model == 'scalar'").set_index("feature")
    rule = task.rule
    for f in FEATURES:
        assert frame.loc[f, "effect"] == pytest.approx(rule.weight(f), rel=0.1)
    # the figure: one bar per model and feature with its CI, grouped by feature
    fig = check_figure(fx.plot(), static=fx.plot(backend="matplotlib"), x_labels=list(FEATURES))
    assert [t.name for t in fig.data] == list(fx.models)
    scalar_bars = fig.data[list(fx.models).index("scalar")]
    assert list(scalar_bars.y) == pytest.approx([frame.loc[f, "effect"] for f in FEATURES])
    assert list(scalar_bars.error_y.array) == pytest.approx(
        [frame.loc[f, "ci_high"] - frame.loc[f, "effect"] for f in FEATURES]
    )
    centres = np.mean([t.x for t in fig.data], axis=0)
    assert list(centres) == pytest.approx(list(range(len(FEATURES))))  # each group at its tick


def test_disagreements_are_ranked(scalar, ablated):
    pairs = load_task().task.contrast_pairs("harmful", 16, seed=5)
    cmp = compare_models({"scalar": scalar, "ablated": ablated}, pairs, n_boot=100)
    table = cmp.disagreements("scalar", "ablated")
    assert len(table) > 0 and table["difference"].is_monotonic_decreasing
    assert bool(((table["margin_scalar"] > 0) != (table["margin_ablated"] > 0)).all())
    top = cmp.top_k(3)
    assert [label for label, _ in top] == [str(p) for p in table["pair"].head(3)]
    assert [v for _, v in top] == pytest.approx(table["difference"].head(3).tolist())


def test_implicit_and_explicit_and_objectives(scalar, irm, pairs):
    multi = HookedRewardModel.from_pretrained(zoo_path("multi"))
    models = {
        "scalar": scalar,
        "implicit": irm,
        "helpfulness": ExplicitReward(multi, "helpfulness"),
        "harmlessness": ExplicitReward(multi, "harmlessness"),
    }
    cmp = compare_models(models, pairs, n_boot=100, batch_size=12)
    summary = cmp.summary()
    assert len(summary) == 6
    row = summary.set_index(["model_a", "model_b"]).loc[("scalar", "implicit")]
    assert 0.5 < row["pairwise_agreement"] <= 1.0 and pd.isna(row["attribution_spearman"])
    assert cmp.cka("scalar", "implicit").shape == (4, 3)  # 3 + 1 sites vs 2 + 1 sites
    rho = cmp.attribution_rank_correlation("helpfulness", "harmlessness")[0]
    assert -1.0 <= rho < 0.999  # same backbone, different read-out directions
    with pytest.raises(BackboneMismatchError, match="different backbones"):
        cmp.attribution_rank_correlation("scalar", "implicit")
    with pytest.raises(UnknownModelError):
        cmp.run("nope")
    # the agreement matrix: shares on a 0..1 scale, the diagonal 1, each value in its cell
    names = list(cmp.names)
    fig = check_figure(cmp.plot(), static=cmp.plot(backend="matplotlib"), x_labels=names)
    heat = fig.data[0]
    assert (heat.zmin, heat.zmax, heat.zmid) == (0.0, 1.0, None) and heat.texttemplate
    i, j = names.index("scalar"), names.index("implicit")
    assert heat.z[i][j] == heat.z[j][i] == row["pairwise_agreement"]
    assert all(heat.z[k][k] == 1.0 for k in range(len(names)))
    # the lens: one line per model over relative depth, a band each; hover names the site
    fig = check_figure(cmp.plot_lens(), static=cmp.plot_lens(backend="matplotlib"))
    lines = [t for t in fig.data if t.fill != "toself"]
    assert [t.name for t in lines] == names
    scalar_run = cmp.run("scalar")
    assert list(lines[0].customdata) == list(scalar_run.lens_labels)
    assert lines[0].x[0] == 0.0 and lines[0].x[-1] == 1.0 and len(lines[1].x) != len(lines[0].x)
    final = scalar_run.lens_margins / scalar_run.lens_margins[-1].std()
    assert list(lines[0].y) == pytest.approx(final.mean(1).tolist(), rel=1e-5)
    # CKA: a's sites down, b's across, 0..1
    fig = check_figure(
        cmp.plot_cka("scalar", "implicit"),
        static=cmp.plot_cka("scalar", "implicit", backend="matplotlib"),
        x_labels=list(cmp.run("implicit").representations),
    )
    assert list(fig.layout.yaxis.ticktext) == list(scalar_run.representations)
    assert (fig.data[0].zmin, fig.data[0].zmax) == (0.0, 1.0)
    torch.testing.assert_close(
        torch.tensor(fig.data[0].z), cmp.cka("scalar", "implicit").double(), equal_nan=True
    )


def _scipy_interval(samples, statistic, n_boot, seed):
    """scipy's own paired percentile bootstrap, called directly."""
    res = sps.bootstrap(
        samples,
        statistic,
        n_resamples=n_boot,
        method="percentile",
        paired=True,
        vectorized=False,
        rng=np.random.default_rng(seed),
    )
    return res.confidence_interval.low, res.confidence_interval.high


def test_intervals_are_scipys_bootstrap_over_pairs(scalar, ablated):
    pairs = load_task().task.contrast_pairs("harmful", 16, seed=5)
    cmp = compare_models({"s": scalar, "a": ablated}, pairs, n_boot=150, seed=3)
    ms, ma = cmp.run("s").margins.double().numpy(), cmp.run("a").margins.double().numpy()
    row = cmp.agreement().iloc[0]
    rho = lambda x, y: sps.spearmanr(x, y).statistic
    assert row["margin_spearman"] == pytest.approx(rho(ms, ma), abs=1e-12)
    low, high = _scipy_interval((ms, ma), rho, 150, 3)
    assert (row["margin_spearman_low"], row["margin_spearman_high"]) == pytest.approx(
        (low, high), abs=1e-12
    )
    acc = cmp.accuracy().set_index("model").loc["a"]
    prefers = (ma > 0).astype(float)
    res = sps.bootstrap((prefers,), np.mean, n_resamples=150, method="percentile",
                        rng=np.random.default_rng(3))  # fmt: skip
    assert acc["accuracy"] == pytest.approx(prefers.mean())
    assert (acc["ci_low"], acc["ci_high"]) == pytest.approx(tuple(res.confidence_interval))


def test_bad_comparisons(scalar, pairs):
    with pytest.raises(InvalidArgumentError, match="at least two"):
        compare_models([scalar], pairs)
    with pytest.raises(InvalidArgumentError, match="unique"):
        compare_models([scalar, scalar], pairs)
    with pytest.raises(EmptyInputError):
        compare_models({"a": scalar, "b": scalar}, [])


def test_report_implicit_section(scalar):
    """The report's implicit-reward section on the zoo, as markdown with its figure."""
    from reward_lens_tl.report import zoo_pairs
    from reward_lens_tl.report.page import sections_markdown
    from reward_lens_tl.report.zoo import implicit_section

    task = load_task().task
    pairs = zoo_pairs(task)
    ctx = {"model": scalar, "task": task, "pairs": pairs, "kept": range(len(pairs)),
           "truncation": "error", "numbers": {}}  # fmt: skip
    text, files = sections_markdown([implicit_section(ctx)])
    assert "implicit_feature_effects.png" in files
    assert "| topic_match |" in text and "agree on" in text
