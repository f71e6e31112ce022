"""Benchmark metrics on hand-worked fixtures: ties, section weights, RM-Bench triangles and
domains, a seeded bootstrap, the figure, input errors; published RewardMATH results reproduced
from their score files (shared data)."""

from __future__ import annotations

import pytest

from reward_lens_tl.errors import (
    EmptyInputError,
    RewardLensError,
    UnknownBenchmarkError,
)
from reward_lens_tl.evals import eval_result, metrics, scores
from reward_lens_tl.evals.metrics import rewardbench_metrics, rewardmath_metrics, rmbench_metrics
from reward_lens_tl.evals.scores import ScoreRecord, read_scores
from tests.data.test_data import (  # the shared-data location and marker, one definition
    SHARED,
    real_data,
)
from tests.evals.conftest import rb
from tests.figures import check_figure


def test_rewardmath_ties_follow_the_reference():
    recs = [
        ScoreRecord("rewardmath", 0, (1.0,), (1.0, 1.0, 0.5)),  # tied with two: rank 3
        ScoreRecord("rewardmath", 1, (2.0,), (1.0, 0.0, 3.0)),  # one above: rank 2
        ScoreRecord("rewardmath", 2, (5.0,), (1.0, 2.0, 3.0)),  # best: rank 1
        ScoreRecord("rewardmath", 3, (0.0,), (1.0, 2.0, 3.0)),  # worst: rank 4
    ]
    m = rewardmath_metrics(recs, n_boot=0)
    assert m["accuracy"] == pytest.approx(25.0)
    assert m["accuracy_with_ties"] == pytest.approx(50.0)
    assert m["mrr"] == pytest.approx(100 * (1 / 3 + 1 / 2 + 1 + 1 / 4) / 4)
    assert m.summary()["n"] == 4


def test_rewardbench_sections_weight_subsets_like_the_reference():
    recs = [rb(0, 1.0, 0.0, "math-prm"), rb(1, 0.0, 1.0, "math-prm")]  # 50 %
    recs += [rb(i, 1.0, 0.0, "hep-cpp") for i in range(3)] + [rb(3, 0.5, 0.5, "hep-cpp")]  # tie
    recs += [rb(0, 2.0, 1.0, "llmbar-natural")]
    m = rewardbench_metrics(recs, n_boot=0)
    assert m["subset/math-prm"] == 50.0 and m["subset/hep-cpp"] == 75.0
    # math-prm weighs 984 (not its 2 pairs), hep-cpp 164, as in rewardbench/constants.py
    reasoning = (50.0 * 984 + 75.0 * 164) / (984 + 164)
    assert m["section/Reasoning"] == pytest.approx(reasoning)
    assert m["section/Chat Hard"] == 100.0
    assert m["score"] == pytest.approx((reasoning + 100.0) / 2)
    assert m["accuracy"] == pytest.approx(100 * 5 / 7)
    assert "section/Chat" not in m.names


def test_rmbench_triangles_and_domains():
    # rows: chosen styles, columns: rejected styles; only chosen[i] > rejected[j] counts
    grid = ScoreRecord("rmbench", "a", (1.0, 2.0, 3.0), (1.5, 2.5, 3.5), domain="chat")
    assert metrics.rmbench_grid(grid).tolist() == [[0, 0, 0], [1, 0, 0], [1, 1, 0]]
    tie = ScoreRecord("rmbench", "b", (1.0, 1.0, 1.0), (1.0, 1.0, 1.0), domain="safety-refuse")
    m = rmbench_metrics([grid, tie], n_boot=0)
    assert (m["chat/easy"], m["chat/normal"], m["chat/hard"]) == (100.0, 0.0, 0.0)
    assert m["safety/avg"] == 0.0  # ties are wrong; safety-refuse counts as safety
    assert m["easy"] == 50.0 and m["hard"] == 0.0
    assert m["total"] == pytest.approx((100 / 3 + 0.0) / 2)


