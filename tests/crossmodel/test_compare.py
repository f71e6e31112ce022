"""`compare_models`: identities on a model compared with itself, ranked disagreements, intervals
against scipy's bootstrap, and typed errors."""

import numpy as np
import pytest
import torch
from scipy import stats as sps

from reward_lens_tl.crossmodel import (
    compare_models,
)
from reward_lens_tl.errors import EmptyInputError, InvalidArgumentError
from reward_lens_tl.zoo import load_task


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


def test_disagreements_are_ranked(scalar, ablated):
    pairs = load_task().task.contrast_pairs("harmful", 16, seed=5)
    cmp = compare_models({"scalar": scalar, "ablated": ablated}, pairs, n_boot=100)
    table = cmp.disagreements("scalar", "ablated")
    assert len(table) > 0 and table["difference"].is_monotonic_decreasing
    assert bool(((table["margin_scalar"] > 0) != (table["margin_ablated"] > 0)).all())
    top = cmp.top_k(3)
    assert [label for label, _ in top] == [str(p) for p in table["pair"].head(3)]
    assert [v for _, v in top] == pytest.approx(table["difference"].head(3).tolist())


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
