"""Per-item score files: the format a scoring run writes as it goes, and readers for it.

**Format** (JSON lines, UTF-8): a header line naming what produced the scores, then one record
per scored item, written in scoring order:

    {"format": "reward-lens-scores/1", "benchmark": "rewardmath",
     "producer": {"model": {"name": "scalar", "weights": "…", ...}, "args": {...}}}
    {"benchmark": "rewardmath", "id": 17, "subset": null, "domain": null,
     "chosen": [1.25], "rejected": [0.5, 2.0, ...], "item": "3f9a…"}

- `producer` (header): the model's fingerprint
  (`reward_lens_tl.provenance.model_fingerprint`) and the arguments that change scores
  (truncation, objective); files without a header (hand-written, other tools) are read too;
- `benchmark`: `"rewardbench"`, `"rewardbench2"`, `"rewardmath"` or `"rmbench"` (the
  same in every record);
- `id`: the item's id (str or int, unique in the file): RewardBench's `id` (or
  `"<subset>/<index>"` when a record has none), RewardMATH's `problem_id`, RM-Bench's
  `"<domain>/<id>"`;
- `subset` / `domain`: optional strings (RewardBench subset; RM-Bench subset and domain);
- `chosen` / `rejected`: the rewards, as lists of finite numbers: one chosen and one rejected
  (RewardBench), the correct solution and every wrong one in file order (RewardMATH), the three
  chosen and three rejected styles concise / detailed / markdown (RM-Bench), the chosen and
  the rejected responses of a prompt (RewardBench 2: one chosen, or every correct answer of a
  Ties prompt; see `reward_lens_tl.evals.rewardbench2`);
- `chosen_steps` / `rejected_steps` instead of `chosen` / `rejected`: a process reward
  model's per-step scores, one list per solution (a `StepScoreRecord`; each solution's
  score is an aggregate of its steps, `reward_lens_tl.evals.prm`);
- `item` (optional): a hash of the item's texts, so a resumed run knows the record scored the
  same prompt and responses.

A run appends each record as soon as its item is scored, so an interrupted run loses at most the
items in flight. Rerunning with the same output file continues where it stopped, after checking
that the file was written by the same model with the same arguments (else
`reward_lens_tl.errors.ScoreProducerMismatchError` names both) and that each
record's item is unchanged; one writer at a time
(`reward_lens_tl.provenance.FileInUseError`). A torn last line from a crash is dropped
with a warning, by readers and by the resuming writer. Reading checks every record: a malformed
one (a non-finite score included) raises `reward_lens_tl.errors.MalformedRecordError`
naming the file, the record and the field, or with `skip_bad=True` is skipped, counted in
`.skipped` and reported in one warning; good records are never dropped.

The published RewardMATH `*_scores.json` files (one record per problem with `problem`,
`solution_reference` and `score`) are read too: the solution whose reference is
`human_to_GPT-4` is the correct one, the others are the wrong ones in file order. A file whose
`score` entries are lists holds a process reward model's step scores: each problem becomes a
`StepScoreRecord`, its solutions scored by the `prm_aggregate` named (default
`reward_lens_tl.evals.prm.DEFAULT_PRM_AGGREGATE`). A file with `chosen_position` holds a
pairwise judge's verdicts (correct solution against each wrong one) and is scored with the
reference's pairwise rule (`RewardMATHEvaluation.processing_results`): with `w` of the `n`
comparisons won, the correct solution scores `w + 1` and each wrong one 1 if the judge preferred
the correct solution to it, else `n + 2`; so a problem is right only if every comparison is won,
and its reciprocal rank is `1 / (1 + losses)`.

Examples:
    >>> import tempfile, pathlib
    >>> from reward_lens_tl.evals.scores import ScoreRecord, ScoreWriter, read_scores
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "scores.jsonl"
    >>> with ScoreWriter(path, "rewardbench") as out:
    ...     out.write(ScoreRecord("rewardbench", "a/0", (1.0,), (0.5,), subset="a"))
    >>> read_scores(path)
    ScoreSet(1 rewardbench records from '...scores.jsonl', 0 skipped)
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from ..data import (
    ItemSet,
    SkippedRecord,
    load_rewardmath_pairwise,
    load_rewardmath_scores,
    load_rewardmath_step_scores,
)
from ..data._records import (
    Unparsable,
    collect,
    iter_records,
    reject,
    require,
    require_object,
    warn_skipped,
)
from ..data._validate import FieldError, check_id, check_optional_str, type_name
from ..errors import (
    InvalidArgumentError,
    MalformedRecordError,
    ScoreMismatchError,
    ScoreProducerMismatchError,
    UnknownBenchmarkError,
    UsageError,
)
from ..provenance import ResumableLog
from .prm import DEFAULT_PRM_AGGREGATE, aggregate_steps, check_aggregate

__all__ = [
    "BENCHMARKS",
    "ScoreRecord",
    "ScoreSet",
    "ScoreWriter",
    "StepScoreRecord",
    "check_benchmark",
    "read_scores",
]

BENCHMARKS: tuple[str, ...] = ("rewardbench", "rewardbench2", "rewardmath", "rmbench")
"""The benchmarks a score file can belong to."""

SCORE_FORMAT = "reward-lens-scores/1"
"""The `format` of a score file's header line."""

