"""What a reward-model object can do beyond the backend protocol: the capabilities it declares.

Analyses written against the protocol (`HookedRewardModel` on TransformerLens 3.9, or
`reward_lens_tl.bridge.BridgeRewardModel` on TransformerLens 4) choose a speed path, or refuse,
by asking the model object, never by its type. A model declares a capability it lacks with a
class attribute set to `False`; one it does not declare counts as present (`HookedRewardModel`,
and every class built on it, has them all).

- `PREFIX_CACHE` (`supports_prefix_cache`): TransformerLens 3.9's key/value cache and
  `stop_at_layer`, which `reward_lens_tl.sweep.PrefixCache` uses to run a shared prompt once.
  Without it a sweep scores every full sequence (`reward_lens_tl.sweep.ExactScorer`).
- `BATCH_WIDENING` (`supports_batch_widening`): a hook may widen the batch inside a block (from
  one row to the patched variants; TransformerLens 3.9's blocks broadcast the rest). Without it
  `reward_lens_tl.patching`'s runner hands every chunk its rows from the block's input on.
- `TL_ATTENTION` (`supports_tl_attention`): TransformerLens 3.9's attention components
  (`calculate_qkv_matrices`, `apply_rotary`, `calculate_attention_scores`), which the AtP* QK
  fix (`reward_lens_tl.patching.atp`) recomputes attention with. Without it the QK fix is
  refused (`BridgeUnsupportedError`); plain AtP and GradDrop run.

Examples:
    >>> class Plain:
    ...     supports_prefix_cache = False
    >>> supports(Plain(), PREFIX_CACHE), supports(object(), PREFIX_CACHE)
    (False, True)
"""

from __future__ import annotations

from typing import Any

__all__ = ["BATCH_WIDENING", "PREFIX_CACHE", "TL_ATTENTION", "supports"]

#: TransformerLens 3.9's key/value cache (`reward_lens_tl.sweep.PrefixCache`'s fast path).
PREFIX_CACHE = "supports_prefix_cache"
#: A hook may widen the batch inside a block (`reward_lens_tl.patching`'s runner).
BATCH_WIDENING = "supports_batch_widening"
#: TransformerLens 3.9's attention components (the AtP* QK fix).
TL_ATTENTION = "supports_tl_attention"


def supports(model: Any, capability: str) -> bool:
    """Whether `model` has `capability` (an attribute name above; undeclared: `True`).

    Args:
        model: A reward-model object of either backend.
        capability: The capability's attribute name (e.g. `PREFIX_CACHE`).

    Returns:
        `False` only where the model declares the capability `False`.

    Examples:
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> from reward_lens_tl import HookedRewardModel
        >>> supports(HookedRewardModel.from_pretrained(tiny_reward_model("llama")), PREFIX_CACHE)
        True
    """
    return bool(getattr(model, capability, True))
