"""An eval result's failures and successes split its comparisons by hand-computed margins; the
worst margins, the failures' texts and their filters follow the scores."""

from __future__ import annotations

import random

import pytest

from reward_lens_tl.data import PreferencePair
from reward_lens_tl.evals import EvalResult
from reward_lens_tl.evals.scores import ScoreRecord, ScoreSet

SUBSETS = ("a", "b", "c")


@pytest.fixture(scope="module")
def scored():
    rng = random.Random(7)
    rows = [(round(rng.uniform(-2, 2), 3), round(rng.uniform(-2, 2), 3)) for _ in range(30)]
    rows[4] = (0.5, 0.5)  # a tie fails
    recs = [
        ScoreRecord("rewardbench", f"i{k}", (c,), (r,), subset=SUBSETS[k % 3])
        for k, (c, r) in enumerate(rows)
    ]
    items = tuple(
        PreferencePair(f"p{k}", f"c{k}", f"r{k}", subset=SUBSETS[k % 3]) for k in range(30)
    )
    return rows, EvalResult("rewardbench", ScoreSet(recs), items)


def test_failures_and_successes_split_the_comparisons_by_their_margins(scored):
    rows, result = scored
    failed = [k for k, (c, r) in enumerate(rows) if c <= r]
    assert [f.item_index for f in result.failures()] == failed
    assert [s.item_index for s in result.successes()] == sorted(set(range(30)) - set(failed))
    assert [f.margin for f in result.failures()] == pytest.approx(
        [rows[k][0] - rows[k][1] for k in failed]
    )
    frame = result.to_dataframe()
    assert frame["margin"].tolist() == pytest.approx([c - r for c, r in rows])
    assert frame["failed"].tolist() == [c <= r for c, r in rows]


def test_the_worst_margins_and_the_failures_texts(scored):
    rows, result = scored
    margins = sorted((c - r, k) for k, (c, r) in enumerate(rows))
    top = result.top_k(4)
    assert [v for _, v in top] == pytest.approx([m for m, _ in margins[:4]])
    assert [label for label, _ in top] == [f"i{k}:0>0" for _, k in margins[:4]]
    failures = result.failures()
    assert [p.prompt for p in failures.pairs()] == [f"p{f.item_index}" for f in failures]
    in_b = failures.filter(subset="b")
    assert [f.item_index for f in in_b] == [f.item_index for f in failures if f.item_index % 3 == 1]
    worse = failures.filter(where=lambda c: c.margin < -1)
    assert len(worse) == sum(1 for c, r in rows if c - r < -1)
