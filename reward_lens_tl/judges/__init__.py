"""Generative judges and process reward models, analysed from the inside like reward models.

Examples:
    >>> from reward_lens_tl.judges import HookedJudge, HookedPRM
    >>> HookedJudge.kind, HookedPRM.kind
    ('pointwise', 'token')
"""

from .analysis import (
    LinearisedAttribution,
    PositionBiasResult,
    StepErrorAnalysis,
    first_error_analysis,
    linearised_attribution,
    position_bias,
    step_segments,
)
from .hooked_judges import HookedJudge, HookedPRM, StepEncoding
from .pairwise import PairwiseJudgeScores, judge_pairs
from .templates import (
    LIKERT_TEMPLATE,
    PAIRWISE_TEMPLATE,
    POINTWISE_TEMPLATE,
    PRM_TEMPLATE,
)

__all__ = [
    "LIKERT_TEMPLATE",
    "PAIRWISE_TEMPLATE",
    "POINTWISE_TEMPLATE",
    "PRM_TEMPLATE",
    "HookedJudge",
    "HookedPRM",
    "LinearisedAttribution",
    "PairwiseJudgeScores",
    "PositionBiasResult",
    "StepEncoding",
    "StepErrorAnalysis",
    "first_error_analysis",
    "judge_pairs",
    "linearised_attribution",
    "position_bias",
    "step_segments",
]
