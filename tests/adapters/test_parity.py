"""Converted reward = HF reward (≤ 1e-4, float32) for every supported family and setting.

Batches are padded as the library pads them (``random_batch``'s default: pads after each row's
first token), and the HF reference runs each row alone, unpadded (``hf_rewards``): HF's own batch
cannot read that layout (its sliding windows count columns, ArmoRM's rule finds the first pad).
``test_batched_parity`` also compares a plainly left-padded batch (every pad first, as an HF
tokenizer pads) with HF's own batch, given each row's own positions (``hf_positions``); the
converted model derives them from the mask itself.
"""

import pytest
import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.padding import real_columns
from reward_lens_tl.testing import random_batch, tiny_reward_model

TOL = 1e-4
FAMILIES = ["llama", "mistral", "qwen2", "gemma2", "gpt2", "qwen3"]
LENGTHS = [12, 9, 5, 16]  # > the sliding windows (mistral 5, gemma2 4); different lengths


def hf_positions(mask):
    """Each row's positions counted from its first real token (what HF needs under left
    padding; ``None`` for an unpadded batch)."""
    return None if mask is None else (mask.cumsum(-1) - 1).clamp(min=0)


def hf_batch(hf, ids, mask):
    """HF's own batch (right for plain left or right padding, given the positions)."""
    with torch.no_grad():
        return hf(input_ids=ids, attention_mask=mask, position_ids=hf_positions(mask))


def hf_alone(hf, ids, mask):
    """HF's outputs of each row run alone (its real tokens, unpadded), stacked."""
    rows = [ids[i][mask[i].bool()][None] for i in range(ids.shape[0])]
    with torch.no_grad():
        outs = [hf(input_ids=r) for r in rows]
    keys = [k for k in outs[0].keys() if isinstance(outs[0][k], torch.Tensor)]
    return {k: torch.cat([o[k] for o in outs]) for k in keys}


def hf_rewards(hf, ids, mask):
    """HF's reward of each row run alone."""
    return hf_alone(hf, ids, mask)["logits"][:, 0]


def with_gating_pattern(ids, mask, at):
    """Write the gating pattern (3, 4) at position ``at`` of every row (counting real tokens)."""
    cols, _ = real_columns(mask)
    for row in range(ids.shape[0]):
        ids[row, cols[row, at : at + 2]] = torch.tensor([3, 4])
    return ids


def convert(hf, fold):
    flags = dict(fold_ln=fold, center_writing_weights=fold, fold_value_biases=fold)
    return HookedRewardModel.from_pretrained(hf, **flags)


@pytest.mark.parametrize("fold", [True, False], ids=["folded", "raw"])
@pytest.mark.parametrize("family", FAMILIES)
def test_batched_parity(family, fold):
    hf = tiny_reward_model(family)
    ids, mask = random_batch(4, LENGTHS, seed=1)
    model = convert(hf, fold)
    with torch.no_grad():
        ours = model.rewards(ids, mask)
    assert ours.shape == (4,)
    torch.testing.assert_close(ours, hf_rewards(hf, ids, mask), atol=TOL, rtol=0)
    # an HF tokenizer's plain left padding, against HF's own batch
    ids, mask = random_batch(4, LENGTHS, seed=1, padding_side="leading")
    with torch.no_grad():
        theirs = hf_batch(hf, ids, mask).logits[:, 0]
        torch.testing.assert_close(model.rewards(ids, mask), theirs, atol=TOL, rtol=0)


@pytest.mark.parametrize("family", FAMILIES)
def test_batched_equals_one_by_one(family):
    hf = tiny_reward_model(family)
    model = convert(hf, True)
    ids, mask = random_batch(4, LENGTHS, seed=2)
    with torch.no_grad():
        batched = model.rewards(ids, mask)
        rows = [ids[i][mask[i].bool()][None] for i in range(len(LENGTHS))]
        single = torch.cat([model.rewards(r) for r in rows])
    assert [len(r[0]) for r in rows] == LENGTHS and (ids[:, 0] != 0).all()  # both ends real
    torch.testing.assert_close(batched, single, atol=1e-5, rtol=0)
    torch.testing.assert_close(single, hf_rewards(hf, ids, mask), atol=TOL, rtol=0)


def test_pad_equals_eos_skips_trailing_eos():
    hf = tiny_reward_model("llama", pad_token_id=2, eos_token_id=2)
    model = convert(hf, True)
    ids, mask = random_batch(3, [6, 8, 4], seed=3, pad=2)
    ids[0, -1] = 2  # a real trailing EOS: HF reads the token before it
    with torch.no_grad():
        ours = model.rewards(ids, mask)
    assert model.pool_positions(ids).tolist() == [6, 7, 7]
    torch.testing.assert_close(ours, hf_rewards(hf, ids, mask), atol=TOL, rtol=0)


def test_sliding_window_is_exercised():
    """The window (4) is shorter than the sequence: ignoring it changes the reward, so parity
    above is a real test of local attention."""
    hf = tiny_reward_model("gemma2")
    ids, mask = random_batch(2, [16, 16], seed=4)
    model = convert(hf, True)
    for block in model.blocks:
        block.attn.attn_type = "global"
    with torch.no_grad():
        assert (model.rewards(ids, mask) - hf_rewards(hf, ids, mask)).abs().max() > 1e-3


