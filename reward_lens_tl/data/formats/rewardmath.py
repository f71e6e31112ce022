"""RewardMATH: one correct against several wrong step-by-step solutions per math problem.

`RewardMATH_direct.json` is a JSON list with one record per *solution*: `problem`,
`problem_id`, `eval_solution` (the list of steps), `solution_type` (`"chosen"` for the one
correct solution, `"rejected"` for the wrong ones), `solution_reference` (who wrote it;
`human_to_GPT-4` is the correct one) and `id`, plus per-problem fields (`answer`,
`subject`, `level`). `load_rewardmath` groups the records by `problem_id` (in order of
first appearance) into `RankedItem` items. A solution's text is its steps joined by a newline,
as the benchmark's code does for classifier reward models. `metadata` holds `index` (of the
problem's first record), the correct record's per-problem fields, and per solution (correct first,
then the wrong ones in file order) `solution_references`, `solution_ids` and `steps`.

A solution record is malformed if it is not an object, a field above is missing or has the wrong
type, `solution_type` is neither value, its `problem` text differs from the problem's first
record, or it is a second `"chosen"` solution. A problem left without a correct or without any
wrong solution is malformed as a whole (reported at its first record, id = `problem_id`).

The `*_scores.json` files (published per-solution scores of real reward models; in the
benchmark's repository `results/RewardMATH/*_reward.json`) hold one record per problem:
`problem`, `solution_reference` and `score` (parallel lists, one entry per solution).
`load_rewardmath_scores` flattens them into a DataFrame, one row per (problem, solution).
A problem's `solution_reference` may name the same model more than once, so
`(problem_id, solution_index)` is the key, not `(problem_id, solution_reference)`. Two other
kinds of score file share the layout: a process reward model's, whose `score` holds a list of
per-step scores per solution (`load_rewardmath_step_scores`), and a pairwise judge's, whose
`score` holds an `"A"`/`"B"` verdict per wrong solution compared with the correct one, shown
at `chosen_position` (`load_rewardmath_pairwise`).
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._records import (
    check_limit,
    collect,
    extras,
    iter_records,
    reject,
    require,
    require_object,
    warn_skipped,
)
from .._validate import (
    FieldError,
    check_id,
    check_responses,
    check_str,
    type_name,
)
from ..schema import ItemSet, RankedItem, SkippedRecord

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CORRECT_REFERENCE",
    "VERDICTS",
    "load_rewardmath",
    "load_rewardmath_pairwise",
    "load_rewardmath_scores",
    "load_rewardmath_step_scores",
]

CORRECT_REFERENCE = "human_to_GPT-4"
"""The `solution_reference` of RewardMATH's correct solution."""

_PER_SOLUTION = (
    "problem",
    "problem_id",
    "eval_solution",
    "solution_type",
    "solution_reference",
    "id",
)


@dataclass(frozen=True)
class _Solution:
    index: int
    problem_id: Hashable
    problem: str
    steps: tuple[str, ...]
    correct: bool
    reference: str
    id: Hashable | None
    extras: dict[str, Any]


def _parse_solution(index: int, record: Any) -> _Solution:
    record = require_object(record)
    problem = check_str(require(record, "problem"), "problem")
    problem_id = check_id(require(record, "problem_id"), "problem_id")
    steps = check_responses(require(record, "eval_solution"), "eval_solution")
    kind = require(record, "solution_type")
    if kind not in ("chosen", "rejected"):
        raise FieldError("solution_type", f"must be 'chosen' or 'rejected', got {kind!r}")
    reference = check_str(require(record, "solution_reference"), "solution_reference")
    solution_id = check_id(record.get("id"))
    more = extras(record, _PER_SOLUTION)
    return _Solution(
        index, problem_id, problem, steps, kind == "chosen", reference, solution_id, more
    )


def _group(
    path: Path, solutions: list[_Solution], skip_bad: bool, skipped: list[SkippedRecord]
) -> dict[Hashable, list[_Solution]]:
    """Solutions by problem_id; records inconsistent with their problem raise or are skipped."""
    groups: dict[Hashable, list[_Solution]] = {}
    for s in solutions:
        group = groups.setdefault(s.problem_id, [])
        problem = _conflict(s, group)
        if problem is None:
            group.append(s)
            continue
        field, reason = problem
        reject(SkippedRecord(s.index, s.id, field, reason, str(path)), skip_bad, skipped)
    return groups


def _conflict(s: _Solution, group: list[_Solution]) -> tuple[str, str] | None:
    if group and s.problem != group[0].problem:
        first = group[0].index
        return "problem", f"differs from record {first}'s, which has the same problem_id"
    correct = next((g for g in group if g.correct), None)
    if s.correct and correct is not None:
        return (
            "solution_type",
            f"second 'chosen' solution of its problem (first: record {correct.index})",
        )
    return None


