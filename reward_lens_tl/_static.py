"""Drawing a plotly figure with matplotlib: the static form behind `plotting.to_matplotlib`.

Covers the trace kinds `plotting` builds (heat maps, lines, bands, points, bars with error
bars), their tick labels, axis titles, log axes, reference lines, panels and colour bars.
"""

from __future__ import annotations

import html
import typing
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import InvalidArgumentError

if TYPE_CHECKING:
    import plotly.graph_objects as go
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["draw"]

_MARKER = {"x": "x", "cross": "P", "diamond": "D", "square": "s", "triangle-up": "^", None: "o"}
_DASH = {"dash": "--", "dot": ":", "dashdot": "-.", None: "-", "solid": "-"}


def draw(fig: go.Figure, ax: Axes | None = None) -> Figure:
    """`fig` drawn with matplotlib (see `plotting.to_matplotlib`).

    Args:
        fig: The plotly figure.
        ax: Axes to draw a one-panel figure on (a new figure when `None`).

    Returns:
        The matplotlib figure.

    Examples:
        >>> from reward_lens_tl.plotting import bar
        >>> static = draw(bar(["a", "b"], [1.0, -1.0]))
        >>> [float(p.get_width()) for p in static.axes[0].patches]
        [1.0, -1.0]
    """
    import matplotlib.pyplot as plt

    panels = _panels(fig)
    if ax is not None and len(panels) > 1:
        raise InvalidArgumentError(
            f"this figure has {len(panels)} panels; draw it without ax= (backend='matplotlib')"
        )
    if ax is None:
        width = (fig.layout.width or 700) / 100
        height = (fig.layout.height or 420) / 100
        out, axes = plt.subplots(
            1, len(panels), figsize=(width, height), squeeze=False, layout="constrained"
        )
        axes_by_name = dict(zip(panels, axes[0], strict=True))
    else:
        out, axes_by_name = typing.cast("Figure", ax.figure), {panels[0]: ax}
    for trace in fig.data:
        _trace(axes_by_name[getattr(trace, "xaxis", None) or "x"], trace)
    subtitles = _subplot_titles(fig, len(panels))
    for i, (name, axis) in enumerate(axes_by_name.items()):
        _axes(axis, fig, name)
        if subtitles[i]:
            axis.set_title(subtitles[i], fontsize=9)
        handles, _ = axis.get_legend_handles_labels()
        if fig.layout.showlegend and len(handles) > 1:
            axis.legend(fontsize=7)
    _shapes(fig, axes_by_name)
    _annotations(fig, axes_by_name)
    title = _plain_breaks(fig.layout.title.text)
    if title:
        if len(axes_by_name) == 1 and not subtitles[0]:
            next(iter(axes_by_name.values())).set_title(title, fontsize=10)
        else:
            out.suptitle(title, fontsize=10)
    return out


def _panels(fig: go.Figure) -> list[str]:
    names = {getattr(t, "xaxis", None) or "x" for t in fig.data} or {"x"}
    return sorted(names, key=lambda n: int(n[1:] or 1))


def _plain_breaks(text: str | None) -> str:
    """Plotly's `<br>` line breaks as the newlines matplotlib draws."""
    return (text or "").replace("<br>", "\n")


def _subplot_titles(fig: go.Figure, n: int) -> list[str]:
    """Panel titles: make_subplots writes them as paper annotations, left to right."""
    if n == 1:
        return [""]
    notes = [a for a in fig.layout.annotations if a.xref == "paper" and a.yref == "paper"]
    notes.sort(key=lambda a: a.x)
    titles = [_plain_breaks(a.text) for a in notes][:n]
    return titles + [""] * (n - len(titles))


def _layout_axis(fig: go.Figure, kind: str, panel: str):
    suffix = panel[1:]
    return fig.layout[f"{kind}axis{suffix}"]


