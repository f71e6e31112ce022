"""RM-Bench: JSON lists of prompts with three chosen and three rejected responses.

Each record has `id`, `prompt`, `chosen` (3 strings), `rejected` (3 strings) and
`subset` (the source set, e.g. `alpacaeval` or `xstest-should-refuse`); the three responses
are in the styles `RM_BENCH_STYLES` (concise, detailed,
markdown), in file order. Each record becomes a `GridItem`; `ItemSet.pairs()` gives the
9 comparisons per item.

`GridItem.subset` is the record's `subset`. `GridItem.domain` (RM-Bench reports accuracy per
domain) is the record's `domain` if it has one, else the file stem without `_filtered`
(`chat_filtered.json` -> `chat`). Other fields (the chat file's `error`/`error_key`, which
name the factual error planted in the rejected responses) are kept in `metadata`, as is
`index`.

A record is malformed if it is not an object; `prompt` is missing or not a string or message
list; `chosen` or `rejected` is not a list of exactly three strings; `id` is present but not
a string or integer; or `subset`/`domain` is present but not a string.

Examples:
    >>> from pathlib import Path
    >>> from reward_lens_tl.data.formats.rmbench import rmbench_domain
    >>> rmbench_domain(Path("rmbench/safety-refuse_filtered.json"))
    'safety-refuse'
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import Any

from .._records import collect_files, extras, require, require_object
from .._validate import (
    check_id,
    check_optional_str,
    check_prompt,
    check_three_responses,
)
from ..schema import GridItem, ItemSet

__all__ = ["load_rmbench", "rmbench_domain"]

_KNOWN = ("id", "prompt", "chosen", "rejected", "subset", "domain")


def rmbench_domain(path: Path) -> str:
    """The RM-Bench domain implied by a file name: its stem without a `_filtered` suffix.

    Args:
        path: The file.

    Returns:
        The domain.

    Examples:
        >>> from pathlib import Path
        >>> from reward_lens_tl.data.formats.rmbench import rmbench_domain
        >>> rmbench_domain(Path("rm-bench/chat_filtered.json")), rmbench_domain(Path("math.json"))
        ('chat', 'math')
    """
    return path.stem.removesuffix("_filtered")


def _parse(default_domain: str):
    def parse(index: int, record: Any) -> GridItem:
        record = require_object(record)
        domain = check_optional_str(record.get("domain"), "domain")
        return GridItem(
            prompt=check_prompt(require(record, "prompt")),
            chosen=check_three_responses(require(record, "chosen"), "chosen"),
            rejected=check_three_responses(require(record, "rejected"), "rejected"),
            id=check_id(record.get("id")),
            subset=check_optional_str(record.get("subset"), "subset"),
            domain=default_domain if domain is None else domain,
            metadata={**extras(record, _KNOWN), "index": index},
        )

    return parse


def load_rmbench(
    path: str | PathLike[str], *, skip_bad: bool = False, limit: int | None = None
) -> ItemSet[GridItem]:
    """Load an RM-Bench `.json` file, or every `*.json` below a folder, as grid items.

    `limit` counts items (each gives 9 pairs). Use `.pairs()` on the result for a
    `PairSet`.

    Args:
        path: A file or a folder.
        skip_bad: Whether to skip malformed records (with one warning) rather than raise.
        limit: The most items, or `None`.

    Returns:
        An `ItemSet` of `GridItem`.

    Raises:
        MalformedRecordError: For a malformed record, unless `skip_bad`.

    Examples:
        >>> import json, tempfile, pathlib
        >>> from reward_lens_tl.data import load_rmbench
        >>> f = pathlib.Path(tempfile.mkdtemp()) / "chat_filtered.json"
        >>> _ = f.write_text(json.dumps([{"id": 1, "subset": "demo", "prompt": "Hi",
        ...     "chosen": ["a", "b", "c"], "rejected": ["x", "y", "z"]}]))
        >>> items = load_rmbench(f)
        >>> items[0].domain, len(items.pairs())
        ('chat', 9)
    """
    path = Path(path)
    parser_for = lambda file: _parse(rmbench_domain(file))
    items, skipped = collect_files(path, parser_for, skip_bad=skip_bad, limit=limit, id_key="id")
    return ItemSet(tuple(items), tuple(skipped), str(path))
