"""Preference pairs as model batches: chosen and rejected of a chunk in one padded batch.

A pair is anything with ``prompt``, ``chosen`` and ``rejected`` (e.g.
:class:`reward_lens_tl.data.PreferencePair`) or an already-encoded ``(chosen, rejected)`` tuple
of :class:`~reward_lens_tl.inputs.EncodedConversation`. :func:`encode_pairs` encodes a whole set
with a per-pair error policy: ``on_error="raise"`` stops at the first pair that cannot be
encoded (the error names the pair), ``"skip"`` records it as a :class:`SkippedPair` and goes on.

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
from dataclasses import dataclass
from typing import Any, Literal

from torch import Tensor

from .errors import (
    EmptyInputError,
    InvalidArgumentError,
    RewardLensError,
    SequenceTooLongError,
)
from .inputs import EncodedConversation, pad_batch

OnError = Literal["raise", "skip"]
Encoded = tuple[EncodedConversation, EncodedConversation]


@dataclass(frozen=True)
class SkippedPair:
    """A pair that was not scored: its position in the input, its source record (when the
    loader recorded one) and why."""

    index: int
    record: int | None
    reason: str

    def __str__(self) -> str:
        where = f"pair {self.index}" + ("" if self.record is None else f" (record {self.record})")
        return f"{where}: {self.reason}"


def check_batch_size(batch_size: Any) -> int:
    """``batch_size`` as a positive int, or :class:`InvalidArgumentError`."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise InvalidArgumentError(f"batch_size must be a positive int, got {batch_size!r}")
    return batch_size


def encoded_pair(model, pair: Any, truncation: str = "error") -> Encoded:
    """``(chosen, rejected)`` encodings of a pair object or an already-encoded tuple; either
    must fit the model's context."""
    if isinstance(pair, tuple) and all(isinstance(p, EncodedConversation) for p in pair):
        for side, enc in zip(("chosen", "rejected"), pair, strict=True):
            if len(enc) > model.cfg.n_ctx:
                raise SequenceTooLongError(
                    f"the {side} sequence has {len(enc)} tokens, more than the model's context "
                    f"of {model.cfg.n_ctx}; encode it with truncation='left' or 'right'"
                )
        return pair
    return (
        model.encode(pair.prompt, pair.chosen, truncation=truncation),
        model.encode(pair.prompt, pair.rejected, truncation=truncation),
    )


def encode_pairs(
    model, pairs: Sequence, truncation: str = "error", on_error: OnError = "raise"
) -> tuple[list[Encoded], list[int], list[SkippedPair]]:
    """Encode every pair: ``(encoded, kept_indices, skipped)``.

    With ``on_error="raise"`` the first failure is re-raised with the same class and a message
    that starts with the pair's index (and source record); with ``"skip"`` it is recorded.
    """
    if on_error not in ("raise", "skip"):
        raise InvalidArgumentError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    if len(pairs) == 0:
        raise EmptyInputError("the pair set is empty: nothing to score")
    encoded, kept, skipped = [], [], []
    for i, pair in enumerate(pairs):
        try:
            encoded.append(encoded_pair(model, pair, truncation))
        except RewardLensError as err:
            skip = SkippedPair(i, getattr(pair, "record", None), str(err))
            if on_error == "raise":
                raise type(err)(f"{skip} (pass on_error='skip' to skip such pairs)") from err
            skipped.append(skip)
            continue
        kept.append(i)
    return encoded, kept, skipped


def pair_batches(
    model, pairs: Sequence, batch_size: int = 16, truncation: str = "error"
) -> Iterator[tuple[Tensor, Tensor, int]]:
    """Yield ``(ids, mask, n)``: rows ``[:n]`` are chosen, rows ``[n:]`` rejected."""
    check_batch_size(batch_size)
    pairs = list(pairs)
    device = model.cfg.device
    for start in range(0, len(pairs), batch_size):
        chunk = [encoded_pair(model, p, truncation) for p in pairs[start : start + batch_size]]
        ids, mask = pad_batch([c for c, _ in chunk] + [r for _, r in chunk], model.pad_token_id)
        yield ids.to(device), mask.to(device), len(chunk)
