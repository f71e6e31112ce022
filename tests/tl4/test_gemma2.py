"""Direct attribution of a post-norm model (Gemma-2) on the bridge: `BridgeRewardModel`'s `cfg` and
`blocks` views (`reward_lens_tl/bridge/post_norms.py`) make `direct_attribution`,
`pair_attribution` and `token_attribution` add up to the reward, give TransformerLens 3.9's
numbers, and give every part as plain HF weights read through both frozen norm scales."""

import pytest
import torch
from torch.testing import assert_close

from tests.tl4.tl4_only import skip_unless_tl4

skip_unless_tl4()

from reward_lens_tl.attribution import direct_attribution, pair_attribution  # noqa: E402
from reward_lens_tl.bridge import BridgeRewardModel  # noqa: E402
from reward_lens_tl.inputs import EncodedConversation  # noqa: E402
from reward_lens_tl.testing import random_batch, tiny_reward_model  # noqa: E402
from reward_lens_tl.token_view import token_attribution  # noqa: E402

# What TransformerLens 3.9's `HookedRewardModel.from_pretrained(tiny_reward_model("gemma2"))`
# gives on the inputs below (`ids_and_mask`, `pairs`), recorded with `.venv` (TL 3.9.0) by a
# script that builds the same inputs and prints `direct_attribution(model, ids, mask).values`,
# `pair_attribution(model, pairs, batch_size=1)` (chosen rewards, margin values) and
# `token_attribution(model, pairs[0][0]).values`, each rounded to 6 decimals. The inputs are
# right-padded or unpadded (pads inside a row are covered by test_windows.py).
LABELS = ("embed", "L0H0", "L0H1", "L0H2", "L0H3", "mlp0", "L1H0", "L1H1", "L1H2", "L1H3", "mlp1")
TL39_PARTS = [
    [-0.072233, -0.017145], [-0.014359, 0.085964], [0.068143, 0.042596], [0.094148, -0.011888],
    [-0.010075, -0.037594], [-0.042496, -0.011584], [0.003116, 0.152149], [-0.047802, 0.093949],
    [0.053311, 0.104347], [-0.016264, -0.004776], [0.206968, -0.100972], [0.0, 0.0],
]  # fmt: skip
TL39_REWARDS = [0.222457, 0.295045]
TL39_CHOSEN = [-0.448711, 0.17358]
TL39_MARGIN_PARTS = [
    [-0.08505, 0.110228], [0.020581, -0.13961], [-0.053356, 0.145499], [0.12063, 0.015923],
    [-0.017791, 0.175472], [0.278115, 0.097212], [0.053479, 0.034966], [-0.262896, 0.106412],
    [-0.022528, -0.033492], [-0.195073, -0.121498], [-0.13026, 0.060985], [0.0, 0.0],
]  # fmt: skip
TL39_TOKENS = [
    -0.009532, -0.031772, -0.039537, -0.017507, -0.024747,
    -0.027749, -0.025245, -0.099037, 0.056625, -0.23021,
]  # fmt: skip


def ids_and_mask():
    return random_batch(2, [9, 6], seed=3, low=6, padding_side="right")


def pairs():
    """Two (chosen, rejected) pairs, each side as long as the other (10 and 7 tokens)."""
    rows, mask = random_batch(4, [10, 10, 7, 7], seed=4, low=6, padding_side="right")
    encs = [
        EncodedConversation(ids=tuple(rows[i, : int(mask[i].sum())].tolist()), response_start=3)
        for i in range(4)
    ]
    return [(encs[0], encs[1]), (encs[2], encs[3])]


@pytest.fixture(scope="module")
def model():
    return BridgeRewardModel.boot(tiny_reward_model("gemma2"))


def test_direct_attribution_adds_up_and_gives_the_default_backends_numbers(model):
    ids, mask = ids_and_mask()
    attr = direct_attribution(model, ids, mask)
    assert attr.labels == (*LABELS, "bias")
    assert attr.completeness_error() < 1e-4
    assert_close(attr.values, torch.tensor(TL39_PARTS), atol=1e-4, rtol=0)
    assert_close(attr.rewards, torch.tensor(TL39_REWARDS), atol=1e-5, rtol=0)
    by_layer = direct_attribution(model, ids, mask, heads=False, neurons=True)
    assert by_layer.completeness_error() < 1e-4
    for layer in range(2):  # attn{l} is its heads' sum; the neurons sum to mlp{l}
        heads = [attr[f"L{layer}H{h}"] for h in range(4)]
        assert_close(by_layer[f"attn{layer}"], sum(heads), atol=1e-5, rtol=0)
        assert_close(by_layer.neurons[layer].sum(-1), attr[f"mlp{layer}"], atol=1e-5, rtol=0)


