"""ProcessBench: finding the earliest wrong step of a solution.

ProcessBench (Zheng et al., ACL 2025; QwenLM/ProcessBench) labels each step-by-step solution with
the index of its first wrong step, or `-1` when every step is right. A model predicts that index.
The reference evaluation (`code/run_eval.py` and `code/run_eval_prm_rlhflow.py`, `main`)
scores each subset (`gsm8k`, `math`, `olympiadbench`, `omnimath`) separately:

- a sample *matches* when the prediction equals the label (a critic that gives no answer, a
  prediction of `None`, never matches);
- `error_accuracy`: the share of matches among the erroneous samples (label ≥ 0),
  `correct_accuracy` among the correct ones (label `-1`), both in percent;
- `f1`: their harmonic mean `2·a·b / (a + b)`.

The paper's tables add the mean F1 over the subsets (`ProcessBenchResult.average_f1`).
Where the reference divides 0 by 0 (both accuracies 0) the F1 here is 0, the harmonic mean's
limit; a subset without erroneous (or without correct) samples has a NaN accuracy and F1, the
reference's mean of nothing.

A process reward model predicts through a threshold (`first_error_step`): the first step
whose score is below `threshold` is the predicted error, `-1` if none is.
`processbench_from_scores` takes per-step scores, `processbench_from_predictions` a
critic's direct predictions.

Examples:
    >>> from reward_lens_tl.evals.processbench import processbench_from_scores
    >>> result = processbench_from_scores([[0.9, 0.2], [0.8, 0.7], [0.1]], [1, -1, -1],
    ...                                   threshold=0.5)
    >>> result.predictions, result.figures("all")["f1"]
    ((1, -1, 0), 66.66666666666667)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import EmptyInputError, InvalidArgumentError
from ..results import Result

__all__ = [
    "PROCESSBENCH_SUBSETS",
    "ProcessBenchResult",
    "first_error_step",
    "harmonic_f1",
    "processbench_from_predictions",
    "processbench_from_scores",
]

PROCESSBENCH_SUBSETS: tuple[str, ...] = ("gsm8k", "math", "olympiadbench", "omnimath")
"""ProcessBench's four subsets (the dataset's splits), in the paper's order."""

_ALL = "all"


@dataclass(frozen=True)
class ProcessBenchResult(Result):
    """Predicted and true first-error indices of ProcessBench samples, with their subsets.

    `predictions[i]` is sample `i`'s predicted first wrong step (`-1`: none; `None`: no
    answer), `labels[i]` the true one, `subsets[i]` its subset; `threshold` is the PRM
    threshold the predictions came from (`None` for direct predictions). `to_dataframe()`
    has one row per subset.

    Args:
        predictions: each sample's predicted first wrong step (`-1`: none; `None`: no answer).
        labels: each sample's true first wrong step.
        subsets: each sample's subset.
        threshold: the PRM threshold of the predictions (`None` for direct predictions).

    Examples:
        >>> from reward_lens_tl.evals.processbench import ProcessBenchResult
        >>> r = ProcessBenchResult(predictions=(1, -1, 2, -1, None), labels=(1, -1, 0, 0, -1),
        ...                        subsets=("gsm8k", "gsm8k", "math", "math", "math"))
        >>> r.matches, r.average_f1  # gsm8k F1 100, math F1 0 (no answer never matches)
        ((True, True, False, False, False), 50.0)
        >>> r.to_dataframe()
          subset  n_error  n_correct  error_accuracy  correct_accuracy     f1
        0  gsm8k        1          1           100.0             100.0  100.0
        1   math        2          1             0.0               0.0    0.0
    """

    label_column = "subset"
    value_column = "f1"
    no_example_axis = (
        "its figures are per subset; build a result of the samples you want with "
        "processbench_from_predictions / processbench_from_scores"
    )

    predictions: tuple[int | None, ...]
    labels: tuple[int, ...]
    subsets: tuple[str, ...]
    threshold: float | None = None

    def subset_names(self) -> list[str]:
        """The subsets present, in order of first appearance."""
        return list(dict.fromkeys(self.subsets))

    @property
    def matches(self) -> tuple[bool, ...]:
        """Whether each prediction equals its label."""
        return tuple(p == y for p, y in zip(self.predictions, self.labels, strict=True))

    def figures(self, subset: str) -> dict[str, Any]:
        """The figures of one subset, as the reference computes them.

        Args:
            subset: the subset's name.

        Returns:
            `n_error`, `n_correct`, `error_accuracy`, `correct_accuracy` and `f1` (percent).
        """
        if subset not in self.subsets:
            raise InvalidArgumentError(
                f"no subset {subset!r} in this result; subsets: {self.subset_names()}"
            )
        rows = [(m, y) for m, y, s in zip(self.matches, self.labels, self.subsets, strict=True)
                if s == subset]  # fmt: skip
        erroneous = [m for m, y in rows if y != -1]
        correct = [m for m, y in rows if y == -1]
        a, b = _percent(erroneous), _percent(correct)
        return {
            "n_error": len(erroneous),
            "n_correct": len(correct),
            "error_accuracy": a,
            "correct_accuracy": b,
            "f1": harmonic_f1(a, b),
        }

    @property
    def average_f1(self) -> float:
        """The mean F1 over the subsets (the paper's average column)."""
        values = [self.figures(s)["f1"] for s in self.subset_names()]
        return sum(values) / len(values)

    def to_dataframe(self):
        """One row per subset.

        Columns: `subset`, `n_error`, `n_correct`, `error_accuracy`, `correct_accuracy`, `f1`.
        """
        import pandas as pd

        return pd.DataFrame([{"subset": s, **self.figures(s)} for s in self.subset_names()])


