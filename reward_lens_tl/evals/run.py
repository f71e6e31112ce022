"""Scoring benchmark items with a converted model, and pairing score files with data files.

Every distinct response of an item is scored once: a RewardBench pair is 2 sequences, a
RewardMATH problem 10 (not 9 pairs = 18), an RM-Bench grid 6 (not 9 pairs = 18). Items are
grouped into chunks of about `batch_size` sequences, each chunk is one left-padded forward of
`model.rewards` (the model's own pooling rule), and each item's record is appended to the
score file as soon as its chunk is done, so a rerun with the same `out` continues. The file
records the model's fingerprint and the arguments that change scores, and each record a hash of
its item's texts: a rerun by another model, with other arguments or on changed items is refused
(`reward_lens_tl.errors.ScoreProducerMismatchError`), never mixed in.

An item that cannot be encoded (longer than the context under `truncation`, a prompt the chat
template rejects) stops the run with `on_error="raise"` (the error names the item's id) or,
with `on_error="skip"`, is left out and listed in the result's `scores.skipped`.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.data import PreferencePair
    >>> from reward_lens_tl.evals.run import score_items
    >>> from reward_lens_tl.zoo import zoo_path
    >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    >>> pairs = [PreferencePair("how bake bread", "soup oven", "bomb", subset="zoo")]
    >>> result = score_items(model, pairs, progress=False)
    >>> result.benchmark, result.metrics(n_boot=0)["accuracy"]
    ('rewardbench', 100.0)
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from os import PathLike
from typing import Any

import torch

from ..data import GridItem, ItemSet, RankedItem, SkippedRecord
from ..distributed import broadcast, is_main_process, map_in_rounds
from ..errors import (
    EmptyInputError,
    InvalidArgumentError,
    RewardLensError,
    ScoreMismatchError,
    ScoreProducerMismatchError,
    StepScoresMismatchError,
)
from ..inputs import pad_batch
from ..pair_batches import check_on_error
from ..progress import progress_bar
from ..provenance import (
    check_finite,
    check_output_file,
    content_hash,
    model_fingerprint,
)
from ..readout import objective_index
from .comparisons import item_texts
from .eval_result import EvalResult
from .scores import (
    ScoreRecord,
    ScoreSet,
    ScoreWriter,
    StepScoreRecord,
    check_benchmark,
)

#: The `field` of a `SkippedRecord` for an item `on_error="skip"` left unscored.
NOT_SCORED = "<item>"

__all__ = [
    "NOT_SCORED",
    "align_scores",
    "benchmark_of",
    "item_hash",
    "item_id",
    "item_texts",
    "score_items",
]


def benchmark_of(item: Any) -> str:
    """The benchmark an item belongs to, from its type.

    Args:
        item: a benchmark item.

    Returns:
        One of `reward_lens_tl.evals.scores.BENCHMARKS`.

    Raises:
        InvalidArgumentError: the item is of no benchmark's type.

    Examples:
        >>> from reward_lens_tl.data import GridItem, PreferencePair, RankedItem
        >>> from reward_lens_tl.evals.run import benchmark_of
        >>> grid = GridItem("Hi", chosen=("a", "b", "c"), rejected=("x", "y", "z"))
        >>> benchmark_of(PreferencePair("q", "a", "b")), benchmark_of(grid)
        ('rewardbench', 'rmbench')
        >>> benchmark_of(RankedItem("1 + 1 = ?", correct="2", wrong=("3",)))
        'rewardmath'
    """
    if isinstance(item, RankedItem):
        return "rewardmath"
    if isinstance(item, GridItem):
        return "rmbench"
    if all(hasattr(item, k) for k in ("prompt", "chosen", "rejected")):
        return "rewardbench"
    raise InvalidArgumentError(
        f"cannot score a {type(item).__name__}: expected a PreferencePair (or any object with "
        "prompt/chosen/rejected), a RankedItem or a GridItem"
    )


def item_id(item: Any, position: int) -> Hashable:
    """The id a score record uses for `item` (see `reward_lens_tl.evals.scores`).

    Args:
        item: a benchmark item.
        position: the item's position in its data (for items without an id).

    Returns:
        The id.

    Examples:
        >>> from reward_lens_tl.data import GridItem, PreferencePair, RankedItem
        >>> from reward_lens_tl.evals.run import item_id
        >>> item_id(PreferencePair("q", "a", "b", subset="s"), 4)  # no id: subset/position
        's/4'
        >>> item_id(PreferencePair("q", "a", "b", metadata={"id": "x1"}), 4)
        'x1'
        >>> grid = GridItem("Hi", ("a", "b", "c"), ("x", "y", "z"), id=3, domain="chat")
        >>> item_id(grid, 0), item_id(RankedItem("q", "a", ("b",), id=17), 0)
        ('chat/3', 17)
    """
    meta = getattr(item, "metadata", {}) or {}
    if isinstance(item, RankedItem):
        return item.id if item.id is not None else meta.get("index", position)
    if isinstance(item, GridItem):
        local = item.id if item.id is not None else meta.get("index", position)
        return f"{item.domain}/{local}" if item.domain else local
    if meta.get("id") is not None:
        return meta["id"]
    return f"{getattr(item, 'subset', None) or ''}/{meta.get('index', position)}"


def item_hash(item: Any) -> str:
    """A hash of an item's texts (prompt, chosen and rejected responses).

    It is kept in the item's score record so a resumed run can tell that the record scored the
    same texts.

    Args:
        item: a benchmark item.

    Returns:
        The hash.

    Examples:
        >>> from reward_lens_tl.data import PreferencePair
        >>> from reward_lens_tl.evals.run import item_hash
        >>> item_hash(PreferencePair("q", "a", "b")) == item_hash(PreferencePair("q", "a", "c"))
        False
    """
    prompt, chosen, rejected = item_texts(item)
    return content_hash([prompt, list(chosen), list(rejected)])


def _record(benchmark: str, item: Any, key: Hashable, rewards: list[float]) -> ScoreRecord:
    _, chosen, _ = item_texts(item)
    subset = getattr(item, "subset", None)
    domain = getattr(item, "domain", None)
    check_finite(rewards, f"item {key!r}")
    return ScoreRecord(
        benchmark,
        key,
        tuple(rewards[: len(chosen)]),
        tuple(rewards[len(chosen) :]),
        subset,
        domain,
        item=item_hash(item),
    )


def _chunks(todo: Sequence[tuple[int, Any]], batch_size: int) -> list[list[tuple[int, Any]]]:
    """`todo` grouped into forward passes of about `batch_size` sequences (whole items)."""
    chunks, current, n_seq = [], [], 0
    for position, item in todo:
        _, chosen, rejected = item_texts(item)
        current.append((position, item))
        n_seq += len(chosen) + len(rejected)
        if n_seq >= batch_size:
            chunks.append(current)
            current, n_seq = [], 0
    if current:
        chunks.append(current)
    return chunks


def _encode_item(model, item, key, position, truncation, on_error):
    """Every response of `item` encoded, or a `SkippedRecord` (`on_error="skip"`)."""
    prompt, chosen, rejected = item_texts(item)
    try:
        return [model.encode(prompt, r, truncation=truncation) for r in (*chosen, *rejected)]
    except RewardLensError as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        if on_error == "skip":
            return SkippedRecord(position, key, NOT_SCORED, reason)
        message = (
            f"item {key!r} (position {position}): {reason} (on_error='skip', --on-error skip on "
            "the command line, skips such items)"
        )
        try:
            named = type(err)(message)  # the same class, so callers catch what they expect
        except TypeError:  # a class whose constructor takes other arguments
            named = InvalidArgumentError(message)
        raise named from err


def _score_chunk(model, chunk, keys, benchmark, truncation, column, on_error):
    """One left-padded forward of every response of the chunk's items that could be encoded.

    Returns `(records, skipped)`.
    """
    encoded, scored, skipped = [], [], []
    for position, item in chunk:
        enc = _encode_item(model, item, keys[position], position, truncation, on_error)
        if isinstance(enc, SkippedRecord):
            skipped.append(enc)
            continue
        encoded += enc
        scored.append((position, item, len(enc)))
    records, start = [], 0
    if encoded:
        rewards = _rewards(model, *pad_batch(encoded, model.pad_token_id), column).tolist()
        for position, item, n in scored:
            records.append(_record(benchmark, item, keys[position], rewards[start : start + n]))
            start += n
    return records, skipped


def _rewards(model, ids, mask, column) -> torch.Tensor:
    device = model.cfg.device
    rewards = model.pooled_rewards(ids.to(device), mask.to(device))
    if rewards.ndim == 2:
        rewards = rewards[:, column]
    return rewards.float().cpu()


def score_items(
    model,
    items: Iterable[Any],
    *,
    out: str | PathLike[str] | None = None,
    resume: bool = True,
    batch_size: int = 16,
    truncation: str = "error",
    progress: bool = True,
    objective: str | int | None = None,
    on_error: str = "raise",
) -> EvalResult:
    """Score benchmark items (pairs, RewardMATH problems or RM-Bench grids; one kind).

    `out` is the score file written as items are scored; with `resume=True` items already
    in it are not scored again. The file must come from the same model and arguments and hold
    only these items, with the same texts (else `ScoreProducerMismatchError` /
    `ScoreMismatchError`); one process writes it at a time
    (`reward_lens_tl.provenance.FileInUseError`), and a run that scores nothing leaves
    no file. An `out` that cannot be a file (a directory, a path under a regular file, an
    unwritable place) is refused before the model runs (`InvalidArgumentError`).
    `objective` picks a column of a plain multi-objective head. `on_error`: `"raise"` stops
    at an item that cannot be encoded (naming its id), `"skip"` leaves it out (listed in
    `result.scores.skipped`). Returns an `EvalResult` aligned with the scored items;
    `EmptyInputError` if every item was skipped.

    Under `torchrun` the chunks are split by rank (chunk `k` on rank `k mod N`), every
    rank returns the complete result and rank 0 alone writes `out`, after each round of
    `N` chunks (`reward_lens_tl.distributed`).

    Args:
        model: the converted reward model (a `HookedRewardModel`).
        items: benchmark items, all of one kind.
        out: the score file to write (`None`: none).
        resume: skip the items already in `out`.
        batch_size: about how many sequences one forward scores.
        truncation: how a sequence longer than the context is handled.
        progress: show a progress bar.
        objective: the column of a plain multi-objective head.
        on_error: `"raise"` or `"skip"` for an item that cannot be encoded.

    Returns:
        The scores and metrics, aligned with the scored items.

    Raises:
        EmptyInputError: there are no items, or every item was skipped.
        ScoreProducerMismatchError: `out` was written by another model or with other
            arguments, or for other texts.
        ScoreMismatchError: `out` holds records of other items.
        FileInUseError: another process (or another writer in this one) is writing `out`.
        InvalidArgumentError: `batch_size` is not a positive int; or `out` is a directory
            (or not a regular file), a path component above it is a regular file, or it
            cannot be written (checked before any item is scored).

    Examples:
        >>> import pathlib, tempfile
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.data import RankedItem
        >>> from reward_lens_tl.evals.run import score_items
        >>> from reward_lens_tl.evals.scores import read_scores
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> items = [RankedItem("how bake bread", "soup oven", ("great question soup", "rain")),
        ...          RankedItem("how bake bread", "oven bread", ("rain",))]
        >>> out = pathlib.Path(tempfile.mkdtemp()) / "scores.jsonl"
        >>> result = score_items(model, items, out=out, progress=False)
        >>> result.metrics(n_boot=0).summary()  # the sycophantic wrong solution wins item 0
        {'n': 2, 'accuracy': 50.0, 'mrr': 75.0, 'accuracy_with_ties': 50.0}
        >>> read_scores(out).ids(), read_scores(out).producer["model"]["name"]
        ([0, 1], 'scalar')
    """
    items = list(items)
    if not items:
        raise EmptyInputError("score_items got no items")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidArgumentError(f"batch_size must be a positive int, got {batch_size!r}")
    check_on_error(on_error)
    benchmark = check_benchmark(benchmark_of(items[0]))
    keys = _unique_ids(items, benchmark)
    column = objective_index(model, objective)
    writer, done = _open_writer(out, benchmark, resume, model, _args(truncation, column))
    with torch.no_grad(), writer or _Null():
        _check_resumed(out, done, items, keys)

        def score(chunk):
            return _score_chunk(model, chunk, keys, benchmark, truncation, column, on_error)

        todo = [(i, it) for i, (it, k) in enumerate(zip(items, keys, strict=True)) if k not in done]
        scored, skipped = dict(done), []
        bar = progress_bar(
            total=len(items),
            initial=len(items) - len(todo),
            show=progress and is_main_process(),
            desc=benchmark,
            unit="item",
        )
        with bar:
            for finished in map_in_rounds(_chunks(todo, batch_size), score):
                new = [record for _, (records, _) in finished for record in records]
                skipped += [skip for _, (_, skips) in finished for skip in skips]
                if writer is not None:
                    writer.write_all(new)
                scored |= {r.id: r for r in new}
                bar.update(sum(len(records) + len(skips) for _, (records, skips) in finished))
    return _result(benchmark, items, keys, scored, skipped, out)


def _args(truncation: str, column: int | None) -> dict[str, Any]:
    """The arguments that change scores, as recorded in a score file's producer."""
    return {"truncation": truncation, "objective": column}


