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

Renamed, still importable with a `FutureWarning`: `FeatureEffects` (now
`PlantedFeatureEffects`) and `run_source` (now `run_on_pairs`).
"""

from .._deprecation import deprecated_names
from .compare import ModelComparison, compare_models
from .errors import BackboneMismatchError, UnknownModelError
from .features import PlantedFeatureEffects, feature_effects
from .sources import ExplicitReward, ImplicitReward, SourceRun, as_source, run_on_pairs
from .stats import (
    bootstrap,  # noqa: F401  (deprecated: warns when called)
    crystallization_depth,
    linear_cka,
    sweep_tau,
)

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

__getattr__ = deprecated_names(
    __name__,
    {
        "FeatureEffects": "reward_lens_tl.crossmodel.features.PlantedFeatureEffects",
        "run_source": "reward_lens_tl.crossmodel.sources.run_on_pairs",
    },
)
