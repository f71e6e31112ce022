"""One module per preference-data file format; each exposes a `load_*` function."""

from .hh_rlhf import load_hh_rlhf, parse_hh_transcript
from .llmbar import llmbar_subset, load_llmbar
from .rewardbench import load_rewardbench_jsonl
from .rewardmath import (
    load_rewardmath,
    load_rewardmath_pairwise,
    load_rewardmath_scores,
    load_rewardmath_step_scores,
)
from .rmbench import load_rmbench

__all__ = [
    "llmbar_subset",
    "load_hh_rlhf",
    "load_llmbar",
    "load_rewardbench_jsonl",
    "load_rewardmath",
    "load_rewardmath_pairwise",
    "load_rewardmath_scores",
    "load_rewardmath_step_scores",
    "load_rmbench",
    "parse_hh_transcript",
]
