"""Implicit reward models: the reward a DPO policy carries relative to its reference.

- `.loading`: HF causal LMs from local checkpoints → TransformerLens models (vocabulary
  unembed kept); on TransformerLens 4, `ImplicitRewardModel.from_pretrained` boots them on the
  bridge instead (`reward_lens_tl.bridge.boot_causal_lm`), and every analysis here runs on them;
- `.model`: `ImplicitRewardModel` — per-token and summed implicit rewards over an
  explicit response-token mask;
- `.attribution`: exact attribution of the implicit reward to the policy's components (the
  taken token's logit is linear; the log-sum-exp is reported as its own term);
- `.lens`: the policy's residual at every layer read out as per-token log-ratio;
- `.fit`: a ridge fit from policy features (residual or SAE latents) to the implicit reward
  and to an explicit reward model, and the divergence between the two fits.
"""

from ..errors import EmptyResponseMaskError, NonlinearUnembedError, VocabularyMismatchError
from .attribution import (
    ImplicitAttribution,
    PairImplicitAttribution,
    implicit_attribution,
    pair_implicit_attribution,
)
from .batches import response_masks
from .fit import (
    FeatureDivergence,
    FeatureFitComparison,
    FeatureMatrix,
    RewardFit,
    divergence,
    fit_reward,
    implicit_feature_fit,
    policy_activations,
    policy_features,
)
from .lens import ImplicitLensResult, implicit_lens, pair_implicit_lens
from .loading import load_causal_lm
from .reward_model import ImplicitRewardModel, token_logprobs

__all__ = [
    "EmptyResponseMaskError",
    "FeatureDivergence",
    "FeatureFitComparison",
    "FeatureMatrix",
    "ImplicitAttribution",
    "ImplicitLensResult",
    "ImplicitRewardModel",
    "NonlinearUnembedError",
    "PairImplicitAttribution",
    "RewardFit",
    "VocabularyMismatchError",
    "divergence",
    "fit_reward",
    "implicit_attribution",
    "implicit_feature_fit",
    "implicit_lens",
    "load_causal_lm",
    "pair_implicit_attribution",
    "pair_implicit_lens",
    "policy_activations",
    "policy_features",
    "response_masks",
    "token_logprobs",
]
