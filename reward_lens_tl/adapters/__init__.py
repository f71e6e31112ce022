"""The adapter registry: one small adapter per family of HF reward models.

Examples:
    >>> from reward_lens_tl.adapters import adapter_for
    >>> from transformers import LlamaConfig
    >>> cfg = LlamaConfig(architectures=["LlamaForSequenceClassification"])
    >>> type(adapter_for(cfg)).__name__
    'LlamaAdapter'
"""

from __future__ import annotations

from typing import Any

from ..checkpoint import IMPLICIT_REWARD_HINT, is_causal_lm
from ..errors import UnsupportedArchitectureError
from ..padding import hf_last_non_pad
from .armorm import ArmoRMAdapter
from .base import ConversionOptions, RewardHead, RewardModelAdapter, tl_device
from .decoders import Gemma2Adapter, LlamaAdapter, MistralAdapter, Qwen2Adapter
from .generic import GenericAdapter
from .gpt2 import GPT2Adapter

_REGISTRY: list[RewardModelAdapter] = [
    LlamaAdapter(),
    MistralAdapter(),
    Qwen2Adapter(),
    Gemma2Adapter(),
    GPT2Adapter(),
    ArmoRMAdapter(),
    GenericAdapter(),
]


def register_adapter(adapter: RewardModelAdapter, *, first: bool = True) -> None:
    """Add an adapter; by default it is tried before the built-in ones.

    Args:
        adapter: the adapter to register.
        first: try it before the adapters already registered (else after them).

    Examples:
        A checkpoint whose config names its own architecture, with Llama's layout:

        >>> from transformers import LlamaConfig
        >>> from reward_lens_tl.adapters import adapter_for, register_adapter
        >>> from reward_lens_tl.adapters.decoders import LlamaAdapter
        >>> class MyLlamaAdapter(LlamaAdapter):
        ...     architectures = ("MyLlamaForSequenceClassification",)
        >>> mine = MyLlamaAdapter()
        >>> register_adapter(mine)
        >>> config = LlamaConfig(architectures=["MyLlamaForSequenceClassification"])
        >>> adapter_for(config) is mine
        True

        (The example then takes its adapter out again, leaving the registry as it was.)

        >>> import reward_lens_tl.adapters
        >>> reward_lens_tl.adapters._REGISTRY.remove(mine)
    """
    _REGISTRY.insert(0 if first else len(_REGISTRY), adapter)


def supported_architectures() -> list[str]:
    """The HF architectures of every registered adapter, in the order they are tried.

    Returns:
        The architecture names (`config.architectures[0]` of the checkpoints they accept).

    Examples:
        >>> from reward_lens_tl.adapters import supported_architectures
        >>> supported_architectures()[:3]
        ['LlamaForSequenceClassification', 'MistralForSequenceClassification',
         'Qwen2ForSequenceClassification']
        >>> "LlamaForRewardModelWithGating" in supported_architectures()  # ArmoRM
        True
    """
    return [arch for adapter in _REGISTRY for arch in adapter.architectures]


def adapter_for(hf_config: Any) -> RewardModelAdapter:
    """The first registered adapter that accepts `hf_config`, or a typed error listing all.

    Args:
        hf_config: the HF model config.

    Returns:
        The adapter.

    Raises:
        UnsupportedArchitectureError: if no adapter accepts the config.

    Examples:
        >>> from transformers import BertConfig, LlamaConfig
        >>> from reward_lens_tl.adapters import adapter_for
        >>> adapter_for(LlamaConfig(architectures=["LlamaForSequenceClassification"])).describe()
        'LlamaAdapter: LlamaForSequenceClassification'
        >>> from reward_lens_tl.errors import UnsupportedArchitectureError
        >>> try:
        ...     adapter_for(BertConfig(architectures=["BertForSequenceClassification"]))
        ... except UnsupportedArchitectureError as e:
        ...     print(e)
        no adapter for architectures=['BertForSequenceClassification'] (model_type='bert').
        Supported: LlamaForSequenceClassification, ...
    """
    for adapter in _REGISTRY:
        if adapter.matches(hf_config):
            return adapter
    archs = getattr(hf_config, "architectures", None)
    if archs and is_causal_lm(archs[0]):
        raise UnsupportedArchitectureError(f"{archs[0]} is {IMPLICIT_REWARD_HINT}")
    raise UnsupportedArchitectureError(
        f"no adapter for architectures={archs!r} (model_type="
        f"{getattr(hf_config, 'model_type', None)!r}). Supported: "
        f"{', '.join(supported_architectures())}. Write an adapter (see CONTRIBUTING.md) and "
        "register it with reward_lens_tl.adapters.register_adapter."
    )


__all__ = [
    "ConversionOptions",
    "RewardHead",
    "RewardModelAdapter",
    "adapter_for",
    "hf_last_non_pad",
    "register_adapter",
    "supported_architectures",
    "tl_device",
]
