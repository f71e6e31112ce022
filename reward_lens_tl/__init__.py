"""reward-lens-tl: reward models as TransformerLens ``HookedTransformer``s.

The reward head is the unembed, so logit-lens style analyses port with a few lines changed.

>>> from reward_lens_tl import HookedRewardModel
>>> from reward_lens_tl.testing import tiny_reward_model
>>> HookedRewardModel.from_pretrained(tiny_reward_model("llama")).cfg.d_vocab_out
1
"""

from .adapters import adapter_for, register_adapter, supported_architectures
from .inputs import EncodedConversation, encode_conversation, pad_batch
from .loading import load_reward_model
from .model import HookedArmoRM, HookedRewardModel

__version__ = "0.1.0"

__all__ = [
    "EncodedConversation",
    "HookedArmoRM",
    "HookedRewardModel",
    "adapter_for",
    "encode_conversation",
    "load_reward_model",
    "pad_batch",
    "register_adapter",
    "supported_architectures",
]
