"""Causal LMs and token classifiers seen as the reward models whose adapters convert them.

Internal (no public names): used by `reward_lens_tl.implicit` and `reward_lens_tl.judges` loading.

Implicit rewards, generative judges and PRMs are converted by the reward-model adapter of their
family: the config is viewed under the matching `*ForSequenceClassification` architecture
(`reward_view`) and the HF model through `BackboneView` (its backbone and a linear
head named `score`).

Examples:
    >>> from transformers import LlamaConfig
    >>> reward_view(LlamaConfig(architectures=["LlamaForCausalLM"])).architectures
    ['LlamaForSequenceClassification']
"""

from __future__ import annotations

import copy
from typing import Any

from torch import nn

from ..errors import UnsupportedArchitectureError

__all__: list[str] = []

#: causal-LM architecture → the reward-model architecture whose adapter converts its backbone.
CAUSAL_TO_REWARD: dict[str, str] = {
    "LlamaForCausalLM": "LlamaForSequenceClassification",
    "MistralForCausalLM": "MistralForSequenceClassification",
    "Qwen2ForCausalLM": "Qwen2ForSequenceClassification",
    "Gemma2ForCausalLM": "Gemma2ForSequenceClassification",
    "GPT2LMHeadModel": "GPT2ForSequenceClassification",
}
#: Every backbone a judge or PRM may have: the causal LMs, token classifiers (value-head PRMs)
#: and Qwen2.5-Math-PRM's layout.
TO_REWARD_ARCH: dict[str, str] = {
    **CAUSAL_TO_REWARD,
    **{
        f"{family}ForTokenClassification": f"{family}ForSequenceClassification"
        for family in ("Llama", "Mistral", "Qwen2", "Gemma2", "GPT2")
    },
    "Qwen2ForProcessRewardModel": "Qwen2ForSequenceClassification",
}


def reward_view(hf_config: Any, table: dict[str, str] = TO_REWARD_ARCH, hint: str = "") -> Any:
    """A copy of `hf_config` naming the reward-model architecture that converts its backbone.

    Args:
        hf_config: the HF model config.
        table: the architecture → reward-model architecture mapping.
        hint: text appended to the error.

    Returns:
        The renamed copy.

    Raises:
        UnsupportedArchitectureError: if the architecture is not in `table`.
    """
    arch = (getattr(hf_config, "architectures", None) or [None])[0]
    if arch not in table:
        raise UnsupportedArchitectureError(
            f"no conversion for architectures={arch!r}; supported: {', '.join(sorted(table))}"
            + (f". {hint}" if hint else "")
        )
    view = copy.deepcopy(hf_config)
    view.architectures = [table[arch]]
    return view


class BackboneView(nn.Module):
    """An HF model seen as the reward model whose adapter converts its backbone.

    It has the backbone (`model` or `transformer`, whichever it has), a linear `score` head and the
    reward-model `config` (the attributes the adapters read). Causal LMs (implicit rewards,
    judges, PRMs) are converted through it.
    """

    def __init__(self, hf_model: nn.Module, head: nn.Module, config: Any) -> None:
        """Wrap `hf_model`'s backbone with `head` as `score` and `config` as the config."""
        super().__init__()
        self.model = getattr(hf_model, "model", None)
        self.transformer = getattr(hf_model, "transformer", None)
        self.score = head
        self.config = config
