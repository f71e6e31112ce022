"""The report's sections and their two renderings: one HTML page and one markdown file.

A `Section` holds its parts as plain data (text, table cells, figures as plotly JSON or PNG
bytes), so a finished step can be stored as JSON and resumed, and both renderings read the
same parts: a number is formatted once (`format_cell`, by the kind of number it is) and shows
the same on the page and in `report.md`. Every text is escaped in both (HTML special
characters, and markdown table separators); only `Section.raw` parts, built by this package's
own escaping views, enter the page as HTML, with a plain-text stand-in in the markdown.

The page (`page_html`) opens with a linked table of contents; every section folds
(`<details open>`); tables and views scroll sideways inside their own box, so the page itself
never does, down to a phone's width. A plotly figure is interactive on the page (the plotly.js
bundle is inlined once in the page's head: the page needs no network) and a PNG file in the
markdown (drawn by `reward_lens_tl.plotting.to_matplotlib`); a matplotlib figure is an inline
PNG in both.

Examples:
    >>> import pandas as pd
    >>> section = Section("Scores").text("<b>bold?</b> no").table(
    ...     pd.DataFrame({"margin": [1.5], "accuracy": [0.875], "n": [5]}))
    >>> print(section.markdown())
    ## Scores
    <BLANKLINE>
    &lt;b&gt;bold?&lt;/b&gt; no
    <BLANKLINE>
    | margin | accuracy | n |
    |---|---|---|
    | +1.50 | 87.5% | 5 |
    >>> "<td><bdi>+1.50</bdi></td>" in section.html() and "&lt;b&gt;" in section.html()
    True
"""

from __future__ import annotations

import base64
import functools
import io
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidArgumentError
from ..html import escape
from ..plotting import figure_html
from ..signatures import pasted_docs

__all__ = [
    "Section",
]

CSS = """
*, *::before, *::after { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body { font-family: system-ui, -apple-system, Segoe UI, Roboto, sans-serif; margin: 0 auto;
       padding: 16px 16px 48px; max-width: 1040px; color: #222; line-height: 1.5; }
h1 { font-size: 22px; line-height: 1.3; margin: 8px 0; }
h1, summary, .note, figcaption, nav.toc { overflow-wrap: anywhere; }
p[data-role=subtitle] { color: #555; }
nav.toc { background: #f7f7f9; border: 1px solid #e4e4e8; border-radius: 6px;
          padding: 8px 16px; margin: 12px 0 20px; font-size: 14px; }
nav.toc h2 { font-size: 15px; margin: 4px 0; }
nav.toc ol { margin: 4px 0; padding-left: 26px; columns: 2 260px; column-gap: 32px; }
nav.toc li { break-inside: avoid; padding: 1px 0; }
a { color: #2f5ea8; }
section { margin: 10px 0; }
details > summary { cursor: pointer; border-bottom: 1px solid #ddd; padding: 4px 0;
                    margin: 6px 0; }
details > summary::marker { color: #888; }
summary h2 { display: inline; font-size: 18px; margin: 0; }
.note { color: #333; font-size: 14px; max-width: 80ch; }
.scroll { max-width: 100%; overflow-x: auto; margin: 8px 0; }
table { border-collapse: collapse; font-size: 12px; }
td, th { border: 1px solid #ddd; padding: 3px 6px; text-align: right; vertical-align: top;
         font-variant-numeric: tabular-nums; white-space: nowrap; }
th { background: #f4f4f4; white-space: normal; min-width: 4ch; }
td:first-child, th:first-child, .t { text-align: left; }
td.long { white-space: normal; }
td.long bdi { display: inline-block; min-width: 24ch; max-width: 40ch;
              overflow-wrap: break-word; }
figure { margin: 10px 0; max-width: 100%; min-width: 0; }
figure .plot { width: 100%; }
figcaption { font-size: 14px; font-weight: 600; color: #333; margin: 0 0 2px; }
img.figure { max-width: 100%; height: auto; border: 1px solid #eee; }
.figures { display: flex; flex-wrap: wrap; column-gap: 24px; align-items: flex-start; }
.figures > figure { width: calc(50% - 12px); }
.num { font-weight: 600; }
@media (max-width: 820px) { .figures > figure { width: 100%; } }
@media (max-width: 600px) { .plotly-figure .xtitle, .plotly-figure .ytitle,
  .plotly-figure .x2title { font-size: 11px !important; } }
@media (max-width: 600px) { body { padding: 10px 10px 32px; } nav.toc ol { columns: 1; } }
"""

