"""The report's data-quality note: what the headline numbers rest on, shown before them.

Internal (no public names): used by `reward_lens_tl.report.build`.

A report on text the tokenizer does not know (most tokens unknown), or on pairs that had to be
cut or skipped to fit the context, still produces an accuracy; the note says how much of the
input the numbers actually saw, and the page and `report.json` carry it at the top.

Examples:
    >>> note = data_quality_numbers(
    ...     n_loaded=4, n_bad_records=0, n_ctx=64, truncation="both", unk_token="<unk>",
    ...     sequences=[(10, 8, (0, 0)), (10, 9, (3, 0)), (10, 1, (0, 0)), (10, 0, (0, 0))],
    ...     skipped=[(2, None, "the template alone takes 70 tokens")],
    ... )
    >>> note["n_scored"], note["unknown_token_share"], note["n_truncated"], note["n_skipped"]
    (2, 0.45, 1, 1)
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from ..inputs import UNK_WARN_SHARE
from .page import Section

__all__: list[str] = []

#: Skipped pairs listed one by one in the note (the counts cover all of them).
MAX_LISTED = 20


def data_quality_numbers(
    *,
    n_loaded: int,
    n_bad_records: int,
    n_ctx: int,
    truncation: str,
    unk_token: str | None,
    sequences: Sequence[tuple[int, int, tuple[int, int]]],
    skipped: Sequence[tuple[int, int | None, str]],
) -> dict:
    """The note's numbers.

    Args:
        n_loaded: How many pairs were loaded.
        n_bad_records: How many records could not be read.
        n_ctx: The model's context length.
        truncation: The truncation used.
        unk_token: The tokenizer's unknown token, or `None`.
        sequences: Per scored pair, chosen then rejected, `(n_tokens, n_unknown, dropped)` with
            `dropped` = (prompt, response) content tokens truncation cut.
        skipped: `(pair, record, reason)` of each pair left out.

    Returns:
        The note's numbers.
    """
    n_tokens = sum(n for n, _, _ in sequences)
    n_unknown = sum(u for _, u, _ in sequences)
    pairs = list(zip(sequences[0::2], sequences[1::2], strict=True))
    prompt_cut = sum(1 for c, r in pairs if c[2][0] or r[2][0])
    response_cut = sum(1 for c, r in pairs if c[2][1] or r[2][1])
    numbers = {
        "n_loaded": n_loaded,
        "n_bad_records": n_bad_records,
        "n_pairs": len(pairs) + len(skipped),
        "n_scored": len(pairs),
        "n_skipped": len(skipped),
        "skipped_reasons": dict(Counter(_reason_kind(r) for _, _, r in skipped).most_common()),
        "skipped": [
            {"pair": p, "record": rec, "reason": reason} for p, rec, reason in skipped[:MAX_LISTED]
        ],
        "n_truncated": sum(1 for c, r in pairs if any(c[2]) or any(r[2])),
        "truncated": {"prompt_start_cut": prompt_cut, "response_end_cut": response_cut},
        "truncation": truncation,
        "context": n_ctx,
        "unknown_token": unk_token,
        "unknown_token_share": n_unknown / n_tokens if n_tokens else 0.0,
        "n_sequences_mostly_unknown": sum(
            1 for n, u, _ in sequences if n and u / n > UNK_WARN_SHARE
        ),
        "n_sequences": len(sequences),
    }
    numbers["warnings"] = quality_warnings(numbers)
    return numbers


def _reason_kind(reason: str) -> str:
    """A skip reason with its numbers blanked, so that like reasons are counted together."""
    kind = re.sub(r"\d+", "N", reason)
    return kind if len(kind) <= 400 else kind[:399] + "…"


def quality_warnings(q: dict) -> list[str]:
    """One sentence per problem the reader must know before reading any number.

    Args:
        q: The note's numbers.

    Returns:
        The sentences.
    """
    out = []
    if q["unknown_token_share"] > UNK_WARN_SHARE or q["n_sequences_mostly_unknown"]:
        out.append(
            f"{q['unknown_token_share']:.1%} of the scored tokens are the unknown token "
            f"{q['unknown_token']!r} ({q['n_sequences_mostly_unknown']} of {q['n_sequences']} "
            f"sequences are more than {UNK_WARN_SHARE:.0%} unknown): the tokenizer does not know "
            "this text, so the accuracy and every analysis below say little about its content."
        )
    if q["n_skipped"]:
        reasons = "; ".join(f"{n} × {r}" for r, n in q["skipped_reasons"].items())
        out.append(f"{q['n_skipped']} of {q['n_pairs']} pairs were skipped: {reasons}.")
    if q["n_truncated"]:
        cut = q["truncated"]
        out.append(
            f"{q['n_truncated']} of {q['n_scored']} scored pairs were truncated to the "
            f"{q['context']}-token context (truncation={q['truncation']!r}): the start of the "
            f"prompt cut in {cut['prompt_start_cut']}, the end of a response in "
            f"{cut['response_end_cut']}."
        )
    if q["n_bad_records"]:
        out.append(
            f"{q['n_bad_records']} malformed records of the file were skipped when loading "
            f"({q['n_loaded']} pairs loaded)."
        )
    return out


def scored_sequences(tokenizer, encoded) -> list[tuple[int, int, tuple[int, int]]]:
    """`(n_tokens, n_unknown, dropped)` of every sequence, chosen then rejected per pair.

    Args:
        tokenizer: The tokenizer.
        encoded: The encoded pairs.

    Returns:
        One tuple per sequence.
    """
    unk = getattr(tokenizer, "unk_token_id", None)
    out = []
    for pair in encoded:
        for enc in pair:
            n_unknown = 0 if unk is None else sum(1 for i in enc.ids if i == unk)
            out.append((len(enc), n_unknown, tuple(getattr(enc, "dropped", (0, 0)))))
    return out


def quality_section(q: dict) -> Section:
    """The note as the page's first section.

    Args:
        q: The note's numbers.

    Returns:
        The section.
    """
    section = Section("Data quality")
    lead = "Read every number below with these caveats:" if q["warnings"] else "No caveats:"
    section.text(
        f"{lead} {q['n_scored']} of {q['n_pairs']} pairs scored, {q['n_skipped']} skipped, "
        f"{q['n_truncated']} truncated; " + _unknown_note(q)
    )
    for line in q["warnings"]:
        section.text("⚠ " + line)
    if q["skipped"]:
        import pandas as pd

        section.table(pd.DataFrame(q["skipped"]), max_rows=MAX_LISTED)
    return section


def _unknown_note(q: dict) -> str:
    if q["unknown_token"] is None:
        return "the tokenizer has no unknown token."
    return (
        f"{q['unknown_token_share']:.1%} of the scored tokens are the unknown token "
        f"{q['unknown_token']!r}."
    )


def caution(q: dict | None) -> str:
    """A short caution for the page's subtitle ('' when the data has no caveats).

    Args:
        q: The note's numbers, or `None`.

    Returns:
        The caution.
    """
    if not q or not q["warnings"]:
        return ""
    return f" Caution: {len(q['warnings'])} data-quality caveat(s), see 'Data quality' first."
