"""The errors of the implicit-reward package.

They are re-exported from `reward_lens_tl.errors` (where every error of the package is defined,
in one hierarchy under `RewardLensError`).
"""

from __future__ import annotations

from ..errors import (
    EmptyResponseMaskError,
    NonlinearUnembedError,
    VocabularyMismatchError,
)

__all__ = ["EmptyResponseMaskError", "NonlinearUnembedError", "VocabularyMismatchError"]