Cell = str | int | float | bool | None

#: The kinds of number `format_cell` knows (see there).
KINDS = ("signed", "share", "count", "number", "text")

#: Column-name words that mark a signed quantity (a difference: shown with its sign).
SIGNED_WORDS = frozenset(
    "margin margins delta deltas effect effects diff difference change contribution "
    "contributions attribution bias shift ci".split()
)
#: Column-name words that mark a share of a whole (shown in percent).
SHARE_WORDS = frozenset(
    "accuracy share shares rate rates fraction proportion agreement restored top1 pct".split()
)


def column_kind(name: str) -> str:
    """The kind of the numbers in a column named `name` (see `format_cell`).

    The name is split into words at anything but letters and digits. A word of
    `SIGNED_WORDS` (margin, delta, effect, contribution, …) makes it `"signed"`, checked
    first (a "mean bias share" is a signed contribution); otherwise a word of `SHARE_WORDS`
    (accuracy, share, rate, fraction, …) makes it `"share"`; otherwise `"number"`.

    Args:
        name: The column's name.

    Returns:
        `"signed"`, `"share"` or `"number"`.

    Examples:
        >>> [column_kind(c) for c in ("rule_margin", "mean bias share", "accuracy", "reward")]
        ['signed', 'signed', 'share', 'number']
    """
    words = set(re.split(r"[^a-z0-9]+", str(name).lower()))
    if words & SIGNED_WORDS:
        return "signed"
    if words & SHARE_WORDS:
        return "share"
    return "number"


def _significant(value: float) -> str:
    """`value` to three significant digits, in plain notation from 0.001 to 99,999."""
    size = abs(value)
    if size == 0:
        return "0"
    if 1e-3 <= size < 1e5:
        return f"{value:.{max(0, 2 - math.floor(math.log10(size)))}f}"
    return f"{value:.3g}"


def _percent(share: float) -> str:
    """`share` in percent: three significant digits, at most two decimals (so never `1e-05%`)."""
    value = share * 100
    if abs(value) < 0.005:
        return "0%"
    if abs(value) < 1:
        return f"{value:.2f}%"
    return _significant(value) + "%"


def format_cell(value: Cell, kind: str | None = None) -> str:
    """A number (or any cell) as both renderings show it, in tables and prose alike.

    The rule, by `kind` (a table infers it from the column's name, `column_kind`, unless
    `Section.table` is told):

    - every float has three significant digits (plain notation from 0.001 to 99,999,
      scientific outside: `1.2e-06`);
    - `"share"` (accuracies, rates, fractions): in percent, `0.875` → `87.5%` (at most two
      decimals: a share under 0.005% is `0%`);
    - `"count"` and every integer: a plain integer, `5`;
    - `"signed"` (margins, deltas, effects, contributions: differences whose direction
      matters): with its sign, `+0.312` / `-0.312`; no other kind gets a `+`;
    - `"number"` (the default for floats): `0.312`, `-0.312`;
    - `"text"`, strings and booleans as they are; `None` as nothing; NaN as `nan`.

    Args:
        value: The cell.
        kind: One of `KINDS`, or `None` (a float is then a `"number"`).

    Returns:
        The cell's text.

    Examples:
        >>> format_cell(0.875, "share"), format_cell(5, "count"), format_cell(0.3125, "signed")
        ('87.5%', '5', '+0.312')
        >>> [format_cell(v) for v in (0.5, -2.0, 1.2e-06, 3, True, None, float("nan"))]
        ['0.500', '-2.00', '1.2e-06', '3', 'True', '', 'nan']
    """
    if value is None:
        return ""
    if isinstance(value, bool) or isinstance(value, str) or kind == "text":
        return str(value)
    if isinstance(value, int):
        if kind == "share":
            return format_cell(float(value), kind)
        return f"{value:+d}" if kind == "signed" and value else str(value)
    if not isinstance(value, float):
        return str(value)
    if not math.isfinite(value):
        return str(value)
    if kind == "count" and value.is_integer():
        return str(int(value))
    if kind == "share":
        return _percent(value)
    text = _significant(value)
    return "+" + text if kind == "signed" and value > 0 else text


