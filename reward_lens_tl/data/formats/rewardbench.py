"""RewardBench-style JSON lines: `{"prompt", "chosen", "rejected", "subset"}` per record.

`prompt` is a string (one user turn) or a list of `{"role", "content"}` messages; `chosen`
and `rejected` are the response strings; `subset` is optional (missing or `null` gives
`None`). Other fields (RewardBench's `id`, `chosen_model`, `rejected_model`, ...) are kept
in `metadata`, as is `index`. A JSON-list file is read the same way.

A record is malformed if it is not an object (or not valid JSON); `prompt`, `chosen` or
`rejected` is missing or of the wrong type; or `subset` is present but not a string.
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import Any

from .._records import (
    collect,
    extras,
    iter_records,
    require,
    require_object,
    warn_skipped,
)
from .._validate import check_optional_str, check_prompt, check_str
from ..schema import PairSet, PreferencePair

__all__ = ["load_rewardbench_jsonl"]

_KNOWN = ("prompt", "chosen", "rejected", "subset")


def parse_rewardbench_record(index: int, record: Any) -> PreferencePair:
    """One RewardBench-style record as a `PreferencePair`.

    Args:
        index: The record's index.
        record: The record.

    Returns:
        The pair.

    Raises:
        FieldError: If the record is malformed.
    """
    record = require_object(record)
    return PreferencePair(
        check_prompt(require(record, "prompt")),
        check_str(require(record, "chosen"), "chosen"),
        check_str(require(record, "rejected"), "rejected"),
        subset=check_optional_str(record.get("subset"), "subset"),
        metadata={**extras(record, _KNOWN), "index": index},
    )


def load_rewardbench_jsonl(
    path: str | PathLike[str], *, skip_bad: bool = False, limit: int | None = None
) -> PairSet:
    r"""Load a RewardBench-style `.jsonl` (or `.jsonl.gz`, or JSON list) file.

    Args:
        path: The file.
        skip_bad: Whether to skip malformed records (with one warning) rather than raise.
        limit: The most pairs, or `None`.

    Returns:
        The `PairSet`.

    Raises:
        MalformedRecordError: For a malformed record, unless `skip_bad`.

    Examples:
        >>> import json, tempfile, pathlib
        >>> from reward_lens_tl.data import load_rewardbench_jsonl
        >>> f = pathlib.Path(tempfile.mkdtemp()) / "rb.jsonl"
        >>> _ = f.write_text(json.dumps({"prompt": "Hi", "chosen": "Hello", "rejected": "No",
        ...                              "subset": "demo", "id": 3}) + "\n")
        >>> pairs = load_rewardbench_jsonl(f)
        >>> pairs.subsets(), pairs[0].metadata
        ({'demo': 1}, {'id': 3, 'index': 0})
    """
    path = Path(path)
    pairs, skipped = collect(
        path,
        iter_records(path),
        parse_rewardbench_record,
        skip_bad=skip_bad,
        limit=limit,
        id_key="id",
    )
    warn_skipped(path, skipped)
    return PairSet(tuple(pairs), tuple(skipped), str(path))
