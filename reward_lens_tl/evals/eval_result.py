"""The result of an evaluation: per-item scores, their metrics, and the comparisons a model lost.

A *comparison* (`reward_lens_tl.evals.comparisons`) is one chosen response against one
rejected response of an item; it is *failed* when `chosen <= rejected`.
`result.failures().explain(model)` opens the failed ones with the lens and attribution
(`reward_lens_tl.evals.explain`).

Examples:
    >>> from reward_lens_tl.evals.eval_result import EvalResult
    >>> from reward_lens_tl.evals.scores import ScoreRecord, ScoreSet
    >>> recs = [ScoreRecord("rewardmath", 0, (2.0,), (1.0, 3.0)),
    ...         ScoreRecord("rewardmath", 1, (5.0,), (1.0,))]
    >>> result = EvalResult("rewardmath", ScoreSet(recs))
    >>> [(c.item_id, c.rejected_index, c.margin) for c in result.failures()]
    [(0, 1, -1.0)]
    >>> result.successes().take([0])
    Failures(1 comparisons of 2 rewardmath items)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..data import PreferencePair
from ..errors import InvalidArgumentError, RewardLensError
from ..plotting import PLOT_DOC, Backend
from ..results import Result, TopK, axes, ranked
from ..signatures import pasted_docs
from .comparisons import Comparison, comparisons, item_texts
from .explain import FailureExplanation, explain_failures
from .metrics import Metrics, metrics_for
from .scores import ScoreSet

if TYPE_CHECKING:
    from matplotlib.axes import Axes

# ``Comparison`` and ``comparisons`` live in :mod:`.comparisons` (below ``explain``); they are
# re-exported here, where they were first defined.
__all__ = ["Comparison", "EvalResult", "Failures", "comparisons"]


@dataclass(frozen=True)
class EvalResult(Result):
    """Scores of one benchmark's items, optionally aligned with the items themselves.

    `items[i]` is the data item of `scores[i]` (`None` for a score file read without its
    data file: metrics work, explanations need the texts). `missing` counts data items that
    had no score record.

    Args:
        benchmark: the benchmark.
        scores: the items' score records.
        items: the data items, aligned with `scores` (`None`: not given).
        missing: how many data items had no score record.

    Examples:
        >>> from reward_lens_tl.evals import EvalResult
        >>> from reward_lens_tl.evals.scores import ScoreRecord, ScoreSet
        >>> recs = [ScoreRecord("rewardbench", "a/0", (1.0,), (0.5,), subset="a"),
        ...         ScoreRecord("rewardbench", "a/1", (0.25,), (1.0,), subset="a"),
        ...         ScoreRecord("rewardbench", "b/0", (2.0,), (2.0,), subset="b")]  # a tie
        >>> result = EvalResult("rewardbench", ScoreSet(recs))
        >>> result.summary(n_boot=0)
        {'n': 3, 'subset/a': 50.0, 'subset/b': 0.0, 'accuracy': 33.3333, 'skipped': 0,
         'missing': 0}
        >>> result.top_k(2)  # the worst margins, labelled item:chosen>rejected
        [('a/1:0>0', -0.75), ('b/0:0>0', 0.0)]
        >>> result.to_dataframe()[["item_id", "margin", "failed"]]
          item_id  margin  failed
        0     a/0    0.50   False
        1     a/1   -0.75    True
        2     b/0    0.00    True
    """

    no_example_axis = "take comparisons through failures() or successes()"

    benchmark: str
    scores: ScoreSet
    items: tuple[Any, ...] | None = None
    missing: int = 0

    def __post_init__(self) -> None:
        """Check that the items align with the scores (`InvalidArgumentError`)."""
        if self.items is not None and len(self.items) != len(self.scores):
            raise InvalidArgumentError(
                f"{len(self.items)} items for {len(self.scores)} score records"
            )

    def __len__(self) -> int:
        """The number of scored items."""
        return len(self.scores)

    def metrics(self, **kwargs) -> Metrics:
        """The benchmark's metrics.

        Args:
            **kwargs: passed to the metric function.

        Returns:
            The metrics.
        """
        return metrics_for(self.benchmark, self.scores, **kwargs)

    def summary(self, **kwargs) -> dict[str, float | int]:
        """`{"n": items, <figure>: percent, ...}` plus `skipped` and `missing` counts.

        Args:
            **kwargs: passed to the metric function.

        Returns:
            The summary.
        """
        out = self.metrics(**kwargs).summary()
        out["n"] = len(self.scores)
        return {**out, "skipped": len(self.scores.skipped), "missing": self.missing}

    def comparisons(self) -> list[Comparison]:
        """Every comparison of every item, in item order."""
        return [c for i, r in enumerate(self.scores) for c in comparisons(self.benchmark, i, r)]

    def failures(self) -> Failures:
        """The failed comparisons (ties included), ready to `Failures.explain`."""
        return Failures(self, tuple(c for c in self.comparisons() if c.failed))

    def successes(self) -> Failures:
        """The comparisons the model won (the reference an explanation compares against)."""
        return Failures(self, tuple(c for c in self.comparisons() if not c.failed))

    def to_dataframe(self):
        """One row per comparison: item id, group, indices, scores, margin, failed."""
        import pandas as pd

        rows = [
            {
                "item_id": c.item_id,
                "group": c.subset,
                "chosen_index": c.chosen_index,
                "rejected_index": c.rejected_index,
                "chosen": c.chosen_score,
                "rejected": c.rejected_score,
                "margin": c.margin,
                "failed": c.failed,
            }
            for c in self.comparisons()
        ]
        return pd.DataFrame(rows)

    def top_k(self, k: int = 5, largest: bool = False) -> TopK:
        """The `k` comparisons with the smallest (worst) margins, worst first.

        They are labelled `item:chosen>rejected`.

        Args:
            k: how many comparisons.
            largest: the largest (best) margins instead.

        Returns:
            The comparisons and margins, ranked.
        """
        return _margins_top(self.to_dataframe(), k, largest)

    @pasted_docs(plot=PLOT_DOC)
    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """The benchmark's figures with their bootstrap intervals (`Metrics.plot`).

        {plot}
        """
        return self.metrics().plot(ax, backend=backend)


@dataclass(frozen=True)
class Failures(Result, Sequence[Comparison]):
    """Comparisons of an `EvalResult` (its failures, or its successes).

    `take(rows)` keeps the comparisons at those positions, of the same result.

    Args:
        result: the evaluation the comparisons come from.
        comparisons: the comparisons.

    Examples:
        >>> from reward_lens_tl.data import PreferencePair
        >>> from reward_lens_tl.evals import EvalResult
        >>> from reward_lens_tl.evals.scores import ScoreRecord, ScoreSet
        >>> recs = [ScoreRecord("rewardbench", "a/0", (1.0,), (0.5,), subset="a"),
        ...         ScoreRecord("rewardbench", "a/1", (0.25,), (1.0,), subset="a"),
        ...         ScoreRecord("rewardbench", "b/0", (2.0,), (2.0,), subset="b")]
        >>> items = (PreferencePair("q0", "A", "B", subset="a"),
        ...          PreferencePair("q1", "C", "D", subset="a"),
        ...          PreferencePair("q2", "E", "F", subset="b"))
        >>> failures = EvalResult("rewardbench", ScoreSet(recs), items).failures()
        >>> failures, failures.filter(subset="b"), failures[0].margin
        (Failures(2 comparisons of 3 rewardbench items),
         Failures(1 comparisons of 3 rewardbench items), -0.75)
        >>> [(p.prompt, p.chosen, p.rejected) for p in failures.pairs()]  # their texts
        [('q1', 'C', 'D'), ('q2', 'E', 'F')]
    """

    example_axes = axes(comparisons=0)

    result: EvalResult
    comparisons: tuple[Comparison, ...] = field(default=())

    def __len__(self) -> int:
        """The number of comparisons."""
        return len(self.comparisons)

    def __iter__(self) -> Iterator[Comparison]:
        """The comparisons, in order."""
        return iter(self.comparisons)

    def __getitem__(self, index):
        """One comparison, or a `Failures` of a slice."""
        if isinstance(index, slice):
            return Failures(self.result, self.comparisons[index])
        return self.comparisons[index]

    def __repr__(self) -> str:
        """The comparison count, item count and benchmark."""
        return (
            f"Failures({len(self)} comparisons of {len(self.result)} {self.result.benchmark} items)"
        )

    def filter(self, subset: str | None = None, where=None) -> Failures:
        """The comparisons of `subset` that also satisfy `where(comparison)`.

        Args:
            subset: a RewardBench subset / RM-Bench domain (`None`: any).
            where: a predicate on a comparison (`None`: any).

        Returns:
            The kept comparisons.
        """
        kept = tuple(
            c
            for c in self.comparisons
            if (subset is None or c.subset == subset) and (where is None or where(c))
        )
        return Failures(self.result, kept)

    def pairs(self) -> list[Any]:
        """Each comparison as a `reward_lens_tl.data.PreferencePair` of its texts."""
        if self.result.items is None:
            raise RewardLensError(
                "these scores came without their data items, so there are no texts to explain; "
                "evaluate the score file together with its data file (align_scores / --data)"
            )
        out = []
        for c in self.comparisons:
            prompt, chosen, rejected = item_texts(self.result.items[c.item_index])
            out.append(
                PreferencePair(
                    prompt,
                    chosen[c.chosen_index],
                    rejected[c.rejected_index],
                    subset=c.subset,
                    metadata={"item_id": c.item_id},
                )
            )
        return out

    def top_k(self, k: int = 5, largest: bool = False) -> TopK:
        """These comparisons with the smallest margins, worst first.

        Args:
            k: how many comparisons.
            largest: the largest margins instead.

        Returns:
            The comparisons and margins, ranked.
        """
        return _margins_top(self.to_dataframe(), k, largest)

    def to_dataframe(self):
        """The result's comparison rows (see `EvalResult.to_dataframe`) of these comparisons."""
        frame = self.result.to_dataframe()
        keep = {(c.item_index, c.chosen_index, c.rejected_index) for c in self.comparisons}
        index = [
            (c.item_index, c.chosen_index, c.rejected_index) for c in self.result.comparisons()
        ]
        return frame[[k in keep for k in index]].reset_index(drop=True)

    def explain(self, model, **kwargs) -> FailureExplanation:
        """Why these comparisons went the way they did.

        Args:
            model: the converted reward model (a `HookedRewardModel`).
            **kwargs: passed to `reward_lens_tl.evals.explain.explain_failures`.

        Returns:
            The explanation.
        """
        return explain_failures(model, self, **kwargs)


def _margins_top(frame, k: int, largest: bool) -> TopK:
    frame = frame.nlargest(k, "margin") if largest else frame.nsmallest(k, "margin")
    labels = [
        f"{r.item_id}:{r.chosen_index}>{r.rejected_index}" for r in frame.itertuples(index=False)
    ]
    return ranked(zip(labels, frame["margin"], strict=True), "margin")
