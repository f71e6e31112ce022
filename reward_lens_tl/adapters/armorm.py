"""Adapter for ArmoRM-style multi-objective heads (`LlamaForRewardModelWithGating`).

Internal (no public names): registered by `reward_lens_tl.adapters` (see `adapter_for`).

The checkpoint's remote code is never run: weights load into the local re-implementation in
`reward_lens_tl.armorm_module`, which has the same state-dict names.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from ..armorm_module import (
    ARMORM_ARCHITECTURE,
    LLAMA3_GATING_PATTERN,
    LlamaForRewardModelWithGating,
    read_positions,
)
from .base import ConversionOptions, RewardHead, linear_head
from .decoders import LlamaAdapter

__all__: list[str] = []


class ArmoRMAdapter(LlamaAdapter):
    """ArmoRM-style checkpoints: a Llama backbone with a gated multi-objective head."""

    architectures = (ARMORM_ARCHITECTURE,)
    scalar_head = False
    model_kind = "armorm"

    def model_class(self, hf_config: Any) -> type[nn.Module]:
        """The local re-implementation `LlamaForRewardModelWithGating`."""
        return LlamaForRewardModelWithGating

    def head_module(self, hf_model: nn.Module) -> nn.Linear:
        """The multi-objective `regression_layer`."""
        return linear_head(hf_model, "regression_layer")

    def reward_head(self, hf_model, options: ConversionOptions) -> RewardHead:
        """The regression head, with the config's objective names unless others are given."""
        names = options.get("objective_names") or getattr(hf_model.config, "objective_names", None)
        return super().reward_head(hf_model, ConversionOptions(objective_names=names))

    def extra_modules(self, hf_model, cfg, fold_ln: bool) -> dict[str, Any]:
        """The gate, the transform matrix and the gating token pattern.

        The gate reads the *normalised* final hidden state. When `fold_ln` folds the final
        RMSNorm weight `g` into the head, the gate's first layer absorbs it too
        (`W ← W · diag(g)`), so the gate sees exactly what it saw in HF.
        """
        gating = copy.deepcopy(hf_model.gating).float().eval()
        if fold_ln:
            g = hf_model.model.norm.weight.detach().float()
            with torch.no_grad():
                gating.layers[0].weight.mul_(g[None, :])
        for p in gating.parameters():
            p.requires_grad_(False)
        return {
            "gating": gating,
            "reward_transform_matrix": hf_model.reward_transform_matrix.detach().float().clone(),
            "gating_token_pattern": tuple(
                getattr(hf_model.config, "gating_token_pattern", LLAMA3_GATING_PATTERN)
            ),
        }

    def pool_index(self, input_ids, pad_token_id, attention_mask=None):
        """The token before the first pad (ArmoRM's own pooling rule), among the real tokens.

        With `attention_mask`, the rule is applied to each row's real tokens, so a padded row is
        read where the row alone is (the padding run after its first token is not "the first
        pad").

        Args:
            input_ids: the token ids (`[batch, pos]`).
            pad_token_id: the padding id, or `None`.
            attention_mask: `[batch, pos]`, nonzero at real tokens, or `None`.

        Returns:
            One position per row.
        """
        if pad_token_id is None:
            return super().pool_index(input_ids, None)
        return read_positions(input_ids, pad_token_id, attention_mask)

    @torch.no_grad()
    def reference_rewards(self, hf_model, input_ids, attention_mask=None):
        """The HF model's own gated `score`."""
        return hf_model(input_ids=input_ids, attention_mask=attention_mask).score
