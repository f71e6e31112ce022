"""An edit at `hook_resid_mid` on the bridge reaches the residual stream, as on TL 3.9.

TL 4.3 aliases `hook_resid_mid` to the second norm's input, which the HF layer does not add back
into the residual (`reward_lens_tl.bridge.residual`). Each check here is against plain HF: the
same edit written as a torch forward hook on the module whose output is added to the residual
just before `resid_mid` (the attention, or Gemma-2's post-attention norm).
"""

import pytest
import torch
from torch.testing import assert_close

from tests.tl4.tl4_only import FAMILIES, skip_unless_tl4

skip_unless_tl4()

from transformer_lens import patching  # noqa: E402

from reward_lens_tl.bridge import BridgeRewardModel, boot_reward_bridge  # noqa: E402
from reward_lens_tl.padding import hf_last_non_pad  # noqa: E402
from reward_lens_tl.testing import random_batch, tiny_reward_model  # noqa: E402
from reward_lens_tl.zoo import ConversationTask, load_model, zoo_path  # noqa: E402


def _writer(hf, layer: int):
    """The HF module whose output is added to the residual right before `resid_mid`."""
    block = hf.model.layers[layer] if hasattr(hf, "model") else hf.transformer.h[layer]
    for name in ("post_attention_layernorm", "self_attn", "attn"):
        if name == "post_attention_layernorm" and not hasattr(block, "pre_feedforward_layernorm"):
            continue  # Llama's post_attention_layernorm is the MLP's pre-norm
        if hasattr(block, name):
            return getattr(block, name)
    raise AssertionError(type(block).__name__)


def _hf_rewards_with_shift(hf, ids, mask, layer, delta):
    """HF's rewards with `delta` added to the residual stream at `resid_mid` of `layer`."""

    def shift(module, inputs, output):
        if isinstance(output, tuple):
            return (output[0] + delta, *output[1:])
        return output + delta

    handle = _writer(hf, layer).register_forward_hook(shift)
    try:
        logits = hf(input_ids=ids, attention_mask=mask).logits
    finally:
        handle.remove()
    return logits[:, 0]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.filterwarnings("ignore::reward_lens_tl.padding.ReadingPositionWarning")
@torch.no_grad()
def test_a_returned_edit_at_resid_mid_moves_the_reward_as_in_hf(family):  # right padded
    hf = tiny_reward_model(family)
    model = BridgeRewardModel.boot(hf)
    ids, mask = random_batch(2, [7, 5], padding_side="right")
    delta = torch.randn(hf.config.hidden_size, generator=torch.Generator().manual_seed(1))
    for layer in range(model.cfg.n_layers):
        expected = _hf_rewards_with_shift(hf, ids, mask, layer, delta)
        out = model.run_with_hooks(
            ids,
            attention_mask=mask,
            fwd_hooks=[(f"blocks.{layer}.hook_resid_mid", lambda x, hook: x + delta)],
        )
        got = out[torch.arange(2), hf_last_non_pad(ids, model.pad_token_id), 0]
        assert_close(got, expected, atol=1e-4, rtol=0)
        assert not torch.allclose(got, model.rewards(ids, mask), atol=1e-3)  # it did move


@torch.no_grad()
def test_in_place_edits_filters_and_the_context_manager_reach_the_residual():
    model = BridgeRewardModel.boot(zoo_path("scalar"))
    ids = torch.tensor([[1, 4, 27, 71, 6, 5, 40, 6, 2]])
    expected = _hf_rewards_with_shift(load_model("scalar"), ids, None, 1, 5.0)

    def add_in_place(x, hook):
        x += 5.0

    def add(x, hook):
        return x + 5.0

    by_filter = model.run_with_hooks(
        ids, fwd_hooks=[(lambda name: name == "blocks.1.hook_resid_mid", add)]
    )
    in_place = model.run_with_hooks(ids, fwd_hooks=[("blocks.1.hook_resid_mid", add_in_place)])
    with model.hooks(fwd_hooks=[("blocks.1.ln2.hook_in", add)]):  # the bridge's own name
        in_context = model.bridge(ids)
    for out in (by_filter, in_place, in_context):
        assert_close(out[:, -1, 0], expected, atol=1e-4, rtol=0)
    assert_close(model.rewards(ids), load_model("scalar")(input_ids=ids).logits[:, 0])


def test_transformer_lens_resid_mid_patching_restores_and_gradients_flow():
    """TL's `get_act_patch_resid_mid` on the raw bridge: patching every position restores the
    clean reward (it did not before: the patch never reached the residual); the gradient at
    `resid_mid` equals the gradient at `hook_attn_out` (resid_mid = resid_pre + attn_out)."""
    bridge = boot_reward_bridge(zoo_path("scalar"))
    pair = ConversationTask().contrast_pairs("harmful", 1, seed=3)[0]
    clean = torch.tensor([pair.edited.input_ids])
    corrupted = torch.tensor([pair.base.input_ids])

    def reward(logits):
        return logits[0, -1, 0]

    with torch.no_grad():
        _, clean_cache = bridge.run_with_cache(clean)
        grid = patching.get_act_patch_resid_mid(bridge, corrupted, clean_cache, reward)
        clean_reward, corrupted_reward = reward(bridge(clean)), reward(bridge(corrupted))
    assert abs(float(clean_reward - corrupted_reward)) > 1.0
    # the positions where the pair is equal and that nothing earlier differs from: no effect
    first = pair.edited_positions[0]
    assert_close(grid[:, :first], corrupted_reward.expand(3, first), atol=1e-4, rtol=0)
    assert grid[:, first:].sub(corrupted_reward).abs().max() > 0.5

    def patch_all(layer):
        def hook(x, hook):
            return clean_cache[f"blocks.{layer}.hook_resid_mid"]

        return hook

    with torch.no_grad():
        for layer in range(bridge.cfg.n_layers):
            out = bridge.run_with_hooks(
                corrupted, fwd_hooks=[(f"blocks.{layer}.hook_resid_mid", patch_all(layer))]
            )
            assert_close(reward(out), clean_reward, atol=1e-4, rtol=0)

    grads = {}

    def keep(name):
        def hook(grad, hook):
            grads[name] = grad.detach().clone()

        return hook

    names = ["blocks.1.hook_resid_mid", "blocks.1.hook_attn_out"]
    out = bridge.run_with_hooks(corrupted, bwd_hooks=[(n, keep(n)) for n in names])
    reward(out).backward()
    assert grads[names[0]].abs().max() > 0
    assert_close(grads[names[0]], grads[names[1]], atol=1e-6, rtol=0)
