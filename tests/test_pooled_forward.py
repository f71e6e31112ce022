"""``return_type="reward"`` runs the last block at the reading positions only, when no hook can
tell: same rewards as the full forward, and the full forward whenever something looks."""

import pytest
import torch

from reward_lens_tl import HookedRewardModel, pooled_forward
from reward_lens_tl.testing import tiny_reward_model
from tests.test_fast_attention import batch_for, left_padded

APPLIES = {"llama", "qwen2", "gemma2", "gpt2", "qwen3"}  # mistral: sliding last layer; armorm: gate
FAMILIES = sorted(APPLIES | {"mistral", "armorm"})


def full_reward(model, ids, mask):
    """The reward through the whole last block: a (no-op) hook on it disables the shortcut."""
    last = model.cfg.n_layers - 1
    return model.run_with_hooks(
        ids,
        return_type="reward",
        attention_mask=mask,
        fwd_hooks=[(f"blocks.{last}.hook_mlp_out", lambda act, hook: act)],
    )


@pytest.mark.parametrize("padding", ["right", "left"])
@pytest.mark.parametrize("family", FAMILIES)
def test_pooled_last_block_equals_full_forward(family, padding):
    model = HookedRewardModel.from_pretrained(tiny_reward_model(family))
    ids, mask = batch_for(family, seed=5)
    if padding == "left":
        ids, mask = left_padded(ids, mask)
    with torch.no_grad():
        assert pooled_forward.applies(model, None, mask, {}) == (family in APPLIES)
        short, full = model.rewards(ids, mask), full_reward(model, ids, mask)
        assert not pooled_forward.applies(model, None, mask, {"past_kv_cache": object()})
    torch.testing.assert_close(short, full, atol=1e-5, rtol=0)


def test_hooks_on_the_last_block_see_every_position():
    model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    ids, mask = batch_for("llama")
    names = ["blocks.1.hook_resid_post", "ln_final.hook_normalized", "blocks.0.hook_resid_post"]
    with torch.no_grad():
        short = model.rewards(ids, mask)
        for name in names:
            out, cache = model.run_with_cache(
                ids, attention_mask=mask, return_type="reward", names_filter=name
            )
            assert cache[name].shape == (*ids.shape, model.cfg.d_model)
            torch.testing.assert_close(out, short, atol=1e-5, rtol=0)
    # an editing hook on the last block takes effect
    zero = [("blocks.1.hook_mlp_out", lambda act, hook: torch.zeros_like(act))]
    with torch.no_grad():
        edited = model.run_with_hooks(
            ids, return_type="reward", attention_mask=mask, fwd_hooks=zero
        )
    assert (edited - short).abs().max() > 1e-3


def test_gradients_through_the_shortcut():
    model = HookedRewardModel.from_pretrained(tiny_reward_model("qwen2"))
    ids, mask = batch_for("qwen2")
    grads = []
    for hooked in (False, True):
        model.zero_grad()
        reward = full_reward(model, ids, mask) if hooked else model.rewards(ids, mask, grad=True)
        reward.sum().backward()
        grads.append(model.blocks[1].mlp.W_in.grad.clone())
    torch.testing.assert_close(grads[0], grads[1], atol=1e-5, rtol=0)