def _item(group: list[_Solution], separator: str) -> RankedItem | tuple[str, str]:
    """The problem's RankedItem, or (field, reason) if it lacks a correct or a wrong solution."""
    correct = [s for s in group if s.correct]
    wrong = [s for s in group if not s.correct]
    if not correct:
        return "solution_type", "the problem has no 'chosen' (correct) solution"
    if not wrong:
        return "solution_type", "the problem has no 'rejected' (wrong) solution"
    ordered = [correct[0], *wrong]
    metadata = {
        **correct[0].extras,
        "index": group[0].index,
        "solution_references": tuple(s.reference for s in ordered),
        "solution_ids": tuple(s.id for s in ordered),
        "steps": tuple(s.steps for s in ordered),
    }
    return RankedItem(
        prompt=group[0].problem,
        correct=separator.join(correct[0].steps),
        wrong=tuple(separator.join(s.steps) for s in wrong),
        id=group[0].problem_id,
        metadata=metadata,
    )


def load_rewardmath(
    path: str | PathLike[str],
    *,
    skip_bad: bool = False,
    limit: int | None = None,
    step_separator: str = "\n",
) -> ItemSet[RankedItem]:
    r"""Load `RewardMATH_direct.json` as one `RankedItem` per problem.

    `limit` counts problems (the whole file is still read and checked). `step_separator`
    joins a solution's steps into its text.

    Args:
        path: The file.
        skip_bad: Whether to skip malformed records (with one warning) rather than raise.
        limit: The most problems, or `None`.
        step_separator: Joins a solution's steps into its text.

    Returns:
        An `ItemSet` of `RankedItem`.

    Raises:
        MalformedRecordError: For a malformed record, unless `skip_bad`.

    Examples:
        >>> import json, tempfile, pathlib
        >>> from reward_lens_tl.data import load_rewardmath
        >>> f = pathlib.Path(tempfile.mkdtemp()) / "RewardMATH_direct.json"
        >>> rec = lambda i, kind, steps: {"problem": "1+1?", "problem_id": 0, "id": i,
        ...     "eval_solution": steps, "solution_type": kind, "solution_reference": "x"}
        >>> _ = f.write_text(json.dumps([rec(0, "chosen", ["1+1=2.", "So 2."]),
        ...                              rec(1, "rejected", ["1+1=3."])]))
        >>> item = load_rewardmath(f)[0]
        >>> item.id, item.correct, item.wrong
        (0, '1+1=2.\nSo 2.', ('1+1=3.',))
    """
    check_limit(limit)
    path = Path(path)
    solutions, skipped = collect(
        path, iter_records(path), _parse_solution, skip_bad=skip_bad, limit=None, id_key="id"
    )
    items: list[RankedItem] = []
    for problem_id, group in _group(path, solutions, skip_bad, skipped).items():
        if limit is not None and len(items) >= limit:
            break
        item = _item(group, step_separator)
        if isinstance(item, RankedItem):
            items.append(item)
            continue
        reject(SkippedRecord(group[0].index, problem_id, *item, str(path)), skip_bad, skipped)
    warn_skipped(path, skipped)
    return ItemSet(tuple(items), tuple(skipped), str(path))


# --------------------------------------------------------------------------------------------
# published scores


def _problem_and_references(record: Any) -> tuple[dict[str, Any], str, tuple[str, ...]]:
    record = require_object(record)
    problem = check_str(require(record, "problem"), "problem")
    references = check_responses(require(record, "solution_reference"), "solution_reference")
    return record, problem, references


def _entries(record: dict[str, Any], name: str, count: int, of: str) -> list[Any]:
    """The list field `name` with one entry per solution reference."""
    values = require(record, name)
    if isinstance(values, str) or not isinstance(values, list):
        raise FieldError(name, f"must be a list ({of}), got {type_name(values)}")
    if len(values) != count:
        raise FieldError(
            name, f"has {len(values)} entries but solution_reference has {count} (one per solution)"
        )
    return values


