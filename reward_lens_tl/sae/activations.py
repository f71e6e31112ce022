"""Activations at any hook point, streamed token by token with padding left out.

SAE training wants a stream of `[batch, d_in]` activation vectors. This module turns the
inputs the rest of the library uses (token-id batches, preference pairs, the zoo's examples and
contrast pairs) into left-padded model batches, runs the model only as far as the hook
(`stop_at_layer`), and yields the non-padding rows. `shuffled_batches` and `rebatch`
turn those rows into the fixed-size batches sae_lens's `SAETrainer` consumes.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.testing import tiny_reward_model, random_batch
    >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    >>> ids, mask = random_batch(2, [9, 6])
    >>> collect_activations(model, "blocks.0.hook_resid_post", [(ids, mask)]).shape  # 9 + 6 tokens
    torch.Size([15, 64])
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..adapters import hf_last_non_pad
from ..errors import ArgumentTypeError, EmptyActivationsError, SAEHookError
from ..inputs import EncodedConversation, pad_batch
from ..padding import reading_position_known
from ..pair_batches import pair_batches

__all__ = [
    "collect_activations",
    "iter_activations",
    "iter_batch_activations",
    "model_batches",
    "rebatch",
    "shuffled_batches",
]

Batch = tuple[Int[Tensor, "batch pos"], Int[Tensor, "batch pos"]]


def check_hook(model, hook_name: str) -> None:
    """Raise `SAEHookError` (with close matches) if `hook_name` is not on `model`.

    Args:
        model: The reward model.
        hook_name: The hook point.

    Raises:
        SAEHookError: If the hook does not exist.
    """
    try:
        model.check_hook_names([hook_name])
    except KeyError as err:
        raise SAEHookError(str(err)) from None


def stop_layer(model, hook_name: str) -> int | None:
    """The `stop_at_layer` that still runs `hook_name` (`None`: the whole model).

    Args:
        model: The reward model.
        hook_name: The hook point.

    Returns:
        The layer to stop at, or `None`.
    """
    if hook_name.startswith(("hook_embed", "hook_pos_embed")):
        return 0
    match = re.match(r"blocks\.(\d+)\.", hook_name)
    return int(match.group(1)) + 1 if match else None


def _mask_from_pad(model, ids: Tensor) -> Tensor:
    """Attention mask of padded ids, left or right.

    Leading pad ids (as `HookedRewardModel.infer_attention_mask` finds them) and
    everything after the last non-pad token are padding.
    """
    if model.pad_token_id is None:
        return torch.ones_like(ids)
    last = hf_last_non_pad(ids, model.pad_token_id)
    mask = (torch.arange(ids.shape[1], device=ids.device)[None] <= last[:, None]).long()
    leading = model.infer_attention_mask(ids)
    return mask if leading is None else mask * leading.to(mask)


def _ids_of(item: Any) -> Sequence[int] | None:
    if isinstance(item, EncodedConversation):
        return item.ids
    if isinstance(item, (list, tuple)) and item and all(isinstance(t, int) for t in item):
        return item
    if hasattr(item, "input_ids") and not hasattr(item, "edited"):
        return item.input_ids
    return None


def _ids_or_error(item: Any, index: int) -> Sequence[int]:
    """`item`'s token ids (`_ids_of`); an error naming `index` when it has none."""
    ids = _ids_of(item)
    if ids is None:
        raise ArgumentTypeError(
            f"item {index} of the source is not token ids like the first item "
            f"(got a {type(item).__name__})"
        )
    return ids


