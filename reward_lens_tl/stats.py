"""The package's statistics, in one place.

Correlations, bootstrap intervals and effect sizes, computed by `scipy.stats`.

Every function takes data that numpy can read as floats (lists, numpy arrays, tensors) and
follows the same conventions:

- **Shapes**: samples are 1-D; the two sides of a correlation may be arrays of any one shape,
  paired cell by cell (two grids of patching effects correlate over their cells).

- **Degenerate input gives NaN**, never a made-up number and never an error: a correlation
  where either side is constant (nothing varies, so nothing can co-vary) or with fewer than two
  pairs, an effect size whose standard deviation is 0 or that has too few values. A caller that
  needs a number decides explicitly what NaN means to it (`math.isnan`, `np.nan_to_num`).
- **Missing values** (NaN) follow `nan_policy`: `"propagate"` (default, the result is NaN),
  `"omit"` (drop the pairs where either side is NaN) or `"raise"`
  (`InvalidArgumentError`).
- **Infinite values are refused** (`InvalidArgumentError`): they
  are neither a number nor missing, and silently dropping them would bias the result.
- **Bootstrap intervals are seeded**: the same `seed` gives the same interval. They are the
  percentile intervals of `scipy.stats.bootstrap`; resamples on which the statistic is
  NaN (a constant resample of a correlation) are left out of the percentiles, and one value
  (or a constant sample) gives the zero-width interval every resample agrees on.

Examples:
    >>> x, y = [1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 2.0, 4.0]
    >>> round(pearson(x, y), 6), round(spearman(x, y), 6), round(kendall(x, y), 6)
    (0.8, 0.8, 0.666667)
    >>> spearman([1.0, 1.0, 1.0], [1.0, 2.0, 3.0])  # a constant side
    nan
    >>> spearman([1.0, 2.0, float("nan"), 4.0], y, nan_policy="omit")
    1.0
    >>> ci = bootstrap_ci([0.9, 1.1, 1.0, 1.2, 0.8], seed=0)
    >>> ci.estimate, ci.low < 1.0 < ci.high
    (1.0, True)
    >>> round(cohens_dz([1.0, 2.0, 3.0]), 6)
    2.0
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from .errors import EmptyInputError, InvalidArgumentError, ShapeMismatchError
from .signatures import pasted_docs

NanPolicy = Literal["propagate", "omit", "raise"]
Method = Literal["pearson", "spearman", "kendall"]
N_BOOT = 1000
CONFIDENCE = 0.95


# ---- inputs ------------------------------------------------------------------------------------
def as_vector(values: ArrayLike, name: str = "values") -> np.ndarray:
    """`values` as a 1-D float64 array (a tensor is detached and moved to the CPU).

    Infinite values are refused.

    Args:
        values: The data: a list, a numpy array or a tensor of any dtype numpy reads as float.
        name: What `values` is called in the error message when it is not 1-D or holds an
            infinite value.

    Returns:
        A 1-D float64 numpy array.

    Raises:
        ShapeMismatchError: `values` is not 1-D.
        InvalidArgumentError: `values` holds an infinite value.

    Examples:
        >>> from reward_lens_tl.stats import as_vector
        >>> as_vector([1, 2, 3])
        array([1., 2., 3.])
    """
    v = _as_array(values, name)
    if v.ndim != 1:
        raise ShapeMismatchError(f"{name} must be 1-D, got shape {v.shape}")
    return v


def _as_array(values: ArrayLike, name: str) -> np.ndarray:
    if hasattr(values, "detach"):  # a torch tensor, without importing torch here
        values = values.detach().cpu().double().numpy()
    v = np.asarray(values, dtype=float)
    if np.isinf(v).any():
        raise InvalidArgumentError(
            f"{name} holds {int(np.isinf(v).sum())} infinite value(s): a value is a finite "
            "number or missing (NaN); fix or drop them"
        )
    return v


def paired(
    x: ArrayLike, y: ArrayLike, nan_policy: NanPolicy = "propagate"
) -> tuple[np.ndarray, np.ndarray]:
    """`x` and `y` as float vectors of one length, NaN pairs handled by `nan_policy`.

    `"propagate"` keeps them, `"omit"` drops every pair with a NaN on either side. Two arrays of the
    same shape (e.g. two grids of effects) pair cell by cell, flattened.

    Args:
        x: The first side, any shape.
        y: The second side, the same shape as `x`.
        nan_policy: `"propagate"`, `"omit"` or `"raise"` (module docstring).

    Returns:
        The two flattened float vectors, of one length.

    Raises:
        ShapeMismatchError: `x` and `y` differ in shape.
        InvalidArgumentError: a pair holds NaN under `nan_policy="raise"`, a value is infinite,
            or `nan_policy` is not one of the three.

    Examples:
        >>> from reward_lens_tl.stats import paired
        >>> paired([[1, 2], [3, 4]], [[5, 6], [7, float("nan")]], "omit")
        (array([1., 2., 3.]), array([5., 6., 7.]))
    """
    if nan_policy not in ("propagate", "omit", "raise"):
        raise InvalidArgumentError(
            f"nan_policy must be 'propagate', 'omit' or 'raise', got {nan_policy!r}"
        )
    a, b = _as_array(x, "x"), _as_array(y, "y")
    if a.shape != b.shape:
        raise ShapeMismatchError(f"x and y must pair up: shapes {a.shape} and {b.shape}")
    a, b = a.reshape(-1), b.reshape(-1)
    missing = np.isnan(a) | np.isnan(b)
    if missing.any() and nan_policy == "raise":
        raise InvalidArgumentError(
            f"{int(missing.sum())} pair(s) hold NaN; drop them or pass nan_policy='omit'"
        )
    if nan_policy == "omit":
        return a[~missing], b[~missing]
    return a, b


def _defined(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether a correlation of `a` and `b` is defined.

    Two or more pairs, no NaN, and neither side constant.
    """
    if a.size < 2 or np.isnan(a).any() or np.isnan(b).any():
        return False
    return bool(np.ptp(a) > 0 and np.ptp(b) > 0)


