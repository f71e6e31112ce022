"""Typed errors of the SAE tools (all subclass :class:`~reward_lens_tl.errors.RewardLensError`).

>>> issubclass(SAEHookError, UnknownHookError), issubclass(SAESiteError, ValueError)
(True, True)
"""

from __future__ import annotations

from ..errors import RewardLensError, UnknownHookError


class SAEHookError(UnknownHookError):
    """An SAE's hook name does not exist on the model (sae_lens would only log a warning)."""


class SAESiteError(RewardLensError, ValueError):
    """An SAE is used where its site or shape does not fit the analysis (e.g. a direct
    feature attribution for an SAE that does not read the final residual stream)."""


class UnsupportedSAEError(RewardLensError, NotImplementedError):
    """An sae_lens SAE whose decoder is not linear in its latents (run-time activation
    normalisation) or that writes to a different hook (transcoders), where linearity is needed."""


class EmptyActivationsError(RewardLensError, ValueError):
    """No (non-padding) activations were produced from the input given."""
