"""Token sweeps: the reward of every candidate response to one prompt, and what it reveals.

Build a sweep from token ids (prompt ids + candidate ids + the template's suffix ids, never a
decode → re-encode round trip), score it exactly or through a shared key/value cache, rank it,
compute the published statistics (also from score CSVs without the models), look inside the
top and bottom candidates, and search for short responses that maximise or minimise the reward.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports
from ..errors import ResumeMismatchError, ScoreFileError, UnknownCandidateError

# Lazy exports: importing the package stays light (the CLI builds its parser from here
# without importing torch); each name loads its module on first use.
_EXPORTS = {
    "PrefixCache": "cached",
    "CandidateSet": "candidates",
    "token_candidates": "candidates",
    "vocabulary_candidates": "candidates",
    "word_candidates": "candidates",
    "ExactScorer": "exact",
    "InsideView": "inside",
    "inside_view": "inside",
    "SweepResult": "sweep_result",
    "RetokenizationReport": "retokenize",
    "retokenization_changes": "retokenize",
    "cached_sweep": "runner",
    "exact_sweep": "runner",
    "token_sweep": "runner",
    "read_score_csv": "scorefile",
    "score_file_stats": "scorefile",
    "SearchResult": "search",
    "response_search": "search",
    "TauMatrix": "study_stats",
    "as_series": "study_stats",
    "distribution_summary": "study_stats",
    "framing_effect": "study_stats",
    "frequency_bias": "study_stats",
    "kendall_tau_matrix": "study_stats",
    "top_bottom": "study_stats",
    "valence_asymmetry": "study_stats",
}

if TYPE_CHECKING:  # the real imports, for type checkers and IDEs
    from .cached import PrefixCache
    from .candidates import (
        CandidateSet,
        token_candidates,
        vocabulary_candidates,
        word_candidates,
    )
    from .exact import ExactScorer
    from .inside import InsideView, inside_view
    from .retokenize import RetokenizationReport, retokenization_changes
    from .runner import cached_sweep, exact_sweep, token_sweep
    from .scorefile import read_score_csv, score_file_stats
    from .search import SearchResult, response_search
    from .study_stats import (
        TauMatrix,
        as_series,
        distribution_summary,
        framing_effect,
        frequency_bias,
        kendall_tau_matrix,
        top_bottom,
        valence_asymmetry,
    )
    from .sweep_result import SweepResult


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


__all__ = [
    "CandidateSet",
    "ExactScorer",
    "InsideView",
    "PrefixCache",
    "ResumeMismatchError",
    "RetokenizationReport",
    "ScoreFileError",
    "SearchResult",
    "SweepResult",
    "TauMatrix",
    "UnknownCandidateError",
    "as_series",
    "cached_sweep",
    "distribution_summary",
    "exact_sweep",
    "framing_effect",
    "frequency_bias",
    "inside_view",
    "kendall_tau_matrix",
    "read_score_csv",
    "response_search",
    "retokenization_changes",
    "score_file_stats",
    "token_candidates",
    "token_sweep",
    "top_bottom",
    "valence_asymmetry",
    "vocabulary_candidates",
    "word_candidates",
]
