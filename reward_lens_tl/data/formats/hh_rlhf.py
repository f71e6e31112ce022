r"""Anthropic HH-RLHF: JSON lines of `{"chosen", "rejected"}` whole transcripts.

Each transcript reads `"\n\nHuman: ...\n\nAssistant: ...\n\nHuman: ...\n\nAssistant: ..."`; the
two transcripts of a record share every turn but the last. Parsing rules:

* Turns are split only at `"\n\nHuman:"` and `"\n\nAssistant:"`. `Human:` text elsewhere
  (the real data has assistant turns that begin `"Human: ..."`, or quote it mid-line) stays in
  the turn's content verbatim.
* Each turn's content is stripped of surrounding whitespace (the marker is followed by a space).
* Consecutive turns of the same role are merged into one message, joined by `"\n\n"`: the real
  data has `"\n\nAssistant:"` markers repeated inside one reply, and chat templates require
  alternating roles. `metadata["merged_turns"]` counts the merges in the record.
* The prompt is every message before the final assistant message; `chosen`/`rejected` are the
  contents of the final assistant messages. Empty final responses are kept (the real data has
  labellers preferring an empty reply).

A record is malformed (field named in the error) when it is not a JSON object; `chosen` or
`rejected` is missing or not a string; a transcript has text before its first `Human:` turn,
does not start with a Human turn, or does not end with an Assistant turn; or the two transcripts'
prompts (after merging) differ. Other fields are kept in `metadata`, as is `index`.

Examples:
    >>> from reward_lens_tl.data import parse_hh_transcript
    >>> parse_hh_transcript("\n\nHuman: Hi\n\nAssistant: Hello!")
    ({'role': 'user', 'content': 'Hi'}, {'role': 'assistant', 'content': 'Hello!'})
"""

from __future__ import annotations

import re
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
from .._validate import FieldError, Message, check_str
from ..schema import PairSet, PreferencePair

__all__ = ["load_hh_rlhf", "parse_hh_transcript"]

_TURN = re.compile(r"\n\n(Human|Assistant):")
_ROLES = {"Human": "user", "Assistant": "assistant"}


def parse_hh_transcript(text: str) -> tuple[Message, ...]:
    r"""Split an HH transcript into alternating user/assistant messages (rules in the module doc).

    Args:
        text: The transcript.

    Returns:
        The messages.

    Raises:
        FieldError: If the transcript is malformed.

    Examples:
        >>> from reward_lens_tl.data import parse_hh_transcript
        >>> parse_hh_transcript("\n\nHuman: Hi\n\nAssistant: Yes.\n\nAssistant: No.")
        ({'role': 'user', 'content': 'Hi'}, {'role': 'assistant', 'content': 'Yes.\n\nNo.'})
    """
    return _split(text, "transcript")[0]


def _split(text: str, name: str) -> tuple[tuple[Message, ...], int]:
    """The transcript's messages and how many same-role turns were merged into them."""
    parts = _TURN.split("\n\n" + check_str(text, name).lstrip())
    if len(parts) == 1:
        raise FieldError(name, "has no '\\n\\nHuman:' or '\\n\\nAssistant:' turns")
    if parts[0].strip():
        raise FieldError(name, f"has text before its first turn: {parts[0][:40]!r}")
    messages: list[Message] = []
    merged = 0
    for marker, content in zip(parts[1::2], parts[2::2], strict=True):
        role, content = _ROLES[marker], content.strip()
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"] = "\n\n".join(
                c for c in (messages[-1]["content"], content) if c
            )
            merged += 1
        else:
            messages.append({"role": role, "content": content})
    if not messages or messages[0]["role"] != "user":
        raise FieldError(name, "does not start with a '\\n\\nHuman:' turn")
    if messages[-1]["role"] != "assistant":
        raise FieldError(name, "does not end with an Assistant turn (no response to compare)")
    return tuple(messages), merged


def parse_hh_record(index: int, record: Any) -> PreferencePair:
    """One HH-RLHF record as a `PreferencePair` (what is malformed: see the module doc).

    Args:
        index: The record's index.
        record: The record.

    Returns:
        The pair.

    Raises:
        FieldError: If the record is malformed.
    """
    record = require_object(record)
    chosen, merged_c = _split(require(record, "chosen"), "chosen")
    rejected, merged_r = _split(require(record, "rejected"), "rejected")
    prompt, other = chosen[:-1], rejected[:-1]
    if prompt != other:
        turn = next(
            (i for i, (a, b) in enumerate(zip(prompt, other, strict=False)) if a != b), None
        )
        turn = min(len(prompt), len(other)) if turn is None else turn
        reason = f"differs from 'chosen' before the final response (at message {turn})"
        raise FieldError("rejected", reason)
    metadata = {**extras(record, ("chosen", "rejected")), "index": index}
    metadata["merged_turns"] = merged_c + merged_r
    return PreferencePair(prompt, chosen[-1]["content"], rejected[-1]["content"], metadata=metadata)


def load_hh_rlhf(
    path: str | PathLike[str], *, skip_bad: bool = False, limit: int | None = None
) -> PairSet:
    r"""Load an HH-RLHF `.jsonl` or `.jsonl.gz` file as a `PairSet` (multi-turn prompts).

    Args:
        path: The file.
        skip_bad: Whether to skip malformed records (with one warning) rather than raise.
        limit: The most pairs, or `None`.

    Returns:
        The `PairSet`.

    Raises:
        MalformedRecordError: For a malformed record, unless `skip_bad`.

    Examples:
        >>> from reward_lens_tl.data import load_hh_rlhf
        >>> import gzip, json, tempfile, pathlib
        >>> f = pathlib.Path(tempfile.mkdtemp()) / "hh.jsonl.gz"
        >>> rec = {"chosen": "\n\nHuman: Hi\n\nAssistant: Hello!",
        ...        "rejected": "\n\nHuman: Hi\n\nAssistant: Go away."}
        >>> _ = f.write_bytes(gzip.compress(json.dumps(rec).encode()))
        >>> pair = load_hh_rlhf(f)[0]
        >>> pair.prompt, pair.chosen, pair.rejected
        (({'role': 'user', 'content': 'Hi'},), 'Hello!', 'Go away.')
    """
    path = Path(path)
    pairs, skipped = collect(
        path, iter_records(path), parse_hh_record, skip_bad=skip_bad, limit=limit
    )
    warn_skipped(path, skipped)
    return PairSet(tuple(pairs), tuple(skipped), str(path))
