"""Typed errors of the patching package (all subclass :class:`RewardLensError`).

>>> issubclass(AlignmentError, ValueError), issubclass(AlignmentError, RewardLensError)
(True, True)
"""

from __future__ import annotations

from ..errors import RewardLensError


class AlignmentError(RewardLensError, ValueError):
    """Clean and corrupted positions cannot be aligned as requested (e.g. ``"exact"`` with two
    lengths, or ``"prefix"`` without a known prefix length)."""


class PatchingError(RewardLensError, ValueError):
    """A patching request that cannot be carried out as given (unknown site or mode, a metric
    returning the wrong shape, an undefined restored fraction, ...)."""


class UnsupportedModelError(RewardLensError, NotImplementedError):
    """A model feature a patching method does not handle (the message says which, and what
    still works)."""
