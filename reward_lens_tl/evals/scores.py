"""Per-item score files: the format a scoring run writes as it goes, and readers for it.

**Format** (JSON lines, UTF-8, one record per scored item, written in scoring order)::

    {"benchmark": "rewardmath", "id": 17, "subset": null, "domain": null,
     "chosen": [1.25], "rejected": [0.5, 2.0, ...]}

* ``benchmark``: ``"rewardbench"``, ``"rewardmath"`` or ``"rmbench"`` (the same in every record);
* ``id``: the item's id (str or int, unique in the file): RewardBench's ``id`` (or
  ``"<subset>/<index>"`` when a record has none), RewardMATH's ``problem_id``, RM-Bench's
  ``"<domain>/<id>"``;
* ``subset`` / ``domain``: optional strings (RewardBench subset; RM-Bench subset and domain);
* ``chosen`` / ``rejected``: the rewards, as lists of finite numbers: one chosen and one rejected
  (RewardBench), the correct solution and every wrong one in file order (RewardMATH), the three
  chosen and three rejected styles concise / detailed / markdown (RM-Bench).

A run appends each record as soon as its item is scored and flushes, so an interrupted run loses at
most the items in flight; rerunning with the same output file continues where it stopped (a torn
last line from a crash is dropped with a warning). Reading checks every record: a malformed one
raises :class:`~reward_lens_tl.errors.MalformedRecordError` naming the file, the record and the
field, or with ``skip_bad=True`` is skipped, counted in ``.skipped`` and reported in one warning;
good records are never dropped.

The published RewardMATH ``*_scores.json`` files (one record per problem with ``problem``,
``solution_reference`` and ``score``) are read too: the solution whose reference is
``human_to_GPT-4`` is the correct one, the others are the wrong ones in file order.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "scores.jsonl"
>>> with ScoreWriter(path, "rewardbench") as out:
...     out.write(ScoreRecord("rewardbench", "a/0", (1.0,), (0.5,), subset="a"))
>>> read_scores(path)
ScoreSet(1 rewardbench records from '...scores.jsonl', 0 skipped)
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

from reward_lens_tl.data import ItemSet, SkippedRecord, load_rewardmath_scores
from reward_lens_tl.data._records import (
    collect,
    iter_records,
    reject,
    require,
    require_object,
    warn_skipped,
)
from reward_lens_tl.data._validate import FieldError, check_id, check_optional_str, type_name
from reward_lens_tl.evals.errors import ScoreMismatchError, UnknownBenchmarkError

__all__ = [
    "BENCHMARKS",
    "ScoreRecord",
    "ScoreSet",
    "ScoreWriter",
    "check_benchmark",
    "read_scores",
]

BENCHMARKS: tuple[str, ...] = ("rewardbench", "rewardmath", "rmbench")
"""The benchmarks a score file can belong to."""

#: (chosen, rejected) response counts per benchmark; ``None`` = one or more.
_COUNTS: dict[str, tuple[int, int | None]] = {
    "rewardbench": (1, 1),
    "rewardmath": (1, None),
    "rmbench": (3, 3),
}


def check_benchmark(name: str) -> str:
    """``name`` normalised (``rm-bench`` -> ``rmbench``), or :class:`UnknownBenchmarkError`."""
    key = str(name).strip().lower().replace("-", "").replace("_", "")
    if key not in BENCHMARKS:
        raise UnknownBenchmarkError(
            f"unknown benchmark {name!r}; known benchmarks: {', '.join(BENCHMARKS)}"
        )
    return key


@dataclass(frozen=True)
class ScoreRecord:
    """The rewards a model gave one benchmark item (see the module docstring for the fields)."""

    benchmark: str
    id: Hashable
    chosen: tuple[float, ...]
    rejected: tuple[float, ...]
    subset: str | None = None
    domain: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "benchmark", check_benchmark(self.benchmark))
        check_id(self.id)
        n_chosen, n_rejected = _COUNTS[self.benchmark]
        for name, n in (("chosen", n_chosen), ("rejected", n_rejected)):
            object.__setattr__(self, name, _scores(getattr(self, name), name, n))
        check_optional_str(self.subset, "subset")
        check_optional_str(self.domain, "domain")

    def to_json(self) -> dict[str, Any]:
        """The record as written to a score file."""
        return {
            "benchmark": self.benchmark,
            "id": self.id,
            "subset": self.subset,
            "domain": self.domain,
            "chosen": list(self.chosen),
            "rejected": list(self.rejected),
        }


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


def parse_record(index: int, record: Any) -> ScoreRecord:
    """One line of a score file as a :class:`ScoreRecord` (``FieldError`` names the field)."""
    record = require_object(record)
    name = require(record, "benchmark")
    try:
        benchmark = check_benchmark(name)
    except UnknownBenchmarkError as err:
        raise FieldError("benchmark", str(err)) from None
    item_id = check_id(require(record, "id"))
    if item_id is None:
        raise FieldError("id", "must be a str or an int, got null")
    return ScoreRecord(
        benchmark,
        item_id,
        require(record, "chosen"),
        require(record, "rejected"),
        subset=check_optional_str(record.get("subset"), "subset"),
        domain=check_optional_str(record.get("domain"), "domain"),
    )


@dataclass(frozen=True, repr=False)
class ScoreSet(ItemSet[ScoreRecord]):
    """The records of one score file (or run), with ``skipped`` records and their ``source``."""

    @property
    def benchmark(self) -> str | None:
        return self.items[0].benchmark if self.items else None

    def __repr__(self) -> str:
        return (
            f"ScoreSet({len(self)} {self.benchmark or ''} records from {self.source!r}, "
            f"{len(self.skipped)} skipped)"
        )

    def ids(self) -> list[Hashable]:
        return [r.id for r in self.items]

    def to_dataframe(self):
        """One row per record: ``id``, ``subset``, ``domain``, ``chosen``, ``rejected``."""
        import pandas as pd

        return pd.DataFrame([r.to_json() for r in self.items]).drop(columns="benchmark")


def _is_published_rewardmath(path: Path) -> bool:
    first = next(iter_records(path), (0, None))[1]
    return isinstance(first, dict) and {"solution_reference", "score"} <= set(first)


def read_scores(
    path: str | PathLike[str], *, benchmark: str | None = None, skip_bad: bool = False
) -> ScoreSet:
    """Read a score file (this harness's JSON lines, or a published RewardMATH ``*_scores.json``).

    ``benchmark`` checks that the file belongs to it. Records with another benchmark than the
    first or a repeated id are malformed (field ``benchmark`` / ``id``).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such score file: {path}")
    if _is_published_rewardmath(path):
        scores = _published_rewardmath(path, skip_bad)
    else:
        records, skipped = collect(
            path,
            iter_records(path),
            lambda i, r: (i, parse_record(i, r)),
            skip_bad=skip_bad,
            limit=None,
            id_key="id",
        )
        kept = _consistent(path, records, skip_bad, skipped)
        warn_skipped(path, skipped)
        scores = ScoreSet(kept, skipped, str(path))
    if benchmark is not None and scores.benchmark not in (None, check_benchmark(benchmark)):
        raise ScoreMismatchError(
            f"{path}: holds {scores.benchmark} scores, not {check_benchmark(benchmark)}"
        )
    return scores


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


def _published_rewardmath(path: Path, skip_bad: bool) -> ScoreSet:
    frame = load_rewardmath_scores(path, skip_bad=skip_bad)
    records = []
    for problem_id, group in frame.groupby("problem_id", sort=False):
        correct = group[group["is_correct"]]
        wrong = group[~group["is_correct"]]
        records.append(
            ScoreRecord(
                "rewardmath",
                int(problem_id),
                tuple(correct["score"].tolist()),
                tuple(wrong["score"].tolist()),
            )
        )
    return ScoreSet(records, frame.attrs.get("skipped", ()), str(path))


class ScoreWriter:
    """Append :class:`ScoreRecord`\\ s to a score file as they are made (a context manager).

    With ``resume=True`` an existing file is read first (its ids are in :attr:`done`; a torn last
    line left by a crash is dropped with a warning); with ``resume=False`` it is overwritten.
    """

    def __init__(self, path: str | PathLike[str], benchmark: str, *, resume: bool = True):
        self.path = Path(path)
        self.benchmark = check_benchmark(benchmark)
        self.done: dict[Hashable, ScoreRecord] = {}
        if resume and self.path.exists():
            self._drop_torn_tail()
            for record in read_scores(self.path, benchmark=self.benchmark):
                self.done[record.id] = record
        elif self.path.exists():
            self.path.unlink()
        self._file = None

    def _drop_torn_tail(self) -> None:
        data = self.path.read_bytes()
        if not data or data.endswith(b"\n"):
            return
        cut = data.rfind(b"\n") + 1
        tail = data[cut:].decode("utf-8", errors="replace")
        try:
            json.loads(tail)
        except json.JSONDecodeError:
            warnings.warn(
                f"{self.path}: dropped a torn last line from an interrupted run ({len(tail)} "
                "characters); its item will be scored again",
                stacklevel=3,
            )
            self.path.write_bytes(data[:cut])
            return
        self.path.write_bytes(data + b"\n")

    def __enter__(self) -> ScoreWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (closed in __exit__)
        return self

    def __exit__(self, *exc) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def write(self, record: ScoreRecord) -> None:
        self.write_all([record])

    def write_all(self, records: Iterable[ScoreRecord]) -> None:
        """Append records and flush (one line each)."""
        if self._file is None:
            raise RuntimeError("use ScoreWriter as a context manager: with ScoreWriter(...) as w")
        for record in records:
            if record.benchmark != self.benchmark:
                raise ScoreMismatchError(
                    f"{self.path}: a {record.benchmark} record cannot join {self.benchmark} scores"
                )
            self._file.write(json.dumps(record.to_json()) + "\n")
            self.done[record.id] = record
        self._file.flush()
