"""Implicit-reward attribution: the parts sum exactly to the implicit reward, the components are a
reward model's, the margin over pairs, and refusals (soft-capped logits, hooks after errors)."""

import pytest
import torch

from reward_lens_tl.implicit import (
    ImplicitRewardModel,
    NonlinearUnembedError,
    implicit_attribution,
    load_causal_lm,
    pair_implicit_attribution,
)
from reward_lens_tl.inputs import EncodedConversation, as_encoded
from reward_lens_tl.zoo import load_task
from tests.figures import check_figure
from tests.implicit.conftest import tiny_causal


@pytest.mark.parametrize("lse", ["term", "expected"])
@pytest.mark.parametrize("heads", [True, False])
def test_attribution_parts_sum_exactly(irm, examples, lse, heads):
    ids, attention, resp = irm.batch([as_encoded(ex) for ex in examples[:6]])
    attr = implicit_attribution(irm, ids, resp, attention, lse=lse, heads=heads)
    assert attr.linear_error() < 1e-4  # parts + head bias = linear part (from logits)
    assert attr.completeness_error() < 1e-4  # + nonlinear + reference = implicit reward
    assert (attr.rewards - irm.rewards(ids, resp, attention)).abs().max() < 1e-4
    if lse == "term":  # the linear part is β Σ logit of the taken tokens
        with torch.no_grad():
            logits = irm.policy(ids, attention_mask=attention)
        taken = logits[:, :-1].gather(-1, ids[:, 1:, None])[..., 0]
        expected = 0.1 * (taken * resp[:, 1:]).sum(-1)
        assert (attr.linear.rewards - expected).abs().max() < 1e-4


@pytest.mark.parametrize("heads", [True, False])
def test_attribution_components_are_a_reward_models(irm, examples, heads):
    """The implicit split walks the components as a reward model's attribution does, so its
    rows carry the same components, with TransformerLens's names."""
    from reward_lens_tl import HookedRewardModel
    from reward_lens_tl.attribution import direct_attribution
    from reward_lens_tl.testing import random_batch, tiny_reward_model

    ids, attention, resp = irm.batch([as_encoded(ex) for ex in examples[:2]])
    linear = implicit_attribution(irm, ids, resp, attention, heads=heads).linear
    n_layers, n_heads = irm.cfg.n_layers, irm.cfg.n_heads
    expected = ["embed"]
    for layer in range(n_layers):
        attn = [f"L{layer}H{h}" for h in range(n_heads)] if heads else [f"{layer}_attn_out"]
        expected += [*attn, f"{layer}_mlp_out"]
    assert list(linear.tl_labels) == [*expected, "bias"]
    rm = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))  # 2 layers, as the policy
    assert (rm.cfg.n_layers, rm.cfg.n_heads) == (n_layers, n_heads)
    reward = direct_attribution(rm, *random_batch(1, [5]), heads=heads)
    assert reward.components == linear.components


def test_attribution_exact_with_layernorm_policy():
    policy, reference = tiny_causal("gpt2", 0), tiny_causal("gpt2", 1)
    irm = ImplicitRewardModel(load_causal_lm(policy), load_causal_lm(reference), beta=0.5)
    encs = [EncodedConversation(tuple(range(3, 3 + n)), 4) for n in (9, 12)]
    ids, attention, resp = irm.batch(encs)
    for lse in ("term", "expected"):
        attr = implicit_attribution(irm, ids, resp, attention, lse=lse)
        assert attr.linear_error() < 1e-4 and attr.completeness_error() < 1e-4


def test_margin_attribution_and_frame(irm):
    pairs = load_task().task.contrast_pairs("harmful", 6, seed=2)
    margin = pair_implicit_attribution(irm, pairs, batch_size=4).margin
    chosen, rejected = irm.pair_rewards(pairs)
    assert (margin.rewards - (chosen - rejected)).abs().max() < 1e-4
    assert margin.completeness_error() < 1e-4
    frame = margin.to_dataframe()
    assert set(frame["component"]) >= {"embed", "mlp0", "nonlinear", "reference", "head_bias"}
    assert margin.top_k(3)[0][0] in margin.labels
    fig = check_figure(margin.plot(k=3), static=margin.plot(k=3, backend="matplotlib"))
    terms = [(name, float(t.mean())) for name, t in margin.terms().items()][::-1]
    shown = [*margin.top_k(3), *terms]  # the top components, then the three terms
    assert list(fig.layout.yaxis.ticktext) == [label for label, _ in shown]
    assert fig.data[0].x.tolist() == pytest.approx([v for _, v in shown])
    pair = pair_implicit_attribution(irm, pairs[:2])
    check_figure(pair.plot(k=3), static=pair.plot(k=3, backend="matplotlib"))


def test_attribution_refuses_soft_capped_logits():
    policy, reference = tiny_causal("gemma2", 0), tiny_causal("gemma2", 1)
    irm = ImplicitRewardModel(load_causal_lm(policy), load_causal_lm(reference), beta=0.1)
    ids, attention, resp = irm.batch([EncodedConversation(tuple(range(3, 12)), 4)])
    with pytest.raises(NonlinearUnembedError, match="soft-caps"):
        implicit_attribution(irm, ids, resp, attention)


def test_no_hook_left_after_an_error(irm):
    ids, attention, resp = irm.batch([irm.encode("how bake bread", "soup")])

    def boom(act, hook):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        implicit_attribution(irm, ids, resp, attention, fwd_hooks=[("blocks.0.hook_mlp_out", boom)])
    assert all(not hp.fwd_hooks for hp in irm.policy.hook_dict.values())
