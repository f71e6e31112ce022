"""Data types for preference data: one comparison, one-against-many items, style grids, and sets.

A *message* is a plain dict `{"role": "user" | "assistant" | "system", "content": str}` (the
Hugging Face chat format). A *prompt* is either a `str` (one user turn) or a tuple of messages
(every turn before the final assistant response). Responses are always plain `str`: the text of
the final assistant turn.

* `PreferencePair`: one prompt, a chosen and a rejected response.
* `RankedItem`: one correct response against several wrong ones (RewardMATH).
* `GridItem`: three chosen against three rejected responses in three styles (RM-Bench).
* `ItemSet` / `PairSet`: what the loaders return; a read-only sequence that also
  records which input records were skipped (`SkippedRecord`) and where the data came from.

Every type validates its fields on construction and raises
`MalformedRecordError` (a `ValueError`) naming the bad field. Inputs
are copied, never mutated.

Examples:
    >>> from reward_lens_tl.data import PreferencePair
    >>> pair = PreferencePair("What is 2 + 2?", chosen="4", rejected="5")
    >>> [m["role"] for m in pair.messages("chosen")]
    ['user', 'assistant']
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Collection, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, Self, TypeVar, overload

from ..errors import InvalidArgumentError
from ._validate import (
    ROLES,
    FieldError,
    Message,
    Prompt,
    check_id,
    check_metadata,
    check_optional_str,
    check_prompt,
    check_responses,
    check_str,
    prompt_messages,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "ROLES",
    "RM_BENCH_STYLES",
    "Message",
    "Prompt",
    "FieldError",
    "SkippedRecordsWarning",
    "PreferencePair",
    "RankedItem",
    "GridItem",
    "SkippedRecord",
    "ItemSet",
    "PairSet",
]

RM_BENCH_STYLES = ("concise", "detailed", "markdown")
"""RM-Bench's three response styles, in the order they appear in its files."""

T = TypeVar("T")


class SkippedRecordsWarning(UserWarning):
    """A loader called with `skip_bad=True` skipped malformed records (see `.skipped`).

    One warning per load says how many records were skipped and names the first; the loaded
    set's `skipped` lists them all.

    Examples:
        >>> import json, pathlib, tempfile, warnings
        >>> from reward_lens_tl.data import SkippedRecordsWarning, load_llmbar
        >>> f = pathlib.Path(tempfile.mkdtemp()) / "Natural.json"
        >>> good = {"input": "Hi", "output_1": "Hello", "output_2": "Go", "label": 1}
        >>> _ = f.write_text(json.dumps([good, {**good, "label": 0}]))
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     pairs = load_llmbar(f, skip_bad=True)
        >>> len(pairs), caught[0].category is SkippedRecordsWarning
        (1, True)
        >>> print(pairs.skipped[0].field, pairs.skipped[0].reason)
        label must be 1 or 2, got 0
    """


def _set(obj: object, name: str, value: object) -> None:
    object.__setattr__(obj, name, value)  # normalising fields of a frozen dataclass


# --------------------------------------------------------------------------------------------
# items


