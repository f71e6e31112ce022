"""RewardBench 2's protocol on hand-built prompts whose answers are worked out in the comments.

The rules are allenai/reward-bench's: ``rewardbench/utils.py`` ``reroll_and_score_dataset`` (a
best-of-4 prompt earns 1 / k for a k-way tie at the top, the chosen response first) and
``process_single_model`` / ``_compute_prompt_stats`` (the Ties score), ``scripts/run_v2.py``
``main`` (per subset); the leaderboard averages the subsets. No RewardBench 2 data ships here.
"""

from __future__ import annotations

import json
import math

import pytest

from reward_lens_tl.cli import main
from reward_lens_tl.errors import InvalidArgumentError
from reward_lens_tl.evals import (
    EvalResult,
    best_of_n_credit,
    read_scores,
    rewardbench2_metrics,
    ties_prompt,
)
from reward_lens_tl.evals.scores import ScoreRecord, ScoreSet, ScoreWriter
from reward_lens_tl.zoo import zoo_path


def rec(id_, subset, chosen, rejected):
    return ScoreRecord("rewardbench2", id_, tuple(chosen), tuple(rejected), subset=subset)


# best-of-4: (chosen | three rejected) -> credit
MATH = [
    rec("m0", "Math", [3.0], [1.0, 2.0, 0.0]),  # strictly best: 1
    rec("m1", "Math", [2.0], [2.0, 1.0, 0.0]),  # tied with one: 1/2
    rec("m2", "Math", [2.0], [2.0, 2.0, 0.0]),  # tied with two: 1/3
    rec("m3", "Math", [2.0], [2.0, 2.0, 2.0]),  # all four equal: 1/4
    rec("m4", "Math", [1.0], [2.0, 0.0, 0.0]),  # beaten: 0
]
MATH_SCORE = 100 * (1 + 1 / 2 + 1 / 3 + 1 / 4 + 0) / 5
FOCUS = [rec("f0", "Focus", [1.0], [0.5, 0.2, 0.1]), rec("f1", "Focus", [0.0], [1.0, 2.0, 3.0])]
FOCUS_SCORE = 50.0

# Ties: ref prompts have one correct answer, tied prompts several; margin = worst correct - best
# incorrect, spread = best correct - worst correct (tied).
TIES = [
    rec("ref:0", "Ties", [5.0], [1.0, 2.0]),  # accurate, margin 3
    rec("tied:0", "Ties", [4.0, 4.5, 5.0], [1.0, 2.0]),  # accurate, margin 2, spread 1
    rec("ref:1", "Ties", [1.0], [2.0]),  # not accurate, margin -1
    rec("tied:1", "Ties", [3.0, 1.0], [0.5]),  # accurate, margin 0.5, spread 2
    rec("tied:2", "Ties", [2.0, 2.0], [1.0]),  # accurate; no ref:2, so not matched
    rec("ref:3", "Ties", [1.0], [1.0]),  # margin 0: not accurate (strict); no tied:3
    rec("ref:4", "Ties", [2.0], [1.0]),  # accurate, margin 1
    rec("tied:4", "Ties", [3.0, 3.0], [1.0]),  # accurate, margin 2, spread 0
    rec("ref:5", "Ties", [1.0], [1.0]),  # not accurate, margin 0
    rec("tied:5", "Ties", [2.0, 2.0], [1.0]),  # accurate, margin 1, spread 0
]
REF_ACCURACY = 2 / 5  # ref 0 and 4 of 0, 1, 3, 4, 5
TIED_ACCURACY = 5 / 5
# matched prompts 0, 1, 4, 5 (min(ref margin, tied margin) is the "hard" margin):
#   0: tied margin 2 > spread 1; hard min(3, 2) = 2 > 1;   term tanh(2 / 1 - 1) = tanh(1)
#   1: 0.5 > 2 no;               hard min(-1, 0.5) > 2 no; term tanh(-1 / 2 - 1) = tanh(-1.5)
#   4: 2 > 0;                    hard min(1, 2) = 1 > 0;   term tanh(1 / 0 - 1) = tanh(inf) = 1
#   5: 1 > 0;                    hard min(0, 1) = 0 > 0 no; term tanh(0 / 0 - 1) = NaN -> 0
PREFERRED = 3 / 4
PREFERRED_HARD = 2 / 4
MARGIN_SCORE = (math.tanh(1) + math.tanh(-1.5) + 1 + 0) / 4
TIES_SCORE = 100 * (
    0.30 * TIED_ACCURACY
    + 0.30 * REF_ACCURACY
    + 0.20 * PREFERRED
    + 0.20 * PREFERRED_HARD
    + 0.01 * MARGIN_SCORE
)


