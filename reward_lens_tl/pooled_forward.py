"""The last block at the reading positions only, for `return_type="reward"`.

Internal (no public names): used by `reward_lens_tl.model`.

A reward is read at one position per sequence, so the last block's queries, attention output
and MLP are needed there only; its keys and values are still needed everywhere. When nothing
can observe the difference, `HookedRewardModel.forward` runs blocks `0 .. L-2` as
usual and the last block on each row's reading position, attending to keys and values
projected from every earlier position (TransformerLens's frozen key-value cache entry, with
the mask hiding positions at and after the reading one). The reward is the same (≤ 1e-5); a
128-token forward of a 6-layer model saves ~1/7 of its matrix products.

It is used only when it is honest: nothing may observe or change a call of the last block,
`ln_final` or the unembed, or of any of their submodules (they would see one position
instead of all): no TL hook or cache entry on their hook points, no PyTorch forward / pre /
backward hook on these modules, no global module hook, no replaced hook point (a spliced
SAE), no `forward` override (`hooked` decides).
Hooks on earlier blocks or on the model itself see what they see on TL's path and keep it.
It also needs a plain pre-norm block (no parallel attention/MLP, post-norm, split q/k/v
inputs, attention sinks, log-n scaling), a global (not sliding-window) last layer, no gated
head (ArmoRM reads a prompt position too), no `start_at_layer` / key-value cache, and a
known attention mask.
"""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn
from transformer_lens.cache.key_value_cache_entry import TransformerLensKeyValueCacheEntry
from transformer_lens.utilities.architectures import POST_NORM_ARCHITECTURES

from .fast_attention import hooked

__all__: list[str] = []


def structure_allows(model) -> bool:
    """Whether the architecture of `model` allows the pooled forward.

    Args:
        model: The hooked model.

    Returns:
        Whether the pooled forward can run on it.
    """
    cfg = model.cfg
    return not (
        cfg.n_layers < 1
        or cfg.use_attn_in
        or cfg.use_split_qkv_input
        or cfg.parallel_attn_mlp
        or cfg.attn_only
        or cfg.original_architecture in POST_NORM_ARCHITECTURES
        or cfg.positional_embedding_type not in ("standard", "rotary")
        or cfg.use_attention_sinks
        or cfg.use_logn_attn
        or getattr(model, "gating", None) is not None
        or model.blocks[-1].attn.attn_type != "global"
    )


def reshaped_modules(model) -> list[nn.Module]:
    """The modules that the pooled block calls differently from TL's path.

    These are the modules (with their submodules) called on one position instead of the whole
    sequence, or with other arguments: the last block, the final norm and the head. Earlier blocks,
    `hook_reward` and the model's own call see exactly what they see on TL's path.
    """
    roots = [model.blocks[-1], getattr(model, "ln_final", None), model.unembed]
    return [root for root in roots if root is not None]


def observed(model) -> bool:
    """Whether any hook could observe or change a call the pooled block reshapes.

    TL and PyTorch hooks of every kind (forward, pre, backward, with keywords, global), replaced
    hook points such as spliced SAEs, `forward` overrides (`hooked`).
    """
    return hooked(reshaped_modules(model))


def applies(model, start_at_layer, attention_mask, kwargs) -> bool:
    """Whether `last_block_at` may replace the last block for this call."""
    side = kwargs.get("padding_side") or getattr(model.tokenizer, "padding_side", "right")
    left_padding_inferred = attention_mask is None and side == "left"
    return (
        start_at_layer is None
        and kwargs.get("past_kv_cache") is None
        and kwargs.get("stop_at_layer") is None
        and not left_padding_inferred
        and structure_allows(model)
        and not observed(model)
    )


def last_block_at(
    model,
    resid: Float[Tensor, "batch pos d_model"],
    pool: Int[Tensor, " batch"],
    attention_mask: Tensor | None,
) -> Float[Tensor, "batch 1 d_model"]:
    """The last block's output at `pool` (one position per row), from its input `resid`.

    Every position's key and value are projected; the query position is appended after them
    with a mask that keeps only the keys before it (and not padding), so its rotary position,
    which TL derives from the mask, is the one it has in the full sequence.
    """
    block = model.blocks[-1]
    batch, n_pos, _ = resid.shape
    rows = torch.arange(batch, device=resid.device)
    pool = pool.to(resid.device)
    normed = block.ln1(resid)
    _, keys, values = block.attn.calculate_qkv_matrices(normed[:, :1], normed, normed)
    keep = torch.arange(n_pos, device=resid.device)[None, :] < pool[:, None]
    if attention_mask is not None:
        keep = keep & attention_mask.to(resid.device).bool()
    mask = torch.cat([keep.long(), torch.ones(batch, 1, dtype=torch.long, device=keep.device)], 1)
    entry = TransformerLensKeyValueCacheEntry(keys, values, frozen=True)
    return block(resid[rows, pool][:, None], past_kv_cache_entry=entry, attention_mask=mask)