#: (chosen, rejected) response counts per benchmark; `None` = one or more.
_COUNTS: dict[str, tuple[int | None, int | None]] = {
    "rewardbench": (1, 1),
    "rewardbench2": (None, None),
    "rewardmath": (1, None),
    "rmbench": (3, 3),
}


def check_benchmark(name: str) -> str:
    """Normalise a benchmark name (`rm-bench` -> `rmbench`).

    Args:
        name: a benchmark name, in any case, with or without `-` / `_`.

    Returns:
        The name as one of `BENCHMARKS`.

    Raises:
        UnknownBenchmarkError: `name` is no known benchmark.

    Examples:
        >>> from reward_lens_tl.evals.scores import check_benchmark
        >>> check_benchmark("RM-Bench"), check_benchmark("reward_bench_2")
        ('rmbench', 'rewardbench2')
        >>> from reward_lens_tl.errors import UnknownBenchmarkError
        >>> try:
        ...     check_benchmark("mmlu")
        ... except UnknownBenchmarkError as err:
        ...     print(err)
        unknown benchmark 'mmlu'; known benchmarks: rewardbench, rewardbench2, rewardmath, rmbench
    """
    key = str(name).strip().lower().replace("-", "").replace("_", "")
    if key not in BENCHMARKS:
        raise UnknownBenchmarkError(
            f"unknown benchmark {name!r}; known benchmarks: {', '.join(BENCHMARKS)}"
        )
    return key


@dataclass(frozen=True)
class ScoreRecord:
    """The rewards a model gave one benchmark item (see the module docstring for the fields).

    Args:
        benchmark: the benchmark (normalised by `check_benchmark`).
        id: the item's id (str or int).
        chosen: the chosen responses' rewards.
        rejected: the rejected responses' rewards.
        subset: the item's subset, if any.
        domain: the item's domain, if any.
        item: a hash of the scored item's texts.

    Examples:
        >>> from reward_lens_tl.evals.scores import ScoreRecord
        >>> rec = ScoreRecord("RM-Bench", "chat/1", [1.0, 2.0, 3], (0.5, 2.5, 1.0), domain="chat")
        >>> rec.benchmark, rec.chosen
        ('rmbench', (1.0, 2.0, 3.0))
        >>> rec.to_json()
        {'benchmark': 'rmbench', 'id': 'chat/1', 'subset': None, 'domain': 'chat',
         'chosen': [1.0, 2.0, 3.0], 'rejected': [0.5, 2.5, 1.0]}
        >>> from reward_lens_tl.errors import MalformedRecordError
        >>> try:  # RM-Bench scores three chosen and three rejected styles
        ...     ScoreRecord("rmbench", "chat/2", (1.0,), (0.5, 2.5, 1.0))
        ... except MalformedRecordError as err:
        ...     print(err)
        field 'chosen': must hold exactly 3 score(s), got 1
    """

    benchmark: str
    id: Hashable
    chosen: tuple[float, ...]
    rejected: tuple[float, ...]
    subset: str | None = None
    domain: str | None = None
    #: A hash of the scored item's texts (written by `score_items`).
    item: str | None = None

    def __post_init__(self) -> None:
        """Normalise the benchmark and check every field."""
        object.__setattr__(self, "benchmark", check_benchmark(self.benchmark))
        check_id(self.id)
        n_chosen, n_rejected = _COUNTS[self.benchmark]
        for name, n in (("chosen", n_chosen), ("rejected", n_rejected)):
            object.__setattr__(self, name, _scores(getattr(self, name), name, n))
        check_optional_str(self.subset, "subset")
        check_optional_str(self.domain, "domain")
        check_optional_str(self.item, "item")

    def to_json(self) -> dict[str, Any]:
        """The record as written to a score file."""
        return record_json(self, chosen=list(self.chosen), rejected=list(self.rejected))