@dataclass(frozen=True)
class PreferencePair:
    """One prompt with a preferred (`chosen`) and a dispreferred (`rejected`) response.

    `prompt` is a `str` or a sequence of messages (stored as a tuple of copied dicts);
    `chosen` and `rejected` are the final assistant responses (empty strings are allowed: some
    real data prefers an empty reply). `metadata` is copied on construction.

    Args:
        prompt: A `str` or a sequence of messages.
        chosen: The preferred response.
        rejected: The dispreferred response.
        subset: The subset it belongs to, if any.
        metadata: Extra fields.
        record: 0-based index of the input record this pair came from (set by the loaders).

    Raises:
        MalformedRecordError: If a field is invalid.

    Examples:
        >>> from reward_lens_tl.data import PreferencePair
        >>> pair = PreferencePair(
        ...     [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
        ...      {"role": "user", "content": "Tell me a joke."}],
        ...     chosen="Why did the chicken cross the road?", rejected="No.", subset="demo")
        >>> len(pair.prompt_messages()), pair.messages("rejected")[-1]
        (3, {'role': 'assistant', 'content': 'No.'})
        >>> from reward_lens_tl.errors import MalformedRecordError
        >>> try:
        ...     PreferencePair("Hi", chosen=None, rejected="Hello")
        ... except MalformedRecordError as err:
        ...     print(err)
        field 'chosen': must be a str, got null
    """

    prompt: Prompt
    chosen: str
    rejected: str
    subset: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    #: 0-based index of the input record this pair came from (set by the loaders).
    record: int | None = None

    def __post_init__(self) -> None:
        """Check and normalise the fields."""
        _set(self, "prompt", check_prompt(self.prompt))
        check_str(self.chosen, "chosen")
        check_str(self.rejected, "rejected")
        check_optional_str(self.subset, "subset")
        _set(self, "metadata", check_metadata(self.metadata))

    def prompt_messages(self) -> tuple[Message, ...]:
        """The prompt as a tuple of message dicts (a `str` prompt becomes one user message)."""
        return prompt_messages(self.prompt)

    def messages(self, which: Literal["chosen", "rejected"]) -> tuple[Message, ...]:
        """The whole conversation ending in the chosen or the rejected response.

        Args:
            which: `"chosen"` or `"rejected"`.

        Returns:
            The messages.

        Raises:
            InvalidArgumentError: If `which` is neither value.
        """
        if which not in ("chosen", "rejected"):
            raise InvalidArgumentError(f"which must be 'chosen' or 'rejected', got {which!r}")
        response = self.chosen if which == "chosen" else self.rejected
        return (*self.prompt_messages(), {"role": "assistant", "content": response})


@dataclass(frozen=True)
class RankedItem:
    """One prompt with one correct response and several wrong ones (e.g. a RewardMATH problem).

    Args:
        prompt: A `str` or a sequence of messages.
        correct: The correct response.
        wrong: The wrong responses.
        id: The item's id, if any.
        metadata: Extra fields.
        record: 0-based index of the (first) input record it came from (set by the loaders).

    Raises:
        MalformedRecordError: If a field is invalid.

    Examples:
        >>> from reward_lens_tl.data import RankedItem
        >>> item = RankedItem("1 + 1 = ?", correct="2", wrong=("3", "11"), id=7)
        >>> [(p.chosen, p.rejected, p.metadata["wrong_index"]) for p in item.pairs()]
        [('2', '3', 0), ('2', '11', 1)]
    """

    prompt: Prompt
    correct: str
    wrong: tuple[str, ...]
    id: Hashable | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    #: 0-based index of the (first) input record this item came from (set by the loaders).
    record: int | None = None

    def __post_init__(self) -> None:
        """Check and normalise the fields."""
        _set(self, "prompt", check_prompt(self.prompt))
        check_str(self.correct, "correct")
        _set(self, "wrong", check_responses(self.wrong, "wrong"))
        check_id(self.id)
        _set(self, "metadata", check_metadata(self.metadata))

    def pairs(self) -> tuple[PreferencePair, ...]:
        """The correct response against each wrong one, in order (`metadata["wrong_index"]`)."""
        return tuple(
            PreferencePair(
                self.prompt,
                self.correct,
                wrong,
                metadata={**self.metadata, "id": self.id, "wrong_index": k},
                record=self.record,
            )
            for k, wrong in enumerate(self.wrong)
        )