def plural(n: int, one: str, many: str | None = None) -> str:
    """`n` and the noun that goes with it: `1 pair`, `3 pairs`.

    Args:
        n: The count.
        one: The noun for one.
        many: The noun for several (default `one` + "s").

    Returns:
        The words.

    Examples:
        >>> plural(1, "pair"), plural(3, "pair")
        ('1 pair', '3 pairs')
    """
    return f"{n} {one if n == 1 else (many or one + 's')}"


def counts_text(counts: Mapping[str, int] | Iterable[tuple[str, int]], noun: str) -> str:
    """Counts as words, largest first: `1_pre: 5 pairs, 2_pre: 2, final: 1`.

    The noun follows the first count only (the others read the same way); prose shows this
    instead of a Python dict.

    Args:
        counts: `{label: count}` or `(label, count)` pairs.
        noun: What is counted (singular; an "s" is added as needed).

    Returns:
        The words (`"none"` for no counts).

    Examples:
        >>> counts_text({"final": 1, "1_pre": 5, "2_pre": 2}, "pair")
        '1_pre: 5 pairs, 2_pre: 2, final: 1'
    """
    items = sorted(dict(counts).items(), key=lambda kv: (-kv[1], str(kv[0])))
    if not items:
        return "none"
    first, rest = items[0], items[1:]
    return ", ".join([f"{first[0]}: {plural(first[1], noun)}", *(f"{k}: {v}" for k, v in rest)])


def words_list(items: Iterable[Any], empty: str = "none") -> str:
    """Items as a comma-separated phrase (not a Python list).

    Args:
        items: The items.
        empty: What to write for no items.

    Returns:
        The phrase.

    Examples:
        >>> words_list(["a", "b"]), words_list([])
        ('a, b', 'none')
    """
    shown = [str(item) for item in items]
    return ", ".join(shown) if shown else empty


def _plain(value: Any) -> Cell:
    """A frame cell as a JSON-able Python value (numpy scalars unwrapped)."""
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def _md(text: str) -> str:
    """`text` safe in markdown.

    Control characters cleaned (`reward_lens_tl.html.clean_text`), HTML special characters
    escaped (a markdown viewer renders raw HTML), line breaks kept.
    """
    return escape(text, quote=False)


def _md_cell(text: str) -> str:
    return _md(text).replace("|", "\\|").replace("\n", " ")


def slug(text: str) -> str:
    """`text` as a file or anchor name: lower case, runs of other characters as `_`.

    Args:
        text: The text.

    Returns:
        The name.

    Examples:
        >>> slug("Patching the largest-margin pairs")
        'patching_the_largest_margin_pairs'
    """
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "section"


def anchor_id(title: str) -> str:
    """A section's anchor on the page (unchanged since the first report, so links keep working).

    Args:
        title: The section's title.

    Returns:
        The anchor.

    Examples:
        >>> anchor_id("Data quality")
        'data-quality'
    """
    return title.lower().replace(" ", "-")


def is_plotly(fig: Any) -> bool:
    """Whether `fig` is a plotly figure (else it is taken for a matplotlib one).

    Args:
        fig: The figure.

    Returns:
        `True` for a plotly figure.
    """
    return hasattr(fig, "to_plotly_json")


def titled(fig: Any, title: str) -> Any:
    """`fig` with the title `title`, a plotly or a matplotlib figure (its first axes).

    Args:
        fig: The figure.
        title: The title.

    Returns:
        The same figure.

    Examples:
        >>> from reward_lens_tl.plotting import bar
        >>> titled(bar(["a"], [1.0]), "one bar").layout.title.text
        'one bar'
    """
    if is_plotly(fig):
        top = fig.layout.margin.t
        fig.update_layout(
            title=dict(text=title, x=0.0, xanchor="left", font=dict(size=14)),
            margin=dict(t=max(50, top or 0)),
        )
    else:
        fig.axes[0].set_title(title)
    return fig


#: The arguments and result of a section only the zoo's report has (pasted by `zoo_only`).
ZOO_SECTION_DOC = """Args:
    ctx: The report's context.

Returns:
    The section, or `None` off the zoo."""