def record_json(record: Any, **scores: Any) -> dict[str, Any]:
    """A score record's JSON line: its identity fields, `scores`, and `item` when set.

    Args:
        record: a `ScoreRecord` (or any object with its identity fields).
        **scores: the score fields to write.

    Returns:
        The JSON object of the line.
    """
    out = {
        "benchmark": record.benchmark,
        "id": record.id,
        "subset": record.subset,
        "domain": record.domain,
        **scores,
    }
    return out if record.item is None else {**out, "item": record.item}


def _scores(values: Any, name: str, count: int | None) -> tuple[float, ...]:
    if isinstance(values, str) or not isinstance(values, list | tuple):
        raise FieldError(name, f"must be a list of numbers, got {type_name(values)}")
    if not values:
        what = "the correct solution's score" if name == "chosen" else "a score"
        raise FieldError(name, f"is empty: an item needs {what}")
    if count is not None and len(values) != count:
        raise FieldError(name, f"must hold exactly {count} score(s), got {len(values)}")
    out = []
    for k, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise FieldError(f"{name}[{k}]", f"must be a number, got {type_name(v)}")
        if not math.isfinite(v):
            raise FieldError(f"{name}[{k}]", f"must be finite, got {v}")
        out.append(float(v))
    return tuple(out)


StepLists = tuple[tuple[float, ...], ...]


@dataclass(frozen=True)
class StepScoreRecord(ScoreRecord):
    """A process reward model's per-step scores of one item, and each solution's score.

    `chosen_steps` / `rejected_steps` hold one tuple of step scores per solution (correct
    first); `chosen` / `rejected` are computed from them with `aggregate` (see
    `reward_lens_tl.evals.prm`), so metrics and comparisons read a step record as any
    other. An aggregate may be `+inf` (`mean_odd` of a step of exactly 1), which compares as
    in the benchmark's reference. `with_aggregate` re-aggregates.

    Args:
        benchmark: the benchmark (normalised by `check_benchmark`).
        id: the item's id (str or int).
        subset: the item's subset, if any.
        domain: the item's domain, if any.
        item: a hash of the scored item's texts.
        chosen_steps: the chosen solutions' step scores, one tuple per solution.
        rejected_steps: the rejected solutions' step scores, one tuple per solution.
        aggregate: the aggregate that scores each solution from its steps.

    Examples:
        >>> from reward_lens_tl.evals.scores import StepScoreRecord
        >>> rec = StepScoreRecord("rewardmath", 0, chosen_steps=((0.9, 0.8),),
        ...                       rejected_steps=((0.95, 0.1), (0.7,)), aggregate="min")
        >>> rec.chosen, rec.rejected, rec.with_aggregate("max").rejected
        ((0.8,), (0.1, 0.7), (0.95, 0.7))
    """

    chosen: tuple[float, ...] = field(init=False)
    rejected: tuple[float, ...] = field(init=False)
    chosen_steps: StepLists = field(kw_only=True)
    rejected_steps: StepLists = field(kw_only=True)
    aggregate: str = field(default=DEFAULT_PRM_AGGREGATE, kw_only=True)

    def __post_init__(self) -> None:
        """Check every field and aggregate each solution's steps."""
        object.__setattr__(self, "benchmark", check_benchmark(self.benchmark))
        check_id(self.id)
        n_chosen, n_rejected = _COUNTS[self.benchmark]
        for name, n in (("chosen_steps", n_chosen), ("rejected_steps", n_rejected)):
            object.__setattr__(self, name, _step_lists(getattr(self, name), name, n))
        object.__setattr__(self, "aggregate", check_aggregate(self.aggregate))
        check_optional_str(self.subset, "subset")
        check_optional_str(self.domain, "domain")
        check_optional_str(self.item, "item")
        for side in ("chosen", "rejected"):
            object.__setattr__(self, side, self._aggregated(side))

    def _aggregated(self, side: str) -> tuple[float, ...]:
        out = []
        for k, steps in enumerate(getattr(self, f"{side}_steps")):
            try:
                out.append(aggregate_steps(steps, self.aggregate))
            except InvalidArgumentError as err:
                raise InvalidArgumentError(
                    f"item {self.id!r}, {side} solution {k}: {err}"
                ) from None
        return tuple(out)

    def with_aggregate(self, aggregate: str) -> StepScoreRecord:
        """The same steps, each solution scored by `aggregate`.

        Args:
            aggregate: one of `reward_lens_tl.evals.prm.PRM_AGGREGATES`.

        Returns:
            A new `StepScoreRecord`.
        """
        return dataclasses.replace(self, aggregate=aggregate)

    def to_json(self) -> dict[str, Any]:
        """The record as written to a score file (its steps; the aggregate is a reading choice)."""
        return record_json(
            self,
            chosen_steps=[list(s) for s in self.chosen_steps],
            rejected_steps=[list(s) for s in self.rejected_steps],
        )


