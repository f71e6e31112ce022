"""Preference pairs as model batches.

Chosen and rejected of a chunk in one left-padded batch (`pad_batch`: position `-1` is every row's
last token).

A pair is anything with `prompt`, `chosen` and `rejected` (e.g.
`reward_lens_tl.data.PreferencePair`) or an already-encoded `(chosen, rejected)` tuple
of `EncodedConversation`. `encode_pairs` encodes a whole set
with a per-pair error policy: `on_error="raise"` stops at the first pair that cannot be
encoded (the error names the pair), `"skip"` records it as a `SkippedPair` and goes on.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.testing import tiny_reward_model, tiny_tokenizer
    >>> from types import SimpleNamespace as Pair
    >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"), tiny_tokenizer())
    >>> [(ids.shape[0], n) for ids, _, n in pair_batches(model, [Pair(prompt="w6", chosen="w7",
    ...                                                                  rejected="w8 w9")] * 3, 2)]
    [(4, 2), (2, 1)]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from torch import Tensor

from .contrast import encode_contrast
from .errors import (
    ArgumentTypeError,
    EmptyInputError,
    InvalidArgumentError,
    RewardLensError,
    SequenceTooLongError,
)
from .inputs import EncodedConversation, as_encoded, pad_batch

__all__ = ["OnError", "SkippedPair"]

OnError = Literal["raise", "skip"]
Encoded = tuple[EncodedConversation, EncodedConversation]


@dataclass(frozen=True)
class SkippedPair:
    """A pair that was not scored.

    Its position in the input, its source record (when the loader recorded one) and why.

    Attributes:
        index: The pair's position in the input.
        record: Its record in the source file (`None` when the loader recorded none).
        reason: Why it was skipped.

    Examples:
        >>> print(SkippedPair(index=3, record=7, reason="longer than n_ctx"))
        pair 3 (record 7): longer than n_ctx
    """

    index: int
    record: int | None
    reason: str

    def __str__(self) -> str:
        """The pair, its record when known, and the reason."""
        where = f"pair {self.index}" + ("" if self.record is None else f" (record {self.record})")
        return f"{where}: {self.reason}"


def check_batch_size(batch_size: Any) -> int:
    """`batch_size` as a positive int, or `InvalidArgumentError`."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise InvalidArgumentError(f"batch_size must be a positive int, got {batch_size!r}")
    return batch_size


def encoded_pair(model, pair: Any, truncation: str = "error") -> Encoded:
    """`(chosen, rejected)` encodings of a preference pair, in any of the forms it takes.

    A `(chosen, rejected)` tuple of `EncodedConversation`s or zoo `Example`s; a contrast pair
    (anything with `edited` and `base`: the edited conversation plays chosen); or an object with
    `prompt`, `chosen` and `rejected` text, encoded by `model.encode` (a judge or PRM renders its
    template). Either side must fit the model's context.

    Args:
        model: The model whose `encode` reads text and whose context bounds the lengths.
        pair: The pair.
        truncation: How text longer than the context is cut (`model.encode`'s).

    Returns:
        The chosen and the rejected conversation.

    Raises:
        ArgumentTypeError: When `pair` is none of these forms.
        SequenceTooLongError: When an encoded side is longer than the model's context.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.data import PreferencePair
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> chosen, rejected = encoded_pair(model, PreferencePair("how bake bread", "oven", "soup"))
        >>> chosen.response_start == rejected.response_start, len(chosen) == len(rejected)
        (True, True)
        >>> contrast = load_task().task.contrast_pairs("harmful", 1, seed=0)[0]
        >>> encoded_pair(model, contrast)[0].ids == tuple(contrast.edited.input_ids)
        True
    """
    if isinstance(pair, tuple) and len(pair) == 2:
        encoded = (as_encoded(pair[0]), as_encoded(pair[1]))
    elif hasattr(pair, "edited") and hasattr(pair, "base"):
        encoded = encode_contrast(pair)
    elif all(hasattr(pair, a) for a in ("prompt", "chosen", "rejected")):
        return (
            model.encode(pair.prompt, pair.chosen, truncation=truncation),
            model.encode(pair.prompt, pair.rejected, truncation=truncation),
        )
    else:
        raise ArgumentTypeError(
            f"cannot read a preference pair from {type(pair).__name__}: pass (chosen, rejected) "
            "EncodedConversations, a contrast pair, or an object with prompt/chosen/rejected"
        )
    for side, enc in zip(("chosen", "rejected"), encoded, strict=True):
        if len(enc) > model.cfg.n_ctx:
            raise SequenceTooLongError(
                f"the {side} sequence has {len(enc)} tokens, more than the model's context "
                f"of {model.cfg.n_ctx}; encode it with truncation='left', 'right' or 'both'"
            )
    return encoded


def check_on_error(on_error: Any) -> OnError:
    """`on_error` if it is `"raise"` or `"skip"`.

    Args:
        on_error: The value to check.

    Returns:
        `on_error`.

    Raises:
        InvalidArgumentError: For any other value.
    """
    if on_error not in ("raise", "skip"):
        raise InvalidArgumentError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    return on_error


