"""Every TransformerLens idiom that ran and gave a wrong number on a reward model (issue 16's
table) now gives the reward-model answer or raises a typed error that says what to use."""

import pytest
import torch
from transformer_lens import utils

from reward_lens_tl import HookedRewardModel, pad_batch
from reward_lens_tl.attribution import direct_attribution
from reward_lens_tl.errors import MissingAttentionMaskError, NotForRewardModelsError
from reward_lens_tl.padding import ReadingPositionWarning
from reward_lens_tl.testing import random_batch, tiny_reward_model
from reward_lens_tl.zoo import zoo_path

PROMPT = "explain how to bake bread"
LONG, SHORT = "great question the oven and the flour", "the bomb"


@pytest.fixture(scope="module")
def model():
    return HookedRewardModel.from_pretrained(zoo_path("scalar"))


@pytest.fixture(scope="module")
def batch(model):
    """A (left-padded) batch of unequal lengths, and its rewards read the HF way."""
    encoded = [model.encode(PROMPT, LONG), model.encode(PROMPT, SHORT)]
    ids, mask = pad_batch(encoded, model.pad_token_id)
    with torch.no_grad():
        return ids, mask, model.rewards(ids, mask)


def test_to_tokens_routes_through_the_conversation(model, batch):
    ids, _, reward = batch
    tokens = model.to_tokens([(PROMPT, LONG), (PROMPT, SHORT)])
    assert torch.equal(tokens, ids)  # template, BOS, EOS, right padding: as model.encode
    with pytest.raises(NotForRewardModelsError, match="to_tokens\\(\\(prompt, response\\)\\)"):
        model.to_tokens("explain how to bake bread the oven")
    with pytest.raises(NotForRewardModelsError):
        model.to_tokens(["explain", "the oven"])


def test_last_position_of_a_batch_is_each_rows_reward(model, batch):
    ids, mask, reward = batch
    assert ids[1, 1] == model.pad_token_id != ids[1, 0]  # pads after the short row's first token
    with torch.no_grad():
        logits = model(ids)
        masked = model(ids, attention_mask=mask)
    assert torch.allclose(logits[:, -1, 0], reward, atol=1e-5)
    assert torch.allclose(masked[:, -1, 0], reward, atol=1e-5)
    assert model.pool_positions(ids, mask).tolist() == [ids.shape[1] - 1] * 2


def test_right_padding_warns_and_reward_reads_stay_right(model, batch):
    _, _, reward = batch
    encoded = [model.encode(PROMPT, LONG), model.encode(PROMPT, SHORT)]
    ids, mask = pad_batch(encoded, model.pad_token_id, padding_side="right")
    with pytest.warns(ReadingPositionWarning, match="rows \\[1\\]"), torch.no_grad():
        logits, cache = model.run_with_cache(ids, attention_mask=mask)
    pool = model.pool_positions(ids, mask)
    assert torch.allclose(logits[torch.arange(2), pool, 0], reward, atol=1e-5)
    # the explicit per-row read-out is right whatever the padding
    lens = cache.residual_stack_to_reward(cache.accumulated_resid(pos_slice="reward"))
    assert torch.allclose(lens[-1] + model.b_R[0], reward, atol=1e-4)
    heads = cache.stack_head_results(pos_slice="reward")
    assert heads.shape == (model.cfg.n_layers * model.cfg.n_heads, 2, model.cfg.d_model)


def test_left_padding_without_a_mask(model, batch):
    ids, _, reward = batch
    left = torch.full_like(ids, model.pad_token_id)
    for row in range(2):
        real = ids[row][ids[row] != model.pad_token_id]
        left[row, ids.shape[1] - len(real) :] = real
    with torch.no_grad():
        assert torch.allclose(model.rewards(left), reward, atol=1e-4)
        assert torch.allclose(model(left)[:, -1, 0], reward, atol=1e-4)


def test_left_padding_ambiguous_with_bos_is_refused():
    hf = tiny_reward_model("llama", pad_token_id=1, bos_token_id=1)
    model = HookedRewardModel.from_pretrained(hf)
    ids, _ = random_batch(2, [6, 6])
    ids[1, :2] = 1  # two leading pad/BOS ids in one row, none in the other
    with pytest.raises(MissingAttentionMaskError, match="attention_mask"):
        model.rewards(ids)


def test_generate_loss_and_test_prompt_refuse_with_a_pointer(model, batch):
    ids, _, _ = batch
    with pytest.raises(NotForRewardModelsError, match="score"):
        model.generate(ids[:1], max_new_tokens=3)
    with pytest.raises(NotForRewardModelsError, match="loss"):
        model(ids, return_type="loss")
    with pytest.raises(NotForRewardModelsError, match="Bradley-Terry"):
        model.loss_fn(torch.zeros(1, 3, 1), ids[:1, :3])
    with pytest.raises(NotForRewardModelsError):
        utils.test_prompt(PROMPT, "oven", model)


