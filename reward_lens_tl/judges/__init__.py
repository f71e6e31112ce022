"""Generative judges and process reward models, analysed from the inside like reward models.

`HookedJudge` and `HookedPRM` are the TransformerLens 3.9 backend's (the default); on
TransformerLens 4 the same judges and PRMs are `reward_lens_tl.bridge.BridgeJudge` and
`BridgePRM`, and the analyses here (`linearised_attribution`, `position_bias`, `judge_pairs`,
`first_error_analysis`) run on either. The names are loaded on first use, so this package imports
under both TransformerLens lines; `HookedJudge`/`HookedPRM` under TransformerLens 4 raise
`BridgeUnsupportedError` naming the bridge's classes.

Examples:
    >>> from reward_lens_tl.judges import HookedJudge, HookedPRM
    >>> HookedJudge.kind, HookedPRM.kind
    ('pointwise', 'token')
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._lazy import lazy_exports

_EXPORTS = {
    "LIKERT_TEMPLATE": "templates",
    "PAIRWISE_TEMPLATE": "templates",
    "POINTWISE_TEMPLATE": "templates",
    "PRM_TEMPLATE": "templates",
    "HookedJudge": "hooked_judges",
    "HookedPRM": "hooked_judges",
    "LinearisedAttribution": "analysis",
    "PairwiseJudgeScores": "pairwise",
    "PositionBiasResult": "analysis",
    "StepEncoding": "prm_steps",
    "StepErrorAnalysis": "analysis",
    "first_error_analysis": "analysis",
    "judge_pairs": "pairwise",
    "linearised_attribution": "analysis",
    "position_bias": "analysis",
    "step_segments": "analysis",
}

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

if TYPE_CHECKING:  # pragma: no cover
    from .analysis import (
        LinearisedAttribution,
        PositionBiasResult,
        StepErrorAnalysis,
        first_error_analysis,
        linearised_attribution,
        position_bias,
        step_segments,
    )
    from .hooked_judges import HookedJudge, HookedPRM
    from .pairwise import PairwiseJudgeScores, judge_pairs
    from .prm_steps import StepEncoding
    from .templates import LIKERT_TEMPLATE, PAIRWISE_TEMPLATE, POINTWISE_TEMPLATE, PRM_TEMPLATE

_lazy_getattr, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


def __getattr__(name: str) -> Any:
    """A lazy export; TransformerLens 3.9's classes refused by name under TransformerLens 4."""
    if _EXPORTS.get(name) == "hooked_judges":
        from ..bridge.versions import is_bridge_line, transformer_lens_version
        from ..errors import BridgeUnsupportedError

        version = transformer_lens_version()
        if is_bridge_line(version):
            bridge_name = name.replace("Hooked", "Bridge")
            raise BridgeUnsupportedError(
                f"{name} is the TransformerLens 3.9 backend's (HookedRewardModel); this "
                f"environment has TransformerLens {version}. Use "
                f"reward_lens_tl.bridge.{bridge_name}.boot(...), which takes the same options "
                "and runs the analyses of reward_lens_tl.judges"
            )
    return _lazy_getattr(name)
