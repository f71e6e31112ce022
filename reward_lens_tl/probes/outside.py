"""The outside view: statistics of the reward deltas a probe causes, and when to flag it.

Per probe, over the examples it applied to (`delta = reward(perturbed) − reward(original)`):

- `mean_delta` with a seeded percentile bootstrap CI (`reward_lens_tl.stats.bootstrap_ci`);
- `sd_delta` and `effect_size = mean / sd` (Cohen's d_z of paired differences; ddof = 1);
- `relative_effect = mean_delta / natural_sd`: the shift in units of the natural spread of
  rewards (sd, ddof = 1, of the original rewards of the same examples);
- `flagged`: **the CI excludes 0 AND |relative_effect| ≥ `min_relative`** (default 0.1).
  The CI alone flags any consistent shift once n is large, however small; the second condition
  asks that the shift matter on the scale rewards naturally vary on.

Fewer than `min_n` (default 10) deltas are refused with `TooFewExamplesError`: no
infinite effect sizes from one example, no CIs from two. Correlations between probes come with
their n and a Fisher-z CI, and are refused below `min_n` too.

Examples:
    >>> import numpy as np
    >>> s = summarize_deltas(np.linspace(0.9, 1.1, 20), natural_sd=2.0, seed=0)
    >>> s.n, round(s.mean_delta, 3), s.ci_low > 0, round(s.relative_effect, 2), s.flagged
    (20, 1.0, True, 0.5, True)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import stats
from ..errors import InvalidArgumentError, TooFewExamplesError

__all__ = [
    "DeltaSummary",
    "summarize_deltas",
]

MIN_N = 10
MIN_RELATIVE = 0.1
N_BOOT = 2000
CONFIDENCE = 0.95


@dataclass(frozen=True)
class DeltaSummary:
    """Statistics of one probe's deltas (see the module docstring for each field).

    Args:
        n: the number of deltas.
        mean_delta: the mean delta.
        ci_low: the CI's lower bound.
        ci_high: the CI's upper bound.
        sd_delta: the deltas' standard deviation.
        effect_size: Cohen's d_z.
        relative_effect: the mean delta over the natural spread.
        flagged: whether the probe is flagged.

    Examples:
        >>> import numpy as np
        >>> from reward_lens_tl.probes import summarize_deltas
        >>> s = summarize_deltas(np.linspace(0.9, 1.1, 20), natural_sd=2.0, seed=0)
        >>> s.n, round(s.mean_delta, 3), round(s.ci_low, 3), round(s.ci_high, 3)
        (20, 1.0, 0.973, 1.025)
        >>> round(s.sd_delta, 4), round(s.effect_size, 2), s.relative_effect, s.flagged
        (0.0623, 16.06, 0.5, True)
    """

    n: int
    mean_delta: float
    ci_low: float
    ci_high: float
    sd_delta: float
    effect_size: float
    relative_effect: float
    flagged: bool


def check_n(n: int, min_n: int, what: str) -> None:
    """Refuse an estimate from fewer than `min_n` values.

    Args:
        n: the number of values.
        min_n: the fewest values needed.
        what: what is estimated (named in the error).

    Raises:
        TooFewExamplesError: `n < min_n`.
    """
    if n < min_n:
        raise TooFewExamplesError(
            f"{what}: {n} values, fewer than the {min_n} needed for a meaningful estimate; add "
            "examples (or lower min_n knowingly)"
        )


def bootstrap_ci(
    values: np.ndarray | tuple[np.ndarray, ...], statistic: Callable[..., Any] = np.mean,
    *, seed: int = 0, n_boot: int = N_BOOT, confidence: float = CONFIDENCE,
) -> tuple[float, float]:  # fmt: skip
    """Seeded percentile bootstrap CI of `statistic` over `values`.

    It is `reward_lens_tl.stats.bootstrap_ci`'s interval.

    Args:
        values: 1-D values, or a tuple of paired arrays resampled together.
        statistic: the statistic.
        seed: the bootstrap's seed.
        n_boot: bootstrap resamples.
        confidence: the confidence level.

    Returns:
        The interval's lower and upper bounds.
    """
    _, lo, hi = stats.bootstrap_ci(
        values, statistic, n_boot=n_boot, confidence=confidence, seed=seed
    )
    return lo, hi


def summarize_deltas(
    deltas,
    *,
    natural_sd: float,
    seed: int = 0,
    min_n: int = MIN_N,
    min_relative: float = MIN_RELATIVE,
    n_boot: int = N_BOOT,
    confidence: float = CONFIDENCE,
) -> DeltaSummary:
    """Mean, bootstrap CI, d_z and the flag of one probe's deltas (module docstring).

    Args:
        deltas: the reward deltas.
        natural_sd: the natural spread of rewards.
        seed: the bootstrap's seed.
        min_n: the fewest deltas needed.
        min_relative: the flag rule's smallest |relative effect|.
        n_boot: bootstrap resamples.
        confidence: the confidence level.

    Returns:
        The `DeltaSummary`.

    Raises:
        TooFewExamplesError: fewer than `min_n` deltas.
        InvalidArgumentError: a delta that is not finite.

    Examples:
        A consistent shift of 0.01 on rewards that naturally spread with sd 5: its CI excludes
        0, but it is 0.2% of the natural spread, so it is not flagged:

        >>> import numpy as np
        >>> from reward_lens_tl.probes import summarize_deltas
        >>> deltas = np.random.default_rng(0).normal(0.01, 0.001, 40)
        >>> s = summarize_deltas(deltas, natural_sd=5.0, seed=0)
        >>> s.ci_low > 0, round(s.relative_effect, 4), s.flagged
        (True, 0.002, False)
        >>> summarize_deltas(deltas, natural_sd=0.05).flagged  # 20% of a narrower spread
        True
    """
    d = np.asarray(deltas, dtype=float)
    check_n(d.size, min_n, "probe deltas")
    if not np.isfinite(d).all():
        raise InvalidArgumentError("reward deltas must be finite")
    mean = float(d.mean())
    sd = float(d.std(ddof=1))
    lo, hi = bootstrap_ci(d, seed=seed, n_boot=n_boot, confidence=confidence)
    effect = stats.cohens_dz(d)  # NaN for a constant shift: it has no finite d_z
    relative = mean / natural_sd if natural_sd > 0 else float("nan")
    excludes_zero = lo > 0 or hi < 0
    flagged = bool(excludes_zero and abs(relative) >= min_relative)
    return DeltaSummary(d.size, mean, lo, hi, sd, effect, relative, flagged)


@dataclass(frozen=True)
class Correlation:
    """Pearson r between two probes' deltas on the examples both applied to.

    Args:
        a: the first probe's name.
        b: the second probe's name.
        n: the number of common examples.
        r: Pearson r.
        ci_low: the Fisher-z CI's lower bound.
        ci_high: the Fisher-z CI's upper bound.
    """

    a: str
    b: str
    n: int
    r: float
    ci_low: float
    ci_high: float


def correlation(a: str, b: str, x, y, *, min_n: int = MIN_N, confidence=CONFIDENCE):
    """Pearson r with a Fisher-z CI; `nan` when either side is constant.

    Args:
        a: the first probe's name.
        b: the second probe's name.
        x: the first probe's deltas.
        y: the second probe's deltas, paired with `x`.
        min_n: the fewest pairs needed.
        confidence: the confidence level.

    Returns:
        The `Correlation`.

    Raises:
        TooFewExamplesError: fewer than `min_n` pairs.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    check_n(x.size, min_n, f"correlation of {a!r} and {b!r}")
    r = stats.pearson(x, y)
    return Correlation(a, b, x.size, r, *stats.fisher_z_interval(r, x.size, confidence))