@dataclass(frozen=True)
class GridItem:
    """One prompt with three chosen and three rejected responses in three styles (RM-Bench).

    `chosen[i]` and `rejected[i]` are in style `RM_BENCH_STYLES[i]` (concise,
    detailed, markdown). `pairs` gives the full 3 x 3 grid of comparisons.

    Args:
        prompt: A `str` or a sequence of messages.
        chosen: The three chosen responses.
        rejected: The three rejected responses.
        id: The item's id, if any.
        subset: The subset it belongs to, if any.
        domain: Its domain, if any.
        metadata: Extra fields.
        record: 0-based index of the input record it came from (set by the loaders).

    Raises:
        MalformedRecordError: If a field is invalid.

    Examples:
        >>> from reward_lens_tl.data import GridItem
        >>> item = GridItem("Hi", chosen=("a", "b", "c"), rejected=("x", "y", "z"), id=1)
        >>> pairs = item.pairs()
        >>> len(pairs), pairs[5].chosen, pairs[5].rejected, pairs[5].metadata["chosen_style"]
        (9, 'b', 'z', 1)
    """

    prompt: Prompt
    chosen: tuple[str, str, str]
    rejected: tuple[str, str, str]
    id: Hashable | None = None
    subset: str | None = None
    domain: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    #: 0-based index of the input record this item came from (set by the loaders).
    record: int | None = None

    def __post_init__(self) -> None:
        """Check and normalise the fields."""
        _set(self, "prompt", check_prompt(self.prompt))
        _set(self, "chosen", check_responses(self.chosen, "chosen", count=3))
        _set(self, "rejected", check_responses(self.rejected, "rejected", count=3))
        check_id(self.id)
        check_optional_str(self.subset, "subset")
        check_optional_str(self.domain, "domain")
        _set(self, "metadata", check_metadata(self.metadata))

    def pairs(self) -> tuple[PreferencePair, ...]:
        """The 9 pairs, chosen style major (`metadata`: `chosen_style`, `rejected_style`)."""
        base = {**self.metadata, "id": self.id, "domain": self.domain}
        return tuple(
            PreferencePair(
                self.prompt,
                chosen,
                rejected,
                subset=self.subset,
                metadata={**base, "chosen_style": i, "rejected_style": j},
                record=self.record,
            )
            for i, chosen in enumerate(self.chosen)
            for j, rejected in enumerate(self.rejected)
        )


# --------------------------------------------------------------------------------------------
# sets


@dataclass(frozen=True)
class SkippedRecord:
    """An input record a loader skipped (`skip_bad=True`): where it was and what was wrong.

    Args:
        index: The record's 0-based index.
        id: The record's id, if it has a usable one.
        field: The bad field.
        reason: What was wrong with it.
        source: The file it came from.

    Examples:
        >>> from reward_lens_tl.data import SkippedRecord
        >>> print(SkippedRecord(3, None, "label", "must be 1 or 2, got 0", source="x.json"))
        x.json: record 3, field 'label': must be 1 or 2, got 0
    """

    index: int
    id: Hashable | None
    field: str
    reason: str
    source: str = ""

    def __str__(self) -> str:
        """Where the record was and what was wrong."""
        where = f"record {self.index}" + ("" if self.id is None else f" (id={self.id!r})")
        prefix = f"{self.source}: " if self.source else ""
        return f"{prefix}{where}, field {self.field!r}: {self.reason}"


