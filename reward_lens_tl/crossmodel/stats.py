"""Statistics of a model comparison: bootstrap intervals, linear CKA, Kendall τ-b on sweeps.

>>> import torch
>>> x = torch.randn(50, 8)
>>> rotation = torch.linalg.qr(torch.randn(8, 8))[0]
>>> round(linear_cka(x, x), 6), round(linear_cka(x, 3 * x @ rotation), 6)
(1.0, 1.0)
>>> sweep_tau({"a": 1.0, "b": 2.0, "c": 3.0}, {"a": 10, "b": 20, "c": 30, "d": 0})["tau"]
1.0
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..errors import EmptyInputError, InvalidArgumentError


def bootstrap(
    stat: Callable[[np.ndarray], float], n: int, n_boot: int = 1000, seed: int = 0
) -> tuple[float, float, float]:
    """``(estimate, low, high)``: ``stat`` on all ``n`` items and the 2.5/97.5 percentiles of
    ``stat`` over ``n_boot`` resamples of item indices (resampled with replacement)."""
    if n < 1:
        raise EmptyInputError("bootstrap needs at least one item")
    rng = np.random.default_rng(seed)
    everything = np.arange(n)
    estimate = float(stat(everything))
    draws = np.array([stat(rng.integers(0, n, n)) for _ in range(n_boot)], dtype=float)
    draws = draws[np.isfinite(draws)]
    if not len(draws):
        return estimate, float("nan"), float("nan")
    return estimate, float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))


def bootstrap_mean(
    values: np.ndarray, n_boot: int = 1000, seed: int = 0
) -> tuple[float, float, float]:
    """:func:`bootstrap` of the mean of ``values``."""
    values = np.asarray(values, dtype=float)
    return bootstrap(lambda i: float(values[i].mean()), len(values), n_boot, seed)


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    x, y = x - x.mean(), y - y.mean()
    denom = np.sqrt((x * x).sum() * (y * y).sum())
    return float((x * y).sum() / denom) if denom > 0 else float("nan")


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import spearmanr

    if len(x) < 2 or np.all(x == x[0]) or np.all(y == y[0]):
        return float("nan")
    return float(spearmanr(x, y).statistic)


def linear_cka(x: Tensor, y: Tensor) -> float:
    """Linear CKA between representations ``x [n, d1]`` and ``y [n, d2]`` of the same ``n``
    examples: ``‖Yᵀ X‖²_F / (‖Xᵀ X‖_F ‖Yᵀ Y‖_F)`` after centring (1 for identical inputs, and
    invariant to rotation and isotropic scaling)."""
    if x.shape[0] != y.shape[0]:
        raise InvalidArgumentError(f"CKA needs the same examples: {x.shape[0]} vs {y.shape[0]}")
    x = x.double() - x.double().mean(0)
    y = y.double() - y.double().mean(0)
    hsic = (y.T @ x).pow(2).sum()
    norm = (x.T @ x).pow(2).sum().sqrt() * (y.T @ y).pow(2).sum().sqrt()
    return float(hsic / norm) if norm > 0 else float("nan")


def as_scores(sweep: Any) -> dict:
    """Per-candidate scores from a ``dict``, a pandas ``Series``, a one-column ``DataFrame``,
    or an object with ``.scores`` / ``to_series()``."""
    if hasattr(sweep, "to_series") and not hasattr(sweep, "index"):
        sweep = sweep.to_series()
    if hasattr(sweep, "scores") and not isinstance(sweep, Mapping):
        sweep = sweep.scores
    if hasattr(sweep, "columns"):
        if len(sweep.columns) != 1:
            raise InvalidArgumentError(
                f"a sweep frame needs exactly one score column, got {list(sweep.columns)}"
            )
        sweep = sweep.iloc[:, 0]
    if hasattr(sweep, "items"):
        return {k: float(v) for k, v in sweep.items()}
    raise InvalidArgumentError(
        f"cannot read per-candidate scores from {type(sweep).__name__}: pass a dict or pandas "
        "Series keyed by candidate"
    )


def sweep_tau(a: Any, b: Any) -> dict:
    """Kendall τ-b between two token sweeps on their shared candidates."""
    from scipy.stats import kendalltau

    sa, sb = as_scores(a), as_scores(b)
    shared = [k for k in sa if k in sb]
    if len(shared) < 2:
        raise EmptyInputError(
            f"the two sweeps share {len(shared)} candidate(s); τ needs at least 2 (were they run "
            "over the same candidate tokens?)"
        )
    res = kendalltau([sa[k] for k in shared], [sb[k] for k in shared], variant="b")
    return {"tau": float(res.statistic), "p_value": float(res.pvalue), "n_shared": len(shared)}


def crystallization_depth(margins: Tensor, fraction: float = 0.5) -> np.ndarray:
    """Per pair, the relative depth (site index / (sites − 1)) of the first site whose lens
    margin reaches ``fraction`` of the final margin in its sign (NaN where it is 0)."""
    m = margins.double()
    final = m[-1]
    sign = torch.sign(final)
    reached = (m * sign) >= fraction * final.abs()
    first = reached.float().argmax(0).double()
    depth = first / max(m.shape[0] - 1, 1)
    depth[final == 0] = float("nan")
    return depth.numpy()
