"""Several patching sites in one call: shared clean and corrupted runs, same values."""

import pytest
import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.patching import MultiSitePatchResult, PatchingError, activation_patching
from reward_lens_tl.testing import random_batch, tiny_reward_model

SITES = ("attn_out", "mlp_out", "heads", "resid_post")


@pytest.fixture(scope="module")
def model():
    return HookedRewardModel.from_pretrained(tiny_reward_model("qwen2"))


@pytest.fixture(scope="module")
def pair():
    ids, _ = random_batch(2, [11, 9], low=6, seed=4)
    ids[1, :4] = ids[0, :4]  # a shared prefix: the no-op writes there are skipped
    return ids[0], ids[1, :9]


@pytest.mark.parametrize("mode", ["denoising", "noising", "zero"])
def test_one_call_equals_single_site_calls(model, pair, mode):
    args = pair if mode != "zero" else pair[:1]
    both = activation_patching(model, *args, site=SITES, mode=mode, heads=[1, 3])
    assert isinstance(both, MultiSitePatchResult) and both.sites == (
        "attn_out",
        "mlp_out",
        "z",
        "resid_post",
    )
    for site in both.sites:
        single = activation_patching(
            model, *args, site=site, mode=mode, heads=[1, 3] if site == "z" else None
        )
        assert both[site].shape == single.shape
        assert torch.equal(both[site].values, single.values)
        assert torch.equal(both[site].rewards, single.rewards)
        assert both[site].target_reward == single.target_reward
    assert both["z"].grid.heads == (1, 3)


def test_labels_frame_and_top_k(model, pair):
    both = activation_patching(model, *pair, site=("attn_out", "mlp_out"))
    n = model.cfg.n_layers
    assert both.labels() == tuple(f"{s} L{i}" for s in ("attn_out", "mlp_out") for i in range(n))
    frame = both.to_dataframe()
    assert list(frame["site"]) == ["attn_out"] * n + ["mlp_out"] * n
    assert torch.allclose(torch.tensor(frame["value"].values), both.flat().double())
    top = both.top_k(2)
    effects = (both.flat() - both["attn_out"].baseline).abs()
    assert abs(top[0][1] - float(both.flat()[effects.argmax()])) == 0
    assert len(both.plot().axes) >= 2


def test_bad_site_lists(model, pair):
    with pytest.raises(PatchingError, match="twice"):
        activation_patching(model, *pair, site=("z", "heads"))
    with pytest.raises(PatchingError, match="sequence"):
        activation_patching(model, *pair, site=())
    with pytest.raises(PatchingError, match="unknown patching site"):
        activation_patching(model, *pair, site=("attn_out", "mlp"))
    with pytest.raises(KeyError, match="sites"):
        activation_patching(model, *pair, site=("attn_out", "mlp_out"))["z"]
