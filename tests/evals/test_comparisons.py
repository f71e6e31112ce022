"""Comparisons of a scored item: every chosen response against every rejected one, except
RewardMATH's correct solution against its highest-scored wrong one; margins and failures as
hand-computed differences."""

from __future__ import annotations

import itertools

import pytest

from reward_lens_tl.data import GridItem, PreferencePair, RankedItem
from reward_lens_tl.evals.comparisons import Comparison, comparisons, item_texts
from reward_lens_tl.evals.scores import ScoreRecord


def test_an_rmbench_grid_gives_all_nine_cells_with_their_margins():
    chosen, rejected = (0.3, 1.7, -0.4), (0.9, 0.1, 1.2)
    cells = comparisons(
        "rmbench", 5, ScoreRecord("rmbench", "m/2", chosen, rejected, domain="math")
    )
    expected = list(itertools.product(range(3), range(3)))
    assert [(c.chosen_index, c.rejected_index) for c in cells] == expected
    assert [c.margin for c in cells] == pytest.approx(
        [chosen[i] - rejected[j] for i, j in expected]
    )
    assert [c.failed for c in cells] == [chosen[i] <= rejected[j] for i, j in expected]
    assert {(c.item_index, c.item_id, c.subset) for c in cells} == {(5, "m/2", "math")}


def test_rewardmath_compares_the_correct_solution_with_its_hardest_wrong_one():
    wrong = (-1.0, 2.5, 0.5, 2.4)
    record = ScoreRecord("rewardmath", "p/0", (2.0,), wrong, subset="s")
    (only,) = comparisons("rewardmath", 0, record)
    assert only.rejected_index == wrong.index(max(wrong)) == 1
    assert only.margin == pytest.approx(2.0 - max(wrong)) and only.failed


def test_a_pair_a_tie_and_nan_margins():
    pair = ScoreRecord("rewardbench", "s/0", (1.25,), (0.5,), subset="s")
    (c,) = comparisons("rewardbench", 3, pair)
    assert (c.margin, c.failed, c.subset) == (0.75, False, "s")
    assert Comparison(0, "t", 0, 0, 1.0, 1.0).failed  # a tie fails
    assert Comparison(0, "t", 0, 0, float("inf"), float("inf")).failed  # inf - inf is nan


def test_item_texts_of_every_kind_of_item():
    assert item_texts(PreferencePair("p", "c", "r")) == ("p", ("c",), ("r",))
    assert item_texts(RankedItem("p", correct="c", wrong=("x", "y"))) == ("p", ("c",), ("x", "y"))
    grid = GridItem("p", chosen=("a", "b", "c"), rejected=("x", "y", "z"))
    assert item_texts(grid) == ("p", ("a", "b", "c"), ("x", "y", "z"))
