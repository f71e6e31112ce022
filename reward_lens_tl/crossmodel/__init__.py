"""Cross-model comparison: explicit RMs, implicit RMs and objectives of a multi-objective RM on
one pair set — agreement with CIs, disagreements, lens depth, attribution ranks, CKA, sweep τ,
and per-feature effects on contrast pairs.

- :mod:`.sources`: models behind one interface (:class:`ExplicitReward`, :class:`ImplicitReward`)
  and :func:`run_on_pairs`, which runs one over a pair set;
- :mod:`.compare`: :func:`compare_models` → :class:`ModelComparison`;
- :mod:`.features`: :func:`feature_effects` — which planted features each model rewards, and
  by how much, from per-feature contrast pairs;
- :mod:`.stats`: linear CKA, Kendall τ-b between token sweeps (correlations and bootstrap CIs:
  :mod:`reward_lens_tl.stats`).

Renamed, still importable with a :class:`FutureWarning`: ``FeatureEffects`` (now
:class:`PlantedFeatureEffects`) and ``run_source`` (now :func:`run_on_pairs`).
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
