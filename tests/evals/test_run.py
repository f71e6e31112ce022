"""Scoring items: one forward per distinct response, scores aligned with their data, the policy
for items that do not fit."""

from __future__ import annotations

import pytest
import torch

from reward_lens_tl.data import PreferencePair, RankedItem
from reward_lens_tl.errors import (
    EmptyInputError,
    InvalidArgumentError,
    ScoreMismatchError,
    SequenceTooLongError,
)
from reward_lens_tl.evals.run import NOT_SCORED, align_scores, score_items
from reward_lens_tl.evals.scores import ScoreRecord, ScoreWriter, read_scores
from tests.evals.conftest import LONG, PROMPT, count_rows


def test_scores_and_data_must_match(tmp_path):
    items = [RankedItem("1+1?", "2", ("3", "4"), id=0), RankedItem("2+2?", "4", ("5",), id=1)]
    path = tmp_path / "s.jsonl"
    with ScoreWriter(path, "rewardmath") as out:
        out.write(ScoreRecord("rewardmath", 0, (1.0,), (0.0, 2.0)))
    aligned = align_scores(read_scores(path), items)
    assert aligned.missing == 1 and aligned.summary(n_boot=0)["n"] == 1
    with ScoreWriter(path, "rewardmath", resume=False) as out:
        out.write(ScoreRecord("rewardmath", 7, (1.0,), (0.0,)))
    with pytest.raises(ScoreMismatchError, match=r"record 0 \(id=7\), field 'id'"):
        align_scores(read_scores(path), items)
    with ScoreWriter(path, "rewardmath", resume=False) as out:
        out.write(ScoreRecord("rewardmath", 1, (1.0,), (0.0, 2.0)))
    with pytest.raises(ScoreMismatchError, match="field 'rejected': 2 scores"):
        align_scores(read_scores(path), items)
    with pytest.raises(ScoreMismatchError, match="rewardmath scores"):
        read_scores(path, benchmark="rmbench")


def test_scoring_one_forward_per_distinct_response(zoo_model, tmp_path):
    items = [
        RankedItem("how bake bread", "soup oven", ("bomb", "rain", "soup", "the"), id=i)
        for i in range(5)
    ]
    count, hook = count_rows(zoo_model)
    out = tmp_path / "s.jsonl"
    with zoo_model.hooks(fwd_hooks=[hook]):
        result = score_items(zoo_model, items[:3], out=out, batch_size=10, progress=False)
    assert count == {"rows": 15, "forwards": 2}  # 5 responses per problem, no pair duplicates
    enc = zoo_model.encode("how bake bread", "rain")
    assert result.scores[0].rejected[1] == pytest.approx(
        float(zoo_model.rewards(torch.tensor([enc.ids]))[0].detach()), abs=1e-5
    )
    count["rows"] = count["forwards"] = 0
    with zoo_model.hooks(fwd_hooks=[hook]):
        resumed = score_items(zoo_model, items, out=out, batch_size=10, progress=False)
    assert count["rows"] == 10  # only the two new problems
    assert resumed.scores.ids() == [0, 1, 2, 3, 4] and len(read_scores(out)) == 5
    with pytest.raises(ScoreMismatchError, match="id 0"):
        score_items(zoo_model, items[3:], out=out, progress=False)


def test_score_items_policy(zoo):
    items = [PreferencePair(PROMPT, "soup oven", "bomb", subset="zoo", metadata={"id": i})
             for i in range(3)]  # fmt: skip
    items.insert(2, PreferencePair(PROMPT, LONG, "bomb", metadata={"id": "long"}))
    with pytest.raises(SequenceTooLongError, match=r"item 'long' \(position 2\)"):
        score_items(zoo, items, progress=False)
    result = score_items(zoo, items, progress=False, on_error="skip")
    assert result.scores.ids() == [0, 1, 2] and len(result.items) == 3
    (skip,) = result.scores.skipped
    assert (skip.index, skip.id, skip.field) == (2, "long", NOT_SCORED)
    assert result.summary(n_boot=0)["skipped"] == 1
    fitted = score_items(zoo, items, progress=False, truncation="right")
    assert fitted.scores.ids() == [0, 1, "long", 2]
    with pytest.raises(InvalidArgumentError, match="on_error"):
        score_items(zoo, items, progress=False, on_error="ignore")


def test_rewardmath_item_with_one_long_solution_is_skipped_whole(zoo):
    items = [
        RankedItem(PROMPT, "soup", ("bomb", LONG), id=0),
        RankedItem(PROMPT, "soup", ("bomb", "rain"), id=1),
    ]
    result = score_items(zoo, items, progress=False, on_error="skip")
    assert result.scores.ids() == [1] and result.scores.skipped[0].id == 0
    with pytest.raises(EmptyInputError, match="all 1 items were skipped"):
        score_items(zoo, items[:1], progress=False, on_error="skip")