def _step_lists(values: Any, name: str, count: int | None) -> StepLists:
    if isinstance(values, str) or not isinstance(values, list | tuple):
        raise FieldError(name, f"must be a list of step-score lists, got {type_name(values)}")
    if not values:
        raise FieldError(name, "is empty: an item needs a solution's step scores")
    if count is not None and len(values) != count:
        raise FieldError(name, f"must hold exactly {count} solution(s), got {len(values)}")
    out = []
    for k, steps in enumerate(values):
        if isinstance(steps, str) or not isinstance(steps, list | tuple):
            raise FieldError(
                f"{name}[{k}]", f"must be a list of step scores, got {type_name(steps)}"
            )
        if not steps:
            raise FieldError(f"{name}[{k}]", "is empty: the solution has no step scores")
        out.append(_scores(steps, f"{name}[{k}]", None))
    return tuple(out)


def parse_record(index: int, record: Any, aggregate: str | None = None) -> ScoreRecord:
    """One line of a score file as a `ScoreRecord` (`FieldError` names the field).

    A record with `chosen_steps` is a `StepScoreRecord` scored by `aggregate`
    (default `reward_lens_tl.evals.prm.DEFAULT_PRM_AGGREGATE`).

    Args:
        index: the record's number in the file.
        record: the parsed JSON line.
        aggregate: the aggregate of a step record.

    Returns:
        The record.

    Raises:
        FieldError: a field is missing or malformed.
    """
    record = require_object(record)
    name = require(record, "benchmark")
    try:
        benchmark = check_benchmark(name)
    except UnknownBenchmarkError as err:
        raise FieldError("benchmark", str(err)) from None
    item_id = check_id(require(record, "id"))
    if item_id is None:
        raise FieldError("id", "must be a str or an int, got null")
    if "chosen_steps" in record:
        return StepScoreRecord(
            benchmark,
            item_id,
            subset=check_optional_str(record.get("subset"), "subset"),
            domain=check_optional_str(record.get("domain"), "domain"),
            item=check_optional_str(record.get("item"), "item"),
            chosen_steps=require(record, "chosen_steps"),
            rejected_steps=require(record, "rejected_steps"),
            aggregate=aggregate or DEFAULT_PRM_AGGREGATE,
        )
    return ScoreRecord(
        benchmark,
        item_id,
        require(record, "chosen"),
        require(record, "rejected"),
        subset=check_optional_str(record.get("subset"), "subset"),
        domain=check_optional_str(record.get("domain"), "domain"),
        item=check_optional_str(record.get("item"), "item"),
    )


