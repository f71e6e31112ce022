"""The one interface every result object follows, its row operations, and shared helpers.

Every analysis returns a frozen dataclass that subclasses the abstract `Result`:

- `to_dataframe()`: the numbers as a tidy `pandas.DataFrame` (one row per entry);
- `plot(ax=None)`: a matplotlib figure (returned, never shown);
- `top_k(k)`: its `k` most important entries as a `TopK` — a list of
  `(label, value)` pairs **sorted by the value shown**: by `|value|` for signed
  contributions and effects, by the value itself where larger is better (a sweep's optimal
  candidates); it also has `to_dataframe()`;
- `to_html()` / `_repr_html_()`: a self-contained, escaped HTML table (what Jupyter shows);
- `take(rows)` / `concat(parts)`: a subset of its examples, and results of the same
  analysis joined along their examples, carrying every field.

A subclass declares which frame columns hold its entries' labels and values
(`label_column`, `value_column`) to get `top_k` for free, or overrides `top_k` and
still returns a `TopK`. It declares which fields are per example, and along which axis,
in `example_axes` (built with `axes`); every other field is shared by all examples.
Per-example arrays put the label axis (component, site, feature, coefficient) first and the
example axis after it: `values [label, example]`, the order `tidy_frame` reads.

Examples:
    >>> import pandas as pd
    >>> import torch
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Demo(Result):
    ...     value_column = "score"
    ...     def to_dataframe(self):
    ...         return pd.DataFrame({"label": ["a", "b", "c"], "score": [0.1, -3.0, 2.0]})
    >>> Demo().top_k(2)
    [('b', -3.0), ('c', 2.0)]

    Rows of a result with per-example fields, and the parts joined back:

    >>> @dataclass(frozen=True)
    ... class Scores(Result):
    ...     example_axes = axes(values=1, rewards=0)
    ...     values: torch.Tensor  # [label, example]
    ...     rewards: torch.Tensor  # [example]
    ...     labels: tuple[str, ...] = ("x", "y")  # shared by every example
    ...     def to_dataframe(self):
    ...         return tidy_frame(self.values, self.labels, "label", "value")
    >>> scores = Scores(torch.tensor([[1.0, 2, 3], [4, 5, 6]]), torch.tensor([7.0, 8, 9]))
    >>> scores.take([2, 0]).values
    tensor([[3., 1.],
            [6., 4.]])
    >>> joined = Scores.concat([scores.take(slice(0, 1)), scores.take(slice(1, None))])
    >>> joined.values.equal(scores.values), joined.labels
    (True, ('x', 'y'))
"""

from __future__ import annotations

import abc
import dataclasses
import os
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from .errors import (
    ArgumentTypeError,
    EmptyInputError,
    InvalidArgumentError,
    NoExampleAxisError,
    ResultFieldError,
    ResultMismatchError,
)
from .html import escape
from .indices import check_indices
from .plotting import Backend, bar, render

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from .pair_batches import OnError

__all__ = [
    "Result",
    "axes",
    "bar_chart",
    "check_fields",
    "check_result_shapes",
    "signed_color",
]

R = TypeVar("R", bound="Result")


_SHAPE_CHECKS = os.environ.get("REWARD_LENS_TL_CHECK_SHAPES", "") not in ("", "0")


def check_result_shapes(enabled: bool = True) -> bool:
    """Turn run-time checks of every result's fields on or off.

    The checks are of types and jaxtyping shapes, with beartype. Off by default (the test suite
    turns them on, as does `REWARD_LENS_TL_CHECK_SHAPES=1`).

    Args:
        enabled: Whether to check the fields of every result built from now on.

    Returns:
        The previous setting.

    Examples:
        >>> previous = check_result_shapes(True)
        >>> _ = check_result_shapes(previous)
    """
    global _SHAPE_CHECKS
    previous, _SHAPE_CHECKS = _SHAPE_CHECKS, bool(enabled)
    return previous


