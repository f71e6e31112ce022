"""The package's batched patching (`reward_lens_tl.patching`) on the bridge.

Every cell is checked against a plain loop written here: one full bridge forward per cell with a
hook that writes the clean run's activation (all positions, or one), read at the last token.
TransformerLens's own `get_act_patch_resid_pre` is a second check, and AtP against gradients
taken directly. The TL 3.9 backend gives the same values (checked when this was written:
≤ 1.4e-6 for every site and mode on this pair; ≤ 1.5e-7 for AtP).
"""

import itertools

import pytest
import torch
from torch.testing import assert_close

from tests.tl4.tl4_only import FAMILIES, skip_unless_tl4

skip_unless_tl4()

from transformer_lens import patching as tl_patching  # noqa: E402

from reward_lens_tl.bridge import BridgeRewardModel  # noqa: E402
from reward_lens_tl.errors import BridgeUnsupportedError  # noqa: E402
from reward_lens_tl.patching import activation_patching, attribution_patching  # noqa: E402
from reward_lens_tl.patching.grids import SITE_HOOKS  # noqa: E402
from reward_lens_tl.testing import tiny_reward_model  # noqa: E402
from reward_lens_tl.zoo import zoo_path  # noqa: E402

HEAD_SITES = {"z", "q", "k", "v"}


@pytest.fixture(scope="module")
def zoo():
    model = BridgeRewardModel.boot(zoo_path("scalar"))
    clean = model.encode("explain how to bake bread", "the oven and the flour")
    corrupted = model.encode("explain how to bake bread", "the oven and the bomb")
    return model, torch.tensor([clean.ids]), torch.tensor([corrupted.ids]), clean, corrupted


def plain_cell(model, target, clean_cache, site, layer, pos=None, head=None):
    """The target's reward with the clean activation written at one cell (a full forward)."""
    name = f"blocks.{layer}.{SITE_HOOKS[site]}"
    where = (slice(None), slice(None) if pos is None else pos)
    if head is not None:
        where = (*where, head)

    def write(act, hook):
        act = act.clone()
        act[where] = clean_cache[name][where]
        return act

    with model.bridge.hooks(fwd_hooks=[(name, write)]):
        return model.rewards(target)[0]


def plain_grid(model, result, target, source, site):
    """Every cell of `result`'s grid, one plain forward each (the source's activation written)."""
    with torch.no_grad():
        _, cache = model.bridge.run_with_cache(source)
    expected = torch.empty(result.shape)
    for index in itertools.product(*[range(n) for n in result.shape]):
        layer, rest = index[0], index[1:]
        pos = rest[0] if result.axes[1:] == ("pos",) else None
        head = rest[0] if site in HEAD_SITES else None
        expected[index] = plain_cell(model, target, cache, site, layer, pos, head)
    return expected


@pytest.mark.parametrize("site", ["resid_pre", "resid_mid", "resid_post", "attn_out", "z", "k"])
def test_every_cell_equals_a_plain_forward_per_cell(zoo, site):
    model, clean_ids, corrupted_ids, clean, corrupted = zoo
    result = activation_patching(model, clean, corrupted, site=site)
    expected = plain_grid(model, result, corrupted_ids, clean_ids, site)
    assert_close(result.rewards, expected, atol=2e-5, rtol=0)
    assert result.rewards.sub(result.target_reward).abs().max() > 0.1  # something moved


@pytest.mark.parametrize("family", FAMILIES)
def test_resid_pre_equals_transformer_lens_patching_in_every_family(family):
    model = BridgeRewardModel.boot(tiny_reward_model(family))
    gen = torch.Generator().manual_seed(2)
    clean = torch.randint(6, 90, (1, 7), generator=gen)
    corrupted = clean.clone()
    corrupted[0, 3] = (clean[0, 3] + 5) % 90 + 6
    result = activation_patching(model, clean[0], corrupted[0], site="resid_pre")
    with torch.no_grad():
        _, cache = model.bridge.run_with_cache(clean)
        grid = tl_patching.get_act_patch_resid_pre(
            model.bridge, corrupted, cache, lambda out: out[0, -1, 0]
        )
    assert_close(result.rewards, grid.float(), atol=2e-5, rtol=0)
    # nothing before the changed token moves; the changed token at layer 0 restores clean
    assert_close(result.rewards[:, :3], torch.full((2, 3), result.target_reward), atol=1e-5, rtol=0)
    assert_close(result.rewards[0, 3], torch.tensor(result.source_reward), atol=1e-5, rtol=0)


def test_attribution_patching_is_the_gradient_times_the_difference(zoo):
    model, clean_ids, corrupted_ids, clean, corrupted = zoo
    result = attribution_patching(model, clean, corrupted, site="resid_pre", metric=lambda r: r)
    with torch.no_grad():
        _, cache = model.bridge.run_with_cache(clean_ids)
        _, corrupted_cache = model.bridge.run_with_cache(corrupted_ids)
    grads = {}

    def keep(name):
        def hook(grad, hook):
            grads[name] = grad.detach()

        return hook

    names = [f"blocks.{layer}.hook_resid_pre" for layer in range(model.cfg.n_layers)]
    out = model.bridge.run_with_hooks(corrupted_ids, bwd_hooks=[(n, keep(n)) for n in names])
    out[0, -1, 0].backward()
    expected = torch.stack(
        [(grads[n][0] * (cache[n][0] - corrupted_cache[n][0])).sum(-1) for n in names]
    )
    assert_close(result.values - result.baseline, expected, atol=1e-5, rtol=0)
    with pytest.raises(BridgeUnsupportedError, match="qk_fix=False"):
        attribution_patching(model, clean, corrupted, site="resid_pre", qk_fix=True)


def test_the_gated_score_patches_as_a_plain_forward_and_one_objective_is_refused():
    model = BridgeRewardModel.boot(zoo_path("multi"))
    clean = model.encode("explain how to bake bread", "the oven and the flour")
    corrupted = model.encode("explain how to bake bread", "the oven and the bomb")
    result = activation_patching(model, clean, corrupted, site="resid_pre")
    with torch.no_grad():
        _, cache = model.bridge.run_with_cache(torch.tensor([clean.ids]))
    target = torch.tensor([corrupted.ids])
    for layer, pos in [(0, 13), (1, 13), (2, 15), (2, 3)]:
        expected = plain_cell(model, target, cache, "resid_pre", layer, pos)
        assert_close(result.rewards[layer, pos], expected, atol=2e-5, rtol=0)
    assert abs(result.source_reward - result.target_reward) > 0.1
    with pytest.raises(BridgeUnsupportedError, match="objective=None"):
        activation_patching(model, clean, corrupted, site="resid_pre", objective="harmlessness")


@pytest.mark.parametrize("site", ["mlp_out", "v", "resid_pre"])
def test_noising_equals_a_plain_forward_per_cell(zoo, site):
    """Noising: the corrupted run's activation written into the clean run, cell by cell."""
    model, clean_ids, corrupted_ids, clean, corrupted = zoo
    result = activation_patching(model, clean, corrupted, site=site, mode="noising")
    expected = plain_grid(model, result, clean_ids, corrupted_ids, site)
    assert_close(result.rewards, expected, atol=2e-5, rtol=0)
