"""Statistics of a model comparison: linear CKA, Kendall τ-b on sweeps, crystallization depth.

Correlations and bootstrap intervals come from `reward_lens_tl.stats`.

Examples:
    >>> import torch
    >>> x = torch.randn(50, 8)
    >>> rotation = torch.linalg.qr(torch.randn(8, 8))[0]
    >>> round(linear_cka(x, x), 6), round(linear_cka(x, 3 * x @ rotation), 6)
    (1.0, 1.0)
    >>> sweep_tau({"a": 1.0, "b": 2.0, "c": 3.0}, {"a": 10, "b": 20, "c": 30, "d": 0})["tau"]
    1.0
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..errors import EmptyInputError, InvalidArgumentError
from ..stats import correlation_test

__all__ = [
    "crystallization_depth",
    "linear_cka",
    "sweep_tau",
]


def linear_cka(x: Tensor, y: Tensor) -> float:
    """Linear CKA between representations of the same `n` examples.

    CKA is `‖Yᵀ X‖²_F / (‖Xᵀ X‖_F ‖Yᵀ Y‖_F)` after centring (1 for identical inputs, and
    invariant to rotation and isotropic scaling).

    Args:
        x: representations `[n, d1]`.
        y: representations `[n, d2]`.

    Returns:
        The CKA.

    Raises:
        InvalidArgumentError: `x` and `y` have different numbers of examples.

    Examples:
        >>> import torch
        >>> from reward_lens_tl.crossmodel import linear_cka
        >>> gen = torch.Generator().manual_seed(0)
        >>> x, noise = torch.randn(50, 8, generator=gen), torch.randn(50, 4, generator=gen)
        >>> round(linear_cka(x, 2 * x + 1), 6)  # the same representation, scaled and shifted
        1.0
        >>> round(linear_cka(x, x[:, :4]), 3), round(linear_cka(x, noise), 3)  # part; unrelated
        (0.77, 0.103)
    """
    if x.shape[0] != y.shape[0]:
        raise InvalidArgumentError(f"CKA needs the same examples: {x.shape[0]} vs {y.shape[0]}")
    x = x.double() - x.double().mean(0)
    y = y.double() - y.double().mean(0)
    hsic = (y.T @ x).pow(2).sum()
    norm = (x.T @ x).pow(2).sum().sqrt() * (y.T @ y).pow(2).sum().sqrt()
    return float(hsic / norm) if norm > 0 else float("nan")


def as_scores(sweep: Any) -> dict:
    """Per-candidate scores of a token sweep.

    Args:
        sweep: a `dict`, a pandas `Series`, a one-column `DataFrame`, or an object with
            `.scores` / `to_series()`.

    Returns:
        Candidate -> score.

    Raises:
        InvalidArgumentError: `sweep` is none of these.
    """
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
    """Kendall τ-b between two token sweeps on their shared candidates.

    Args:
        a: the first sweep (see `as_scores`).
        b: the second sweep.

    Returns:
        `tau` and the figures behind it.

    Raises:
        EmptyInputError: too few shared candidates.

    Examples:
        >>> from reward_lens_tl.crossmodel import sweep_tau
        >>> a = {"good": 1.0, "fine": 2.0, "great": 3.0, "best": 4.0}
        >>> b = {"good": 10.0, "fine": 30.0, "great": 20.0, "best": 40.0, "bad": -5.0}
        >>> result = sweep_tau(a, b)  # "bad" is not in `a`: left out
        >>> round(result["tau"], 4), result["n_shared"]  # one discordant pair of 6: (5 − 1) / 6
        (0.6667, 4)
    """
    sa, sb = as_scores(a), as_scores(b)
    shared = [k for k in sa if k in sb]
    if len(shared) < 2:
        raise EmptyInputError(
            f"the two sweeps share {len(shared)} candidate(s); τ needs at least 2 (were they run "
            "over the same candidate tokens?)"
        )
    res = correlation_test([sa[k] for k in shared], [sb[k] for k in shared], "kendall")
    return {"tau": res.statistic, "p_value": res.pvalue, "n_shared": len(shared)}


def crystallization_depth(margins: Tensor, fraction: float = 0.5) -> np.ndarray:
    """Per pair, the relative depth of the first site whose lens margin reaches `fraction`.

    Depth is site index / (sites − 1); `fraction` is of the final margin, in its sign (NaN
    where it is 0).

    Args:
        margins: lens margins `[site, pair]`.
        fraction: the share of the final margin.

    Returns:
        The depths `[pair]`.

    Examples:
        >>> import torch
        >>> from reward_lens_tl.crossmodel import crystallization_depth
        >>> margins = torch.tensor([[0.0, 1.0, -0.2, 0.3],  # site 0 (e.g. the embeddings)
        ...                         [0.6, 1.0, -0.1, 0.2],  # site 1
        ...                         [1.0, 1.0, -1.0, 0.0]])  # final site; 4 pairs
        >>> crystallization_depth(margins).tolist()  # NaN: the final margin is 0
        [0.5, 0.0, 1.0, nan]
        >>> crystallization_depth(margins, fraction=0.9).tolist()
        [1.0, 0.0, 1.0, nan]
    """
    m = margins.double()
    final = m[-1]
    sign = torch.sign(final)
    reached = (m * sign) >= fraction * final.abs()
    first = reached.float().argmax(0).double()
    depth = first / max(m.shape[0] - 1, 1)
    depth[final == 0] = float("nan")
    return depth.numpy()