def axes(**example_axes: int) -> Mapping[str, int]:
    """`example_axes` of a result class.

    Args:
        **example_axes: Field name → the axis that indexes examples (`0` for nested results,
            lists and tuples).

    Returns:
        The mapping, read-only.

    Examples:
        >>> dict(axes(values=1, rewards=0))
        {'values': 1, 'rewards': 0}
    """
    return MappingProxyType(dict(example_axes))


class TopK(list):
    """`[(label, value), ...]` sorted by `|value|` (descending); also a small table."""

    value_name: str = "value"

    def to_dataframe(self):
        """The entries as a two-column frame.

        Returns:
            A pandas `DataFrame`, one row per entry.
        """
        import pandas as pd

        return pd.DataFrame(list(self), columns=["label", self.value_name])

    def _repr_html_(self) -> str:
        return self.to_dataframe().to_html(index=False, escape=True)


def ranked(pairs, value_name: str = "value") -> TopK:
    """`pairs` already ranked by their value where larger is better, as a `TopK`.

    For a sweep's optimal candidates, or the most concordant model pairs.

    Args:
        pairs: The `(label, value)` pairs, in rank order.
        value_name: The name of the value column of the `TopK`'s frame.

    Returns:
        The pairs as a `TopK`.
    """
    out = TopK((str(label), float(v)) for label, v in pairs)
    out.value_name = value_name
    return out


def top_entries(labels: Sequence[str], values, k: int, value_name: str = "value") -> TopK:
    """The `k` `(label, value)` pairs with the largest `|value|`, sorted that way.

    Args:
        labels: The entries' labels.
        values: The entries' values.
        k: How many entries to keep.
        value_name: The name of the value column of the `TopK`'s frame.

    Returns:
        The top entries as a `TopK`.
    """
    pairs = [(str(label), float(v)) for label, v in zip(labels, values, strict=True)]
    # NaN last: the key's first element is False for every number, True for NaN
    pairs.sort(key=lambda p: (p[1] != p[1], -abs(p[1]) if p[1] == p[1] else 0.0))
    out = TopK(pairs[: max(int(k), 0)])
    out.value_name = value_name
    return out