def _axes(ax: Axes, fig: go.Figure, panel: str) -> None:
    for kind in ("x", "y"):
        layout = _layout_axis(fig, kind, panel)
        title = _plain_breaks(layout.title.text)
        if title:
            (ax.set_xlabel if kind == "x" else ax.set_ylabel)(title, fontsize=9)
        if layout.type == "log":
            (ax.set_xscale if kind == "x" else ax.set_yscale)("log")
        if layout.tickmode == "array" and layout.tickvals is not None:
            angle = layout.tickangle or 0
            setter = ax.set_xticks if kind == "x" else ax.set_yticks
            setter(
                list(layout.tickvals),
                [html.unescape(str(t)) for t in layout.ticktext],
                rotation=-angle if kind == "x" else 0,
                fontsize=7,
            )
        if kind == "y" and layout.autorange == "reversed" and not _has_heatmap(fig, panel):
            ax.invert_yaxis()


def _has_heatmap(fig: go.Figure, panel: str) -> bool:
    return any(t.type == "heatmap" and (t.xaxis or "x") == panel for t in fig.data)


def _trace(ax: Axes, trace: Any) -> None:
    kind = trace.type
    if kind == "heatmap":
        _heatmap(ax, trace)
    elif kind == "scatter":
        _scatter(ax, trace)
    elif kind == "bar":
        _bar(ax, trace)
    else:
        raise InvalidArgumentError(f"the static form cannot draw a {kind!r} trace")


def _cmap(colorscale: Any):
    from matplotlib.colors import LinearSegmentedColormap, to_rgb

    stops = [(float(p), to_rgb(_rgb(c))) for p, c in colorscale]
    return LinearSegmentedColormap.from_list("plotly", stops)


def _rgb(color: str) -> Any:
    if color.startswith("rgb"):
        parts = color[color.index("(") + 1 : color.index(")")].split(",")
        return tuple(float(p) / 255 for p in parts[:3])
    return color


def _heatmap(ax: Axes, trace: Any) -> None:
    z = np.asarray(trace.z, dtype=float)
    zmin, zmax = trace.zmin, trace.zmax
    if trace.zmid is not None and (zmin is None or zmax is None):
        lim = float(np.nanmax(np.abs(z - trace.zmid))) or 1.0
        zmin, zmax = trace.zmid - lim, trace.zmid + lim
    image = ax.imshow(
        z,
        cmap=_cmap(trace.colorscale),
        vmin=zmin,
        vmax=zmax,
        aspect="auto",
        interpolation="nearest",
    )
    bar = ax.figure.colorbar(image, ax=ax, fraction=0.05, pad=0.02)
    label = trace.colorbar.title.text if trace.colorbar and trace.colorbar.title else None
    if label:
        bar.set_label(label, fontsize=8)
    if trace.texttemplate:
        norm = image.norm
        for (i, j), v in np.ndenumerate(z):
            if np.isfinite(v):
                r, g, b, _ = image.cmap(norm(v))
                dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5
                ax.text(
                    j,
                    i,
                    f"{v:.2f}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if dark else "black",
                )


def _scatter(ax: Axes, trace: Any) -> None:
    x = np.asarray(trace.x, dtype=float)
    y = np.asarray(trace.y, dtype=float)
    line_color = _rgb(trace.line.color) if trace.line and trace.line.color else None
    if trace.fill == "toself":
        ax.fill(
            x,
            y,
            color=_rgb(trace.fillcolor)
            if trace.fillcolor and not str(trace.fillcolor).startswith("rgba")
            else _rgba(trace.fillcolor),
            lw=0,
        )
        return
    mode = trace.mode or "lines"
    label = trace.name if trace.showlegend is not False else None
    marker_color = (
        trace.marker.color if trace.marker and isinstance(trace.marker.color, str) else None
    )
    opacity = trace.opacity if trace.opacity is not None else 1.0
    if "lines" in mode:
        width = trace.line.width if trace.line and trace.line.width is not None else 2
        ax.plot(
            x,
            y,
            color=line_color,
            lw=0.75 * width,
            ls=_DASH.get(trace.line.dash, "-"),
            marker="o" if "markers" in mode else None,
            ms=3,
            label=label,
            alpha=opacity,
        )
    elif "markers" in mode:
        symbol = trace.marker.symbol if trace.marker else None
        ax.scatter(
            x,
            y,
            s=18 if symbol == "x" else 10,
            color=_rgb(marker_color) if marker_color else None,
            label=label,
            alpha=trace.marker.opacity or 1.0,
            marker=_MARKER.get(symbol, "o"),
        )
    if "text" in mode and trace.text is not None:
        for xi, yi, t in zip(x, y, trace.text, strict=False):
            ax.annotate(str(t), (xi, yi), fontsize=6)


