"""Pairs and conversations as padded batches with explicit response-token masks.

A response mask marks the *target* tokens whose log-probs count: position `t` is set when token
`ids[t]` belongs to the response. `include_suffix` decides whether the template's suffix after
the response content (end-of-turn, EOS; see `EncodedConversation`)
counts. A sequence's first token never counts (no token predicts it). A policy's batches are
left padded with every pad first (`reward_lens_tl.padding.hf_pad`, as an HF tokenizer pads for
generation), so each row's tokens are contiguous and the language-model habit `logits[:, :-1]`
against `ids[:, 1:]` pairs each token with the one that predicts it (a reward model's batches put
the pads after the first token instead: no next-token pairs are read there). A shorter
sequence's mask is shifted right by its padding.

Examples:
    >>> from reward_lens_tl.inputs import EncodedConversation
    >>> enc = EncodedConversation(ids=(1, 4, 9, 5, 7, 8, 6, 2), response_start=4, response_end=6)
    >>> response_masks([enc], include_suffix=True).tolist()
    [[0, 0, 0, 0, 1, 1, 1, 1]]
    >>> response_masks([enc], include_suffix=False).tolist()
    [[0, 0, 0, 0, 1, 1, 0, 0]]
    >>> response_masks([enc], include_suffix=False, width=10).tolist()   # two pads on the left
    [[0, 0, 0, 0, 0, 0, 1, 1, 0, 0]]
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch
from jaxtyping import Int
from torch import Tensor

from ..errors import EmptyInputError, InvalidArgumentError
from ..inputs import EncodedConversation
from ..padding import PaddingSide, hf_pad
from ..pair_batches import encoded_pair

__all__ = ["response_masks"]

Batch = tuple[Int[Tensor, "batch pos"], Int[Tensor, "batch pos"], Int[Tensor, "batch pos"]]


def response_masks(
    encodings: Sequence[EncodedConversation],
    include_suffix: bool = True,
    eos_token_id: int | None = None,
    width: int | None = None,
    padding_side: PaddingSide = "left",
) -> Int[Tensor, "batch pos"]:
    """`[batch, width]` long mask of each conversation's response tokens.

    Laid out like `reward_lens_tl.padding.hf_pad` pads them (every pad first unless asked).

    Args:
        encodings: The conversations.
        include_suffix: Whether the template's suffix after the response content counts.
        eos_token_id: The EOS token's id (to find the suffix).
        width: The padded width; defaults to the longest conversation's length.
        padding_side: `"left"` or `"right"`.

    Returns:
        The mask.

    Raises:
        InvalidArgumentError: When `width` is shorter than the longest conversation.

    Examples:
        >>> from reward_lens_tl.implicit import response_masks
        >>> from reward_lens_tl.inputs import EncodedConversation
        >>> short = EncodedConversation((1, 4, 5, 7, 6, 2), response_start=3, response_end=4)
        >>> long = EncodedConversation((1, 4, 9, 5, 7, 8, 6, 2), response_start=4, response_end=6)
        >>> response_masks([short, long]).tolist()  # left padded; suffix `6, 2` counts
        [[0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 1, 1, 1, 1]]
        >>> response_masks([short, long], include_suffix=False, padding_side="right").tolist()
        [[0, 0, 0, 1, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1, 0, 0]]
    """
    longest = max(len(e) for e in encodings)
    width = width if width is not None else longest
    if width < longest:
        raise InvalidArgumentError(f"width={width} is shorter than the longest conversation")
    mask = torch.zeros((len(encodings), width), dtype=torch.long)
    for row, enc in enumerate(encodings):
        offset = width - len(enc) if padding_side == "left" else 0
        end = len(enc) if include_suffix else enc.suffix_start(eos_token_id)
        mask[row, offset + max(enc.response_start, 1) : offset + end] = 1
    return mask


def predicting_mask(response_mask: Tensor, dtype=torch.float32) -> Tensor:
    """1 at each position whose logits score a response token.

    Position `t − 1` predicts token `t`: the response mask shifted left by one.

    Args:
        response_mask: The response mask.
        dtype: The output's dtype.

    Returns:
        The predicting mask.

    Examples:
        >>> predicting_mask(torch.tensor([[0, 0, 1, 1, 0]])).tolist()
        [[0.0, 1.0, 1.0, 0.0, 0.0]]
    """
    out = torch.zeros(response_mask.shape, dtype=dtype, device=response_mask.device)
    out[:, :-1] = (response_mask[:, 1:] != 0).to(dtype)
    return out


def pair_chunks(
    model: Any, pairs: Sequence[Any], batch_size: int
) -> Iterator[tuple[list[EncodedConversation], int]]:
    """Chunks of `batch_size` pairs as one list `chosen + rejected` and the count `n`.

    Each chunk is encoded only when it is reached (memory bounded by the chunk).

    Args:
        model: The model whose `encode` reads text.
        pairs: The preference pairs.
        batch_size: Pairs per chunk.

    Yields:
        The chunk's conversations and its number of pairs.

    Raises:
        EmptyInputError: When no pair is given.
    """
    pairs = list(pairs)
    if not pairs:
        raise EmptyInputError("no pairs given; a comparison needs at least one pair")
    for start in range(0, len(pairs), batch_size):
        chunk = [encoded_pair(model, p) for p in pairs[start : start + batch_size]]
        yield [c for c, _ in chunk] + [r for _, r in chunk], len(chunk)


def batch_encodings(
    encodings: Sequence[EncodedConversation],
    pad_token_id: int | None,
    include_suffix: bool = True,
    eos_token_id: int | None = None,
    device: Any = None,
) -> Batch:
    """`(input_ids, attention_mask, response_mask)` of left-padded conversations (`hf_pad`).

    Args:
        encodings: The conversations.
        pad_token_id: The padding id.
        include_suffix: Whether the template's suffix after the response content counts.
        eos_token_id: The EOS token's id.
        device: Where to put the tensors.

    Returns:
        The batch.
    """
    ids, attention = hf_pad([e.ids for e in encodings], pad_token_id)
    resp = response_masks(encodings, include_suffix, eos_token_id, ids.shape[1])
    return ids.to(device), attention.to(device), resp.to(device)
