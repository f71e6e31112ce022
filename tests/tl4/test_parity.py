"""Rewards on the bridge equal HF's own forward in every family the backend boots."""

import pytest
import torch
import transformers
from torch.testing import assert_close

from tests.tl4.tl4_only import FAMILIES, skip_unless_tl4

skip_unless_tl4()

from reward_lens_tl.bridge import boot_reward_bridge, bridge_rewards  # noqa: E402
from reward_lens_tl.checkpoint import SAFE_KWARGS  # noqa: E402
from reward_lens_tl.testing import random_batch  # noqa: E402

TOL = dict(atol=1e-4, rtol=0)
LENGTHS = [9, 6]


def hf_model(path):
    config = transformers.AutoConfig.from_pretrained(path, **SAFE_KWARGS)
    cls = getattr(transformers, config.architectures[0])
    return cls.from_pretrained(path, use_safetensors=True, **SAFE_KWARGS).eval()


def one_by_one(hf, ids, mask):
    """HF's reward of each row alone (no padding at all): the ground truth of a batch."""
    rows = [ids[i][mask[i].bool()][None] for i in range(ids.shape[0])]
    return torch.stack([hf(input_ids=row).logits[0, 0] for row in rows])


@pytest.fixture(scope="module", params=FAMILIES)
def family(request, checkpoints):
    path = checkpoints[request.param]
    return request.param, hf_model(path), boot_reward_bridge(path)


@torch.no_grad()
@pytest.mark.parametrize("padding_side", ["right", "leading"])
def test_batched_rewards_equal_hf_one_by_one(family, padding_side):
    name, hf, bridge = family
    ids, mask = random_batch(2, LENGTHS, padding_side=padding_side)
    expected = one_by_one(hf, ids, mask)
    assert_close(bridge_rewards(bridge, ids, mask), expected, **TOL)
    alone = [bridge_rewards(bridge, ids[i][mask[i].bool()][None]) for i in range(2)]
    assert_close(torch.cat(alone), expected, **TOL)
    if padding_side == "right":  # HF's own batched forward reads the same positions
        batched = hf(input_ids=ids, attention_mask=mask).logits[:, 0]
        assert_close(bridge_rewards(bridge, ids, mask), batched, **TOL)


@torch.no_grad()
def test_reward_at_every_position(family):
    """The bridge's logits are the head applied to HF's final hidden state at each position."""
    name, hf, bridge = family
    ids, _ = random_batch(1, [10])
    backbone = hf.transformer if name == "gpt2" else hf.model
    expected = hf.score(backbone(input_ids=ids).last_hidden_state)
    assert_close(bridge(ids), expected, **TOL)


@torch.no_grad()
def test_raw_weights_match_too(checkpoints):
    path = checkpoints["llama"]
    hf, bridge = hf_model(path), boot_reward_bridge(path, process_weights=False)
    ids, mask = random_batch(2, LENGTHS, padding_side="right")
    assert_close(bridge_rewards(bridge, ids, mask), one_by_one(hf, ids, mask), **TOL)


@torch.no_grad()
def test_compatibility_mode_defaults_zero_every_reward(checkpoints):
    """The measured fact behind `center_unembed=False`: TL's defaults centre the one-column head."""
    bridge = boot_reward_bridge(checkpoints["llama"], process_weights=False)
    bridge.enable_compatibility_mode(disable_warnings=True)
    ids, mask = random_batch(2, LENGTHS, padding_side="right")
    assert_close(bridge_rewards(bridge, ids, mask), torch.zeros(2), atol=0, rtol=0)
    assert_close(bridge.W_U, torch.zeros_like(bridge.W_U), atol=0, rtol=0)


def test_the_callers_model_is_not_changed(checkpoints):
    hf = hf_model(checkpoints["qwen2"])
    before = {k: v.clone() for k, v in hf.state_dict().items()}
    modules = dict(hf.named_modules())
    boot_reward_bridge(hf)
    assert dict(hf.named_modules()).keys() == modules.keys()
    for key, value in hf.state_dict().items():
        assert torch.equal(value, before[key]), key


@pytest.mark.parametrize("family", ["llama", "gemma2", "gpt2"])
@torch.no_grad()
def test_bfloat16_is_close_to_hf_float32(family):
    """Weights processed in float32, then cast (as TL 3.9's `test_bfloat16_close`)."""
    from reward_lens_tl.bridge import BridgeRewardModel
    from reward_lens_tl.testing import tiny_reward_model

    hf = tiny_reward_model(family)
    model = BridgeRewardModel.boot(hf, dtype=torch.bfloat16)
    assert model.W_U.dtype == torch.bfloat16 and model.cfg.dtype == torch.bfloat16
    ids, mask = random_batch(2, [9, 6], seed=11, padding_side="right")
    expected = hf(input_ids=ids, attention_mask=mask).logits[:, 0]
    got = model.rewards(ids, mask)
    assert got.dtype == torch.bfloat16
    assert_close(got.float(), expected, atol=5e-2, rtol=0)
