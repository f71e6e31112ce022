"""The reward-model families the TransformerBridge backend boots, and their causal stand-ins.

TransformerLens 4's bridge wraps a *causal LM*: booting a sequence classifier routes it to
`*ForCausalLM` and drops the `score` head without a word, and `model_class=` a sequence
classifier fails on the missing `lm_head`. So the bridge is handed a stand-in: the family's
causal-LM class built on the meta device, whose backbone is the reward model's own (shared, not
copied) and whose `lm_head` is the reward head `score`. Its logits are then the reward at every
position (`[batch, pos, n_objectives]`), which HF's classifier computes before pooling. An
ArmoRM-style model's stand-in has its `regression_layer` as `lm_head` (the objectives at every
position); its gate is applied outside the bridge (`reward_lens_tl.bridge.gated`).

Examples:
    >>> from reward_lens_tl.bridge.families import BRIDGE_ARCHITECTURES, causal_stand_in
    >>> from reward_lens_tl.testing import tiny_reward_model
    >>> BRIDGE_ARCHITECTURES["GPT2ForSequenceClassification"]
    ('GPT2LMHeadModel', 'transformer')
    >>> stand_in = causal_stand_in(tiny_reward_model("gemma2"))
    >>> type(stand_in).__name__, stand_in.lm_head.out_features
    ('Gemma2ForCausalLM', 1)
    >>> stand_in.config.final_logit_softcapping is None  # HF's classifier never soft-caps
    True
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from ..armorm_module import ARMORM_ARCHITECTURE, LlamaForRewardModelWithGating
from ..errors import UnsupportedArchitectureError

__all__ = [
    "BRIDGE_ARCHITECTURES",
    "bridge_architecture",
    "causal_stand_in",
    "generic_stand_in",
    "reward_model_class",
]

#: HF reward-model architecture → (the causal-LM class the bridge wraps, the backbone's
#: attribute name on both). TransformerLens 4.3 has an architecture adapter for each causal LM.
BRIDGE_ARCHITECTURES: dict[str, tuple[str, str]] = {
    "LlamaForSequenceClassification": ("LlamaForCausalLM", "model"),
    "MistralForSequenceClassification": ("MistralForCausalLM", "model"),
    "Qwen2ForSequenceClassification": ("Qwen2ForCausalLM", "model"),
    "Qwen3ForSequenceClassification": ("Qwen3ForCausalLM", "model"),
    "Gemma2ForSequenceClassification": ("Gemma2ForCausalLM", "model"),
    "GPT2ForSequenceClassification": ("GPT2LMHeadModel", "transformer"),
    # ArmoRM: the regression layer is the unembed, the gate is applied outside (`gated.py`).
    ARMORM_ARCHITECTURE: ("LlamaForCausalLM", "model"),
}

#: The reward head's attribute name where it is not `score`.
_HEADS = {ARMORM_ARCHITECTURE: "regression_layer"}


def bridge_architecture(hf_config: Any, architecture: str | None = None) -> str:
    """The reward model's architecture, refused with the reason when not supported.

    Args:
        hf_config: The HF config of the reward model.
        architecture: The architecture's name (`None`: `hf_config.architectures[0]`; a model
            built in memory has none there, so pass its class's name).

    Returns:
        The architecture, a key of `BRIDGE_ARCHITECTURES`.

    Raises:
        UnsupportedArchitectureError: A causal LM, or a family this backend has no stand-in
            for.

    Examples:
        >>> from transformers import BertConfig
        >>> from reward_lens_tl.errors import UnsupportedArchitectureError
        >>> try:
        ...     bridge_architecture(BertConfig(architectures=["BertForSequenceClassification"]))
        ... except UnsupportedArchitectureError as err:
        ...     print(str(err).split(" (")[0])
        the TransformerBridge backend has no stand-in for BertForSequenceClassification
    """
    archs = getattr(hf_config, "architectures", None) or [None]
    arch = architecture or archs[0]
    if arch not in BRIDGE_ARCHITECTURES and generic_stand_in(arch) is None:
        raise UnsupportedArchitectureError(
            f"the TransformerBridge backend has no stand-in for {arch} (model_type="
            f"{getattr(hf_config, 'model_type', None)!r}). Supported: "
            f"{', '.join(BRIDGE_ARCHITECTURES)}, and any *ForSequenceClassification whose "
            "*ForCausalLM TransformerLens 4 has an adapter for (checked against HF at boot). "
            "The default backend (HookedRewardModel) may convert it "
            "(reward_lens_tl.supported_architectures())"
        )
    return arch


def generic_stand_in(architecture: str | None) -> tuple[str, str] | None:
    """`(causal LM class, backbone attribute)` of a family outside the tested table, or `None`.

    A `XForSequenceClassification` whose `XForCausalLM` transformers has and TransformerLens 4
    has an architecture adapter for: the stand-in pairs the classifier's backbone (its
    `base_model_prefix`) with that causal LM. These families are not tested one by one here, so
    `boot_reward_bridge` checks the bridge against the HF model on random tokens at boot and
    refuses it when they disagree.

    Args:
        architecture: The reward model's architecture name.

    Returns:
        The pair, or `None` when there is no such causal LM (or TransformerLens is not 4).

    Examples:
        >>> generic_stand_in("Phi3ForSequenceClassification")  # doctest: +SKIP
        ('Phi3ForCausalLM', 'model')
        >>> generic_stand_in("BertForSequenceClassification") is None
        True
    """
    suffix = "ForSequenceClassification"
    if not architecture or not architecture.endswith(suffix):
        return None
    import transformers

    causal = architecture[: -len(suffix)] + "ForCausalLM"
    classifier = getattr(transformers, architecture, None)
    if classifier is None or getattr(transformers, causal, None) is None:
        return None
    try:
        from transformer_lens.factories.architecture_adapter_factory import (
            SUPPORTED_ARCHITECTURES,
        )
    except ImportError:  # TransformerLens 3: no bridge
        return None
    if causal not in SUPPORTED_ARCHITECTURES:
        return None
    return causal, classifier.base_model_prefix


def reward_model_class(architecture: str) -> type[nn.Module]:
    """The class that loads `architecture` (this library's own module for ArmoRM's layout).

    Args:
        architecture: A key of `BRIDGE_ARCHITECTURES`.

    Returns:
        The HF model class.

    Examples:
        >>> reward_model_class("LlamaForRewardModelWithGating").__module__
        'reward_lens_tl.armorm_module'
    """
    if architecture == ARMORM_ARCHITECTURE:
        return LlamaForRewardModelWithGating
    import transformers

    return getattr(transformers, architecture)


def causal_stand_in(reward_model: nn.Module) -> nn.Module:
    """The family's causal LM sharing `reward_model`'s backbone, its reward head as `lm_head`.

    The stand-in is built on the meta device and its backbone and head are the reward model's
    own modules (nothing is copied). Its config is a copy with the causal architecture, untied
    embeddings and no final logit soft-capping (Gemma-2's classifier does not apply it).

    Args:
        reward_model: An HF `*ForSequenceClassification` of a family in `BRIDGE_ARCHITECTURES`
            (or an ArmoRM-style model: its `regression_layer` is the head; the gate is not in the
            stand-in, see `gated.py`).

    Returns:
        The stand-in, in eval mode.

    Raises:
        UnsupportedArchitectureError: The family is not supported (`bridge_architecture`).

    Examples:
        >>> import torch
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> hf = tiny_reward_model("llama")
        >>> stand_in = causal_stand_in(hf)
        >>> stand_in.model is hf.model, stand_in.lm_head is hf.score
        (True, True)
        >>> ids = torch.tensor([[1, 7, 8, 9]])
        >>> per_position = stand_in(ids).logits                 # [batch, pos, 1]
        >>> torch.equal(per_position[:, -1, 0], hf(ids).logits[:, 0])
        True
    """
    import transformers

    arch = bridge_architecture(reward_model.config, type(reward_model).__name__)
    causal_name, backbone = BRIDGE_ARCHITECTURES.get(arch) or generic_stand_in(arch) or ("", "")
    config: Any = copy.deepcopy(reward_model.config)
    config.architectures = [causal_name]
    config.tie_word_embeddings = False
    if hasattr(config, "final_logit_softcapping"):
        config.final_logit_softcapping = None
    with torch.device("meta"):
        stand_in = getattr(transformers, causal_name)(config)
    setattr(stand_in, backbone, getattr(reward_model, backbone))
    stand_in.lm_head = getattr(reward_model, _HEADS.get(arch, "score"))
    on_meta = [n for n, t in (*stand_in.named_parameters(), *stand_in.named_buffers()) if t.is_meta]
    if on_meta:  # pragma: no cover - a transformers layout this table does not know
        raise UnsupportedArchitectureError(
            f"the {causal_name} stand-in for {arch} has tensors the reward model does not "
            f"provide: {', '.join(on_meta[:5])}"
        )
    return stand_in.eval()