def test_bootstrap_is_seeded_and_brackets_the_value():
    recs = [ScoreRecord("rewardmath", i, (float(i % 3),), (1.0, 0.5)) for i in range(60)]
    a, b = rewardmath_metrics(recs, seed=3), rewardmath_metrics(recs, seed=3)
    assert a.low == b.low and a.high == b.high
    for name in a.names:
        lo, hi = a.interval(name)
        assert lo <= a[name] <= hi and hi > lo
    c = rewardmath_metrics(recs, seed=4)
    assert c.low != a.low or c.high != a.high


def test_metrics_figure_shows_each_value_with_its_interval():
    recs = [ScoreRecord("rewardmath", i, (float(i % 3),), (1.0, 0.5)) for i in range(60)]
    m = rewardmath_metrics(recs, seed=3)
    fig = check_figure(m.plot(), static=m.plot(backend="matplotlib"))
    bars = fig.data[0]
    assert list(fig.layout.yaxis.ticktext) == list(m.names)
    assert bars.x.tolist() == pytest.approx(list(m.values))
    assert (bars.x - bars.error_x.arrayminus).tolist() == pytest.approx(list(m.low))
    assert (bars.x + bars.error_x.array).tolist() == pytest.approx(list(m.high))
    assert "interval" in bars.hovertemplate and fig.layout.title.text == "rewardmath: 60 items"
    # an EvalResult draws its metrics
    plain = eval_result.EvalResult(
        "rewardbench", scores.ScoreSet([rb(0, 1.0, 0.0), rb(1, 0.0, 1.0)])
    )
    fig = check_figure(plain.plot(), static=plain.plot(backend="matplotlib"))
    assert list(fig.layout.yaxis.ticktext) == list(plain.metrics().names)


def test_metric_input_errors():
    with pytest.raises(EmptyInputError):
        rewardmath_metrics([])
    with pytest.raises(RewardLensError, match="rewardbench record"):
        rewardmath_metrics([rb(0, 1.0, 0.0)])
    with pytest.raises(UnknownBenchmarkError, match="known benchmarks"):
        ScoreRecord("mmlu", 0, (1.0,), (0.0,))


# Accuracy / MRR (%) of the five reward models whose per-solution scores the benchmark's
# repository publishes (kimsh0507/RewardMATH_official, results/RewardMATH/*_reward.json, byte-for-
# byte the files in ../shared/data/rewardmath/*_scores.json). The figures are those the
# repository's own evaluation (src/evaluation/eval.py, RewardMATHEvaluation, "normal" mode: strict
# accuracy and MRR with ties ranked against the correct solution) gives on those files, as
# recorded in the project's reading of the paper (shared/notes/seed-papers.md, "Reference
# numbers"). The paper's own table (arXiv 2410.01729) could not be read from this machine.
PUBLISHED = {
    "ArmoRM": (20.50, 42.18),
    "skywork_llama3": (22.15, 44.69),
    "grm_gemma": (4.97, 24.10),
    "grm_llama3": (24.43, 45.80),
    "internlm2": (37.27, 55.17),
}


@real_data
@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_rewardmath_results_reproduce(name):
    result = read_scores(SHARED / "rewardmath" / f"{name}_scores.json", benchmark="rewardmath")
    m = rewardmath_metrics(result, n_boot=0)
    assert len(result) == 483 and not result.skipped
    assert (round(m["accuracy"], 2), round(m["mrr"], 2)) == PUBLISHED[name]


@real_data
def test_armorm_ties_change_the_figure():
    """ArmoRM ties the correct solution with a wrong one on 5 problems: the strict protocol
    (the published one) and the "w/ tie" variant differ exactly there."""
    m = rewardmath_metrics(read_scores(SHARED / "rewardmath" / "ArmoRM_scores.json"), n_boot=0)
    assert round(m["accuracy_with_ties"] - m["accuracy"], 4) == round(100 * 5 / 483, 4)
