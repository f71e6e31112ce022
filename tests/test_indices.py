"""Index arguments are checked, never wrapped (``reward_lens_tl.indices``): a layer, head,
position or objective out of range or not an integer is an ``InvalidArgumentError`` in every
analysis that takes one; Python's negative indexing is the only wrap. Each test failed on the
wave-1 code (split from the wave-1 review's regression file)."""

import pytest
import torch

from reward_lens_tl.attribution import direct_attribution
from reward_lens_tl.errors import InvalidArgumentError
from reward_lens_tl.lens import reward_lens
from reward_lens_tl.patching import activation_patching, attribution_patching


def test_patching_layers_do_not_wrap(zoo_scalar):
    chosen = zoo_scalar.encode("explain how to bake bread", "the oven and the flour")
    rejected = zoo_scalar.encode("explain how to bake bread", "the bomb and the flour")
    with pytest.raises(InvalidArgumentError, match="layer 5 out of range"):
        activation_patching(zoo_scalar, chosen, rejected, site="resid_pre", layers=[5])
    with pytest.raises(InvalidArgumentError, match="layer 3 out of range"):
        attribution_patching(zoo_scalar, chosen, rejected, site="resid_pre", layers=[3])
    with pytest.raises(InvalidArgumentError, match="integer"):
        activation_patching(zoo_scalar, chosen, rejected, site="z", layers=[1.5])
    with pytest.raises(InvalidArgumentError, match="head 4 out of range"):
        activation_patching(zoo_scalar, chosen, rejected, site="z", heads=[4])
    with pytest.raises(InvalidArgumentError, match="head -1 out of range"):
        activation_patching(zoo_scalar, chosen, rejected, site="z", heads=[-1])
    last = activation_patching(zoo_scalar, chosen, rejected, site="resid_pre", layers=[-1])
    explicit = activation_patching(zoo_scalar, chosen, rejected, site="resid_pre", layers=[2])
    assert torch.equal(last.values, explicit.values)  # Python's negative indexing only


def test_other_index_arguments_are_checked(zoo_scalar, zoo_multi):
    ids = torch.tensor([zoo_scalar.encode("explain how to bake bread", "the oven").ids])
    with pytest.raises(InvalidArgumentError, match="layer 7"):
        reward_lens(zoo_scalar, ids, layers=[7])
    with pytest.raises(InvalidArgumentError, match="integer"):
        direct_attribution(zoo_scalar, ids, positions=[2.7])
    with pytest.raises(InvalidArgumentError, match="objective index 3 out of range"):
        direct_attribution(zoo_multi, ids, objective=3)
    with pytest.raises(InvalidArgumentError, match="integer"):
        direct_attribution(zoo_multi, ids, objective=True)
