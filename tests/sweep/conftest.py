"""Shared by the token-sweep tests: one prompt per zoo topic, and a small score file.

The zoo fixtures (``zoo_scalar``, ``zoo_multi``, ``zoo_task``) come from ``tests/conftest.py``.
"""

from __future__ import annotations

import random

import pytest

from reward_lens_tl.zoo.vocab import TOPICS

__all__ = ["FIXTURE_CSV", "task_prompts"]

#: Five candidates scored by three models (``c`` has no score for ``v``); the hand-computed
#: Kendall τ of each pair is in ``test_scorefile.py``.
FIXTURE_CSV = "name,model a,model/b,c\nx,1,2,1\ny,2,1,1\nz,3,4,2\nu,4,3,3\nv,5,5,\n"


@pytest.fixture(scope="module")
def task_prompts(zoo_task):
    """One prompt per topic, drawn from the zoo task's own prompt sampler."""
    rng = random.Random(0)
    return {topic: " ".join(zoo_task.sample_prompt(rng, topic)) for topic in TOPICS}