def test_every_part_is_hf_weights_read_through_the_frozen_norm_scales(model):
    """Recomputed from a separate HF copy in plain torch: a head's part is
    `z_h W_O,h · (1 + g_post) / s_post · (1 + g_final) w_score / s_final` at the reward position
    (Gemma's norms apply `1 + g`; `s` is each norm's input RMS there), an MLP's the same with its
    down-projection, the embedding's its residual read along the final direction; they sum to HF's
    reward."""
    hf = tiny_reward_model("gemma2")
    ids, mask = ids_and_mask()
    seen = {}

    def keep(name):
        return lambda _module, args: seen.__setitem__(name, args[0].detach())

    body = hf.model
    handles = [body.layers[0].register_forward_pre_hook(keep("embed"))]
    handles.append(body.norm.register_forward_pre_hook(keep("final")))
    for i, layer in enumerate(body.layers):
        handles += [
            layer.self_attn.o_proj.register_forward_pre_hook(keep(f"z{i}")),
            layer.post_attention_layernorm.register_forward_pre_hook(keep(f"attn{i}")),
            layer.mlp.down_proj.register_forward_pre_hook(keep(f"post{i}")),
            layer.post_feedforward_layernorm.register_forward_pre_hook(keep(f"mlp{i}")),
        ]
    with torch.no_grad():
        hf_rewards = hf(input_ids=ids, attention_mask=mask).logits[:, 0]
    for handle in handles:
        handle.remove()
    pos, rows, eps = mask.sum(1) - 1, torch.arange(2), hf.config.rms_norm_eps

    def at(name):
        return seen[name][rows, pos]  # [batch, width]

    def rms(name):
        return (at(name).pow(2).mean(-1, keepdim=True) + eps).sqrt()

    u = (1 + body.norm.weight) * hf.score.weight[0] / rms("final")  # [batch, d_model]
    expected = {"embed": (at("embed") * u).sum(-1)}
    d_head = hf.config.head_dim
    for i, layer in enumerate(body.layers):
        u_attn = u * (1 + layer.post_attention_layernorm.weight) / rms(f"attn{i}")
        w_o = layer.self_attn.o_proj.weight  # [d_model, head * d_head]
        for h in range(hf.config.num_attention_heads):
            cols = slice(h * d_head, (h + 1) * d_head)
            out = at(f"z{i}")[:, cols] @ w_o[:, cols].T
            expected[f"L{i}H{h}"] = (out * u_attn).sum(-1)
        u_mlp = u * (1 + layer.post_feedforward_layernorm.weight) / rms(f"mlp{i}")
        expected[f"mlp{i}"] = ((at(f"post{i}") @ layer.mlp.down_proj.weight.T) * u_mlp).sum(-1)
    expected = {k: v.detach() for k, v in expected.items()}
    assert_close(sum(expected.values()), hf_rewards, atol=1e-5, rtol=0)  # the recomputation
    attr = direct_attribution(model, ids, mask)
    for label in LABELS:
        assert_close(attr[label], expected[label], atol=1e-5, rtol=0, msg=label)
    assert_close(attr.rewards, hf_rewards, atol=1e-5, rtol=0)


def test_pair_and_token_attribution_give_the_default_backends_numbers(model):
    result = pair_attribution(model, pairs(), batch_size=1)
    assert_close(result.chosen.rewards, torch.tensor(TL39_CHOSEN), atol=1e-5, rtol=0)
    assert_close(result.margin.values, torch.tensor(TL39_MARGIN_PARTS), atol=1e-4, rtol=0)
    for side in (result.chosen, result.rejected, result.margin):
        assert side.completeness_error() < 1e-4
    view = token_attribution(model, pairs()[0][0])
    assert_close(view.values, torch.tensor(TL39_TOKENS), atol=1e-4, rtol=0)
    assert view.completeness_error() < 1e-4
    assert view.reward == pytest.approx(TL39_CHOSEN[0], abs=1e-5)


def test_the_views_read_the_post_norms_as_3_9_does_and_leave_the_bridge_alone(model):
    hf = tiny_reward_model("gemma2")
    assert model.cfg.use_normalization_before_and_after is True
    assert model.bridge.cfg.use_normalization_before_and_after is False  # not modified
    assert model.cfg.n_layers == 2 and model.cfg.rmsnorm_uses_offset  # the rest: the bridge's
    assert len(model.blocks) == 2 and len(list(model.blocks)) == 2
    for which, hf_name in [("ln1_post", "post_attention_layernorm"),
                           ("ln2_post", "post_feedforward_layernorm")]:  # fmt: skip
        stored = getattr(hf.model.layers[1], hf_name).weight
        assert_close(getattr(model.blocks[-1], which).w, 1 + stored, atol=0, rtol=0)
        assert_close(getattr(model.bridge.blocks[1], which).w, stored, atol=0, rtol=0)
    assert model.blocks[0].attn is model.bridge.blocks[0].attn
    llama = BridgeRewardModel.boot(tiny_reward_model("llama"))  # pre-norm: the bridge's own
    assert llama.blocks is llama.bridge.blocks and llama.cfg is llama.bridge.cfg