def _percent(matches: Sequence[bool]) -> float:
    return 100 * sum(matches) / len(matches) if matches else math.nan


def harmonic_f1(a: float, b: float) -> float:
    """`2·a·b / (a + b)`; 0 when both are 0, NaN when either is NaN.

    Args:
        a: the first accuracy.
        b: the second accuracy.

    Returns:
        The harmonic mean.

    Examples:
        >>> from reward_lens_tl.evals.processbench import harmonic_f1
        >>> harmonic_f1(50.0, 100.0), harmonic_f1(0.0, 80.0), harmonic_f1(0.0, 0.0)
        (66.66666666666667, 0.0, 0.0)
    """
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return 0.0 if a + b == 0 else 2 * a * b / (a + b)


def _check_labels(labels: Sequence[Any], n: int, what: str) -> tuple[int, ...]:
    if n == 0:
        raise EmptyInputError("ProcessBench figures need at least one sample")
    if isinstance(labels, str) or len(labels) != n:
        got = "a string" if isinstance(labels, str) else f"{len(labels)} labels"
        raise InvalidArgumentError(f"labels must give one label per {what} ({n}), got {got}")
    for i, y in enumerate(labels):
        if isinstance(y, bool) or not isinstance(y, int) or y < -1:
            raise InvalidArgumentError(
                f"labels[{i}] must be an int >= -1 (the first wrong step, -1: none), got {y!r}"
            )
    return tuple(labels)


def _check_subsets(subsets: Sequence[str] | None, n: int) -> tuple[str, ...]:
    if subsets is None:
        return (_ALL,) * n
    if isinstance(subsets, str) or len(subsets) != n:
        got = "a string" if isinstance(subsets, str) else f"{len(subsets)}"
        raise InvalidArgumentError(f"subsets must give one subset name per sample ({n}), got {got}")
    bad = next((s for s in subsets if not isinstance(s, str)), None)
    if bad is not None:
        raise InvalidArgumentError(f"subsets must be strings, got {bad!r}")
    return tuple(subsets)


def first_error_step(steps: Sequence[float], threshold: float) -> int:
    """The index of the first step whose score is below `threshold`, `-1` if there is none.

    This is the PRM convention of ProcessBench.

    Args:
        steps: a solution's step scores.
        threshold: the score below which a step is wrong.

    Returns:
        The predicted first wrong step.

    Examples:
        >>> from reward_lens_tl.evals.processbench import first_error_step
        >>> first_error_step([0.9, 0.4, 0.2], 0.5), first_error_step([0.9, 0.5], 0.5)
        (1, -1)
    """
    return next((k for k, score in enumerate(steps) if score < threshold), -1)


