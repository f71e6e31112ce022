"""Figures: interactive plotly by default, a static matplotlib form for files and markdown.

Every result's `plot()` builds one plotly figure with the helpers below and hands it to
`render`. In Jupyter that figure is interactive: hovering shows each mark's label and exact
value, position axes carry the tokens, and diverging data use a colour scale centred at 0
(red below, blue above, the colours of TransformerLens's demos) with a colour bar.

**The one choice.** `plot(backend="matplotlib")` (or `plot(ax=some_axes)`, which draws on
those axes) returns the same figure as a static matplotlib `Figure`, for `savefig`, markdown
and papers. `set_backend("matplotlib")` makes that the default for the whole session; the
environment variable `REWARD_LENS_BACKEND=matplotlib` does the same before import. The static
form is drawn from the plotly figure (`to_matplotlib`), so the two never disagree.

The helpers follow the shape of the `imshow` / `line` / `scatter` functions of
TransformerLens's demos (a tensor first, `xaxis=` / `yaxis=` axis titles, `x=` / `y=` tick
labels, `title=`), and are public: a notebook can draw any tensor the same way.

Examples:
    >>> import torch
    >>> fig = imshow(torch.tensor([[1.0, -2.0], [0.5, 0.0]]), x=["a", "b"], y=["L0", "L1"],
    ...              xaxis="token", yaxis="layer", title="effects")
    >>> fig.data[0].type, fig.data[0].zmid, list(fig.layout.xaxis.ticktext)
    ('heatmap', 0.0, ['a', 'b'])
    >>> type(to_matplotlib(fig)).__name__
    'Figure'
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import numpy as np

from .errors import ArgumentTypeError, InvalidArgumentError

if TYPE_CHECKING:
    import plotly.graph_objects as go
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure as MplFigure

__all__ = [
    "BACKENDS",
    "SIGNED",
    "Backend",
    "bar",
    "figure_html",
    "get_backend",
    "histogram",
    "imshow",
    "line",
    "render",
    "save",
    "scatter",
    "set_backend",
    "shown_token",
    "side_by_side",
    "to_matplotlib",
]

Backend: TypeAlias = Literal["plotly", "matplotlib"]
BACKENDS: tuple[str, ...] = ("plotly", "matplotlib")
SIGNED = "signed"
"""``colors=`` of `bar`: red for negative values, blue for the others."""

#: The arguments and result of a result's `plot` that takes only `ax` and `backend`; pasted
#: at `{plot}` (`reward_lens_tl.signatures.pasted_docs`).
PLOT_DOC = """Args:
    ax: Matplotlib axes to draw the static form on.
    backend: `"plotly"` or `"matplotlib"` (see `reward_lens_tl.plotting`).

