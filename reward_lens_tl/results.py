"""The one interface every result object follows, and shared frame/figure helpers.

Every analysis returns a frozen dataclass that subclasses :class:`Result`:

- ``to_dataframe()``: the numbers as a tidy ``pandas.DataFrame`` (one row per entry);
- ``plot(ax=None)``: a matplotlib figure (returned, never shown);
- ``top_k(k)``: its ``k`` most important entries as a :class:`TopK` — a list of
  ``(label, value)`` pairs **sorted by the value shown**: by ``|value|`` for signed
  contributions and effects, by the value itself where larger is better (a sweep's optimal
  candidates); it also has ``to_dataframe()``;
- ``to_html()`` / ``_repr_html_()``: a self-contained, escaped HTML table (what Jupyter shows).

A subclass declares which frame columns hold its entries' labels and values
(``label_column``, ``value_column``) to get ``top_k`` for free, or overrides ``top_k`` and
still returns a :class:`TopK`.

>>> import pandas as pd
>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Demo(Result):
...     value_column = "score"
...     def to_dataframe(self):
...         return pd.DataFrame({"label": ["a", "b", "c"], "score": [0.1, -3.0, 2.0]})
>>> Demo().top_k(2)
[('b', -3.0), ('c', 2.0)]
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import ClassVar

from torch import Tensor


class TopK(list):
    """``[(label, value), ...]`` sorted by ``|value|`` (descending); also a small table."""

    value_name: str = "value"

    def to_dataframe(self):
        import pandas as pd

        return pd.DataFrame(list(self), columns=["label", self.value_name])

    def _repr_html_(self) -> str:
        return self.to_dataframe().to_html(index=False, escape=True)


def ranked(pairs, value_name: str = "value") -> TopK:
    """``pairs`` already ranked by their value where larger is better (a sweep's optimal
    candidates, the most concordant model pairs), as a :class:`TopK`."""
    out = TopK((str(label), float(v)) for label, v in pairs)
    out.value_name = value_name
    return out


def top_entries(labels: Sequence[str], values, k: int, value_name: str = "value") -> TopK:
    """The ``k`` ``(label, value)`` pairs with the largest ``|value|``, sorted that way."""
    pairs = [(str(label), float(v)) for label, v in zip(labels, values, strict=True)]
    pairs.sort(key=lambda p: (p[1] != p[1], -abs(p[1]) if p[1] == p[1] else 0.0))  # NaN last
    out = TopK(pairs[: max(int(k), 0)])
    out.value_name = value_name
    return out


class Result:
    """Base of every result object (see the module docstring)."""

    #: Frame column holding each entry's label, and the one holding the value ``top_k`` shows.
    label_column: ClassVar[str] = "label"
    value_column: ClassVar[str] = "value"
    #: A title for HTML views.
    title: ClassVar[str | None] = None

    def to_dataframe(self):  # pragma: no cover - every subclass implements it
        raise NotImplementedError(f"{type(self).__name__} must implement to_dataframe()")

    def top_k(self, k: int = 10) -> TopK:
        """The ``k`` entries with the largest ``|value_column|`` of :meth:`to_dataframe`."""
        frame = self.to_dataframe()
        return top_entries(
            frame[self.label_column].tolist(),
            frame[self.value_column].tolist(),
            k,
            self.value_column,
        )

    def plot(self, ax=None, k: int = 15):
        """Bar chart of :meth:`top_k` (subclasses draw something more specific)."""
        fig, ax = new_axes(ax, figsize=(6, 0.25 * k + 1))
        top = self.top_k(k)[::-1]
        ax.barh([label for label, _ in top], [v for _, v in top], color="#4472c4")
        ax.axvline(0, color="k", lw=0.5)
        ax.set_xlabel(top.value_name if isinstance(top, TopK) else "value")
        fig.tight_layout()
        return fig

    def to_html(self, max_rows: int = 30) -> str:
        """An escaped HTML table of the first ``max_rows`` rows of :meth:`to_dataframe`."""
        frame = self.to_dataframe()
        title = html.escape(self.title or type(self).__name__)
        more = len(frame) - max_rows
        table = frame.head(max_rows).to_html(index=False, escape=True, float_format="%.4g")
        tail = f"<p>… {more} more rows (to_dataframe())</p>" if more > 0 else ""
        return f"<div><strong>{title}</strong> ({len(frame)} rows){table}{tail}</div>"

    def _repr_html_(self) -> str:
        return self.to_html()


class MarginResult(Result):
    """A result with ``chosen`` and ``rejected`` parts whose frame, figure and top entries are
    those of their ``margin`` (chosen − rejected)."""

    @property
    def margin(self):
        return self.chosen - self.rejected

    def to_dataframe(self):
        """The margin's result (chosen − rejected) as a frame."""
        return self.margin.to_dataframe()

    def top_k(self, k: int = 10) -> TopK:
        return self.margin.top_k(k)

    def plot(self, ax=None, k: int = 15):
        return self.margin.plot(ax=ax, k=k)


def tidy_frame(values: Tensor, labels: Sequence[str], label_name: str, value_name: str):
    """``values [label, example]`` → one row per (label, example)."""
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


def new_axes(ax=None, figsize=(6, 3.5)):
    import matplotlib.pyplot as plt

    if ax is not None:
        return ax.figure, ax
    return plt.subplots(figsize=figsize)
