"""What every result's figure must be: interactive plotly by default, with hover values,
labelled axes, no clipped title, a colour bar centred at 0 for diverging heat maps, and a static
matplotlib form drawn from it."""

from __future__ import annotations

import html

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import plotly.graph_objects as go  # noqa: E402


def check_figure(fig, *, static=None, x_labels=None, diverging=None):
    """Assert `fig` is a readable interactive figure; return it.

    Args:
        fig: What `result.plot()` returned.
        static: What `result.plot(backend="matplotlib")` returned (checked when given).
        x_labels: Strings that must appear among the x tick labels (e.g. the tokens).
        diverging: For heat maps: True when the scale must be centred at 0.
    """
    assert isinstance(fig, go.Figure), type(fig)
    shown = [t for t in fig.data if t.hoverinfo != "skip"]
    assert shown, "a figure with nothing in it"
    for trace in shown:
        template = trace.hovertemplate or ""
        assert any(f"%{{{v}" in template for v in "xyz"), (trace.type, template)
    layout = fig.layout
    if layout.title.text:
        assert (layout.margin.t or 0) >= 40, "the title needs a top margin to stay inside"
    for name in ("xaxis", "yaxis"):
        axis = layout[name]
        assert axis.automargin, f"{name} labels may be clipped (automargin off)"
    heat = [t for t in fig.data if t.type == "heatmap"]
    for trace in heat:
        assert trace.colorbar is not None and trace.showscale is not False
        if diverging:
            assert trace.zmid == 0 and trace.zmin == -trace.zmax, (trace.zmin, trace.zmax)
    if x_labels is not None:
        ticks = [html.unescape(str(t)) for t in (layout.xaxis.ticktext or ())]
        for label in x_labels:
            assert any(label in t for t in ticks), (label, ticks[:20])
    fig.to_json()  # serialisable, as Jupyter needs
    if static is not None:
        assert isinstance(static, plt.Figure), type(static)
        assert static.axes, "the static form is empty"
        plt.close(static)
    return fig
