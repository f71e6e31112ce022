"""TransformerLens's own activation patching on the reward, checked against a plain-torch patch."""

import torch
from torch.testing import assert_close

from tests.tl4.tl4_only import skip_unless_tl4

skip_unless_tl4()

from transformer_lens import patching  # noqa: E402

from reward_lens_tl.bridge import boot_reward_bridge  # noqa: E402
from reward_lens_tl.zoo import ConversationTask, zoo_path  # noqa: E402


def test_resid_pre_patching_on_the_reward_equals_a_plain_torch_patch():
    bridge = boot_reward_bridge(zoo_path("scalar"))
    pair = ConversationTask().contrast_pairs("harmful", 1, seed=3)[0]
    clean = torch.tensor([pair.edited.input_ids])
    corrupted = torch.tensor([pair.base.input_ids])
    assert clean.shape == corrupted.shape  # a swap: the rows stay aligned

    def reward(logits):  # no padding: the last token is read
        return logits[0, -1, 0]

    with torch.no_grad():
        _, clean_cache = bridge.run_with_cache(clean)
        grid = patching.get_act_patch_resid_pre(bridge, corrupted, clean_cache, reward)
    assert grid.shape == (bridge.cfg.n_layers, clean.shape[1])
    with torch.no_grad():
        clean_reward, corrupted_reward = reward(bridge(clean)), reward(bridge(corrupted))
    layer, pos = 1, pair.edited_positions[0]

    # the same cell with a plain torch forward hook on the hook point's module
    def patch(module, inputs, output):
        output = output.clone()
        output[:, pos] = clean_cache[f"blocks.{layer}.hook_resid_pre"][:, pos]
        return output

    handle = bridge.hook_dict[f"blocks.{layer}.hook_resid_pre"].register_forward_hook(patch)
    try:
        with torch.no_grad():
            expected = reward(bridge(corrupted))
    finally:
        handle.remove()
    assert_close(grid[layer, pos], expected, atol=1e-5, rtol=0)
    # the harmful word's position carries the whole effect at layer 0 (nothing has moved yet)
    assert_close(grid[0, pos], clean_reward, atol=1e-5, rtol=0)
    untouched = [p for p in range(clean.shape[1]) if clean[0, p] == corrupted[0, p]]
    assert_close(grid[0, untouched], corrupted_reward.expand(len(untouched)), atol=1e-5, rtol=0)
