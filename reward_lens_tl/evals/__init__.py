"""Benchmark evaluation: score files, scoring runs, published metrics, and why a model fails.

The modules, lowest first (each imports only those above it): ``scores`` (the per-item score
file), ``metrics`` (each benchmark's reference protocol), ``comparisons`` (one chosen against
one rejected response), ``explain`` (why comparisons fail), ``results`` (``EvalResult``,
``Failures``), ``run`` (scoring runs, pairing score files with data), ``zoo_set`` and ``cli``.

>>> from reward_lens_tl import evals
>>> from reward_lens_tl.evals.scores import ScoreRecord, ScoreSet
>>> scores = ScoreSet([ScoreRecord("rewardbench", 0, (1.0,), (2.0,))])
>>> result = evals.EvalResult("rewardbench", scores)
>>> len(result.failures()), evals.BENCHMARKS
(1, ('rewardbench', 'rewardmath', 'rmbench'))
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# Lazy exports: the CLI imports ``evals.cli`` to build its parser, which must stay light (no
# torch); each name loads its module on first use.
_EXPORTS = {
    "Comparison": "comparisons",
    "ComparisonSet": "comparisons",
    "item_texts": "comparisons",
    "ScoreMismatchError": "errors",
    "ScoreProducerMismatchError": "errors",
    "UnknownBenchmarkError": "errors",
    "FailureExplanation": "explain",
    "TokenDriver": "explain",
    "explain_failures": "explain",
    "Metrics": "metrics",
    "metrics_for": "metrics",
    "rewardbench_metrics": "metrics",
    "rewardmath_metrics": "metrics",
    "rmbench_metrics": "metrics",
    "EvalResult": "results",
    "Failures": "results",
    "NOT_SCORED": "run",
    "align_scores": "run",
    "benchmark_of": "run",
    "item_hash": "run",
    "item_id": "run",
    "score_items": "run",
    "BENCHMARKS": "scores",
    "ScoreRecord": "scores",
    "ScoreSet": "scores",
    "ScoreWriter": "scores",
    "check_benchmark": "scores",
    "read_scores": "scores",
    "HACK_SUBSETS": "zoo_set",
    "ZOO_SECTIONS": "zoo_set",
    "zoo_benchmark": "zoo_set",
}

if TYPE_CHECKING:  # the real imports, for type checkers and IDEs
    from .comparisons import Comparison, ComparisonSet, item_texts
    from .errors import ScoreMismatchError, ScoreProducerMismatchError, UnknownBenchmarkError
    from .explain import FailureExplanation, TokenDriver, explain_failures
    from .metrics import (
        Metrics,
        metrics_for,
        rewardbench_metrics,
        rewardmath_metrics,
        rmbench_metrics,
    )
    from .results import EvalResult, Failures
    from .run import NOT_SCORED, align_scores, benchmark_of, item_hash, item_id, score_items
    from .scores import (
        BENCHMARKS,
        ScoreRecord,
        ScoreSet,
        ScoreWriter,
        check_benchmark,
        read_scores,
    )
    from .zoo_set import HACK_SUBSETS, ZOO_SECTIONS, zoo_benchmark


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


__all__ = [
    "BENCHMARKS",
    "Comparison",
    "ComparisonSet",
    "EvalResult",
    "FailureExplanation",
    "Failures",
    "HACK_SUBSETS",
    "Metrics",
    "NOT_SCORED",
    "ScoreMismatchError",
    "ScoreProducerMismatchError",
    "ScoreRecord",
    "ScoreSet",
    "ScoreWriter",
    "TokenDriver",
    "UnknownBenchmarkError",
    "ZOO_SECTIONS",
    "align_scores",
    "benchmark_of",
    "check_benchmark",
    "explain_failures",
    "item_hash",
    "item_id",
    "item_texts",
    "metrics_for",
    "read_scores",
    "rewardbench_metrics",
    "rewardmath_metrics",
    "rmbench_metrics",
    "score_items",
    "zoo_benchmark",
]
