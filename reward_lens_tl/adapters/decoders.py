"""Adapters for rotary decoder families: Llama, Mistral, Qwen2 and Gemma-2.

Internal (no public names): registered by `reward_lens_tl.adapters` (see `adapter_for`).

The TL config is built here from the HF config (TL's own `convert_hf_model_config` only knows
official hub names and `*ForCausalLM`); the weights go through TL's converters with a small
stand-in object whose `lm_head` is the reward head, which is then overwritten.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from transformer_lens import HookedTransformerConfig
from transformer_lens.pretrained.weight_conversions import (
    convert_gemma_weights,
    convert_llama_weights,
    convert_mistral_weights,
    convert_qwen2_weights,
)

from ..errors import UnsupportedArchitectureError
from .base import ConversionOptions, RewardModelAdapter

__all__: list[str] = []

#: Without an explicit `n_ctx`, contexts are capped here: TL stores rotary tables of
#: `n_ctx × d_head` per layer, which for 128k-context models costs gigabytes.
DEFAULT_MAX_CTX = 8192


def context_length(hf_config: Any, options: ConversionOptions) -> int:
    """The context length: `options["n_ctx"]`, else the model's, capped at `DEFAULT_MAX_CTX`."""
    max_pos = getattr(hf_config, "max_position_embeddings", 0) or getattr(
        hf_config, "n_positions", DEFAULT_MAX_CTX
    )
    n_ctx = options.get("n_ctx")
    if n_ctx:
        return int(n_ctx)
    return int(min(max_pos, DEFAULT_MAX_CTX))


def rope_settings(hf_config: Any) -> dict[str, Any]:
    """Rotary base and scaling; Llama-3.1 `rope_type: llama3` maps to TL's NTK-by-parts.

    Raises:
        UnsupportedArchitectureError: if the rope type is neither `default` nor `llama3`.
    """
    params = dict(getattr(hf_config, "rope_parameters", None) or {})
    legacy = getattr(hf_config, "rope_scaling", None)
    if isinstance(legacy, dict):
        params = {**legacy, **params}
    theta = params.get("rope_theta", getattr(hf_config, "rope_theta", None) or 10000.0)
    rope_type = params.get("rope_type") or params.get("type") or "default"
    out: dict[str, Any] = {"rotary_base": float(theta)}
    if rope_type == "llama3":
        out.update(
            use_NTK_by_parts_rope=True,
            NTK_original_ctx_len=int(params["original_max_position_embeddings"]),
            NTK_by_parts_factor=float(params["factor"]),
            NTK_by_parts_low_freq_factor=float(params.get("low_freq_factor", 1.0)),
            NTK_by_parts_high_freq_factor=float(params.get("high_freq_factor", 4.0)),
        )
    elif rope_type != "default":
        raise UnsupportedArchitectureError(
            f"rope_type={rope_type!r} is not supported (supported: 'default', 'llama3'); "
            "the rotary tables would differ from the checkpoint's"
        )
    return out


def attention_layout(hf_config: Any, n_layers: int) -> dict[str, Any]:
    """Sliding-window layers (`layer_types` or a global `sliding_window`) → TL local attn.

    Raises:
        UnsupportedArchitectureError: if there are sliding-window layers but no window size.
    """
    window = getattr(hf_config, "sliding_window", None)
    layer_types = getattr(hf_config, "layer_types", None)
    if layer_types is not None:
        kinds = ["local" if t == "sliding_attention" else "global" for t in layer_types]
    elif window is not None:
        kinds = ["local"] * n_layers
    else:
        kinds = ["global"] * n_layers
    if "local" not in kinds:
        return {}
    if window is None:
        raise UnsupportedArchitectureError(
            "the config has sliding-window layers (layer_types) but no sliding_window size"
        )
    return {"use_local_attn": True, "window_size": int(window), "attn_types": kinds}


def rotary_decoder_config(
    hf_config: Any, options: ConversionOptions, n_objectives: int, **overrides: Any
) -> HookedTransformerConfig:
    """The TransformerLens config of a Llama-like rotary decoder (`overrides` applied last)."""
    n_heads = hf_config.num_attention_heads
    head_dim = getattr(hf_config, "head_dim", None) or hf_config.hidden_size // n_heads
    n_kv = getattr(hf_config, "num_key_value_heads", None) or n_heads
    cfg: dict[str, Any] = dict(
        d_model=hf_config.hidden_size,
        d_head=head_dim,
        n_heads=n_heads,
        n_key_value_heads=n_kv if n_kv != n_heads else None,
        d_mlp=hf_config.intermediate_size,
        n_layers=hf_config.num_hidden_layers,
        n_ctx=context_length(hf_config, options),
        eps=hf_config.rms_norm_eps,
        d_vocab=hf_config.vocab_size,
        d_vocab_out=n_objectives,
        act_fn=getattr(hf_config, "hidden_act", "silu"),
        normalization_type="RMS",
        positional_embedding_type="rotary",
        rotary_dim=head_dim,
        rotary_adjacent_pairs=False,
        final_rms=True,
        gated_mlp=True,
        use_attn_scale=True,
        default_prepend_bos=False,
        tokenizer_prepends_bos=False,
        original_architecture=hf_config.architectures[0],
        init_weights=False,
        dtype=torch.float32,
        device=options.get("device"),
    )
    cfg.update(rope_settings(hf_config))
    cfg.update(attention_layout(hf_config, hf_config.num_hidden_layers))
    cfg.update(overrides)
    return HookedTransformerConfig(**cfg)


