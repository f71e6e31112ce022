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

import warnings
from typing import TYPE_CHECKING

from ._lazy import lazy_exports

__version__ = "0.1.0"

# Warnings our dependencies raise while we import or build on them, which say nothing to our
# users (they cannot act on them), silenced by message and by the module they are attributed
# to, so nothing else is hidden:
# - sae_lens imports `transformer_lens.utils` (deprecated in favour of `.utilities`);
# - TransformerLens 3 deprecates `HookedTransformer`, which every model here is built on (through
#   sae_lens's `HookedSAETransformer`), on each load;
# - `tqdm.auto` (imported by sae_lens and transformers) in Jupyter without ipywidgets: our own
#   bars fall back to tqdm's text bar silently (`reward_lens_tl.progress`).
warnings.filterwarnings(
    "ignore",
    message=r"The 'utils' module has been deprecated\. Please use 'transformer_lens\.utilities'",
    category=DeprecationWarning,
    module=r"(sae_lens|importlib|reward_lens_tl)(\.|$)",
)
warnings.filterwarnings(
    "ignore",
    message=r"HookedTransformer is deprecated and will be removed in 4\.0",
    category=DeprecationWarning,
    module=r"sae_lens\.analysis\.hooked_sae_transformer$",
)
warnings.filterwarnings(
    "ignore", message=r"IProgress not found\. Please update jupyter and ipywidgets", module="tqdm"
)

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
