"""The batch layout: each row's first token at column 0, its reading token at column −1.

TransformerLens users index both ends of a batch. From the end: `logits[:, -1]`,
`cache["resid_post", L][:, -1]`, `cache["pattern", L][:, h, -1]`, `pos_slice=-1`, steering
`resid[:, -1] += v`. From the start: attention to BOS (`pattern[:, h, -1, 0]`, the attention
sink), knockouts `pattern[:, :, :, 0] = 0`, `to_str_tokens(ids[i])[0]`, `resid[:, 0]`. Plain
left padding (`[pad, pad, BOS, t1, …, EOS]`) puts pads at column 0 of the shorter rows; right
padding puts them at `-1`. So every batch this library builds is **left padded after the first
token**: each row's pads go between its first token and the rest,

    [BOS, pad, pad, t1, …, EOS]      (a short row)
    [BOS,  t1,  t2, t3, …, EOS]      (the longest row)

Column 0 is every row's first token and column −1 every row's last, so both ends of
TransformerLens's habits are right by construction, including TransformerLens's own `patching`
functions on chosen/rejected rows of one batch, which are then end-aligned. In this library
`padding_side="left"` names this layout (`pad_batch`, `model.to_tokens`,
`model.tokenizer.padding_side`); `"right"` is plain right padding. Columns `1 .. width − len`
of a shorter row are pads, so token `i ≥ 1` of a row of length `n` sits at column
`width − n + i` (`token_columns`; a one-token row, whose only token is read, sits at −1);
masks exclude the pads wherever they are.

Positions stay exact: the attention mask hides the pads, and rotary and absolute positions are
counted over each row's real tokens (TransformerLens derives them from the mask), so a padded
batch scores exactly as each sequence alone. A batch padded by an HF tokenizer
(`tokenizer(texts, padding=True)` with `padding_side="left"`: every pad before the first token)
is read right too, given its mask or with the mask inferred from the pad ids; only its column
0 is then a pad.

Two cases keep `-1` away from the reading token, and `warn_if_last_is_not_read` names
them whenever a user's batch could be read there (a forward returning per-position outputs, and
`run_with_cache`):

- a **right-padded** batch of unequal lengths: `-1` is a pad in the shorter rows. Re-pad with
  `left_pad_tensor` (or `model.to_tokens`) or read `pos_slice="reward"`.
- **pad == EOS** with a template that ends in EOS: HF's rule skips that trailing EOS (it equals
  the pad id), so the reward is read at `-2` in every row. `cache.reward_positions` and
  `pos_slice="reward"` know it.

ArmoRM's own rule (the token before the first pad) is applied to each row's real tokens, so a
padded row reads where the row alone does.

Examples:
    >>> import torch
    >>> ids, mask = left_pad([[5, 6, 7], [8, 9]], pad_token_id=0)
    >>> ids.tolist(), mask.tolist()
    ([[5, 6, 7], [8, 0, 9]], [[1, 1, 1], [1, 0, 1]])
    >>> token_columns(2, 3).tolist()      # where the 2-token row's tokens sit
    [0, 2]
    >>> right = torch.tensor([[5, 6, 7], [8, 9, 0]])
    >>> left_pad_tensor(right, (right != 0).long(), pad_token_id=0)[0].tolist()
    [[5, 6, 7], [8, 0, 9]]
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import sys
import warnings
from collections.abc import Sequence
from types import FrameType
from typing import Any, Literal, cast

import torch
from jaxtyping import Int
from torch import Tensor

from .errors import (
    EmptyInputError,
    InvalidArgumentError,
    MissingAttentionMaskError,
    MissingPadTokenError,
    RewardLensError,
    ShapeMismatchError,
)

__all__ = [
    "ReadingPositionWarning",
    "check_not_padding",
    "checked_positions",
    "hf_last_non_pad",
]

PaddingSide = Literal["left", "right"]
PADDING_SIDES = ("left", "right")


class ReadingPositionWarning(UserWarning):
    """Position `-1` of this batch is not where every row's reward is read.

    Examples:
        Silence it where a `[:, -1]` read is meant:

        >>> import warnings
        >>> warnings.filterwarnings("ignore", category=ReadingPositionWarning)
        >>> warnings.resetwarnings()
    """


def hf_last_non_pad(
    input_ids: Int[Tensor, "batch pos"], pad_token_id: int | None
) -> Int[Tensor, " batch"]:
    """HF sequence-classification pooling: the rightmost token that is not `pad_token_id`.

    With `pad == eos` a trailing EOS is therefore skipped, exactly as in HF. Without a pad id,
    HF only accepts a batch of one and reads the last token; so do we.

    Args:
        input_ids: the token ids (`[batch, pos]`).
        pad_token_id: the padding id, or `None` (then only a batch of one is accepted).

    Returns:
        The reading position of each row.

    Raises:
        MissingPadTokenError: a batch of several rows and no pad id.

    Examples:
        >>> import torch
        >>> from reward_lens_tl.padding import hf_last_non_pad
        >>> hf_last_non_pad(torch.tensor([[5, 6, 7, 0, 0], [5, 6, 7, 8, 9]]), 0).tolist()
        [2, 4]
        >>> hf_last_non_pad(torch.tensor([[5, 6, 7]]), None).tolist()
        [2]
    """
    batch, pos = input_ids.shape
    if pad_token_id is None:
        if batch > 1:
            raise MissingPadTokenError(
                "a batch of several sequences needs a pad token id to find each sequence's "
                "reward position; set tokenizer.pad_token (and model.config.pad_token_id) before "
                "loading, or score sequences one at a time"
            )
        return torch.full((batch,), pos - 1, dtype=torch.long, device=input_ids.device)
    non_pad = (input_ids != pad_token_id).long()
    idx = torch.arange(pos, device=input_ids.device)
    return (idx * non_pad).argmax(-1)


def checked_positions(
    tokens: Int[Tensor, "batch pos"],
    positions: Any,
    attention_mask: Tensor | None,
    pad_token_id: int | None,
) -> Int[Tensor, " batch"]:
    """Explicit reading positions, one per row, checked: integers, inside, not on padding.

    What both backends' `pool_positions(tokens, mask, positions=...)` do with `positions`.

    Args:
        tokens: Token ids, `[batch, pos]`.
        positions: One position per row.
        attention_mask: `[batch, pos]`, or `None` (then trailing pad ids count as padding).
        pad_token_id: The pad id, or `None`.

    Returns:
        The positions, `[batch]` (long).

    Raises:
        InvalidArgumentError: Positions that are not integers.
        ShapeMismatchError: Not one position per row.
        RewardLensError: A position outside the sequence, or on padding.

    Examples:
        >>> ids = torch.tensor([[1, 5, 6], [1, 5, 0]])
        >>> checked_positions(ids, [2, 1], None, 0).tolist()
        [2, 1]
        >>> try:
        ...     checked_positions(ids, [2, 2], None, 0)
        ... except RewardLensError as err:
        ...     print(str(err)[:42])
        positions [2, 2] fall on trailing padding
    """
    pos = torch.as_tensor(positions, device=tokens.device).reshape(-1)
    if pos.is_floating_point() or pos.dtype == torch.bool:
        raise InvalidArgumentError(f"positions must be integers, got {positions!r}")
    pos = pos.long()
    if pos.shape[0] != tokens.shape[0]:
        raise ShapeMismatchError(
            f"{pos.shape[0]} positions for a batch of {tokens.shape[0]} sequences"
        )
    if bool(((pos < 0) | (pos >= tokens.shape[1])).any()):
        raise RewardLensError(
            f"positions {pos.tolist()} outside [0, {tokens.shape[1]}) for this batch"
        )
    if attention_mask is None and pad_token_id is not None:
        last_real = hf_last_non_pad(tokens, pad_token_id)
        if bool((pos > last_real).any()):
            raise RewardLensError(
                f"positions {pos.tolist()} fall on trailing padding (last real tokens "
                f"{last_real.tolist()}); pick real tokens"
            )
    check_not_padding(tokens, pos, attention_mask)
    return pos


def check_not_padding(
    tokens: Int[Tensor, "batch pos"], pos: Int[Tensor, " batch"], attention_mask: Tensor | None
) -> None:
    """Refuse reading positions that `attention_mask` marks as padding.

    Args:
        tokens: Token ids, `[batch, pos]`.
        pos: One reading position per row.
        attention_mask: `[batch, pos]`, or `None` (nothing to check).

    Raises:
        RewardLensError: A reading position on padding.

    Examples:
        >>> ids, mask = torch.tensor([[1, 0, 5]]), torch.tensor([[1, 0, 1]])
        >>> check_not_padding(ids, torch.tensor([2]), mask)   # a real token: nothing raised
    """
    if attention_mask is None:
        return
    rows = torch.arange(tokens.shape[0], device=tokens.device)
    masked = attention_mask.to(tokens.device)[rows, pos.to(tokens.device)] == 0
    if bool(masked.any()):
        raise RewardLensError(
            f"the reading position of rows {masked.nonzero().flatten().tolist()} is "
            "padding according to attention_mask (input_ids and attention_mask disagree "
            "about padding, or an explicit position points at a pad)"
        )


def left_pad(
    sequences: Sequence[Sequence[int]],
    pad_token_id: int | None,
    padding_side: PaddingSide = "left",
) -> tuple[Int[Tensor, "batch pos"], Int[Tensor, "batch pos"]]:
    """Pad id sequences into `(input_ids, attention_mask)`; left padding unless asked.

    `"left"` is this library's layout: each row's pads go after its first token, so column 0
    holds every row's first token and column −1 its last (see the module docstring);
    `"right"` pads after the last token. Each sequence must hold integer ids (Python ints, an
    integer tensor or array): floats, including integral ones like `1.0`, and bools are refused
    with `InvalidArgumentError`, never truncated to ids.

    Args:
        sequences: The id sequences.
        pad_token_id: The pad id (`None` is accepted for a single sequence).
        padding_side: `"left"` (pads after the first token) or `"right"`.

    Returns:
        `(input_ids, attention_mask)`, each `[batch, width]`.

    Raises:
        InvalidArgumentError: An unknown side, or ids that are not integers.
        EmptyInputError: No sequence, or an empty one.
        MissingPadTokenError: Several sequences and no pad id.

    Examples:
        >>> left_pad([[5, 6, 7], [8, 9]], pad_token_id=0)[0].tolist()
        [[5, 6, 7], [8, 0, 9]]
        >>> left_pad([[5, 6, 7], [8]], pad_token_id=0)[0].tolist()   # one token: it is read
        [[5, 6, 7], [0, 0, 8]]
        >>> left_pad([[5, 6, 7], [8, 9]], 0, "right")[0].tolist()
        [[5, 6, 7], [8, 9, 0]]
    """
    if padding_side not in PADDING_SIDES:
        raise InvalidArgumentError(
            f"padding_side must be one of {PADDING_SIDES}, got {padding_side!r}"
        )
    seqs = [_id_row(s, i) for i, s in enumerate(sequences)]
    if not seqs:
        raise EmptyInputError("got no sequences to pad")
    if pad_token_id is None:
        if len(seqs) > 1:
            raise MissingPadTokenError(
                "cannot batch several sequences without a pad token id; set tokenizer.pad_token"
            )
        pad_token_id = 0
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, seq in enumerate(seqs):
        cols = token_columns(len(seq), width, padding_side)
        ids[i, cols] = seq
        mask[i, cols] = 1
    return ids, mask


def hf_pad(
    sequences: Sequence[Sequence[int]],
    pad_token_id: int | None,
    padding_side: PaddingSide = "left",
) -> tuple[Int[Tensor, "batch pos"], Int[Tensor, "batch pos"]]:
    """Pad as an HF tokenizer pads: `"left"` puts every pad before the first token.

    For a policy's (language model's) batches, whose next-token habit `logits[:, :-1]` against
    `ids[:, 1:]` needs each row's tokens contiguous (`reward_lens_tl.implicit`, sampling), and
    for comparisons with an HF model's own batches (HF reads plain left or right padding when
    given each row's positions). A reward model's batches come from `left_pad`.

    Args:
        sequences: The id sequences.
        pad_token_id: The pad id.
        padding_side: `"left"` (every pad first) or `"right"`.

    Returns:
        `(input_ids, attention_mask)`.

    Examples:
        >>> hf_pad([[5, 6, 7], [8, 9]], 0)[0].tolist()
        [[5, 6, 7], [0, 8, 9]]
    """
    ids, mask = left_pad(sequences, pad_token_id, "right")
    if padding_side == "left":
        shift = (mask == 0).sum(1)
        cols = (torch.arange(ids.shape[1])[None] - shift[:, None]) % ids.shape[1]
        ids, mask = ids.gather(1, cols), mask.gather(1, cols)
    return ids, mask


def token_columns(length: int, width: int, padding_side: PaddingSide = "left") -> Tensor:
    """The columns of a `length`-token row's tokens in a padded batch of `width` columns.

    The one rule for where a row's tokens sit: `"left"` keeps token 0 at column 0 and puts token
    `i ≥ 1` at `width − length + i` (pads after the first token); `"right"` puts token `i` at `i`.

    Args:
        length: The row's number of tokens (at least 1).
        width: The batch's width (at least `length`).
        padding_side: `"left"` or `"right"`.

    Returns:
        `[length]` column indices, increasing.

    Raises:
        InvalidArgumentError: An unknown side, or a row longer than the batch.

    Examples:
        >>> token_columns(3, 5).tolist(), token_columns(3, 5, "right").tolist()
        ([0, 3, 4], [0, 1, 2])
    """
    if padding_side not in PADDING_SIDES:
        raise InvalidArgumentError(
            f"padding_side must be one of {PADDING_SIDES}, got {padding_side!r}"
        )
    if not 0 < length <= width:
        raise InvalidArgumentError(f"a row of {length} tokens does not fit a width of {width}")
    cols = torch.arange(length)
    if padding_side == "left":  # a one-token row: its token is its reading token, at -1
        cols[min(1, length - 1) :] += width - length
    return cols


def real_columns(
    attention_mask: Int[Tensor, "batch pos"],
) -> tuple[Int[Tensor, "batch pos"], Int[Tensor, "batch pos"]]:
    """`(columns, keep)`: the column of each row's `p`-th real token, whatever the layout.

    Works for every padding layout (this library's, plain left, right, or pads anywhere):
    `columns[b, p]` is the column of row `b`'s `p`-th token with `attention_mask == 1`, and
    `keep[b, p]` says whether the row has a `p`-th token (where it has not, `columns` repeats
    the row's last column).

    Args:
        attention_mask: `[batch, pos]`, nonzero at real tokens.

    Returns:
        `(columns, keep)`, each `[batch, pos]`, long.

    Examples:
        >>> cols, keep = real_columns(torch.tensor([[1, 1, 1], [1, 0, 1]]))
        >>> cols.tolist(), keep.tolist()
        ([[0, 1, 2], [0, 2, 2]], [[1, 1, 1], [1, 1, 0]])
    """
    pads_first = (attention_mask == 0).to(torch.uint8)
    order = torch.sort(pads_first, dim=1, stable=True)  # real columns first, in order
    keep = order.values == 0
    last = order.indices.gather(1, (keep.sum(1, keepdim=True) - 1).clamp(min=0))
    cols = torch.where(keep, order.indices, last.expand_as(order.indices))
    return cols.long(), keep.long()


def _id_row(seq: Sequence[int], index: int) -> Int[Tensor, " pos"]:
    """One sequence of token ids as a 1-D long tensor.

    Anything that is not integer ids (floats, even integral ones like `1.0`, bools, text, nested
    lists) is refused, never cast.
    """
    try:
        if isinstance(seq, Tensor):
            row = seq.detach().cpu()
        else:  # arrays as they are; other sequences (tuples, lists of ints) element by element
            row = torch.as_tensor(seq if hasattr(seq, "__array__") else list(seq))
    except (TypeError, ValueError, RuntimeError) as err:
        raise InvalidArgumentError(
            f"sequence {index} is not a sequence of integer token ids ({err}); encode text "
            "with model.encode(prompt, response) or reward_lens_tl.inputs.encode_conversation"
        ) from None
    if row.numel() == 0:
        raise EmptyInputError(
            f"sequence {index} has no token ids; a reward needs at least one token"
        )
    if row.dtype == torch.bool or row.is_floating_point() or row.is_complex() or row.ndim != 1:
        kind = f"a {row.ndim}-D tensor" if row.ndim != 1 else f"{row.dtype} values"
        raise InvalidArgumentError(
            f"sequence {index} holds {kind} (first values {row.reshape(-1)[:4].tolist()}), not "
            "integer token ids; ids are never rounded or cast: pass the tokenizer's integer ids"
        )
    return row.long()


def left_pad_tensor(
    input_ids: Int[Tensor, "batch pos"],
    attention_mask: Int[Tensor, "batch pos"],
    pad_token_id: int | None,
) -> tuple[Int[Tensor, "batch pos"], Int[Tensor, "batch pos"]]:
    """The same rows, left padded (this library's layout: pads after each row's first token).

    Each row's real tokens (`attention_mask == 1`, in order) are laid out as `left_pad` lays
    them. Works for right-, left- or mixed-padded input; nothing is modified.

    Args:
        input_ids: `[batch, pos]`.
        attention_mask: `[batch, pos]`, nonzero at real tokens.
        pad_token_id: The pad id.

    Returns:
        `(input_ids, attention_mask)` of the same width.

    Examples:
        >>> ids = torch.tensor([[0, 0, 5, 6], [7, 8, 9, 4]])   # an HF tokenizer's left padding
        >>> left_pad_tensor(ids, (ids != 0).long(), 0)[0].tolist()
        [[5, 0, 0, 6], [7, 8, 9, 4]]
    """
    rows = [
        ids[m.bool()].tolist() for ids, m in zip(input_ids.cpu(), attention_mask.cpu(), strict=True)
    ]
    ids, mask = left_pad(rows, pad_token_id)
    width = input_ids.shape[1]
    if ids.shape[1] < width:  # keep the width: more pads after each row's first token
        pad = pad_token_id if pad_token_id is not None else 0
        extra = width - ids.shape[1]
        ids = torch.cat([ids[:, :1], ids.new_full((ids.shape[0], extra), pad), ids[:, 1:]], 1)
        mask = torch.cat([mask[:, :1], mask.new_zeros((mask.shape[0], extra)), mask[:, 1:]], 1)
    return ids.to(input_ids.device), mask.to(input_ids.device)


def padding_mask(
    tokens: Int[Tensor, "batch pos"],
    pad_token_id: int | None,
    bos_token_ids: set | frozenset = frozenset(),
) -> Int[Tensor, "batch pos"] | None:
    """The attention mask of a padded batch, from its pad ids (`None` when nothing is padding).

    Two layouts are recognised: this library's (a run of pad ids right after each row's first
    token) and plain left padding (a run of pad ids from column 0, as an HF tokenizer with
    `padding_side="left"` builds). Right padding needs no mask (causal attention never looks
    ahead) and gets none. When the pad id is also a BOS id, runs of different lengths cannot be
    told from BOS and are refused.

    Args:
        tokens: Token ids, `[batch, pos]`.
        pad_token_id: The pad id (`None`: no padding).
        bos_token_ids: The BOS ids (a pad id among them makes unequal runs ambiguous).

    Returns:
        The mask (1 on real tokens), or `None`.

    Raises:
        MissingAttentionMaskError: Runs of different lengths of a pad id that is also BOS.
        EmptyInputError: A row that is all padding.

    Examples:
        >>> padding_mask(torch.tensor([[1, 5, 6], [1, 0, 6]]), 0).tolist()
        [[1, 1, 1], [1, 0, 1]]
        >>> padding_mask(torch.tensor([[1, 5, 6], [0, 1, 6]]), 0).tolist()
        [[1, 1, 1], [0, 1, 1]]
        >>> padding_mask(torch.tensor([[1, 5, 6], [1, 7, 0]]), 0) is None   # right padding
        True
    """
    if pad_token_id is None or tokens.shape[1] < 2:
        return None
    is_pad = (tokens == pad_token_id).long()
    leading = is_pad.cumprod(dim=1).sum(dim=1)  # a run from column 0 (plain left padding)
    after_first = is_pad[:, 1:].cumprod(dim=1).sum(dim=1) * (leading == 0)
    if pad_token_id in bos_token_ids:
        if bool((leading != leading[0]).any()) or bool((after_first > 0).any()):
            raise MissingAttentionMaskError(
                f"rows start with {leading.tolist()} copies of token {pad_token_id} (and "
                f"{after_first.tolist()} after their first token), which is both the pad and "
                "the BOS id: padding cannot be told from BOS. Pass attention_mask (pad_batch "
                "returns it)"
            )
        return None
    if not bool(((leading > 0) | (after_first > 0)).any()):
        return None
    if bool((leading == tokens.shape[1]).any()):
        raise EmptyInputError("a row is all padding: every sequence needs a real token")
    positions = torch.arange(tokens.shape[1], device=tokens.device)[None, :]
    pads = (positions < leading[:, None]) | ((positions >= 1) & (positions <= after_first[:, None]))
    return (~pads).long()


def tokenizer_with_side(
    tokenizer: Any, padding_side: PaddingSide, bos_token_ids: Sequence[int | None] = ()
) -> Any:
    """A shallow copy of `tokenizer` whose `padding_side` is `padding_side` (`None` stays).

    `padding_side` is a plain attribute of an HF tokenizer, so the copy answers "which way does
    this model pad" without changing the tokenizer the user passed. An HF tokenizer's own
    `padding=True` with `"left"` puts every pad before the first token (it cannot express this
    library's layout); the model reads such a batch right, given its mask or with the mask
    inferred from the pad ids.

    Args:
        tokenizer: An HF tokenizer, or `None`.
        padding_side: `"left"` or `"right"`.
        bos_token_ids: The model's BOS ids besides the tokenizer's (a pad id among them makes
            TL's `get_attention_mask` refuse what it cannot tell from BOS, as the model does).

    Returns:
        The copy (or `None`).

    Raises:
        InvalidArgumentError: An unknown side.

    Examples:
        >>> from reward_lens_tl.testing import tiny_tokenizer
        >>> tok = tiny_tokenizer()
        >>> tokenizer_with_side(tok, "left").padding_side, tok.padding_side
        ('left', 'right')
    """
    if padding_side not in PADDING_SIDES:
        raise InvalidArgumentError(
            f"padding_side must be one of {PADDING_SIDES}, got {padding_side!r}"
        )
    if tokenizer is None:
        return None
    own = copy.copy(tokenizer)
    own.padding_side = padding_side
    own._reward_lens_layout = True  # TL's get_attention_mask then reads our layout
    own._reward_lens_bos = frozenset(b for b in bos_token_ids if b is not None)
    return own


def padded_slice_problem(pos_slice: object, attention_mask: Tensor | None) -> str | None:
    """Why `pos_slice` would read pads as if they were tokens, or `None` when it does not.

    Rows of different lengths are aligned at both ends only: column 0 is every row's first
    token and column −1 its last, and in between a shorter row holds its pads (after its first
    token). A selection of all columns, or of the last one alone (whose own check is
    `ReadingPositionWarning`), is accepted; any other selection that lands on a pad of some row
    (a prefix `slice(0, k)`, a middle column, the last `k` columns of a batch with a row shorter
    than `k`) is a problem.

    Args:
        pos_slice: TL's `pos_slice` (an int, slice, list or `Slice`; `None` and strings pass).
        attention_mask: `[batch, pos]`, nonzero at real tokens, or `None`.

    Returns:
        The problem, or `None`.

    Examples:
        >>> mask = torch.tensor([[1, 1, 1, 1], [1, 0, 1, 1]])
        >>> padded_slice_problem(0, mask) is None, padded_slice_problem(-1, mask) is None
        (True, True)
        >>> padded_slice_problem(slice(0, 2), mask)[:40]
        'pos_slice=slice(0, 2, None) selects colu'
    """
    if attention_mask is None or pos_slice is None or isinstance(pos_slice, str):
        return None
    from transformer_lens.utilities.slice import Slice

    width = attention_mask.shape[-1]
    kept = torch.as_tensor(Slice.unwrap(cast(Any, pos_slice)).indices(width)).reshape(-1) % width
    if kept.numel() in (0, width) or (kept.numel() == 1 and int(kept[0]) == width - 1):
        return None
    pads = attention_mask.to(kept.device)[:, kept] == 0
    if not bool(pads.any()):
        return None
    rows = pads.any(1).nonzero().flatten().tolist()
    return (
        f"pos_slice={pos_slice!r} selects columns {kept.tolist()[:8]}, which hold padding in rows "
        f"{rows[:8]}: rows of different lengths share only their first column (0) and their "
        "last (-1), and a shorter row's pads follow its first token. Read column 0 or -1 "
        "(or pos_slice='reward'), run the rows one at a time, or index each row's own tokens "
        "with reward_lens_tl.padding.real_columns(attention_mask)"
    )


def last_position_problem(positions: Tensor, n_pos: int, pad_token_id: int | None) -> str | None:
    """Why position `-1` is not every row's reading position, or `None` when it is."""
    pos = positions.reshape(-1)
    if bool((pos == n_pos - 1).all()):
        return None
    if bool((pos == pos[0]).all()):
        back = n_pos - int(pos[0])
        return (
            f"every row's reward is read at position {-back} (the last token is the pad id "
            f"{pad_token_id}, e.g. a trailing EOS when pad == EOS, which HF's pooling rule skips)"
        )
    short = (pos < n_pos - 1).nonzero().flatten().tolist()
    return (
        f"the reward of rows {short[:8]} is read before the last position (reading positions "
        f"{pos.tolist()[:8]} in a batch of width {n_pos}: right padding, or rows of unequal "
        "lengths)"
    )


def warn_if_last_is_not_read(positions: Tensor, n_pos: int, pad_token_id: int | None) -> None:
    """Warn when `[:, -1]` would read something else than each row's reward.

    The warning is a `ReadingPositionWarning`, at the user's line.
    """
    problem = last_position_problem(positions, n_pos, pad_token_id)
    if problem is None:
        return
    warnings.warn(
        f"position -1 of this batch is not where the reward is read: {problem}. TransformerLens "
        "idioms that index the last position (logits[:, -1], cache[...][:, -1], pos_slice=-1, "
        "steering resid[:, -1]) will read other tokens. Left-pad the batch "
        "(model.to_tokens([...]), reward_lens_tl.pad_batch, or "
        "reward_lens_tl.padding.left_pad_tensor(ids, mask, pad_id)), or read "
        "cache.reward_positions / pos_slice='reward' / model.rewards(ids).",
        ReadingPositionWarning,
        stacklevel=_user_stacklevel(),
    )


_INTERNAL = ("reward_lens_tl", "transformer_lens", "sae_lens", "torch", "contextlib")


def _user_stacklevel() -> int:
    """The stack level of the first frame outside this library, TransformerLens and torch.

    The warning then points at the user's line (and Python's once-per-line filter works).
    """
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.split(".")[0] not in _INTERNAL:
            return level
        frame, level = frame.f_back, level + 1
    return 1


def called_by_user(depth: int = 1) -> bool:
    """Whether the code that called the function `depth` frames up is a user's.

    Torch's module machinery (`Module.__call__`) is skipped; code of this library,
    TransformerLens and sae_lens is not a user's.

    Args:
        depth: Which function's caller to judge (1: the function calling this one).

    Returns:
        Whether that caller is outside the library.

    Examples:
        >>> called_by_user(0)   # a doctest runs with this module's globals: library code
        False
    """
    frame: FrameType | None = sys._getframe(depth + 1)
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] == "torch":
        frame = frame.f_back
    return frame is not None and frame.f_globals.get("__name__", "").split(".")[0] not in _INTERNAL


_SILENCED = contextvars.ContextVar("reward_lens_reading_position_silenced", default=False)


@contextlib.contextmanager
def reading_position_known():
    """Silence `ReadingPositionWarning` for the library's own forwards.

    Library code that reads each row at its own reading position (not at `-1`) runs its forwards
    inside this, so users see `ReadingPositionWarning` only for their own.
    """
    token = _SILENCED.set(True)
    try:
        yield
    finally:
        _SILENCED.reset(token)


def warnings_silenced() -> bool:
    """Whether reading-position warnings are silenced here (inside `library_reads`)."""
    return _SILENCED.get()
