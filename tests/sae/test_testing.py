"""The test SAEs: a random TopK SAE is seeded, leaves the global RNG alone and encodes to the
top `k` of its hand-computed pre-activations; a tiny trained SAE is seeded too."""

from __future__ import annotations

import torch

from reward_lens_tl.sae.testing import random_topk_sae, tiny_trained_sae
from tests.sae.conftest import FINAL


def test_a_random_topk_sae_keeps_the_top_k_pre_activations(llama):
    state = torch.random.get_rng_state()
    sae = random_topk_sae(llama, FINAL, d_sae=32, k=4, seed=5)
    assert torch.equal(torch.random.get_rng_state(), state)  # the global RNG is untouched
    assert torch.equal(sae.W_enc, random_topk_sae(llama, FINAL, d_sae=32, k=4, seed=5).W_enc)
    assert sae.cfg.metadata.hook_name == FINAL and float(sae.b_dec.detach().abs().sum()) > 0
    x = torch.randn(10, llama.cfg.d_model, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        z = sae.encode(x)
        pre = (x - sae.b_dec) @ sae.W_enc + sae.b_enc  # TopK's encoder, written out
    top = pre.topk(4, dim=-1)
    expected = torch.zeros_like(pre).scatter(-1, top.indices, top.values.relu())
    torch.testing.assert_close(z, expected, atol=1e-5, rtol=0)
    assert int((z != 0).sum(-1).max()) <= 4


def test_a_tiny_trained_sae_is_seeded(llama):
    a = tiny_trained_sae(llama, "blocks.0.hook_resid_post", d_sae=32, k=4, steps=10)
    b = tiny_trained_sae(llama, "blocks.0.hook_resid_post", d_sae=32, k=4, steps=10)
    assert torch.equal(a.sae.W_dec, b.sae.W_dec) and a.sae.cfg.d_sae == 32