def zoo_only(build: Callable[[dict], Section]) -> Callable[[dict], Section | None]:
    """Decorate a section builder that only the zoo's report has: `None` off the zoo.

    The zoo's context holds its `task`; without one the builder is not called. The builder's
    docstring gets `ZOO_SECTION_DOC` at its `{zoo_section}` placeholder.

    Args:
        build: The section builder.

    Returns:
        The builder, returning `None` when `ctx` has no `task`.

    Examples:
        >>> @zoo_only
        ... def tasks(ctx):
        ...     return Section(f"task {ctx['task']}")
        >>> tasks({}) is None, tasks({"task": 1}).title
        (True, 'task 1')
    """

    @functools.wraps(pasted_docs(zoo_section=ZOO_SECTION_DOC)(build))
    def section(ctx: dict) -> Section | None:
        if "task" not in ctx:
            return None
        return build(ctx)

    return section


@dataclass
class Section:
    """One section of the report: a title and its parts (text, tables, figures, views).

    Args:
        title: The section's title.
        parts: The section's parts, as plain data.

    Examples:
        >>> import pandas as pd
        >>> from reward_lens_tl.report import Section
        >>> section = Section("Scores").text("Two pairs.").table(
        ...     pd.DataFrame({"pair": [0, 1], "margin": [1.5, -0.25]}))
        >>> [part["kind"] for part in section.parts], section.parts[1]["rows"]
        (['text', 'table'], [[0, 1.5], [1, -0.25]])
        >>> print(section.markdown())
        ## Scores
        <BLANKLINE>
        Two pairs.
        <BLANKLINE>
        | pair | margin |
        |---|---|
        | 0 | +1.50 |
        | 1 | -0.250 |
        >>> Section.from_dict(section.to_dict()) == section
        True
    """

    title: str
    parts: list[dict] = field(default_factory=list)

    def text(self, text: str) -> Section:
        """A paragraph of text.

        Args:
            text: The text.

        Returns:
            This section.
        """
        self.parts.append({"kind": "text", "text": str(text)})
        return self

    def table(self, frame, max_rows: int = 20, kinds: Mapping[str, str] | None = None) -> Section:
        """The first `max_rows` rows of a pandas frame (cells kept as numbers).

        Args:
            frame: The pandas frame.
            max_rows: How many rows to keep.
            kinds: `{column: kind}` of the columns whose numbers are not what their name says
                (`format_cell`'s kinds; the others: `column_kind` of the name).

        Returns:
            This section.

        Raises:
            InvalidArgumentError: For a kind that is not one of `KINDS`, or a column the frame
                lacks.
        """
        head = frame.head(max_rows)
        columns = [str(c) for c in head.columns]
        given = dict(kinds or {})
        wrong = sorted(set(given) - set(columns)) + sorted(
            f"{c}={k}" for c, k in given.items() if k not in KINDS
        )
        if wrong:
            raise InvalidArgumentError(
                f"table kinds: {', '.join(wrong)} (kinds: {', '.join(KINDS)})"
            )
        rows = [[_plain(v) for v in row] for row in head.itertuples(index=False)]
        self.parts.append(
            {
                "kind": "table",
                "columns": columns,
                "rows": rows,
                "kinds": [given.get(c) or column_kind(c) for c in columns],
            }
        )
        return self

    def extremes(
        self,
        frame,
        by: str,
        k: int,
        *,
        largest: str,
        smallest: str,
        every: str,
        kinds: Mapping[str, str] | None = None,
    ) -> Section:
        """The `k` rows with the largest `by` and the `k` with the smallest, never a row twice.

        With `len(frame) <= 2 * k` the two tables would share rows: one table of every row,
        largest `by` first, stands for both.

        Args:
            frame: The pandas frame.
            by: The column to sort by.
            k: How many rows each table shows.
            largest: The text above the largest rows.
            smallest: The text above the smallest rows.
            every: The text above the one table of every row.
            kinds: As for `table`.

        Returns:
            This section.

        Examples:
            >>> import pandas as pd
            >>> small = Section("S").extremes(pd.DataFrame({"margin": [0.5, 2.0, -1.0]}),
            ...     "margin", 2, largest="Largest:", smallest="Smallest:", every="All:")
            >>> [p.get("text") or p["rows"] for p in small.parts]
            ['All:', [[2.0], [0.5], [-1.0]]]
            >>> big = Section("B").extremes(pd.DataFrame({"margin": range(5)}),
            ...     "margin", 2, largest="Largest:", smallest="Smallest:", every="All:")
            >>> [p.get("text") or p["rows"] for p in big.parts]
            ['Largest:', [[4], [3]], 'Smallest:', [[0], [1]]]
        """
        ordered = frame.sort_values(by, ascending=False, kind="stable")
        if len(frame) <= 2 * k:
            return self.text(every).table(ordered, max_rows=len(ordered), kinds=kinds)
        self.text(largest).table(ordered, max_rows=k, kinds=kinds)
        rising = frame.sort_values(by, ascending=True, kind="stable")
        return self.text(smallest).table(rising, max_rows=k, kinds=kinds)

    def figure(self, fig, alt: str, name: str | None = None) -> Section:
        """A figure: plotly (interactive on the page) or matplotlib (a PNG, closed here).

        A plotly figure is kept as its JSON (`fig.to_json()`); the markdown gets it as a PNG
        file drawn by `reward_lens_tl.plotting.to_matplotlib`. A matplotlib figure is kept
        as PNG bytes, shown inline on the page. Either way the file `<name>.png` is written
        next to `report.md`.

        Args:
            fig: The plotly or matplotlib figure.
            alt: The figure's alternative text.
            name: The file's name (default: the section's title and a number).

        Returns:
            This section.
        """
        if name is None:
            count = sum(1 for p in self.parts if p["kind"] == "figure")
            name = f"{slug(self.title)}_{count + 1}"
        part = {"kind": "figure", "alt": alt, "name": slug(name)}
        if is_plotly(fig):
            part["plotly"] = fig.to_json()
        else:
            part["png"] = base64.b64encode(figure_png(fig)).decode("ascii")
        self.parts.append(part)
        return self

    def raw(self, trusted_html: str, text: str = "") -> Section:
        """HTML built by this package's own escaping views (token views, grids).

        Args:
            trusted_html: The HTML.
            text: What stands in for it in the markdown.

        Returns:
            This section.
        """
        self.parts.append({"kind": "raw", "html": trusted_html, "text": text})
        return self

    def html(self, ids: set[str] | None = None) -> str:
        """The section as HTML: a folding block (`<details open>`) under its anchor.

        A plotly figure needs the plotly.js bundle on the page (`page_html` inlines it).

        Args:
            ids: The figure ids already on the page (this section's are added, so each stays
                unique); `None` for a section alone.

        Returns:
            The HTML.
        """
        ids = set() if ids is None else ids
        anchor = escape(anchor_id(self.title), quote=True)
        blocks, run = [], []  # small figures side by side, two to a row on a wide page
        for part in [*self.parts, None]:
            if part is not None and _small_figure(part):
                run.append(_part_html(part, ids))
                continue
            if len(run) > 1:
                blocks.append(f"<div class='figures'>{''.join(run)}</div>")
            else:
                blocks.extend(run)
            run = []
            if part is not None:
                blocks.append(_part_html(part, ids))
        body = "\n".join(blocks)
        return (
            f"<section id='{anchor}'><details open><summary><h2>{escape(self.title)}</h2>"
            f"</summary>\n{body}</details></section>"
        )

    def markdown(self, files: dict[int, str] | None = None) -> str:
        """The section in markdown.

        Args:
            files: Maps a figure part's position to its file name (default `<name>.png`).

        Returns:
            The markdown.
        """
        files = files or {}
        blocks = [f"## {_md(self.title)}"]
        for i, part in enumerate(self.parts):
            block = _part_markdown(part, files.get(i, f"{part.get('name')}.png"))
            if block:
                blocks.append(block)
        return "\n\n".join(blocks)

    def to_dict(self) -> dict:
        """The section as JSON-able data.

        Returns:
            The title and the parts.
        """
        return {"title": self.title, "parts": self.parts}

    @classmethod
    def from_dict(cls, stored: dict) -> Section:
        """A section from its stored data (`to_dict`).

        Args:
            stored: The stored data.

        Returns:
            The section.
        """
        return cls(stored["title"], list(stored["parts"]))


