"""HTML page assembly for the report: sections of escaped text, tables and inline figures."""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass, field

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


@dataclass
class Section:
    """One section of the page: a title and HTML parts (already escaped)."""

    title: str
    parts: list[str] = field(default_factory=list)

    def text(self, text: str) -> Section:
        self.parts.append(f"<p class='note'>{html.escape(text)}</p>")
        return self

    def table(self, frame, max_rows: int = 20) -> Section:
        self.parts.append(
            frame.head(max_rows).to_html(index=False, escape=True, float_format="%.4g")
        )
        return self

    def figure(self, fig, alt: str) -> Section:
        self.parts.append(figure_html(fig, alt))
        return self

    def raw(self, trusted_html: str) -> Section:
        """HTML built by this package's own escaping views (token views, grids)."""
        self.parts.append(trusted_html)
        return self

    def html(self) -> str:
        anchor = html.escape(self.title.lower().replace(" ", "-"), quote=True)
        body = "\n".join(self.parts)
        return f"<section id='{anchor}'><h2>{html.escape(self.title)}</h2>\n{body}</section>"


def figure_html(fig, alt: str) -> str:
    """A matplotlib figure as an inline PNG ``<img>`` (the figure is closed)."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return (
        f"<img class='figure' alt='{html.escape(alt, quote=True)}' "
        f"src='data:image/png;base64,{data}'>"
    )


def page_html(title: str, subtitle: str, sections: list[Section]) -> str:
    toc = "".join(
        f"<li><a href='#{html.escape(s.title.lower().replace(' ', '-'), quote=True)}'>"
        f"{html.escape(s.title)}</a></li>"
        for s in sections
    )
    body = "\n".join(s.html() for s in sections)
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><p class='note'>{html.escape(subtitle)}</p>"
        f"<ul>{toc}</ul>{body}</body></html>"
    )
