"""The fast path: the shared prompt prefix runs once, its key/value cache serves every candidate.

`PrefixCache` runs `prompt ids` through the model once with TransformerLens's
key-value cache, then scores any batch of continuations (`candidate ids + suffix ids`) by
expanding the cached keys and values along the batch (stride-0 `expand`; TL asserts that the
cache's batch equals the input's) and running only the continuation positions. TL takes the
cache length as the position offset, so rotary and absolute positions of the continuation are
those of the full sequence.

Continuations of different lengths are right padded, unlike the library's other batches (left
padding would put pads between the cached prefix and the continuation, in the middle of each
sequence); causal attention keeps padded positions from influencing real ones, and each row's
reward is read where the HF pooling rule reads it in the *full* sequence
(`model.pool_positions` on prefix + continuation), so the result equals full-sequence scoring
(tests: ≤ 1e-4). A reading position inside the prefix (possible when `pad == eos` and a
continuation is all padding ids) is served from the prefix run.

The cache is TransformerLens 3.9's: a model that declares it lacks one
(`reward_lens_tl.capabilities.PREFIX_CACHE`, e.g. `reward_lens_tl.bridge.BridgeRewardModel`)
is refused by `PrefixCache.build`, and `prefix_scorer` (what `token_sweep` and
`response_search` call) scores its full sequences instead (`reward_lens_tl.sweep.ExactScorer`).

Examples:
    >>> import torch
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.zoo import zoo_path
    >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    >>> enc = model.encode("how bake bread", "soup")
    >>> cache = PrefixCache.build(model, enc.prompt_ids())
    >>> fast = cache.score([enc.response_ids() + enc.suffix_ids()])
    >>> bool(torch.allclose(fast, model.rewards(torch.tensor([enc.ids])), atol=1e-5))
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, cast

import torch
from jaxtyping import Float
from torch import Tensor

from ..capabilities import PREFIX_CACHE, supports
from ..errors import BridgeUnsupportedError, EmptyInputError, SequenceTooLongError, UsageError
from ..inputs import pad_batch
from ..readout import Objective, objective_index
from .exact import ExactScorer

if TYPE_CHECKING:
    from transformer_lens.cache.key_value_cache import TransformerLensKeyValueCache
    from transformer_lens.cache.key_value_cache_entry import TransformerLensKeyValueCacheEntry

    from ..model import HookedArmoRM, HookedRewardModel

__all__ = [
    "PrefixCache",
    "prefix_scorer",
]


@dataclass(frozen=True)
class PrefixCache:
    """The prefix's run: what scoring continuations needs.

    Keys/values of the prefix per layer (`[1, prefix, kv_head, d_head]`, pre-rotary),
    the head's outputs at every prefix position and, for gated heads, the prompt's gate.

    Args:
        model: the `HookedRewardModel`.
        prefix_ids: the prefix's token ids.
        keys: the cached keys per layer.
        values: the cached values per layer.
        head_outputs: the head's outputs at every prefix position.
        gate: the prompt's gate (gated heads), else `None`.
        column: the swept head column (`None`: the scalar reward or the gated score).
        rotated_keys: the keys rotated once (rotary models), else `None`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sweep import PrefixCache
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> enc = model.encode("how bake bread", "soup")
        >>> cache = PrefixCache.build(model, enc.prompt_ids())
        >>> len(cache.keys), tuple(cache.keys[0].shape)  # per layer: [1, prefix, kv_head, d_head]
        (3, (1, 7, 2, 16))

        Each continuation is candidate ids + the template's suffix ids ("soup" and "great
        question" here); the rewards are those of the full conversations:

        >>> suffix = enc.suffix_ids()
        >>> [round(r, 3) for r in cache.score([(43,) + suffix, (34, 35) + suffix]).tolist()]
        [-2.3, -1.466]
        >>> round(model.score("how bake bread", "great question").item(), 3)
        -1.466
    """

    model: HookedRewardModel
    prefix_ids: tuple[int, ...]
    keys: tuple[Tensor, ...]
    values: tuple[Tensor, ...]
    head_outputs: Float[Tensor, "prefix n_objectives"]
    gate: Float[Tensor, " n_objectives"] | None
    column: int | None
    rotated_keys: tuple[Tensor, ...] | None = None
    #: The scoring path's name (`SweepResult.method`).
    method: ClassVar[str] = "cached"

    @classmethod
    @torch.no_grad()
    def build(cls, model, prefix_ids: Sequence[int], objective: Objective = None) -> PrefixCache:
        """Run the prefix once.

        Args:
            model: the `HookedRewardModel`.
            prefix_ids: the prefix's token ids.
            objective: picks the head column (`None`: the scalar reward or the gated score).

        Returns:
            The `PrefixCache`.

        Raises:
            EmptyInputError: an empty prefix.
            BridgeUnsupportedError: the model has no TransformerLens 3.9 key/value cache
                (`reward_lens_tl.capabilities.PREFIX_CACHE`): use `prefix_scorer`.
        """
        if not supports(model, PREFIX_CACHE):
            raise BridgeUnsupportedError(
                "PrefixCache runs the prompt once through TransformerLens 3.9's key/value "
                f"cache, which {type(model).__name__} does not have (TransformerLens 4's bridge); "
                "score full sequences with ExactScorer(model, prefix_ids), or "
                "prefix_scorer(model, prefix_ids), which picks the path the model supports "
                "(token_sweep and response_search do)"
            )
        from transformer_lens.cache.key_value_cache import TransformerLensKeyValueCache

        prefix = tuple(int(i) for i in prefix_ids)
        if not prefix:
            raise EmptyInputError("the cached sweep needs a non-empty prompt prefix")
        column = objective_index(model, objective)
        ids = torch.tensor([prefix], device=model.cfg.device)
        kv = TransformerLensKeyValueCache.init_cache(model.cfg, model.cfg.device, 1)
        resid = model(
            ids,
            return_type=None,
            stop_at_layer=model.cfg.n_layers,
            attention_mask=torch.ones_like(ids),
            past_kv_cache=kv,
        )
        normed = _final_norm(model, resid)
        gate = None
        if column is None and getattr(model, "gating", None) is not None:  # ArmoRM's gate
            gate_pos = int(model.gate_positions(ids)[0])
            state = normed[:, gate_pos].to(model.reward_transform_matrix.dtype)
            gate = model.gating(state)[0]
        keys = tuple(e.past_keys for e in kv.entries)
        rotated = None
        if model.cfg.positional_embedding_type == "rotary":
            rotated = tuple(
                b.attn.apply_rotary(k, 0, None) for b, k in zip(model.blocks, keys, strict=True)
            )
        return cls(
            model=model,
            prefix_ids=prefix,
            keys=keys,
            values=tuple(e.past_values for e in kv.entries),
            head_outputs=model.unembed(normed)[0],
            gate=gate,
            column=column,
            rotated_keys=rotated,
        )

    def expanded(self, n: int) -> TransformerLensKeyValueCache:
        """A frozen cache whose entries are the prefix's, expanded (not copied) to batch `n`.

        Args:
            n: the batch size.

        Returns:
            The frozen key/value cache.
        """
        from transformer_lens.cache.key_value_cache import TransformerLensKeyValueCache

        from ..fast_attention import RotatedPrefixEntry

        rotated: Sequence[Tensor | None] = self.rotated_keys or [None] * len(self.keys)
        entries: list[TransformerLensKeyValueCacheEntry] = [
            RotatedPrefixEntry(
                past_keys=k.expand(n, -1, -1, -1),
                past_values=v.expand(n, -1, -1, -1),
                frozen=True,
                rotated_keys=None if rk is None else rk.expand(n, -1, -1, -1),
            )
            for k, v, rk in zip(self.keys, self.values, rotated, strict=True)
        ]
        mask = torch.ones(n, len(self.prefix_ids), dtype=torch.long, device=self.keys[0].device)
        return TransformerLensKeyValueCache(entries, mask, frozen=True)

    @torch.no_grad()
    def score(self, continuations: Sequence[Sequence[int]]) -> Float[Tensor, " batch"]:
        """Rewards of `prefix + continuation` for each continuation (one forward).

        Args:
            continuations: the continuations' token ids (candidate ids + suffix ids).

        Returns:
            One reward per continuation.

        Raises:
            EmptyInputError: no continuation.
            SequenceTooLongError: the prefix plus the longest continuation exceed the context.
        """
        model = self.model
        n, p = len(continuations), len(self.prefix_ids)
        if n == 0:
            raise EmptyInputError("no continuations to score")
        new_ids, new_mask = continuation_batch(continuations, model.pad_token_id)
        if p + new_ids.shape[1] > model.cfg.n_ctx:
            raise SequenceTooLongError(
                f"prompt ({p} tokens) plus the longest candidate and suffix "
                f"({new_ids.shape[1]}) exceed the model's context of {model.cfg.n_ctx}; shorten "
                "the prompt or the candidates"
            )
        device = self.keys[0].device
        new_ids, new_mask = new_ids.to(device), new_mask.to(device)
        prefix = torch.tensor(self.prefix_ids, device=device).expand(n, -1)
        full = torch.cat([prefix, new_ids], 1)
        full_mask = torch.cat([torch.ones_like(prefix), new_mask], 1)
        pos = model.pool_positions(model.check_tokens(full, full_mask), full_mask)
        rows = torch.arange(n, device=device)
        rel = (pos - p).clamp(min=0)
        resid = model(
            new_ids,
            return_type=None,
            stop_at_layer=model.cfg.n_layers,
            attention_mask=new_mask,
            past_kv_cache=self.expanded(n),
        )
        at_reading = resid[rows, rel][:, None]
        pooled = model.unembed(_final_norm(model, at_reading))[:, 0]
        in_prefix = pos < p
        if bool(in_prefix.any()):
            pooled = torch.where(
                in_prefix[:, None], self.head_outputs[pos.clamp(max=p - 1)], pooled
            )
        return self.reduce(pooled)

    def reduce(self, pooled: Float[Tensor, "batch n_objectives"]) -> Float[Tensor, " batch"]:
        """The swept value from the pooled head outputs: one column, or the gated score.

        Args:
            pooled: the pooled head outputs.

        Returns:
            One value per row.

        Raises:
            UsageError: a gated-score cache without its prompt's gate.
        """
        if self.column is not None:
            return pooled[:, self.column].float()
        if getattr(self.model, "scored_head", False):  # a judge's or PRM's own score
            return cast(Any, self.model).score_from(pooled).float()
        if self.gate is None:  # build() sets the gate whenever column is None
            raise UsageError("a gated-score prefix cache needs its prompt's gate (use build())")
        gated = cast("HookedArmoRM", self.model)  # column None: an ArmoRM-style gated head
        mix = gated.reward_transform_matrix.to(pooled.dtype)
        return (self.gate.to(pooled.dtype) * (pooled @ mix)).sum(-1).float()


def prefix_scorer(
    model, prefix_ids: Sequence[int], objective: Objective = None, method: str = "cached"
) -> PrefixCache | ExactScorer:
    """The scorer of continuations of `prefix_ids`: the prefix cache where the model has one.

    `method="cached"` gives a `PrefixCache` on a model with TransformerLens 3.9's key/value cache
    (`reward_lens_tl.capabilities.PREFIX_CACHE`) and an `ExactScorer` (the same rewards, ≤ 1e-4,
    one full forward per batch) on one without (`reward_lens_tl.bridge.BridgeRewardModel`);
    `"exact"` always gives the `ExactScorer`. Either's `method` names the path taken.

    Args:
        model: the reward model.
        prefix_ids: the prefix's token ids.
        objective: picks the head column (`None`: the scalar reward or the gated score).
        method: `"cached"` or `"exact"`.

    Returns:
        The scorer (`.score(continuations)`, `.column`, `.method`).

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> enc = model.encode("how bake bread", "soup")
        >>> prefix_scorer(model, enc.prompt_ids()).method
        'cached'
    """
    if method == "cached" and supports(model, PREFIX_CACHE):
        return PrefixCache.build(model, prefix_ids, objective)
    return ExactScorer(model, prefix_ids, objective)


def continuation_batch(
    continuations: Sequence[Sequence[int]], pad_token_id: int | None
) -> tuple[Tensor, Tensor]:
    """`(ids, mask)` of the continuations, right padded.

    Right: pads after the continuation, never between the cached prefix and it. Continuations
    of one length (single-token candidates and the suffix) become one tensor with no work per
    candidate.

    Args:
        continuations: The continuations' token ids.
        pad_token_id: The pad id.

    Returns:
        The ids and the attention mask, `[batch, width]`.

    Examples:
        >>> continuation_batch([(5, 2), (7, 2)], 0)[0].tolist()
        [[5, 2], [7, 2]]
        >>> continuation_batch([(5, 2), (7, 8, 2)], 0)[0].tolist()
        [[5, 2, 0], [7, 8, 2]]
    """
    plain = all(type(i) is int for c in continuations for i in c)  # (bools refused below)
    lengths = {len(c) for c in continuations}
    if plain and len(lengths) == 1 and 0 not in lengths:
        ids = torch.tensor(continuations, dtype=torch.long)
        return ids, torch.ones_like(ids)
    rows = [tuple(c) for c in continuations]
    return pad_batch(rows, pad_token_id, padding_side="right")


def _final_norm(model, resid: Tensor) -> Tensor:
    return model.ln_final(resid) if model.cfg.normalization_type is not None else resid
