"""`reward_lens_tl.probes.distortion`: the distortion index and preference flips on pairs."""

import random

import numpy as np
import pytest

from reward_lens_tl.data import PairSet, PreferencePair
from reward_lens_tl.probes import run_probes
from reward_lens_tl.probes.zoo import zoo_probes
from tests.figures import check_figure


def test_distortion_and_flips_on_pairs(zoo_scalar, zoo_task):
    rng = random.Random(4)
    pairs = []
    for _ in range(40):
        a, b = zoo_task.response_pair(rng, 1, 8)
        hi, lo = (a, b) if a.score >= b.score else (b, a)
        pairs.append(PreferencePair(" ".join(a.prompt), " ".join(hi.response),
                                    " ".join(lo.response)))  # fmt: skip
    report = run_probes(zoo_scalar, PairSet(pairs), zoo_probes()[:2] + zoo_probes()[4:5], seed=0)
    dist = report.distortion().to_dataframe().set_index("probe")
    margins = (report.chosen_rewards - report.original_rewards).numpy()
    row = report["sycophantic_opener"]
    m = margins[list(row.example_index)]
    assert dist.loc["sycophantic_opener", "index"] == pytest.approx(
        row.deltas.mean() / m.std(ddof=1), rel=1e-6
    )
    flips = np.mean(np.sign(m - row.deltas)[m != 0] != np.sign(m)[m != 0])
    assert dist.loc["sycophantic_opener", "flip_share"] == pytest.approx(flips)
    assert report.to_dataframe().set_index("probe").loc["sycophantic_opener", "flip_rate"] == (
        pytest.approx(flips)
    )
    assert dist.loc["sycophantic_opener", "flip_share"] > 0.1
    assert dist.loc["filler_swap", "flip_share"] < 0.05
    lo, hi = dist.loc["sycophantic_opener", ["ci_low", "ci_high"]]
    assert lo > 0 and lo <= dist.loc["sycophantic_opener", "index"] <= hi
    # the figures show these numbers: one bar per probe, its CI as the error bar
    result = report.distortion()
    bars = check_figure(result.plot(), static=result.plot(backend="matplotlib")).data[0]
    np.testing.assert_allclose(bars.x, dist["index"])
    np.testing.assert_allclose(bars.x + bars.error_x.array, dist["ci_high"])
    assert list(bars.customdata)[1].startswith("sycophantic_opener")
    fig = check_figure(report.plot(), static=report.plot(backend="matplotlib"))
    bars = fig.data[0]
    frame = report.to_dataframe()
    np.testing.assert_allclose(bars.x, frame["mean_delta"])
    np.testing.assert_allclose(bars.x - bars.error_x.arrayminus, frame["ci_low"])
    flagged = [c == "#c00000" for c in bars.marker.color]
    assert flagged == frame["flagged"].tolist()
    assert f"{sum(flagged)} of 3 flagged" in fig.layout.title.text
