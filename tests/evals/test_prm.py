"""RewardMATH for process reward models and judges, from the benchmark's published score files.

The files in ``../shared/data/rewardmath`` are byte-for-byte the benchmark repository's
``results/RewardMATH/{Math_Shepherd,gpt4,gpt4_pairwise}_reward.json`` (kimsh0507/
RewardMATH_official). The figures below are what its reference evaluation
(``src/evaluation/eval.py``, ``RewardMATHEvaluation``; ``src/evaluate_results.py --eval_mode
our_reward`` with ``--prm_mode`` for the PRM, ``--pairwise`` for the A/B verdicts, neither for the
1-10 grades) prints on them; each is recomputed here from the raw JSON by :func:`reference`, an
independent plain-Python/numpy reading of the reference's rules that calls none of our code, and
our API and CLI must give the same.

Against the paper (arXiv 2410.01729), as recorded in the project's reading of it
(``shared/notes/seed-papers.md``): Math-Shepherd is reported with the product of its step scores
at 17.18 % accuracy — our ``prod`` figure, 83 / 483 = 17.18 %. The paper's table itself could not
be read from this machine, so the GPT-4 judge figures are checked against the reference code only
(the notes give judges a strict accuracy of about 0-26 %, which 22.47 % fits). The GPT-4 grade file
holds 485 records, not 483: its last two repeat the two before them (the same problems and
grades); the reference counts all 485, and so do we.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from reward_lens_tl.cli import main
from reward_lens_tl.data import RankedItem, load_rewardmath_step_scores
from reward_lens_tl.errors import (
    InvalidArgumentError,
    MalformedRecordError,
    RewardLensError,
    StepScoresMismatchError,
    UnknownNameError,
)
from reward_lens_tl.evals import (
    PRM_AGGREGATES,
    StepScoreRecord,
    aggregate_steps,
    align_scores,
    read_scores,
    rewardmath_metrics,
)
from reward_lens_tl.evals.eval_result import EvalResult
from reward_lens_tl.evals.scores import ScoreRecord, ScoreSet, ScoreWriter
from tests.data.test_data import SHARED, real_data, write_json

FOLDER = SHARED / "rewardmath"
PRM_FILE = "math_shepherd_prm_scores.json"
JUDGE_FILE = "gpt4_judge_scores.json"
PAIRWISE_FILE = "gpt4_pairwise_judge_scores.json"

# (n, accuracy, mrr, accuracy_with_ties) in percent, rounded to 4 places as the CLI prints them;
# the accuracies are k / n exactly (k in the comment).
PRM_FIGURES = {
    "min": (483, 15.3209, 34.6686, 15.3209),  # 74 / 483
    "max": (483, 3.9337, 21.8233, 6.6253),  # 19 / 483; 32 with ties
    "prod": (483, 17.1843, 34.6792, 17.1843),  # 83 / 483: the paper's 17.18
    "geometric_mean": (483, 15.7350, 33.6121, 15.7350),  # 76 / 483
    "mean": (483, 15.1139, 32.7777, 15.1139),  # 73 / 483
    "mean_logit": (483, 14.6998, 31.9227, 14.6998),  # 71 / 483
    "mean_odd": (483, 9.3168, 26.3561, 9.3168),  # 45 / 483
    "last": (483, 18.2195, 38.8345, 18.2195),  # 88 / 483
}
JUDGE_FIGURES = (485, 22.4742, 44.6980, 48.4536)  # 109 / 485; 235 with ties: grades tie a lot
PAIRWISE_FIGURES = (483, 29.8137, 51.9168, 29.8137)  # 144 / 483 won all nine comparisons


# --------------------------------------------------------------------------------------------
# the reference's rules, read independently (plain Python and numpy, none of our code)


def _final_reward(steps, how):
    if how == "min":
        return min(steps)
    if how == "max":
        return max(steps)
    if how in ("prod", "geometric_mean"):
        product = 1
        for s in steps:
            product *= s
        return product if how == "prod" else product ** (1 / len(steps))
    if how == "mean":
        return sum(steps) / len(steps)
    p = np.array(steps)
    if how == "mean_logit":
        return 1 / (1 + np.exp(-np.mean(np.log(p / (1 - p)))))
    if how == "mean_odd":
        return np.maximum(0, np.mean(p / (1 - p)))
    assert how == "last"
    return steps[-1]


def _reciprocal_rank(chosen, rejected):
    """Sort descending by (score, tag) with "rej" > "cho", so a tied wrong solution comes first."""
    ranked = sorted([(s, "rej") for s in rejected] + [(chosen, "cho")], reverse=True)
    return 1 / (1 + [tag for _, tag in ranked].index("cho"))


def reference(path, how):
    """``(n, accuracy, mrr, accuracy_with_ties)`` in percent. ``how``: an aggregate name,
    ``"normal"`` (one score per solution) or ``"pairwise"``."""
    records = json.loads(path.read_text())
    acc, ties, rr = [], [], []
    for rec in records:
        if how == "pairwise":
            wins = [v == pos for v, pos in zip(rec["score"], rec["chosen_position"], strict=True)]
            chosen = [sum(wins) + 1]
            rejected = [1 if w else len(wins) + 2 for w in wins]
        else:
            final = [s if how == "normal" else _final_reward(s, how) for s in rec["score"]]
            is_correct = [ref == "human_to_GPT-4" for ref in rec["solution_reference"]]
            chosen = [f for f, c in zip(final, is_correct, strict=True) if c]
            rejected = [f for f, c in zip(final, is_correct, strict=True) if not c]
        acc.append(min(chosen) > max(rejected))
        ties.append(min(chosen) >= max(rejected))
        rr.append(_reciprocal_rank(chosen[0], rejected))
    n = len(records)
    return n, 100 * sum(acc) / n, 100 * sum(rr) / n, 100 * sum(ties) / n


def _rounded(figures):
    n, *rest = figures
    return (n, *(round(x, 4) for x in rest))


def _cli(capsys, name, *extra):
    assert main(["eval", "rewardmath", "--scores", str(FOLDER / name), "--format", "json",
                 "--n-boot", "0", *extra]) == 0  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    return out, (out["n"], out["accuracy"], out["mrr"], out["accuracy_with_ties"])


def _api(name, **kwargs):
    scores = read_scores(FOLDER / name, benchmark="rewardmath", **kwargs)
    m = rewardmath_metrics(scores, n_boot=0)
    return len(scores), m["accuracy"], m["mrr"], m["accuracy_with_ties"]


# --------------------------------------------------------------------------------------------
# the published files


@real_data
@pytest.mark.parametrize("aggregate", PRM_AGGREGATES)
def test_prm_file_every_aggregate_reproduces_the_reference(aggregate, capsys):
    independent = reference(FOLDER / PRM_FILE, aggregate)
    assert _rounded(independent) == PRM_FIGURES[aggregate]
    api = _api(PRM_FILE, prm_aggregate=aggregate)
    assert api[0] == independent[0]
    assert api[1:] == pytest.approx(independent[1:], abs=1e-9)
    out, cli = _cli(capsys, PRM_FILE, "--prm-aggregate", aggregate)
    assert cli == PRM_FIGURES[aggregate] and out["prm_aggregate"] == aggregate
    assert "by_aggregate" not in out


@real_data
def test_prm_file_without_an_aggregate_uses_prod_and_lists_all(capsys):
    out, cli = _cli(capsys, PRM_FILE)
    assert cli == PRM_FIGURES["prod"] and out["prm_aggregate"] == "prod"
    assert list(out["by_aggregate"]) == list(PRM_AGGREGATES)
    for name, (_, acc, mrr, ties) in PRM_FIGURES.items():
        assert out["by_aggregate"][name] == {
            "accuracy": acc,
            "mrr": mrr,
            "accuracy_with_ties": ties,
        }


@real_data
def test_judge_grade_file_reproduces_the_reference(capsys):
    independent = reference(FOLDER / JUDGE_FILE, "normal")
    assert _rounded(independent) == JUDGE_FIGURES
    assert _api(JUDGE_FILE)[1:] == pytest.approx(independent[1:], abs=1e-9)
    out, cli = _cli(capsys, JUDGE_FILE)
    assert cli == JUDGE_FIGURES and "prm_aggregate" not in out and "protocol" not in out
    records = json.loads((FOLDER / JUDGE_FILE).read_text())
    assert records[483:] == records[481:483]  # the two repeated records the reference counts


@real_data
def test_pairwise_file_is_scored_with_the_pairwise_rule(capsys):
    independent = reference(FOLDER / PAIRWISE_FILE, "pairwise")
    assert _rounded(independent) == PAIRWISE_FIGURES
    assert _api(PAIRWISE_FILE)[1:] == pytest.approx(independent[1:], abs=1e-9)
    out, cli = _cli(capsys, PAIRWISE_FILE)
    assert cli == PAIRWISE_FIGURES and out["protocol"] == "pairwise"
    # the rule in closed form: right iff all nine won; reciprocal rank 1 / (1 + losses); a
    # missing verdict (null, 35 of them) is a loss
    records = json.loads((FOLDER / PAIRWISE_FILE).read_text())
    losses = [sum(v != p for v, p in zip(r["score"], r["chosen_position"], strict=True))
              for r in records]  # fmt: skip
    assert 100 * np.mean([x == 0 for x in losses]) == pytest.approx(independent[1])
    assert 100 * np.mean([1 / (1 + x) for x in losses]) == pytest.approx(independent[2])


@real_data
def test_prm_scores_line_up_with_the_solutions_steps():
    """The shipped RewardMATH_direct.json holds two of the problems (0 and 399): their per-step
    scores have one score per step of every solution."""
    from reward_lens_tl.data import load_rewardmath

    items = load_rewardmath(FOLDER / "RewardMATH_direct.json")
    scores = read_scores(FOLDER / PRM_FILE, prm_aggregate="min")
    ids = {item.id for item in items}
    both = ScoreSet(tuple(r for r in scores if r.id in ids), source=scores.source)
    aligned = align_scores(both, items)
    assert aligned.missing == 0 and len(aligned) == 2
    for record, item in zip(aligned.scores, aligned.items, strict=True):
        lengths = [len(s) for s in (*record.chosen_steps, *record.rejected_steps)]
        assert lengths == [len(s) for s in item.metadata["steps"]]
    frame = load_rewardmath_step_scores(FOLDER / PRM_FILE)
    assert frame.shape == (4830, 8) and frame["n_steps"].min() >= 1


# --------------------------------------------------------------------------------------------
# aggregates on hand-made step scores: the formulas and their edge values


@pytest.mark.parametrize(
    ("aggregate", "expected"),
    [
        ("min", 0.2),
        ("max", 0.8),
        ("prod", 0.2 * 0.8 * 0.5),
        ("geometric_mean", (0.2 * 0.8 * 0.5) ** (1 / 3)),
        ("mean", 0.5),
        ("mean_logit", 1 / (1 + (0.25 * 4 * 1) ** (-1 / 3))),  # exp(mean log odds) = (Π odds)^⅓
        ("mean_odd", (0.25 + 4 + 1) / 3),
        ("last", 0.5),
    ],
)
def test_each_aggregate_formula(aggregate, expected):
    assert aggregate_steps([0.2, 0.8, 0.5], aggregate) == pytest.approx(expected, rel=1e-12)


def test_edge_probabilities_follow_the_reference():
    assert aggregate_steps([0.7, 1.0], "mean_logit") == 1.0  # logit +inf: sigmoid 1
    assert aggregate_steps([0.7, 0.0], "mean_logit") == 0.0  # logit -inf: sigmoid 0
    assert aggregate_steps([0.7, 1.0], "mean_odd") == math.inf  # infinite odds
    assert aggregate_steps([0.0, 0.5], "mean_odd") == pytest.approx(0.5)
    assert aggregate_steps([0.0, 1.0], "prod") == 0.0 and aggregate_steps([1.0], "max") == 1.0
    with pytest.raises(InvalidArgumentError, match="exactly 0 and one of exactly 1"):
        aggregate_steps([0.0, 1.0], "mean_logit")  # -inf + inf: the reference's NaN
    for name in ("mean_logit", "mean_odd"):
        with pytest.raises(InvalidArgumentError, match="outside"):
            aggregate_steps([0.5, 1.5], name)
    with pytest.raises(InvalidArgumentError, match="negative"):
        aggregate_steps([-0.5, 0.5, 0.5], "geometric_mean")
    assert aggregate_steps([-2.0, 3.0], "prod") == -6.0  # value-head scores: fine for prod
    with pytest.raises(InvalidArgumentError, match="without step scores"):
        aggregate_steps([], "min")
    with pytest.raises(UnknownNameError, match="min, max, prod, geometric_mean, mean, mean_logit"):
        aggregate_steps([0.5], "median")


def test_infinite_aggregates_rank_as_in_the_reference():
    """mean_odd of a step of exactly 1 is +inf: it beats every finite score and ties another."""
    rec = lambda i, chosen, *wrong: StepScoreRecord(  # noqa: E731
        "rewardmath", i, chosen_steps=(chosen,), rejected_steps=wrong, aggregate="mean_odd"
    )
    recs = [
        rec(0, (0.5, 1.0), (0.9, 0.9), (0.2,)),  # inf beats both: right, rank 1
        rec(1, (0.5, 1.0), (1.0,), (0.2,)),  # inf ties inf: wrong, right with ties, rank 2
        rec(2, (0.5,), (1.0,), (0.6,)),  # below inf and 1.5: rank 3
    ]
    assert recs[0].chosen == (math.inf,)
    m = rewardmath_metrics(recs, n_boot=0)
    assert m["accuracy"] == pytest.approx(100 / 3)
    assert m["accuracy_with_ties"] == pytest.approx(200 / 3)
    assert m["mrr"] == pytest.approx(100 * (1 + 1 / 2 + 1 / 3) / 3)
    failed = [c.item_id for c in EvalResult("rewardmath", ScoreSet(recs)).failures()]
    assert failed == [1, 2]  # the inf-inf tie fails although its margin is NaN


# --------------------------------------------------------------------------------------------
# bad input: typed errors naming the file, the record and the field


def _prm_record(score):
    return {"problem": "1+1?", "solution_reference": ["human_to_GPT-4", "m1", "m2"],
            "score": score}  # fmt: skip


GOOD_STEPS = [[0.9, 0.8], [0.4], [0.7, 0.1]]


@pytest.mark.parametrize(
    ("score", "field", "reason"),
    [
        ([[0.9, 0.8], [0.4]], "score", "has 2 entries but solution_reference has 3"),
        ([[0.9, 0.8], [], [0.7]], "score[1]", "is empty"),
        ([[0.9, 0.8], [0.4], [0.7, "x"]], "score[2][1]", "must be a number, got str"),
        ([[0.9, 0.8], [0.4], [0.7, None]], "score[2][1]", "must be a number"),
        ([[0.9, 0.8], 0.4, [0.7]], "score[1]", "must be a list of per-step scores, got float"),
        ([[0.9, 0.8], [0.4], [0.7, [0.1]]], "score[2][1]", "must be a number, got list"),
    ],
)
def test_malformed_step_records_name_the_record_and_field(tmp_path, score, field, reason):
    path = write_json(tmp_path / "prm_scores.json", [_prm_record(GOOD_STEPS), _prm_record(score)])
    with pytest.raises(MalformedRecordError) as err:
        read_scores(path, prm_aggregate="min")
    message = str(err.value)
    assert str(path) in message and f"record 1, field '{field}'" in message and reason in message
    with pytest.warns(UserWarning, match="skipped 1"):
        kept = read_scores(path, prm_aggregate="min", skip_bad=True)
    assert kept.ids() == [0] and kept[0].chosen == (0.8,) and kept[0].rejected == (0.4, 0.1)


def test_aggregate_that_cannot_be_computed_names_the_record(tmp_path):
    path = write_json(
        tmp_path / "prm_scores.json",
        [_prm_record(GOOD_STEPS), _prm_record([[0.9], [0.0, 1.0], [0.5]])],
    )
    assert len(read_scores(path, prm_aggregate="min")) == 2
    with pytest.raises(InvalidArgumentError) as err:
        read_scores(path, prm_aggregate="mean_logit")
    assert f"{path}: record 1: item 1, rejected solution 0: mean_logit is undefined" in str(
        err.value
    )


def test_prm_aggregate_for_other_scores_is_refused(tmp_path):
    scalar = write_json(tmp_path / "rm_scores.json", [_prm_record([1.0, 0.5, 0.2])])
    with pytest.raises(InvalidArgumentError, match="one score per response; leave it out"):
        read_scores(scalar, prm_aggregate="min")
    pairwise = write_json(
        tmp_path / "judge_scores.json",
        [{"problem": "q", "solution_reference": ["m"], "score": ["A"], "chosen_position": ["A"]}],
    )
    with pytest.raises(InvalidArgumentError, match="pairwise judge's verdicts"):
        read_scores(pairwise, prm_aggregate="prod")
    with pytest.raises(UnknownNameError, match="the aggregates are: min, max"):
        read_scores(scalar, prm_aggregate="minimum")
    # a scalar file that turns per-step part-way: its record is named, with the way out
    mixed = write_json(tmp_path / "x_scores.json", [_prm_record([1.0, 0.5, 0.2]),
                                                    _prm_record(GOOD_STEPS)])  # fmt: skip
    with pytest.raises(
        MalformedRecordError, match=r"record 1, field 'score\[0\]'.*--prm-aggregate"
    ):
        read_scores(mixed)


def test_cli_errors_are_one_line(tmp_path, capsys):
    scalar = write_json(tmp_path / "rm_scores.json", [_prm_record([1.0, 0.5, 0.2])])
    for extra, expected in [
        (["--prm-aggregate", "min"], "aggregates a process reward model's per-step scores"),
        (["--prm-aggregate", "median"], "unknown PRM aggregate 'median'; the aggregates are: min"),
    ]:
        assert main(["eval", "rewardmath", "--scores", str(scalar), *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert err.startswith("reward-lens: error: eval:") and expected in err


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"score": ["A", "C"]}, "score[1]"),
        ({"chosen_position": ["A", None]}, "chosen_position[1]"),
        ({"chosen_position": ["A"]}, "chosen_position"),
    ],
)
def test_malformed_pairwise_records(tmp_path, change, field):
    ok = {"problem": "q", "solution_reference": ["m1", "m2"], "score": ["A", None],
          "chosen_position": ["A", "B"]}  # fmt: skip
    path = write_json(tmp_path / "judge_scores.json", [ok, {**ok, **change}])
    with pytest.raises(
        MalformedRecordError, match=rf"record 1, field '{field}'".replace("[", r"\[")
    ):
        read_scores(path)
    scores = read_scores(write_json(tmp_path / "ok_scores.json", [ok]))
    # one won, one lost (no verdict): the correct solution scores 2, the wrong ones 1 and 4
    assert scores.pairwise and scores[0].chosen == (2.0,) and scores[0].rejected == (1.0, 4.0)


# --------------------------------------------------------------------------------------------
# step records in this harness's own score files, and against the data's steps


def test_step_records_round_trip_through_a_score_file(tmp_path):
    path = tmp_path / "prm.jsonl"
    recs = [
        StepScoreRecord(
            "rewardmath", i, chosen_steps=((0.9, 0.8),), rejected_steps=((0.95, 0.1 * i), (0.5,))
        )
        for i in range(3)
    ]
    with ScoreWriter(path, "rewardmath") as out:
        out.write_all(recs)
    back = read_scores(path)
    assert list(back) == recs and back.prm_aggregate == "prod"
    assert [r.chosen for r in read_scores(path, prm_aggregate="min")] == [(0.8,)] * 3
    frame = back.to_dataframe()
    assert list(frame["chosen_steps"][0][0]) == [0.9, 0.8]
    assert frame["chosen"][0] == pytest.approx([0.72])
    again = back.with_aggregate("max")
    assert [r.rejected[0] for r in again] == [0.95] * 3
    with pytest.raises(RewardLensError, match="per-step scores; these are one score"):
        ScoreSet([ScoreRecord("rewardmath", 0, (1.0,), (0.5,))]).with_aggregate("min")


def test_step_scores_must_match_the_solutions_steps(tmp_path):
    item = RankedItem("1+1?", "a\nb", ("c",), id=0,
                      metadata={"steps": (("a", "b"), ("c",))})  # fmt: skip
    good = StepScoreRecord("rewardmath", 0, chosen_steps=((0.9, 0.8),), rejected_steps=((0.2,),))
    assert align_scores(ScoreSet([good], source="s"), [item]).missing == 0
    bad = StepScoreRecord("rewardmath", 0, chosen_steps=((0.9,),), rejected_steps=((0.2,),))
    with pytest.raises(StepScoresMismatchError, match=r"record 0 \(id=0\), solution 0.*1 step"):
        align_scores(ScoreSet([bad], source="s"), [item])
