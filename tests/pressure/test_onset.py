"""Onset detection: the CUSUM's false-alarm rate against simulation, planted changes found,
gold lead times, and bad series refused."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from reward_lens_tl.errors import PressureError
from reward_lens_tl.pressure import cusum_threshold, detect_onset, onset_table
from reward_lens_tl.pressure.onset import cusum_arl0
from tests.figures import check_figure


def simulated_arl(h: float, k: float, n_runs: int = 400, horizon: int = 4000) -> float:
    """Mean run length to the first alarm of a one-sided CUSUM on N(0, 1) noise (plain numpy,
    independent of the detector's code)."""
    rng = np.random.default_rng(0)
    z = rng.normal(size=(n_runs, horizon))
    s = np.zeros(n_runs)
    first = np.full(n_runs, horizon)
    for t in range(horizon):
        s = np.maximum(0.0, s + z[:, t] - k)
        hit = (s > h) & (first == horizon)
        first[hit] = t + 1
    return float(first.mean())


@pytest.mark.parametrize("arl0,k", [(100.0, 0.5), (300.0, 0.5), (200.0, 1.0)])
def test_threshold_gives_the_stated_average_run_length(arl0, k):
    h = cusum_threshold(k, arl0)
    assert cusum_arl0(k, h) == pytest.approx(arl0)
    assert simulated_arl(h, k) == pytest.approx(arl0, rel=0.15)


def test_known_table_value():
    # Page's CUSUM with k = 0.5, h = 5: one-sided in-control ARL about 930 (Siegmund)
    assert cusum_arl0(0.5, 5.0) == pytest.approx(938, rel=0.01)


@pytest.mark.parametrize("direction,shift", [("increase", 2.0), ("decrease", -2.0)])
def test_planted_change_is_found_near_its_step(direction, shift):
    rng = np.random.default_rng(3)
    values = np.r_[rng.normal(0, 1, 60), rng.normal(shift, 1, 40)]
    steps = np.arange(100) * 10  # recorded every 10 steps
    onset = detect_onset(values, steps=steps, warmup=30, direction=direction)
    assert onset.fired and onset.side == direction
    assert 560 <= onset.onset_step <= 620
    assert onset.onset_step <= onset.alarm_step <= 700
    both = detect_onset(values, steps=steps, warmup=30, direction="both")
    assert both.side == direction and both.alarm_step >= onset.alarm_step
    wrong = "decrease" if direction == "increase" else "increase"
    assert not detect_onset(values, steps=steps, warmup=30, direction=wrong).fired


def test_no_alarm_on_noise_at_the_stated_rate():
    fired = [
        detect_onset(np.random.default_rng(s).normal(size=120), warmup=20, arl0=1000).fired
        for s in range(200)
    ]
    # 100 monitored points at ARL0 = 1000: about 1 - exp(-0.1) = 10% false alarms, but the
    # warm-up's estimated mean and sigma add some; far from the 100% of a mis-set threshold
    assert 0.0 < np.mean(fired) < 0.3


def test_gold_lead_time_and_series_input():
    steps = np.arange(0, 300, 10)
    hack = pd.Series(np.r_[np.zeros(12), np.linspace(0.5, 3, 18)], index=steps, name="hack")
    hack += np.random.default_rng(0).normal(0, 0.05, len(hack))
    gold = pd.Series(np.r_[np.linspace(0, 5, 20), np.linspace(5, 3, 10)], index=steps)
    onset = detect_onset(hack, warmup=8, gold=gold)
    assert onset.name == "hack"
    assert onset.gold_peak_step == 190
    assert onset.lead_time == 190 - onset.alarm_step > 0
    frame = onset.to_dataframe()
    assert frame.columns.tolist() == ["step", "value", "cusum", "alarm"]
    assert frame["alarm"].sum() == 1 and frame["cusum"].iloc[:8].isna().all()
    table = onset_table([onset])
    assert table.loc[0, "series"] == "hack" and table.loc[0, "lead_time"] == onset.lead_time
    fig = check_figure(onset.plot(), static=onset.plot(backend="matplotlib"))
    series, cusum = fig.data
    np.testing.assert_allclose(series.y, onset.values)
    np.testing.assert_allclose(cusum.y, onset.statistic)  # NaN in the warm-up
    assert list(series.x) == steps.tolist() and cusum.xaxis == "x2"
    lines = {(s.x0, s.line.color) for s in fig.layout.shapes if s.type == "line" and s.x0 == s.x1}
    assert (onset.alarm_step, "#c00000") in lines and (190, "#70ad47") in lines
    assert any(s.y0 == onset.threshold and s.yref == "y2" for s in fig.layout.shapes)
    notes = [a.text for a in fig.layout.annotations]
    assert f"alarm {onset.alarm_step}" in notes and "gold peak 190" in notes
    assert f"alarm at step {onset.alarm_step}" in fig.layout.title.text
    import matplotlib.pyplot as plt

    _, ax = plt.subplots()
    assert onset.plot(ax=ax) is ax.figure and ax.lines  # the series panel on given axes
    plt.close(ax.figure)


def test_onset_is_where_the_excursion_began():
    values = [0.0, 0.1, -0.1, 0.0, 0.05, -0.05, 0.0, 3.0, 3.0, 3.0]
    onset = detect_onset(values, warmup=6)
    assert (onset.onset_step, onset.alarm_step) == (6, 7) or onset.onset_step == 7


@pytest.mark.parametrize(
    "values,kwargs,match",
    [
        ([0.0, 1.0, float("nan"), 2.0], dict(warmup=2), "non-finite"),
        ([0.0, 1.0, 2.0], dict(warmup=5), "warmup"),
        ([0.0, 1.0, 2.0, 3.0], dict(warmup=2, steps=[0, 2, 1, 3]), "increasing"),
        ([0.0, 1.0, 2.0, 3.0], dict(warmup=2, direction="up"), "direction"),
        ([0.0, 1.0, 2.0, 3.0], dict(warmup=2, k=0.0), "k must"),
        ([0.0, 1.0, 2.0, 3.0], dict(warmup=2, arl0=0.5), "arl0"),
        ([0.0, 1.0, 2.0, 3.0], dict(warmup=2, steps=[0, 1]), "steps"),
    ],
)
def test_bad_series_are_typed_errors(values, kwargs, match):
    with pytest.raises(PressureError, match=match):
        detect_onset(values, **kwargs)


def test_constant_warmup_uses_the_sigma_floor():
    onset = detect_onset([1.0] * 10 + [1.5] * 5, warmup=10, min_sigma=0.1)
    assert onset.sigma == 0.1 and onset.fired and onset.onset_step == 10


def test_onset_reads_monitor_records_and_their_frame_and_unpacks():
    from reward_lens_tl.pressure import MonitorRecords

    rows = [(s, "x", 0.0 if s < 50 else 2.0) for s in range(0, 100, 5)]
    rows += [(s, "y", 1.0) for s in range(0, 100, 5)]
    records = MonitorRecords.from_rows(rows)
    want = detect_onset(records.series("x"), warmup=5, min_sigma=0.1)
    for given in (records, records.to_dataframe()):
        got = detect_onset(given, name="x", warmup=5, min_sigma=0.1)
        assert (got.onset_step, got.alarm_step, got.name) == (want.onset_step, want.alarm_step, "x")
    onset, alarm = detect_onset(records, name="x", warmup=5, min_sigma=0.1)
    assert (onset, alarm) == (50, 50)
    with pytest.raises(PressureError, match="name"):
        detect_onset(records.to_dataframe(), warmup=5)
    with pytest.raises(PressureError, match="no series"):
        detect_onset(records, name="z", warmup=5)
