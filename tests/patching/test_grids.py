"""Patching sites and their hooks: ``resid_post`` of a layer is the next layer's ``resid_pre``."""

import torch

from reward_lens_tl.patching import (
    activation_patching,
)
from tests.patching.conftest import manual_patch, pair


def test_resid_post_is_the_next_resid_pre(model):
    clean, corrupted = pair(lengths=[10, 8], seed=9)
    post = activation_patching(model, clean, corrupted, site="resid_post", metric=lambda r: r)
    pre = activation_patching(model, clean, corrupted, site="resid_pre", metric=lambda r: r)
    assert torch.allclose(post.rewards[:-1], pre.rewards[1:], atol=1e-5)
    last = model.cfg.n_layers - 1
    for j in (0, 5, 7):
        expected = manual_patch(model, corrupted, clean, f"blocks.{last}.hook_resid_post", j, j + 2)
        assert abs(float(post.rewards[last, j]) - expected) <= 1e-5
