"""The report's sections and their two renderings: one HTML page and one markdown file.

A `Section` holds its parts as plain data (text, table cells, PNG bytes), so a finished
step can be stored as JSON and resumed, and both renderings read the same parts: a number is
formatted once (`format_cell`) and shows the same on the page and in `report.md`. Every
text is escaped in both (HTML special characters, and markdown table separators); only
`Section.raw` parts, built by this package's own escaping views, enter the page as HTML,
with a plain-text stand-in in the markdown.

Examples:
    >>> import pandas as pd
    >>> section = Section("Scores").text("<b>bold?</b> no").table(
    ...     pd.DataFrame({"margin": [1.5]}))
    >>> print(section.markdown())
    ## Scores
    <BLANKLINE>
    &lt;b&gt;bold?&lt;/b&gt; no
    <BLANKLINE>
    | margin |
    |---|
    | +1.500 |
    >>> "<td><bdi>+1.500</bdi></td>" in section.html() and "&lt;b&gt;" in section.html()
    True
"""

from __future__ import annotations

import base64
import io
import math
import re
from dataclasses import dataclass, field
from typing import Any

from ..html import escape

CSS = """
body { font-family: system-ui, -apple-system, Segoe UI, sans-serif; margin: 24px auto;
       max-width: 1100px; color: #222; }
h1 { font-size: 22px; } h2 { font-size: 18px; border-bottom: 1px solid #ddd; padding-top: 8px; }
table { border-collapse: collapse; font-size: 12px; margin: 8px 0; }
td, th { border: 1px solid #ddd; padding: 3px 6px; text-align: right; }
th { background: #f4f4f4; } td:first-child, th:first-child { text-align: left; }
img.figure { max-width: 100%; border: 1px solid #eee; margin: 6px 0; }
.note { color: #555; font-size: 13px; } .num { font-weight: 600; }
"""

Cell = str | int | float | bool | None


def format_cell(value: Cell) -> str:
    """A table cell as both renderings show it.

    Floats signed with three decimals (or three significant digits when very small or large),
    integers and text as they are.

    Args:
        value: The cell.

    Returns:
        The cell's text.

    Examples:
        >>> [format_cell(v) for v in (0.5, -2.0, 1.2e-06, 3, True, None, float("nan"))]
        ['+0.500', '-2.000', '+1.2e-06', '3', 'True', '', 'nan']
    """
    if value is None:
        return ""
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        if value == 0 or 1e-3 <= abs(value) < 1e5:
            return f"{value:+.3f}"
        return f"{value:+.3g}"
    return str(value)


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
        | 0 | +1.500 |
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

    def table(self, frame, max_rows: int = 20) -> Section:
        """The first `max_rows` rows of a pandas frame (cells kept as numbers).

        Args:
            frame: The pandas frame.
            max_rows: How many rows to keep.

        Returns:
            This section.
        """
        head = frame.head(max_rows)
        rows = [[_plain(v) for v in row] for row in head.itertuples(index=False)]
        self.parts.append(
            {"kind": "table", "columns": [str(c) for c in head.columns], "rows": rows}
        )
        return self

    def figure(self, fig, alt: str, name: str | None = None) -> Section:
        """A matplotlib figure (closed here), shown inline and written as `<name>.png`.

        The PNG file is written next to `report.md`.

        Args:
            fig: The matplotlib figure.
            alt: The figure's alternative text.
            name: The file's name (default: the section's title and a number).

        Returns:
            This section.
        """
        if name is None:
            count = sum(1 for p in self.parts if p["kind"] == "figure")
            name = f"{slug(self.title)}_{count + 1}"
        png = base64.b64encode(figure_png(fig)).decode("ascii")
        self.parts.append({"kind": "figure", "alt": alt, "name": slug(name), "png": png})
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

    def html(self) -> str:
        """The section as HTML.

        Returns:
            The HTML.
        """
        anchor = escape(anchor_id(self.title), quote=True)
        body = "\n".join(_part_html(p) for p in self.parts)
        return f"<section id='{anchor}'><h2>{escape(self.title)}</h2>\n{body}</section>"

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


def _part_html(part: dict) -> str:
    kind = part["kind"]
    if kind == "text":
        return f"<p class='note' dir='auto'>{escape(part['text'])}</p>"
    if kind == "table":
        head = "".join(f"<th>{escape(c)}</th>" for c in part["columns"])
        body = "".join(
            "<tr>" + "".join(f"<td><bdi>{escape(format_cell(v))}</bdi></td>" for v in row) + "</tr>"
            for row in part["rows"]
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    if kind == "figure":
        return _img_html(part["png"], part["alt"])
    return part["html"]


def _part_markdown(part: dict, file: str) -> str:
    kind = part["kind"]
    if kind == "text":
        return _md(part["text"])
    if kind == "table":
        head = "| " + " | ".join(_md_cell(c) for c in part["columns"]) + " |"
        rule = "|" + "---|" * len(part["columns"])
        rows = [
            "| " + " | ".join(_md_cell(format_cell(v)) for v in row) + " |" for row in part["rows"]
        ]
        return "\n".join([head, rule, *rows])
    if kind == "figure":
        return f"![{_md_cell(part['alt'])}]({file})"
    return _md(part["text"])


def figure_png(fig, dpi: int = 100) -> bytes:
    """A matplotlib figure as PNG bytes (the figure is closed).

    Args:
        fig: The matplotlib figure.
        dpi: The resolution.

    Returns:
        The PNG bytes.
    """
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()


def _img_html(png_base64: str, alt: str) -> str:
    return (
        f"<img class='figure' alt='{escape(alt, quote=True)}' "
        f"src='data:image/png;base64,{png_base64}'>"
    )


def page_html(title: str, subtitle: str, sections: list[Section]) -> str:
    """The whole page: title, subtitle, a table of contents and every section.

    Args:
        title: The page's title.
        subtitle: The page's subtitle.
        sections: The sections.

    Returns:
        The page's HTML.
    """
    toc = "".join(
        f"<li><a href='#{escape(anchor_id(s.title), quote=True)}'>{escape(s.title)}</a></li>"
        for s in sections
    )
    body = "\n".join(s.html() for s in sections)
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
        f"<h1>{escape(title)}</h1><p class='note'>{escape(subtitle)}</p>"
        f"<ul>{toc}</ul>{body}</body></html>"
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
                files[name] = base64.b64decode(part["png"])
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