def _kinds(part: dict) -> list[str]:
    """A table part's column kinds (inferred from the names for parts stored without them)."""
    return part.get("kinds") or [column_kind(c) for c in part["columns"]]


_TEXT = " class='t'"  # a text cell: left-aligned
#: Text cells longer than this wrap (in a column at least this wide); shorter ones do not.
LONG_TEXT = 24


def _cell_class(value: Cell) -> str:
    if not isinstance(value, str):
        return ""
    return " class='t long'" if len(value) > LONG_TEXT else _TEXT


def _part_html(part: dict, ids: set[str]) -> str:
    kind = part["kind"]
    if kind == "text":
        return f"<p class='note' dir='auto'>{escape(part['text'])}</p>"
    if kind == "table":
        kinds = _kinds(part)
        text = [
            all(isinstance(row[i], str) for row in part["rows"] if row[i] is not None)
            for i in range(len(part["columns"]))
        ]
        head = "".join(
            f"<th{_TEXT if t else ''}>{escape(c)}</th>"
            for c, t in zip(part["columns"], text, strict=True)
        )
        body = "".join(
            "<tr>"
            + "".join(
                f"<td{_cell_class(v)}><bdi>{escape(format_cell(v, k))}</bdi></td>"
                for v, k in zip(row, kinds, strict=False)
            )
            + "</tr>"
            for row in part["rows"]
        )
        table = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        return f"<div class='scroll'>{table}</div>"
    if kind == "figure":
        if "plotly" in part:
            return _plotly_html(part, _unique(f"figure-{part['name']}", ids))
        return f"<figure>{_img_html(part['png'], part['alt'])}</figure>"
    return f"<div class='scroll'>{part['html']}</div>"