def processbench_from_scores(
    step_scores: Sequence[Sequence[float]],
    labels: Sequence[int],
    *,
    threshold: float,
    subsets: Sequence[str] | None = None,
) -> ProcessBenchResult:
    """ProcessBench figures of a PRM's per-step scores, predicting with `first_error_step`.

    Args:
        step_scores: the per-step scores, one list per sample.
        labels: the true first wrong steps (`-1`: none; at most the last step's index).
        threshold: the threshold of `first_error_step`.
        subsets: each sample's subset (default: one subset, `"all"`).

    Returns:
        The predictions and labels.

    Raises:
        InvalidArgumentError: bad input, naming the sample.

    Examples:
        >>> from reward_lens_tl.evals.processbench import processbench_from_scores
        >>> r = processbench_from_scores([[0.9, 0.1], [0.9]], [0, -1], threshold=0.5)
        >>> r.figures("all")["error_accuracy"], r.figures("all")["correct_accuracy"]
        (0.0, 100.0)
    """
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise InvalidArgumentError(f"threshold must be a number, got {threshold!r}")
    if not math.isfinite(threshold):
        raise InvalidArgumentError(f"threshold must be finite, got {threshold}")
    if isinstance(step_scores, str) or not isinstance(step_scores, Sequence):
        raise InvalidArgumentError("step_scores must be a list with one list of scores per sample")
    checked = [_check_steps(steps, i) for i, steps in enumerate(step_scores)]
    labels = _check_labels(labels, len(checked), "sample")
    for i, (steps, y) in enumerate(zip(checked, labels, strict=True)):
        if y >= len(steps):
            raise InvalidArgumentError(
                f"labels[{i}] is {y}, but sample {i} has {len(steps)} step scores (steps 0 to "
                f"{len(steps) - 1}): do its step scores match its solution's steps?"
            )
    predictions = tuple(first_error_step(steps, threshold) for steps in checked)
    return ProcessBenchResult(
        predictions, labels, _check_subsets(subsets, len(checked)), float(threshold)
    )


def _check_steps(steps: Any, i: int) -> tuple[float, ...]:
    if isinstance(steps, str) or not isinstance(steps, Sequence):
        raise InvalidArgumentError(f"step_scores[{i}] must be a list of numbers, got {steps!r}")
    if not steps:
        raise InvalidArgumentError(f"step_scores[{i}] is empty: a solution has at least one step")
    for k, score in enumerate(steps):
        if (
            isinstance(score, bool)
            or not isinstance(score, int | float)
            or not math.isfinite(score)
        ):
            raise InvalidArgumentError(
                f"step_scores[{i}][{k}] must be a finite number, got {score!r}"
            )
    return tuple(float(s) for s in steps)


def processbench_from_predictions(
    predictions: Sequence[int | None],
    labels: Sequence[int],
    *,
    subsets: Sequence[str] | None = None,
) -> ProcessBenchResult:
    """ProcessBench figures of direct predictions.

    Args:
        predictions: a critic's answer per sample: the first wrong step's index, `-1` for
            none, `None` when it gave no answer, which never matches.
        labels: the true first wrong steps.
        subsets: each sample's subset (default: one subset, `"all"`).

    Returns:
        The predictions and labels.

    Examples:
        >>> from reward_lens_tl.evals.processbench import processbench_from_predictions
        >>> r = processbench_from_predictions([2, None, -1, -1], [2, 1, -1, 0])
        >>> [round(r.figures("all")[k], 2) for k in ("error_accuracy", "correct_accuracy", "f1")]
        [33.33, 100.0, 50.0]
    """
    if isinstance(predictions, str) or not isinstance(predictions, Sequence):
        raise InvalidArgumentError("predictions must be a list with one prediction per sample")
    for i, p in enumerate(predictions):
        if p is not None and (isinstance(p, bool) or not isinstance(p, int) or p < -1):
            raise InvalidArgumentError(
                f"predictions[{i}] must be an int >= -1 or None (no answer), got {p!r}"
            )
    labels = _check_labels(labels, len(predictions), "prediction")
    subsets_ = _check_subsets(subsets, len(predictions))
    return ProcessBenchResult(tuple(predictions), labels, subsets_, None)