def _open_writer(out, benchmark, resume, model, args):
    """Rank 0's `ScoreWriter` (`None` elsewhere or without `out`) and its records.

    Its producer is the model's fingerprint and `args`; the records it holds are returned on
    every rank, and an error opening it is raised on every rank.
    """
    writer, error = None, None
    if out is not None and is_main_process():
        try:
            check_output_file(out, "the score file (out=)")  # before hashing the model's weights
            producer = {"model": model_fingerprint(model), "args": args}
            writer = ScoreWriter(out, benchmark, resume=resume, producer=producer)
        except Exception as err:  # noqa: BLE001 - re-raised on every rank below
            error = err
    done, error = broadcast((dict(writer.done) if writer is not None else {}, error))
    if error is not None:
        raise error
    return writer, done


def _check_resumed(out, done: dict, items: Sequence[Any], keys: Sequence[Hashable]) -> None:
    """Every resumed record must belong to an item here, and have scored the same texts."""
    by_key = dict(zip(keys, items, strict=True))
    for key, record in done.items():
        if key not in by_key:
            raise ScoreMismatchError(
                f"{out}: holds scores for id {key!r}, which the items do not have; "
                "use another --out file or resume=False"
            )
        expected = item_hash(by_key[key])
        if record.item != expected:
            was = "records no item hash" if record.item is None else f"has item hash {record.item}"
            raise ScoreProducerMismatchError(
                f"{out}: the record of id {key!r} {was}, but this run's item has {expected}: its "
                "prompt or responses changed since it was scored; use another --out file or "
                "resume=False"
            )


