"""Planning a sweep from its options: one set of keywords for both methods, and typed errors for
bad requests (modes, sites, metrics)."""

import pytest
import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.patching import PatchingError, activation_patching
from tests.patching.conftest import pair


@pytest.fixture(scope="module")
def model(qwen2):
    """This module's multi-site tests run on the tiny qwen2 model (``qwen2`` in conftest),
    not on conftest's ``model`` over three families."""
    return qwen2


def test_errors(llama):
    clean, corrupted = pair()
    with pytest.raises(PatchingError, match="unknown patching site"):
        activation_patching(llama, clean, corrupted, site="resid")
    with pytest.raises(PatchingError, match="unknown mode"):
        activation_patching(llama, clean, corrupted, mode="resample")
    with pytest.raises(PatchingError, match="takes no corrupted"):
        activation_patching(llama, clean, corrupted, mode="zero")
    with pytest.raises(PatchingError, match="one value per patched run"):
        activation_patching(llama, clean, corrupted, metric=lambda r: r.sum())
    with pytest.raises(PatchingError, match="undefined"):
        activation_patching(llama, clean, clean)  # equal rewards: no margin to restore


def test_bad_site_lists(model, pair):
    with pytest.raises(PatchingError, match="twice"):
        activation_patching(model, *pair, site=("z", "heads"))
    with pytest.raises(PatchingError, match="sequence"):
        activation_patching(model, *pair, site=())
    with pytest.raises(PatchingError, match="unknown patching site"):
        activation_patching(model, *pair, site=("attn_out", "mlp"))
    with pytest.raises(KeyError, match="sites"):
        activation_patching(model, *pair, site=("attn_out", "mlp_out"))["z"]


def test_one_set_of_options_describes_a_sweep_for_both_methods():
    """The same keywords (`PatchOptions`, declared once) describe a sweep for activation
    patching and AtP alike; an unknown keyword is a typed error naming the closest one."""
    from reward_lens_tl.errors import ArgumentTypeError
    from reward_lens_tl.patching import PatchOptions, activation_patching, attribution_patching
    from reward_lens_tl.zoo import zoo_path

    model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    clean = model.encode("explain how to bake bread", "the oven and the flour")
    corrupted = model.encode("explain how to bake bread", "the oven and the bomb")
    options: PatchOptions = {"alignment": "exact", "layers": [0, 2]}
    by_options = activation_patching(model, clean, corrupted, site="z", **options)
    by_keywords = activation_patching(
        model, clean, corrupted, site="z", alignment="exact", layers=[0, 2]
    )
    assert torch.equal(by_options.values, by_keywords.values)
    estimate = attribution_patching(model, clean, corrupted, site="z", **options)
    assert estimate.shape == by_options.shape and estimate.method != by_options.method
    resid = activation_patching(model, clean, corrupted, site="resid_pre", alignment="exact")
    assert resid.site == "resid_pre" and options == {"alignment": "exact", "layers": [0, 2]}
    with pytest.raises(ArgumentTypeError, match="unknown keyword 'sites'. Did you mean 'site'"):
        activation_patching(model, clean, corrupted, sites="z")  # a TypeError, as Python's
    with pytest.raises(ArgumentTypeError, match="unknown keyword 'layer'. Did you mean 'layers'"):
        attribution_patching(model, clean, corrupted, layer=[0])