def causal_stand_in(hf_model: nn.Module, head: nn.Module) -> types.SimpleNamespace:
    """What TL's converters read: `.model` (the backbone), `.lm_head` and `.config`."""
    return types.SimpleNamespace(model=hf_model.model, lm_head=head, config=hf_model.config)


def add_attention_biases(
    sd: dict[str, Tensor], hf_model: Any, cfg: HookedTransformerConfig
) -> None:
    """Llama's optional `attention_bias`: TL's Llama converter writes zeros; use the real ones.

    `hf_model`: the transformers `*ForSequenceClassification` model (its submodules are
    read by attribute, which `nn.Module` does not type).
    """
    gqa = "_" if cfg.n_key_value_heads is not None else ""
    n_kv = cfg.n_key_value_heads or cfg.n_heads
    for i, layer in enumerate(hf_model.model.layers):
        attn = layer.self_attn
        sd[f"blocks.{i}.attn.b_Q"] = attn.q_proj.bias.reshape(cfg.n_heads, cfg.d_head)
        sd[f"blocks.{i}.attn.{gqa}b_K"] = attn.k_proj.bias.reshape(n_kv, cfg.d_head)
        sd[f"blocks.{i}.attn.{gqa}b_V"] = attn.v_proj.bias.reshape(n_kv, cfg.d_head)
        sd[f"blocks.{i}.attn.b_O"] = attn.o_proj.bias


#: TL's weight converter of a family: `(stand-in model, cfg) → TL state dict`.
_Converter = Callable[[Any, HookedTransformerConfig], dict[str, Tensor]]


class LlamaAdapter(RewardModelAdapter):
    """Llama reward models (`LlamaForSequenceClassification`)."""

    architectures = ("LlamaForSequenceClassification",)
    converter: _Converter = staticmethod(convert_llama_weights)

    def check_supported(self, hf_config: Any) -> None:
        """Refuse configs TransformerLens cannot represent.

        Raises:
            UnsupportedArchitectureError: if the MLP has biases (`mlp_bias=True`).
        """
        if getattr(hf_config, "mlp_bias", False):
            raise UnsupportedArchitectureError(
                "mlp_bias=True is not supported: TransformerLens's gated MLP has no gate bias"
            )

    def tl_config(
        self, hf_config: Any, options: ConversionOptions, n_objectives: int = 1
    ) -> HookedTransformerConfig:
        """The rotary decoder's TransformerLens config."""
        self.check_supported(hf_config)
        return rotary_decoder_config(hf_config, options, n_objectives)

    def backbone_state_dict(self, hf_model, cfg):
        """The backbone's weights through TL's converter, with the attention biases if any."""
        sd = self.converter(causal_stand_in(hf_model, self.head_module(hf_model)), cfg)
        if getattr(hf_model.config, "attention_bias", False):
            add_attention_biases(sd, hf_model, cfg)
        return sd


class MistralAdapter(LlamaAdapter):
    """Mistral reward models (`MistralForSequenceClassification`)."""

    architectures = ("MistralForSequenceClassification",)
    converter = staticmethod(convert_mistral_weights)


class Qwen2Adapter(LlamaAdapter):
    """Qwen2 reward models (`Qwen2ForSequenceClassification`)."""

    architectures = ("Qwen2ForSequenceClassification",)
    converter = staticmethod(convert_qwen2_weights)

    def backbone_state_dict(self, hf_model, cfg):
        """The backbone's weights through TL's Qwen2 converter."""
        # Qwen2's converter reads its q/k/v biases itself.
        return self.converter(causal_stand_in(hf_model, self.head_module(hf_model)), cfg)


class Gemma2Adapter(LlamaAdapter):
    """Gemma-2: soft-capped attention, pre- and post-norms, scaled embeddings.

    The sequence-classification model does **not** apply `final_logit_softcapping`, so neither
    do we (setting it was measured to move the reward by 0.66 on a tiny model).
    """

    architectures = ("Gemma2ForSequenceClassification",)
    converter = staticmethod(convert_gemma_weights)

    def tl_config(
        self, hf_config: Any, options: ConversionOptions, n_objectives: int = 1
    ) -> HookedTransformerConfig:
        """The rotary decoder's config with Gemma-2's soft-capping, norms and scaling."""
        cap = getattr(hf_config, "attn_logit_softcapping", None)
        return rotary_decoder_config(
            hf_config,
            options,
            n_objectives,
            act_fn=hf_config.hidden_activation,
            attn_scale=float(hf_config.query_pre_attn_scalar) ** 0.5,
            attn_scores_soft_cap=float(cap) if cap is not None else -1.0,
            output_logits_soft_cap=-1.0,
            use_normalization_before_and_after=True,
        )

    def backbone_state_dict(self, hf_model, cfg):
        """The backbone's weights through TL's Gemma converter."""
        return self.converter(causal_stand_in(hf_model, self.head_module(hf_model)), cfg)
