"""`reward_lens_tl.sweep.sweep_result`: the `SweepResult` figure."""

from __future__ import annotations

import pytest

from reward_lens_tl.errors import ArgumentTypeError
from reward_lens_tl.sweep import token_sweep
from tests.figures import check_figure


def test_plot_takes_ax_first_and_k_by_keyword(zoo_scalar, task_prompts):
    """``plot(ax=None, k=...)`` like every result; ``plot(3)`` (the old ``k`` first) is an
    ``ax`` now, refused with the library's error. The figure: a histogram of every reward
    (whole counts) beside the top and bottom candidates' reward minus the mean, signed
    colours."""
    result = token_sweep(zoo_scalar, next(iter(task_prompts.values())))
    fig = check_figure(result.plot(k=3), static=result.plot(k=3, backend="matplotlib"))
    hist, bars = fig.data
    assert hist.xaxis == "x" and bars.xaxis == "x2"
    assert all(isinstance(c, int) for c in hist.y) and sum(hist.y) == len(result)
    rows = list(result.top_k(3)) + list(result.bottom_k(3))[::-1]  # best at the top
    assert list(fig.layout.yaxis2.ticktext) == [label for label, _ in rows]
    assert list(bars.x) == pytest.approx([v - result.mean for _, v in rows])
    assert list(bars.marker.color[:3]) == ["#4472c4"] * 3 and bars.marker.color[-1] == "#c00000"
    with pytest.raises(ArgumentTypeError, match="ax must be matplotlib Axes, not int 3"):
        result.plot(3)
