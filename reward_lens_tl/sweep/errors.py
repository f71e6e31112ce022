"""The errors of the token-sweep package, re-exported from `reward_lens_tl.errors`.

There every error of the package is defined, in one hierarchy under `RewardLensError`.
"""

from __future__ import annotations

from ..errors import (
    ResumeFileError,
    ResumeMismatchError,
    ScoreFileError,
    UnknownCandidateError,
)

__all__ = ["ResumeFileError", "ResumeMismatchError", "ScoreFileError", "UnknownCandidateError"]
