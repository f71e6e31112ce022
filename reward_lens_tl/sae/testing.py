"""Small SAEs for tests and doctests: random TopK SAEs and a quickly trained one.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.testing import tiny_reward_model
    >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    >>> random_topk_sae(model, "blocks.0.hook_resid_post", d_sae=32, k=4).W_dec.shape
    torch.Size([32, 64])
"""

from __future__ import annotations

import torch
from sae_lens import TopKSAE, TopKSAEConfig
from sae_lens.saes.sae import SAEMetadata

from ..testing import random_batch
from .activations import check_hook, collect_activations
from .training import TrainedSAE, train_topk_sae

__all__ = [
    "random_topk_sae",
    "tiny_trained_sae",
]


def random_topk_sae(
    model, hook_name: str, d_sae: int = 128, k: int = 8, seed: int = 0, d_in: int | None = None
) -> TopKSAE:
    """A randomly initialised (untrained) sae_lens `TopKSAE` for `hook_name`.

    It has a non-zero decoder bias so bias terms are exercised.

    Args:
        model: The reward model.
        hook_name: The hook point.
        d_sae: The number of latents.
        k: The number of active latents per token.
        seed: The initialisation seed.
        d_in: The input width (default `d_model`).

    Returns:
        The SAE.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> sae = random_topk_sae(model, "blocks.1.hook_resid_post")
        >>> type(sae).__name__, sae.cfg.d_in, sae.cfg.d_sae
        ('TopKSAE', 64, 128)
    """
    check_hook(model, hook_name)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        sae = TopKSAE(
            TopKSAEConfig(
                d_in=d_in or model.cfg.d_model,
                d_sae=d_sae,
                k=k,
                device=str(model.cfg.device),
                metadata=SAEMetadata(hook_name=hook_name),
            )
        )
        with torch.no_grad():
            sae.b_dec.normal_(0, 0.1)
            sae.b_enc.normal_(0, 0.1)
    return sae


def tiny_trained_sae(
    model, hook_name: str, d_sae: int = 128, k: int = 8, steps: int = 200, seed: int = 0
) -> TrainedSAE:
    """A TopK SAE trained for a few steps on random token sequences (seconds on CPU).

    Args:
        model: The reward model.
        hook_name: The hook point.
        d_sae: The number of latents.
        k: The number of active latents per token.
        steps: Training steps.
        seed: The seed of the data and the training.

    Returns:
        The `TrainedSAE`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> trained = tiny_trained_sae(model, "blocks.1.hook_resid_post", steps=20)
        >>> type(trained).__name__, type(trained.sae).__name__
        ('TrainedSAE', 'TopKSAE')
    """
    ids, mask = random_batch(64, seq_len=12, seed=seed, vocab=model.cfg.d_vocab)
    acts = collect_activations(model, hook_name, [(ids, mask)])
    return train_topk_sae(
        acts,
        hook_name,
        d_sae=d_sae,
        k=k,
        steps=steps,
        batch_size=128,
        seed=seed,
        model=model,
        threads=1,
    )
