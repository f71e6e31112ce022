"""reward-lens-tl: reward models as TransformerLens `HookedTransformer`s.

The reward head is the unembed, so logit-lens style analyses port with a few lines changed.
Heavy dependencies (torch, TransformerLens, sae_lens) load on first use of a name, so
`import reward_lens_tl.data` and the CLI's `--help` stay fast. `reward_lens_tl.check(path)`
diagnoses your own reward model (`reward_lens_tl.diagnostics`).

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.testing import tiny_reward_model
    >>> HookedRewardModel.from_pretrained(tiny_reward_model("llama")).cfg.d_vocab_out
    1
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "HookedRewardModel": "model",
    "HookedArmoRM": "model",
    "load_reward_model": "model",
    "adapter_for": "adapters",
    "register_adapter": "adapters",
    "supported_architectures": "adapters",
    "EncodedConversation": "inputs",
    "encode_conversation": "inputs",
    "pad_batch": "inputs",
    "check": "diagnostics",
    "CheckReport": "diagnostics",
}

__all__ = [
    "CheckReport",
    "EncodedConversation",
    "HookedArmoRM",
    "HookedRewardModel",
    "adapter_for",
    "check",
    "encode_conversation",
    "load_reward_model",
    "pad_batch",
    "register_adapter",
    "supported_architectures",
]

if TYPE_CHECKING:  # pragma: no cover
    from .adapters import adapter_for, register_adapter, supported_architectures
    from .diagnostics import CheckReport, check
    from .inputs import EncodedConversation, encode_conversation, pad_batch
    from .model import HookedArmoRM, HookedRewardModel, load_reward_model


# Lazy exports, listed by dir() so tab completion in Jupyter finds them.
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