@dataclass(frozen=True, repr=False)
class ItemSet(Sequence[T], Generic[T]):
    """A read-only sequence of loaded items plus the records skipped while loading them.

    Indexing gives an item; slicing gives an `ItemSet` of the same class that keeps `skipped`
    and `source` (they describe the load, not the slice).

    Args:
        items: The items.
        skipped: The records skipped while loading them.
        source: Where they came from.

    Examples:
        >>> from reward_lens_tl.data import ItemSet, RankedItem
        >>> items = ItemSet((RankedItem("q", "a", ("b",)), RankedItem("r", "c", ("d", "e"))))
        >>> len(items), len(items[1:]), len(items.pairs())
        (2, 1, 3)
    """

    items: tuple[T, ...] = ()
    skipped: tuple[SkippedRecord, ...] = ()
    source: str = ""

    def __post_init__(self) -> None:
        """Check and normalise the fields."""
        _set(self, "items", tuple(self.items))
        _set(self, "skipped", tuple(self.skipped))

    def __len__(self) -> int:
        """The number of items."""
        return len(self.items)

    def __iter__(self) -> Iterator[T]:
        """Iterate over the items."""
        return iter(self.items)

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> Self: ...
    def __getitem__(self, index: int | slice) -> T | Self:
        """An item, or a slice of the set."""
        if isinstance(index, slice):
            return dataclasses.replace(self, items=self.items[index])
        return self.items[index]

    def __repr__(self) -> str:
        """The class, the number of items, the source and the number skipped."""
        return (
            f"{type(self).__name__}({len(self)} items from {self.source!r}, "
            f"{len(self.skipped)} skipped)"
        )

    def pairs(self) -> PairSet:
        """Every item's `pairs`, flattened in order, with the same `skipped`/`source`."""
        flat = tuple(p for item in self.items for p in item.pairs())  # type: ignore[attr-defined]
        return PairSet(flat, self.skipped, self.source)


@dataclass(frozen=True, repr=False)
class PairSet(ItemSet[PreferencePair]):
    """A read-only sequence of `PreferencePair` with `skipped` records and a `source`.

    Args:
        items: The pairs.
        skipped: The records skipped while loading them.
        source: Where they came from.

    Examples:
        >>> from reward_lens_tl.data import PairSet, PreferencePair
        >>> pairs = PairSet([PreferencePair("q1", "a", "b", subset="x"),
        ...                  PreferencePair("q2", "c", "d", subset="y"),
        ...                  PreferencePair("q3", "e", "f", subset="x")], source="demo")
        >>> pairs, pairs.subsets()
        (PairSet(3 pairs from 'demo', 0 skipped), {'x': 2, 'y': 1})
        >>> [p.prompt for p in pairs.filter(subset="x")], pairs[1:].source
        (['q1', 'q3'], 'demo')
        >>> list(pairs.to_dataframe().columns)
        ['prompt', 'chosen', 'rejected', 'subset']
    """

    def __repr__(self) -> str:
        """The number of pairs, the source and the number skipped."""
        return f"PairSet({len(self)} pairs from {self.source!r}, {len(self.skipped)} skipped)"

    def pairs(self) -> PairSet:
        """This set itself (so item sets and pair sets can be used alike)."""
        return self

    def subsets(self) -> dict[str | None, int]:
        """How many pairs each subset holds, in order of first appearance."""
        return dict(Counter(p.subset for p in self.items))

    def filter(
        self,
        subset: str | Collection[str] | None = None,
        where: Callable[[PreferencePair], bool] | None = None,
    ) -> PairSet:
        """The pairs in `subset` (one name or several) that also satisfy `where`.

        `None` means no constraint; select pairs without a subset with
        `where=lambda p: p.subset is None`.

        Args:
            subset: One subset name or several, or `None`.
            where: A predicate on pairs, or `None`.

        Returns:
            A `PairSet` of the pairs kept.
        """
        wanted = {subset} if isinstance(subset, str) else subset
        kept = tuple(
            p
            for p in self.items
            if (wanted is None or p.subset in wanted) and (where is None or where(p))
        )
        return dataclasses.replace(self, items=kept)

    def to_dataframe(self) -> pd.DataFrame:
        """One row per pair, as a pandas DataFrame.

        The columns are `prompt`, `chosen`, `rejected`, `subset`, then one column per
        metadata key (prefixed `metadata.` if it clashes with those four).

        Returns:
            The DataFrame.
        """
        import pandas as pd

        core = ("prompt", "chosen", "rejected", "subset")
        rows = []
        for p in self.items:
            row: dict[str, Any] = dict(
                zip(core, (p.prompt, p.chosen, p.rejected, p.subset), strict=True)
            )
            for key, value in p.metadata.items():
                row[f"metadata.{key}" if key in core else key] = value
            rows.append(row)
        return pd.DataFrame(rows, columns=None if rows else list(core))
