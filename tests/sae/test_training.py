"""Training a TopK SAE: seeded, round-trips through disk; any sae_lens SAE loads."""

from __future__ import annotations

import pytest
import torch
from sae_lens import SAE, StandardSAE, StandardSAEConfig
from sae_lens.saes.sae import SAEMetadata

from reward_lens_tl.errors import RewardLensError
from reward_lens_tl.sae import (
    feature_attribution,
    load_sae,
    save_sae,
    splice_report,
    train_topk_sae,
)
from reward_lens_tl.sae.testing import tiny_trained_sae
from tests.sae.conftest import FINAL


# ---- training, save / load ---------------------------------------------------------------------
def test_training_is_seeded_and_round_trips_through_disk(llama, batch, tmp_path, trained_mid):
    ids, mask = batch
    again = tiny_trained_sae(llama, "blocks.0.hook_resid_post", d_sae=128, k=8, steps=150)
    torch.testing.assert_close(again.sae.W_dec, trained_mid.sae.W_dec)
    assert trained_mid.stats.fvu < 0.6 and trained_mid.stats.l0 == 8
    path = save_sae(trained_mid, tmp_path / "sae")
    loaded = load_sae(path, model=llama)
    assert type(loaded).__name__ == "TopKSAE"
    for name, p in trained_mid.sae.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[name], p)
    a = splice_report(llama, trained_mid.sae, ids, mask).reconstruction
    b = splice_report(llama, loaded, ids, mask).reconstruction
    torch.testing.assert_close(a, b)


def test_training_from_an_iterator_that_ends_too_soon(llama):
    acts = torch.randn(64, 8)
    with pytest.raises(RewardLensError, match="ended after"):
        train_topk_sae(iter(acts.split(16)), "x", d_sae=16, k=2, steps=10, batch_size=16)


def test_load_any_sae_lens_sae(llama, batch, tmp_path):
    torch.manual_seed(0)
    sae = StandardSAE(StandardSAEConfig(d_in=64, d_sae=96, metadata=SAEMetadata(hook_name=FINAL)))
    sae.save_model(tmp_path / "standard")
    loaded = load_sae(tmp_path / "standard", model=llama)
    assert isinstance(loaded, SAE) and type(loaded).__name__ == "StandardSAE"
    attr = feature_attribution(llama, loaded, *batch)
    assert attr.completeness_error() <= 1e-4
    with pytest.raises(FileNotFoundError, match="cfg.json"):
        load_sae(tmp_path / "missing")
