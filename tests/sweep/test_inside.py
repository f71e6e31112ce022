"""`reward_lens_tl.sweep.inside`: the inside view sums to the reward above the sweep's mean."""

from __future__ import annotations

import pytest
import torch

from reward_lens_tl.errors import InvalidArgumentError
from reward_lens_tl.sweep import inside_view, token_sweep
from reward_lens_tl.zoo.vocab import TOPICS
from tests.figures import check_figure


def test_inside_view_sums_to_the_reward_above_the_sweep_mean(zoo_scalar, task_prompts):
    result = token_sweep(zoo_scalar, task_prompts["music"])
    view = inside_view(zoo_scalar, result, k=3)
    assert view.n_baseline == len(result)
    assert view.baseline_reward == pytest.approx(result.mean, abs=1e-4)
    assert view.completeness_error() < 1e-4
    top = [j for j, s in enumerate(view.side) if s == "top"]
    assert all(view.relative[:, j].sum() > 0 for j in top)
    assert all(view.relative[:, j].sum() < 0 for j, s in enumerate(view.side) if s == "bottom")
    torch.testing.assert_close(view.lens.values[-1], view.rewards, atol=1e-4, rtol=0)  # end point
    assert set(view.candidates[:3]) <= set(TOPICS["music"])
    sampled = inside_view(zoo_scalar, result, k=2, baseline=20)
    assert sampled.n_baseline == 20 and sampled.completeness_error() < 1e-4
    assert len(view.to_dataframe()) == len(view.components) * len(view.candidates)
    # a candidate by label, by index or by negative index is the same column; unknown ones are
    # refused with the library's error, not tuple.index's ValueError or an IndexError
    last = view.candidates[-1]
    assert view.top_k(2, last) == view.top_k(2, len(view.candidates) - 1) == view.top_k(2, -1)
    for bad in ("no such word", len(view.candidates), -len(view.candidates) - 1):
        with pytest.raises(InvalidArgumentError):
            view.top_k(2, bad)
    # the figure: the heat map's columns are the candidates (their tokens), one lens line each
    fig = check_figure(
        view.plot(k=4), static=view.plot(k=4, backend="matplotlib"), x_labels=view.candidates
    )
    heat = fig.data[0]
    rows = [view.components.index(c) for c, _ in view.top_k(4)]
    assert heat.type == "heatmap" and heat.zmid == 0 and heat.zmin == -heat.zmax
    torch.testing.assert_close(torch.tensor(heat.z), view.relative[rows].double())
    lines = [t for t in fig.data if t.type == "scatter"]
    sides = zip(view.candidates, view.side, strict=True)
    assert [t.name for t in lines] == [f"{c} ({s})" for c, s in sides]
    assert {t.line.dash for t in lines if "(bottom)" in t.name} == {"dash"}
