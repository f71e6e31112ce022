"""Scoring benchmark items with a converted model, and pairing score files with data files.

Every distinct response of an item is scored once: a RewardBench pair is 2 sequences, a
RewardMATH problem 10 (not 9 pairs = 18), an RM-Bench grid 6 (not 9 pairs = 18). Items are
grouped into chunks of about ``batch_size`` sequences, each chunk is one left-padded forward of
``model.rewards`` (the model's own pooling rule), and each item's record is appended to the
score file as soon as its chunk is done, so a rerun with the same ``out`` continues.

>>> from reward_lens_tl import HookedRewardModel
>>> from reward_lens_tl.data import PreferencePair
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

from reward_lens_tl.data import GridItem, ItemSet, RankedItem
from reward_lens_tl.distributed import broadcast, is_main_process, map_in_rounds
from reward_lens_tl.errors import EmptyInputError, InvalidArgumentError
from reward_lens_tl.evals.errors import ScoreMismatchError
from reward_lens_tl.evals.results import EvalResult
from reward_lens_tl.evals.scores import ScoreRecord, ScoreSet, ScoreWriter, check_benchmark
from reward_lens_tl.inputs import pad_batch

__all__ = ["align_scores", "benchmark_of", "item_id", "item_texts", "score_items"]


def benchmark_of(item: Any) -> str:
    """The benchmark an item belongs to, from its type."""
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
    """The id a score record uses for ``item`` (see :mod:`reward_lens_tl.evals.scores`)."""
    meta = getattr(item, "metadata", {}) or {}
    if isinstance(item, RankedItem):
        return item.id if item.id is not None else meta.get("index", position)
    if isinstance(item, GridItem):
        local = item.id if item.id is not None else meta.get("index", position)
        return f"{item.domain}/{local}" if item.domain else local
    if meta.get("id") is not None:
        return meta["id"]
    return f"{getattr(item, 'subset', None) or ''}/{meta.get('index', position)}"


def item_texts(item: Any) -> tuple[Any, tuple[str, ...], tuple[str, ...]]:
    """``(prompt, chosen responses, rejected responses)`` of any benchmark item."""
    if isinstance(item, RankedItem):
        return item.prompt, (item.correct,), tuple(item.wrong)
    if isinstance(item, GridItem):
        return item.prompt, tuple(item.chosen), tuple(item.rejected)
    return item.prompt, (item.chosen,), (item.rejected,)


def _record(benchmark: str, item: Any, key: Hashable, rewards: list[float]) -> ScoreRecord:
    _, chosen, _ = item_texts(item)
    subset = getattr(item, "subset", None)
    domain = getattr(item, "domain", None)
    return ScoreRecord(
        benchmark, key, tuple(rewards[: len(chosen)]), tuple(rewards[len(chosen) :]), subset, domain
    )


def _chunks(todo: Sequence[tuple[int, Any]], batch_size: int) -> list[list[tuple[int, Any]]]:
    """``todo`` grouped into forward passes of about ``batch_size`` sequences (whole items)."""
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


def _score_chunk(model, chunk, keys, benchmark, truncation, objective) -> list[ScoreRecord]:
    """One left-padded forward of every response of the chunk's items: their records."""
    encoded, sizes = [], []
    for _, item in chunk:
        prompt, chosen, rejected = item_texts(item)
        encoded += [model.encode(prompt, r, truncation=truncation) for r in (*chosen, *rejected)]
        sizes.append(len(chosen) + len(rejected))
    rewards = _rewards(model, *pad_batch(encoded, model.pad_token_id), objective).tolist()
    records, start = [], 0
    for (position, item), n in zip(chunk, sizes, strict=True):
        records.append(_record(benchmark, item, keys[position], rewards[start : start + n]))
        start += n
    return records


def _rewards(model, ids, mask, objective) -> torch.Tensor:
    from reward_lens_tl.readout import objective_index

    device = model.cfg.device
    rewards = model.rewards(ids.to(device), mask.to(device))
    if rewards.ndim == 2:
        rewards = rewards[:, objective_index(model, objective)]
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
) -> EvalResult:
    """Score benchmark items (pairs, RewardMATH problems or RM-Bench grids; one kind).

    ``out`` is the score file written as items are scored; with ``resume=True`` items already
    in it are not scored again (the file must belong to the same items: an id it holds that
    ``items`` lacks is a :class:`ScoreMismatchError`). ``objective`` picks a column of a plain
    multi-objective head. Returns an :class:`EvalResult` aligned with ``items``.

    Under ``torchrun`` the chunks are split by rank (chunk ``k`` on rank ``k mod N``), every
    rank returns the complete result and rank 0 alone writes ``out``, after each round of
    ``N`` chunks (:mod:`reward_lens_tl.distributed`).
    """
    from tqdm.auto import tqdm

    items = list(items)
    if not items:
        raise EmptyInputError("score_items got no items")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidArgumentError(f"batch_size must be a positive int, got {batch_size!r}")
    benchmark = check_benchmark(benchmark_of(items[0]))
    keys = _unique_ids(items, benchmark)
    main = is_main_process()
    writer = ScoreWriter(out, benchmark, resume=resume) if out is not None and main else None
    done = broadcast(dict(writer.done) if writer is not None else {})  # rank 0 read the file
    unknown = [k for k in done if k not in set(keys)]
    if unknown:
        raise ScoreMismatchError(
            f"{out}: holds scores for id {unknown[0]!r}, which the items do not have; "
            "use another --out file or resume=False"
        )
    todo = [(i, it) for i, (it, k) in enumerate(zip(items, keys, strict=True)) if k not in done]
    scored = dict(done)
    bar = tqdm(
        total=len(items),
        initial=len(items) - len(todo),
        disable=not (progress and main),
        desc=benchmark,
    )

    def score(chunk):
        return _score_chunk(model, chunk, keys, benchmark, truncation, objective)

    with torch.no_grad(), writer or _Null():
        for finished in map_in_rounds(_chunks(todo, batch_size), score):
            new = [record for _, records in finished for record in records]
            if writer is not None:
                writer.write_all(new)
            scored |= {r.id: r for r in new}
            bar.update(len(new))
    bar.close()
    records = [scored[k] for k in keys]
    source = str(out) if out is not None else "<memory>"
    return EvalResult(benchmark, ScoreSet(records, (), source), tuple(items))


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def _unique_ids(items: Sequence[Any], benchmark: str) -> list[Hashable]:
    keys, seen = [], {}
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
    :class:`ScoreMismatchError` naming the file, the record and the field. Items without a
    record are left out of the result (its ``missing`` counts them).
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
        aligned.append(item)
    return EvalResult(benchmark, scores, tuple(aligned), missing=len(items) - len(aligned))
