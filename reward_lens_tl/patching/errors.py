"""The errors of the patching package, re-exported from `reward_lens_tl.errors`.

`reward_lens_tl.errors` defines every error of the package, in one hierarchy under
`RewardLensError`.
"""

from __future__ import annotations

from ..errors import (
    AlignmentError,
    PatchingError,
    UnsupportedModelError,
)

__all__ = ["AlignmentError", "PatchingError", "UnsupportedModelError"]