class Result(abc.ABC):
    """Base of every result object (see the module docstring).

    Examples:
        >>> import pandas as pd
        >>> from dataclasses import dataclass
        >>> @dataclass(frozen=True)
        ... class Counts(Result):
        ...     value_column = "count"
        ...     def to_dataframe(self):
        ...         return pd.DataFrame({"label": ["a", "b"], "count": [2, 5]})
        >>> Counts().top_k(1)
        [('b', 5.0)]
    """

    #: Frame column holding each entry's label, and the one holding the value `top_k` shows.
    label_column: ClassVar[str] = "label"
    value_column: ClassVar[str] = "value"
    #: A title for HTML views.
    title: ClassVar[str | None] = None
    #: Field → axis indexing the examples (see `axes`); `None`: no example axis.
    example_axes: ClassVar[Mapping[str, int] | None] = None
    #: How many entries the base `plot` draws.
    plot_k: ClassVar[int] = 15
    #: Why a class without `example_axes` has no rows to take (the error says it).
    no_example_axis: ClassVar[str] = "it does not declare its per-example fields (example_axes)"

    def __post_init__(self) -> None:
        """Check the fields when `check_result_shapes` is on."""
        if _SHAPE_CHECKS:
            check_fields(self)

    @abc.abstractmethod
    def to_dataframe(self):
        """The numbers as a tidy frame (one row per entry).

        Returns:
            A pandas `DataFrame`.
        """

    def top_k(self, k: int = 10) -> TopK:
        """The `k` entries with the largest `|value_column|` of `to_dataframe`.

        Args:
            k: How many entries to return.

        Returns:
            The entries as a `TopK`.
        """
        frame = self.to_dataframe()
        return top_entries(
            frame[self.label_column].tolist(),
            frame[self.value_column].tolist(),
            k,
            self.value_column,
        )

    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """Bar chart of the top `plot_k` entries of `top_k`.

        Subclasses draw something more specific, or offer `k=`. Every `plot` returns an
        interactive plotly figure (hover for each label's exact value), or its static
        matplotlib form with `backend="matplotlib"` or `ax=` (see `reward_lens_tl.plotting`).

        Args:
            ax: Matplotlib axes to draw the static form on.
            backend: `"plotly"` or `"matplotlib"` (default: `plotting.get_backend()`).

        Returns:
            The figure (returned, never shown).
        """
        return self._plot_top_k(ax, self.plot_k, backend)

    def _plot_top_k(self, ax: Axes | None, k: int, backend: Backend | None = None) -> Any:
        """Bar chart of `top_k` `(k)` (what the base `plot` draws, for subclasses with `k`)."""
        top = self.top_k(k)
        name = top.value_name if isinstance(top, TopK) else "value"
        return render(bar_chart(top, name, title=self.title or ""), backend, ax)

    def to_html(self, max_rows: int = 30) -> str:
        """An escaped HTML table of the first `max_rows` rows of `to_dataframe`.

        Args:
            max_rows: How many rows to show.

        Returns:
            The self-contained HTML table.
        """
        frame = self.to_dataframe()
        title = escape(self.title or type(self).__name__)
        more = len(frame) - max_rows
        table = frame.head(max_rows).to_html(index=False, escape=True, float_format="%.4g")
        tail = f"<p>… {more} more rows (to_dataframe())</p>" if more > 0 else ""
        return f"<div><strong>{title}</strong> ({len(frame)} rows){table}{tail}</div>"

    def _repr_html_(self) -> str:
        return self.to_html()

    # -- rows --------------------------------------------------------------------------------
    @classmethod
    def _example_axes(cls) -> Mapping[str, int]:
        if cls.example_axes is None:
            raise NoExampleAxisError(
                f"{cls.__name__} has no example axis to take rows of or join along: "
                f"{cls.no_example_axis}"
            )
        return cls.example_axes

    def example_count(self) -> int:
        """How many examples (rows) the result holds."""
        for name, axis in self._example_axes().items():
            n = _length(getattr(self, name), axis)
            if n is not None:
                return n
        return 0

    def take(self: R, rows: slice | Sequence[int] | Tensor) -> R:
        """The result of the examples `rows` only, every field carried.

        Per-example fields are cut, shared ones kept.

        Args:
            rows: A slice, or indices (negative ones count from the end).

        Returns:
            A result of the same type, holding those examples.
        """
        index = _row_index(rows, self.example_count())
        cut = {
            name: _take(getattr(self, name), axis, index)
            for name, axis in self._example_axes().items()
        }
        return _replace(self, cut)

    @classmethod
    def concat(cls: type[R], parts: Iterable[R]) -> R:
        """Results of the same analysis (same labels, same settings) joined along their examples.

        In order: per-example fields concatenated, shared fields checked equal
        (`ResultMismatchError` names the first that differs).

        Args:
            parts: The results to join, all of this type.

        Returns:
            One result of this type holding every part's examples.

        Raises:
            ArgumentTypeError: A part that is not of this type.
            EmptyInputError: No parts.
        """
        per_example = cls._example_axes()
        parts = list(parts)
        if not parts:
            raise EmptyInputError(f"{cls.__name__}.concat needs at least one part")
        strangers = {type(p).__name__ for p in parts if type(p) is not cls}
        if strangers:
            raise ArgumentTypeError(f"{cls.__name__}.concat got parts of type {sorted(strangers)}")
        fields = [f.name for f in _fields(cls)]
        for name in fields:  # first: are these results of one analysis?
            if name not in per_example:
                _check_shared([getattr(p, name) for p in parts], f"{cls.__name__}.{name}")
        joined = {
            name: _cat([getattr(p, name) for p in parts], axis, f"{cls.__name__}.{name}")
            for name, axis in per_example.items()
        }
        return _replace(parts[0], joined)


