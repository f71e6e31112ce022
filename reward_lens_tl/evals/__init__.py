"""Benchmark evaluation: score files, scoring runs, published metrics, and why a model fails.

The modules, lowest first (each imports only those above it): `prm` (one score per solution
from a process reward model's step scores), `scores` (the per-item score file), `rewardbench2`
(RewardBench 2's best-of-4 and Ties rules), `metrics` (each benchmark's reference protocol),
`comparisons` (one chosen against one rejected response), `explain` (why comparisons fail),
`results` (`EvalResult`, `Failures`), `run` (scoring runs, pairing score files with
data), `zoo_set` and `cli`; `processbench` (earliest-error prediction) stands alone.

Examples:
    >>> from reward_lens_tl import evals
    >>> from reward_lens_tl.evals.scores import ScoreRecord, ScoreSet
    >>> scores = ScoreSet([ScoreRecord("rewardbench", 0, (1.0,), (2.0,))])
    >>> result = evals.EvalResult("rewardbench", scores)
    >>> len(result.failures()), evals.BENCHMARKS
    (1, ('rewardbench', 'rewardbench2', 'rewardmath', 'rmbench'))
    >>> evals.PRM_AGGREGATES[:3], evals.processbench_from_predictions([0, -1], [0, -1]).average_f1
    (('min', 'max', 'prod'), 100.0)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports
from ..errors import ScoreMismatchError, ScoreProducerMismatchError, UnknownBenchmarkError

# Lazy exports: the CLI imports ``evals.cli`` to build its parser, which must stay light (no
# torch); each name loads its module on first use.
_EXPORTS = {
    "Comparison": "comparisons",
    "ComparisonSet": "comparisons",
    "item_texts": "comparisons",
    "FailureExplanation": "explain",
    "TokenDriver": "explain",
    "explain_failures": "explain",
    "Metrics": "metrics",
    "metrics_for": "metrics",
    "rewardbench2_metrics": "metrics",
    "rewardbench_metrics": "metrics",
    "rewardmath_metrics": "metrics",
    "rmbench_metrics": "metrics",
    "DEFAULT_PRM_AGGREGATE": "prm",
    "PRM_AGGREGATES": "prm",
    "aggregate_steps": "prm",
    "check_aggregate": "prm",
    "PROCESSBENCH_SUBSETS": "processbench",
    "ProcessBenchResult": "processbench",
    "first_error_step": "processbench",
    "harmonic_f1": "processbench",
    "processbench_from_predictions": "processbench",
    "processbench_from_scores": "processbench",
    "RB2_SUBSETS": "rewardbench2",
    "TIES_WEIGHTS": "rewardbench2",
    "TiesPrompt": "rewardbench2",
    "best_of_n_credit": "rewardbench2",
    "ties_components": "rewardbench2",
    "ties_prompt": "rewardbench2",
    "ties_score": "rewardbench2",
    "EvalResult": "eval_result",
    "Failures": "eval_result",
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
    "StepScoreRecord": "scores",
    "check_benchmark": "scores",
    "read_scores": "scores",
    "HACK_SUBSETS": "zoo_set",
    "ZOO_SECTIONS": "zoo_set",
    "zoo_benchmark": "zoo_set",
}

if TYPE_CHECKING:  # the real imports, for type checkers and IDEs
    from .comparisons import Comparison, ComparisonSet, item_texts
    from .eval_result import EvalResult, Failures
    from .explain import FailureExplanation, TokenDriver, explain_failures
    from .metrics import (
        Metrics,
        metrics_for,
        rewardbench2_metrics,
        rewardbench_metrics,
        rewardmath_metrics,
        rmbench_metrics,
    )
    from .prm import DEFAULT_PRM_AGGREGATE, PRM_AGGREGATES, aggregate_steps, check_aggregate
    from .processbench import (
        PROCESSBENCH_SUBSETS,
        ProcessBenchResult,
        first_error_step,
        harmonic_f1,
        processbench_from_predictions,
        processbench_from_scores,
    )
    from .rewardbench2 import (
        RB2_SUBSETS,
        TIES_WEIGHTS,
        TiesPrompt,
        best_of_n_credit,
        ties_components,
        ties_prompt,
        ties_score,
    )
    from .run import NOT_SCORED, align_scores, benchmark_of, item_hash, item_id, score_items
    from .scores import (
        BENCHMARKS,
        ScoreRecord,
        ScoreSet,
        ScoreWriter,
        StepScoreRecord,
        check_benchmark,
        read_scores,
    )
    from .zoo_set import HACK_SUBSETS, ZOO_SECTIONS, zoo_benchmark


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


__all__ = [
    "BENCHMARKS",
    "Comparison",
    "ComparisonSet",
    "DEFAULT_PRM_AGGREGATE",
    "EvalResult",
    "FailureExplanation",
    "Failures",
    "HACK_SUBSETS",
    "Metrics",
    "NOT_SCORED",
    "PRM_AGGREGATES",
    "PROCESSBENCH_SUBSETS",
    "ProcessBenchResult",
    "RB2_SUBSETS",
    "ScoreMismatchError",
    "ScoreProducerMismatchError",
    "ScoreRecord",
    "ScoreSet",
    "ScoreWriter",
    "StepScoreRecord",
    "TIES_WEIGHTS",
    "TiesPrompt",
    "TokenDriver",
    "UnknownBenchmarkError",
    "ZOO_SECTIONS",
    "aggregate_steps",
    "align_scores",
    "benchmark_of",
    "best_of_n_credit",
    "check_aggregate",
    "check_benchmark",
    "explain_failures",
    "first_error_step",
    "harmonic_f1",
    "item_hash",
    "item_id",
    "item_texts",
    "metrics_for",
    "processbench_from_predictions",
    "processbench_from_scores",
    "read_scores",
    "rewardbench2_metrics",
    "rewardbench_metrics",
    "rewardmath_metrics",
    "rmbench_metrics",
    "score_items",
    "ties_components",
    "ties_prompt",
    "ties_score",
    "zoo_benchmark",
]
