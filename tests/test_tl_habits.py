"""The systematic port, start-anchored: TransformerLens idioms that index a batch from its start.

A TL notebook indexes both ends of a batch: ``[:, -1]`` (the reading token) and ``[:, 0]`` (the
first token: attention to BOS, the attention sink, knockouts, ``to_str_tokens(...)[0]``). Each
test is such a cell, run on the zoo's scalar and gated multi-objective models with three rows
of 18, 13 and 16 tokens in ONE batch built by ``model.to_tokens``, and compared with the plain HF
model run one row at a time without padding (plain torch or a plain attention function where the
cell intervenes). Also here: the entry points that must say which number they give (the gated
head's ``unembed``, ``incl_bwd``, over-long conversations, ``half()``) and the padding side every
API reports. ``tests/test_habits.py`` checks that every catalogue row has a test (``COVERED``).
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch.testing import assert_close
from transformers import AttentionInterface

from reward_lens_tl import HookedRewardModel, pad_batch
from reward_lens_tl.errors import (
    AmbiguousObjectiveError,
    InvalidArgumentError,
    SequenceTooLongError,
)
from reward_lens_tl.padding import ReadingPositionWarning, token_columns
from reward_lens_tl.zoo import zoo_path
from reward_lens_tl.zoo.load import load_model
from tests.tl_port import hf_layer_outputs, hf_rewards, rows

PROMPT = "explain how to bake bread"
RESPONSES = ("great question the oven and the flour", "the bomb", "the oven and the bread")
LENGTHS = [18, 13, 16]
ATOL = dict(atol=1e-4, rtol=1e-4)
COVERED: set[str] = set()


def covers(*keys):
    COVERED.update(keys)
    return lambda fn: fn


@pytest.fixture(scope="module", params=["scalar", "multi"])
def kind(request):
    return request.param


@pytest.fixture(scope="module")
def model(kind, zoo_scalar, zoo_multi):
    """The shared zoo model of this ``kind`` (tests hook it, never change it)."""
    return {"scalar": zoo_scalar, "multi": zoo_multi}[kind]


@pytest.fixture(scope="module")
def hf(kind):
    hf = load_model(kind)
    hf.set_attn_implementation("eager")
    return hf


@pytest.fixture(scope="module")
def ids(model):
    ids = model.to_tokens([(PROMPT, r) for r in RESPONSES])
    assert ids.shape == (3, 18)
    return ids


def hf_scores(hf, model, ids):
    return hf_rewards(hf, model, ids)


# -- the layout ---------------------------------------------------------------------------------
@covers("first_column", "padding_side")
def test_both_ends_are_every_rows_tokens(model, ids):
    encoded = [model.encode(PROMPT, r) for r in RESPONSES]
    assert [len(e) for e in encoded] == LENGTHS
    for i, enc in enumerate(encoded):
        assert ids[i, token_columns(len(enc), 18)].tolist() == list(enc.ids)
    assert ids[:, 0].tolist() == [model.tokenizer.bos_token_id] * 3
    assert ids[:, -1].tolist() == [model.eos_token_id] * 3
    # one truth: the tokenizer, to_tokens and pad_batch say and do the same
    assert model.tokenizer.padding_side == "left"
    assert torch.equal(ids, pad_batch(encoded, model.pad_token_id)[0])
    assert torch.equal(ids, model.to_tokens([(PROMPT, r) for r in RESPONSES], padding_side="left"))
    right = model.to_tokens([(PROMPT, r) for r in RESPONSES], padding_side="right")
    assert right[1, :13].tolist() == list(encoded[1].ids)
    with pytest.warns(ReadingPositionWarning):
        model(right)


@covers("default_padding_side_right")
def test_right_padding_when_asked_at_load(kind, model, ids):
    right = HookedRewardModel.from_pretrained(zoo_path(kind), default_padding_side="right")
    assert right.tokenizer.padding_side == "right" and model.tokenizer.padding_side == "left"
    batch = right.to_tokens([(PROMPT, r) for r in RESPONSES])
    assert batch[1, 12] == right.eos_token_id and (batch[1, 13:] == right.pad_token_id).all()
    with pytest.warns(ReadingPositionWarning):
        right(batch)
    assert_close(right.rewards(batch), model.rewards(ids), atol=1e-5, rtol=0)


@covers("gather_after_asking")
def test_a_users_gather_after_asking_the_tokenizer(model, hf, ids):
    """Code that asks which way the batch is padded, and gathers where that says."""
    lengths = (ids != model.pad_token_id).sum(1)
    if model.tokenizer.padding_side == "right":
        reading = lengths - 1
    else:
        reading = torch.full_like(lengths, ids.shape[1] - 1)
    with torch.no_grad():
        logits = model(ids)
    got = logits[torch.arange(3), reading, 0]
    assert_close(got, hf_scores(hf, model, ids), **ATOL)


@covers("logits_first")
def test_reward_at_the_first_token(model, hf, ids):
    """`logits[:, 0]`: the reward read at each row's first token (HF's head at position 0)."""
    with torch.no_grad():
        ours = model(ids)[:, 0, 0]
    expected = []
    for row in rows(model, ids):
        with torch.no_grad():
            hidden = hf.model(input_ids=row).last_hidden_state[0]  # final-normed states
            if hasattr(hf, "score"):
                expected.append(hf.score(hidden[0])[0])
            else:  # the gated score at position 0: objectives there, mixed by the row's gate
                gate = hf(input_ids=row).gating_output[0]
                objectives = hf.regression_layer(hidden[0])
                expected.append((gate * (objectives @ hf.reward_transform_matrix)).sum())
    assert_close(ours, torch.stack(expected), **ATOL)


@covers("to_str_tokens_first")
def test_first_string_token_is_bos(model, ids):
    for i in range(3):
        assert model.to_str_tokens(ids[i])[0] == model.tokenizer.decode([ids[0, 0]]) == "<bos>"


@covers("cache_first")
def test_first_column_of_the_cache_is_bos(model, hf, ids):
    _, cache = model.run_with_cache(ids)
    for i, row in enumerate(rows(model, ids)):
        outs = hf_layer_outputs(hf, row)
        for layer in range(model.cfg.n_layers):
            assert_close(cache["resid_post", layer][i, 0], outs[layer][0, 0], **ATOL)


@covers("attention_to_first")
def test_attention_to_bos(model, hf, ids):
    _, cache = model.run_with_cache(ids)
    for i, row in enumerate(rows(model, ids)):
        with torch.no_grad():
            attentions = hf.model(input_ids=row, output_attentions=True).attentions
        cols = token_columns(row.shape[1], ids.shape[1])
        pads = torch.ones(ids.shape[1], dtype=torch.bool)
        pads[cols] = False
        for layer in range(model.cfg.n_layers):
            sink = cache["pattern", layer][i, :, -1, 0]  # attention sink: reading token → BOS
            assert_close(sink, attentions[layer][0, :, -1, 0], **ATOL)
            assert float(sink.min()) > 0
            # every real query's attention to BOS (the sink statistic), and pads attend nowhere
            to_bos = cache["pattern", layer][i, :, :, 0]
            assert_close(to_bos[:, cols], attentions[layer][0, :, :, 0], **ATOL)
            assert float(cache["pattern", layer][i, :, pads].abs().sum()) == 0.0
            assert_close(cache["pattern", layer][i, :, cols].sum(-1), torch.ones(4, len(cols)))


def knockout_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kw):
    """Plain-torch causal attention of one unpadded row, every weight on position 0 zeroed."""
    groups = query.shape[1] // key.shape[1]
    key = key.repeat_interleave(groups, dim=1)
    value = value.repeat_interleave(groups, dim=1)
    scores = query @ key.transpose(-1, -2) * scaling
    n_q, n_k = scores.shape[-2:]
    causal = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
    weights = scores.masked_fill(~causal, float("-inf")).softmax(-1).clone()
    weights[..., 0] = 0.0
    return (weights @ value).transpose(1, 2).contiguous(), weights


@covers("knockout_first")
def test_knocking_out_attention_to_bos(model, hf, ids):
    def knock(pattern, hook):
        pattern[:, :, :, 0] = 0.0
        return pattern

    hooks = [(f"blocks.{layer}.attn.hook_pattern", knock) for layer in range(model.cfg.n_layers)]
    with torch.no_grad():
        ours = model.run_with_hooks(ids, return_type="reward", fwd_hooks=hooks)
    AttentionInterface.register("bos_knockout", knockout_attention)
    hf.set_attn_implementation("bos_knockout")
    try:
        expected = hf_scores(hf, model, ids)
    finally:
        hf.set_attn_implementation("eager")
    assert_close(ours, expected, **ATOL)
    assert (ours - model.rewards(ids)).abs().max() > 1e-2  # the knockout matters


@covers("steer_first")
def test_steering_the_first_token(model, hf, ids):
    layer = 0
    v = torch.randn(model.cfg.d_model, generator=torch.Generator().manual_seed(0))

    def steer(resid, hook):
        resid[:, 0] += v
        return resid

    with torch.no_grad():
        ours = model.run_with_hooks(
            ids, return_type="reward", fwd_hooks=[(f"blocks.{layer}.hook_resid_post", steer)]
        )

    def add(module, args, output):
        hidden = output[0] if isinstance(output, tuple) else output
        hidden = hidden.clone()
        hidden[:, 0] += v
        return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

    handle = hf.model.layers[layer].register_forward_hook(add)
    try:
        expected = hf_scores(hf, model, ids)
    finally:
        handle.remove()
    assert_close(ours, expected, **ATOL)


# -- entry points that must say which number they give ------------------------------------------
@covers("unembed_gated")
def test_hand_unembed_on_the_gated_model(kind, model, ids):
    _, cache = model.run_with_cache(ids)
    normed = model.ln_final(cache["resid_post", model.cfg.n_layers - 1])
    if kind == "scalar":
        assert_close(model.unembed(normed)[:, -1, 0], model.rewards(ids), atol=1e-5, rtol=0)
        return
    with pytest.raises(AmbiguousObjectiveError, match="residual_stack_to_reward"):
        model.unembed(normed)
    stack = cache.accumulated_resid(pos_slice=-1)
    assert_close(cache.residual_stack_to_reward(stack)[-1], model.rewards(ids), **ATOL)


@covers("incl_bwd_batch")
def test_gradients_of_a_batch(model, ids):
    out, cache = model.run_with_cache(ids, return_type="reward", incl_bwd=True)
    assert_close(out, model.rewards(ids), atol=1e-5, rtol=0)
    name = "blocks.1.hook_resid_post_grad"
    for i, row in enumerate(rows(model, ids)):
        _, alone = model.run_with_cache(row, return_type="reward", incl_bwd=True)
        real = ids[i] != model.pad_token_id
        assert_close(cache[name][i][real], alone[name][0], atol=1e-5, rtol=1e-4)
        assert float(cache[name][i][~real].abs().sum()) == 0.0
    with pytest.raises(InvalidArgumentError, match="return_type='reward'"):
        model.run_with_cache(ids, incl_bwd=True)


@covers("to_tokens_too_long")
def test_over_long_conversations_are_never_cut_unasked(model):
    long = (PROMPT, "the oven " * 40)
    for flag in (True, False):
        with pytest.raises(SequenceTooLongError, match="truncate='right'"):
            model.to_tokens(long, truncate=flag)
    cut = model.to_tokens(long, truncate="right")
    assert cut.shape[1] == model.cfg.n_ctx and cut[0, -1] == model.eos_token_id
    with pytest.raises(InvalidArgumentError, match="truncate"):
        model.to_tokens(long, truncate="middle")


@covers("half")
def test_half_is_the_float16_model(kind, ids):
    loaded = HookedRewardModel.from_pretrained(zoo_path(kind), dtype=torch.float16)
    halved = HookedRewardModel.from_pretrained(zoo_path(kind)).half()
    assert halved.cfg.dtype == torch.float16
    assert torch.equal(halved.rewards(ids), loaded.rewards(ids))
    back = halved.float()
    assert back.cfg.dtype == torch.float32 and back.rewards(ids).dtype == torch.float32


@covers("pos_slice_prefix")
def test_prefix_slices_over_padding_are_refused(model, ids):
    for pos_slice in (slice(0, 4), [0, 1], 3, slice(-15, None)):
        with pytest.raises(InvalidArgumentError, match="hold padding in rows"):
            model.run_with_cache(ids, pos_slice=pos_slice)
    _, cache = model.run_with_cache(ids)
    with pytest.raises(InvalidArgumentError, match="hold padding in rows"):
        cache.accumulated_resid(pos_slice=slice(0, 3))
    with pytest.raises(InvalidArgumentError, match="hold padding in rows"):
        cache.stack_head_results(-1, pos_slice=[0, 1])
    # both ends, everything, and the real columns of one row stay readable
    first = cache.accumulated_resid(pos_slice=0)
    assert_close(first[-1], cache["resid_post", model.cfg.n_layers - 1][:, 0])
    assert cache.accumulated_resid(pos_slice=slice(-12, None)).shape[-2] == 12
    assert cache.accumulated_resid(pos_slice=None).shape[-2] == 18
    _, sliced = model.run_with_cache(ids, pos_slice=slice(-12, None))
    assert sliced["resid_post", 0].shape[1] == 12


@covers("tl_get_attention_mask")
def test_transformer_lens_attention_mask_utility(model, hf, ids):
    """`utils.get_attention_mask(model.tokenizer, ids, ...)`: the mask of the library's batch."""
    from transformer_lens import utilities

    encoded = [model.encode(PROMPT, r) for r in RESPONSES]
    _, expected = pad_batch(encoded, model.pad_token_id)
    mask = utilities.get_attention_mask(model.tokenizer, ids, True)
    assert torch.equal(mask.long(), expected)
    with torch.no_grad():
        assert_close(model.rewards(ids, mask), hf_rewards(hf, model, ids), **ATOL)
    # any other tokenizer keeps TL's rule (only pads before the first token are masked)
    plain = copy.copy(model.tokenizer)
    del plain._reward_lens_layout
    assert utilities.get_attention_mask(plain, ids, True)[1, 1:6].tolist() == [1] * 5