@dataclass(frozen=True, repr=False)
class ScoreSet(ItemSet[ScoreRecord]):
    """The records of one score file (or run), with `skipped` records and their `source`.

    `producer` is the file header's record of what produced them (`None` if it has none);
    `pairwise` marks a pairwise judge's verdicts scored with RewardMATH's pairwise rule.

    Args:
        items: the records.
        skipped: the records skipped as malformed.
        source: where the records come from.
        producer: the file header's record of what produced them.
        pairwise: whether the records are a pairwise judge's verdicts.

    Examples:
        >>> from reward_lens_tl.evals.scores import ScoreRecord, ScoreSet
        >>> scores = ScoreSet([ScoreRecord("rewardmath", 0, (2.0,), (1.0, 3.0)),
        ...                    ScoreRecord("rewardmath", 1, (5.0,), (1.0, 0.5))], source="demo")
        >>> scores, scores.benchmark, scores.ids(), scores.kind()
        (ScoreSet(2 rewardmath records from 'demo', 0 skipped), 'rewardmath', [0, 1],
         'one score per response')
        >>> scores.to_dataframe()
           id subset domain chosen    rejected
        0   0   None   None  [2.0]  [1.0, 3.0]
        1   1   None   None  [5.0]  [1.0, 0.5]
    """

    producer: Mapping | None = None
    pairwise: bool = False

    @property
    def benchmark(self) -> str | None:
        """The records' benchmark (`None` for an empty set)."""
        return self.items[0].benchmark if self.items else None

    @property
    def prm_aggregate(self) -> str | None:
        """The aggregate of a process reward model's step records (`None` for other scores)."""
        first = self.items[0] if self.items else None
        return first.aggregate if isinstance(first, StepScoreRecord) else None

    def with_aggregate(self, aggregate: str) -> ScoreSet:
        """The same step records, every solution scored by `aggregate` (PRM scores only).

        Args:
            aggregate: one of `reward_lens_tl.evals.prm.PRM_AGGREGATES`.

        Returns:
            A new `ScoreSet`.

        Raises:
            InvalidArgumentError: the records are not per-step scores.
        """
        if self.prm_aggregate is None:
            raise InvalidArgumentError(
                f"{self.source}: a PRM aggregate applies to per-step scores; these are "
                f"{self.kind()}"
            )
        items = tuple(r.with_aggregate(aggregate) for r in self.items)  # type: ignore[attr-defined]
        return dataclasses.replace(self, items=items)

    def kind(self) -> str:
        """What the records hold, in words (for messages and the CLI)."""
        if self.pairwise:
            return "a pairwise judge's verdicts"
        if self.prm_aggregate is not None:
            return "per-step scores"
        return "one score per response"

    def __repr__(self) -> str:
        """The record count, benchmark, source and skipped count."""
        return (
            f"ScoreSet({len(self)} {self.benchmark or ''} records from {self.source!r}, "
            f"{len(self.skipped)} skipped)"
        )

    def ids(self) -> list[Hashable]:
        """The records' ids, in order."""
        return [r.id for r in self.items]

    def to_dataframe(self):
        """One row per record.

        Columns: `id`, `subset`, `domain`, `chosen`, `rejected` (and a step record's
        `chosen_steps` / `rejected_steps`).

        Returns:
            A `pandas.DataFrame`.
        """
        import pandas as pd

        rows = [{**r.to_json(), "chosen": list(r.chosen), "rejected": list(r.rejected)}
                for r in self.items]  # fmt: skip
        frame = pd.DataFrame(rows)
        return frame.drop(columns=[c for c in ("benchmark", "item") if c in frame])


def _published_kind(path: Path) -> str | None:
    """The kind of a published RewardMATH score file, by its first record.

    Returns:
        `"scores"`, `"steps"` or `"pairwise"`, or `None` for anything else.
    """
    first = next(iter_records(path), (0, None))[1]
    if not (isinstance(first, dict) and {"solution_reference", "score"} <= set(first)):
        return None
    if "chosen_position" in first:
        return "pairwise"
    score = first["score"]
    return "steps" if isinstance(score, list) and score and isinstance(score[0], list) else "scores"


