"""Padding is exact on every family: a padded batch scores as its rows one by one (ours and HF's,
unpadded), in the library's layout (pads after each row's first token: column 0 is every row's
first token, ``-1`` its reading token) and in an HF tokenizer's plain left padding (every pad
before the first token), and the invariants (attribution parts + bias = reward, the lens ends at
the reward) hold under it. The sliding windows (mistral 5, gemma2 4) are shorter than the rows,
so a window counted in columns instead of positions would fail here."""

import pytest
import torch
from torch.testing import assert_close

from reward_lens_tl import HookedRewardModel, pad_batch
from reward_lens_tl.attribution import direct_attribution
from reward_lens_tl.errors import MissingAttentionMaskError
from reward_lens_tl.lens import reward_lens
from reward_lens_tl.padding import left_pad, left_pad_tensor, real_columns
from reward_lens_tl.testing import random_batch, tiny_reward_model

FAMILIES = ["llama", "mistral", "qwen2", "gemma2", "gpt2", "qwen3", "armorm"]
LENGTHS = [12, 5, 9, 16]  # longer than the sliding windows (mistral 5, gemma2 4)
ONE_BY_ONE = dict(atol=1e-5, rtol=1e-5)


def batch_for(family, layout="left"):
    ids, mask = random_batch(len(LENGTHS), LENGTHS, seed=3, low=5, padding_side=layout)
    if family == "armorm":  # the gating pattern (3, 4) ends each prompt
        cols, _ = real_columns(mask)
        for row in range(len(LENGTHS)):
            ids[row, cols[row, 2:4]] = torch.tensor([3, 4])
    return ids, mask


def hf_one(hf, row):
    with torch.no_grad():
        out = hf(input_ids=row[None])
    return out.score[0] if hasattr(out, "score") else out.logits[0, 0]


@pytest.fixture(scope="module", params=FAMILIES)
def family(request):
    return request.param


@pytest.fixture(scope="module")
def pair(family):
    hf = tiny_reward_model(family)
    return hf, HookedRewardModel.from_pretrained(hf)


@pytest.mark.parametrize("layout", ["left", "leading"])
def test_left_padded_batch_equals_rows_one_by_one(family, pair, layout):
    hf, model = pair
    ids, mask = batch_for(family, layout)
    first_is_real = (mask[:, 0] == 1).all() if layout == "left" else (mask[:, 0] == 0).any()
    assert (mask[:, -1] == 1).all() and first_is_real
    rows = [ids[i][mask[i].bool()] for i in range(len(LENGTHS))]
    with torch.no_grad():
        batched = model.rewards(ids, mask)
        inferred = model.rewards(ids)  # no mask: inferred from the pad ids
        ours = torch.stack([model.rewards(r[None])[0] for r in rows])
        logits = model(ids, attention_mask=mask)[:, -1, 0]
    hf_rows = torch.stack([hf_one(hf, r) for r in rows])
    assert_close(batched, ours, **ONE_BY_ONE)
    assert_close(inferred, ours, **ONE_BY_ONE)
    assert_close(logits, ours, **ONE_BY_ONE)
    assert_close(ours, hf_rows, atol=1e-4, rtol=1e-4)
    assert model.pool_positions(ids, mask).tolist() == [ids.shape[1] - 1] * len(LENGTHS)


def test_right_and_left_padding_agree(family, pair):
    _, model = pair
    ids, mask = batch_for(family)
    real = [ids[i][mask[i].bool()].tolist() for i in range(len(LENGTHS))]
    right, right_mask = left_pad(real, 0, padding_side="right")
    again, again_mask = left_pad_tensor(right, right_mask, 0)
    assert torch.equal(again, ids) and torch.equal(again_mask, mask)
    with torch.no_grad():
        assert_close(model.rewards(right, right_mask), model.rewards(ids, mask), **ONE_BY_ONE)


def test_invariants_hold_under_left_padding(family, pair):
    _, model = pair
    ids, mask = batch_for(family)
    with torch.no_grad():
        reward = model.rewards(ids, mask)
    attribution = direct_attribution(model, ids, mask, neurons=family == "llama")
    assert_close(attribution.values.sum(0) + attribution.head_bias, reward, atol=1e-4, rtol=1e-4)
    lens = reward_lens(model, ids, mask)
    assert_close(lens.values[-1], reward, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("shared", ["eos", "bos"])
@pytest.mark.parametrize("family", ["llama", "gemma2", "gpt2", "armorm"])
def test_pad_shared_with_eos_or_bos_reads_every_row_alone(family, shared):
    """pad == EOS (a trailing EOS is skipped by HF's rule) and pad == BOS (padding cannot be told
    from BOS without the mask): the library's batch, with its mask, scores as its rows alone."""
    special = 2 if shared == "eos" else 1
    hf = tiny_reward_model(family, pad_token_id=special)
    model = HookedRewardModel.from_pretrained(hf)
    rows = []
    for n, seed in zip([12, 7, 9], [1, 2, 3], strict=True):
        body = torch.randint(5, 90, (n - 2,), generator=torch.Generator().manual_seed(seed))
        if family == "armorm":
            body[2:4] = torch.tensor([3, 4])
        rows.append([1, *body.tolist(), 2])  # BOS … EOS
    ids, mask = pad_batch(rows, special)
    assert (ids[:, 0] == 1).all() and (ids[:, -1] == 2).all()
    with torch.no_grad():
        batched = model.rewards(ids, mask)
        alone = torch.cat([model.rewards(torch.tensor([r])) for r in rows])
        hf_alone = torch.stack([hf_one(hf, torch.tensor(r)) for r in rows])
    assert_close(batched, alone, **ONE_BY_ONE)
    assert_close(alone, hf_alone, atol=1e-4, rtol=1e-4)
    if shared == "eos":  # the mask is inferred from the run of pads after the first token
        with torch.no_grad():
            assert_close(model.rewards(ids), alone, **ONE_BY_ONE)
        assert model.pool_positions(ids, mask).tolist() == [ids.shape[1] - 2] * 3
    else:
        with pytest.raises(MissingAttentionMaskError):
            model.rewards(ids)


def test_pad_equal_to_bos_without_a_leading_bos_needs_the_mask():
    """GPT-2-style rows (pad == BOS, no BOS prepended): pads after the first token cannot be
    told from BOS ids, so a batch without its mask is refused, never read with pads attended."""
    hf = tiny_reward_model("llama", pad_token_id=1)  # 1 is also the BOS id
    model = HookedRewardModel.from_pretrained(hf)
    rows = [[7, 8, 9, 10, 11, 2], [7, 9, 2]]
    ids, mask = pad_batch(rows, 1)
    with pytest.raises(MissingAttentionMaskError, match="cannot be told from BOS"):
        model.rewards(ids)
    with torch.no_grad():
        alone = torch.cat([model.rewards(torch.tensor([r])) for r in rows])
        assert_close(model.rewards(ids, mask), alone, **ONE_BY_ONE)