def model_batches(model, source: Any, batch_size: int = 32) -> Iterator[Batch]:
    """Normalise `source` into `(ids, mask)` batches on the model's device.

    The batches it builds are left padded (`pad_batch`), batches given as tensors keep their
    padding.

    `source` may be a `[batch, pos]` id tensor (padding, left or right, found from
    `pad_token_id`), an iterable of `(ids, mask)` batches or of id tensors, a sequence of
    id lists, of encoded conversations or of zoo `Example` objects (anything with
    `.input_ids`), or of pairs (preference pairs with `prompt/chosen/rejected`, encoded
    `(chosen, rejected)` tuples, or zoo `ContrastPair` objects with `.edited/.base`; both
    sides of every pair are used).

    Args:
        model: The reward model.
        source: The inputs.
        batch_size: Rows per batch built here.

    Yields:
        `(ids, mask)` batches.

    Raises:
        ArgumentTypeError: If an item is not token ids like the first.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import model_batches
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> for ids, mask in model_batches(model, [[5, 6, 7], [8, 9], [10]], batch_size=2):
        ...     print(ids.tolist(), mask.tolist())  # pads (id 0) after each row's first token
        [[5, 6, 7], [8, 0, 9]] [[1, 1, 1], [1, 0, 1]]
        [[10]] [[1]]
    """
    device = model.cfg.device
    if isinstance(source, Tensor):
        source = [source[i : i + batch_size] for i in range(0, source.shape[0], batch_size)]
    items = source if isinstance(source, Sequence) else None
    first = items[0] if items else None
    if items is not None and first is not None and _ids_of(first) is not None:
        for start in range(0, len(items), batch_size):
            chunk = [
                _ids_or_error(x, start + i) for i, x in enumerate(items[start : start + batch_size])
            ]
            ids, mask = pad_batch(chunk, model.pad_token_id)
            yield ids.to(device), mask.to(device)
        return
    if items is not None and first is not None and _is_pair(first):
        pairs = [_as_encoded_pair(p) for p in items]
        for ids, mask, _ in pair_batches(model, pairs, batch_size):
            yield ids, mask
        return
    for batch in source:
        if isinstance(batch, Tensor):
            ids = batch if batch.ndim == 2 else batch[None]
            yield ids.to(device), _mask_from_pad(model, ids).to(device)
        else:
            ids, mask = batch
            yield ids.to(device), mask.to(device)


def _is_pair(item: Any) -> bool:
    return (
        hasattr(item, "edited")
        or hasattr(item, "chosen")
        or (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], EncodedConversation))
    )


def _as_encoded_pair(pair: Any):
    if hasattr(pair, "edited"):
        from ..contrast import encode_contrast

        return encode_contrast(pair)
    return pair


def iter_batch_activations(
    model,
    hook_name: str,
    source: Any,
    batch_size: int = 32,
    *,
    fwd_hooks: Sequence = (),
) -> Iterator[tuple[Tensor, Tensor, Float[Tensor, "batch pos d_in"]]]:
    """Stream `(ids, mask, activations)` per model batch.

    The model runs only up to the hook's block, trailing dimensions (`[head, d_head]`) are
    flattened as sae_lens's `hook_z` SAEs expect, and `fwd_hooks` are the caller's
    interventions.

    Args:
        model: The reward model.
        hook_name: The hook point.
        source: The inputs (see `model_batches`).
        batch_size: Rows per batch.
        fwd_hooks: The caller's forward hooks.

    Yields:
        `(ids, mask, activations)` per batch.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import iter_batch_activations
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> seqs = [[5, 6, 7], [8, 9], [10]]
        >>> for ids, mask, act in iter_batch_activations(
        ...     model, "blocks.0.attn.hook_z", seqs, batch_size=2
        ... ):
        ...     print(tuple(act.shape))  # [batch, pos, n_heads * d_head] = 4 heads x 32
        (2, 3, 128)
        (1, 1, 128)
    """
    check_hook(model, hook_name)
    stop = stop_layer(model, hook_name)
    for ids, mask in model_batches(model, source, batch_size):
        # every real token is read (by the mask), never position -1: no reading-position warning
        with torch.no_grad(), model.hooks(fwd_hooks=list(fwd_hooks)), reading_position_known():
            _, cache = model.run_with_cache(
                ids, attention_mask=mask, names_filter=hook_name, stop_at_layer=stop
            )
        yield ids, mask, cache[hook_name].flatten(2).detach().clone()


def iter_activations(
    model, hook_name: str, source: Any, batch_size: int = 32, *, fwd_hooks: Sequence = ()
) -> Iterator[Float[Tensor, "tokens d_in"]]:
    """Stream the activations at `hook_name` of every non-padding token of `source`.

    One `[tokens, d_in]` chunk per model batch (see `model_batches` for `source`).

    Args:
        model: The reward model.
        hook_name: The hook point.
        source: The inputs.
        batch_size: Rows per batch.
        fwd_hooks: The caller's forward hooks.

    Yields:
        `[tokens, d_in]` chunks.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import iter_activations
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> seqs = [[5, 6, 7], [8, 9], [10]]
        >>> chunks = iter_activations(model, "blocks.0.hook_resid_post", seqs, batch_size=2)
        >>> [tuple(c.shape) for c in chunks]  # 3 + 2 real tokens, then 1: no padding rows
        [(5, 64), (1, 64)]
    """
    for _, mask, act in iter_batch_activations(
        model, hook_name, source, batch_size, fwd_hooks=fwd_hooks
    ):
        yield act[mask.bool()]


