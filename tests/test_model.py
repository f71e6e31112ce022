"""HookedRewardModel behaves like a HookedTransformer whose unembed is the reward head."""

import pytest
import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.testing import random_batch, tiny_reward_model


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def model(request):
    return HookedRewardModel.from_pretrained(tiny_reward_model(request.param))


def test_per_position_rewards_and_pooling(model):
    ids, mask = random_batch(3, [7, 4, 9], seed=1)
    per_pos = model(ids, attention_mask=mask)
    assert per_pos.shape == (3, 9, 1)
    pooled = per_pos[torch.arange(3), model.pool_positions(ids), 0]
    assert torch.allclose(pooled, model.rewards(ids, mask), atol=1e-6)


def test_head_aliases(model):
    assert model.W_R is model.W_U and model.b_R is model.b_U
    assert model.w_r.shape == (model.cfg.d_model,)


def test_logit_lens_identity(model):
    """accumulated_resid(apply_ln=True) @ W_U + b_U: the last layer is the reward."""
    ids, mask = random_batch(2, [8, 5], seed=2)
    reward, cache = model.run_with_cache(ids, attention_mask=mask, return_type="reward")
    pos = model.pool_positions(ids)
    stack = cache.accumulated_resid(apply_ln=True)  # [layer+1, batch, pos, d_model]
    lens = stack[:, torch.arange(2), pos] @ model.W_U + model.b_U
    assert lens.shape == (model.cfg.n_layers + 1, 2, 1)
    assert (lens[-1, :, 0] - reward).abs().max() <= 1e-5
    assert "hook_reward" in cache


def test_hook_reward_fires_and_edits(model):
    ids, mask = random_batch(2, [8, 5], seed=3)
    base = model.rewards(ids, mask)
    doubled = model.run_with_hooks(
        ids,
        return_type="reward",
        attention_mask=mask,
        fwd_hooks=[("hook_reward", lambda act, hook: act * 2)],
    )
    assert torch.allclose(doubled, 2 * base, atol=1e-6)
    assert all(len(h.fwd_hooks) == 0 for h in model.hook_dict.values())


def test_names_filter_caches_only_requested(model):
    ids, _ = random_batch(1, [6])
    _, cache = model.run_with_cache(ids, names_filter=lambda n: n.endswith("hook_resid_post"))
    assert set(cache.keys()) == {f"blocks.{i}.hook_resid_post" for i in range(model.cfg.n_layers)}


def test_start_at_layer_reward(model):
    ids, mask = random_batch(2, [8, 5], seed=4)
    _, cache = model.run_with_cache(
        ids, attention_mask=mask, names_filter="blocks.1.hook_resid_pre"
    )
    resumed = model(
        cache["blocks.1.hook_resid_pre"],
        "reward",
        start_at_layer=1,
        tokens=ids,
        attention_mask=mask,
    )
    assert torch.allclose(resumed, model.rewards(ids, mask), atol=1e-5)


def test_sae_lens_splicing_with_error_term_keeps_reward():
    from sae_lens import SAE, TopKSAEConfig
    from sae_lens.saes.sae import SAEMetadata

    model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    hook = "blocks.1.hook_resid_post"
    sae = SAE.from_dict(
        TopKSAEConfig(d_in=64, d_sae=128, k=8, metadata=SAEMetadata(hook_name=hook)).to_dict()
    )
    ids, mask = random_batch(2, [8, 5], seed=5)
    base = model.rewards(ids, mask)
    with_sae = model.run_with_saes(
        ids, saes=[sae], use_error_term=True, return_type="reward", attention_mask=mask
    )
    without = model.run_with_saes(
        ids, saes=[sae], use_error_term=False, return_type="reward", attention_mask=mask
    )
    assert (with_sae - base).abs().max() <= 1e-5
    assert (without - base).abs().max() > 1e-4  # a random SAE does reconstruct badly


def test_add_sae_with_unknown_hook_raises():
    from sae_lens import SAE, TopKSAEConfig
    from sae_lens.saes.sae import SAEMetadata

    from reward_lens_tl.errors import UnknownHookError

    model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    meta = SAEMetadata(hook_name="blocks.7.hook_resid_post")
    sae = SAE.from_dict(TopKSAEConfig(d_in=64, d_sae=128, k=8, metadata=meta).to_dict())
    with pytest.raises(UnknownHookError, match="blocks.7.hook_resid_post"):
        model.add_sae(sae)
    assert not model.acts_to_saes


# ---- model.rewards is a plain result: no autograd graph unless asked for ----------------------
def test_rewards_track_no_gradients_and_equal_the_forward(model):
    """``rewards`` returns a tensor without a graph (``float()`` does not warn), equal to the
    reward forward's and to the per-position rewards read at each row's pooling position."""
    import warnings

    from torch.testing import assert_close

    ids, mask = random_batch(3, [7, 4, 9], seed=3)
    rewards = model.rewards(ids, mask)
    assert not rewards.requires_grad and rewards.grad_fn is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns on float() of a tensor that needs grad
        first = float(rewards[0])
    forward = model(ids, "reward", attention_mask=mask)
    assert forward.requires_grad  # the forward keeps TL's autograd behaviour
    assert_close(rewards, forward.detach(), rtol=0, atol=0)
    per_pos = model(ids, attention_mask=mask).detach()[torch.arange(3), model.pool_positions(ids)]
    assert_close(rewards, per_pos[:, 0], rtol=1e-5, atol=1e-6)
    assert first == float(per_pos[0, 0]) or abs(first - float(per_pos[0, 0])) <= 1e-6
    objectives = model.objective_rewards(ids, mask)
    assert not objectives.requires_grad
    assert_close(objectives[:, 0], rewards, rtol=1e-6, atol=1e-6)


def test_rewards_keep_the_graph_when_asked(model):
    """``grad=True`` gives the forward's differentiable reward; the gradient of the reward with
    respect to the head's bias is 1 per row (an independent check that the graph is real)."""
    from torch.testing import assert_close

    ids, mask = random_batch(2, [6, 8], seed=4)
    model.zero_grad(set_to_none=True)
    rewards = model.rewards(ids, mask, grad=True)
    assert rewards.requires_grad
    assert_close(rewards.detach(), model.rewards(ids, mask))
    rewards.sum().backward()
    assert_close(model.b_U.grad, torch.full_like(model.b_U, 2.0))
    model.zero_grad(set_to_none=True)
    with torch.no_grad():  # an outer no_grad wins
        assert not model.rewards(ids, mask, grad=True).requires_grad


def test_score_is_a_plain_number(zoo_scalar):
    zoo = zoo_scalar
    score = zoo.score("explain how to bake bread", "the oven and the flour")
    assert score.ndim == 0 and not score.requires_grad
    ids = torch.tensor([zoo.encode("explain how to bake bread", "the oven and the flour").ids])
    torch.testing.assert_close(score, zoo.rewards(ids)[0])
