"""Reward-hacking probes: edits a faithful reward model should ignore or penalise.

They are measured from the outside (reward deltas) and the inside (where the delta appears, who
carries it).

Examples:
    >>> from reward_lens_tl.probes import Probe, run_probes
    >>> Probe.insert("Great question! ", at="response_start", name="opener").name
    'opener'
"""

from ..errors import ProbeError, ProbeNotApplicableError, ProbeSkip, TooFewExamplesError
from .cascade import CascadeResult, ProbeCascade
from .outside import DeltaSummary, summarize_deltas
from .probe import (
    Conversation,
    Probe,
    builtin_probes,
    confident_tone,
    emoji,
    filler_swap,
    flattery,
    hedging,
    length_padding,
    markdown_formatting,
    prompt_echo,
    punctuation,
    refusal_boilerplate,
    repetition,
    sycophantic_opener,
    synonym_swap,
    whitespace,
)
from .probe_report import ProbeReport, ProbeRow, Skipped
from .runner import run_probes

__all__ = [
    "CascadeResult",
    "Conversation",
    "DeltaSummary",
    "Probe",
    "ProbeCascade",
    "ProbeError",
    "ProbeNotApplicableError",
    "ProbeReport",
    "ProbeRow",
    "ProbeSkip",
    "Skipped",
    "TooFewExamplesError",
    "builtin_probes",
    "confident_tone",
    "emoji",
    "filler_swap",
    "flattery",
    "hedging",
    "length_padding",
    "markdown_formatting",
    "prompt_echo",
    "punctuation",
    "refusal_boilerplate",
    "repetition",
    "run_probes",
    "summarize_deltas",
    "sycophantic_opener",
    "synonym_swap",
    "whitespace",
]
