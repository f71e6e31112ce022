"""Cross-model comparison: explicit RMs, implicit RMs and objectives of a multi-objective RM on
one pair set — agreement with CIs, disagreements, lens depth, attribution ranks, CKA, sweep τ,
and per-feature effects on contrast pairs.

- :mod:`.sources`: models behind one interface (:class:`ExplicitReward`, :class:`ImplicitReward`);
- :mod:`.compare`: :func:`compare_models` → :class:`ModelComparison`;
- :mod:`.features`: :func:`feature_effects` — which planted features each model rewards, and
  by how much, from per-feature contrast pairs;
- :mod:`.stats`: bootstrap CIs, linear CKA, Kendall τ-b between token sweeps.
"""

from .compare import ModelComparison, compare_models
from .errors import BackboneMismatchError, UnknownModelError
from .features import FeatureEffects, feature_effects
from .sources import ExplicitReward, ImplicitReward, SourceRun, as_source, run_source
from .stats import bootstrap, crystallization_depth, linear_cka, sweep_tau

__all__ = [
    "BackboneMismatchError",
    "ExplicitReward",
    "FeatureEffects",
    "ImplicitReward",
    "ModelComparison",
    "SourceRun",
    "UnknownModelError",
    "as_source",
    "bootstrap",
    "compare_models",
    "crystallization_depth",
    "feature_effects",
    "linear_cka",
    "run_source",
    "sweep_tau",
]
