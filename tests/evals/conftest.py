"""Shared by the evals tests: the zoo's scalar reward model and its scored zoo benchmark, a
score-record builder, a forward counter, and an item too long for the zoo model.

The zoo fixtures `zoo_scalar`, `zoo_multi`, `zoo_task` come from `tests/conftest.py`.
"""

from __future__ import annotations

import pytest

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.evals import zoo_set
from reward_lens_tl.evals.run import score_items
from reward_lens_tl.evals.scores import ScoreRecord
from reward_lens_tl.zoo import zoo_path

__all__ = ["LONG", "PROMPT", "count_rows", "rb"]


def rb(i, c, r, subset="s"):
    return ScoreRecord("rewardbench", f"{subset}/{i}", (c,), (r,), subset=subset)


@pytest.fixture(scope="module")
def zoo_model():
    from reward_lens_tl import HookedRewardModel
    from reward_lens_tl.zoo import zoo_path

    return HookedRewardModel.from_pretrained(zoo_path("scalar"))


def count_rows(model):
    """A hook counting sequences through the embedding (forward-equivalents, in rows)."""
    count = {"rows": 0, "forwards": 0}

    def hook(act, hook):
        count["rows"] += act.shape[0]
        count["forwards"] += 1

    return count, ("hook_embed", hook)


@pytest.fixture(scope="module")
def zoo_eval(zoo_model):
    from reward_lens_tl.zoo import load_task

    task = load_task().task
    pairs = zoo_set.zoo_benchmark(task, n_per_subset=16, seed=0)
    return task, score_items(zoo_model, pairs, progress=False)


PROMPT = "how bake bread"


LONG = " ".join(["soup oven bread"] * 30)  # 90 words: over the zoo model's 64-token context


@pytest.fixture(scope="module")
def zoo():
    return HookedRewardModel.from_pretrained(zoo_path("scalar"))