def read_scores(
    path: str | PathLike[str],
    *,
    benchmark: str | None = None,
    skip_bad: bool = False,
    prm_aggregate: str | None = None,
) -> ScoreSet:
    """Read a score file.

    The file is this harness's JSON lines, or a published RewardMATH `*_scores.json`: one
    score, per-step scores or pairwise verdicts per solution; see the module docstring.

    `benchmark` checks that the file belongs to it. Records with another benchmark than the
    first or a repeated id are malformed (field `benchmark` / `id`). `prm_aggregate` scores
    per-step records (one of `reward_lens_tl.evals.prm.PRM_AGGREGATES`; default
    `reward_lens_tl.evals.prm.DEFAULT_PRM_AGGREGATE`); naming one for a file of other
    scores is an `reward_lens_tl.errors.InvalidArgumentError`.

    Args:
        path: the score file.
        benchmark: the benchmark the file must belong to (`None`: any).
        skip_bad: skip malformed records (counted in `.skipped`) instead of raising.
        prm_aggregate: the aggregate of per-step records.

    Returns:
        The file's records, as a `ScoreSet`.

    Raises:
        FileNotFoundError: there is no such file.
        ScoreMismatchError: the file holds another benchmark's scores.
        InvalidArgumentError: `prm_aggregate` is named for a file without per-step scores.

    Examples:
        >>> import json, pathlib, tempfile
        >>> from reward_lens_tl.evals.scores import read_scores
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "prm.jsonl"
        >>> _ = path.write_text(json.dumps({"benchmark": "rewardmath", "id": 0,
        ...     "chosen_steps": [[0.9, 0.8]], "rejected_steps": [[0.95, 0.1], [0.7]]}))
        >>> scores = read_scores(path, benchmark="rewardmath", prm_aggregate="min")
        >>> scores.kind(), scores.prm_aggregate, scores[0].chosen, scores[0].rejected
        ('per-step scores', 'min', (0.8,), (0.1, 0.7))
        >>> scores.with_aggregate("max")[0].rejected  # re-aggregated, same steps
        (0.95, 0.7)
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such score file: {path}")
    if prm_aggregate is not None:
        check_aggregate(prm_aggregate)
    kind = _published_kind(path)
    if kind is not None:
        scores = _published_rewardmath(path, kind, skip_bad, prm_aggregate)
    else:
        scores = _harness_scores(path, skip_bad, prm_aggregate)
    if benchmark is not None and scores.benchmark not in (None, check_benchmark(benchmark)):
        raise ScoreMismatchError(
            f"{path}: holds {scores.benchmark} scores, not {check_benchmark(benchmark)}"
        )
    if prm_aggregate is not None and scores.items and scores.prm_aggregate is None:
        raise InvalidArgumentError(
            f"{path}: prm_aggregate={prm_aggregate!r} (--prm-aggregate) aggregates a process "
            f"reward model's per-step scores, but this file holds {scores.kind()}; leave it out"
        )
    return scores


def _naming(path: Path, index: int, build: Callable[..., ScoreRecord], *args, **kwargs):
    """`build(*args, **kwargs)`, an aggregate it cannot compute named with the file and record."""
    try:
        return build(*args, **kwargs)
    except InvalidArgumentError as err:
        raise InvalidArgumentError(f"{path}: record {index}: {err}") from None


def _harness_scores(path: Path, skip_bad: bool, aggregate: str | None) -> ScoreSet:
    header, lines = _header_and_records(path)
    records, skipped = collect(
        path,
        lines,
        lambda i, r: (i, _naming(path, i, parse_record, i, r, aggregate)),
        skip_bad=skip_bad,
        limit=None,
        id_key="id",
        allow_empty=True,  # a score file may hold no record yet
    )
    kept = _consistent(path, records, skip_bad, skipped)
    warn_skipped(path, skipped, stacklevel=4)
    producer = header.get("producer") if header else None
    return ScoreSet(tuple(kept), tuple(skipped), str(path), producer=producer)


def _is_header(record: Any) -> bool:
    return isinstance(record, dict) and record.get("format") == SCORE_FORMAT


def _header_and_records(path: Path) -> tuple[dict | None, list[tuple[int, Any]]]:
    """The file's header (or `None`) and its records numbered from 0 after the header.

    A torn last line (no newline, not JSON: a writer killed mid-line) is dropped with a warning.
    """
    records = list(iter_records(path))
    header = None
    if records and _is_header(records[0][1]):
        header = records.pop(0)[1]
        records = [(i - 1, r) for i, r in records]
    if records and isinstance(records[-1][1], Unparsable) and _ends_without_newline(path):
        warnings.warn(
            f"{path}: ignored a torn last line (a run interrupted mid-write); resume the run "
            "to score that item again",
            stacklevel=4,
        )
        records.pop()
    return header, records


def _ends_without_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        if f.read(2) == b"\x1f\x8b":
            return False  # gzip: a torn archive is reported by the reader
        f.seek(-1, 2)
        return f.read(1) != b"\n"


def _consistent(
    path: Path,
    records: list[tuple[int, ScoreRecord]],
    skip_bad: bool,
    skipped: list[SkippedRecord],
) -> list[ScoreRecord]:
    """Records with the first's benchmark and a new id; the others raise or are skipped."""
    kept: list[ScoreRecord] = []
    seen: dict[Hashable, int] = {}
    for index, record in records:
        problem = None
        if kept and record.benchmark != kept[0].benchmark:
            first = kept[0].benchmark
            problem = ("benchmark", f"is {record.benchmark!r}, but the first record's is {first!r}")
        elif record.id in seen:
            problem = ("id", f"repeats the id of record {seen[record.id]}")
        if problem is None:
            seen[record.id] = index
            kept.append(record)
            continue
        reject(SkippedRecord(index, record.id, *problem, str(path)), skip_bad, skipped)
    return kept


