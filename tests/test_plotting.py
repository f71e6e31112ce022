"""The figure helpers: the numbers drawn are the numbers given, in both forms."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from reward_lens_tl import plotting  # noqa: E402
from reward_lens_tl.errors import ArgumentTypeError, InvalidArgumentError  # noqa: E402


def test_imshow_is_centred_and_keeps_repeated_tokens_apart():
    values = torch.tensor([[0.5, -2.0, 1.0], [0.0, 0.25, -0.5]])
    fig = plotting.imshow(values, x=["the", "the", "<b>"], y=["L0", "L1"])
    trace = fig.data[0]
    assert np.array_equal(np.asarray(trace.z), values.numpy())
    assert (trace.zmin, trace.zmid, trace.zmax) == (-2.0, 0.0, 2.0)
    assert list(fig.layout.xaxis.tickvals) == [0, 1, 2]  # two "the" columns stay two
    assert list(fig.layout.xaxis.ticktext) == ["the", "the", "<b>"]
    static = plotting.to_matplotlib(fig)
    image = static.axes[0].images[0]
    assert np.array_equal(np.asarray(image.get_array()), values.numpy())
    assert image.get_clim() == (-2.0, 2.0)
    assert [t.get_text() for t in static.axes[0].get_xticklabels()] == ["the", "the", "<b>"]


def test_bars_lines_and_histograms_draw_the_given_numbers_in_both_forms():
    fig = plotting.bar(["a", "b", "c"], [1.0, -2.0, 0.5], colors=plotting.SIGNED)
    static = plotting.to_matplotlib(fig)
    assert [p.get_width() for p in static.axes[0].patches] == [1.0, -2.0, 0.5]
    assert list(fig.data[0].marker.color) == ["#4472c4", "#c00000", "#4472c4"]
    lines = plotting.line({"m": [0.1, 0.4], "s": [1.0, 2.0]}, x=["L0", "L1"])
    drawn = plotting.to_matplotlib(lines).axes[0].lines
    assert [line.get_ydata().tolist() for line in drawn] == [[0.1, 0.4], [1.0, 2.0]]
    hist = plotting.histogram([0.1, 0.2, 0.3, -1.0])
    assert sum(hist.data[0].y) == 4 and all(isinstance(c, int) for c in hist.data[0].y)
    assert hist.layout.yaxis.dtick == 1  # whole pairs, not 0.2 of one


def test_panels_keep_their_own_legends():
    left = plotting.line({"proxy": [1, 2], "gold": [1, 1]}, x=[1, 2])
    right = plotting.line({"topic": [1, 2], "harm": [0, 0]}, x=[1, 2])
    both = plotting.side_by_side([left, right], title="two")
    assert [t.legend for t in both.data] == ["legend2", "legend2", None, None]
    assert both.layout.legend2.x < 0.5  # inside the left panel
    assert len(plotting.to_matplotlib(both).axes) == 2


def test_backends_and_files_are_checked(tmp_path):
    fig = plotting.bar(["a"], [1.0])
    with pytest.raises(InvalidArgumentError, match="backend"):
        plotting.render(fig, backend="bokeh")
    with pytest.raises(InvalidArgumentError, match=r"\.html"):
        plotting.save(fig, tmp_path / "figure.gif")
    with pytest.raises(ArgumentTypeError, match="not int 3.*by keyword"):  # plot(3): k meant
        plotting.render(fig, ax=3)
    plotting.save(fig, tmp_path / "figure.html")
    text = (tmp_path / "figure.html").read_text()
    assert '<script src="http' not in text and "Plotly.newPlot" in text
    previous = plotting.get_backend()
    plotting.set_backend("matplotlib")
    try:
        assert type(plotting.render(fig)).__name__ == "Figure"
    finally:
        plotting.set_backend(previous)


def test_figure_html_waits_for_the_pages_plotly():
    html = plotting.figure_html(plotting.bar(["a"], [1.0]))
    assert "if (!window.Plotly)" in html and "<script src" not in html
