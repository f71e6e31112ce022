"""Loaders for preference-data files, and `load_pairs`, which picks one by name or by sniff.

Each format lives in `reward_lens_tl.data.formats`; this module re-exports their loaders.
Every loader takes a path, `skip_bad=False` and `limit=None`:

* a malformed record raises `MalformedRecordError` naming the file,
  the record index (and id, if the record has one) and the field;
* with `skip_bad=True` malformed records are skipped instead, listed in `.skipped` with the
  reason, and one `SkippedRecordsWarning` says how many;
* `limit` caps the number of items returned (pairs, or grid / ranked items).

Format names for `load_pairs` (`_` and `-` are interchangeable, case is ignored):

* `hh-rlhf` (or `hh`): `load_hh_rlhf` -> `PairSet` with multi-turn prompts
* `llmbar`: `load_llmbar` -> `PairSet`
* `rm-bench` (or `rmbench`): `load_rmbench` -> `ItemSet` of `GridItem`
* `rewardbench`: `load_rewardbench_jsonl` -> `PairSet`
* `rewardmath`: `load_rewardmath` -> `ItemSet` of `RankedItem`

`load_rewardmath_scores` reads published reward-model scores into a `pandas.DataFrame`
(`load_rewardmath_step_scores` a process reward model's per-step scores,
`load_rewardmath_pairwise` a pairwise judge's verdicts).
"""

from __future__ import annotations

from collections.abc import Callable
from os import PathLike
from pathlib import Path
from typing import Any

from ..errors import DataFormatError, EmptyInputError
from ._records import check_limit, expand, iter_records
from .formats import (
    load_hh_rlhf,
    load_llmbar,
    load_rewardbench_jsonl,
    load_rewardmath,
    load_rewardmath_pairwise,
    load_rewardmath_scores,
    load_rewardmath_step_scores,
    load_rmbench,
    parse_hh_transcript,
)
from .schema import ItemSet, PairSet

__all__ = [
    "FORMATS",
    "load_hh_rlhf",
    "load_llmbar",
    "load_pairs",
    "load_rewardbench_jsonl",
    "load_rewardmath",
    "load_rewardmath_pairwise",
    "load_rewardmath_scores",
    "load_rewardmath_step_scores",
    "load_rmbench",
    "parse_hh_transcript",
    "sniff_format",
]

Loader = Callable[..., ItemSet[Any]]
FORMATS: dict[str, Loader] = {
    "hh-rlhf": load_hh_rlhf,
    "llmbar": load_llmbar,
    "rm-bench": load_rmbench,
    "rewardbench": load_rewardbench_jsonl,
    "rewardmath": load_rewardmath,
}
"""Format name -> loader, for `load_pairs`."""

_ALIASES = {"hh": "hh-rlhf", "rmbench": "rm-bench", "rewardbench-jsonl": "rewardbench"}


def _canonical(name: str) -> str:
    key = name.strip().lower().replace("_", "-")
    key = _ALIASES.get(key, key)
    if key not in FORMATS:
        raise DataFormatError(f"unknown format {name!r}; known formats: {', '.join(FORMATS)}")
    return key


def sniff_format(path: str | PathLike[str]) -> str:
    """Guess a file's format from the fields of its first record (a folder: its first `.json`).

    Args:
        path: A file or a folder.

    Returns:
        The format's name.

    Raises:
        EmptyInputError: If the file holds no records.
        DataFormatError: If the format cannot be told, or the file holds scores, not pairs.

    Examples:
        >>> from reward_lens_tl.data import sniff_format
        >>> import json, tempfile, pathlib
        >>> f = pathlib.Path(tempfile.mkdtemp()) / "x.json"
        >>> _ = f.write_text(json.dumps(
        ...     [{"input": "", "output_1": "", "output_2": "", "label": 1}]))
        >>> sniff_format(f)
        'llmbar'
    """
    path = Path(path)
    file = expand(path)[0]
    first = next(iter_records(file), None)
    if first is None:
        raise EmptyInputError(f"{file} is empty: it holds no records, so its format cannot be told")
    first = first[1]
    if not isinstance(first, dict):
        raise DataFormatError(
            f"cannot tell the format of {file}: its first record is not a JSON object; pass "
            f"format= (one of {', '.join(FORMATS)})"
        )
    keys = set(first)
    if "eval_solution" in keys:
        return "rewardmath"
    if {"score", "solution_reference"} <= keys:
        raise DataFormatError(
            f"{file} holds reward-model scores, not pairs: use load_rewardmath_scores"
        )
    if {"input", "output_1", "output_2", "label"} <= keys:
        return "llmbar"
    if {"chosen", "rejected"} <= keys:
        if isinstance(first["chosen"], list):
            return "rm-bench"
        return "rewardbench" if "prompt" in keys else "hh-rlhf"
    raise DataFormatError(
        f"cannot tell the format of {file} from its fields {sorted(keys)}; pass format= (one of "
        f"{', '.join(FORMATS)})"
    )


def load_pairs(
    path: str | PathLike[str],
    format: str | None = None,
    *,
    skip_bad: bool = False,
    limit: int | None = None,
) -> PairSet:
    """Load any supported file as a `PairSet`; `format` is sniffed when `None`.

    Grid and ranked formats are flattened with `.pairs()`. `limit` caps the number of pairs.

    Args:
        path: A file or a folder.
        format: The format's name, or `None` to sniff it.
        skip_bad: Whether to skip malformed records (with one warning) rather than raise.
        limit: The most pairs, or `None`.

    Returns:
        The `PairSet`.

    Raises:
        DataFormatError: If the format is unknown or cannot be told.

    Examples:
        >>> from reward_lens_tl.data import load_pairs
        >>> import json, tempfile, pathlib
        >>> f = pathlib.Path(tempfile.mkdtemp()) / "safety_filtered.json"
        >>> _ = f.write_text(json.dumps([{"id": 1, "prompt": "Hi", "subset": "demo",
        ...     "chosen": ["a", "b", "c"], "rejected": ["x", "y", "z"]}]))
        >>> load_pairs(f), len(load_pairs(f, "rm-bench", limit=4))  # doctest: +ELLIPSIS
        (PairSet(9 pairs from '...safety_filtered.json', 0 skipped), 4)
    """
    check_limit(limit)
    key = sniff_format(path) if format is None else _canonical(format)
    loaded = FORMATS[key](path, skip_bad=skip_bad, limit=limit)
    pairs = loaded.pairs()
    return pairs if limit is None else pairs[:limit]
