"""reward_lens_tl.stats against independent computations: numpy by hand, or scipy.stats called
directly, on known data with ties, constant sides, NaN and infinite values."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
import torch
from scipy import stats as sps

from reward_lens_tl import stats
from reward_lens_tl.errors import EmptyInputError, InvalidArgumentError, ShapeMismatchError

X = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0])  # ties: 1, 3, 5
Y = np.array([2.0, 7.0, 1.0, 8.0, 2.0, 8.0, 1.0, 8.0, 2.0, 8.0])  # ties: 1, 2, 8


def pearson_by_hand(x, y):
    dx, dy = x - x.mean(), y - y.mean()
    return float((dx * dy).sum() / math.sqrt((dx * dx).sum() * (dy * dy).sum()))


def average_ranks(v):
    """1-based ranks, tied values sharing the mean of their positions."""
    order = np.argsort(v, kind="stable")
    ranks = np.empty(len(v))
    ranks[order] = np.arange(1, len(v) + 1)
    for value in np.unique(v):
        tied = v == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def kendall_tau_b_by_hand(x, y):
    concordant = discordant = ties_x = ties_y = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        sx, sy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
        if sx == 0 and sy == 0:
            continue
        if sx == 0:
            ties_x += 1
        elif sy == 0:
            ties_y += 1
        elif sx == sy:
            concordant += 1
        else:
            discordant += 1
    n0 = concordant + discordant
    return (concordant - discordant) / math.sqrt((n0 + ties_x) * (n0 + ties_y))


# ---- correlations ------------------------------------------------------------------------------
def test_correlations_match_hand_computations_with_ties():
    assert stats.pearson(X, Y) == pytest.approx(pearson_by_hand(X, Y), abs=1e-12)
    rank_rho = pearson_by_hand(average_ranks(X), average_ranks(Y))
    assert stats.spearman(X, Y) == pytest.approx(rank_rho, abs=1e-12)
    assert stats.kendall(X, Y) == pytest.approx(kendall_tau_b_by_hand(X, Y), abs=1e-12)
    # the hand computations are not trivially equal to one another on these data
    assert len({round(v, 6) for v in (pearson_by_hand(X, Y), rank_rho)}) == 2


@pytest.mark.parametrize(
    ("method", "scipy_fn"),
    [("pearson", sps.pearsonr), ("spearman", sps.spearmanr), ("kendall", sps.kendalltau)],
)
def test_correlation_test_matches_scipy_with_pvalue(method, scipy_fn):
    test = stats.correlation_test(X, Y, method)
    ref = scipy_fn(X, Y)
    assert test.n == len(X)
    assert test.statistic == pytest.approx(float(ref.statistic), abs=1e-12)
    assert test.pvalue == pytest.approx(float(ref.pvalue), rel=1e-9)


def test_kendall_tau_c_variant():
    want = float(sps.kendalltau(X, Y, variant="c").statistic)
    assert stats.kendall(X, Y, variant="c") == pytest.approx(want, abs=1e-12)
    assert want != pytest.approx(stats.kendall(X, Y), abs=1e-6)


@pytest.mark.parametrize("fn", [stats.pearson, stats.spearman, stats.kendall])
def test_degenerate_input_is_nan_without_a_warning(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # scipy's ConstantInputWarning would fail here
        assert math.isnan(fn([2.0, 2.0, 2.0, 2.0], [1.0, 2.0, 3.0, 4.0]))  # constant x
        assert math.isnan(fn([1.0, 2.0, 3.0], [5.0, 5.0, 5.0]))  # constant y
        assert math.isnan(fn([1.0], [2.0]))  # one pair
        assert math.isnan(fn([], []))  # none
    test = stats.correlation_test([1.0, 1.0, 1.0], [1.0, 2.0, 3.0], "spearman")
    assert math.isnan(test.statistic) and math.isnan(test.pvalue) and test.n == 3


def test_nan_policy():
    x, y = X.copy(), Y.copy()
    x[2], y[7] = np.nan, np.nan
    keep = ~(np.isnan(x) | np.isnan(y))
    assert math.isnan(stats.spearman(x, y))  # propagate (default)
    omitted = stats.spearman(x, y, nan_policy="omit")
    want = pearson_by_hand(average_ranks(x[keep]), average_ranks(y[keep]))
    assert omitted == pytest.approx(want, abs=1e-12)
    assert stats.correlation_test(x, y, "pearson", nan_policy="omit").n == int(keep.sum()) == 8
    with pytest.raises(InvalidArgumentError, match="2 pair"):
        stats.pearson(x, y, nan_policy="raise")
    with pytest.raises(InvalidArgumentError, match="nan_policy"):
        stats.pearson(x, y, nan_policy="drop")  # type: ignore[arg-type]


def test_infinite_and_mismatched_inputs_are_refused():
    with pytest.raises(InvalidArgumentError, match="infinite"):
        stats.pearson([1.0, math.inf, 3.0], [1.0, 2.0, 3.0])
    with pytest.raises(ShapeMismatchError, match="pair up"):
        stats.spearman([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(InvalidArgumentError, match="method"):
        stats.correlation_test(X, Y, "cosine")  # type: ignore[arg-type]
    # also where the correlation is undefined (constant input): a typo is not a NaN
    with pytest.raises(InvalidArgumentError, match="method"):
        stats.correlation_test([1.0, 1.0, 1.0], [1.0, 2.0, 3.0], "pearsn")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="variant"):
        stats.correlation_test(X, Y, "kendall", variant="a")  # type: ignore[arg-type]


def test_tensors_and_grids_pair_cell_by_cell():
    grid_a, grid_b = torch.tensor(X.reshape(2, 5)), torch.tensor(Y.reshape(2, 5)).float()
    assert stats.spearman(grid_a, grid_b) == pytest.approx(stats.spearman(X, Y), abs=1e-7)
    needs_grad = torch.tensor(X, requires_grad=True)
    assert stats.pearson(needs_grad, Y) == pytest.approx(pearson_by_hand(X, Y), abs=1e-12)


def test_fisher_z_interval():
    r = stats.pearson(X, Y)
    lo, hi = stats.fisher_z_interval(r, len(X), confidence=0.9)
    q = sps.norm.ppf(0.95)
    half = q / math.sqrt(len(X) - 3)
    assert lo == pytest.approx(math.tanh(math.atanh(r) - half), abs=1e-12)
    assert hi == pytest.approx(math.tanh(math.atanh(r) + half), abs=1e-12)
    assert all(math.isnan(v) for v in stats.fisher_z_interval(r, 3))
    assert all(math.isnan(v) for v in stats.fisher_z_interval(math.nan, 50))


# ---- bootstrap ---------------------------------------------------------------------------------
def test_bootstrap_ci_is_scipys_percentile_interval():
    v = np.random.default_rng(3).normal(size=40)
    ci = stats.bootstrap_ci(v, n_boot=500, confidence=0.9, seed=7)
    ref = sps.bootstrap(
        (v,),
        np.mean,
        n_resamples=500,
        confidence_level=0.9,
        method="percentile",
        rng=np.random.default_rng(7),
    )
    assert ci.estimate == pytest.approx(v.mean(), abs=1e-12)
    assert ci.low == pytest.approx(ref.confidence_interval.low, abs=1e-12)
    assert ci.high == pytest.approx(ref.confidence_interval.high, abs=1e-12)
    # by hand: percentiles of the resampled means drawn the way scipy draws them
    idx = np.random.default_rng(7).integers(0, len(v), (500, len(v)))
    means = v[idx].mean(-1)
    assert ci.low == pytest.approx(np.percentile(means, 5), abs=1e-12)
    assert ci.high == pytest.approx(np.percentile(means, 95), abs=1e-12)


def test_bootstrap_ci_is_reproducible_and_seeded():
    v = np.random.default_rng(0).exponential(size=30)
    a, b = (stats.bootstrap_ci(v, np.median, n_boot=300, seed=1) for _ in range(2))
    other = stats.bootstrap_ci(v, np.median, n_boot=300, seed=2)
    assert a == b
    assert (other.low, other.high) != (a.low, a.high)
    assert a.low <= a.estimate <= a.high


def test_paired_bootstrap_resamples_rows_together():
    rng = np.random.default_rng(5)
    x = rng.normal(size=25)
    y = x + rng.normal(scale=0.5, size=25)
    ci = stats.bootstrap_ci((x, y), stats.pearson, n_boot=200, seed=4)
    idx = np.random.default_rng(4).integers(0, 25, (200, 25))
    draws = np.array([pearson_by_hand(x[i], y[i]) for i in idx])
    assert ci.estimate == pytest.approx(pearson_by_hand(x, y), abs=1e-12)
    assert ci.low == pytest.approx(np.percentile(draws, 2.5), abs=1e-9)
    assert ci.high == pytest.approx(np.percentile(draws, 97.5), abs=1e-9)


def test_bootstrap_leaves_out_undefined_resamples():
    x, y = np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 3.0, 2.0, 4.0])
    ci = stats.bootstrap_ci((x, y), stats.spearman, n_boot=400, seed=0)
    idx = np.random.default_rng(0).integers(0, 4, (400, 4))
    draws = np.array([stats.spearman(x[i], y[i]) for i in idx])
    assert np.isnan(draws).any()  # some resamples repeat one row: ρ undefined
    finite = draws[np.isfinite(draws)]
    assert ci.low == pytest.approx(np.percentile(finite, 2.5), abs=1e-12)
    assert ci.high == pytest.approx(np.percentile(finite, 97.5), abs=1e-12)
    never = stats.bootstrap_ci((np.ones(5), x[:1].repeat(5)), stats.pearson, n_boot=50)
    assert all(math.isnan(v) for v in never)


def test_bootstrap_degenerate_samples():
    assert stats.bootstrap_ci([2.5]) == (2.5, 2.5, 2.5)
    assert stats.bootstrap_ci([0.5] * 12) == (0.5, 0.5, 0.5)
    with pytest.raises(EmptyInputError):
        stats.bootstrap_ci([])
    with pytest.raises(ShapeMismatchError):
        stats.bootstrap_ci(([1.0, 2.0], [1.0]), stats.pearson)
    with pytest.raises(InvalidArgumentError, match="infinite"):
        stats.bootstrap_ci([1.0, math.inf])


# ---- effect sizes ------------------------------------------------------------------------------
def test_cohens_d_matches_the_pooled_t_statistic():
    a, b = X, Y[:7]
    t = float(sps.ttest_ind(a, b, equal_var=True).statistic)
    assert stats.cohens_d(a, b) == pytest.approx(t * math.sqrt(1 / len(a) + 1 / len(b)))
    assert math.isnan(stats.cohens_d([1.0, 1.0], [1.0, 1.0]))  # no spread
    assert math.isnan(stats.cohens_d([1.0], [2.0]))  # no degrees of freedom
    assert math.isnan(stats.cohens_d([], [1.0, 2.0]))


def test_cohens_dz_matches_the_one_sample_t_statistic():
    d = X - Y
    t = float(sps.ttest_1samp(d, 0.0).statistic)
    assert stats.cohens_dz(d) == pytest.approx(t / math.sqrt(len(d)))
    assert math.isnan(stats.cohens_dz([0.3, 0.3, 0.3]))
    assert math.isnan(stats.cohens_dz([1.0]))


# ---- one module, used everywhere ---------------------------------------------------------------
def test_callers_share_the_module_and_its_nan_convention():
    from reward_lens_tl.implicit import fit
    from reward_lens_tl.patching import compare
    from reward_lens_tl.zoo import evaluate

    assert compare.spearman is stats.spearman
    assert evaluate.pearson is stats.pearson
    assert fit.spearman is stats.spearman
    # the zoo's pearson once returned 0 for a constant side; it is NaN now, as everywhere
    assert math.isnan(evaluate.pearson(torch.ones(5), torch.arange(5.0)))


#: Modules that still compute an interval themselves, and why (empty it as they move over).
STILL_SEPARATE = {
    "evals/metrics.py": "the benchmarks' stratified bootstrap of several figures at once",
}


def test_correlations_and_intervals_come_from_the_stats_module():
    """No module but reward_lens_tl/stats.py calls scipy's correlations or bootstrap, or
    computes np.corrcoef or percentile intervals, itself."""
    import pathlib
    import re

    root = pathlib.Path(stats.__file__).parent
    pattern = re.compile(
        r"spearmanr\(|pearsonr\(|kendalltau\(|corrcoef\(|stats\.bootstrap\(|"
        r"import bootstrap\b|np\.percentile\(|np\.quantile\("
    )
    offenders = sorted(
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if path != root / "stats.py" and pattern.search(path.read_text())
    )
    assert offenders == sorted(STILL_SEPARATE)
