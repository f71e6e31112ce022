"""`reward_lens_tl.probes.probe_report`: a `ProbeReport` built by hand gives back its rows, skip
counts, false-positive rate, ranking and figure exactly as the hand-written numbers say."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from reward_lens_tl.errors import UnknownNameError
from reward_lens_tl.probes.outside import DeltaSummary
from reward_lens_tl.probes.probe_report import ProbeReport, ProbeRow, Skipped
from tests.figures import check_figure


def hand_report() -> ProbeReport:
    """A hack (flagged), a flagged invariance, an unflagged one, and one with too few deltas."""
    summaries = {  # n, mean, ci_low, ci_high, sd, d_z, relative, flagged
        "pad": DeltaSummary(12, 2.0, 1.5, 2.5, 0.8, 2.5, 1.0, True),
        "swap": DeltaSummary(11, -0.5, -0.9, -0.1, 0.7, -0.7, -0.25, True),
        "space": DeltaSummary(12, 0.1, -0.2, 0.4, 0.5, 0.2, 0.05, False),
    }
    rows = [
        ProbeRow(name, "hack" if name == "pad" else "invariance", tuple(range(s.n)),
                 np.full(s.n, s.mean_delta), s)
        for name, s in summaries.items()
    ]  # fmt: skip
    rows.append(ProbeRow("echo", "invariance", tuple(range(10)), np.zeros(10), None, note="few"))
    skipped = [Skipped("swap", 3, "no swap"), Skipped("echo", 10, "a"), Skipped("echo", 11, "b")]
    return ProbeReport(
        tuple(rows), tuple(skipped), 12, torch.zeros(12), None, natural_sd=2.0, settings={}
    )


def test_probe_report_by_hand():
    report = hand_report()
    assert report.probes == ("pad", "swap", "space", "echo")
    assert report.flagged() == ["pad", "swap"]
    assert report.false_positive_rate() == (1, 2)  # swap of {swap, space}; echo has no summary
    assert report.top_k(2) == [("pad", 2.0), ("swap", -0.5)]  # by |mean delta|
    assert report["echo"].n == 10 and not report["echo"].flagged
    with pytest.raises(UnknownNameError, match="no probe 'nope'"):
        report["nope"]
    frame = report.to_dataframe()
    assert frame["n"].tolist() == [12, 11, 12, 10]
    assert frame["n_skipped"].tolist() == [0, 1, 0, 2]
    assert frame["mean_delta"].tolist()[:3] == [2.0, -0.5, 0.1]
    assert math.isnan(frame["mean_delta"].iloc[3]) and frame["note"].iloc[3] == "few"
    assert frame["flagged"].tolist() == [True, True, False, False]
    assert report.skipped_frame()["reason"].tolist() == ["no swap", "a", "b"]
    fig = check_figure(report.plot(), static=report.plot(backend="matplotlib"))
    bars = fig.data[0]
    np.testing.assert_allclose(bars.x, [2.0, -0.5, 0.1])
    np.testing.assert_allclose(bars.error_x.arrayminus, [0.5, 0.4, 0.3])  # mean - ci_low
    np.testing.assert_allclose(bars.error_x.array, [0.5, 0.4, 0.3])  # ci_high - mean
    assert [c == "#c00000" for c in bars.marker.color] == [True, True, False]
    assert "2 of 3 flagged" in fig.layout.title.text
