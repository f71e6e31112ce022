"""An exact fast attention path: `scaled_dot_product_attention` when nobody looks at the pattern.

Internal (no public names): installed by `reward_lens_tl.model` (`set_fast_attention`).

TransformerLens computes attention as an explicit einsum: it materialises the
`[batch, head, query, key]` scores and pattern (so `hook_attn_scores` / `hook_pattern`
can see and edit them), which makes a forward pass grow quadratically in memory traffic and
fall behind HF's fused kernels at long context. A reward-model forward rarely needs the
pattern, so each converted model swaps its attention modules' class for a subclass
(`install`; per instance, never a global patch of TransformerLens) whose `forward`
uses `torch.nn.functional.scaled_dot_product_attention` (SDPA) for the
`pattern @ v` step and TL's own code for everything else:

- `hook_q`, `hook_k`, `hook_v`, `hook_rot_q`, `hook_rot_k`, `hook_z`,
  `hook_result` (with `use_attn_result`) and everything downstream fire with the same
  values (TL's path ≤ 1e-5; HF parity unchanged);
- when anything could observe or change `hook_attn_scores` or `hook_pattern` (see
  below; a full `run_with_cache` does), the scores and pattern are materialised by
  `SDPAAttentionMixin.explicit_z`: TL's steps with no extra copies of that size, the
  causal triangle written rather than computed at long context;
- TL's own path runs wherever neither can express the attention: score soft-capping
  (Gemma-2), ALiBi or relative position biases, attention sinks, log-n scaling, OLMo's QK
  norm and clipping, non-causal attention, an additive mask, or 4-bit weights;
- hooks on the attention module itself (forward, pre, with keywords) see the same calls
  and values on both paths, so they keep SDPA;
- padding (`attention_mask`, left or right), TL's frozen key-value caches (used by batched
  patching), grouped-query attention, `attn_scale` and sliding-window (local) layers are
  handled by the mask given to SDPA. Query rows with no visible key (left padding) give
  `z = 0`, as TL's NaN-to-zero pattern does;
- rows that continue one shared, cached prefix (a token sweep's candidates, a patching
  sweep's unpatched prefix: a frozen cache entry expanded along the batch), or each a leading
  part of it (`reward_lens_tl.unfolding`'s prefixes), attend to it without expanding it
  (`shared_prefix_z`).

`model.set_fast_attention(False)` switches every layer back to TL's path (e.g. to compare).

**Hooks.** Every shortcut of the forward pass (this one, the pooled last block of
`reward_lens_tl.pooled_forward`) asks one question, `hooked`: could anything
observe or change a call of the modules it skips or reshapes? Yes when there is a PyTorch
global module hook (`torch.nn.modules.module.register_module_forward_hook` and its pre /
backward siblings), or on any of those modules a forward, forward-pre or backward hook
(TL's hooks, permanent, contextual, cache or `run_with_hooks` ones, are PyTorch hooks on
`HookPoint`s), an instance `forward` override added after the model was built, a
module of a class from outside TransformerLens / `torch.nn` / this package, or a hook point
replaced by anything but a plain `HookPoint` (an SAE splice). The check reads a few
dictionaries per module and never touches the device.

Examples:
    >>> import torch
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.testing import tiny_reward_model, random_batch
    >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    >>> ids, mask = random_batch(2, [9, 6])
    >>> fast = model.rewards(ids, mask)
    >>> model.set_fast_attention(False)
    >>> bool((model.rewards(ids, mask) - fast).abs().max() < 1e-5)
    True
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

import einops
import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float
from torch import Tensor, nn
from torch.nn.modules import module as torch_module
from transformer_lens.cache.key_value_cache_entry import TransformerLensKeyValueCacheEntry
from transformer_lens.components.abstract_attention import AbstractAttention
from transformer_lens.components.mlps.gated_mlp import GatedMLP
from transformer_lens.hook_points import HookPoint

__all__: list[str] = []

PATTERN_HOOKS = ("hook_attn_scores", "hook_pattern")
UNSUPPORTED_ARCHITECTURES = frozenset({"OlmoeForCausalLM", "Olmo2ForCausalLM", "Olmo3ForCausalLM"})


KNOWN_FORWARD = "_reward_lens_known_forward"  # instance ``forward``s present at install
TRUSTED_PACKAGES = ("transformer_lens", "torch.nn", "reward_lens_tl")
_TRUSTED: dict[type, bool] = {}


def global_hooks() -> bool:
    """Whether PyTorch has a global module hook: it sees every call of every module.

    Global hooks are `register_module_forward_hook` and its pre / backward siblings.
    """
    return bool(
        torch_module._global_forward_hooks
        or torch_module._global_forward_pre_hooks
        or torch_module._global_backward_hooks
        or torch_module._global_backward_pre_hooks
    )


def trusted_class(cls: type) -> bool:
    """Whether `cls` comes from TransformerLens, `torch.nn` or this package.

    A module of any other class (e.g. a user's own component or an SAE wrapper) may record or change
    what it sees.
    """
    known = _TRUSTED.get(cls)
    if known is None:
        where = getattr(cls, "__module__", None) or ""
        known = any(where == p or where.startswith(p + ".") for p in TRUSTED_PACKAGES)
        _TRUSTED[cls] = known
    return known


def attached(module: nn.Module) -> bool:
    """Whether something is attached to `module` itself.

    A forward, forward-pre or backward hook (TL's hooks, permanent or not, are PyTorch hooks on a
    `HookPoint`), an instance-level `forward` override (accelerate-style wrappers) that the model
    was not built with, or a class from outside TransformerLens / `torch.nn` / this package (a
    user's own component, an SAE wrapper).
    """
    if (
        module._forward_hooks
        or module._forward_pre_hooks
        or module._backward_hooks
        or module._backward_pre_hooks
    ):
        return True
    state = module.__dict__
    forward = state.get("forward")
    if forward is not None and forward is not state.get(KNOWN_FORWARD):
        return True
    cls = type(module)
    if cls is HookPoint:
        return bool(module.fwd_hooks or module.bwd_hooks)
    return not trusted_class(cls)


def hooked(roots: Iterable[nn.Module]) -> bool:
    """Whether any hook could observe or change a call of a module in the subtrees of `roots`.

    A global module hook, something `attached` to one of their modules, or a hook point (a `hook_*`
    child) replaced by anything other than a plain `HookPoint` (an SAE splice). Every shortcut of
    the forward pass asks this about the modules whose calls it skips or reshapes, and runs only
    when the answer is no. Cheap: a few dictionary look-ups per module, no device work.
    """
    if global_hooks():
        return True
    stack = list(roots)
    while stack:
        module = stack.pop()
        if attached(module):
            return True
        for name, child in module._modules.items():
            if child is None:
                continue
            if type(child) is not HookPoint and name.startswith("hook_"):
                return True
            stack.append(child)
    return False


def hook_points_hooked(parent: nn.Module, names: Iterable[str]) -> bool:
    """`hooked` for the hook points `names` of `parent` (also replaced ones)."""
    points = [parent._modules[name] for name in names]
    if any(type(p) is not HookPoint for p in points):
        return True
    return hooked([p for p in points if p is not None])


def config_supports_sdpa(cfg) -> bool:
    """Whether SDPA can compute this configuration's attention exactly (hooks aside)."""
    return not (
        (cfg.attn_scores_soft_cap is not None and cfg.attn_scores_soft_cap > 0)
        or cfg.positional_embedding_type in ("alibi", "relative_positional_bias")
        or cfg.use_attention_sinks
        or cfg.use_logn_attn
        or cfg.clip_qkv is not None
        or cfg.load_in_4bit
        or cfg.original_architecture in UNSUPPORTED_ARCHITECTURES
    )


@dataclass
class RotatedPrefixEntry(TransformerLensKeyValueCacheEntry):
    """A frozen key-value cache entry that also holds its keys already rotated (rotary models).

    The SDPA path rotates only the new keys instead of the whole prefix again on every call
    (patching sweeps reuse one prefix for many variants). TL's own path, taken when a hook reads the
    pattern, still uses the unrotated `past_keys`. Hooks see the same on both paths: `hook_k` the
    new keys only, `hook_rot_k` the whole rotated key sequence (prefix included), so a hook editing
    keys acts on both alike.
    """

    rotated_keys: Tensor | None = None


def prepend(prefix: Tensor, new: Tensor) -> Tensor:
    """`cat([prefix, new], 1)`.

    The prefix is often expanded along the batch (stride 0), which `torch.cat` copies slowly, so it
    is written into a new tensor instead.
    """
    out = new.new_empty((new.shape[0], prefix.shape[1] + new.shape[1], *new.shape[2:]))
    out[:, : prefix.shape[1]] = prefix
    out[:, prefix.shape[1] :] = new
    return out


_PADDING_SEEN: list = [(None, None, False)]  # [(weakref to a mask, its version, answer)]


def has_padding(attention_mask: Tensor) -> bool:
    """Whether the mask hides any position.

    Every layer of a forward gets the same mask tensor, so the answer (a device-to-host copy on
    CUDA) is kept for that tensor: one synchronisation per forward, not one per layer.
    """
    seen, version, answer = _PADDING_SEEN[0]
    if seen is not None and seen() is attention_mask and version == attention_mask._version:
        return answer
    answer = not bool(attention_mask.bool().all())
    _PADDING_SEEN[0] = (weakref.ref(attention_mask), attention_mask._version, answer)
    return answer


class SDPAAttentionMixin(AbstractAttention):
    """Mixed in front of TL's `Attention` / `GroupedQueryAttention` by `install`."""

    __slots__ = ()  # same instance layout as the TL class, so ``__class__`` can be swapped
    fast_attention: bool = True

    def uses_sdpa(self, additive_attention_mask, position_bias) -> bool:
        """Whether this call can take the SDPA path.

        Args:
            additive_attention_mask: TL's additive mask (SDPA only without one).
            position_bias: TL's position bias (SDPA only without one).

        Returns:
            Whether SDPA is used: causal attention, no pattern hook and a supported config.
        """
        return self.fast_path_applies(
            additive_attention_mask, position_bias
        ) and not hook_points_hooked(self, PATTERN_HOOKS)

    def fast_path_applies(self, additive_attention_mask, position_bias) -> bool:
        """Whether this call can leave TL's code (SDPA, or `explicit_z` for pattern hooks).

        Args:
            additive_attention_mask: TL's additive mask (none allowed).
            position_bias: TL's position bias (none allowed).

        Returns:
            Causal attention of a supported config, with neither.
        """
        return (
            self.fast_attention
            and additive_attention_mask is None
            and position_bias is None
            and (self._attention_dir_override or self.cfg.attention_dir) == "causal"
            and config_supports_sdpa(self.cfg)
        )

    def forward(
        self,
        query_input,
        key_input,
        value_input,
        past_kv_cache_entry=None,
        additive_attention_mask=None,
        attention_mask=None,
        position_bias=None,
    ):
        """TL's attention forward, through SDPA when `uses_sdpa` allows it.

        Args:
            query_input: Input of the queries.
            key_input: Input of the keys.
            value_input: Input of the values.
            past_kv_cache_entry: TL's key-value cache entry, if any.
            additive_attention_mask: TL's additive attention mask, if any.
            attention_mask: The padding mask, if any.
            position_bias: TL's position bias, if any.

        Returns:
            The attention output.
        """
        if not self.fast_path_applies(additive_attention_mask, position_bias):
            return super().forward(
                query_input,
                key_input,
                value_input,
                past_kv_cache_entry=past_kv_cache_entry,
                additive_attention_mask=additive_attention_mask,
                attention_mask=attention_mask,
                position_bias=position_bias,
            )
        q, k, v = self.calculate_qkv_matrices(query_input, key_input, value_input)
        offset = 0
        rotary = self.cfg.positional_embedding_type == "rotary"
        rotated = getattr(past_kv_cache_entry, "rotated_keys", None)
        if past_kv_cache_entry is not None:
            offset = past_kv_cache_entry.past_keys.size(1)
        pattern_seen = hook_points_hooked(self, PATTERN_HOOKS)
        if not pattern_seen and self.shares_prefix(past_kv_cache_entry, attention_mask):
            entry = cast(TransformerLensKeyValueCacheEntry, past_kv_cache_entry)
            prefix_keys = entry.past_keys
            if rotary:
                q = self.hook_rot_q(self.apply_rotary(q, offset, attention_mask))
                k = self.apply_rotary(k, offset, attention_mask)
                prefix_keys = (
                    rotated if rotated is not None else self.apply_rotary(prefix_keys[:1], 0, None)
                )
            new_mask = None if attention_mask is None else attention_mask[:, offset:]
            seen = None if attention_mask is None else attention_mask[:, :offset]
            z = shared_prefix_z(
                q,
                prefix_keys[0],
                entry.past_values[0],
                k,
                v,
                new_mask,
                1.0 / self.attn_scale,
                seen,
            )
            return self.attention_output(self.hook_z(z))
        if rotary and rotated is not None:  # only the new keys need rotating
            k = prepend(rotated, self.apply_rotary(k, offset, attention_mask))
            v = prepend(past_kv_cache_entry.past_values, v)
            q = self.hook_rot_q(self.apply_rotary(q, offset, attention_mask))
            k = self.hook_rot_k(k)
        else:
            if past_kv_cache_entry is not None:
                k, v = past_kv_cache_entry.append(k, v)
            if rotary:
                q = self.hook_rot_q(self.apply_rotary(q, offset, attention_mask))
                k = self.hook_rot_k(self.apply_rotary(k, 0, attention_mask))
        if pattern_seen:
            z = self.explicit_z(q, k, v, offset, attention_mask)
        else:
            z = self.sdpa_z(q, k, v, offset, attention_mask)
        return self.attention_output(self.hook_z(z))

    def shares_prefix(self, entry, attention_mask) -> bool:
        """Whether the cached keys are one prefix shared by every row (`shared_prefix_z`).

        A frozen cache entry whose keys and values are one row expanded along a batch of
        several (stride 0: a token sweep's prompt, a patching sweep's unpatched prefix, the
        prefixes of `reward_lens_tl.unfolding`), each row seeing a leading part of that prefix
        (its cached mask ones then zeros: no pad before a real prefix token, whose position
        would then differ from the one it was cached at), a global (not sliding-window) layer,
        and, with rotary embeddings, no hook on `hook_rot_k` (which would see the whole key
        sequence, prefix included).
        """
        if entry is None or not entry.frozen or self.attn_type != "global":
            return False
        keys, values = entry.past_keys, entry.past_values
        if keys.shape[1] == 0 or keys.shape[0] == 1 or keys.stride(0) or values.stride(0):
            return False  # (one row gains nothing: it keeps the SDPA path's exact numbers)
        if attention_mask is not None and not leading_ones(attention_mask[:, : keys.shape[1]]):
            return False
        rotary = self.cfg.positional_embedding_type == "rotary"
        return not (rotary and hook_points_hooked(self, ("hook_rot_k",)))

    def _extend_rotary_embeddings(self, new_size: int) -> None:
        """Grow the rotary tables only when they grow.

        TL rebuilds the tables whenever a call needs position `n_ctx` (the pooled last block's query
        sits one past a full row's keys), but caps the size at `n_ctx`, so it rebuilt the same
        tables on every such call; grow them only when they grow. The positions used come from the
        mask there and stay below `n_ctx`.
        """
        if new_size > self.rotary_cos.shape[0]:
            super()._extend_rotary_embeddings(new_size)

    def visible_keys(
        self, n_query: int, n_key: int, offset: int, attention_mask, device
    ) -> Bool[Tensor, "batch 1 query key"] | None:
        """TL's causal (and sliding-window) mask and the padding mask.

        A pad neither is attended to nor attends: its key column and its query row are masked
        (a pad's pattern row is all zeros, as under plain left padding, whichever real tokens
        precede it). `None` when plain causal attention with no padding is exact (SDPA's
        `is_causal`).
        """
        padded = attention_mask is not None and has_padding(attention_mask)
        if offset == 0 and n_query == n_key and self.attn_type == "global" and not padded:
            return None
        mask = self.causal_window(
            n_query, n_key, offset, attention_mask if padded else None, device
        )
        if padded:
            real = attention_mask.bool().to(device)
            mask = mask & real[:, None, None, :] & real[:, None, -n_query:, None]
        return mask

    def causal_window(
        self, n_query: int, n_key: int, offset: int, attention_mask, device
    ) -> Bool[Tensor, "batch 1 query key"]:
        """TL's causal mask, with a sliding window measured in positions, not columns.

        A row's pads may sit between its tokens (pads after the first token,
        `reward_lens_tl.padding`), so the distance between two tokens is the number of real
        tokens between them: positions counted from the mask, as the rotary and absolute
        position embeddings count them. Without a mask, or on a global layer, this is TL's mask.

        Args:
            n_query: Number of query positions (the last `n_query` key columns).
            n_key: Number of key positions (past keys included).
            offset: Position of the first query among the keys.
            attention_mask: `[batch, n_key]` padding mask, or `None`.
            device: The mask's device.

        Returns:
            `[batch or 1, 1, query, key]`, true where the query may attend.
        """
        if self.attn_type != "local" or attention_mask is None:
            return self._make_causal_mask(n_query, n_key, offset, device)
        positions = attention_mask.to(device).long().cumsum(-1)  # [batch, key]
        distance = positions[:, offset:, None] - positions[:, None, :]  # [batch, query, key]
        in_window = distance < int(cast(int, self.cfg.window_size))
        causal_only = torch.ones(n_query, n_key, dtype=torch.bool, device=device).tril(offset)
        return (causal_only[None] & in_window)[:, None]

    def apply_causal_mask(self, attn_scores, past_kv_pos_offset=0, attention_mask=None):
        """TL's causal and padding mask on the scores, padded batches as `visible_keys` masks them.

        With padding, the sliding window counts positions and a pad's query row is masked too
        (TL then zeroes its pattern row); without padding this is TL's own.

        Args:
            attn_scores: `[batch, head, query, key]` scores.
            past_kv_pos_offset: Position of the first query among the keys.
            attention_mask: `[batch, key]` padding mask, or `None`.

        Returns:
            The scores, `-inf` where a query may not attend.
        """
        if attention_mask is None or not has_padding(attention_mask):
            return super().apply_causal_mask(attn_scores, past_kv_pos_offset, attention_mask)
        n_query, n_key = attn_scores.shape[-2:]
        device = attention_mask.device
        mask = self.visible_keys(n_query, n_key, past_kv_pos_offset, attention_mask, device)
        ignore = self.IGNORE.to(device)
        return torch.where(cast(Tensor, mask), attn_scores.to(device), ignore)

    def sdpa_z(
        self,
        q: Float[Tensor, "batch query head d_head"],
        k: Float[Tensor, "batch key kv_head d_head"],
        v: Float[Tensor, "batch key kv_head d_head"],
        offset: int,
        attention_mask,
    ) -> Float[Tensor, "batch query head d_head"]:
        """Attention output `z` by `scaled_dot_product_attention`.

        Args:
            q: Queries.
            k: Keys.
            v: Values.
            offset: Position of the first query among the keys.
            attention_mask: The padding mask, if any.

        Returns:
            `z`, as TL's `hook_z` sees it.
        """
        repeat = q.shape[2] // k.shape[2]
        if repeat > 1:  # grouped-query attention, as TL expands it
            k = torch.repeat_interleave(k, dim=2, repeats=repeat)
            v = torch.repeat_interleave(v, dim=2, repeats=repeat)
        mask = self.visible_keys(q.shape[1], k.shape[1], offset, attention_mask, q.device)
        empty = None
        if mask is not None:
            empty = ~mask.any(-1, keepdim=True)  # rows TL's pattern turns into zeros
            mask = mask | empty  # keep SDPA finite there; zeroed below
        z = F.scaled_dot_product_attention(
            q.transpose(1, 2),
            k.transpose(1, 2).to(q.dtype),
            v.transpose(1, 2).to(q.dtype),
            attn_mask=mask,
            is_causal=mask is None,
            scale=1.0 / self.attn_scale,
        )
        if empty is not None:  # no ``empty.any()`` test: it would wait for the device
            z = z.masked_fill(empty, 0.0)
        return z.transpose(1, 2).to(v.dtype)

    def explicit_z(
        self,
        q: Float[Tensor, "batch query head d_head"],
        k: Float[Tensor, "batch key kv_head d_head"],
        v: Float[Tensor, "batch key kv_head d_head"],
        offset: int,
        attention_mask,
    ) -> Float[Tensor, "batch query head d_head"]:
        """Attention output `z` with the scores and pattern materialised for their hooks.

        TL's own steps (scores `q·k / attn_scale`, `-inf` where masked, `hook_attn_scores`,
        softmax, NaN rows to zero, `hook_pattern`, `pattern @ v`), in place where TL allocates
        a new `[batch, head, query, key]` tensor: a full cache holds the scores and pattern of
        every layer and nothing else of that size (TL's path makes five more such tensors per
        layer and three more passes over them). With plain causal attention (no padding, no
        window) the queries go in `CAUSAL_BLOCKS` blocks, each against the keys it can see
        only: the masked triangle is written as `-inf` / `0` instead of computed, about half
        the work at long context. A hook that edits the scores or the pattern (a new tensor,
        or an in-place change: the tensor's version) gets TL's whole-row softmax or product.
        Equal to TL's path (tests/test_fast_attention.py).

        Args:
            q: Queries (rotated).
            k: Keys, past ones included (rotated).
            v: Values, past ones included.
            offset: Position of the first query among the keys.
            attention_mask: The padding mask, if any.

        Returns:
            `z`, as TL's `hook_z` sees it.
        """
        repeat = q.shape[2] // k.shape[2]
        if repeat > 1:  # grouped-query attention, as TL expands it
            k = torch.repeat_interleave(k, dim=2, repeats=repeat)
            v = torch.repeat_interleave(v, dim=2, repeats=repeat)
        qh, kh, vh = q.permute(0, 2, 1, 3), k.permute(0, 2, 3, 1).to(q.dtype), v.permute(0, 2, 1, 3)
        n_query, n_key = q.shape[1], k.shape[1]
        visible = self.visible_keys(n_query, n_key, offset, attention_mask, q.device)
        blocks = causal_blocks(n_query, offset) if visible is None else None
        if blocks is None:
            if visible is None:
                visible = self.causal_window(n_query, n_key, offset, None, q.device)
            scores = torch.matmul(qh, kh).div_(self.attn_scale)
            scores.masked_fill_(~visible, float("-inf"))
        else:
            scores = qh.new_empty(*qh.shape[:3], n_key)
            for rows, seen in blocks:
                block = torch.matmul(qh[:, :, rows], kh[..., :seen]).div_(self.attn_scale)
                diagonal = torch.ones(block.shape[-2:], dtype=torch.bool, device=q.device)
                block.masked_fill_(~diagonal.tril(seen - block.shape[-2]), float("-inf"))
                scores[:, :, rows, :seen] = block
                scores[:, :, rows, seen:] = float("-inf")
        version = scores._version
        hooked = self.hook_attn_scores(scores)
        blocks = blocks if hooked is scores and scores._version == version else None
        if blocks is not None:  # the masked triangle is still -inf: its pattern is zero
            pattern = torch.zeros_like(scores)
            for rows, seen in blocks:
                pattern[:, :, rows, :seen] = torch.softmax(scores[:, :, rows, :seen], dim=-1)
        else:  # (in place only where no graph needs the softmax's own output)
            pattern = torch.softmax(hooked, dim=-1)
            keep = torch.is_grad_enabled() and pattern.requires_grad
            pattern = pattern.nan_to_num(nan=0.0) if keep else pattern.nan_to_num_(nan=0.0)
        version = pattern._version
        seen_pattern = self.hook_pattern(pattern)
        if blocks is not None and seen_pattern is pattern and pattern._version == version:
            vh = vh.to(pattern.dtype)
            z = qh.new_empty(*qh.shape[:3], vh.shape[-1])
            for rows, seen in blocks:
                z[:, :, rows] = torch.matmul(pattern[:, :, rows, :seen], vh[:, :, :seen])
            return z.to(v.dtype).permute(0, 2, 1, 3)
        seen_pattern = seen_pattern.to(device=v.device, dtype=v.dtype)
        return torch.matmul(seen_pattern, vh).permute(0, 2, 1, 3)

    def calculate_sin_cos_rotary(self, rotary_dim, n_ctx, base=10000, dtype=torch.float32):
        """Rotary tables computed as HF computes them (`position * inv_freq` in float32).

        TL's `position / freq` rounds differently, which moves the angles by up to ~ulp (position)
        and the reward by ~1e-4 at 1,000 tokens. Scaled ropes use TL's own.
        """
        cfg = self.cfg
        if (
            cfg.use_NTK_by_parts_rope
            or cfg.use_yarn_rope
            or cfg.use_dynamic_ntk_rope
            or getattr(cfg, "rotary_scaling_factor", 1.0) != 1.0
            or dtype == torch.float64
        ):
            return super().calculate_sin_cos_rotary(rotary_dim, n_ctx, base=base, dtype=dtype)
        exponent = torch.arange(0, rotary_dim, 2, dtype=torch.int64).float() / rotary_dim
        inv_freq = 1.0 / (base**exponent)
        angles = torch.arange(n_ctx, dtype=torch.float32)[:, None] * inv_freq[None, :]
        if cfg.rotary_adjacent_pairs:
            angles = angles.repeat_interleave(2, dim=-1)
        else:
            angles = torch.cat([angles, angles], dim=-1)
        return angles.sin().to(dtype), angles.cos().to(dtype)

    def attention_output(
        self, z: Float[Tensor, "batch pos head d_head"]
    ) -> Float[Tensor, "batch pos d_model"]:
        """TL's output projection (with `hook_result` when `use_attn_result` is set)."""
        if self.cfg.use_attn_result:
            w = einops.rearrange(self.W_O, "head d_head d_model -> 1 1 head d_head d_model")
            result = self.hook_result((z.to(w.dtype)[..., None] * w).sum(-2))
            return result.sum(-2) + self.b_O
        w = einops.rearrange(self.W_O, "head d_head d_model -> d_model (head d_head)")
        z = z.to(w.dtype).reshape(z.shape[0], z.shape[1], -1)
        return F.linear(z, w.contiguous(), self.b_O)


#: Query blocks of `SDPAAttentionMixin.explicit_z`'s causal path (the masked triangle's share
#: of the work falls from 1/2 to 1/(2 · blocks)); sequences shorter than `CAUSAL_MIN` go whole.
CAUSAL_BLOCKS = 8
CAUSAL_MIN = 256


def causal_blocks(n_query: int, offset: int) -> list[tuple[slice, int]] | None:
    """`(query rows, keys seen)` per block of causal queries, or `None` for one block.

    Args:
        n_query: The number of queries (the last `n_query` of `offset + n_query` keys).
        offset: Position of the first query among the keys.

    Returns:
        The blocks: the rows `rows` see keys `0 .. offset + rows.stop - 1`.

    Examples:
        >>> [(r.start, r.stop, seen) for r, seen in causal_blocks(1024, 0)][:2]
        [(0, 128, 128), (128, 256, 256)]
        >>> causal_blocks(100, 0) is None
        True
    """
    if n_query < CAUSAL_MIN:
        return None
    size = -(-n_query // CAUSAL_BLOCKS)
    return [
        (slice(start, min(start + size, n_query)), offset + min(start + size, n_query))
        for start in range(0, n_query, size)
    ]


def shared_prefix_z(
    q: Float[Tensor, "batch query head d_head"],
    prefix_keys: Float[Tensor, "prefix kv_head d_head"],
    prefix_values: Float[Tensor, "prefix kv_head d_head"],
    keys: Float[Tensor, "batch query kv_head d_head"],
    values: Float[Tensor, "batch query kv_head d_head"],
    mask: Tensor | None,
    scale: float,
    prefix_mask: Tensor | None = None,
) -> Float[Tensor, "batch query head d_head"]:
    """Attention output `z` when every row attends to one shared prefix, then to its own keys.

    The prefix's keys and values are one row, never expanded: every query of the batch meets
    them in one matrix product per key-value head (the shared-prefix decomposition of Hydragen,
    arXiv:2402.05099), and the rows' own keys (causal, `mask` hiding padded ones) in a small
    batched product; one softmax over both, in float32. A padded query row gives `z = 0`, as
    the other paths give it. Equal to attention over the concatenated keys to float rounding
    (tests/test_fast_attention.py).

    Args:
        q: The queries (rotated where the model is rotary).
        prefix_keys: The prefix's keys (rotated).
        prefix_values: The prefix's values.
        keys: The rows' own keys (rotated).
        values: The rows' own values.
        mask: `[batch, query]` padding mask of the rows' own positions, or `None`.
        scale: The score scale (`1 / attn_scale`).
        prefix_mask: `[batch, prefix]`, which prefix keys each row sees (`None`: all).

    Returns:
        `z`, as TL's `hook_z` sees it.

    Examples:
        >>> q, k, v = torch.randn(3, 2, 4, 8), torch.randn(3, 2, 2, 8), torch.randn(3, 2, 2, 8)
        >>> pk, pv = torch.randn(5, 2, 8), torch.randn(5, 2, 8)
        >>> z = shared_prefix_z(q, pk, pv, k, v, None, 8**-0.5)
        >>> full_k = torch.cat([pk.expand(3, -1, -1, -1), k], 1).repeat_interleave(2, 2)
        >>> full_v = torch.cat([pv.expand(3, -1, -1, -1), v], 1).repeat_interleave(2, 2)
        >>> causal = torch.ones(2, 7, dtype=torch.bool).tril(5)
        >>> ref = F.scaled_dot_product_attention(
        ...     q.transpose(1, 2), full_k.transpose(1, 2), full_v.transpose(1, 2),
        ...     attn_mask=causal, scale=8**-0.5).transpose(1, 2)
        >>> bool((z - ref).abs().max() < 1e-5)
        True
    """
    n = max(q.shape[0], keys.shape[0], values.shape[0])  # a hook may broadcast one of them
    q, keys, values = (t.expand(n, *t.shape[1:]) for t in (q, keys, values))
    _, s, h, d = q.shape
    kv, p = prefix_keys.shape[1], prefix_keys.shape[0]
    g = h // kv
    dtype = q.dtype
    qg = q.reshape(n, s, kv, g, d).permute(2, 0, 3, 1, 4).float()  # [kv, n, g, s, d]
    flat = qg.reshape(kv, n * g * s, d)
    on_prefix = torch.bmm(flat, prefix_keys.permute(1, 2, 0).float()) * scale  # [kv, ngs, p]
    on_prefix = on_prefix.reshape(kv, n, g, s, p)
    if prefix_mask is not None and not bool(prefix_mask.all()):
        hidden = ~prefix_mask.bool().to(q.device).expand(n, p)[None, :, None, None, :]
        on_prefix = on_prefix.masked_fill(hidden, float("-inf"))
    own = torch.matmul(qg, keys.permute(2, 0, 3, 1).float()[:, :, None]) * scale  # [kv,n,g,s,s]
    visible = torch.ones(s, s, dtype=torch.bool, device=q.device).tril()
    if mask is not None:
        visible = visible & mask.bool()[:, None, None, None, :].permute(1, 0, 2, 3, 4)
    own = own.masked_fill(~visible, float("-inf"))
    weights = torch.softmax(torch.cat([on_prefix, own], -1), -1)
    from_prefix = torch.bmm(
        weights[..., :p].reshape(kv, n * g * s, p), prefix_values.permute(1, 0, 2).float()
    ).reshape(kv, n, g, s, d)
    from_own = torch.matmul(weights[..., p:], values.permute(2, 0, 1, 3).float()[:, :, None])
    z = (from_prefix + from_own).permute(1, 3, 0, 2, 4).reshape(n, s, h, d)
    if mask is not None:
        z = z * mask.to(z.dtype)[:, :, None, None]
    return z.to(dtype)


def leading_ones(mask: Tensor) -> bool:
    """Whether each row of a `[batch, key]` mask is ones, then zeros (a prefix of its keys).

    Examples:
        >>> leading_ones(torch.tensor([[1, 1, 0], [1, 0, 0]])), leading_ones(torch.tensor([[0, 1]]))
        (True, False)
    """
    if mask.shape[1] < 2:
        return True
    m = mask.bool()
    return not bool((m[:, 1:] & ~m[:, :-1]).any())


class StridedGatedMLP(GatedMLP):
    """TL's gated MLP without the per-call `W.T.contiguous()` weight copies.

    Float32 only, where the product is the same; TL copies to match HF's bfloat16 rounding. The
    copies cost ~15% of a 128-token forward of a d512 model.
    """

    __slots__ = ()

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        """The gated MLP's output, without weight copies in float32.

        Args:
            x: Input of the MLP.

        Returns:
            The MLP's output.
        """
        if (
            x.dtype != torch.float32
            or self.W_gate.dtype != torch.float32
            or self.W_gate.device != x.device
            or self.cfg.is_layer_norm_activation()
        ):
            return super().forward(x)
        pre_act = self.hook_pre(x @ self.W_gate)
        pre_linear = self.hook_pre_linear(x @ self.W_in)
        post_act = self.hook_post(self.act_fn(pre_act) * pre_linear + self.b_in)
        return F.linear(post_act, self.W_out.T, self.b_out)


_SUBCLASSES: dict[type, type] = {}


def fast_class(cls: type) -> type:
    """The SDPA subclass of a TL attention class (created once per class)."""
    if issubclass(cls, SDPAAttentionMixin):
        return cls
    if cls not in _SUBCLASSES:
        namespace = {"__slots__": (), "__module__": __name__}
        _SUBCLASSES[cls] = type(f"SDPA{cls.__name__}", (SDPAAttentionMixin, cls), namespace)
    return _SUBCLASSES[cls]


def install(model) -> None:
    """Give every attention module (and plain gated MLP) of `model` the fast path.

    This instance only; the modules keep their parameters, hooks and names. Note the instance-level
    `forward`s the model was built with (sae_lens wraps each MLP's), so that `attached` counts only
    those added later.
    """
    for block in model.blocks:
        attn = block.attn
        if isinstance(attn, AbstractAttention) and type(attn).forward is AbstractAttention.forward:
            attn.__class__ = fast_class(type(attn))
            if attn.cfg.positional_embedding_type == "rotary":
                sin, cos = attn.calculate_sin_cos_rotary(
                    attn.cfg.rotary_dim or attn.cfg.d_head,  # TL's config sets it when rotary
                    attn.rotary_sin.shape[0],
                    base=attn._rotary_base(),
                    dtype=attn.rotary_sin.dtype,
                )
                attn.rotary_sin.copy_(sin)
                attn.rotary_cos.copy_(cos)
        if type(getattr(block, "mlp", None)) is GatedMLP:
            install_mlp(block.mlp)
    for module in model.modules():
        forward = module.__dict__.get("forward")
        if forward is not None:
            module.__dict__[KNOWN_FORWARD] = forward


def install_mlp(mlp: GatedMLP) -> None:
    """Give one gated MLP the strided fast path (keeping an sae_lens wrapper's `hook_in`).

    Args:
        mlp: The gated MLP.
    """
    if "forward" not in vars(mlp):
        mlp.__class__ = StridedGatedMLP
        return
    hook_in = getattr(mlp, "hook_in", None)
    if not isinstance(hook_in, HookPoint):
        return  # an instance-level forward we do not know: leave the module alone
    # sae_lens's HookedSAETransformer wraps the bound forward to add hook_in: so do we
    point: HookPoint = hook_in
    mlp.__class__ = StridedGatedMLP
    strided = cast(StridedGatedMLP, mlp)
    vars(mlp)["forward"] = lambda x: StridedGatedMLP.forward(strided, point(x))


def set_enabled(model, enabled: bool) -> None:
    """Turn the fast attention path of every block of `model` on or off.

    Args:
        model: The hooked model.
        enabled: Whether to use SDPA where exact.
    """
    for block in model.blocks:
        if isinstance(block.attn, SDPAAttentionMixin):
            block.attn.fast_attention = bool(enabled)
