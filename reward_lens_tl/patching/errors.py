"""The errors of the patching package, re-exported from :mod:`reward_lens_tl.errors` (where every
error of the package is defined, in one hierarchy under ``RewardLensError``)."""

from __future__ import annotations

from ..errors import (
    AlignmentError,
    PatchingError,
    UnsupportedModelError,
)

__all__ = ["AlignmentError", "PatchingError", "UnsupportedModelError"]
