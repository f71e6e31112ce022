"""Fallback adapter: any `XForSequenceClassification` whose `XForCausalLM` TL can convert.

Internal (no public names): registered by `reward_lens_tl.adapters` (see `adapter_for`).

TL's own config mapping (`convert_hf_model_config`) reads a copy of the config renamed to the
causal-LM architecture from a temporary local directory (never the hub); the weights go through
TL's converter for that architecture with a stand-in whose LM head is the reward head. Because
these families are not individually tested here, models loaded through this adapter are checked
against the HF model on random tokens at load time (`verify`) and refused if they disagree.
"""

from __future__ import annotations

import json
import tempfile
import types
from pathlib import Path
from typing import Any

import torch
import transformer_lens.pretrained.weight_conversions as conversions
from transformer_lens import HookedTransformerConfig
from transformer_lens.loading_from_pretrained import convert_hf_model_config

from .base import ConversionOptions, RewardModelAdapter, tl_device
from .decoders import context_length

__all__: list[str] = []

#: causal-LM architecture → (TL converter name, HF attribute holding the backbone)
CAUSAL_CONVERTERS: dict[str, tuple[str, str]] = {
    "GemmaForCausalLM": ("convert_gemma_weights", "model"),
    "Qwen3ForCausalLM": ("convert_qwen3_weights", "model"),
    "PhiForCausalLM": ("convert_phi_weights", "model"),
    "Phi3ForCausalLM": ("convert_phi3_weights", "model"),
    "MixtralForCausalLM": ("convert_mixtral_weights", "model"),
    "OlmoForCausalLM": ("convert_olmo_weights", "model"),
    "Olmo2ForCausalLM": ("convert_olmo2_weights", "model"),
    "GPTNeoXForCausalLM": ("convert_neox_weights", "gpt_neox"),
    "GPTNeoForCausalLM": ("convert_neo_weights", "transformer"),
    "GPTJForCausalLM": ("convert_gptj_weights", "transformer"),
    "OPTForCausalLM": ("convert_opt_weights", "model"),
    "BloomForCausalLM": ("convert_bloom_weights", "transformer"),
}


def causal_name(seq_cls_name: str) -> str:
    """The `XForCausalLM` name of an `XForSequenceClassification` architecture."""
    return seq_cls_name.replace("ForSequenceClassification", "ForCausalLM")


class GenericAdapter(RewardModelAdapter):
    """Sequence-classification models of any family in `CAUSAL_CONVERTERS`."""

    architectures = tuple(
        name.replace("ForCausalLM", "ForSequenceClassification") for name in CAUSAL_CONVERTERS
    )
    verify_by_default = True

    def tl_config(
        self, hf_config: Any, options: ConversionOptions, n_objectives: int = 1
    ) -> HookedTransformerConfig:
        """TL's own config of the causal-LM architecture, with the reward head's outputs."""
        arch = causal_name(hf_config.architectures[0])
        with tempfile.TemporaryDirectory(prefix="rl_generic_") as tmp:
            data = hf_config.to_dict()
            data["architectures"] = [arch]
            (Path(tmp) / "config.json").write_text(json.dumps(data))
            cfg_dict = convert_hf_model_config(tmp, local_files_only=True, trust_remote_code=False)
        cfg_dict.update(
            d_vocab_out=n_objectives,
            n_ctx=context_length(hf_config, options),
            original_architecture=arch,
            default_prepend_bos=False,
            init_weights=False,
            dtype=torch.float32,
            device=tl_device(options),
        )
        cfg_dict.pop("trust_remote_code", None)
        cfg_dict.pop("tokenizer_name", None)
        known = set(HookedTransformerConfig.__dataclass_fields__)
        return HookedTransformerConfig(**{k: v for k, v in cfg_dict.items() if k in known})

    def backbone_state_dict(self, hf_model, cfg):
        """The weights through TL's converter, with the reward head as the LM head."""
        converter_name, attr = CAUSAL_CONVERTERS[cfg.original_architecture]
        head = self.head_module(hf_model)
        shim = types.SimpleNamespace(
            config=hf_model.config, lm_head=head, embed_out=head, **{attr: getattr(hf_model, attr)}
        )
        return getattr(conversions, converter_name)(shim, cfg)