def _published_rewardmath(path: Path, kind: str, skip_bad: bool, aggregate: str | None) -> ScoreSet:
    """A published RewardMATH score file's problems as records (see the module docstring)."""
    load = {
        "scores": load_rewardmath_scores,
        "steps": load_rewardmath_step_scores,
        "pairwise": load_rewardmath_pairwise,
    }[kind]
    frame = load(path, skip_bad=skip_bad)
    column = {"scores": "score", "steps": "steps", "pairwise": "won"}[kind]
    groups: dict[int, tuple[list, list]] = {}  # problem -> (correct, wrong) values, file order
    for problem_id, is_correct, value in zip(
        frame["problem_id"].tolist(), frame["is_correct"].tolist(), frame[column].tolist(),
        strict=True,
    ):  # fmt: skip
        groups.setdefault(int(problem_id), ([], []))[0 if is_correct else 1].append(value)
    records = []
    for index, (correct, wrong) in groups.items():
        if kind == "pairwise":
            records.append(_pairwise_record(index, wrong))
        elif kind == "scores":
            records.append(ScoreRecord("rewardmath", index, tuple(correct), tuple(wrong)))
        else:
            record = _naming(
                path,
                index,
                StepScoreRecord,
                "rewardmath",
                index,
                chosen_steps=tuple(correct),
                rejected_steps=tuple(wrong),
                aggregate=aggregate or DEFAULT_PRM_AGGREGATE,
            )
            records.append(record)
    skipped = tuple(frame.attrs.get("skipped", ()))
    return ScoreSet(tuple(records), skipped, str(path), pairwise=kind == "pairwise")


def _pairwise_record(index: int, won: list[bool]) -> ScoreRecord:
    """RewardMATH's pairwise rule as scores.

    With `w` of `n` comparisons won, the correct solution scores `w + 1` and each wrong one 1
    (lost to the correct one) or `n + 2`.
    """
    n = len(won)
    rejected = tuple(1.0 if w else n + 2.0 for w in won)
    return ScoreRecord("rewardmath", index, (sum(won) + 1.0,), rejected)


