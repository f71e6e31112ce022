"""Preference pairs as model batches: chosen and rejected of a chunk in one padded batch.

>>> from reward_lens_tl import HookedRewardModel
>>> from reward_lens_tl.testing import tiny_reward_model, tiny_tokenizer
>>> from types import SimpleNamespace as Pair
>>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"), tiny_tokenizer())
>>> [(ids.shape[0], n) for ids, _, n in pair_batches(model, [Pair(prompt="w6", chosen="w7",
...                                                                  rejected="w8 w9")] * 3, 2)]
[(4, 2), (2, 1)]
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from torch import Tensor

from .inputs import EncodedConversation, pad_batch


def encoded_pair(model, pair: Any, truncation: str = "error"):
    """``(chosen, rejected)`` encodings of a pair object or an already-encoded tuple."""
    if isinstance(pair, tuple) and all(isinstance(p, EncodedConversation) for p in pair):
        return pair
    return (
        model.encode(pair.prompt, pair.chosen, truncation=truncation),
        model.encode(pair.prompt, pair.rejected, truncation=truncation),
    )


def pair_batches(
    model, pairs: Sequence, batch_size: int = 16, truncation: str = "error"
) -> Iterator[tuple[Tensor, Tensor, int]]:
    """Yield ``(ids, mask, n)``: rows ``[:n]`` are chosen, rows ``[n:]`` rejected."""
    pairs = list(pairs)
    device = model.cfg.device
    for start in range(0, len(pairs), batch_size):
        chunk = [encoded_pair(model, p, truncation) for p in pairs[start : start + batch_size]]
        ids, mask = pad_batch(
            [c.ids for c, _ in chunk] + [r.ids for _, r in chunk], model.pad_token_id
        )
        yield ids.to(device), mask.to(device), len(chunk)
