"""Preference data: typed pairs, one-against-many and style-grid items, and loaders for real files.

Examples:
    >>> from reward_lens_tl.data import PreferencePair
    >>> PreferencePair("Hi", chosen="Hello!", rejected="Go away.").messages("chosen")[1]["content"]
    'Hello!'
"""

from .loaders import (
    FORMATS,
    load_hh_rlhf,
    load_llmbar,
    load_pairs,
    load_rewardbench_jsonl,
    load_rewardmath,
    load_rewardmath_pairwise,
    load_rewardmath_scores,
    load_rewardmath_step_scores,
    load_rmbench,
    parse_hh_transcript,
    sniff_format,
)
from .schema import (
    RM_BENCH_STYLES,
    ROLES,
    GridItem,
    ItemSet,
    Message,
    PairSet,
    PreferencePair,
    Prompt,
    RankedItem,
    SkippedRecord,
    SkippedRecordsWarning,
)

__all__ = [
    "FORMATS",
    "RM_BENCH_STYLES",
    "ROLES",
    "GridItem",
    "ItemSet",
    "Message",
    "PairSet",
    "PreferencePair",
    "Prompt",
    "RankedItem",
    "SkippedRecord",
    "SkippedRecordsWarning",
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
