"""LLMBar: JSON lists of `{"input", "output_1", "output_2", "label"}` instruction-following pairs.

`label` (1 or 2) says which output is better; it becomes `chosen` and the other `rejected`,
and `metadata["label"]` keeps it (position-bias analyses need it). The prompt is `input` as one
user turn.

Subset names follow RewardBench, which takes its `llmbar-*` subsets from exactly these files:
`Natural` -> `llmbar-natural`, `Adversarial_Neighbor` -> `llmbar-adver-neighbor`,
`Adversarial_GPTInst` -> `llmbar-adver-GPTInst`, `Adversarial_GPTOut` ->
`llmbar-adver-GPTOut`, `Adversarial_Manual` -> `llmbar-adver-manual`. The name comes from
the file stem, or for the LLMBar repository's own layout (`Natural/dataset.json`,
`Adversarial/Neighbor/dataset.json`) from the folders; any other stem is used as it is.

A record is malformed if it is not an object, a text field is missing or not a string, or
`label` is not the integer 1 or 2. Other fields are kept in `metadata`, as is `index`.

Examples:
    >>> from pathlib import Path
    >>> from reward_lens_tl.data.formats import llmbar_subset
    >>> llmbar_subset(Path("llmbar/Adversarial_GPTInst.json"))
    'llmbar-adver-GPTInst'
    >>> llmbar_subset(Path("Dataset/LLMBar/Adversarial/Neighbor/dataset.json"))
    'llmbar-adver-neighbor'
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import Any

from .._records import (
    collect_files,
    extras,
    require,
    require_int,
    require_object,
)
from .._validate import FieldError, check_str
from ..schema import PairSet, PreferencePair

__all__ = ["load_llmbar", "llmbar_subset"]

REWARDBENCH_SUBSETS = {
    "natural": "llmbar-natural",
    "adversarial_neighbor": "llmbar-adver-neighbor",
    "adversarial_gptinst": "llmbar-adver-GPTInst",
    "adversarial_gptout": "llmbar-adver-GPTOut",
    "adversarial_manual": "llmbar-adver-manual",
}
_TEXT_FIELDS = ("input", "output_1", "output_2")


def llmbar_subset(path: Path) -> str:
    """The RewardBench subset name of an LLMBar file (the bare stem if it is not a known one).

    Args:
        path: The file.

    Returns:
        The subset name.

    Examples:
        >>> from pathlib import Path
        >>> from reward_lens_tl.data.formats import llmbar_subset
        >>> llmbar_subset(Path("llmbar/Natural.json"))
        'llmbar-natural'
        >>> llmbar_subset(Path("Dataset/LLMBar/Adversarial/GPTOut/dataset.json"))
        'llmbar-adver-GPTOut'
        >>> llmbar_subset(Path("my_pairs.json"))  # not a known subset: the stem
        'my_pairs'
    """
    name = path.stem
    if name == "dataset":
        name = path.parent.name
        if path.parent.parent.name.lower() == "adversarial":
            name = f"Adversarial_{name}"
    return REWARDBENCH_SUBSETS.get(name.lower(), name)


def _parse(subset: str):
    def parse(index: int, record: Any) -> PreferencePair:
        record = require_object(record)
        prompt, out1, out2 = (check_str(require(record, k), k) for k in _TEXT_FIELDS)
        label = require_int(record, "label")
        if label not in (1, 2):
            raise FieldError("label", f"must be 1 or 2, got {label}")
        chosen, rejected = (out1, out2) if label == 1 else (out2, out1)
        meta = {**extras(record, (*_TEXT_FIELDS, "label")), "index": index, "label": label}
        return PreferencePair(prompt, chosen, rejected, subset=subset, metadata=meta)

    return parse


def load_llmbar(
    path: str | PathLike[str], *, skip_bad: bool = False, limit: int | None = None
) -> PairSet:
    """Load one LLMBar `.json` file, or every `*.json` below a folder (sorted by path).

    Args:
        path: A file or a folder.
        skip_bad: Whether to skip malformed records (with one warning) rather than raise.
        limit: The most pairs, or `None`.

    Returns:
        The `PairSet`.

    Raises:
        MalformedRecordError: For a malformed record, unless `skip_bad`.

    Examples:
        >>> import json, tempfile, pathlib
        >>> from reward_lens_tl.data import load_llmbar
        >>> f = pathlib.Path(tempfile.mkdtemp()) / "Natural.json"
        >>> _ = f.write_text(json.dumps([{"input": "Say hi", "output_1": "Bye",
        ...                               "output_2": "Hi", "label": 2}]))
        >>> p = load_llmbar(f)[0]
        >>> p.chosen, p.rejected, p.subset
        ('Hi', 'Bye', 'llmbar-natural')
    """
    path = Path(path)
    parser_for = lambda file: _parse(llmbar_subset(file))
    pairs, skipped = collect_files(path, parser_for, skip_bad=skip_bad, limit=limit)
    return PairSet(tuple(pairs), tuple(skipped), str(path))