# ---- correlations ------------------------------------------------------------------------------
class CorrelationTest(NamedTuple):
    """A correlation coefficient, its two-sided p-value and the number of pairs it used.

    Returned by `correlation_test`; a tuple, so it unpacks as `r, p, n = ...`.

    Attributes:
        statistic: The coefficient (Pearson r, Spearman ρ or Kendall τ); NaN when undefined.
        pvalue: Its two-sided p-value; NaN when the coefficient is.
        n: The number of pairs used (after `nan_policy="omit"` dropped any).

    Examples:
        >>> from reward_lens_tl.stats import correlation_test
        >>> r, p, n = correlation_test([1, 2, 3, 4, 5], [2, 1, 4, 3, 5])
        >>> round(r, 3), round(p, 3), n
        (0.8, 0.104, 5)
    """

    statistic: float
    pvalue: float
    n: int


def correlation_test(
    x: ArrayLike,
    y: ArrayLike,
    method: Method = "pearson",
    *,
    nan_policy: NanPolicy = "propagate",
    variant: Literal["b", "c"] = "b",
) -> CorrelationTest:
    """Pearson r, Spearman ρ or Kendall τ with its p-value.

    Pearson r is `scipy.stats.pearsonr`, Spearman ρ `scipy.stats.spearmanr` and Kendall τ
    `scipy.stats.kendalltau` (`variant` `"b"` corrects for ties); NaN for both when undefined
    (module docstring).

    Args:
        x: The first side, any shape.
        y: The second side, the same shape as `x` (paired cell by cell).
        method: `"pearson"`, `"spearman"` or `"kendall"`.
        nan_policy: `"propagate"`, `"omit"` or `"raise"` (module docstring).
        variant: Kendall's τ variant, `"b"` (tie-corrected) or `"c"`; ignored by the other
            methods.

    Returns:
        The coefficient, its two-sided p-value and the number of pairs used.

    Raises:
        InvalidArgumentError: an unknown `method` or `nan_policy`, an infinite value, or NaN
            under `nan_policy="raise"`.
        ShapeMismatchError: `x` and `y` differ in shape.

    Examples:
        >>> from reward_lens_tl.stats import correlation_test
        >>> correlation_test([1, 2, 3, 4], [2, 4, 6, 9], "spearman")
        CorrelationTest(statistic=1.0, pvalue=0.0, n=4)
    """
    from scipy import stats

    tests = {
        "pearson": stats.pearsonr,
        "spearman": stats.spearmanr,
        "kendall": functools.partial(stats.kendalltau, variant=variant),
    }
    if method not in tests:  # checked first: a typo never hides behind an undefined NaN
        raise InvalidArgumentError(
            f"method must be 'pearson', 'spearman' or 'kendall', got {method!r}"
        )
    if variant not in ("b", "c"):
        raise InvalidArgumentError(f"variant must be 'b' or 'c', got {variant!r}")
    a, b = paired(x, y, nan_policy)
    if not _defined(a, b):
        return CorrelationTest(math.nan, math.nan, int(a.size))
    res = tests[method](a, b)
    return CorrelationTest(float(res.statistic), float(res.pvalue), int(a.size))


#: The arguments and result of `pearson` and `spearman`.
_COEFFICIENT_DOC = """Args:
    x: The first side, any shape.
    y: The second side, the same shape as `x`.
    nan_policy: `"propagate"`, `"omit"` or `"raise"` (module docstring).

Returns:
    The coefficient, or NaN when it is undefined."""