def _fields(cls: type[Result]) -> tuple[dataclasses.Field[Any], ...]:
    """The dataclass fields of a result class (every concrete result is a dataclass)."""
    if not dataclasses.is_dataclass(cls):
        raise ArgumentTypeError(f"{cls.__name__} is not a dataclass: it has no fields to join")
    return dataclasses.fields(cls)


def _replace(result: R, changes: Mapping[str, Any]) -> R:
    """`result` with the fields `changes` replaced (`dataclasses.replace`)."""
    if not dataclasses.is_dataclass(result) or isinstance(result, type):
        raise ArgumentTypeError(
            f"{type(result).__name__} is not a dataclass: its fields cannot be replaced"
        )
    return dataclasses.replace(result, **changes)


class MarginResult(Result):
    """A result with `chosen` and `rejected` parts shown through their margin.

    Its frame, figure and top entries are those of its `margin` (chosen − rejected).
    """

    example_axes = axes(chosen=0, rejected=0)

    # Declared here for type checkers; each subclass declares them as dataclass fields of its
    # own result type (one that supports ``-`` and ``plot(ax, k=)``).
    chosen: Any
    rejected: Any

    @property
    def margin(self) -> Any:
        """`chosen − rejected`: a result of the same type as `chosen`."""
        return self.chosen - self.rejected

    def to_dataframe(self):
        """The margin's result (chosen − rejected) as a frame."""
        return self.margin.to_dataframe()

    def top_k(self, k: int = 10) -> TopK:
        """The top `k` entries of the margin.

        Args:
            k: How many entries to return.

        Returns:
            The entries as a `TopK`.
        """
        return self.margin.top_k(k)

    def plot(self, ax: Axes | None = None, k: int = 15, *, backend: Backend | None = None) -> Any:
        """The margin's figure, of its top `k` entries.

        Args:
            ax: Matplotlib axes to draw the static form on.
            k: How many entries to draw.
            backend: `"plotly"` or `"matplotlib"` (see `reward_lens_tl.plotting`).

        Returns:
            The figure.
        """
        return self.margin.plot(ax=ax, k=k, backend=backend)


# -- chosen/rejected batches ---------------------------------------------------------------------
def split_pair(result: R, n: int) -> tuple[R, R]:
    """A result of a chosen-then-rejected batch as its `(chosen, rejected)` halves.

    The batch is laid out `[chosen_0 … chosen_{n-1}, rejected_0 … rejected_{n-1}]` (every pair
    analysis runs both sides as one batch).

    Args:
        result: The result of the whole batch.
        n: The number of pairs.

    Returns:
        The `(chosen, rejected)` halves.

    Raises:
        InvalidArgumentError: A result that does not hold `2 * n` examples.
    """
    if result.example_count() != 2 * n:
        raise InvalidArgumentError(
            f"a batch of {n} pairs has {2 * n} rows (chosen then rejected), this result has "
            f"{result.example_count()}"
        )
    return result.take(slice(0, n)), result.take(slice(n, None))


def join_pairs(halves: Iterable[tuple[R, R]]) -> tuple[R, R]:
    """The `(chosen, rejected)` halves of each batch joined into one `(chosen, rejected)`.

    The halves come from `split_pair`; batches are joined in order.

    Args:
        halves: The `(chosen, rejected)` halves of each batch.

    Returns:
        The joined `(chosen, rejected)`.
    """
    chosen, rejected = zip(*halves, strict=True)
    return type(chosen[0]).concat(chosen), type(rejected[0]).concat(rejected)