#: The widest figure (its own width, in pixels) shown two to a row.
SMALL_FIGURE = 760


def _small_figure(part: dict) -> bool:
    """Whether a part is a figure narrow enough to share a row with another."""
    if part["kind"] != "figure" or "plotly" not in part:
        return False
    width = json.loads(part["plotly"]).get("layout", {}).get("width")
    return width is not None and width <= SMALL_FIGURE


def _unique(name: str, ids: set[str]) -> str:
    out, n = name, 1
    while out in ids:
        n += 1
        out = f"{name}-{n}"
    ids.add(out)
    return out


def _part_markdown(part: dict, file: str) -> str:
    kind = part["kind"]
    if kind == "text":
        return _md(part["text"])
    if kind == "table":
        kinds = _kinds(part)
        head = "| " + " | ".join(_md_cell(c) for c in part["columns"]) + " |"
        rule = "|" + "---|" * len(part["columns"])
        rows = [
            "| "
            + " | ".join(_md_cell(format_cell(v, k)) for v, k in zip(row, kinds, strict=False))
            + " |"
            for row in part["rows"]
        ]
        return "\n".join([head, rule, *rows])
    if kind == "figure":
        return f"![{_md_cell(part['alt'])}]({file})"
    return _md(part["text"])


def figure_png(fig, dpi: int = 100) -> bytes:
    """A figure as PNG bytes: matplotlib (closed here), or plotly drawn by `to_matplotlib`.

    Saved with `bbox_inches="tight"`: a title or axis label set after the layout was fixed
    is kept, not cut off.

    Args:
        fig: The matplotlib or plotly figure.
        dpi: The resolution.

    Returns:
        The PNG bytes.
    """
    import matplotlib.pyplot as plt

    if is_plotly(fig):
        from ..plotting import to_matplotlib

        fig = to_matplotlib(fig)

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", pad_inches=0.1)
    plt.close(fig)
    return buf.getvalue()