@pasted_docs(coefficient=_COEFFICIENT_DOC)
def pearson(x: ArrayLike, y: ArrayLike, *, nan_policy: NanPolicy = "propagate") -> float:
    """Pearson's r (NaN when a side is constant or has fewer than two values).

    {coefficient}

    Examples:
        >>> from reward_lens_tl.stats import pearson
        >>> pearson([1, 2, 3], [2, 4, 7]) > 0.99, pearson([1, 2, 3], [5, 5, 5])
        (True, nan)
    """
    return correlation_test(x, y, "pearson", nan_policy=nan_policy).statistic


@pasted_docs(coefficient=_COEFFICIENT_DOC)
def spearman(x: ArrayLike, y: ArrayLike, *, nan_policy: NanPolicy = "propagate") -> float:
    """Spearman's ρ, ties given their average rank.

    NaN when a side is constant or has fewer than two values.

    {coefficient}

    Examples:
        >>> from reward_lens_tl.stats import spearman
        >>> spearman([1, 2, 3], [1, 4, 9])
        1.0
    """
    return correlation_test(x, y, "spearman", nan_policy=nan_policy).statistic


def kendall(
    x: ArrayLike,
    y: ArrayLike,
    *,
    variant: Literal["b", "c"] = "b",
    nan_policy: NanPolicy = "propagate",
) -> float:
    """Kendall's τ-b (tie-corrected; `variant="c"` for τ-c).

    NaN when a side is constant or has fewer than two values.

    Args:
        x: The first side, any shape.
        y: The second side, the same shape as `x`.
        variant: `"b"` (tie-corrected, the default) or `"c"`.
        nan_policy: `"propagate"`, `"omit"` or `"raise"` (module docstring).

    Returns:
        The coefficient, or NaN when it is undefined.

    Examples:
        >>> from reward_lens_tl.stats import kendall
        >>> kendall([1, 2, 3], [3, 2, 1])
        -1.0
    """
    test = correlation_test(x, y, "kendall", nan_policy=nan_policy, variant=variant)
    return test.statistic