def test_residual_directions_are_head_columns(model):
    assert torch.equal(model.tokens_to_residual_directions(0), model.w_r)
    with pytest.raises(NotForRewardModelsError, match="W_R"):
        model.tokens_to_residual_directions("oven")
    with pytest.raises(NotForRewardModelsError, match="vocabulary"):
        model.tokens_to_residual_directions(torch.tensor([0, 57]))


def test_pad_batch_takes_encoded_conversations(model):
    a, b = model.encode(PROMPT, LONG), model.encode(PROMPT, SHORT)
    ids, mask = pad_batch([a, b], model.pad_token_id)
    assert ids[0].tolist() == list(a.ids) and int(mask[1].sum()) == len(b)


# -- per-row read-outs ------------------------------------------------------------------------
def test_logit_lens_and_dla_per_row(model, batch):
    ids, mask, reward = batch
    with torch.no_grad():
        _, cache = model.run_with_cache(ids, attention_mask=mask)
    assert cache.reward_positions.tolist() == model.pool_positions(ids, mask).tolist()
    stack, labels = cache.accumulated_resid(pos_slice="reward", return_labels=True)
    lens = cache.residual_stack_to_reward(stack) + model.b_R[0]
    assert stack.shape == (model.cfg.n_layers + 1, 2, model.cfg.d_model)
    assert torch.allclose(lens[-1], reward, atol=1e-4)  # the lens ends at the reward
    # TL's pos_slice=-1 habit means the same on this cache (not the pad of row 1)
    same = cache.accumulated_resid(pos_slice=-1)
    assert torch.equal(same, stack)
    parts, part_labels = cache.decompose_resid(pos_slice=-1, return_labels=True)
    total = cache.logit_attrs(parts, tokens=0, pos_slice=-1).sum(0) + model.b_R[0]
    assert torch.allclose(total, reward, atol=1e-4) and "0_attn_out" in part_labels
    heads = cache.stack_head_results(pos_slice="reward")
    ours = direct_attribution(model, ids, mask)
    head_rows = [i for i, c in enumerate(ours.components) if c.kind == "head"]
    per_head = cache.residual_stack_to_reward(heads)
    assert torch.allclose(per_head, ours.values[head_rows], atol=1e-4)
    assert ours.tl_labels[head_rows[0]] == "L0H0"


def test_unprocessed_model_classic_dla_is_right_or_refused(batch):
    ids, mask, reward = batch
    raw = HookedRewardModel.from_pretrained_no_processing(zoo_path("scalar"))
    with torch.no_grad():
        _, cache = raw.run_with_cache(ids, attention_mask=mask)
    parts = cache.decompose_resid(layer=-1, pos_slice=-1)
    total = cache.logit_attrs(parts, tokens=0, pos_slice=-1).sum(0) + raw.b_R[0]
    assert torch.allclose(total, reward, atol=1e-4)  # TL alone is off by the norm weight
    gpt2 = HookedRewardModel.from_pretrained_no_processing(tiny_reward_model("gpt2"))
    g_ids, g_mask = random_batch(2, [6, 4])
    with torch.no_grad():
        _, g_cache = gpt2.run_with_cache(g_ids, attention_mask=g_mask)
    with pytest.raises(Exception, match="LayerNorm keeps its bias"):
        g_cache.apply_ln_to_stack(g_cache.decompose_resid(pos_slice=-1), pos_slice=-1)


def test_pad_equal_to_eos_reads_at_minus_two_and_says_so():
    """With pad == EOS and every row ending in EOS, HF's rule skips that EOS: the reward is read
    at -2 in every row. The forward says so; pos_slice="reward" reads the right token."""
    model = HookedRewardModel.from_pretrained(tiny_reward_model("llama", pad_token_id=2))
    ids, mask = random_batch(2, [7, 5], seed=3, low=5)
    ids[:, -1] = 2  # a trailing EOS (== pad) in every row
    with torch.no_grad():
        reward = model.rewards(ids, mask)
        with pytest.warns(ReadingPositionWarning, match="position -2"):
            logits, cache = model.run_with_cache(ids, attention_mask=mask)
    assert model.pool_positions(ids, mask).tolist() == [ids.shape[1] - 2] * 2
    assert torch.allclose(logits[:, -2, 0], reward, atol=1e-5)
    lens = cache.residual_stack_to_reward(cache.accumulated_resid(pos_slice="reward"))
    assert torch.allclose(lens[-1] + model.b_R[0], reward, atol=1e-4)