def _typed_arrays(value: Any) -> Any:
    """`value` (parsed plotly JSON) with its typed arrays (`{"dtype", "bdata"}`) as numpy arrays.

    Plotly writes numeric arrays base64-encoded; plotly.js reads them, but plotly.py's
    `from_json` leaves them as dicts, which the static drawing cannot read.
    """
    import numpy as np

    if isinstance(value, list):
        return [_typed_arrays(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "bdata" in value and "dtype" in value and set(value) <= {"bdata", "dtype", "shape"}:
        array = np.frombuffer(
            base64.b64decode(value["bdata"]), dtype=np.dtype("<" + value["dtype"])
        )
        shape = value.get("shape")
        if shape is not None:
            dims = shape if isinstance(shape, list) else str(shape).split(",")
            array = array.reshape([int(d) for d in dims])
        return array.copy()
    return {k: _typed_arrays(v) for k, v in value.items()}


def plotly_figure(stored: str) -> Any:
    """A plotly figure from its stored JSON (`fig.to_json()`), numeric arrays as numpy arrays.

    Args:
        stored: The JSON.

    Returns:
        The `plotly.graph_objects.Figure`.

    Examples:
        >>> from reward_lens_tl.plotting import bar
        >>> fig = plotly_figure(bar(["a", "b"], [1.0, 2.0]).to_json())
        >>> fig.data[0].x.tolist()
        [1.0, 2.0]
    """
    import plotly.graph_objects as go

    return go.Figure(_typed_arrays(json.loads(stored)), skip_invalid=True)


def _part_png(part: dict) -> bytes:
    """A figure part as PNG bytes (a plotly figure drawn by `plotting.to_matplotlib`)."""
    if "plotly" not in part:
        return base64.b64decode(part["png"])
    return figure_png(plotly_figure(part["plotly"]), dpi=110)


#: `config` of every plotly figure on the page.
def _plain_title(text: str | None) -> str:
    """A plotly title's text without its HTML-like markup (`<br>` becomes a space)."""
    import html

    text = re.sub(r"<br\s*/?>", " ", text or "", flags=re.I)
    return html.unescape(re.sub(r"<[^>]*>", "", text)).strip()


#: The longest axis title kept on one line on the page (longer ones wrap at a space).
AXIS_TITLE_CHARS = 40
#: The narrowest a panel of a multi-panel figure is drawn; narrower screens scroll the figure.
PANEL_MIN_WIDTH = 360


def _wrapped(text: str, limit: int = AXIS_TITLE_CHARS) -> str:
    """`text` on two lines (`<br>` at the space nearest its middle) when longer than `limit`.

    Examples:
        >>> _wrapped("contribution to the reward (mean over 24 examples)")
        'contribution to the reward<br>(mean over 24 examples)'
    """
    if len(text) <= limit or "<br" in text:
        return text
    spaces = [i for i, ch in enumerate(text) if ch == " "]
    if not spaces:
        return text
    cut = min(spaces, key=lambda i: abs(i - len(text) / 2))
    return text[:cut] + "<br>" + text[cut + 1 :]


def _plotly_html(part: dict, div_id: str) -> str:
    """A stored plotly figure as an interactive, responsive block.

    The figure's title moves out of the drawing into the block's caption (HTML text wraps on a
    narrow screen, a title drawn in the plot would be cut), and long axis titles wrap onto two
    lines; the drawing fills the page's width up to the width it was made for, keeping its
    height. A figure of several panels keeps `PANEL_MIN_WIDTH` pixels a panel and scrolls
    sideways in its own box on a narrower screen.
    """
    import plotly.io as pio

    fig = pio.from_json(part["plotly"], skip_invalid=True)
    title = _plain_title(fig.layout.title.text)
    width = fig.layout.width
    if title:
        top = fig.layout.margin.t
        fig.layout.title.text = None
        fig.update_layout(margin=dict(t=max(20, (top if top is not None else 50) - 30)))
    axes = [key for key in fig.layout.to_plotly_json() if re.fullmatch(r"xaxis\d*", key)]
    panels = max(1, len(axes))
    for key in axes:
        axis = fig.layout[key]
        if axis.title.text and panels == 1:
            axis.title.text = _wrapped(axis.title.text)
    for note in fig.layout.annotations:  # the panels' titles (make_subplots puts them on top)
        if note.text and note.yref == "paper" and note.yanchor == "bottom" and (note.y or 0) >= 1:
            note.text = _wrapped(note.text, AXIS_TITLE_CHARS + 8)
            if "<br>" in note.text:
                fig.update_layout(margin=dict(t=max(fig.layout.margin.t or 0, 56)))
    fig.update_layout(width=None, autosize=True)
    body = figure_html(fig, div_id=div_id)
    caption = f"<figcaption>{escape(title)}</figcaption>" if title else ""
    limit = f" style='max-width:{int(width)}px'" if width else ""
    plot = f"<div class='plot'>{body}</div>"
    if panels > 1:
        least = min(int(width or 10**6), PANEL_MIN_WIDTH * panels)
        plot = (
            f"<div class='scroll'><div class='plot' style='min-width:{least}px'>{body}</div></div>"
        )
    return (
        f"<figure class='plotly-figure' role='group' aria-label='{escape(part['alt'], quote=True)}'"
        f"{limit}>{caption}{plot}</figure>"
    )


def _img_html(png_base64: str, alt: str) -> str:
    return (
        f"<img class='figure' alt='{escape(alt, quote=True)}' "
        f"src='data:image/png;base64,{png_base64}'>"
    )


#: After every drawing of a plotly figure, a title or panel title that would stick out of the
#: figure's box (a long one on a phone) is moved sideways into it, so it is never cut off.
FIT_SCRIPT = """<script type='text/javascript'>
(function () {
  function fit(gd) {
    var box = gd.getBoundingClientRect();
    var texts = gd.querySelectorAll("text.annotation-text, text[class$='title']");
    Array.prototype.forEach.call(texts, function (t) {
      if (t.hasAttribute("transform") && !t.hasAttribute("data-fit")) { return; }
      t.removeAttribute("transform");
      var r = t.getBoundingClientRect(), dx = 0;
      if (r.width === 0) { return; }
      if (r.right > box.right) { dx = box.right - r.right - 2; }
      if (r.left + dx < box.left) { dx = box.left - r.left + 2; }
      if (dx !== 0) {
        t.setAttribute("transform", "translate(" + dx + ",0)");
        t.setAttribute("data-fit", "1");
      }
    });
  }
  Array.prototype.forEach.call(document.querySelectorAll(".plotly-graph-div"), function (gd) {
    if (gd.on) { gd.on("plotly_afterplot", function () { fit(gd); }); }
    fit(gd);
  });
})();
</script>"""


def plotly_bundle() -> str:
    """The plotly.js bundle the page inlines once (offline: no CDN, no network).

    Returns:
        The JavaScript.
    """
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def page_html(title: str, subtitle: str, sections: list[Section]) -> str:
    """The whole page: title, subtitle, a linked table of contents and every section.

    Each section folds (`<details open>`); with any plotly figure the plotly.js bundle is
    inlined once, in the page's head.

    Args:
        title: The page's title.
        subtitle: The page's subtitle.
        sections: The sections.

    Returns:
        The page's HTML.

    Examples:
        >>> from reward_lens_tl.plotting import bar
        >>> sections = [Section("One").figure(bar(["a"], [1.0]), "a bar"),
        ...             Section("Two").figure(bar(["b"], [2.0]), "b bar")]
        >>> page = page_html("T", "s", sections)
        >>> page.count(plotly_bundle()[:60]), page.count("<details open>"), page.count("<li><a")
        (1, 2, 2)
    """
    toc = "".join(
        f"<li><a href='#{escape(anchor_id(s.title), quote=True)}'>{escape(s.title)}</a></li>"
        for s in sections
    )
    ids: set[str] = set()
    body = "\n".join(s.html(ids) for s in sections)
    plotly = any("plotly" in p for s in sections for p in s.parts if p["kind"] == "figure")
    script = f"<script type='text/javascript'>{plotly_bundle()}</script>" if plotly else ""
    if "CircuitsVis.render(" in body:  # CircuitsVis views: their script once, in the head
        from ..views import script_tag

        script += script_tag()
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{escape(title)}</title><style>{CSS}</style>{script}</head><body>"
        f"<h1>{escape(title)}</h1><p class='note' data-role='subtitle'>{escape(subtitle)}</p>"
        f"<nav class='toc' aria-label='Contents'><h2>Contents</h2><ol>{toc}</ol></nav>"
        f"<main>{body}</main>{FIT_SCRIPT if plotly else ''}</body></html>"
    )


def page_markdown(
    title: str, subtitle: str, sections: list[Section]
) -> tuple[str, dict[str, bytes]]:
    """The same sections as markdown under a title, and the PNG files it links to.

    Args:
        title: The title.
        subtitle: The subtitle.
        sections: The sections.

    Returns:
        The markdown and `{file name: bytes}`.
    """
    text, files = sections_markdown(sections)
    return f"# {_md(title)}\n\n{_md(subtitle)}\n\n{text}", files


def sections_markdown(sections: list[Section]) -> tuple[str, dict[str, bytes]]:
    """Sections as markdown, and the PNG files it links to.

    Plotly figures become PNG files too (`reward_lens_tl.plotting.to_matplotlib`).

    Args:
        sections: The sections.

    Returns:
        The markdown and `{file name: bytes}` (a name used twice gets a number).
    """
    files: dict[str, bytes] = {}
    blocks = []
    for section in sections:
        names = {}
        for i, part in enumerate(section.parts):
            if part["kind"] == "figure":
                name, n = f"{part['name']}.png", 1
                while name in files:
                    n += 1
                    name = f"{part['name']}_{n}.png"
                files[name] = _part_png(part)
                names[i] = name
        blocks.append(section.markdown(names))
    return "\n\n".join(blocks) + "\n", files


def table_markdown(frame) -> str:
    """A whole pandas frame as a markdown table, cells as the report shows them.

    Args:
        frame: The pandas frame.

    Returns:
        The markdown table.
    """
    return _part_markdown(Section("").table(frame, max_rows=len(frame)).parts[0], "")