def fisher_z_interval(r: float, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Confidence interval of a Pearson `r` over `n` pairs from Fisher's z transform.

    The interval is `atanh(r) ± q / sqrt(n − 3)`, `q` the normal quantile; NaN when `r` is NaN or
    `n ≤ 3`.

    Args:
        r: The Pearson correlation.
        n: The number of pairs it was computed over.
        confidence: The interval's confidence level, in (0, 1).

    Returns:
        The `(low, high)` ends of the interval.

    Examples:
        >>> from reward_lens_tl.stats import fisher_z_interval
        >>> lo, hi = fisher_z_interval(0.5, 30)
        >>> round(lo, 3), round(hi, 3)
        (0.17, 0.729)
    """
    from scipy import stats

    if math.isnan(r) or n <= 3:
        return math.nan, math.nan
    z = math.atanh(min(max(r, -0.999999), 0.999999))
    q = float(stats.norm.ppf(0.5 + confidence / 2))
    se = 1.0 / math.sqrt(n - 3)
    return math.tanh(z - q * se), math.tanh(z + q * se)


# ---- bootstrap ---------------------------------------------------------------------------------
class Interval(NamedTuple):
    """A statistic on the whole sample and the ends of its confidence interval.

    Returned by `bootstrap_ci`; a tuple, so it unpacks as `estimate, low, high = ...`.

    Attributes:
        estimate: The statistic on the whole sample.
        low: The lower end of the percentile interval.
        high: The upper end of the percentile interval.

    Examples:
        >>> from reward_lens_tl.stats import bootstrap_ci
        >>> estimate, low, high = bootstrap_ci([1.0, 2.0, 3.0, 4.0, 5.0], n_boot=200)
        >>> estimate, low <= estimate <= high
        (3.0, True)
    """

    estimate: float
    low: float
    high: float


def bootstrap_ci(
    samples: ArrayLike | tuple[ArrayLike, ...],
    statistic: Callable[..., Any] = np.mean,
    *,
    n_boot: int = N_BOOT,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> Interval:
    """Seeded percentile bootstrap of `statistic` (`scipy.stats.bootstrap`).

    `samples` is one 1-D sample, or a tuple of equally long samples resampled together
    (paired: `statistic(x, y)` sees the same rows of both). `statistic` is called on the
    resampled arrays; one that takes `axis` (like `numpy.mean`) is vectorised by scipy.
    An empty sample is refused (`EmptyInputError`); see the module
    docstring for NaN resamples and one-value samples.

    Args:
        samples: One 1-D sample, or a tuple of equally long 1-D samples resampled together.
        statistic: The statistic, called as `statistic(*samples)`; default the mean.
        n_boot: The number of bootstrap resamples.
        confidence: The interval's confidence level, in (0, 1).
        seed: The seed of the resampling; the same seed gives the same interval.

    Returns:
        The statistic on the whole sample and the ends of its percentile interval.

    Raises:
        EmptyInputError: the sample is empty.
        ShapeMismatchError: paired samples differ in length, or a sample is not 1-D.

    Examples:
        >>> import numpy as np
        >>> from reward_lens_tl.stats import bootstrap_ci, spearman
        >>> x, y = np.arange(20.0), np.arange(20.0) ** 2
        >>> [round(v, 6) for v in bootstrap_ci((x, y), spearman, n_boot=200)]  # paired rows
        [1.0, 1.0, 1.0]
    """
    data = samples if isinstance(samples, tuple) else (samples,)
    vectors = tuple(as_vector(s, f"sample {i}") for i, s in enumerate(data))
    n = vectors[0].size
    if any(v.size != n for v in vectors):
        raise ShapeMismatchError(f"paired samples differ in length: {[v.size for v in vectors]}")
    if n == 0:
        raise EmptyInputError("a bootstrap needs at least one value")
    estimate = float(statistic(*vectors))
    if n == 1:  # every resample is the sample itself
        return Interval(estimate, estimate, estimate)
    return Interval(estimate, *_percentile_interval(vectors, statistic, n_boot, confidence, seed))


def _percentile_interval(
    vectors: tuple[np.ndarray, ...], statistic, n_boot: int, confidence: float, seed: int
) -> tuple[float, float]:
    from scipy import stats

    with warnings.catch_warnings():  # NaN resamples are handled below, not warned about
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        res = stats.bootstrap(
            vectors,
            statistic,
            n_resamples=n_boot,
            confidence_level=confidence,
            method="percentile",
            paired=len(vectors) > 1,
            rng=np.random.default_rng(seed),
        )
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if math.isfinite(low) and math.isfinite(high):
        return low, high
    draws = np.asarray(res.bootstrap_distribution, dtype=float)
    draws = draws[np.isfinite(draws)]
    if not draws.size:
        return math.nan, math.nan
    alpha = (1 - confidence) / 2
    low, high = stats.quantile(draws, np.array([alpha, 1 - alpha]))
    return float(low), float(high)


# ---- effect sizes ------------------------------------------------------------------------------
def cohens_d(x: ArrayLike, y: ArrayLike) -> float:
    """Cohen's d of two independent samples.

    `(mean x − mean y) / s_pooled` with the pooled standard deviation (ddof = 1); NaN when it is 0,
    when a sample has no values or both have one, or when a value is NaN.

    Args:
        x: The first sample, 1-D.
        y: The second sample, 1-D (its length may differ from `x`'s).

    Returns:
        The effect size, or NaN when it is undefined.

    Examples:
        >>> from reward_lens_tl.stats import cohens_d
        >>> cohens_d([2.0, 4.0, 6.0], [1.0, 3.0, 5.0])
        0.5
    """
    a, b = as_vector(x, "x"), as_vector(y, "y")
    dof = a.size + b.size - 2
    if a.size == 0 or b.size == 0 or dof < 1:
        return math.nan
    pooled = ((a.size - 1) * _var(a) + (b.size - 1) * _var(b)) / dof
    return _ratio(float(a.mean() - b.mean()), math.sqrt(pooled))


def cohens_dz(differences: ArrayLike) -> float:
    """Cohen's d_z of paired differences: `mean / sd` (ddof = 1).

    NaN for fewer than two values or a constant difference (a constant shift has no finite d_z).

    Args:
        differences: The paired differences (e.g. reward of chosen minus rejected), 1-D.

    Returns:
        The effect size, or NaN when it is undefined.

    Examples:
        >>> from reward_lens_tl.stats import cohens_dz
        >>> round(cohens_dz([1.0, 2.0, 3.0]), 4)
        2.0
        >>> cohens_dz([1.0, 1.0, 1.0])
        nan
    """
    d = as_vector(differences, "differences")
    if d.size < 2:
        return math.nan
    return _ratio(float(d.mean()), math.sqrt(_var(d)))


def _var(v: np.ndarray) -> float:
    return float(v.var(ddof=1)) if v.size > 1 else 0.0


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 else math.nan


__all__ = [
    "CONFIDENCE",
    "N_BOOT",
    "CorrelationTest",
    "Interval",
    "as_vector",
    "bootstrap_ci",
    "cohens_d",
    "cohens_dz",
    "correlation_test",
    "fisher_z_interval",
    "kendall",
    "paired",
    "pearson",
    "spearman",
]