def collect_activations(
    model, hook_name: str, source: Any, batch_size: int = 32, max_tokens: int | None = None
) -> Float[Tensor, "tokens d_in"]:
    """All of `iter_activations` in one tensor (stops early after `max_tokens`).

    Args:
        model: The reward model.
        hook_name: The hook point.
        source: The inputs (see `model_batches`).
        batch_size: Rows per batch.
        max_tokens: The most tokens, or `None`.

    Returns:
        The activations, `[tokens, d_in]`.

    Raises:
        EmptyActivationsError: If the source was empty.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import collect_activations
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> seqs = [[5, 6, 7], [8, 9], [10]]
        >>> collect_activations(model, "blocks.0.hook_resid_post", seqs).shape
        torch.Size([6, 64])
        >>> collect_activations(model, "blocks.0.hook_resid_post", seqs, max_tokens=4).shape
        torch.Size([4, 64])
    """
    chunks, n = [], 0
    for chunk in iter_activations(model, hook_name, source, batch_size):
        chunks.append(chunk)
        n += chunk.shape[0]
        if max_tokens is not None and n >= max_tokens:
            break
    if not chunks:
        raise EmptyActivationsError(f"no activations at {hook_name}: the source was empty")
    acts = torch.cat(chunks)
    return acts if max_tokens is None else acts[:max_tokens]


def shuffled_batches(
    acts: Float[Tensor, "tokens d_in"], batch_size: int, seed: int = 0
) -> Iterator[Float[Tensor, "batch d_in"]]:
    """An endless stream of shuffled `[batch_size, d_in]` batches (an sae_lens data provider).

    Each epoch is a fresh permutation drawn from a generator seeded with `seed`.

    Args:
        acts: The activations, `[tokens, d_in]`.
        batch_size: Rows per batch.
        seed: The shuffling seed.

    Yields:
        `[batch_size, d_in]` batches.

    Raises:
        EmptyActivationsError: If there are fewer activations than one batch.

    Examples:
        >>> import itertools
        >>> import torch
        >>> from reward_lens_tl.sae import shuffled_batches
        >>> acts = torch.arange(10.0)[:, None]  # 10 rows: two batches of 4 per epoch
        >>> for batch in itertools.islice(shuffled_batches(acts, batch_size=4), 3):
        ...     print(batch.flatten().tolist())
        [4.0, 1.0, 7.0, 5.0]
        [3.0, 9.0, 0.0, 8.0]
        [3.0, 9.0, 4.0, 2.0]
    """
    if acts.shape[0] < batch_size:
        raise EmptyActivationsError(
            f"{acts.shape[0]} activations for batches of {batch_size}: collect more tokens or "
            "lower the batch size"
        )
    gen = torch.Generator().manual_seed(seed)
    while True:
        order = torch.randperm(acts.shape[0], generator=gen)
        for start in range(0, acts.shape[0] - batch_size + 1, batch_size):
            yield acts[order[start : start + batch_size].to(acts.device)]


def rebatch(
    chunks: Iterable[Float[Tensor, "tokens d_in"]],
    batch_size: int,
    buffer_batches: int = 16,
    seed: int = 0,
) -> Iterator[Float[Tensor, "batch d_in"]]:
    """Turn a stream of variable-size activation chunks into shuffled fixed-size batches.

    A buffer of about `buffer_batches` batches is filled, shuffled, and its first half is
    emitted (so tokens of one sequence do not sit together in a batch). Ends with the stream.

    Args:
        chunks: The activation chunks, `[tokens, d_in]` each.
        batch_size: Rows per batch.
        buffer_batches: The buffer's size, in batches.
        seed: The shuffling seed.

    Yields:
        `[batch_size, d_in]` batches.

    Examples:
        >>> import torch
        >>> from reward_lens_tl.sae import rebatch
        >>> chunks = [torch.randn(n, 8) for n in (5, 7, 9)]  # 21 rows
        >>> [tuple(b.shape) for b in rebatch(chunks, batch_size=4)]  # the last row is left over
        [(4, 8), (4, 8), (4, 8), (4, 8), (4, 8)]
    """
    gen = torch.Generator().manual_seed(seed)
    buffer: list[Tensor] = []
    held = 0
    for chunk in chunks:
        buffer.append(chunk)
        held += chunk.shape[0]
        if held >= buffer_batches * batch_size:
            pool = torch.cat(buffer)
            pool = pool[torch.randperm(pool.shape[0], generator=gen).to(pool.device)]
            n_out = (pool.shape[0] // 2 // batch_size) * batch_size
            yield from pool[:n_out].split(batch_size)
            buffer, held = [pool[n_out:]], pool.shape[0] - n_out
    if held >= batch_size:
        pool = torch.cat(buffer)
        pool = pool[torch.randperm(pool.shape[0], generator=gen).to(pool.device)]
        n_out = (pool.shape[0] // batch_size) * batch_size
        yield from pool[:n_out].split(batch_size)