Returns:
    The figure (not shown)."""

BLUE, RED, GREY = "#4472c4", "#c00000", "#888888"
PALETTE = ("#4472c4", "#ed7d31", "#70ad47", "#7030a0", "#c00000", "#00b0f0", "#ffc000", "#7f7f7f")
#: The file suffixes `save` writes as a static image (`.html` keeps the figure interactive).
STATIC_SUFFIXES = (".png", ".svg", ".pdf", ".jpg", ".jpeg")
#: The plotly config of every figure on a page: resizes with its box, no plotly logo.
PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}
_FONT = dict(family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif", size=12)
_state: dict[str, str] = {"backend": os.environ.get("REWARD_LENS_BACKEND", "plotly")}


def set_backend(backend: Backend) -> None:
    """Make `backend` the default of every `plot()` in this session.

    Args:
        backend: `"plotly"` (interactive, the default) or `"matplotlib"` (static).

    Raises:
        InvalidArgumentError: For any other name.

    Examples:
        >>> set_backend("matplotlib"); get_backend()
        'matplotlib'
        >>> set_backend("plotly")
    """
    _state["backend"] = _checked(backend)


def get_backend() -> str:
    """The default backend of `plot()` (see `set_backend`).

    Examples:
        >>> get_backend() in BACKENDS
        True
    """
    return _checked(_state["backend"])


def _checked(backend: str) -> str:
    if backend not in BACKENDS:
        raise InvalidArgumentError(
            f"backend={backend!r} is not a plotting backend: pass one of {', '.join(BACKENDS)}"
        )
    return backend


def render(fig: go.Figure, backend: Backend | None = None, ax: Axes | None = None) -> Any:
    """`fig` in the requested form: itself (plotly) or a static matplotlib figure.

    Args:
        fig: The plotly figure a result built.
        backend: `"plotly"`, `"matplotlib"`, or `None` for the session's default.
        ax: Matplotlib axes to draw on; implies the matplotlib backend.

    Returns:
        A `plotly.graph_objects.Figure` or a `matplotlib.figure.Figure`.

    Raises:
        InvalidArgumentError: For an unknown backend, or `ax` with the plotly backend.
        ArgumentTypeError: If `ax` is not a matplotlib `Axes` (e.g. `result.plot(3)`, where
            the number was meant for a keyword: `plot` takes `ax` first).

    Examples:
        >>> type(render(bar(["a"], [1.0]), backend="matplotlib")).__name__
        'Figure'
    """
    if ax is not None and not _is_axes(ax):
        raise ArgumentTypeError(
            f"ax must be matplotlib Axes, not {type(ax).__name__} {ax!r}: a result's plot() "
            "takes ax as its first argument; pass the other settings by keyword, e.g. plot(k=3)"
        )
    if ax is not None and backend == "plotly":
        raise InvalidArgumentError("ax= draws on matplotlib axes: leave backend unset with ax")
    chosen = "matplotlib" if ax is not None else _checked(backend or get_backend())
    if chosen == "matplotlib":
        return to_matplotlib(fig, ax)
    return fig


def _is_axes(ax: Any) -> bool:
    from matplotlib.axes import Axes

    return isinstance(ax, Axes)


# -- building ------------------------------------------------------------------------------------
def _array(values: Any) -> np.ndarray:
    if hasattr(values, "detach"):
        values = values.detach().float().cpu().numpy()
    return np.asarray(values, dtype=float)


def _labels(labels: Sequence[Any] | None, n: int) -> list[str]:
    return [str(v) for v in labels] if labels is not None else [str(i) for i in range(n)]


def _figure(title: str, xaxis: str, yaxis: str, width: int, height: int) -> go.Figure:
    import plotly.graph_objects as go

    fig = go.Figure()
    fig.update_layout(
        title=dict(text=title, x=0.0, xanchor="left", font=dict(size=14)) if title else None,
        template="plotly_white",
        font=_FONT,
        width=width,
        height=height,
        margin=dict(l=10, r=10, t=50 if title else 20, b=10),
        hoverlabel=dict(namelength=-1),
        legend=dict(font=dict(size=11)),
    )
    fig.update_xaxes(title_text=xaxis, automargin=True)
    fig.update_yaxes(title_text=yaxis, automargin=True)
    return fig


def _ticks(fig: go.Figure, axis: str, labels: list[str], **more: Any) -> None:
    """Positions 0..n-1 on `axis` with `labels` as their text (repeated tokens stay apart)."""
    step = max(1, len(labels) // 60)
    values = list(range(0, len(labels), step))
    update = dict(tickmode="array", tickvals=values, ticktext=[labels[i] for i in values], **more)
    (fig.update_xaxes if axis == "x" else fig.update_yaxes)(**update)


def imshow(
    values: Any,
    *,
    x: Sequence[Any] | None = None,
    y: Sequence[Any] | None = None,
    xaxis: str = "",
    yaxis: str = "",
    title: str = "",
    value_name: str = "value",
    midpoint: float | None = 0.0,
    zmin: float | None = None,
    zmax: float | None = None,
    colorscale: str = "RdBu",
    text: bool = False,
    width: int | None = None,
    height: int | None = None,
) -> go.Figure:
    """A heat map of a 2-D tensor, rows down and columns across (TL demos' `imshow`).

    With `midpoint=0` (the default) the colour scale is symmetric around 0: red below, white
    at 0, blue above. Pass `midpoint=None` with `zmin`/`zmax` for a sequential scale.

    Args:
        values: The `[rows, columns]` values (tensor, array or nested lists).
        x: Column labels (tokens, positions); repeated labels stay separate columns.
        y: Row labels (layers, heads).
        xaxis: The x axis title.
        yaxis: The y axis title.
        title: The figure title.
        value_name: What a value is, shown on hover and on the colour bar.
        midpoint: The value at the colour scale's centre, or `None`.
        zmin: The colour scale's low end (default: from the data).
        zmax: The colour scale's high end (default: from the data).
        colorscale: A plotly colour scale name.
        text: Write each value in its cell.
        width: The width in pixels (default: from the number of columns).
        height: The height in pixels (default: from the number of rows).

    Returns:
        The plotly figure.

    Examples:
        >>> imshow([[0.5, -0.5]], x=["the", "the"]).layout.xaxis.tickvals
        (0, 1)
    """
    import plotly.graph_objects as go

    z = _array(values)
    if z.ndim != 2:
        raise InvalidArgumentError(f"imshow draws a 2-D array; got shape {tuple(z.shape)}")
    rows, cols = _labels(y, z.shape[0]), _labels(x, z.shape[1])
    rotate = max(map(len, cols), default=0) > 3
    below = 40 + (6.5 * max(map(len, cols), default=1) if rotate else 20)
    left = 40 + 6.5 * max(map(len, rows), default=1)
    width = width or int(min(1200, left + max(360, 26 * len(cols)) + 110))
    height = height or int(min(1400, (50 if title else 20) + max(240, 24 * len(rows)) + below))
    fig = _figure(title, xaxis, yaxis, width, height)
    finite = z[np.isfinite(z)]
    if midpoint is not None and zmin is None and zmax is None:
        lim = float(np.abs(finite - midpoint).max()) if finite.size else 1.0
        zmin, zmax = midpoint - (lim or 1.0), midpoint + (lim or 1.0)
    custom = np.dstack(np.meshgrid(cols, rows)).astype(object)
    fig.add_trace(
        go.Heatmap(
            z=z,
            x=list(range(len(cols))),
            y=list(range(len(rows))),
            customdata=custom,
            colorscale=colorscale,
            zmid=midpoint,
            zmin=zmin,
            zmax=zmax,
            colorbar=dict(title=dict(text=value_name, side="right"), thickness=14),
            hovertemplate=(
                f"{yaxis or 'row'}: %{{customdata[1]}}<br>{xaxis or 'column'}: "
                f"%{{customdata[0]}}<br>{value_name}: %{{z:.5g}}<extra></extra>"
            ),
            texttemplate="%{z:.2f}" if text else None,
        )
    )
    _ticks(fig, "x", cols, tickangle=-90 if rotate else 0)
    _ticks(fig, "y", rows, autorange="reversed")
    return fig


def line(
    series: Mapping[str, Any] | Any,
    *,
    x: Sequence[Any] | None = None,
    xaxis: str = "",
    yaxis: str = "",
    title: str = "",
    bands: Mapping[str, tuple[Any, Any]] | None = None,
    markers: bool | None = None,
    log_y: bool = False,
    zero_line: bool = False,
    width: int = 720,
    height: int = 400,
) -> go.Figure:
    """Lines over a shared x axis, one per named series (TL demos' `line`).

    Args:
        series: `{name: values}`, or one sequence of values.
        x: The x labels (layers, tokens, steps); numbers give a numeric axis, text a
            categorical one whose repeated labels stay separate.
        xaxis: The x axis title.
        yaxis: The y axis title (also the value's name on hover).
        title: The figure title.
        bands: `{name: (low, high)}` shaded around the series of that name.
        markers: Mark each point (default: when there are at most 60).
        log_y: A logarithmic y axis.
        zero_line: Draw y = 0.
        width: The width in pixels.
        height: The height in pixels.

    Returns:
        The plotly figure.

    Examples:
        >>> fig = line({"mean": [0.1, 0.4, 0.9]}, x=["L0", "L1", "L2"], yaxis="reward")
        >>> fig.data[0].name, fig.data[0].y.tolist()
        ('mean', [0.1, 0.4, 0.9])
    """
    import plotly.graph_objects as go

    named = dict(series) if isinstance(series, Mapping) else {yaxis or "value": series}
    fig = _figure(title, xaxis, yaxis, width, height)
    n = len(_array(next(iter(named.values())))) if named else 0
    labels = _labels(x, n)
    numeric = x is not None and _is_numeric(x)
    xs = list(_array(x)) if numeric else list(range(n))
    for i, (name, values) in enumerate(named.items()):
        color = PALETTE[i % len(PALETTE)]
        ys = _array(values)
        if bands and name in bands:
            lo, hi = (_array(v) for v in bands[name])
            fig.add_trace(
                go.Scatter(
                    x=[*xs, *xs[::-1]],
                    y=[*hi, *lo[::-1]],
                    mode="lines",
                    fill="toself",
                    fillcolor=_alpha(color, 0.2),
                    line=dict(width=0),
                    hoverinfo="skip",
                    showlegend=False,
                    name=f"{name} band",
                )
            )
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                name=str(name),
                mode="lines+markers" if (n <= 60 if markers is None else markers) else "lines",
                line=dict(color=color, width=2),
                marker=dict(size=6),
                customdata=labels,
                hovertemplate=(
                    f"{name}<br>{xaxis or 'x'}: %{{customdata}}<br>{yaxis or 'value'}: "
                    "%{y:.5g}<extra></extra>"
                ),
            )
        )
    if not numeric:
        rotate = max(map(len, labels), default=0) > 4
        _ticks(fig, "x", labels, tickangle=-90 if rotate else 0, range=[-0.5, n - 0.5])
        if rotate:
            fig.update_layout(height=height + int(6 * max(map(len, labels), default=0)))
    if log_y:
        fig.update_yaxes(type="log", exponentformat="power")
    if zero_line:
        fig.add_hline(y=0, line=dict(color="black", width=1))
    fig.update_layout(showlegend=len(named) > 1)
    return fig


def bar(
    labels: Sequence[Any],
    values: Any,
    *,
    xaxis: str = "",
    yaxis: str = "",
    title: str = "",
    colors: str | Sequence[str] | None = None,
    error: Any = None,
    horizontal: bool = True,
    value_name: str | None = None,
    width: int = 720,
    height: int | None = None,
) -> go.Figure:
    """Bars of `(label, value)`, the first label at the top (horizontal) or left.

    Args:
        labels: One label per bar (repeated labels stay separate bars).
        values: One value per bar.
        xaxis: The x axis title.
        yaxis: The y axis title.
        title: The figure title.
        colors: One colour, one per bar, or `SIGNED` (red below 0, blue above).
        error: Half-widths of error bars, or `(low, high)` distances, or `None`.
        horizontal: Horizontal bars (labels on the y axis).
        value_name: The value's name on hover (default: the value axis title).
        width: The width in pixels.
        height: The height in pixels (default: from the number of bars).

    Returns:
        The plotly figure.

    Examples:
        >>> fig = bar(["a", "b"], [1.0, -2.0], colors=SIGNED, xaxis="effect")
        >>> list(fig.data[0].marker.color)
        ['#4472c4', '#c00000']
    """
    import plotly.graph_objects as go

    vals = _array(values)
    names = _labels(labels, len(vals))
    if colors is None:
        colors = BLUE
    elif isinstance(colors, str) and colors == SIGNED:
        colors = [RED if v < 0 else BLUE for v in vals]
    height = height or (int(min(1400, max(260, 110 + 24 * len(names)))) if horizontal else 420)
    fig = _figure(title, xaxis, yaxis, width, height)
    position = list(range(len(names)))
    err = None
    if error is not None:
        if isinstance(error, tuple) and len(error) == 2:
            err = dict(type="data", array=_array(error[1]), arrayminus=_array(error[0]))
        else:
            err = dict(type="data", array=_array(error))
    shown = value_name or (xaxis if horizontal else yaxis) or "value"
    fig.add_trace(
        go.Bar(
            x=vals if horizontal else position,
            y=position if horizontal else vals,
            orientation="h" if horizontal else "v",
            marker=dict(color=colors if isinstance(colors, str) else list(colors)),
            customdata=names,
            error_x=err if horizontal else None,
            error_y=None if horizontal else err,
            hovertemplate=f"%{{customdata}}<br>{shown}: %{{{'x' if horizontal else 'y'}:.5g}}"
            "<extra></extra>",
        )
    )
    if horizontal:
        _ticks(fig, "y", names, autorange="reversed")
        fig.add_vline(x=0, line=dict(color="black", width=1))
    else:
        _ticks(fig, "x", names, tickangle=-90 if max(map(len, names), default=0) > 4 else 0)
        fig.add_hline(y=0, line=dict(color="black", width=1))
    fig.update_layout(showlegend=False)
    return fig


def scatter(
    series: Mapping[str, tuple[Any, Any]],
    *,
    xaxis: str = "",
    yaxis: str = "",
    title: str = "",
    labels: Mapping[str, Sequence[str]] | None = None,
    diagonal: bool = False,
    width: int = 520,
    height: int = 460,
) -> go.Figure:
    """Points `{name: (x, y)}`, one colour per name, optionally with the line y = x.

    Args:
        series: `{name: (x values, y values)}`.
        xaxis: The x axis title.
        yaxis: The y axis title.
        title: The figure title.
        labels: `{name: one label per point}` shown on hover.
        diagonal: Draw y = x across the data's range.
        width: The width in pixels.
        height: The height in pixels.

    Returns:
        The plotly figure.

    Examples:
        >>> fig = scatter({"estimate": ([0.0, 1.0], [0.1, 0.9])}, diagonal=True)
        >>> len(fig.data), len(fig.layout.shapes)
        (1, 1)
    """
    import plotly.graph_objects as go

    fig = _figure(title, xaxis, yaxis, width, height)
    low, high = np.inf, -np.inf
    for i, (name, (xv, yv)) in enumerate(series.items()):
        xs, ys = _array(xv).reshape(-1), _array(yv).reshape(-1)
        both = np.concatenate([xs, ys])
        both = both[np.isfinite(both)]
        if both.size:
            low, high = min(low, both.min()), max(high, both.max())
        text = list(labels[name]) if labels and name in labels else [""] * len(xs)
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="markers",
                name=str(name),
                marker=dict(color=PALETTE[i % len(PALETTE)], size=7, opacity=0.8),
                customdata=text,
                hovertemplate=f"{name} %{{customdata}}<br>{xaxis or 'x'}: %{{x:.5g}}<br>"
                f"{yaxis or 'y'}: %{{y:.5g}}<extra></extra>",
            )
        )
    if diagonal and np.isfinite(low):
        fig.add_shape(
            type="line", x0=low, y0=low, x1=high, y1=high, line=dict(color="black", dash="dash")
        )
    fig.update_layout(showlegend=len(series) > 1)
    return fig


def histogram(
    values: Any,
    *,
    xaxis: str = "",
    yaxis: str = "count",
    title: str = "",
    bins: int = 30,
    zero_line: bool = True,
    width: int = 620,
    height: int = 380,
) -> go.Figure:
    """A histogram of `values` with whole-number counts.

    Args:
        values: The values.
        xaxis: The x axis title.
        yaxis: The y axis title (what is counted).
        title: The figure title.
        bins: The number of bins (fewer when there are few values).
        zero_line: Draw x = 0.
        width: The width in pixels.
        height: The height in pixels.

    Returns:
        The plotly figure.

    Examples:
        >>> fig = histogram([0.1, 0.2, -0.3], xaxis="margin")
        >>> sum(fig.data[0].y)
        3
    """
    import plotly.graph_objects as go

    vals = _array(values).reshape(-1)
    vals = vals[np.isfinite(vals)]
    n_bins = max(1, min(bins, int(np.ceil(np.sqrt(max(len(vals), 1))) * 2)))
    counts, edges = np.histogram(vals, bins=n_bins)
    fig = _figure(title, xaxis, yaxis, width, height)
    centres = (edges[:-1] + edges[1:]) / 2
    fig.add_trace(
        go.Bar(
            x=centres,
            y=[int(c) for c in counts],
            width=float(edges[1] - edges[0]) if len(edges) > 1 else None,
            marker=dict(color=BLUE, line=dict(color="white", width=0.5)),
            customdata=np.stack([edges[:-1], edges[1:]], axis=1),
            hovertemplate=f"{xaxis or 'value'} in [%{{customdata[0]:.4g}}, "
            f"%{{customdata[1]:.4g}})<br>{yaxis}: %{{y}}<extra></extra>",
        )
    )
    fig.update_yaxes(tickformat="d", rangemode="tozero")
    if counts.size and counts.max() <= 10:
        fig.update_yaxes(dtick=1)
    if zero_line:
        fig.add_vline(x=0, line=dict(color="black", width=1))
    fig.update_layout(showlegend=False, bargap=0)
    return fig


def side_by_side(figures: Sequence[go.Figure], *, title: str = "", width: int | None = None):
    """Several figures as the panels of one, left to right (each keeps its axis titles).

    Args:
        figures: The panels.
        title: The whole figure's title.
        width: The width in pixels (default: the panels' widths, at most 1400).

    Returns:
        The plotly figure.

    Examples:
        >>> both = side_by_side([bar(["a"], [1.0]), bar(["b"], [2.0])], title="two")
        >>> [t.xaxis for t in both.data]
        ['x', 'x2']
    """
    from plotly.subplots import make_subplots

    titles = [f.layout.title.text or "" for f in figures]
    heat = any(t.type == "heatmap" for f in figures for t in f.data)
    fig = make_subplots(
        rows=1,
        cols=len(figures),
        subplot_titles=titles,
        horizontal_spacing=min(0.3, (0.22 if heat else 0.12) * 2 / len(figures)),
    )
    for col, panel in enumerate(figures, start=1):
        for trace in panel.data:
            fig.add_trace(trace, row=1, col=col)
        for axis, key in (("x", "xaxis"), ("y", "yaxis")):
            source = panel.layout[key]
            update = dict(
                title_text=source.title.text,
                automargin=True,
                autorange=source.autorange,
                type=source.type,
            )
            if source.tickmode == "array":
                update.update(
                    tickmode="array",
                    tickvals=source.tickvals,
                    ticktext=source.ticktext,
                    tickangle=source.tickangle,
                )
            (fig.update_xaxes if axis == "x" else fig.update_yaxes)(row=1, col=col, **update)
        for shape in panel.layout.shapes:
            fig.add_shape(shape, row=1, col=col)
    for trace in fig.data:
        if trace.type == "heatmap":
            # each panel's colour bar sits beside that panel
            domain = fig.layout[f"xaxis{'' if trace.xaxis == 'x' else trace.xaxis[1:]}"].domain
            trace.colorbar.x = domain[1] + 0.01
            trace.colorbar.len = 0.9
    for note in fig.layout.annotations:
        note.font.size = 12
    panel_height = max(int(f.layout.height or 400) for f in figures)
    total = width or min(1400, sum(int(f.layout.width or 500) for f in figures))
    fig.update_layout(
        title=dict(text=title, x=0.0, xanchor="left", font=dict(size=14)) if title else None,
        template="plotly_white",
        font=_FONT,
        width=total,
        height=panel_height + 30,
        margin=dict(l=10, r=10, t=70 if title else 40, b=10),
        showlegend=any(f.layout.showlegend for f in figures),
    )
    _panel_legends(fig, figures)
    return fig


def _panel_legends(fig: go.Figure, figures: Sequence[go.Figure]) -> None:
    """One legend per panel (one shared legend would mix up the panels' colours).

    The last panel's sits beside the figure, the others inside their panel's top-left corner.
    """
    shown = [i for i, f in enumerate(figures, start=1) if f.layout.showlegend]
    for col in shown[:-1]:
        domain = fig.layout[f"xaxis{'' if col == 1 else col}"].domain
        fig.update_layout(
            {
                f"legend{col + 1}": dict(
                    x=domain[0] + 0.01,
                    y=0.99,
                    xanchor="left",
                    yanchor="top",
                    bgcolor="rgba(255,255,255,0.75)",
                    font=dict(size=10),
                )
            }
        )
        axis = "x" if col == 1 else f"x{col}"
        for trace in fig.data:
            if (trace.xaxis or "x") == axis:
                trace.legend = f"legend{col + 1}"  # "legend" (= "legend1") is the last panel's
    for col in range(1, len(figures) + 1):
        if col not in shown:
            axis = "x" if col == 1 else f"x{col}"
            for trace in fig.data:
                if (trace.xaxis or "x") == axis:
                    trace.showlegend = False


def shown_token(token: str, limit: int = 24) -> str:
    r"""A token as an axis label: spaces and line breaks visible, at most `limit` characters.

    Args:
        token: The token's text.
        limit: The longest label kept whole (longer ones end in "…").

    Returns:
        The label, HTML-escaped (plotly reads tick and hover text as HTML; the static form
        unescapes it).

    Examples:
        >>> shown_token(" the"), shown_token("a\n"), shown_token("<b>")
        ('␣the', 'a↵', '&lt;b&gt;')
    """
    text = token.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥") or "∅"
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    # plotly reads tick and hover text as HTML: a token like "<b>" must stay text
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def save(fig: go.Figure, path: str | os.PathLike[str], dpi: int = 120) -> None:
    """Write `fig` to `path`: interactive offline HTML for `.html`, else the static form.

    Args:
        fig: The plotly figure.
        path: Where to write it; `.html` keeps it interactive (plotly.js inlined, no network),
            `.png`, `.svg`, `.pdf` or `.jpg` write the static matplotlib form.
        dpi: The resolution of a raster file.

    Raises:
        InvalidArgumentError: For another suffix.

    Examples:
        >>> import tempfile, pathlib
        >>> with tempfile.TemporaryDirectory() as d:
        ...     save(bar(["a"], [1.0]), pathlib.Path(d) / "f.png")
        ...     (pathlib.Path(d) / "f.png").stat().st_size > 0
        True
    """
    import matplotlib.pyplot as plt

    suffix = os.path.splitext(os.fspath(path))[1].lower()
    if suffix == ".html":
        fig.write_html(path, include_plotlyjs=True, config=PLOTLY_CONFIG)
        return
    if suffix not in STATIC_SUFFIXES:
        raise InvalidArgumentError(
            f"cannot write a figure to {os.fspath(path)!r}: name a .html (interactive) or "
            ".png, .svg, .pdf or .jpg (static) file"
        )
    static = to_matplotlib(fig)
    static.savefig(path, dpi=dpi, bbox_inches="tight")
    plt.close(static)


def figure_html(fig: go.Figure, div_id: str | None = None) -> str:
    """`fig` as an HTML fragment for a page that loads plotly.js once (the report, the docs).

    The fragment holds no copy of plotly.js and fetches nothing: it draws the figure as soon as
    the page's one `<script>` of `plotly.offline.get_plotlyjs()` has run, before or after it.

    Args:
        fig: The plotly figure.
        div_id: The figure's element id (default: a random one); a fixed id gives the same
            page on every build.

    Returns:
        The HTML fragment.

    Examples:
        >>> html = figure_html(bar(["a"], [1.0]))
        >>> "Plotly.newPlot" in html, "cdn" in html.lower()
        (True, False)
    """
    html = fig.to_html(
        full_html=False,
        include_plotlyjs=False,
        include_mathjax=False,
        config=PLOTLY_CONFIG,
        default_width="100%",
        div_id=div_id,
    )
    start = html.index("<script>") + len("<script>")
    end = html.rindex("</script>")
    body = html[start:end]
    waiting = (
        f"(function draw() {{ if (!window.Plotly) {{ return setTimeout(draw, 30); }}{body}}})();"
    )
    return html[:start] + waiting + html[end:]


def _register_renderer() -> None:
    """Register plotly renderer "reward_lens": the Jupyter mimetype plus `figure_html`.

    Jupyter (Lab, Notebook 7, VS Code) draws the mimetype; an HTML export of the notebook
    (nbconvert, the docs site) draws `figure_html` with the page's own plotly.js, so a
    committed notebook carries no copy of the 4 MB bundle. The notebooks select it with
    `plotly.io.renderers.default = "reward_lens"`; nothing else changes plotly's settings.
    """
    import plotly.io as pio
    from plotly.io._base_renderers import MimetypeRenderer

    class _Renderer(MimetypeRenderer):
        def to_mimebundle(self, fig_dict):
            import plotly.graph_objects as go

            return {
                "application/vnd.plotly.v1+json": {
                    "data": fig_dict.get("data", []),
                    "layout": fig_dict.get("layout", {}),
                    "config": {"displaylogo": False},
                },
                "text/html": figure_html(go.Figure(fig_dict, skip_invalid=True)),
            }

    if "reward_lens" not in pio.renderers:
        pio.renderers["reward_lens"] = _Renderer()


def _is_numeric(values: Sequence[Any]) -> bool:
    try:
        _array(values)
    except (TypeError, ValueError):
        return False
    return all(not isinstance(v, str) for v in values)


def _alpha(color: str, alpha: float) -> str:
    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


# -- the static form -----------------------------------------------------------------------------
def to_matplotlib(fig: go.Figure, ax: Axes | None = None) -> MplFigure:
    """The plotly figure `fig` drawn with matplotlib (heat maps, lines, bars, points, bands).

    The static form of every result's figure: same data, tick labels, titles, colour scale
    and colour bar. `ax` draws a one-panel figure on existing axes.

    Args:
        fig: A figure built by this module's helpers (or any of the same trace kinds).
        ax: Axes to draw on (a new figure when `None`).

    Returns:
        The matplotlib figure.

    Raises:
        InvalidArgumentError: For a trace kind this function cannot draw, or several panels
            with `ax`.

    Examples:
        >>> static = to_matplotlib(line({"a": [1.0, 2.0]}, title="t"))
        >>> static.axes[0].get_title(), static.axes[0].lines[0].get_ydata().tolist()
        ('t', [1.0, 2.0])
    """
    from ._static import draw

    return draw(fig, ax)


_register_renderer()