#: The arguments of a pair analysis that `run_pair_batches` streams (`pair_lens`,
#: `pair_attribution`), pasted at `{pair_run}` (`reward_lens_tl.signatures.pasted_docs`).
PAIR_RUN_DOC = """model: The reward model.
pairs: The preference pairs (any iterable, streamed).
batch_size: Pairs per forward (both halves of a chunk run as one batch).
truncation: `"error"`, `"left"`, `"right"` or `"both"`, for pairs given as text.
on_error: `"raise"` or `"skip"`, for a pair that cannot be encoded."""


def run_pair_batches(
    model,
    pairs: Iterable,
    analysis: Callable[[Tensor, Tensor], Result],
    pair_type: Callable[..., R],
    *,
    batch_size: int,
    truncation: str,
    on_error: OnError,
) -> R:
    """`pair_type` of `analysis(ids, mask)` run on each batch of pairs.

    `pair_type` is a pair result with `chosen`, `rejected`, `indices`, `records`, `skipped`.
    Each batch holds its chosen rows then its rejected rows (`map_pair_batches`: streamed,
    `on_error`, split across processes under `torchrun`).

    Args:
        model: The `HookedRewardModel` that encodes and runs the pairs.
        pairs: The preference pairs.
        analysis: The analysis of one batch, `analysis(ids, mask)`.
        pair_type: The pair result class to build.
        batch_size: Pairs per batch.
        truncation: What to do with a pair longer than the context.
        on_error: What to do with a pair that fails.

    Returns:
        The pair result.
    """
    from .pair_batches import finished_chunks, map_pair_batches

    def run(ids: Tensor, mask: Tensor, n: int):
        return split_pair(analysis(ids, mask), n)

    chunks = map_pair_batches(
        model, pairs, run, batch_size=batch_size, truncation=truncation, on_error=on_error
    )
    done, skipped = finished_chunks(chunks)
    chosen, rejected = join_pairs(c.output for c in done)
    return pair_type(
        chosen=chosen,
        rejected=rejected,
        indices=tuple(i for c in done for i in c.kept),
        records=tuple(r for c in done for r in c.records),
        skipped=skipped,
    )


# -- row operations on one field -----------------------------------------------------------------
def _length(value: Any, axis: int) -> int | None:
    """Examples in a per-example field (`None` when the field is absent)."""
    if value is None:
        return None
    if isinstance(value, Result):
        return value.example_count()
    if isinstance(value, (Tensor, np.ndarray)):
        return value.shape[axis]
    return len(value) or None  # an empty list or tuple: not recorded


def _row_index(rows: Any, n: int) -> slice | list[int]:
    if isinstance(rows, slice):
        return rows
    if isinstance(rows, (Tensor, np.ndarray)):
        if rows.dtype in (torch.bool, np.bool_):
            raise InvalidArgumentError("rows must be a slice or indices, not a boolean mask")
        rows = rows.tolist()
    return list(check_indices(rows, n, "row", negative=True))


def _take(value: Any, axis: int, index: slice | list[int]) -> Any:
    if value is None:
        return None
    if isinstance(value, Result):
        return value.take(index)
    if isinstance(value, (Tensor, np.ndarray)):
        return value[(slice(None),) * axis + (_array_index(index, value),)]
    if isinstance(value, (list, tuple)):
        if not value:
            return value
        return type(value)(value[index] if isinstance(index, slice) else [value[i] for i in index])
    raise ArgumentTypeError(f"cannot take rows of a {type(value).__name__} field")


def _array_index(index: slice | list[int], like: Tensor | np.ndarray):
    if isinstance(index, slice):
        return index
    if isinstance(like, Tensor):
        return torch.tensor(index, dtype=torch.long, device=like.device)
    return np.array(index, dtype=np.int64)


