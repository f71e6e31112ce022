"""Small self-contained HTML pieces (no scripts, no network), every text escaped.

Internal (no public names): used by `reward_lens_tl.views`, `.token_view` and the report.

`grid_html` renders a labelled 2-D table (e.g. layer × position patching effects) with its
largest cells outlined, for a result's `_repr_html_` or a report page; `escape` and
`clean_text` make any text safe to show. Coloured tokens and attention patterns are
CircuitsVis views (`reward_lens_tl.views`).

Examples:
    >>> page = grid_html([[1.0, -0.5]], ["L0"], ["<b>", "ok"])
    >>> "<b>" in page, "&lt;b&gt;" in page
    (False, True)
"""

from __future__ import annotations

import html
from collections.abc import Sequence

__all__: list[str] = []

STYLE = "font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 13px; line-height: 1.9;"


def _colour(value: float, scale: float) -> str:
    """Background colour for `value`: blue for positive, red for negative, alpha ∝ |value|."""
    if scale <= 0 or value != value:  # zero scale or NaN
        return "rgba(0,0,0,0)"
    alpha = min(abs(value) / scale, 1.0) * 0.85
    return f"rgba(68,114,196,{alpha:.3f})" if value >= 0 else f"rgba(192,0,0,{alpha:.3f})"


#: Characters that reorder the text around them (bidirectional embeddings, overrides,
#: isolates and marks): shown as visible `⟨U+XXXX⟩` markers, never written raw.
BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


def clean_text(text: object) -> str:
    r"""`text` with control characters made harmless, before it is escaped or written.

    NUL and the other C0/C1 controls (but newline and tab) are dropped; bidirectional
    controls (which can display a cell's text reordered, e.g. U+202E) become visible
    `⟨U+202E⟩` markers.

    Args:
        text: The text (anything: `str()` of it).

    Returns:
        The cleaned text.

    Examples:
        >>> clean_text("a\x00b\u202ec\nd")
        'ab⟨U+202E⟩c\nd'
    """
    out = []
    for ch in str(text):
        if ch in BIDI_CONTROLS:
            out.append(f"⟨U+{ord(ch):04X}⟩")
        elif ch in "\n\t" or not (ord(ch) < 32 or 127 <= ord(ch) < 160):
            out.append(ch)
    return "".join(out)


def escape(text: object, quote: bool = True) -> str:
    r"""`text` cleaned (`clean_text`) and HTML-escaped: safe inside an element or attribute.

    Args:
        text: The text.
        quote: Escape quotes too (for attribute values).

    Returns:
        The escaped text.

    Examples:
        >>> escape("<b>\u202e</b>")
        '&lt;b&gt;⟨U+202E⟩&lt;/b&gt;'
    """
    return html.escape(clean_text(text), quote=quote)


def grid_html(
    values,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    *,
    title: str | None = None,
    highlight: int = 5,
) -> str:
    """A coloured table of `values[row][col]` with the `highlight` largest |cells| boxed.

    Args:
        values: The values, `[row][col]`.
        row_labels: The rows' labels.
        col_labels: The columns' labels.
        title: A title above the table.
        highlight: How many of the largest cells to box.

    Returns:
        The HTML.
    """
    rows = [[float(v) for v in row] for row in values]
    flat = sorted(
        ((abs(v), r, c) for r, row in enumerate(rows) for c, v in enumerate(row) if v == v),
        reverse=True,
    )
    top = {(r, c) for _, r, c in flat[:highlight]}
    scale = flat[0][0] if flat else 0.0
    head = "".join(
        f'<th style="font-weight:normal;font-size:10px">{escape(str(c))}</th>' for c in col_labels
    )
    body = []
    for r, row in enumerate(rows):
        cells = "".join(
            f'<td title="{escape(f"{row_labels[r]}, {col_labels[c]}: {v:+.4f}", quote=True)}"'
            f' style="background:{_colour(v, scale)};width:22px;height:18px;font-size:9px;'
            f'text-align:center;{"outline:2px solid #000;" if (r, c) in top else ""}">'
            f"{'●' if (r, c) in top else ''}</td>"
            for c, v in enumerate(row)
        )
        body.append(f"<tr><th style='font-size:10px'>{escape(str(row_labels[r]))}</th>{cells}</tr>")
    caption = (
        f"<caption style='caption-side:top;text-align:left'><strong>{escape(title)}</strong>"
        f" (boxed: top {len(top)} by |value|; hover for values)</caption>"
        if title
        else ""
    )
    return (
        f'<table style="border-collapse:collapse;{STYLE}">{caption}<tr><th></th>{head}</tr>'
        f"{''.join(body)}</table>"
    )
