"""The runner's exact shortcuts on TransformerLens 3.9: reused prefix, last block at the reader.

`reward_lens_tl.patching.activation` describes them: a chunk whose earliest patch is at position
`p0` computes positions `p0 ..` only, attending to the target run's cached keys and values of
`0 .. p0 - 1` (TransformerLens 3.9's frozen key-value cache), and the last block computes only
the reading token. The runner (`reward_lens_tl.patching.runner`) imports this module only for a
model that declares the prefix cache (`reward_lens_tl.capabilities.PREFIX_CACHE`); on
TransformerLens 4's bridge every chunk runs the full positions from the patched block on.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.testing import tiny_reward_model
    >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    >>> fast_last_block_ok(model), len(init_key_value_cache(model, 2).entries)
    (True, 2)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
from jaxtyping import Float
from torch import Tensor
from transformer_lens.cache.key_value_cache import (
    TransformerLensKeyValueCache,
    TransformerLensKeyValueCacheEntry,
)
from transformer_lens.utilities.architectures import POST_NORM_ARCHITECTURES

from ..fast_attention import RotatedPrefixEntry, prepend

if TYPE_CHECKING:
    from .runner import Sweep

__all__ = [
    "fast_last_block_ok",
    "forward_with_shortcuts",
    "init_key_value_cache",
    "target_keys_values",
]


def init_key_value_cache(model: Any, batch: int) -> TransformerLensKeyValueCache:
    """An empty key-value cache the target run fills (`target_keys_values` reads it).

    Args:
        model: The `HookedRewardModel`.
        batch: The rows of the target run (with the source, when it runs alongside).

    Returns:
        The cache, one entry per layer.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> len(init_key_value_cache(model, 1).entries)
        2
    """
    return TransformerLensKeyValueCache.init_cache(model.cfg, model.cfg.device, batch)


def target_keys_values(model: Any, kv: TransformerLensKeyValueCache) -> dict[str, Any]:
    """The target row's keys, values and (rotary models) rotated keys, per layer.

    Args:
        model: The `HookedRewardModel`.
        kv: The cache the target run filled (`init_key_value_cache`).

    Returns:
        `TargetState`'s `keys`, `values` and `rotated_keys` fields.

    Examples:
        >>> import torch
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> kv = init_key_value_cache(model, 1)
        >>> ids = torch.tensor([[1, 5, 6]])
        >>> _ = model(ids, attention_mask=torch.ones_like(ids), past_kv_cache=kv)
        >>> tuple(target_keys_values(model, kv)["keys"][0].shape)   # [1, pos, kv_head, d_head]
        (1, 3, 2, 32)
    """
    keys = [e.past_keys[:1] for e in kv.entries]
    rotary = model.cfg.positional_embedding_type == "rotary"  # rotate the cached keys once
    return dict(
        keys=keys,
        values=[e.past_values[:1] for e in kv.entries],
        rotated_keys=[
            b.attn.apply_rotary(k, 0, None) for b, k in zip(model.blocks, keys, strict=True)
        ]
        if rotary
        else None,
    )


def forward_with_shortcuts(
    sweep: Sweep, x: Tensor, n: int, start: int, p0: int, in_block: bool
) -> Tensor:
    """`Sweep.forward_from` with the prefix reused and the last block at the reading token.

    Args:
        sweep: The sweep (its model, target state and plan).
        x: The input of block `start` from position `p0` on (batch 1 when an in-block hook
            widens it).
        n: The variants in the chunk.
        start: The first block run.
        p0: The chunk's earliest changed position.
        in_block: Whether the patch is written by a hook inside block `start`.

    Returns:
        The pooled rewards `[n]`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching.plan import make_plan
        >>> from reward_lens_tl.patching.runner import PatchRunner, Sweep
        >>> from reward_lens_tl.testing import random_batch, tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> ids, _ = random_batch(2, [6, 6], low=6)
        >>> plan = make_plan(model, ids[0], ids[1], "resid_pre", {})
        >>> runner = PatchRunner(model, {})
        >>> [target], [values], _ = runner.target_and_source([plan])
        >>> sweep = Sweep(runner, plan, target, values, reuse_prefix=True)
        >>> x = target.block_inputs[1]
        >>> out = forward_with_shortcuts(sweep, x, 1, 1, 0, in_block=False)
        >>> bool(torch.allclose(out, torch.tensor([target.reward]), atol=1e-5))  # unpatched
        True
    """
    model = sweep.model
    last = model.cfg.n_layers - 1
    prefix = kv_prefix(sweep, p0, n, start if in_block else None) if p0 > 0 else None
    if fast_last_block_ok(model) and (start < last or not in_block):
        if start < last:
            x = model(x, start_at_layer=start, stop_at_layer=last, past_kv_cache=prefix)
        x = last_block_at_pool(sweep, x, p0) if start <= last else x[:, -1:]
        pool = torch.zeros(n, dtype=torch.long, device=x.device)
        return model(x, return_type="reward", start_at_layer=last + 1, pool_positions=pool)
    pool = torch.full((n,), sweep.pool - p0, dtype=torch.long, device=x.device)
    return model(
        x, return_type="reward", start_at_layer=start, pool_positions=pool, past_kv_cache=prefix
    )


def kv_prefix(
    sweep: Sweep, p0: int, n: int, narrow_layer: int | None
) -> TransformerLensKeyValueCache:
    """The target run's keys/values of positions `< p0`, expanded to `n` variants.

    They have batch 1 at `narrow_layer`, where the block still runs unwidened (except for the
    patched `k` or `v`, whose hook widens it).
    """
    target, site = sweep.target, sweep.plan.site
    entries: list[TransformerLensKeyValueCacheEntry] = []
    rotated: Sequence[Tensor | None] = target.rotated_keys or [None] * len(target.keys)
    for layer, (k, v, rk) in enumerate(zip(target.keys, target.values, rotated, strict=True)):
        nk = nv = n
        if layer == narrow_layer:
            nk = n if site == "k" else 1
            nv = n if site == "v" else 1
        entries.append(
            RotatedPrefixEntry(
                past_keys=k[:, :p0].expand(nk, -1, -1, -1),
                past_values=v[:, :p0].expand(nv, -1, -1, -1),
                frozen=True,
                rotated_keys=None if rk is None else rk[:, :p0].expand(nk, -1, -1, -1),
            )
        )
    mask = torch.ones(n, p0, dtype=torch.long, device=target.ids.device)
    return TransformerLensKeyValueCache(entries, mask, frozen=True)


def last_block_at_pool(sweep: Sweep, resid: Float[Tensor, "n pos d_model"], p0: int) -> Tensor:
    """The last block's output at the reading position only.

    Keys and values of the other positions are projected directly and handed to the block as a
    frozen cache.
    """
    model, target = sweep.model, sweep.target
    last = model.cfg.n_layers - 1
    block = model.blocks[last]
    n = resid.shape[0]
    before = resid[:, :-1]
    keys = target.keys[last][:, :p0].expand(n, -1, -1, -1)
    values = target.values[last][:, :p0].expand(n, -1, -1, -1)
    all_rotated = target.rotated_keys
    rotated = None if all_rotated is None else all_rotated[last][:, :p0].expand(n, -1, -1, -1)
    if before.shape[1]:
        normed = block.ln1(before)
        _, k, v = block.attn.calculate_qkv_matrices(normed[:, :1], normed, normed)
        keys, values = prepend(keys, k), prepend(values, v)
        if rotated is not None:
            rotated = prepend(rotated, block.attn.apply_rotary(k, p0, None))
    entry = RotatedPrefixEntry(keys, values, frozen=True, rotated_keys=rotated)
    return block(resid[:, -1:], past_kv_cache_entry=entry)


def fast_last_block_ok(model: Any) -> bool:
    """Whether the model's last block can run at the reading position only (exactly).

    Args:
        model: The `HookedRewardModel`.

    Returns:
        `False` for post-norm blocks, split q/k/v inputs, parallel attention and MLP, other
        position schemes, attention sinks and log-n scaling.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> fast_last_block_ok(HookedRewardModel.from_pretrained(tiny_reward_model("llama")))
        True
    """
    cfg = model.cfg
    return not (
        cfg.use_attn_in
        or cfg.use_split_qkv_input
        or cfg.parallel_attn_mlp
        or cfg.original_architecture in POST_NORM_ARCHITECTURES
        or cfg.positional_embedding_type not in ("standard", "rotary")
        or cfg.use_attention_sinks
        or cfg.use_logn_attn
    )