def _cat(values: list, axis: int, name: str) -> Any:
    present = [v for v in values if v is not None]
    if not present:
        return None
    if len(present) != len(values):
        raise ResultMismatchError(f"{name} is recorded in some parts and None in others")
    first = present[0]
    if isinstance(first, Result):
        return type(first).concat(values)
    if isinstance(first, (Tensor, np.ndarray)):
        _check_other_axes(values, axis, name)
        return (
            torch.cat(values, axis) if isinstance(first, Tensor) else np.concatenate(values, axis)
        )
    if isinstance(first, (list, tuple)):
        recorded = [bool(v) for v in values]
        if any(recorded) and not all(recorded):
            raise ResultMismatchError(f"{name} is recorded in some parts and empty in others")
        return type(first)(item for v in values for item in v)
    raise ArgumentTypeError(f"cannot concatenate a {type(first).__name__} field ({name})")


def _check_other_axes(values: list, axis: int, name: str) -> None:
    shapes = {tuple(v.shape[:axis]) + tuple(v.shape[axis + 1 :]) for v in values}
    if len(shapes) > 1:
        raise ResultMismatchError(
            f"{name}: parts whose axes other than the example axis ({axis}) differ "
            f"({sorted(tuple(v.shape) for v in values)}); e.g. source positions of batches "
            "padded to different widths cannot be joined"
        )


