"""Comparisons: one chosen response of a scored item against one of its rejected responses.

A *comparison* is the pair of a RewardBench item; a RewardMATH problem's correct solution against
its **hardest** wrong solution (the highest-scored one: the comparison that decides the
problem); each of the 9 cells of an RM-Bench grid; each chosen response of a RewardBench 2
prompt against each rejected one. It is *failed* when `chosen <= rejected` (ties fail, as in
the benchmarks' protocols; RewardBench 2 gives a tied prompt partial credit in its metrics).

This module sits below both `reward_lens_tl.evals.eval_result` (which collects comparisons)
and `reward_lens_tl.evals.explain` (which explains them): what both need lives here.

Examples:
    >>> from reward_lens_tl.evals.comparisons import comparisons, item_texts
    >>> from reward_lens_tl.evals.scores import ScoreRecord
    >>> record = ScoreRecord("rewardmath", 7, (2.0,), (1.0, 3.0, 0.5))
    >>> [(c.rejected_index, c.margin, c.failed) for c in comparisons("rewardmath", 0, record)]
    [(1, -1.0, True)]
    >>> from reward_lens_tl.data import PreferencePair
    >>> item_texts(PreferencePair("q", "a", "b"))
    ('q', ('a',), ('b',))
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..data import GridItem, RankedItem
from .scores import ScoreRecord

__all__ = ["Comparison", "ComparisonSet", "comparisons", "item_texts"]


@dataclass(frozen=True)
class Comparison:
    """One chosen-vs-rejected comparison of an item (indices into its responses).

    Args:
        item_index: the item's position in its result.
        item_id: the item's id.
        chosen_index: the chosen response's index.
        rejected_index: the rejected response's index.
        chosen_score: the chosen response's score.
        rejected_score: the rejected response's score.
        subset: the item's subset (RM-Bench: domain), if any.

    Examples:
        >>> from reward_lens_tl.evals.comparisons import Comparison
        >>> c = Comparison(0, "chat/3", chosen_index=1, rejected_index=2, chosen_score=0.5,
        ...                rejected_score=1.25, subset="chat")
        >>> c.margin, c.failed
        (-0.75, True)
        >>> Comparison(1, "chat/4", 0, 0, 2.0, 2.0).failed  # a tie fails
        True
    """

    item_index: int
    item_id: Hashable
    chosen_index: int
    rejected_index: int
    chosen_score: float
    rejected_score: float
    subset: str | None = None

    @property
    def margin(self) -> float:
        """`chosen_score − rejected_score`."""
        return self.chosen_score - self.rejected_score

    @property
    def failed(self) -> bool:
        """`chosen <= rejected`.

        This holds also for a process reward model's infinite aggregates, whose margin
        `inf - inf` is NaN.
        """
        return not self.chosen_score > self.rejected_score


def comparisons(benchmark: str, index: int, record: ScoreRecord) -> list[Comparison]:
    """The comparisons of one record (see the module docstring).

    Args:
        benchmark: the record's benchmark.
        index: the record's position.
        record: the score record.

    Returns:
        The comparisons.

    Examples:
        >>> from reward_lens_tl.evals.comparisons import comparisons
        >>> from reward_lens_tl.evals.scores import ScoreRecord
        >>> grid = ScoreRecord("rmbench", "chat/0", (1.0, 2.0, 3.0), (1.5, 2.5, 3.5), domain="chat")
        >>> cells = comparisons("rmbench", 0, grid)  # the 3 x 3 grid, chosen style major
        >>> len(cells), [(c.chosen_index, c.rejected_index) for c in cells if not c.failed]
        (9, [(1, 0), (2, 0), (2, 1)])
        >>> pair = ScoreRecord("rewardbench", "s/0", (0.5,), (1.0,), subset="s")
        >>> [(c.subset, c.margin, c.failed) for c in comparisons("rewardbench", 3, pair)]
        [('s', -0.5, True)]
    """
    group = record.subset if benchmark != "rmbench" else record.domain

    def make(i: int, j: int) -> Comparison:
        return Comparison(index, record.id, i, j, record.chosen[i], record.rejected[j], group)

    if benchmark == "rewardmath":
        return [make(0, int(np.argmax(record.rejected)))]
    return [make(i, j) for i in range(len(record.chosen)) for j in range(len(record.rejected))]


def item_texts(item: Any) -> tuple[Any, tuple[str, ...], tuple[str, ...]]:
    """`(prompt, chosen responses, rejected responses)` of any benchmark item.

    Args:
        item: a benchmark item.

    Returns:
        The item's texts.

    Examples:
        >>> from reward_lens_tl.data import GridItem, RankedItem
        >>> from reward_lens_tl.evals.comparisons import item_texts
        >>> item_texts(RankedItem("1 + 1 = ?", correct="2", wrong=("3", "11")))
        ('1 + 1 = ?', ('2',), ('3', '11'))
        >>> item_texts(GridItem("Hi", chosen=("a", "b", "c"), rejected=("x", "y", "z")))[2]
        ('x', 'y', 'z')
    """
    if isinstance(item, RankedItem):
        return item.prompt, (item.correct,), tuple(item.wrong)
    if isinstance(item, GridItem):
        return item.prompt, tuple(item.chosen), tuple(item.rejected)
    return item.prompt, (item.chosen,), (item.rejected,)


class ComparisonSet(Protocol):
    """What an explanation reads from a set of comparisons.

    `reward_lens_tl.evals.eval_result.Failures` is one: the comparisons, their texts as
    preference pairs, a subset of them, and the evaluation they come from (`result`, with
    its `benchmark` and `successes()`).

    Examples:
        >>> from reward_lens_tl.evals import EvalResult
        >>> from reward_lens_tl.evals.scores import ScoreRecord, ScoreSet
        >>> recs = [ScoreRecord("rewardbench", i, (c,), (1.0,))
        ...         for i, c in enumerate([0.0, 2.0, 0.5])]
        >>> failed = EvalResult("rewardbench", ScoreSet(recs)).failures()  # a ComparisonSet
        >>> len(failed), [c.item_id for c in failed], failed.result.benchmark
        (2, [0, 2], 'rewardbench')
        >>> [c.item_id for c in failed.take([1])], len(failed.result.successes())
        ([2], 1)
    """

    @property
    def result(self) -> Any:
        """The evaluation the comparisons come from."""
        ...

    def __iter__(self) -> Iterator[Comparison]:
        """The comparisons, in order."""
        ...

    def __len__(self) -> int:
        """The number of comparisons."""
        ...

    def pairs(self) -> list[Any]:
        """Each comparison's texts as a preference pair."""
        ...

    def take(self, rows: Sequence[int]) -> ComparisonSet:
        """The comparisons at positions `rows`, of the same result.

        Args:
            rows: the positions of the comparisons to keep, in the order wanted.

        Returns:
            The comparisons kept.
        """
        ...