def test_llama3_rope_scaling_honoured():
    rope = dict(
        rope_type="llama3",
        rope_theta=10000.0,
        factor=8.0,
        low_freq_factor=1.0,
        high_freq_factor=4.0,
        original_max_position_embeddings=8,
    )
    hf = tiny_reward_model("llama", rope_parameters=rope)
    model = convert(hf, True)
    assert model.cfg.use_NTK_by_parts_rope
    ids, mask = random_batch(3, [20, 14, 9], seed=5)
    with torch.no_grad():
        ours = model.rewards(ids, mask)
        plain = convert(tiny_reward_model("llama"), True).rewards(ids, mask)
    torch.testing.assert_close(ours, hf_rewards(hf, ids, mask), atol=TOL, rtol=0)
    assert (ours - plain).abs().max() > 1e-3  # the scaling matters at this length


def test_gqa_and_explicit_head_dim_are_real():
    hf = tiny_reward_model("llama")
    model = convert(hf, True)
    assert model.cfg.n_key_value_heads == 2 and model.cfg.n_heads == 4
    assert model.cfg.d_head == 32 != model.cfg.d_model // model.cfg.n_heads


def test_llama_attention_bias():
    hf = tiny_reward_model("llama", attention_bias=True)
    ids, mask = random_batch(2, [10, 7], seed=6)
    torch.testing.assert_close(
        convert(hf, True).rewards(ids, mask), hf_rewards(hf, ids, mask), atol=TOL, rtol=0
    )


@pytest.mark.parametrize("fold", [True, False], ids=["folded", "raw"])
def test_armorm_parity(fold):
    hf = tiny_reward_model("armorm")
    ids, mask = random_batch(3, [12, 9, 7], seed=7, low=5)
    ids = with_gating_pattern(ids, mask, 3)  # the gating pattern ends the prompt
    with torch.no_grad():
        ref = hf_alone(hf, ids, mask)
        model = HookedRewardModel.from_pretrained(hf, fold_ln=fold)
        score = model.rewards(ids, mask)
        objectives = model.objective_rewards(ids, mask)
        gate = model.gate(ids, mask)
    assert model.objective_names == ("helpful", "harmless", "verbose")
    torch.testing.assert_close(score, ref["score"], atol=TOL, rtol=0)
    torch.testing.assert_close(objectives, ref["rewards"], atol=TOL, rtol=0)
    torch.testing.assert_close(gate, ref["gating_output"], atol=TOL, rtol=0)
    # the score is linear in the final normalised residual along score_direction
    direction = model.score_direction(ids, mask)
    _, cache = model.run_with_cache(ids, attention_mask=mask, return_type="reward")
    pos = model.pool_positions(ids, mask)
    normed = cache["ln_final.hook_normalized"][torch.arange(3), pos]
    bias = model.b_R @ model.reward_transform_matrix @ gate.T
    torch.testing.assert_close((normed * direction).sum(-1) + bias, score, atol=TOL, rtol=0)


def test_local_directory_round_trip(tmp_path):
    hf = tiny_reward_model("qwen2")
    hf.save_pretrained(tmp_path, safe_serialization=True)
    model = HookedRewardModel.from_pretrained(tmp_path)
    ids, mask = random_batch(3, [8, 11, 4], seed=8)
    torch.testing.assert_close(
        model.rewards(ids, mask), hf_rewards(hf, ids, mask), atol=TOL, rtol=0
    )


def test_armorm_directory_round_trip(tmp_path):
    hf = tiny_reward_model("armorm")
    hf.save_pretrained(tmp_path, safe_serialization=True)
    model = HookedRewardModel.from_pretrained(tmp_path)
    ids, mask = random_batch(2, [9, 7], seed=9, low=5)
    ids = with_gating_pattern(ids, mask, 2)
    with torch.no_grad():
        ref = hf_alone(hf, ids, mask)["score"]
        torch.testing.assert_close(model.rewards(ids, mask), ref, atol=TOL, rtol=0)


def test_multi_label_head_with_objective_names():
    hf = tiny_reward_model("llama", num_labels=2)
    model = HookedRewardModel.from_pretrained(hf, objective_names=["a", "b"])
    ids, mask = random_batch(2, [9, 6], seed=10)
    ref = hf_alone(hf, ids, mask)["logits"]
    assert model.rewards(ids, mask).shape == (2, 2)
    torch.testing.assert_close(model.rewards(ids, mask), ref, atol=TOL, rtol=0)


def test_bfloat16_close():
    hf = tiny_reward_model("llama")
    model = HookedRewardModel.from_pretrained(hf, dtype=torch.bfloat16)
    ids, mask = random_batch(2, [9, 6], seed=11)
    assert model.W_U.dtype == torch.bfloat16
    torch.testing.assert_close(
        model.rewards(ids, mask).float(), hf_rewards(hf, ids, mask), atol=5e-2, rtol=0
    )


def test_generic_adapter_verifies_at_load():
    from reward_lens_tl.adapters.generic import GenericAdapter

    model = HookedRewardModel.from_pretrained(tiny_reward_model("qwen3"))
    assert isinstance(model.adapter, GenericAdapter)
    assert model.cfg.use_qk_norm
