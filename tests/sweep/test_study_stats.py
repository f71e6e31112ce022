"""`reward_lens_tl.sweep.study_stats`: the statistics by hand, on a sweep, the τ matrix figure."""

from __future__ import annotations

import pytest
import torch

from reward_lens_tl.sweep import (
    distribution_summary,
    framing_effect,
    frequency_bias,
    kendall_tau_matrix,
    token_sweep,
    valence_asymmetry,
)
from reward_lens_tl.zoo.vocab import HARMFUL_WORDS, TOPICS
from tests.figures import check_figure


def test_statistics_by_hand():
    import pandas as pd

    s = pd.Series({"a": 1.0, "b": 2.0, "c": 3.0, "d": 10.0})
    summary = distribution_summary(s)
    v = s.to_numpy()
    m2, m3, m4 = (((v - v.mean()) ** p).mean() for p in (2, 3, 4))
    assert summary["skew"] == pytest.approx(m3 / m2**1.5)
    assert summary["kurtosis"] == pytest.approx(m4 / m2**2 - 3)
    scores = pd.Series({"good": 3.0, "great": 5.0, "bad": -4.0, "awful": -6.0, "x": 0.0, "y": 1.0})
    asym = valence_asymmetry(scores, ["good", "great", "missing"], ["bad", "awful"])
    # median 0.5; gain = 4 - 0.5; loss = 0.5 - (-5)
    assert asym["positive_gain"] == pytest.approx(3.5) and asym["negative_loss"] == pytest.approx(
        5.5
    )
    assert asym["asymmetry"] == pytest.approx(2.0) and asym["missing"] == 1
    freq = frequency_bias(scores, {"good": 10, "great": 100, "bad": 20, "awful": 0.5, "x": 0})
    # count ranks awful<good<bad<great, score ranks awful<bad<good<great: 1 - 6*2/(4*15)
    assert freq["n"] == 4 and freq["spearman_rho"] == pytest.approx(0.8)
    frame = pd.DataFrame({"p1": [1.0, 2, 3, 4], "p2": [2.0, 3, 4, 5], "p3": [4.0, 3, 2, 1]})
    framing = framing_effect(frame)
    assert framing["kendall_tau"]["p1 | p3"] == -1.0
    assert framing["mean_shift"]["p1 | p2"] == pytest.approx(1.0)
    assert framing["spearman_rho"]["p1 | p2"] == pytest.approx(1.0)


def test_sweep_statistics_take_a_sweep(zoo_scalar):
    result = token_sweep(zoo_scalar, "how bake bread")
    summary = distribution_summary(result)
    assert summary["n"] == 115 and summary["mean"] == pytest.approx(result.mean, abs=1e-5)
    asym = valence_asymmetry(result, TOPICS["cooking"], HARMFUL_WORDS)
    assert asym["positive_gain"] > 0 and asym["negative_loss"] > 0


def test_tau_matrix_figure_keeps_names_apart_and_centres_at_zero():
    """Two models whose names share their first 24 characters stay two names on the axes; only
    a prefix every name shares (an organisation) is dropped; τ is on a scale from −1 to 1
    centred at 0, each cell's value written in it."""
    import pandas as pd

    names = [
        "Skywork/Skywork-Reward-Gemma-2-27B",
        "Skywork/Skywork-Reward-Gemma-2-27B-v0.2",
        "Skywork/Skywork-Reward-Llama-3.1-8B",
    ]
    assert names[0][:24] == names[1][:24]
    columns = ([1.0, 2, 3, 4], [1.0, 3, 2, 4], [2.0, 1, 4, 3])
    frame = pd.DataFrame(dict(zip(names, columns, strict=True)))
    matrix = kendall_tau_matrix(frame)
    fig = check_figure(matrix.plot(), static=matrix.plot(backend="matplotlib"), diverging=True)
    shown = [n.removeprefix("Skywork/") for n in names]
    assert list(fig.layout.xaxis.ticktext) == list(fig.layout.yaxis.ticktext) == shown
    assert "Skywork/" in fig.layout.title.text
    heat = fig.data[0]
    assert (heat.zmin, heat.zmid, heat.zmax) == (-1.0, 0.0, 1.0)
    assert heat.texttemplate and "%{z" in heat.texttemplate  # every cell's τ, in the cell
    assert heat.textfont.color is None  # plotly picks a colour that contrasts with each cell
    torch.testing.assert_close(torch.tensor(heat.z), torch.tensor(matrix.tau))
    assert heat.customdata[0][1][0] == names[1] and heat.customdata[0][1][2] == 4  # hover
    # the static form: white text on the dark cells (the diagonal), black on the light ones
    static = matrix.plot(backend="matplotlib")
    colours = {t.get_text(): t.get_color() for t in static.axes[0].texts}
    assert colours["1.00"] == "white" and colours["0.33"] == "black"
    assert [t.get_text() for t in static.axes[0].get_xticklabels()] == shown
    # a prefix that only some names share stays
    mixed = kendall_tau_matrix(frame.rename(columns={names[2]: "nicolinho/QRM-Llama3.1-8B"}))
    assert list(mixed.plot().layout.xaxis.ticktext) == [*names[:2], "nicolinho/QRM-Llama3.1-8B"]
