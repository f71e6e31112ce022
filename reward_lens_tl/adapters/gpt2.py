"""Adapter for `GPT2ForSequenceClassification` (LayerNorm, learned absolute positions).

Internal (no public names): registered by `reward_lens_tl.adapters` (see `adapter_for`).
"""

from __future__ import annotations

import types
from typing import Any

import torch
from transformer_lens import HookedTransformerConfig
from transformer_lens.pretrained.weight_conversions import convert_gpt2_weights

from .base import ConversionOptions, RewardModelAdapter, tl_device
from .decoders import context_length

__all__: list[str] = []


class GPT2Adapter(RewardModelAdapter):
    """GPT-2 reward models.

    Under left padding TL counts absolute positions from each row's
    first real token (from the attention mask), so a left-padded batch scores like each row
    alone; HF GPT-2 fed the same batch without `position_ids` counts from column 0 and does
    not (measured: 0.40 reward difference). Compare with HF one row at a time, or pass HF
    `position_ids = (mask.cumsum(-1) - 1).clamp(min=0)`.
    """

    architectures = ("GPT2ForSequenceClassification",)

    def tl_config(
        self, hf_config: Any, options: ConversionOptions, n_objectives: int = 1
    ) -> HookedTransformerConfig:
        """The TransformerLens config of the GPT-2 backbone."""
        d = hf_config.n_embd
        return HookedTransformerConfig(
            d_model=d,
            d_head=d // hf_config.n_head,
            n_heads=hf_config.n_head,
            d_mlp=hf_config.n_inner or 4 * d,
            n_layers=hf_config.n_layer,
            n_ctx=context_length(hf_config, options),
            eps=hf_config.layer_norm_epsilon,
            d_vocab=hf_config.vocab_size,
            d_vocab_out=n_objectives,
            act_fn=hf_config.activation_function,
            use_attn_scale=getattr(hf_config, "scale_attn_weights", True),
            scale_attn_by_inverse_layer_idx=hf_config.scale_attn_by_inverse_layer_idx,
            normalization_type="LN",
            positional_embedding_type="standard",
            default_prepend_bos=False,
            tokenizer_prepends_bos=False,
            original_architecture="GPT2LMHeadModel",
            init_weights=False,
            dtype=torch.float32,
            device=tl_device(options),
        )

    def backbone_state_dict(self, hf_model, cfg):
        """The backbone's weights through TL's GPT-2 converter, with `score` as the LM head."""
        shim = types.SimpleNamespace(
            transformer=hf_model.transformer, lm_head=hf_model.score, config=hf_model.config
        )
        return convert_gpt2_weights(shim, cfg)
