"""Sparse autoencoders on reward models, through sae_lens.

- `activations`: activations at any hook, streamed, padding excluded;
- `training`: TopK SAEs trained with sae_lens's `TopKTrainingSAE` + `SAETrainer`
  offline; save/load in sae_lens's format;
- `splice`: SAEs spliced in (`add_sae`, `run_with_cache_with_saes`) with hook names
  checked; the reward cost of the reconstruction;
- `attribution`: exact direct effects of final-residual latents (summing to the reward),
  attribution patching over latents at any site, latent ablation and steering;
- `contexts`: max-activating contexts;
- `concepts`: difference-of-means concept vectors, their alignment with the reward
  direction and SAE decoders, and their causal effect;
- `zoo_features`: which latents recover the zoo's planted features;
- `difference`: difference dictionaries, SAEs on chosen − rejected at the final norm's output
  whose latents split each margin exactly, matched against the zoo's planted directions.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.testing import tiny_reward_model, random_batch
    >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    >>> ids, mask = random_batch(8, seq_len=10)
    >>> acts = collect_activations(model, "blocks.1.hook_resid_post", [(ids, mask)])
    >>> sae = train_topk_sae(acts, "blocks.1.hook_resid_post", d_sae=64, k=4, steps=20,
    ...                      batch_size=32).sae
    >>> feature_attribution(model, sae, ids, mask).completeness_error() < 1e-4
    True
"""

from ..errors import EmptyActivationsError, SAEHookError, SAESiteError, UnsupportedSAEError
from . import requirements  # noqa: F401 - first: the TransformerLens line check
from .activations import (
    collect_activations,
    iter_activations,
    iter_batch_activations,
    model_batches,
    rebatch,
    shuffled_batches,
)
from .attribution import (
    atp_check,
    attribute_features,
    decoder_directions,
    feature_attribution,
    feature_steering,
    latent_ablation,
    latent_attribution_patching,
    pair_feature_attribution,
)
from .concepts import (
    concept_projection,
    concept_steering,
    concept_vectors,
    concept_vectors_from_sets,
    contrast_sets,
    decoder_alignment,
    reward_direction,
)
from .contexts import max_activating_contexts
from .difference import (
    DIFFERENCE_SITE,
    DifferenceDictionary,
    PlantedMatch,
    difference_activations,
    difference_dictionary,
    planted_match,
    reading_activations,
    train_difference_sae,
    zoo_planted_directions,
)
from .sae_results import (
    AtPCheck,
    ConceptVectors,
    FeatureAttribution,
    FeatureContexts,
    FeatureEffects,
    GroundTruthReport,
    PairFeatureAttribution,
    SteeringCurve,
)
from .splice import add_sae, run_with_cache_with_saes, splice_report, spliced
from .training import TrainedSAE, load_sae, sae_stats, save_sae, train_topk_sae
from .zoo_features import (
    ZOO_PLAN,
    planted_feature_report,
    train_zoo_sae,
    zoo_ground_truth,
    zoo_plan,
)

__all__ = [
    "DIFFERENCE_SITE",
    "ZOO_PLAN",
    "AtPCheck",
    "ConceptVectors",
    "DifferenceDictionary",
    "EmptyActivationsError",
    "FeatureAttribution",
    "FeatureContexts",
    "FeatureEffects",
    "GroundTruthReport",
    "PairFeatureAttribution",
    "PlantedMatch",
    "SAEHookError",
    "SAESiteError",
    "SteeringCurve",
    "TrainedSAE",
    "UnsupportedSAEError",
    "add_sae",
    "atp_check",
    "attribute_features",
    "collect_activations",
    "concept_projection",
    "concept_steering",
    "concept_vectors",
    "concept_vectors_from_sets",
    "contrast_sets",
    "decoder_alignment",
    "decoder_directions",
    "difference_activations",
    "difference_dictionary",
    "feature_attribution",
    "feature_steering",
    "iter_activations",
    "iter_batch_activations",
    "latent_ablation",
    "latent_attribution_patching",
    "load_sae",
    "max_activating_contexts",
    "model_batches",
    "pair_feature_attribution",
    "planted_feature_report",
    "planted_match",
    "reading_activations",
    "rebatch",
    "reward_direction",
    "run_with_cache_with_saes",
    "sae_stats",
    "save_sae",
    "shuffled_batches",
    "splice_report",
    "spliced",
    "train_difference_sae",
    "train_topk_sae",
    "train_zoo_sae",
    "zoo_ground_truth",
    "zoo_plan",
    "zoo_planted_directions",
]
