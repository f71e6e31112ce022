"""A TransformerLens notebook, ported to reward models, checked number by number.

Each test is a cell a TL user writes (logit lens, DLA, attention patterns, ablations, steering,
TL's own ``patching``, OV/QK circuits, sae_lens splicing), run on the zoo's scalar and
multi-objective (ArmoRM-style, gated) models with chosen (18 tokens) and rejected (13 tokens) in
ONE batch — exactly as ``model.to_tokens`` builds it — and compared with an independent
computation: the plain HF model, run one sequence at a time without padding, with plain torch
hooks where the cell intervenes. Every idiom of :data:`reward_lens_tl.habits.HABITS` is covered
(``covers``), and the README's table is rendered from that catalogue.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from torch.testing import assert_close
from transformer_lens import patching, utils

from reward_lens_tl import HookedRewardModel, pad_batch
from reward_lens_tl.errors import (
    AlignmentError,
    AmbiguousObjectiveError,
    InvalidArgumentError,
    MissingAttentionMaskError,
    NotForRewardModelsError,
    RewardLensError,
    UnknownHookError,
)
from reward_lens_tl.habits import HABITS, markdown_table
from reward_lens_tl.padding import ReadingPositionWarning, token_columns
from reward_lens_tl.patching import activation_patching
from reward_lens_tl.sae.testing import random_topk_sae
from reward_lens_tl.testing import random_batch, tiny_reward_model
from reward_lens_tl.zoo import zoo_path
from reward_lens_tl.zoo.load import load_model
from tests.tl_port import hf_layer_outputs, hf_rewards, hf_score, rows

PROMPT = "explain how to bake bread"
CHOSEN, REJECTED = "great question the oven and the flour", "the bomb"
ATOL = dict(atol=1e-4, rtol=1e-4)
COVERED: set[str] = set()


def covers(*keys):
    COVERED.update(keys)
    return lambda fn: fn


# -- fixtures: our model, the HF model, the batch ------------------------------------------------
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
    return model.to_tokens([(PROMPT, CHOSEN), (PROMPT, REJECTED)])


@pytest.fixture(scope="module")
def run(model, ids):
    with torch.no_grad():
        return model.run_with_cache(ids)


def head_slice(model, h):
    return slice(h * model.cfg.d_head, (h + 1) * model.cfg.d_head)


# -- cell 1: inputs ----------------------------------------------------------------------------
@covers("to_tokens_text", "to_tokens_pair", "to_tokens_batch", "pad_batch", "to_single_token")
def test_inputs(model, ids):
    encoded = [model.encode(PROMPT, CHOSEN), model.encode(PROMPT, REJECTED)]
    assert [len(e) for e in encoded] == [18, 13]
    assert torch.equal(model.to_tokens((PROMPT, CHOSEN))[0], torch.tensor(encoded[0].ids))
    assert torch.equal(ids, pad_batch(encoded, model.pad_token_id)[0])
    cols = token_columns(13, 18)  # pads after the first token: both ends are real tokens
    assert torch.equal(ids[1, cols], torch.tensor(encoded[1].ids))
    assert (ids[1, 1:6] == model.pad_token_id).all() and ids[1, 0] == ids[0, 0]
    assert model.tokenizer.padding_side == "left"
    with pytest.raises(NotForRewardModelsError, match=r"to_tokens\(\(prompt, response\)\)"):
        model.to_tokens(PROMPT + " " + CHOSEN)
    with pytest.raises(NotForRewardModelsError, match="objective index"):
        model.to_single_token(" oven")


@covers("to_str_tokens_pair", "to_str_tokens_ids", "to_string")
def test_string_views(model, ids):
    tok = model.tokenizer
    enc = model.encode(PROMPT, REJECTED)
    assert model.to_str_tokens((PROMPT, REJECTED)) == tok.convert_ids_to_tokens(list(enc.ids))
    assert model.to_str_tokens(ids[1]) == [tok.decode([i]) for i in ids[1].tolist()]
    assert model.to_string(ids[1, 6:]) == tok.decode(ids[1, 6:])


# -- cell 2: the metric ------------------------------------------------------------------------
@covers("logits_last", "logits_last_gated", "rewards", "left_no_mask")
def test_metric_is_the_reward(model, hf, ids, run):
    logits, _ = run
    expected = hf_rewards(hf, model, ids)
    assert logits.shape == (2, ids.shape[1], 1)  # gated heads: the score at every position
    assert_close(logits[:, -1, 0], expected, **ATOL)
    assert_close(model.rewards(ids), expected, **ATOL)


@covers("logits_objectives")
def test_objectives_at_every_position(model, hf, ids):
    per_obj = model(ids, return_type="objectives")[:, -1]
    assert per_obj.shape == (2, model.n_objectives)
    if model.n_objectives > 1:
        with torch.no_grad():
            expected = torch.cat([hf(input_ids=r).rewards for r in rows(model, ids)])
        assert_close(per_obj, expected, **ATOL)


@covers("return_type_loss", "generate", "loss_fn", "lm_cross_entropy_loss", "lm_accuracy")
@covers("test_prompt")
def test_language_model_idioms_are_refused(model, ids, run):
    logits, _ = run
    with pytest.raises(NotForRewardModelsError, match="reward"):
        model(ids, return_type="loss")
    with pytest.raises(NotForRewardModelsError, match="score"):
        model.generate(ids[:1], max_new_tokens=2)
    with pytest.raises(NotForRewardModelsError, match="Bradley-Terry"):
        model.loss_fn(logits, ids)
    with pytest.raises(NotForRewardModelsError, match="next-token"):
        utils.lm_cross_entropy_loss(logits, ids)
    with pytest.raises(NotForRewardModelsError, match="next-token"):
        utils.lm_accuracy(logits, ids)
    with pytest.raises(NotForRewardModelsError):
        utils.test_prompt(PROMPT, "oven", model, print_details=False)
    vocab_logits = torch.randn(1, 4, 50)  # a language model's logits still go through TL
    assert utils.lm_accuracy(vocab_logits, torch.tensor([[1, 2, 3, 4]])).ndim == 0


# -- cell 3: padding -------------------------------------------------------------------------
@covers("right_padded_warns")
def test_right_padding_warns_where_the_user_wrote_it(model, ids):
    right, mask = pad_batch(
        [model.encode(PROMPT, CHOSEN), model.encode(PROMPT, REJECTED)],
        model.pad_token_id,
        padding_side="right",
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        logits = model(right, attention_mask=mask)
        model.run_with_cache(right, attention_mask=mask)
    found = [w for w in caught if issubclass(w.category, ReadingPositionWarning)]
    assert len(found) == 2 and all(w.filename == __file__ for w in found)
    assert "rows [1]" in str(found[0].message) and "left" in str(found[0].message)
    pool = model.pool_positions(right, mask)  # the reward itself is still right
    assert_close(logits[torch.arange(2), pool, 0], model.rewards(ids), **ATOL)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model(ids)  # the library's own batches never warn
        model.rewards(right, mask)


@covers("left_pad_is_bos")
def test_left_padding_with_pad_equal_to_bos_needs_a_mask():
    model = HookedRewardModel.from_pretrained(tiny_reward_model("llama", pad_token_id=1))
    model.bos_token_id = 1
    ids, mask = random_batch(2, [6, 4])
    ids[ids == 1] = 7
    ids[1, :2] = 1
    with pytest.raises(MissingAttentionMaskError, match="attention_mask"):
        model.rewards(ids)
    assert model.rewards(ids, mask).shape == (2,)


@covers("stop_at_layer", "start_at_layer", "start_at_layer_reward")
def test_partial_forwards(model, hf, ids):
    expected = hf_rewards(hf, model, ids)
    for layer in range(model.cfg.n_layers):
        resid = model(ids, stop_at_layer=layer + 1)
        want = torch.stack([hf_layer_outputs(hf, r)[layer][0, -1] for r in rows(model, ids)])
        assert_close(resid[:, -1], want, **ATOL)
        assert_close(model(resid, start_at_layer=layer + 1, tokens=ids)[:, -1, 0], expected, **ATOL)
        reward = model(resid, start_at_layer=layer + 1, tokens=ids, return_type="reward")
        assert_close(reward, expected, **ATOL)


# -- cell 4: the cache -------------------------------------------------------------------------
@covers("cache_resid_last", "cache_mlp_last", "remove_batch_dim", "run_with_cache_pos_slice")
def test_cache_reads_the_reading_token(model, hf, ids, run):
    _, cache = run
    for i, row in enumerate(rows(model, ids)):
        outs = hf_layer_outputs(hf, row)
        _, single = model.run_with_cache(ids[i], remove_batch_dim=True)
        for layer in range(model.cfg.n_layers):
            assert_close(cache["resid_post", layer][i, -1], outs[layer][0, -1], **ATOL)
            assert_close(single["resid_post", layer][-1], outs[layer][0, -1], **ATOL)
            mlp = cache["resid_post", layer][i, -1] - cache["resid_mid", layer][i, -1]
            assert_close(cache["mlp_out", layer][i, -1], mlp, **ATOL)
    _, last = model.run_with_cache(ids, pos_slice=-1)
    assert last["resid_post", 0].shape[1] == 1 and last.reward_positions.tolist() == [0, 0]
    assert_close(last["resid_post", 1][:, -1], cache["resid_post", 1][:, -1])


@covers("cache_pattern_last", "cache_z_last")
def test_attention_patterns_at_the_reading_token(model, hf, ids, run):
    _, cache = run
    for i, row in enumerate(rows(model, ids)):
        with torch.no_grad():
            attentions = hf.model(input_ids=row, output_attentions=True).attentions
        cols = token_columns(row.shape[1], ids.shape[1])
        pads = torch.ones(ids.shape[1], dtype=torch.bool)
        pads[cols] = False
        for layer in range(model.cfg.n_layers):
            for h in range(model.cfg.n_heads):
                ours = cache["pattern", layer][i, h, -1]
                assert_close(ours[cols], attentions[layer][0, h, -1], **ATOL)
                assert float(ours[pads].abs().sum()) == 0.0  # pads get no weight
        z = cache["z", 0][i, -1, 1]
        assert z.shape == (model.cfg.d_head,)


@covers("hand_lens", "accumulated_resid", "accumulated_resid_slice", "accumulated_resid_list")
@covers("pos_slice_reward", "residual_stack_to_reward")
def test_logit_lens(model, hf, ids, run):
    _, cache = run
    expected = hf_rewards(hf, model, ids)
    normed = model.ln_final(cache["resid_post", model.cfg.n_layers - 1])
    if model.is_scalar:
        hand = model.unembed(normed)[:, -1]
    else:  # the gated head's unembed would read objectives as the score: refused, name them
        with pytest.raises(AmbiguousObjectiveError, match="gated score"):
            model.unembed(normed)
        hand = normed[:, -1] @ model.W_U + model.b_U
    per_obj = model(ids, return_type="objectives")[:, -1]
    assert_close(hand, per_obj, **ATOL)  # the head's columns: objectives on a multi head
    stack = cache.accumulated_resid(apply_ln=True, pos_slice=-1)
    assert_close(
        cache.accumulated_resid(pos_slice=slice(-1, None))[:, :, 0],
        stack * 0 + cache.accumulated_resid(pos_slice=-1),
    )
    assert_close(
        cache.accumulated_resid(pos_slice=[-1])[:, :, 0], cache.accumulated_resid(pos_slice=-1)
    )
    lens = cache.residual_stack_to_reward(cache.accumulated_resid(pos_slice="reward"))
    assert_close(lens[-1] + cache.reward_bias(), expected, **ATOL)
    assert_close(cache.residual_stack_to_reward(cache.accumulated_resid(pos_slice=-1)), lens)
    if model.is_scalar:
        direction = model.tokens_to_residual_directions(0)
        assert_close((stack @ direction)[-1] + model.b_R[0], expected, **ATOL)
    for layer in range(model.cfg.n_layers):  # every layer's lens against HF's hidden states
        for i, row in enumerate(rows(model, ids)):
            outs = hf_layer_outputs(hf, row)
            h, final = outs[layer][0, -1], outs[-1][0, -1]  # TL: the final norm's own scale
            normed = h / final.pow(2).mean().add(model.cfg.eps).sqrt() * hf.model.norm.weight
            if model.is_scalar:
                want = hf.score(normed)[0]
            else:
                gate = model.gate(ids)[i]
                want = (hf.regression_layer(normed) @ model.reward_transform_matrix * gate).sum()
            assert_close(lens[layer + 1, i] + cache.reward_bias()[i], want, **ATOL)


@covers("decompose_resid", "stack_head_results", "full_decomposition", "full_decomposition_1d")
@covers("stack_neuron_results", "get_neuron_results", "residual_directions")
def test_direct_attribution_adds_up(model, hf, ids, run):
    _, cache = run
    if not model.is_scalar:  # the gated score: the same decompositions, read per row
        expected = hf_rewards(hf, model, ids) - cache.reward_bias()
        for parts in (
            cache.decompose_resid(pos_slice=-1),
            cache.get_full_resid_decomposition(pos_slice=-1),
            cache.get_full_resid_decomposition(pos_slice="reward", expand_neurons=False),
        ):
            assert_close(cache.residual_stack_to_reward(parts).sum(0), expected, **ATOL)
        return
    expected = hf_rewards(hf, model, ids) - model.b_R[0]
    direction = model.tokens_to_residual_directions(0)
    assert_close(direction, model.W_R[:, 0])
    parts = cache.decompose_resid(pos_slice=-1)
    assert_close(cache.logit_attrs(parts, tokens=0, pos_slice=-1).sum(0), expected, **ATOL)
    full = cache.get_full_resid_decomposition(
        apply_ln=True, pos_slice=-1, project_output_onto=model.W_U
    )
    assert_close(full.sum(0)[:, 0], expected, **ATOL)
    flat = cache.get_full_resid_decomposition(
        apply_ln=True, pos_slice=-1, project_output_onto=direction
    )
    assert flat.shape == full.shape[:-1]
    assert_close(flat, full[..., 0])
    heads = cache.apply_ln_to_stack(cache.stack_head_results(-1, pos_slice=-1), pos_slice=-1)
    dla = heads @ direction  # plain torch: z_h W_O[h] normalised by the final scale, along w
    for layer in range(model.cfg.n_layers):
        for h in range(model.cfg.n_heads):
            z = cache["z", layer][:, -1, h]
            out = z @ model.W_O[layer, h]
            scale = cache["ln_final.hook_scale"][:, -1, 0]
            assert_close(dla[layer * model.cfg.n_heads + h], (out @ direction) / scale, **ATOL)
    last = model.cfg.n_layers - 1
    neurons = cache.stack_neuron_results(last + 1, pos_slice=-1)
    assert neurons.shape[0] == model.cfg.n_layers * model.cfg.d_mlp
    per = cache.get_neuron_results(last, pos_slice=-1)
    assert_close(per.sum(-2), cache["mlp_out", last][:, -1] - model.b_out[last], **ATOL)


@covers("logit_attrs_no_batch", "logit_attrs_no_batch_ambiguous")
def test_logit_attrs_on_one_row(model, ids, run):
    _, cache = run
    stack = cache.accumulated_resid(pos_slice=-1)
    if not model.is_scalar:  # objective 0 is not the gated reward: refused, not misread
        with pytest.raises(AmbiguousObjectiveError):
            cache.logit_attrs(stack[:, 1], tokens=0, batch_slice=1, has_batch_dim=False)
        return
    both = cache.logit_attrs(stack, tokens=0, pos_slice=-1)
    one = cache.logit_attrs(stack[:, 1], tokens=0, pos_slice=-1, batch_slice=1, has_batch_dim=False)
    assert_close(one, both[:, 1])
    with pytest.raises(InvalidArgumentError, match="batch_slice"):
        cache.logit_attrs(stack[:, 1], tokens=0, pos_slice=-1, has_batch_dim=False)


@covers("residual_directions_gated", "residual_directions_named", "logit_attrs_gated")
@covers("residual_directions_text")
def test_objectives_must_be_named(model, run):
    _, cache = run
    with pytest.raises(NotForRewardModelsError, match="objective"):
        model.tokens_to_residual_directions("oven")
    if model.is_scalar:
        return
    with pytest.raises(AmbiguousObjectiveError, match="score_direction"):
        model.tokens_to_residual_directions(0)
    with pytest.raises(AmbiguousObjectiveError):
        cache.logit_attrs(cache.decompose_resid(pos_slice=-1), tokens=0)
    name = model.objective_names[1]
    assert_close(model.tokens_to_residual_directions(name), model.W_R[:, 1])
    per_obj = cache.residual_stack_to_reward(cache.accumulated_resid(pos_slice=-1), objective=name)
    assert_close(
        per_obj[-1] + model.b_R[1],
        model(model.to_tokens([(PROMPT, CHOSEN), (PROMPT, REJECTED)]), return_type="objectives")[
            :, -1, 1
        ],
        **ATOL,
    )


@covers("unknown_hook")
def test_unknown_hook_names(model, ids):
    with pytest.raises(UnknownHookError, match="blocks.0.hook_resid_pre"):
        model.run_with_cache(ids, names_filter="blocks.0.hook_resid")


# -- cell 5: interventions ---------------------------------------------------------------------
@covers("zero_ablation", "hooks_context")
def test_zero_ablation_of_a_head(model, hf, ids):
    layer, h = 1, 2
    span = head_slice(model, h)

    def zero(z, hook):
        z[:, :, h] = 0.0
        return z

    def hf_zero(module, args):
        x = args[0].clone()
        x[..., span] = 0.0
        return (x,)

    ablated = model.run_with_hooks(ids, fwd_hooks=[(f"blocks.{layer}.attn.hook_z", zero)])
    o_proj = hf.model.layers[layer].self_attn.o_proj
    expected = hf_rewards(hf, model, ids, lambda i: [(o_proj, hf_zero, True)])
    assert_close(ablated[:, -1, 0], expected, **ATOL)
    with model.hooks(fwd_hooks=[(f"blocks.{layer}.attn.hook_z", zero)]):
        assert_close(model(ids)[:, -1, 0], expected, **ATOL)
    assert_close(model(ids)[:, -1, 0], hf_rewards(hf, model, ids), **ATOL)  # hooks removed


@covers("mean_ablation")
def test_mean_ablation_at_the_reading_token(model, hf, ids, run):
    _, cache = run
    layer, h = 2, 1
    span = head_slice(model, h)
    mean = cache["z", layer][:, -1, h].mean(0)

    def ablate(z, hook):
        z[:, -1, h] = mean
        return z

    def hf_ablate(module, args):
        x = args[0].clone()
        x[:, -1, span] = mean
        return (x,)

    got = model.run_with_hooks(ids, fwd_hooks=[(utils.get_act_name("z", layer), ablate)])
    o_proj = hf.model.layers[layer].self_attn.o_proj
    expected = hf_rewards(hf, model, ids, lambda i: [(o_proj, hf_ablate, True)])
    assert_close(got[:, -1, 0], expected, **ATOL)


@covers("steering", "perma_hook")
def test_steering_the_residual_at_the_reading_token(model, hf, ids):
    layer = 1
    v = torch.linspace(-1, 1, model.cfg.d_model)

    def steer(resid, hook):
        resid[:, -1] += v
        return resid

    def hf_steer(module, args, out):
        out = out.clone()
        out[:, -1] += v
        return out

    got = model.run_with_hooks(ids, fwd_hooks=[(f"blocks.{layer}.hook_resid_post", steer)])
    expected = hf_rewards(hf, model, ids, lambda i: [(hf.model.layers[layer], hf_steer, False)])
    assert_close(got[:, -1, 0], expected, **ATOL)
    assert_close(
        model.run_with_hooks(
            ids, return_type="reward", fwd_hooks=[(f"blocks.{layer}.hook_resid_post", steer)]
        ),
        expected,
        **ATOL,
    )
    model.add_perma_hook(f"blocks.{layer}.hook_resid_post", steer)
    try:
        assert_close(model.rewards(ids), expected, **ATOL)
    finally:
        model.reset_hooks(including_permanent=True)
    assert_close(model.rewards(ids), hf_rewards(hf, model, ids), **ATOL)


@covers("torch_hook_last_block", "torch_pre_hook")
def test_plain_torch_hooks_see_what_they_would_on_hf(model, hf, ids):
    row = ids[:1]  # one unpadded row: a hook that mixes positions sees the same sequence as HF

    def centre(module, args, out):
        return out - out.mean(1, keepdim=True)

    handle = model.blocks[-1].register_forward_hook(centre)
    try:
        got = model.rewards(row)
    finally:
        handle.remove()
    expected = hf_score(hf, row, [(hf.model.layers[-1], centre, False)])
    assert_close(got[0], expected, **ATOL)

    def double(module, args):
        return (args[0] * 2.0,)

    handle = model.ln_final.register_forward_pre_hook(double)
    try:
        got = model.rewards(ids)
    finally:
        handle.remove()
    expected = hf_rewards(hf, model, ids, lambda i: [(hf.model.norm, double, True)])
    assert_close(got, expected, **ATOL)


# -- cell 6: TransformerLens's own patching ----------------------------------------------------
def hf_patch_grid(model, hf, ids, module_of, pre):
    """HF, one row at a time: layer × position grid of the rejected row's reward with the
    chosen row's activation copied in, column by column of the batch (pads after the first
    token: first tokens together, the rest end-aligned)."""
    clean, corrupted = rows(model, ids)
    width, pad = ids.shape[1], ids.shape[1] - corrupted.shape[1]
    grid = torch.zeros(model.cfg.n_layers, width)
    store = {}
    for layer in range(model.cfg.n_layers):

        def grab(module, *args):
            store["x"] = (args[0][0] if pre else args[1]).clone()

        hf_score(hf, clean, [(module_of(layer), grab, pre)])
        for p in range(width):
            if 1 <= p <= pad:  # a pad of the rejected row: nothing reads it
                grid[layer, p] = hf_score(hf, corrupted)
                continue

            def put(module, *args, p=p):
                x = (args[0][0] if pre else args[1]).clone()
                x[:, 0 if p == 0 else p - pad] = store["x"][:, p]
                return (x,) if pre else x

            grid[layer, p] = hf_score(hf, corrupted, [(module_of(layer), put, pre)])
    return grid


@covers("tl_patching_one_batch", "tl_patching_block_every", "activation_patching")
def test_transformer_lens_patching_on_one_batch(model, hf, ids):
    _, clean_cache = model.run_with_cache(ids[:1])

    def metric(logits):
        return logits[0, -1, 0]

    grid = patching.get_act_patch_resid_pre(model, ids[1:], clean_cache, metric)
    expected = hf_patch_grid(model, hf, ids, lambda layer: hf.model.layers[layer], pre=True)
    assert_close(grid, expected, **ATOL)
    every = patching.get_act_patch_block_every(model, ids[1:], clean_cache, metric)
    assert_close(every[0], grid)
    ours = activation_patching(
        model, ids[0], ids[1], site="resid_pre", alignment="end", metric=lambda r: r
    )
    # end-aligned: every column but the shorter row's first token (which TL's batch pairs with
    # the other first token, and "end" with the token as far from the end)
    n = ours.values.shape[1] - 1
    assert_close(ours.values[:, 1:].float(), grid[:, -n:], **ATOL)
    assert_close(grid[:, 0], torch.full_like(grid[:, 0], float(model.rewards(ids[1:])[0])))


@covers("tl_patching_heads")
def test_transformer_lens_head_patching(model, hf, ids):
    _, clean_cache = model.run_with_cache(ids[:1])
    grid = patching.get_act_patch_attn_head_out_all_pos(
        model, ids[1:], clean_cache, lambda logits: logits[0, -1, 0]
    )
    clean, corrupted = rows(model, ids)
    store = {}
    for layer in range(model.cfg.n_layers):
        o_proj = hf.model.layers[layer].self_attn.o_proj
        hf_score(hf, clean, [(o_proj, lambda m, a: store.update(x=a[0].clone()), True)])
        for h in range(model.cfg.n_heads):
            span = head_slice(model, h)

            def put(module, args, span=span):
                x = args[0].clone()
                cols = token_columns(x.shape[1], store["x"].shape[1])
                x[..., span] = store["x"][:, cols, span]
                return (x,)

            assert_close(grid[layer, h], hf_score(hf, corrupted, [(o_proj, put, True)]), **ATOL)


@covers("tl_patching_lengths")
def test_transformer_lens_patching_of_two_lengths_is_refused(model):
    chosen, rejected = model.to_tokens((PROMPT, CHOSEN)), model.to_tokens((PROMPT, REJECTED))
    for clean, corrupted in ((chosen, rejected), (rejected, chosen)):
        _, cache = model.run_with_cache(clean)
        with pytest.raises(AlignmentError, match="one batch"):
            patching.get_act_patch_resid_pre(model, corrupted, cache, lambda lg: lg[0, -1, 0])


# -- cell 7: weights ---------------------------------------------------------------------------
@covers("OV", "QK", "W_U")
def test_circuits_equal_the_hf_weights(model, hf):
    per_kv = model.cfg.n_heads // model.cfg.n_key_value_heads
    d = model.cfg.d_head
    for layer in range(model.cfg.n_layers):
        attn = hf.model.layers[layer].self_attn
        g = hf.model.layers[layer].input_layernorm.weight
        for h in range(model.cfg.n_heads):
            kv = h // per_kv
            W_Q = g[:, None] * attn.q_proj.weight[h * d : (h + 1) * d].T
            W_K = g[:, None] * attn.k_proj.weight[kv * d : (kv + 1) * d].T
            W_V = g[:, None] * attn.v_proj.weight[kv * d : (kv + 1) * d].T
            W_O = attn.o_proj.weight[:, h * d : (h + 1) * d].T
            assert_close(model.OV[layer, h].AB, W_V @ W_O, **ATOL)
            assert_close(model.QK[layer, h].AB, W_Q @ W_K.T, **ATOL)
    head = hf.score.weight if model.is_scalar else hf.regression_layer.weight
    assert_close(model.W_U, hf.model.norm.weight[:, None] * head.T, **ATOL)


@covers("hub_id", "n_devices")
def test_hub_ids_and_devices(kind, tmp_path):
    from reward_lens_tl.errors import InvalidArgumentError
    from tests.hub.test_hub import add_snapshot

    commit = "a" * 40
    add_snapshot(tmp_path / "cache", f"org/{kind}", zoo_path(kind), commit, refs=["main"])
    model = HookedRewardModel.from_pretrained(
        f"org/{kind}", revision="main", cache_dir=tmp_path / "cache", dtype="bf16", device="cpu"
    )
    local = HookedRewardModel.from_pretrained(zoo_path(kind), dtype="bf16", device="cpu")
    ids = local.to_tokens([(PROMPT, CHOSEN), (PROMPT, REJECTED)])
    assert model.cfg.dtype == torch.bfloat16 and str(next(model.parameters()).device) == "cpu"
    assert torch.equal(model.rewards(ids), local.rewards(ids))
    with pytest.raises(InvalidArgumentError, match="torchrun"):
        HookedRewardModel.from_pretrained(zoo_path(kind), n_devices=2)


@covers("center_unembed", "unknown_option")
def test_transformer_lens_loading_options(kind):
    with pytest.raises(RewardLensError, match="center_unembed"):
        HookedRewardModel.from_pretrained(zoo_path(kind), center_unembed=True)
    assert HookedRewardModel.from_pretrained(zoo_path(kind), center_unembed=False) is not None
    with pytest.raises(RewardLensError, match="fold_ln"):
        HookedRewardModel.from_pretrained(zoo_path(kind), fold_lnn=True)


@covers("no_processing_apply_ln", "no_processing_projected")
def test_unprocessed_models_add_up(kind, hf):
    model = HookedRewardModel.from_pretrained_no_processing(zoo_path(kind))
    ids = model.to_tokens([(PROMPT, CHOSEN), (PROMPT, REJECTED)])
    _, cache = model.run_with_cache(ids)
    expected = hf_rewards(hf, model, ids)
    if not model.is_scalar:
        lens = cache.residual_stack_to_reward(cache.accumulated_resid(pos_slice=-1))
        assert_close(lens[-1] + cache.reward_bias(), expected, **ATOL)
        return
    parts = cache.decompose_resid(pos_slice=-1)
    total = (cache.apply_ln_to_stack(parts, -1, pos_slice=-1) @ model.W_U)[..., 0].sum(0)
    assert_close(total + model.b_U[0], expected, **ATOL)
    full = cache.get_full_resid_decomposition(
        apply_ln=True, pos_slice=-1, project_output_onto=model.W_U
    )
    assert_close(full.sum(0)[:, 0] + model.b_U[0], expected, **ATOL)
    neurons = cache.stack_neuron_results(
        model.cfg.n_layers,
        pos_slice=-1,
        apply_ln=True,
        project_output_onto=model.W_U,
        incl_remainder=True,
    )
    assert_close(neurons.sum(0)[:, 0] + model.b_U[0], expected, **ATOL)


@covers("final_layernorm_bias")
def test_a_final_layernorm_bias_is_refused_in_every_form():
    model = HookedRewardModel.from_pretrained_no_processing(tiny_reward_model("gpt2"))
    ids, mask = random_batch(2, [7, 5])
    _, cache = model.run_with_cache(ids, attention_mask=mask)
    for call in (
        lambda: cache.get_full_resid_decomposition(apply_ln=True, pos_slice=-1),
        lambda: cache.get_full_resid_decomposition(
            apply_ln=True, pos_slice=-1, project_output_onto=model.W_U
        ),
        lambda: cache.stack_neuron_results(
            2, pos_slice=-1, apply_ln=True, project_output_onto=model.W_U
        ),
        lambda: cache.residual_stack_to_reward(cache.accumulated_resid(pos_slice=-1)),
    ):
        with pytest.raises(RewardLensError, match="LayerNorm keeps its bias"):
            call()


# -- cell 8: sae_lens --------------------------------------------------------------------------
@covers("sae_cache", "run_with_cache_with_saes", "sae_exclude_special")
def test_sae_lens_splicing(model, hf, ids):
    layer = 1
    hook = f"blocks.{layer}.hook_resid_post"
    sae = random_topk_sae(model, hook, d_sae=96, k=8)
    logits, cache = model.run_with_cache_with_saes(ids, saes=[sae])
    latents = cache[hook + ".hook_sae_acts_post"][:, -1]
    for i, row in enumerate(rows(model, ids)):
        h = hf_layer_outputs(hf, row)[layer][0, -1]
        assert_close(latents[i], sae.encode(h[None])[0], **ATOL)

    def splice(module, args, out):
        return sae.decode(sae.encode(out))

    expected = hf_rewards(hf, model, ids, lambda i: [(hf.model.layers[layer], splice, False)])
    assert_close(logits[:, -1, 0], expected, **ATOL)
    model.add_sae(sae)
    try:
        assert_close(model(ids)[:, -1, 0], expected, **ATOL)
    finally:
        model.reset_saes()
    with pytest.raises(RewardLensError, match="special"):
        model.add_sae(sae, exclude_special_tokens=True)
    assert not model.acts_to_saes


# -- the catalogue -----------------------------------------------------------------------------
def test_every_habit_in_the_catalogue_is_tested():
    keys = [h.key for h in HABITS]
    assert len(keys) == len(set(keys)) and len(keys) >= 60
    from tests.test_tl_habits import COVERED as START_ANCHORED  # the systematic port's rows

    assert set(keys) == COVERED | START_ANCHORED


def test_the_docs_render_the_catalogue_and_the_readme_links_to_it():
    root = Path(__file__).resolve().parents[1]
    page = (root / "docs" / "coming-from-transformerlens.md").read_text()
    assert "<!-- habits -->" in page, "the docs page lost the marker its table is rendered at"
    readme = (root / "README.md").read_text()
    assert "docs/coming-from-transformerlens.md" in readme and "habits table" in readme
    table = markdown_table().splitlines()
    assert len(table) == len(HABITS) + 2 and all(h.key for h in HABITS)
