"""The errors of the SAE tools, re-exported from `reward_lens_tl.errors`.

Every error of the package is defined there, in one hierarchy under `RewardLensError`.
"""

from __future__ import annotations

from ..errors import (
    EmptyActivationsError,
    SAEHookError,
    SAESiteError,
    UnsupportedSAEError,
)

__all__ = ["EmptyActivationsError", "SAEHookError", "SAESiteError", "UnsupportedSAEError"]
