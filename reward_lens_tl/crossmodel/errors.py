"""Typed errors of the cross-model comparison."""

from __future__ import annotations

from ..errors import RewardLensError


class BackboneMismatchError(RewardLensError, ValueError):
    """Component attributions of two models were compared, but their backbones differ (depth,
    width, heads or component labels), so no component of one corresponds to one of the other."""


class UnknownModelError(RewardLensError, KeyError):
    """A model name that is not part of the comparison."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""