def _number(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FieldError(field, f"must be a number, got {type_name(value)}")
    if not math.isfinite(value):
        raise FieldError(field, f"must be finite, got {value}")
    return float(value)


def _check_correct_once(references: tuple[str, ...]) -> None:
    if references.count(CORRECT_REFERENCE) != 1:
        n = references.count(CORRECT_REFERENCE)
        raise FieldError("solution_reference", f"must name {CORRECT_REFERENCE!r} once, not {n}x")


def _rows(index: int, problem: str, references: tuple[str, ...], **columns: list[Any]):
    return [
        {
            "problem_id": index,
            "problem": problem,
            "solution_index": k,
            "solution_reference": ref,
            "is_correct": ref == CORRECT_REFERENCE,
            **{name: values[k] for name, values in columns.items()},
        }
        for k, ref in enumerate(references)
    ]


def _parse_scores(index: int, record: Any) -> list[dict[str, Any]]:
    record, problem, references = _problem_and_references(record)
    scores = _entries(record, "score", len(references), "of numbers")
    for k, score in enumerate(scores):
        if isinstance(score, list):
            raise FieldError(
                f"score[{k}]",
                "is a list of per-step scores (a process reward model's file): read it with "
                "load_rewardmath_step_scores, or `reward-lens eval rewardmath --scores FILE "
                "--prm-aggregate NAME`",
            )
    values = [_number(score, f"score[{k}]") for k, score in enumerate(scores)]
    _check_correct_once(references)
    return _rows(index, problem, references, score=values)


def _parse_step_scores(index: int, record: Any) -> list[dict[str, Any]]:
    record, problem, references = _problem_and_references(record)
    scores = _entries(record, "score", len(references), "one list of step scores per solution")
    steps = []
    for k, solution in enumerate(scores):
        if isinstance(solution, str) or not isinstance(solution, list):
            raise FieldError(
                f"score[{k}]",
                f"must be a list of per-step scores, got {type_name(solution)} (a file of one "
                "score per solution is read by load_rewardmath_scores)",
            )
        if not solution:
            raise FieldError(f"score[{k}]", "is empty: the solution has no step scores")
        steps.append(tuple(_number(s, f"score[{k}][{j}]") for j, s in enumerate(solution)))
    _check_correct_once(references)
    return _rows(index, problem, references, steps=steps, n_steps=[len(s) for s in steps])


VERDICTS = ("A", "B")
"""The verdicts of a pairwise judge (which of the two shown solutions it prefers)."""


def _parse_pairwise(index: int, record: Any) -> list[dict[str, Any]]:
    record, problem, references = _problem_and_references(record)
    n = len(references)
    verdicts = _entries(record, "score", n, "the judge's verdict per comparison")
    positions = _entries(record, "chosen_position", n, "where the correct solution was shown")
    for k, (verdict, position) in enumerate(zip(verdicts, positions, strict=True)):
        if verdict is not None and verdict not in VERDICTS:
            raise FieldError(f"score[{k}]", f"must be 'A', 'B' or null, got {verdict!r}")
        if position not in VERDICTS:
            raise FieldError(f"chosen_position[{k}]", f"must be 'A' or 'B', got {position!r}")
    rows = _rows(index, problem, references, verdict=verdicts, chosen_position=positions)
    for row in rows:
        row["won"] = row["verdict"] == row["chosen_position"]
    return rows


def scores_model_name(path: Path) -> str:
    """The reward model a scores file belongs to: its stem without `_scores`/`_reward`.

    Args:
        path: The scores file.

    Returns:
        The model's name.
    """
    return path.stem.removesuffix("_scores").removesuffix("_reward")


def _frame(path, parse, skip_bad, limit, columns: dict[str, str | None]) -> pd.DataFrame:
    """The rows of every problem of `path` (`parse` makes one problem's rows), typed."""
    import pandas as pd

    path = Path(path)
    problems, skipped = collect(path, iter_records(path), parse, skip_bad=skip_bad, limit=limit)
    rows = [row for problem in problems for row in problem]
    base = ["problem_id", "problem", "solution_index", "solution_reference", "is_correct"]
    df = pd.DataFrame(rows, columns=[*base, *columns])
    df = df.astype({"problem_id": "int64", "solution_index": "int64", "is_correct": bool})
    df = df.astype({name: dtype for name, dtype in columns.items() if dtype is not None})
    df.insert(0, "model", scores_model_name(path))
    df.attrs.update(source=str(path), skipped=tuple(skipped))
    warn_skipped(path, skipped, stacklevel=4)
    return df


def load_rewardmath_scores(
    path: str | PathLike[str], *, skip_bad: bool = False, limit: int | None = None
) -> pd.DataFrame:
    """Load a RewardMATH `*_scores.json` file: one row per (problem, solution).

    Columns: `model` (from the file name), `problem_id` (the problem's position in the file,
    which matches `problem_id` in `RewardMATH_direct.json`), `problem`, `solution_index`
    (position within the problem; the key, since a model can supply several solutions),
    `solution_reference`, `is_correct` (`solution_reference == "human_to_GPT-4"`) and
    `score`. `limit` counts problems. `df.attrs` holds `source` and `skipped`.

    A record is malformed if a field is missing or mistyped, the two lists differ in length, a
    score is not a finite number, or the correct solution is not named exactly once. A process
    reward model's file (a list of step scores per solution) is read by
    `load_rewardmath_step_scores`, a pairwise judge's by `load_rewardmath_pairwise`.

    Args:
        path: The scores file.
        skip_bad: Whether to skip malformed records (with one warning) rather than raise.
        limit: The most problems, or `None`.

    Returns:
        A pandas DataFrame.

    Raises:
        MalformedRecordError: For a malformed record, unless `skip_bad`.

    Examples:
        >>> import json, tempfile, pathlib
        >>> from reward_lens_tl.data import load_rewardmath_scores
        >>> f = pathlib.Path(tempfile.mkdtemp()) / "demo_scores.json"
        >>> _ = f.write_text(json.dumps([{"problem": "1+1?", "score": [0.5, 0.75],
        ...     "solution_reference": ["human_to_GPT-4", "gpt-3.5-turbo-0125"]}]))
        >>> load_rewardmath_scores(f)[["model", "problem_id", "is_correct", "score"]]
          model  problem_id  is_correct  score
        0  demo           0        True   0.50
        1  demo           0       False   0.75
    """
    return _frame(path, _parse_scores, skip_bad, limit, {"score": "float64"})


def load_rewardmath_step_scores(
    path: str | PathLike[str], *, skip_bad: bool = False, limit: int | None = None
) -> pd.DataFrame:
    """Load a process reward model's RewardMATH scores.

    `score` holds one list of per-step scores per solution, e.g. the benchmark's
    `Math_Shepherd_reward.json`. One row per (problem, solution), the columns of
    `load_rewardmath_scores` with `steps` (a tuple of floats) and `n_steps` instead of `score`.

    A record is malformed (the error names the file, the record and the field) if a solution's
    entry is not a list, is empty, or holds something other than finite numbers
    (`score[k][j]`), if `score` and `solution_reference` differ in length, or if the
    correct solution is not named exactly once.

    Args:
        path: The scores file.
        skip_bad: Whether to skip malformed records (with one warning) rather than raise.
        limit: The most problems, or `None`.

    Returns:
        A pandas DataFrame.

    Raises:
        MalformedRecordError: For a malformed record, unless `skip_bad`.

    Examples:
        >>> import json, tempfile, pathlib
        >>> from reward_lens_tl.data import load_rewardmath_step_scores
        >>> f = pathlib.Path(tempfile.mkdtemp()) / "prm_scores.json"
        >>> _ = f.write_text(json.dumps([{"problem": "1+1?", "score": [[0.9, 0.8], [0.7]],
        ...     "solution_reference": ["human_to_GPT-4", "gpt-3.5-turbo-0125"]}]))
        >>> load_rewardmath_step_scores(f)[["model", "is_correct", "steps", "n_steps"]]
          model  is_correct       steps  n_steps
        0   prm        True  (0.9, 0.8)        2
        1   prm       False      (0.7,)        1
    """
    return _frame(path, _parse_step_scores, skip_bad, limit, {"steps": None, "n_steps": "int64"})


def load_rewardmath_pairwise(
    path: str | PathLike[str], *, skip_bad: bool = False, limit: int | None = None
) -> pd.DataFrame:
    """Load a pairwise judge's RewardMATH verdicts (the benchmark's `*_pairwise_reward.json`).

    Per problem, `solution_reference` names the wrong solutions, each compared with the correct
    one; `score` is the judge's verdict (`"A"`, `"B"`, or `null` when it gave none) and
    `chosen_position` where the correct solution was shown. One row per comparison: `model`,
    `problem_id`, `problem`, `solution_index`, `solution_reference`, `is_correct`
    (`False`: every row is a wrong solution), `verdict` (NaN: none), `chosen_position` and
    `won` (the verdict picked the correct solution; no verdict is a loss, as in the reference).

    Args:
        path: The verdicts file.
        skip_bad: Whether to skip malformed records (with one warning) rather than raise.
        limit: The most problems, or `None`.

    Returns:
        A pandas DataFrame.

    Raises:
        MalformedRecordError: For a malformed record, unless `skip_bad`.

    Examples:
        >>> import json, tempfile, pathlib
        >>> from reward_lens_tl.data import load_rewardmath_pairwise
        >>> f = pathlib.Path(tempfile.mkdtemp()) / "judge_pairwise_scores.json"
        >>> _ = f.write_text(json.dumps([{"problem": "1+1?", "solution_reference": ["m1", "m2"],
        ...     "score": ["A", None], "chosen_position": ["A", "B"]}]))
        >>> load_rewardmath_pairwise(f)[["solution_reference", "verdict", "won"]]
          solution_reference verdict    won
        0                 m1       A   True
        1                 m2     NaN  False
    """
    columns = {"verdict": None, "chosen_position": None, "won": "bool"}
    return _frame(path, _parse_pairwise, skip_bad, limit, columns)
