"""Sliding-window models with this package's padding (pads inside a row) on the bridge.

HF counts the window over columns, pads included; TL 3.9 counts real tokens. The bridge is
handed masks and positions over real tokens (`reward_lens_tl.bridge.windows`), so every row of a
padded batch reads as the row alone in plain HF: rewards, the residual stream at each real token,
a run resumed from a block's input, the lens and the attribution.
"""

import pytest
import torch
from torch.testing import assert_close

from tests.tl4.tl4_only import skip_unless_tl4

skip_unless_tl4()

from reward_lens_tl.attribution import direct_attribution  # noqa: E402
from reward_lens_tl.bridge import BridgeRewardModel  # noqa: E402
from reward_lens_tl.bridge.windows import bridge_inputs  # noqa: E402
from reward_lens_tl.lens import reward_lens  # noqa: E402
from reward_lens_tl.padding import hf_pad, left_pad  # noqa: E402
from reward_lens_tl.testing import tiny_reward_model  # noqa: E402

ROWS = [[90, 89, 19, 76, 89, 89, 30, 31, 44], [90, 89, 19, 76, 89], [90, 12, 13, 14, 15, 16]]


@pytest.fixture(scope="module", params=["gemma2", "mistral"])
def family(request):
    hf = tiny_reward_model(request.param)
    return hf, BridgeRewardModel.boot(hf)


@torch.no_grad()
def test_rewards_of_each_layout_equal_each_row_alone(family):
    hf, model = family
    assert hf.config.sliding_window < len(ROWS[0])  # the window matters for the longest row
    alone = torch.cat([hf(input_ids=torch.tensor([r])).logits[:, 0] for r in ROWS])
    ids, mask = left_pad(ROWS, 0)
    assert bridge_inputs(model.bridge, mask).keys() == {"attention_mask", "position_ids"}
    assert_close(model.rewards(ids, mask), alone, atol=1e-5, rtol=0)
    assert_close(model.rewards(ids), alone, atol=1e-5, rtol=0)  # the mask inferred
    for side in ("left", "right"):  # HF's layouts pass through unchanged
        ids_hf, mask_hf = hf_pad(ROWS, 0, side)
        assert bridge_inputs(model.bridge, mask_hf) == {"attention_mask": mask_hf}
        assert_close(model.rewards(ids_hf, mask_hf), alone, atol=1e-5, rtol=0)


@torch.no_grad()
def test_the_residual_stream_lens_and_attribution_read_as_each_row_alone(family):
    hf, model = family
    ids, mask = left_pad(ROWS, 0)
    _, cache = model.run_with_cache(ids, attention_mask=mask)
    for i, row in enumerate(ROWS):
        hidden = hf(input_ids=torch.tensor([row]), output_hidden_states=True).hidden_states
        real = mask[i] != 0
        for layer in range(model.cfg.n_layers):
            got = cache[f"blocks.{layer}.hook_resid_pre"][i][real]
            assert_close(got, hidden[layer][0], atol=1e-4, rtol=0)
    rewards = model.rewards(ids, mask)
    assert_close(
        reward_lens(model, ids, attention_mask=mask).values[-1], rewards, atol=1e-5, rtol=0
    )
    attr = direct_attribution(model, ids, attention_mask=mask)
    assert_close(attr.values.sum(0) + attr.head_bias, rewards, atol=1e-4, rtol=0)
    # resumed from a block's input: the same rewards
    resid = cache["blocks.1.hook_resid_pre"]
    resumed = model(resid, return_type="reward", start_at_layer=1, tokens=ids, attention_mask=mask)
    assert_close(resumed, rewards, atol=1e-5, rtol=0)
