"""Which position of the clean run corresponds to which position of the corrupted run.

A chosen and a rejected response rarely have the same length, so "patch position 5" needs a
rule. Three are offered, and none of them silently copies `[0:min_len]`:

- `"end"`: end-aligned at the reward-reading token. Offset `k` pairs position
  `pool_target - k` with `pool_source - k` for `k = 0 .. min(pool_target, pool_source)`;
  the grid's position axis runs from the earliest shared offset to the reading token (last
  column = the token the reward is read at).
- `"prefix"`: the shared prompt prefix, position `p` with `p` for `p < prefix_length`.
  The length comes from `prefix_length=` or from `EncodedConversation`'s
  `response_start` (both conversations must agree). Positions whose tokens *and* prefixes are
  identical in both runs carry identical activations (causal attention), so their effects are
  exactly zero: this alignment is meant for corrupted *prompts* of the same length.
- `"exact"`: position `p` with `p`; both runs must have the same length, else
  `AlignmentError`.

Each run is stripped of its padding (a row of a padded batch, e.g. `model.to_tokens([...])[1]`,
whose pads follow its first token) and cut after its reward-reading token: later tokens (right
padding, a trailing EOS that the pooling rule skips) cannot influence the reward under causal
attention. Positions are therefore counted from each sequence's first real token.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.testing import tiny_reward_model
    >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    >>> clean, corrupted = as_run(model, [1, 5, 6, 7, 8]), as_run(model, [1, 9, 7])
    >>> a = align(clean, corrupted, "end")
    >>> a.target.tolist(), a.source.tolist()
    ([2, 3, 4], [0, 1, 2])
    >>> as_run(model, [0, 0, 1, 9, 7]).ids.tolist()   # a left-padded row (pad id 0)
    [1, 9, 7]
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import torch
from jaxtyping import Int
from torch import Tensor

from ..errors import AlignmentError, PatchingError
from ..inputs import EncodedConversation

if TYPE_CHECKING:
    from ..model import HookedRewardModel

__all__ = ["Alignment", "Run", "align", "as_run"]

AlignmentKind = Literal["end", "prefix", "exact"]
ALIGNMENTS: tuple[str, ...] = ("end", "prefix", "exact")
#: One input sequence of a patching run: token ids (1-D or `[1, pos]`, padding stripped), a
#: list of ids, or an encoded conversation.
PatchInput = Tensor | EncodedConversation | Sequence[int]


@dataclass(frozen=True)
class Run:
    """One input sequence, cut after its reward-reading position `pool`.

    Built by `as_run`, which strips the padding and finds the reading position.

    Attributes:
        ids: the token ids `[pos]`, from the first real token to the reading token.
        pool: the reward-reading position (the last one, `length - 1`).
        response_start: where the response starts, when the input was an
            `EncodedConversation` (`alignment="prefix"` reads it), else `None`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching import as_run
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> run = as_run(model, model.encode("explain how to bake bread", "the oven"))
        >>> run.length, run.pool, run.response_start, tuple(run.batch().shape)
        (13, 12, 9, (1, 13))
    """

    ids: Int[Tensor, " pos"]
    pool: int
    response_start: int | None = None

    @property
    def length(self) -> int:
        """The number of positions of the run (up to its reading position)."""
        return int(self.ids.shape[0])

    def batch(self) -> Int[Tensor, "1 pos"]:
        """The ids as a batch of one, `[1, pos]`."""
        return self.ids[None]


def as_run(model: HookedRewardModel, x: PatchInput) -> Run:
    """A `Run` from token ids, an `EncodedConversation`, or a list of ids.

    Token ids are 1-D, or `[1, pos]`; padded or not: the pads
    `HookedRewardModel.infer_attention_mask` finds are stripped. The reading position
    follows the model's pooling rule (`HookedRewardModel.pool_positions`).

    Args:
        model: the `HookedRewardModel` whose tokens and pooling rule apply.
        x: the input sequence.

    Returns:
        The run, cut after its reward-reading position.

    Raises:
        AlignmentError: if `x` holds more than one sequence.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching import as_run
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))   # pad id 0
        >>> as_run(model, [0, 0, 1, 9, 7])   # a left-padded row: the pads are stripped
        Run(ids=tensor([1, 9, 7]), pool=2, response_start=None)
        >>> as_run(model, [1, 9, 7, 0, 0]).ids.tolist()   # cut after the reading token
        [1, 9, 7]
    """
    response_start = None
    if isinstance(x, EncodedConversation):
        response_start = x.response_start
        x = list(x.ids)
    ids = torch.as_tensor(x, dtype=torch.long, device=model.cfg.device)
    if ids.ndim == 2 and ids.shape[0] == 1:
        ids = ids[0]
    if ids.ndim != 1:
        raise AlignmentError(
            f"a run is one sequence; got ids of shape {tuple(ids.shape)}. Patch pairs one at a "
            "time, or use reward_lens_tl.patching.compare_methods for a set of pairs"
        )
    tokens = model.check_tokens(ids[None])
    mask = model.infer_attention_mask(tokens)
    if mask is not None:  # a row of a padded batch: positions count its real tokens only
        ids = ids[mask[0] != 0]
        tokens = ids[None]
    pool = int(model.pool_positions(tokens)[0])
    return Run(ids=ids[: pool + 1], pool=pool, response_start=response_start)


@dataclass(frozen=True)
class Alignment:
    """Matched positions of two runs, ascending in `j`.

    `target[j]` (the run being patched) ↔ `source[j]` (the run the patched values come from).
    Built by `align`; `len(alignment)` is the number of matched positions.

    Attributes:
        kind: the rule that paired them, `"end"`, `"prefix"` or `"exact"`.
        target: the positions in the run being patched, `[n]`.
        source: the matching positions in the run the patched values come from, `[n]`.
        names: the position labels kept from a larger alignment when this one is a subset of
            it (`positions=`), else `None` (the labels follow from `kind`).

    Examples:
        >>> import torch
        >>> from reward_lens_tl.patching import Alignment
        >>> a = Alignment("end", target=torch.tensor([0, 1, 2]), source=torch.tensor([2, 3, 4]))
        >>> len(a), a.labels()
        (3, ('end-2', 'end-1', 'end-0'))
        >>> Alignment("exact", torch.tensor([4, 7]), torch.tensor([4, 7])).labels()
        ('p4', 'p7')
    """

    kind: str
    target: Int[Tensor, " n"]
    source: Int[Tensor, " n"]
    names: tuple[str, ...] | None = None  # labels kept from a larger alignment (a subset)

    def __len__(self) -> int:
        """The number of matched positions."""
        return int(self.target.shape[0])

    def labels(self) -> tuple[str, ...]:
        """Position labels for the grid.

        `"p7"` (`exact`/`prefix`), `"end-3"` (`end`: three tokens before the reading token;
        `"end-0"` is the reading token itself).
        """
        if self.names is not None:
            return self.names
        if self.kind == "end":
            n = len(self)
            return tuple(f"end-{n - 1 - j}" for j in range(n))
        return tuple(f"p{int(p)}" for p in self.target)


def identity_alignment(run: Run) -> Alignment:
    """Every position of one run with itself (ablations: no second run)."""
    pos = torch.arange(run.length, device=run.ids.device)
    return Alignment(kind="exact", target=pos, source=pos)


def align(
    target: Run, source: Run, kind: AlignmentKind = "end", prefix_length: int | None = None
) -> Alignment:
    """Pair the positions of `target` and `source` (see the module docstring).

    Args:
        target: the run being patched.
        source: the run the patched values come from.
        kind: `"end"`, `"prefix"` or `"exact"`.
        prefix_length: the shared prefix for `"prefix"` (default: the runs' `response_start`).

    Returns:
        The matched positions.

    Raises:
        AlignmentError: if the runs cannot be aligned this way, or `kind` is unknown.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching import align, as_run
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> short, long = as_run(model, [1, 9, 7]), as_run(model, [1, 5, 6, 7, 8])
        >>> a = align(short, long, "end")   # the reading tokens 2 and 4 pair up, then backwards
        >>> a.target.tolist(), a.source.tolist(), a.labels()
        ([0, 1, 2], [2, 3, 4], ('end-2', 'end-1', 'end-0'))
        >>> align(short, long, "prefix", prefix_length=2).source.tolist()
        [0, 1]
    """
    device = target.ids.device
    if kind == "end":
        n = min(target.pool, source.pool) + 1
        back = torch.arange(n - 1, -1, -1, device=device)
        return Alignment(kind, target.pool - back, source.pool - back)
    if kind == "exact":
        if target.length != source.length:
            raise AlignmentError(
                f"alignment='exact' needs equal lengths; the runs have {target.length} and "
                f"{source.length} tokens (up to their reward-reading positions). Use "
                "alignment='end' (aligned at the reading token) or 'prefix' (the shared prompt)"
            )
        pos = torch.arange(target.length, device=device)
        return Alignment(kind, pos, pos)
    if kind == "prefix":
        n = _prefix_length(target, source, prefix_length)
        pos = torch.arange(n, device=device)
        return Alignment(kind, pos, pos)
    raise AlignmentError(f"unknown alignment {kind!r}; choose one of {ALIGNMENTS}")


def _prefix_length(target: Run, source: Run, prefix_length: int | None) -> int:
    if prefix_length is None:
        start, other = target.response_start, source.response_start
        if start is None or other is None:
            raise AlignmentError(
                "alignment='prefix' needs prefix_length=<number of shared prompt positions>, or "
                "EncodedConversation inputs (their response_start gives it)"
            )
        if start != other:
            raise AlignmentError(
                f"the prompts have different lengths (responses start at "
                f"{sorted((start, other))}), so "
                "prompt positions cannot be paired one to one; use alignment='end' or pass "
                "prefix_length= explicitly"
            )
        prefix_length = start
    limit = min(target.length, source.length)
    if not 0 < prefix_length <= limit:
        raise AlignmentError(
            f"prefix_length={prefix_length} must be in [1, {limit}] (the shorter run has {limit} "
            "tokens up to its reading position)"
        )
    return int(prefix_length)


def restrict_alignment(aligned: Alignment, positions: Sequence[int], clean_side: str) -> Alignment:
    """Keep the aligned pairs whose position in the clean run is in `positions`.

    Their labels stay those of the full alignment, e.g. `end-4`.

    Args:
        aligned: the full alignment.
        positions: positions of the clean run.
        clean_side: which side of the alignment is the clean run, `"target"` or `"source"`.

    Returns:
        The restricted alignment.

    Raises:
        PatchingError: if a position is not an integer or not an aligned position.

    Examples:
        >>> import torch
        >>> full = Alignment("exact", torch.arange(4), torch.arange(4), ("a", "b", "c", "d"))
        >>> restrict_alignment(full, [1, 3], "target").labels()
        ('b', 'd')
    """
    if isinstance(positions, (int, str, Tensor)) or not isinstance(positions, Sequence):
        if not (isinstance(positions, Tensor) and positions.ndim == 1):
            raise PatchingError(
                f"positions must be a list of clean-run positions, not {positions!r}"
            )
        positions = positions.tolist()
    if not all(isinstance(p, numbers.Integral) and not isinstance(p, bool) for p in positions):
        raise PatchingError(f"positions must be integers; got {list(positions)!r}")
    clean = getattr(aligned, clean_side).tolist()
    wanted = sorted({int(p) for p in positions})
    missing = [p for p in wanted if p not in clean]
    if not wanted or missing:
        raise PatchingError(
            f"positions={list(positions)!r}: {missing or 'none given'} are not aligned positions "
            f"of the clean run (aligned: {clean[0]}..{clean[-1]}). Pass clean-run positions "
            "covered by the alignment"
        )
    keep = [p in wanted for p in clean]
    names = tuple(label for label, k in zip(aligned.labels(), keep, strict=True) if k)
    mask = torch.tensor(keep, device=aligned.target.device)
    return Alignment(aligned.kind, aligned.target[mask], aligned.source[mask], names)


def position_tokens(
    model: HookedRewardModel, target: Run, source: Run | None, aligned: Alignment
) -> tuple[str, ...]:
    """The token at each aligned position, for figures.

    `"a"` where both runs read `a`, `"a→b"` where the patched run reads `a` and the run
    patched in reads `b`; empty when the model has no tokenizer.

    Args:
        model: the `HookedRewardModel` (its tokenizer).
        target: the run being patched.
        source: the run patched in (`None` for ablations).
        aligned: their aligned positions.

    Returns:
        One label per aligned position.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> a, b = as_run(model, [1, 40, 41]), as_run(model, [1, 40, 42])
        >>> position_tokens(model, a, b, align(a, b, "exact"))[1:]
        ('hurt', 'scam→bread')
    """
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        return ()

    def text(ids: Tensor, positions: Tensor) -> list[str]:
        return [tokenizer.decode([int(ids[int(p)])]) for p in positions]

    target_text = text(target.ids, aligned.target)
    if source is None:
        return tuple(target_text)
    source_text = text(source.ids, aligned.source)
    return tuple(a if a == b else f"{a}→{b}" for a, b in zip(target_text, source_text, strict=True))
