"""Shared by the SAE tests: tiny llama and gpt2 reward models, a random batch, an SAE trained at
a middle layer, the final residual site and a check that no SAE or hook is left on a model.
"""

from __future__ import annotations

import pytest

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.sae.testing import tiny_trained_sae
from reward_lens_tl.testing import random_batch, tiny_reward_model, tiny_tokenizer

__all__ = ["FINAL", "_no_saes_or_hooks"]

FINAL = "blocks.1.hook_resid_post"  # the tiny models have two layers


@pytest.fixture(scope="module")
def llama():
    return HookedRewardModel.from_pretrained(tiny_reward_model("llama"), tiny_tokenizer())


@pytest.fixture(scope="module")
def gpt2():
    return HookedRewardModel.from_pretrained(tiny_reward_model("gpt2"))


@pytest.fixture(scope="module")
def batch():
    return random_batch(4, [9, 6, 12, 3])


@pytest.fixture(scope="module")
def trained_mid(llama):
    return tiny_trained_sae(llama, "blocks.0.hook_resid_post", d_sae=128, k=8, steps=150)


def _no_saes_or_hooks(model) -> bool:
    hooks = [h for hp in model.hook_dict.values() for h in hp.fwd_hooks + hp.bwd_hooks]
    return not model.acts_to_saes and not hooks