class ScoreWriter:
    """Append `ScoreRecord`s to a score file as they are made (a context manager).

    `producer` records what makes the scores (see the module docstring; `None` records an
    empty one). With `resume=True` an existing file is read first: it must have been written
    with the same `producer` (else `ScoreProducerMismatchError` naming both), its ids
    are in `done`, and a torn last line left by a crash is dropped with a warning. With
    `resume=False` it is emptied. The file is locked from construction until the `with`
    block ends (`reward_lens_tl.provenance.FileInUseError` for a second writer), and a
    file that received no record is removed at the end, so a failed run leaves no empty file.
    A `path` that cannot be a file (a directory, a path under a regular file, an unwritable
    place) is `reward_lens_tl.errors.InvalidArgumentError`, naming it.

    Args:
        path: the score file.
        benchmark: the benchmark of every record written.
        resume: continue an existing file (else empty it).
        producer: what makes the scores.

    Raises:
        InvalidArgumentError: `path` cannot be a file (see above).
        FileInUseError: another writer holds the file.
        ScoreProducerMismatchError: a resumed file was written by another producer.
        MalformedRecordError: a resumed file holds a malformed record or a repeated id.

    Examples:
        >>> import pathlib, tempfile
        >>> from reward_lens_tl.evals.scores import ScoreRecord, ScoreWriter, read_scores
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "scores.jsonl"
        >>> producer = {"model": {"name": "demo"}}
        >>> with ScoreWriter(path, "rewardbench", producer=producer) as out:
        ...     out.write(ScoreRecord("rewardbench", "a/0", (1.0,), (0.5,), subset="a"))
        >>> with ScoreWriter(path, "rewardbench", producer=producer) as out:  # resumes
        ...     print(list(out.done))
        ...     out.write(ScoreRecord("rewardbench", "a/1", (0.0,), (2.0,), subset="a"))
        ['a/0']
        >>> read_scores(path).ids(), read_scores(path).producer
        (['a/0', 'a/1'], {'model': {'name': 'demo'}})
    """

    def __init__(
        self,
        path: str | PathLike[str],
        benchmark: str,
        *,
        resume: bool = True,
        producer: Mapping | None = None,
    ):
        """Lock the file and read the records of a resumed one (see the class docstring)."""
        self.path = Path(path)
        self.benchmark = check_benchmark(benchmark)
        self.done: dict[Hashable, ScoreRecord] = {}
        header = {"format": SCORE_FORMAT, "benchmark": self.benchmark, "producer": producer or {}}
        self._log: ResumableLog | None = ResumableLog(
            self.path,
            header,
            fresh=not resume,
            mismatch=ScoreProducerMismatchError,
            what="another model or with other arguments",
        ).__enter__()  # locked now, so nobody writes between reading and appending
        try:
            for record in _resumed_records(self.path, self._log.records, self.benchmark):
                self.done[record.id] = record
        except BaseException:
            self.close()
            raise
        self._open = False

    def __enter__(self) -> ScoreWriter:
        """Open the writer for `write` / `write_all`."""
        if self._log is None:
            raise UsageError(f"{self.path}: this ScoreWriter was closed; make a new one")
        self._open = True
        return self

    def __exit__(self, *exc) -> None:
        """Release the file (see `close`)."""
        self.close()

    def close(self) -> None:
        """Release the file (removing it if no record was ever written)."""
        if self._log is not None:
            self._log.__exit__(None, None, None)
            self._log = None
        self._open = False

    def __del__(self) -> None:  # a writer made but never entered still releases its lock
        """Release the file if still held."""
        if getattr(self, "_log", None) is not None:
            self.close()

    def write(self, record: ScoreRecord) -> None:
        """Append one record.

        Args:
            record: a record of the writer's benchmark.
        """
        self.write_all([record])

    def write_all(self, records: Iterable[ScoreRecord]) -> None:
        """Append records (one line each, the header first in a new file).

        Args:
            records: records of the writer's benchmark.

        Raises:
            UsageError: the writer is not open as a context manager.
            ScoreMismatchError: a record belongs to another benchmark.
        """
        log = self._log
        if not self._open or log is None:
            raise UsageError("use ScoreWriter as a context manager: with ScoreWriter(...) as w")
        records = list(records)
        for record in records:
            if record.benchmark != self.benchmark:
                raise ScoreMismatchError(
                    f"{self.path}: a {record.benchmark} record cannot join {self.benchmark} scores"
                )
        log.append(r.to_json() for r in records)
        self.done |= {r.id: r for r in records}


def _resumed_records(path: Path, lines: list[tuple[int, Any]], benchmark: str) -> list[ScoreRecord]:
    """The records of a file being resumed; a malformed one or a repeated id names the line."""
    out: list[ScoreRecord] = []
    seen: dict[Hashable, int] = {}
    for line, raw in lines:
        try:
            record = parse_record(line, raw)
        except MalformedRecordError as err:
            raise MalformedRecordError(
                f"{path}, line {line}: {err}; delete the file (or fix the line) to resume"
            ) from None
        if record.benchmark != benchmark:
            raise ScoreMismatchError(
                f"{path}, line {line}: holds {record.benchmark} scores, not {benchmark}"
            )
        if record.id in seen:
            raise MalformedRecordError(
                f"{path}, line {line}: field 'id': repeats the id {record.id!r} of line "
                f"{seen[record.id]}; delete the file to score again"
            )
        seen[record.id] = line
        out.append(record)
    return out