def _result(benchmark, items, keys, scored, skipped, out) -> EvalResult:
    kept = [(item, scored[k]) for item, k in zip(items, keys, strict=True) if k in scored]
    if not kept:
        raise EmptyInputError(f"all {len(items)} items were skipped; the first: {skipped[0]}")
    source = str(out) if out is not None else "<memory>"
    scores = ScoreSet(tuple(r for _, r in kept), tuple(skipped), source)
    return EvalResult(benchmark, scores, tuple(item for item, _ in kept))


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def _unique_ids(items: Sequence[Any], benchmark: str) -> list[Hashable]:
    keys: list[Hashable] = []
    seen: dict[Hashable, int] = {}
    for i, item in enumerate(items):
        if benchmark_of(item) != benchmark:
            raise InvalidArgumentError(
                f"item {i} is a {benchmark_of(item)} item among {benchmark} items; score one "
                "benchmark at a time"
            )
        key = item_id(item, i)
        if key in seen:
            raise ScoreMismatchError(
                f"items {seen[key]} and {i} share the id {key!r}; give every item a unique id"
            )
        seen[key] = i
        keys.append(key)
    return keys


def align_scores(scores: ScoreSet, items: Sequence[Any] | ItemSet) -> EvalResult:
    """Pair a score file's records with the data items they scored (matched by id).

    A record whose id no item has, or whose response counts differ from its item's, is a
    `ScoreMismatchError` naming the file, the record and the field; a process reward
    model's record (`reward_lens_tl.evals.scores.StepScoreRecord`) whose step scores do
    not match its item's steps (`metadata["steps"]` of a RewardMATH item, one tuple per
    solution, correct first) is a `StepScoresMismatchError` naming the solution. Items
    without a record are left out of the result (its `missing` counts them).

    Args:
        scores: a score file's records.
        items: the data items they scored.

    Returns:
        The scores paired with their items.

    Raises:
        EmptyInputError: there are no data items.
        ScoreMismatchError: a record matches no item, or not its item's response counts.
        StepScoresMismatchError: a step record does not match its item's steps.

    Examples:
        >>> from reward_lens_tl.data import PreferencePair
        >>> from reward_lens_tl.evals.run import align_scores
        >>> from reward_lens_tl.evals.scores import ScoreRecord, ScoreSet
        >>> items = [PreferencePair("q0", "A", "B", subset="s"),
        ...          PreferencePair("q1", "C", "D", subset="s")]
        >>> scores = ScoreSet([ScoreRecord("rewardbench", "s/1", (0.0,), (1.0,), subset="s")])
        >>> result = align_scores(scores, items)  # matched by id: `s/1` is the second pair
        >>> result.items[0].prompt, result.missing, result.failures().pairs()[0].rejected
        ('q1', 1, 'D')
    """
    items = list(items)
    if not items:
        raise EmptyInputError("align_scores got no data items")
    benchmark = benchmark_of(items[0])
    if scores.benchmark not in (None, benchmark):
        raise ScoreMismatchError(
            f"{scores.source}: holds {scores.benchmark} scores but the data are {benchmark} items"
        )
    keys = _unique_ids(items, benchmark)
    by_id = dict(zip(keys, items, strict=True))
    aligned = []
    for index, record in enumerate(scores):
        item = by_id.get(record.id)
        if item is None:
            raise ScoreMismatchError(
                f"{scores.source}: record {index} (id={record.id!r}), field 'id': no data item "
                "has this id; are the score file and the data file from the same benchmark split?"
            )
        _, chosen, rejected = item_texts(item)
        for field, n in (("chosen", len(chosen)), ("rejected", len(rejected))):
            if len(getattr(record, field)) != n:
                raise ScoreMismatchError(
                    f"{scores.source}: record {index} (id={record.id!r}), field {field!r}: "
                    f"{len(getattr(record, field))} scores but the data item has {n} responses"
                )
        if isinstance(record, StepScoreRecord):
            _check_steps(scores.source, index, record, item)
        aligned.append(item)
    return EvalResult(benchmark, scores, tuple(aligned), missing=len(items) - len(aligned))


def _check_steps(source: str, index: int, record: StepScoreRecord, item: Any) -> None:
    """A step record's step counts against its item's steps (when the item records them)."""
    steps = (getattr(item, "metadata", None) or {}).get("steps")
    if steps is None:
        return
    scored = (*record.chosen_steps, *record.rejected_steps)
    for k, (have, want) in enumerate(zip(scored, steps, strict=True)):
        if len(have) != len(want):
            raise StepScoresMismatchError(
                f"{source}: record {index} (id={record.id!r}), solution {k} (0: the correct one): "
                f"{len(have)} step scores but the solution has {len(want)} steps; were the scores "
                "made from these solutions, split into steps the same way?"
            )