def _check_shared(values: list, name: str) -> None:
    for k, value in enumerate(values[1:], start=1):
        if not _same(values[0], value):
            raise ResultMismatchError(
                f"{name} differs between part 0 and part {k}: it is shared by every example, so "
                "only results of the same analysis (same labels and settings) can be joined"
            )


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        return (
            isinstance(a, Tensor)
            and isinstance(b, Tensor)
            and a.shape == b.shape
            and bool(torch.equal(a.cpu(), b.cpu()))
        )
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(a, b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if dataclasses.is_dataclass(a) and type(a) is type(b):
        return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True  # NaN: the same missing value
    return bool(a == b)


# -- run-time field checks -----------------------------------------------------------------------
_HINTS: dict[type, dict[str, Any]] = {}


def check_fields(result: Result) -> None:
    """Check `result`'s fields against their annotations.

    Types, and the jaxtyping shapes of its arrays, dimension names consistent across fields:
    beartype checks each field's value against its annotation inside one jaxtyping shape
    context. Runs when a result is built with `check_result_shapes` on.

    Args:
        result: The result to check.

    Raises:
        ResultFieldError: A field that does not match its annotation.

    Examples:
        >>> from dataclasses import dataclass
        >>> @dataclass(frozen=True)
        ... class Pair(Result):
        ...     chosen: Float[Tensor, "example"]
        ...     rejected: Float[Tensor, "example"]
        ...     def to_dataframe(self):
        ...         return None
        >>> check_fields(Pair(torch.zeros(3), torch.ones(3)))
        >>> try:
        ...     check_fields(Pair(torch.zeros(3), torch.ones(2)))
        ... except ResultFieldError as err:
        ...     print(err)
        Pair.rejected does not match its annotation Float[Tensor, 'example']
        got: float32 tensor of shape (2,)
        fields before it (their dimension names are shared): chosen float32 tensor of shape (3,)
    """
    from beartype.door import die_if_unbearable
    from beartype.roar import BeartypeDoorHintViolation
    from jaxtyping import jaxtyped

    cls = type(result)
    if not dataclasses.is_dataclass(cls):
        return
    if cls not in _HINTS:
        _HINTS[cls] = _field_hints(cls)
    with jaxtyped("context"):  # one memo of dimension sizes for all the fields
        for name, hint in _HINTS[cls].items():
            try:
                die_if_unbearable(getattr(result, name), hint)
            except BeartypeDoorHintViolation as err:
                raise ResultFieldError(_field_message(result, name, hint)) from err


def _field_hints(cls: type) -> dict[str, Any]:
    """The resolved annotations of `cls`'s `__init__` fields, in field order.

    A field whose annotation cannot be resolved here (e.g. a name imported only for type
    checkers) is left unchecked.
    """
    owners = {name: klass for klass in reversed(cls.__mro__) for name in _own_annotations(klass)}
    hints = {}
    for field in dataclasses.fields(cls):
        owner = owners.get(field.name)
        if field.init and owner is not None:
            holder = type(
                "_Field",
                (),
                {
                    "__module__": owner.__module__,
                    "__annotations__": {field.name: _own_annotations(owner)[field.name]},
                },
            )
            try:  # in the namespace of the class that declares the field
                hints[field.name] = typing.get_type_hints(holder)[field.name]
            except Exception:  # noqa: BLE001, S112 - any failure to resolve: not checked
                continue
    return hints


def _own_annotations(klass: type) -> dict[str, Any]:
    return vars(klass).get("__annotations__", {})


def _field_message(result: Result, name: str, hint: Any) -> str:
    """What is wrong with field `name`, and the shapes of the fields before it."""
    shown = getattr(hint, "__name__", None) or repr(hint)
    lines = [
        f"{type(result).__name__}.{name} does not match its annotation {shown}",
        f"got: {_described(getattr(result, name))}",
    ]
    before = {}
    for checked in _HINTS[type(result)]:  # the fields checked before it, in order
        if checked == name:
            break
        value = getattr(result, checked)
        if isinstance(value, Tensor | np.ndarray):
            before[checked] = _described(value)
    if before:
        shapes = "; ".join(f"{k} {v}" for k, v in before.items())
        lines.append(f"fields before it (their dimension names are shared): {shapes}")
    return "\n".join(lines)


def _described(value: Any) -> str:
    """`value`'s type, and for an array its dtype and shape."""
    if isinstance(value, Tensor):
        return f"{str(value.dtype).removeprefix('torch.')} tensor of shape {tuple(value.shape)}"
    if isinstance(value, np.ndarray):
        return f"{value.dtype} array of shape {value.shape}"
    return type(value).__name__


# -- frames and figures --------------------------------------------------------------------------
def tidy_frame(
    values: Float[Tensor, "label example"], labels: Sequence[str], label_name: str, value_name: str
):
    """`values [label, example]` → one row per (label, example).

    Args:
        values: The values, `[label, example]`.
        labels: One label per row of `values`.
        label_name: The name of the label column.
        value_name: The name of the value column.

    Returns:
        A pandas `DataFrame`, one row per (label, example).
    """
    import pandas as pd

    arr = values.detach().float().cpu().numpy()
    n_labels, n_examples = arr.shape
    return pd.DataFrame(
        {
            label_name: [labels[i] for i in range(n_labels) for _ in range(n_examples)],
            "example": [j for _ in range(n_labels) for j in range(n_examples)],
            value_name: arr.reshape(-1),
        }
    )


def bar_chart(
    items: Sequence[tuple[str, float]],
    xlabel: str,
    colors: str | Sequence[str] | None = None,
    title: str = "",
):
    """Horizontal bars of `(label, value)` items, the first at the top, as a plotly figure.

    Args:
        items: The `(label, value)` bars.
        xlabel: The x axis label (the value's name on hover).
        colors: One colour, a list, or `plotting.SIGNED`.
        title: The figure's title.

    Returns:
        The plotly figure (pass it to `plotting.render`).

    Examples:
        >>> bar_chart([("L0H1", 0.5), ("L1H0", -0.2)], "effect").data[0].orientation
        'h'
    """
    items = list(items)
    return bar(
        [label for label, _ in items],
        [value for _, value in items],
        xaxis=xlabel,
        colors=colors,
        title=title,
    )


def signed_color(value: float) -> str:
    """Red for a negative value, blue for the others (the colours of signed bar charts).

    Args:
        value: The bar's value.

    Returns:
        The colour, as a hex string.

    Examples:
        >>> signed_color(-0.5)
        '#c00000'
    """
    return "#c00000" if value < 0 else "#4472c4"
