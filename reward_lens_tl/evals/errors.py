"""The errors of the evaluation harness.

They are re-exported from `reward_lens_tl.errors` (where every error of the package is
defined, in one hierarchy under `RewardLensError`).
"""

from __future__ import annotations

from ..errors import (
    ScoreMismatchError,
    ScoreProducerMismatchError,
    StepScoresMismatchError,
    UnknownBenchmarkError,
)

__all__ = [
    "ScoreMismatchError",
    "ScoreProducerMismatchError",
    "StepScoresMismatchError",
    "UnknownBenchmarkError",
]
