"""`activation_patching`: equality with TransformerLens's patching sweeps, and the identities of
patching a run into itself or a whole layer."""

import pytest
import torch
from transformer_lens import patching as tl_patching

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.patching import (
    activation_patching,
)
from reward_lens_tl.testing import tiny_reward_model
from tests.patching.conftest import pair

TL_SWEEPS = [
    ("resid_pre", True, tl_patching.get_act_patch_resid_pre),
    ("resid_mid", True, tl_patching.get_act_patch_resid_mid),
    ("attn_out", True, tl_patching.get_act_patch_attn_out),
    ("mlp_out", True, tl_patching.get_act_patch_mlp_out),
    ("z", True, tl_patching.get_act_patch_attn_head_out_by_pos),
    ("z", False, tl_patching.get_act_patch_attn_head_out_all_pos),
    ("k", True, tl_patching.get_act_patch_attn_head_k_by_pos),
]


@pytest.mark.parametrize("site,by_position,tl_fn", TL_SWEEPS)
def test_equals_transformer_lens(model, site, by_position, tl_fn):
    clean, corrupted = pair(length=7)
    _, clean_cache = model.run_with_cache(clean[None])
    with torch.no_grad():
        expected = tl_fn(model, corrupted[None], clean_cache, lambda logits: logits[0, -1, 0])
    got = activation_patching(
        model,
        clean,
        corrupted,
        site=site,
        by_position=by_position,
        alignment="exact",
        metric=lambda r: r,
        chunk_size=5,
    )
    assert got.shape == tuple(expected.shape)
    assert (got.values - expected).abs().max() <= 1e-5
    if site in ("resid_pre", "z"):  # the unshortcut path agrees as well
        plain = activation_patching(
            model,
            clean,
            corrupted,
            site=site,
            by_position=by_position,
            alignment="exact",
            metric=lambda r: r,
            reuse_prefix=False,
        )
        assert (plain.values - expected).abs().max() <= 1e-5


def test_multi_objective_gated_model_equals_transformer_lens():
    """A gated head's logits are its gated score (what TL's patching reads); one objective is
    checked against the same patch written by hand (``return_type="objectives"``)."""
    model = HookedRewardModel.from_pretrained(tiny_reward_model("armorm"))
    clean, corrupted = pair(seed=2)
    clean[3:5] = corrupted[3:5] = torch.tensor([3, 4])  # gating pattern
    _, clean_cache = model.run_with_cache(clean[None])
    with torch.no_grad():
        expected = tl_patching.get_act_patch_resid_pre(
            model, corrupted[None], clean_cache, lambda logits: logits[0, -1, 0]
        )
    got = activation_patching(model, clean, corrupted, alignment="exact", metric=lambda r: r)
    assert (got.values - expected).abs().max() <= 1e-5
    harmless = activation_patching(
        model, clean, corrupted, alignment="exact", objective="harmless", metric=lambda r: r
    )
    for layer, pos in [(0, 2), (1, 6), (1, 8)]:
        name = f"blocks.{layer}.hook_resid_pre"

        def write(act, hook, pos=pos):
            act = act.clone()
            act[0, pos] = clean_cache[hook.name][0, pos]
            return act

        with torch.no_grad():
            by_hand = model.run_with_hooks(
                corrupted[None], return_type="objectives", fwd_hooks=[(name, write)]
            )
        assert abs(float(harmless.values[layer, pos]) - float(by_hand[0, -1, 1])) <= 1e-5


def test_clean_into_clean_changes_nothing(model):
    clean, _ = pair()
    with torch.no_grad():
        reward = float(model.rewards(clean[None])[0])
    for site in ("resid_pre", "z", "mlp_out", "resid_post"):
        res = activation_patching(model, clean, clean, site=site, metric=lambda r: r)
        assert (res.rewards - reward).abs().max() <= 1e-5


def test_first_layer_all_positions_reproduces_clean(model):
    clean, corrupted = pair()
    with torch.no_grad():
        r_clean = float(model.rewards(clean[None])[0])
        r_corrupted = float(model.rewards(corrupted[None])[0])
    kw = dict(site="resid_pre", by_position=False, layers=[0], alignment="exact")
    denoised = activation_patching(model, clean, corrupted, mode="denoising", **kw)
    noised = activation_patching(model, clean, corrupted, mode="noising", **kw)
    assert abs(float(denoised.rewards[0]) - r_clean) <= 1e-5
    assert abs(float(noised.rewards[0]) - r_corrupted) <= 1e-5
    # both default metrics read 1 here: the patch moves the reward all the way to the source
    assert abs(float(denoised.values[0]) - 1) <= 1e-4 and abs(float(noised.values[0]) - 1) <= 1e-4
    assert denoised.target_reward == pytest.approx(r_corrupted, abs=1e-6)
    assert noised.target_reward == pytest.approx(r_clean, abs=1e-6)
