"""One score per solution from a process reward model's per-step scores, as RewardMATH does it.

A process reward model (PRM) scores every step of a solution. A benchmark that ranks whole
solutions needs one number per solution: RewardMATH's reference evaluation
(kimsh0507/RewardMATH_official, `src/evaluation/eval.py`, `RewardMATHEvaluation.
_calculate_final_reward`; `src/evaluate_results.py --prm_mode` reports all eight) offers these
aggregates of the step scores `p_1 … p_n`:

| aggregate        | score                                                           |
| ---------------- | --------------------------------------------------------------- |
| `min`            | the smallest step score                                         |
| `max`            | the largest step score                                          |
| `prod`           | `p_1 · p_2 · … · p_n` (multiplied left to right, starting from 1) |
| `geometric_mean` | that product to the power `1 / n`                               |
| `mean`           | `sum(p) / n`                                                    |
| `mean_logit`     | `sigmoid(mean(log(p / (1 - p))))` (float64, numpy)              |
| `mean_odd`       | `max(0, mean(p / (1 - p)))` (float64, numpy)                    |
| `last`           | the last step's score                                           |

`DEFAULT_PRM_AGGREGATE` is `prod`: the aggregate the RewardMATH paper reports PRMs with
(its Math-Shepherd figure, 17.18 % accuracy, is the `prod` one); the reference itself has no
default and prints all eight.

Edge values follow the reference where it gives a number: under `mean_logit` a step of exactly
1 has logit `+inf` and one of exactly 0 `-inf`, so the aggregate is 1.0 or 0.0; under
`mean_odd` a step of exactly 1 has infinite odds, so the aggregate is `+inf` (it ties with
another `+inf` and beats every finite score, as in the reference's comparisons). Where the
reference's number is undefined an `reward_lens_tl.errors.InvalidArgumentError` says so
instead: `mean_logit` of a solution with both a 0 and a 1 (`inf - inf`: NaN, whose
comparisons the reference then gets in an order-dependent way), `mean_logit` / `mean_odd` of
a step score outside `[0, 1]` (not a probability: a NaN logit), `geometric_mean` of a negative
product (a complex number in Python), and any aggregate of a solution without steps (the
reference raises there too).

Examples:
    >>> from reward_lens_tl.evals.prm import PRM_AGGREGATES, aggregate_steps
    >>> aggregate_steps([0.9, 0.5, 0.8], "min"), round(aggregate_steps([0.9, 0.5, 0.8], "prod"), 6)
    (0.5, 0.36)
    >>> aggregate_steps([0.5, 1.0], "mean_logit"), aggregate_steps([0.5, 1.0], "mean_odd")
    (1.0, inf)
    >>> PRM_AGGREGATES
    ('min', 'max', 'prod', 'geometric_mean', 'mean', 'mean_logit', 'mean_odd', 'last')
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import InvalidArgumentError, UnknownNameError

__all__ = ["DEFAULT_PRM_AGGREGATE", "PRM_AGGREGATES", "aggregate_steps", "check_aggregate"]


def _product(steps: Sequence[float]) -> float:
    out = 1.0
    for step in steps:
        out *= step
    return out


def _geometric_mean(steps: Sequence[float]) -> float:
    product = _product(steps)
    if product < 0:
        raise InvalidArgumentError(
            f"the product of the step scores is negative ({product}): its geometric mean is not "
            "a real number; geometric_mean needs non-negative step scores"
        )
    return product ** (1 / len(steps))


def _probabilities(steps: Sequence[float], name: str) -> np.ndarray:
    p = np.asarray(steps, dtype=np.float64)
    outside = p[(p < 0) | (p > 1)]
    if outside.size:
        raise InvalidArgumentError(
            f"{name} reads step scores as probabilities, but a step score is {outside[0]} "
            "(outside [0, 1]); use min, max, prod, mean or last for other scores"
        )
    return p


def _mean_logit(steps: Sequence[float]) -> float:
    p = _probabilities(steps, "mean_logit")
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        value = 1 / (1 + np.exp(-np.mean(np.log(p / (1 - p)))))
    if np.isnan(value):
        raise InvalidArgumentError(
            "mean_logit is undefined: the steps include a probability of exactly 0 and one of "
            "exactly 1 (logits -inf and +inf; the reference gets NaN); use another aggregate"
        )
    return float(value)


def _mean_odd(steps: Sequence[float]) -> float:
    p = _probabilities(steps, "mean_odd")
    with np.errstate(divide="ignore"):
        return float(np.maximum(0, np.mean(p / (1 - p))))


_AGGREGATES: dict[str, Callable[[Sequence[float]], float]] = {
    "min": min,
    "max": max,
    "prod": _product,
    "geometric_mean": _geometric_mean,
    "mean": lambda steps: sum(steps) / len(steps),
    "mean_logit": _mean_logit,
    "mean_odd": _mean_odd,
    "last": lambda steps: steps[-1],
}

PRM_AGGREGATES: tuple[str, ...] = tuple(_AGGREGATES)
"""The aggregates of RewardMATH's reference, in its order (see the module docstring)."""

DEFAULT_PRM_AGGREGATE = "prod"
"""The aggregate used when none is named: the one the RewardMATH paper reports PRMs with."""


def check_aggregate(name: object) -> str:
    """Check that `name` is one of `PRM_AGGREGATES`.

    Args:
        name: an aggregate's name.

    Returns:
        `name`.

    Raises:
        UnknownNameError: `name` is no aggregate (the message lists them).

    Examples:
        >>> from reward_lens_tl.evals.prm import check_aggregate
        >>> check_aggregate("geometric_mean")
        'geometric_mean'
    """
    if not isinstance(name, str) or name not in _AGGREGATES:
        raise UnknownNameError(
            f"unknown PRM aggregate {name!r}; the aggregates are: {', '.join(PRM_AGGREGATES)}"
        )
    return name


def aggregate_steps(steps: Sequence[float], aggregate: str = DEFAULT_PRM_AGGREGATE) -> float:
    """One solution's score from its step scores under `aggregate` (see the module docstring).

    Args:
        steps: the solution's step scores.
        aggregate: one of `PRM_AGGREGATES`.

    Returns:
        The solution's score.

    Raises:
        InvalidArgumentError: the aggregate is undefined for these steps.

    Examples:
        >>> from reward_lens_tl.evals.prm import aggregate_steps
        >>> aggregate_steps([0.25, 1.0], "geometric_mean"), aggregate_steps([0.2, 0.4], "last")
        (0.5, 0.4)
    """
    fn = _AGGREGATES[check_aggregate(aggregate)]
    if len(steps) == 0:
        raise InvalidArgumentError("a solution without step scores has no aggregate")
    for s in steps:
        if isinstance(s, bool) or not isinstance(s, int | float) or not math.isfinite(s):
            raise InvalidArgumentError(f"step scores must be finite numbers, got {s!r}")
    return float(fn(steps))