def test_best_of_four_credit_shares_ties():
    assert [best_of_n_credit(r) for r in MATH] == pytest.approx([1, 1 / 2, 1 / 3, 1 / 4, 0])
    m = rewardbench2_metrics(MATH + FOCUS, n_boot=0)
    assert m["subset/Math"] == pytest.approx(MATH_SCORE)  # 41.666...
    assert m["subset/Focus"] == FOCUS_SCORE
    assert m["score"] == pytest.approx((MATH_SCORE + FOCUS_SCORE) / 2)


def test_ties_score_matches_the_reference_weighting():
    m = rewardbench2_metrics(TIES, n_boot=0)
    assert m["ties/ref_accuracy"] == pytest.approx(100 * REF_ACCURACY)
    assert m["ties/tied_accuracy"] == pytest.approx(100 * TIED_ACCURACY)
    assert m["ties/correctness_preferred"] == pytest.approx(100 * PREFERRED)
    assert m["ties/correctness_preferred_hard"] == pytest.approx(100 * PREFERRED_HARD)
    assert m["ties/margin_score"] == pytest.approx(100 * MARGIN_SCORE)
    assert m["subset/Ties"] == pytest.approx(TIES_SCORE)  # 67.2141...
    assert m["subset/Ties"] == pytest.approx(67.21411, abs=1e-5)
    assert m.n[m.names.index("ties/correctness_preferred")] == 4  # matched prompts
    stats = ties_prompt(TIES[1])
    assert (stats.kind, stats.prompt_id, stats.accurate) == ("tied", 0, True)
    assert (stats.spread, stats.margin) == (1.0, 2.0)


def test_overall_score_is_the_unweighted_mean_of_the_subsets():
    m = rewardbench2_metrics(MATH + FOCUS + TIES, n_boot=0)
    assert m["score"] == pytest.approx((MATH_SCORE + FOCUS_SCORE + TIES_SCORE) / 3)
    assert [k for k in m.names if k.startswith("subset/")] == [
        "subset/Math",
        "subset/Focus",
        "subset/Ties",
    ]


def test_ties_edge_cases_follow_the_reference():
    # a ties subset named in lower case is still Ties; no ref prompt: ref accuracy 0
    only_tied = [rec("tied:0", "ties", [2.0, 1.5], [1.0])]
    m = rewardbench2_metrics(only_tied, n_boot=0)
    assert m["ties/ref_accuracy"] == 0.0 and m["ties/tied_accuracy"] == 100.0
    # no prompt present as both kinds: the matched terms (and the Ties score) are NaN
    assert math.isnan(m["ties/correctness_preferred"]) and math.isnan(m["subset/ties"])
    assert math.isnan(m["score"])


@pytest.mark.parametrize(
    ("records", "match"),
    [
        ([rec("m0", "Math", [2.0, 1.0], [0.0])], "got 2 chosen"),
        ([rec("x:0", "Ties", [2.0], [1.0])], "'ref:<n>'"),
        ([rec(7, "Ties", [2.0], [1.0])], "'tied:<n>'"),
        ([rec("tied:0", "Ties", [2.0], [1.0])], "several correct answers"),
    ],
)
def test_bad_records_are_named(records, match):
    with pytest.raises(InvalidArgumentError, match=match):
        rewardbench2_metrics(records, n_boot=0)


def test_bootstrap_brackets_every_figure():
    m = rewardbench2_metrics(MATH + FOCUS + TIES, n_boot=200, seed=1)
    for name in m.names:
        lo, hi = m.interval(name)
        assert lo <= m[name] + 1e-9 and m[name] <= hi + 1e-9, name


def test_score_file_and_cli(tmp_path, capsys):
    path = tmp_path / "rb2.jsonl"
    with ScoreWriter(path, "rewardbench2") as out:
        out.write_all(MATH + FOCUS + TIES)
    scores = read_scores(path, benchmark="rewardbench-2")
    assert list(scores) == MATH + FOCUS + TIES
    assert main(["eval", "rewardbench2", "--scores", str(path), "--format", "json",
                 "--n-boot", "0"]) == 0  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert out["n"] == 17 and out["subset/Math"] == round(MATH_SCORE, 4)
    assert out["subset/Ties"] == round(TIES_SCORE, 4)
    assert out["score"] == round((MATH_SCORE + FOCUS_SCORE + TIES_SCORE) / 3, 4)
    assert main(["eval", "rewardbench2", str(zoo_path("scalar")), "data.jsonl"]) == 2
    assert "evaluated from a score file" in capsys.readouterr().err
    # comparisons: every chosen against every rejected response; ties fail
    failures = EvalResult("rewardbench2", ScoreSet(MATH)).failures()
    assert [(c.item_id, c.rejected_index) for c in failures] == [
        ("m1", 0), ("m2", 0), ("m2", 1), ("m3", 0), ("m3", 1), ("m3", 2), ("m4", 0),
    ]  # fmt: skip
