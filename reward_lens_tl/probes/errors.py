"""The errors of the probe suite, re-exported from `reward_lens_tl.errors`.

There every error of the package is defined, in one hierarchy under `RewardLensError`.
"""

from __future__ import annotations

from ..errors import (
    ProbeError,
    ProbeFunctionError,
    ProbeNotApplicableError,
    ProbeSkip,
    TooFewExamplesError,
)

__all__ = [
    "ProbeError",
    "ProbeFunctionError",
    "ProbeNotApplicableError",
    "ProbeSkip",
    "TooFewExamplesError",
]
