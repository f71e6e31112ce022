"""Cross-model comparison: explicit RMs, implicit RMs and objectives of a multi-objective RM.

On one pair set: agreement with CIs, disagreements, lens depth, attribution ranks, CKA, sweep
τ, and per-feature effects on contrast pairs.

- `.sources`: models behind one interface (`ExplicitReward`, `ImplicitReward`)
  and `run_on_pairs`, which runs one over a pair set;
- `.compare`: `compare_models` → `ModelComparison`;
- `.features`: `feature_effects` — which planted features each model rewards, and
  by how much, from per-feature contrast pairs;
- `.stats`: linear CKA, Kendall τ-b between token sweeps (correlations and bootstrap CIs:
  `reward_lens_tl.stats`).
"""

from ..errors import BackboneMismatchError, UnknownModelError
from .compare import ModelComparison, compare_models
from .features import PlantedFeatureEffects, feature_effects
from .similarity import crystallization_depth, linear_cka, sweep_tau
from .sources import ExplicitReward, ImplicitReward, SourceRun, as_source, run_on_pairs

__all__ = [
    "BackboneMismatchError",
    "ExplicitReward",
    "ImplicitReward",
    "ModelComparison",
    "PlantedFeatureEffects",
    "SourceRun",
    "UnknownModelError",
    "as_source",
    "compare_models",
    "crystallization_depth",
    "feature_effects",
    "linear_cka",
    "run_on_pairs",
    "sweep_tau",
]
