"""The errors of the cross-model comparison.

They are re-exported from `reward_lens_tl.errors` (where every error of
the package is defined, in one hierarchy under `RewardLensError`).
"""

from __future__ import annotations

from ..errors import (
    BackboneMismatchError,
    PreEncodedPairsError,
    UnknownModelError,
)

__all__ = ["BackboneMismatchError", "PreEncodedPairsError", "UnknownModelError"]
