"""Left padding, and the one check that keeps TransformerLens's `[:, -1]` honest.

TransformerLens users read the last position: `logits[:, -1]`, `cache["resid_post", L][:, -1]`,
`cache["pattern", L][:, h, -1]`, `pos_slice=-1`, steering `resid[:, -1] += v`. A reward is
read at one position per sequence (HF's pooling rule: the last token that is not padding), so
every batch this library builds is **left padded**: then each row's reward is read at the same
position counted from the end, `-1` whenever the pooling token is the last real token, and all
of those spellings are right by construction — including TransformerLens's own `patching`
functions on chosen/rejected rows of one batch, which are then end-aligned.

Positions stay exact under left padding: the attention mask hides the pads, and rotary and
absolute positions are counted from each row's first real token (TransformerLens derives them
from the mask), so a left-padded batch scores exactly as each sequence alone.

Two cases keep `-1` away from the reading token, and `warn_if_last_is_not_read` names
them whenever a user's batch could be read there (a forward returning per-position outputs, and
`run_with_cache`):

- a **right-padded** batch of unequal lengths (built by hand): `-1` is a pad in the shorter
  rows. Re-pad with `left_pad` (or `model.to_tokens`) or read `pos_slice="reward"`.
- **pad == EOS** with a template that ends in EOS: HF's rule skips that trailing EOS (it equals
  the pad id), so the reward is read at `-2` in every row. `cache.reward_positions` and
  `pos_slice="reward"` know it.

ArmoRM's own rule (the token before the first pad) reads the last position of a left-padded row,
so it needs nothing special.

Examples:
    >>> import torch
    >>> ids, mask = left_pad([[5, 6, 7], [8]], pad_token_id=0)
    >>> ids.tolist(), mask.tolist()
    ([[5, 6, 7], [0, 0, 8]], [[1, 1, 1], [0, 0, 1]])
    >>> right = torch.tensor([[5, 6, 7], [8, 0, 0]])
    >>> left_pad_tensor(right, (right != 0).long(), pad_token_id=0)[0].tolist()
    [[5, 6, 7], [0, 0, 8]]
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import warnings
from collections.abc import Sequence
from types import FrameType
from typing import Literal

import torch
from jaxtyping import Int
from torch import Tensor

from .errors import EmptyInputError, InvalidArgumentError, MissingPadTokenError

PaddingSide = Literal["left", "right"]
PADDING_SIDES = ("left", "right")


class ReadingPositionWarning(UserWarning):
    """Position `-1` of this batch is not where every row's reward is read."""


def left_pad(
    sequences: Sequence[Sequence[int]],
    pad_token_id: int | None,
    padding_side: PaddingSide = "left",
) -> tuple[Int[Tensor, "batch pos"], Int[Tensor, "batch pos"]]:
    """Pad id sequences into `(input_ids, attention_mask)`; left padding unless asked.

    Each sequence must hold integer ids (Python ints, an integer tensor or array): floats,
    including integral ones like `1.0`, and bools are refused with
    `InvalidArgumentError`, never truncated to ids.
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
        span = slice(width - len(seq), width) if padding_side == "left" else slice(0, len(seq))
        ids[i, span] = seq
        mask[i, span] = 1
    return ids, mask


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
    """The same rows, left padded.

    Each row's real tokens (`attention_mask == 1`, in order) moved to the end. Works for right-,
    left- or mixed-padded input; nothing is modified.
    """
    rows = [
        ids[m.bool()].tolist() for ids, m in zip(input_ids.cpu(), attention_mask.cpu(), strict=True)
    ]
    ids, mask = left_pad(rows, pad_token_id)
    width = input_ids.shape[1]
    if ids.shape[1] < width:  # keep the width (a row may have been all padding: refused above)
        ids = torch.cat(
            [ids.new_full((ids.shape[0], width - ids.shape[1]), int(ids[0, 0])), ids], 1
        )
        mask = torch.cat([mask.new_zeros((mask.shape[0], width - mask.shape[1])), mask], 1)
    return ids.to(input_ids.device), mask.to(input_ids.device)


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