def encode_pairs(
    model,
    pairs: Sequence,
    truncation: str = "error",
    on_error: OnError = "raise",
    *,
    start: int = 0,
    skip_hint: bool = True,
) -> tuple[list[Encoded], list[int], list[SkippedPair]]:
    """Encode every pair: `(encoded, kept_indices, skipped)`.

    `pairs[0]` is pair `start` of the whole set.

    With `on_error="raise"` the first failure is re-raised with the same class and a message
    that starts with the pair's index (and source record); with `"skip"` it is recorded.
    """
    check_on_error(on_error)
    if len(pairs) == 0:
        raise EmptyInputError("the pair set is empty: nothing to score")
    encoded, kept, skipped = [], [], []
    for i, pair in enumerate(pairs, start):
        try:
            encoded.append(encoded_pair(model, pair, truncation))
        except RewardLensError as err:
            skip = SkippedPair(i, getattr(pair, "record", None), str(err))
            if on_error == "raise":
                hint = " (pass on_error='skip' to skip such pairs)" if skip_hint else ""
                raise type(err)(f"{skip}{hint}") from err
            skipped.append(skip)
            continue
        kept.append(i)
    return encoded, kept, skipped


def pair_batches(
    model, pairs: Sequence, batch_size: int = 16, truncation: str = "error"
) -> Iterator[tuple[Tensor, Tensor, int]]:
    """Yield `(ids, mask, n)`: rows `[:n]` are chosen, rows `[n:]` rejected."""
    check_batch_size(batch_size)
    pairs = list(pairs)
    device = model.cfg.device
    for start in range(0, len(pairs), batch_size):
        chunk = [encoded_pair(model, p, truncation) for p in pairs[start : start + batch_size]]
        ids, mask = pad_batch([c for c, _ in chunk] + [r for _, r in chunk], model.pad_token_id)
        yield ids.to(device), mask.to(device), len(chunk)


@dataclass(frozen=True)
class PairChunk:
    """What one batch of pairs gave.

    The input positions it kept (with each pair's `subset` and `record`), the pairs it skipped, and
    `output` (`None` if all were skipped).
    """

    kept: tuple[int, ...]
    subsets: tuple[str | None, ...]
    records: tuple[int | None, ...]
    skipped: tuple[SkippedPair, ...]
    output: Any


def map_pair_batches(
    model,
    pairs: Iterable[Any],
    fn: Callable[[Tensor, Tensor, int], Any],
    *,
    batch_size: int = 16,
    truncation: str = "error",
    on_error: OnError | None = "raise",
) -> list[PairChunk]:
    """`fn(ids, mask, n)` on each batch of `batch_size` input pairs, in input order.

    Rows `[:n]` are chosen, `[n:]` rejected; skipped pairs leave their batch shorter.

    `on_error=None` raises like `"raise"` but without suggesting `on_error="skip"` (for
    analyses whose results have no room for skipped pairs). `pairs` is streamed: one batch
    of pairs and its encodings are held at a time. Under `torchrun` the batches are split
    across ranks and gathered back in order on every rank (`reward_lens_tl.distributed`).
    Raises `EmptyInputError` for an empty set.
    """
    from .distributed import gather_results, shard, world

    check_batch_size(batch_size)
    hint = on_error is not None
    on_error = check_on_error("raise" if on_error is None else on_error)
    rank, size = world()
    local, error, counter = [], None, [0]
    for k, batch in shard(_counted(pairs, counter), batch_size, rank, size):
        try:
            chunk = _run_batch(model, batch, k * batch_size, fn, truncation, on_error, hint)
            local.append((k, chunk))
        except Exception as err:
            if size == 1:
                raise
            error = (k, err)
            break
    if counter[0] == 0 and error is None:
        raise EmptyInputError("the pair set is empty: nothing to score")
    return [chunk for _, chunk in gather_results(local, error)]


def _counted(items: Iterable[Any], counter: list[int]) -> Iterator[Any]:
    for item in items:
        counter[0] += 1
        yield item


def _run_batch(model, batch: list, start: int, fn, truncation, on_error, hint) -> PairChunk:
    encoded, kept, skipped = encode_pairs(
        model, batch, truncation, on_error, start=start, skip_hint=hint
    )
    output = None
    if encoded:
        ids, mask = pad_batch([c for c, _ in encoded] + [r for _, r in encoded], model.pad_token_id)
        device = model.cfg.device
        output = fn(ids.to(device), mask.to(device), len(encoded))
    return PairChunk(
        kept=tuple(kept),
        subsets=tuple(getattr(batch[i - start], "subset", None) for i in kept),
        records=tuple(getattr(batch[i - start], "record", None) for i in kept),
        skipped=tuple(skipped),
        output=output,
    )


def finished_chunks(chunks: list[PairChunk]) -> tuple[list[PairChunk], tuple[SkippedPair, ...]]:
    """The chunks that ran (at least one kept pair) and every skipped pair, in input order.

    `EmptyInputError` naming the first skipped pair when every pair was skipped.
    """
    skipped = tuple(s for c in chunks for s in c.skipped)
    done = [c for c in chunks if c.output is not None]
    if not done:
        raise EmptyInputError(f"all {len(skipped)} pairs were skipped; the first: {skipped[0]}")
    return done, skipped


def pair_index_columns(frame, indices: Sequence[int], records: Sequence[int | None]):
    """`frame` with the input pair's `index` and source `record` beside each row's `example`.

    `frame` has one row per `example` of a pair result; examples count kept pairs only.
    """
    examples = frame["example"].tolist()
    at = frame.columns.get_loc("example") + 1
    frame.insert(at, "index", [indices[e] for e in examples] if indices else examples)
    frame.insert(at + 1, "record", [records[e] for e in examples] if records else None)
    return frame
