"""The default patching metrics: the fraction of the margin restored (denoising) or destroyed
(noising)."""

import torch

from reward_lens_tl.patching import (
    activation_patching,
)
from tests.patching.conftest import pair


def test_default_metric_signs(llama):
    clean, corrupted = pair(seed=3)
    den = activation_patching(llama, clean, corrupted, site="z", alignment="exact")
    noi = activation_patching(llama, clean, corrupted, site="z", alignment="exact", mode="noising")
    r_c, r_x = den.source_reward, den.target_reward
    assert torch.allclose(den.values, (den.rewards - r_x) / (r_c - r_x), atol=1e-5)
    assert torch.allclose(noi.values, (r_c - noi.rewards) / (r_c - r_x), atol=1e-5)
    assert den.baseline == 0 and noi.baseline == 0