def _rgba(color: str | None) -> Any:
    if not color:
        return None
    parts = color[color.index("(") + 1 : color.index(")")].split(",")
    return (*(float(p) / 255 for p in parts[:3]), float(parts[3]))


def _bar(ax: Axes, trace: Any) -> None:
    horizontal = trace.orientation == "h"
    positions = np.asarray(trace.y if horizontal else trace.x, dtype=float)
    values = np.asarray(trace.x if horizontal else trace.y, dtype=float)
    color = trace.marker.color if trace.marker else None
    colors = (
        [_rgb(c) for c in color]
        if isinstance(color, (list, tuple))
        else (_rgb(color) if color else None)
    )
    error = trace.error_x if horizontal else trace.error_y
    err = None
    if error is not None and error.array is not None:
        high = np.asarray(error.array, dtype=float)
        low = np.asarray(error.arrayminus, dtype=float) if error.arrayminus is not None else high
        err = np.stack([low, high])
    width = float(trace.width) if trace.width is not None else 0.8
    label = trace.name if trace.name and trace.showlegend is not False else None
    if horizontal:
        ax.barh(positions, values, height=width, color=colors, xerr=err, capsize=2, label=label)
    else:
        ax.bar(positions, values, width=width, color=colors, yerr=err, capsize=2, label=label)


def _shapes(fig: go.Figure, axes_by_name: dict[str, Axes]) -> None:
    for shape in fig.layout.shapes:
        panel = (shape.xref or "x").split(" ")[0]
        panel = panel if panel in axes_by_name else next(iter(axes_by_name))
        ax = axes_by_name[panel]
        color = _rgb(shape.line.color) if shape.line and shape.line.color else "black"
        style: dict[str, Any] = dict(
            color=color, lw=0.8, ls=_DASH.get(shape.line.dash if shape.line else None)
        )
        x_domain = "domain" in (shape.xref or "") or shape.xref == "paper"
        y_domain = "domain" in (shape.yref or "") or shape.yref == "paper"
        if shape.type == "line" and x_domain and shape.y0 == shape.y1:
            ax.axhline(shape.y0, **style)
        elif shape.type == "line" and y_domain and shape.x0 == shape.x1:
            ax.axvline(shape.x0, **style)
        elif shape.type == "line":
            ax.plot([shape.x0, shape.x1], [shape.y0, shape.y1], **style)
        elif shape.type == "rect" and y_domain:
            ax.axvspan(shape.x0, shape.x1, color=_rgba(shape.fillcolor) or "#eeeeee", lw=0)


def _annotations(fig: go.Figure, axes_by_name: dict[str, Axes]) -> None:
    """Text placed on a panel's data axis (in data or domain units); not the panel titles."""
    from matplotlib.transforms import blended_transform_factory

    for note in fig.layout.annotations:
        xref, yref = note.xref or "x", note.yref or "y"
        if xref == "paper" and yref == "paper":
            continue
        panel = xref.split(" ")[0]
        ax = axes_by_name.get(panel if panel != "paper" else "x")
        if ax is None:
            continue
        x_data, y_data = "domain" not in xref, "domain" not in yref and yref != "paper"
        transform = blended_transform_factory(
            ax.transData if x_data else ax.transAxes, ax.transData if y_data else ax.transAxes
        )
        color = note.font.color if note.font and note.font.color else "black"
        ax.text(
            note.x,
            note.y,
            str(note.text or "").replace("<br>", "\n"),
            transform=transform,
            fontsize=7,
            color=_rgb(color),
            ha={"left": "left", "right": "right"}.get(note.xanchor, "center"),
            va={"top": "top", "bottom": "bottom"}.get(note.yanchor, "center"),
        )
