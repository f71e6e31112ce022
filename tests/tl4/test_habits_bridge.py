"""The habits catalogue (`reward_lens_tl.habits.HABITS`) on the TransformerLens 4 bridge.

Every row of the default backend's habits table that applies to `BridgeRewardModel` runs here:
the same idiom (or its bridge spelling, said in a comment where it differs), on the zoo's scalar
model booted through the bridge (the gated multi-objective model for the gated rows, a tiny
family where a row needs one), with three conversations of 18, 13 and 16 tokens in ONE batch
built by `model.to_tokens`. Each is compared with the computation of `tests/test_habits.py`:
the plain HF model, run one row at a time without padding, with plain torch hooks where the cell
intervenes (`tests/tl_port.py`). `BRIDGE` says, for every catalogue row, that it is checked here
or why it does not apply on the bridge; `test_every_habit_has_one_entry` keeps it in step with
the catalogue.
"""

import ast
import warnings
from pathlib import Path

import pytest
import torch
from torch.testing import assert_close
from transformers import AttentionInterface

from tests.tl4.tl4_only import skip_unless_tl4

skip_unless_tl4()

from transformer_lens import patching, utilities  # noqa: E402  (TL 4: `utils` is `utilities`)

from reward_lens_tl import pad_batch  # noqa: E402
from reward_lens_tl.bridge import BridgeRewardModel  # noqa: E402
from reward_lens_tl.errors import (  # noqa: E402
    AlignmentError,
    AmbiguousObjectiveError,
    BridgeUnsupportedError,
    InvalidArgumentError,
    MissingAttentionMaskError,
    NotForRewardModelsError,
    SequenceTooLongError,
    UnknownHookError,
)
from reward_lens_tl.habits import HABITS  # noqa: E402
from reward_lens_tl.padding import ReadingPositionWarning, token_columns  # noqa: E402
from reward_lens_tl.patching import activation_patching  # noqa: E402
from reward_lens_tl.testing import random_batch, tiny_reward_model  # noqa: E402
from reward_lens_tl.zoo import zoo_path  # noqa: E402
from reward_lens_tl.zoo.load import load_model  # noqa: E402
from tests.tl_port import hf_layer_outputs, hf_rewards, hf_score, rows  # noqa: E402

PROMPT = "explain how to bake bread"
RESPONSES = ("great question the oven and the flour", "the bomb", "the oven and the bread")
LENGTHS = [18, 13, 16]
ATOL = dict(atol=1e-4, rtol=1e-4)

_SAE = (
    "not applicable on the bridge: sae_lens cannot import under TransformerLens 4 (test_refusals)"
)
_CACHE = (
    "not applicable on the bridge: the cache is TransformerLens 4's own ActivationCache, not the "
    "default backend's RewardActivationCache"
)
#: Every catalogue row on the bridge: "checked" (by a test below) or why it does not
#: apply. A key appears once; `test_every_habit_has_one_entry` keeps this in step with `HABITS`.
BRIDGE: dict[str, str] = {
    # -- inputs
    "to_tokens_text": "checked",
    "to_tokens_pair": "checked",
    "to_tokens_batch": "checked",
    "first_column": "checked",
    "padding_side": "checked",
    "default_padding_side_right": (
        "not applicable on the bridge: boot_reward_bridge has no default_padding_side option "
        "(model.to_tokens(..., padding_side='right') is checked under padding_side)"
    ),
    "tl_get_attention_mask": "checked",
    "gather_after_asking": "checked",
    "logits_first": "checked",
    "to_str_tokens_first": "checked",
    "to_str_tokens_pair": "checked",
    "to_str_tokens_ids": "checked",
    "to_string": "checked",
    "to_single_token": "checked",
    "pad_batch": "checked",
    "left_no_mask": "checked",
    "left_pad_is_bos": "checked",
    "right_padded_warns": "checked",
    # -- the forward
    "logits_last": "checked",
    "logits_last_gated": "checked",
    "logits_objectives": "checked",
    "rewards": "checked",
    "return_type_loss": "checked",
    "generate": "checked",
    "loss_fn": "checked",
    "lm_cross_entropy_loss": "checked",
    "lm_accuracy": "checked",
    "test_prompt": "checked",
    "stop_at_layer": "checked",
    "start_at_layer": "checked",
    "start_at_layer_reward": "checked",
    # -- the cache
    "cache_resid_last": "checked",
    "cache_pattern_last": "checked",
    "cache_z_last": "checked",
    "cache_first": "checked",
    "attention_to_first": "checked",
    "cache_mlp_last": "checked",
    "hand_lens": "checked",
    "unembed_gated": "checked",
    "incl_bwd_batch": "checked",
    "unknown_hook": "checked",
    "remove_batch_dim": "checked",
    "run_with_cache_pos_slice": "checked",  # the reading token; cache.reward_positions: see below
    "accumulated_resid": "checked",
    "accumulated_resid_slice": "checked",
    "accumulated_resid_list": "checked",
    "pos_slice_prefix": "checked",  # run_with_cache's refusal; a slice on the cache is TL 4's
    "pos_slice_reward": "checked",  # bridge spelling: index the cache at model.pool_positions
    "decompose_resid": "checked",
    "stack_head_results": "checked",
    "stack_neuron_results": "checked",
    "get_neuron_results": "checked",
    "full_decomposition": "checked",
    "full_decomposition_1d": "checked",
    "logit_attrs_no_batch": "checked",
    "logit_attrs_no_batch_ambiguous": (
        f"{_CACHE}: TL 4's logit_attrs of one row without batch_slice raises its own "
        "RuntimeError (a shape mismatch), not InvalidArgumentError; pass batch_slice="
    ),
    # bridge spelling: boot(..., process_weights=False), and the final norm's weight applied by
    # hand (TL 4's apply_ln_to_stack leaves it out; see test_unprocessed_models_add_up)
    "no_processing_apply_ln": "checked",
    "no_processing_projected": "checked",
    "final_layernorm_bias": (
        f"{_CACHE}: with process_weights=False a LayerNorm model's final-norm bias is in no "
        "component and TL 4 does not refuse (the tiny GPT-2's parts miss the reward by 0.03-0.04); "
        "boot with process_weights=True (the default), which folds it"
    ),
    "residual_directions": "checked",
    "residual_directions_text": "checked",
    "residual_directions_gated": "checked",
    "residual_directions_named": "checked",
    "residual_stack_to_reward": (
        f"{_CACHE}: the reward lens of a stack is reward_lens_tl.lens.reward_lens(model, ids) "
        "(tests/tl4/test_analyses.py)"
    ),
    "logit_attrs_gated": (
        f"{_CACHE}, whose model is the bridge: logit_attrs(stack, tokens=0) reads objective 0 "
        "of an ArmoRM-style head and is not refused; the gated score's attribution is "
        "reward_lens_tl.attribution.direct_attribution"
    ),
    # -- hooks and interventions
    "zero_ablation": "checked",
    "mean_ablation": "checked",
    "steering": "checked",
    "knockout_first": "checked",
    "steer_first": "checked",
    "hooks_context": "checked",
    "torch_hook_last_block": "checked",
    "torch_pre_hook": "checked",
    "perma_hook": "checked",
    # -- patching
    "tl_patching_one_batch": "checked",
    "tl_patching_heads": "checked",
    "tl_patching_block_every": "checked",
    "tl_patching_lengths": "checked",
    "to_tokens_too_long": "checked",
    "activation_patching": "checked",
    # -- weights
    "OV": "checked",
    "QK": "checked",
    "W_U": "checked",
    "hub_id": (
        "not applicable on the bridge: boot_reward_bridge reads a local checkpoint directory or "
        "a model in memory; hub ids are resolved by HookedRewardModel.from_pretrained only"
    ),
    "half": "checked",
    "n_devices": (
        "not applicable on the bridge: boot_reward_bridge has one device= and no n_devices option"
    ),
    "center_unembed": (
        "not applicable on the bridge: boot_reward_bridge takes no center_unembed and never "
        "centres the head (test_parity: TL's default centring zeroes every reward)"
    ),
    "unknown_option": (
        "not applicable on the bridge: boot_reward_bridge's options are plain keywords (dtype, "
        "device, tokenizer, process_weights); Python's TypeError names a misspelt one"
    ),
    # -- sae_lens
    "sae_cache": _SAE,
    "run_with_cache_with_saes": _SAE,
    "sae_exclude_special": _SAE,
}


# -- fixtures: the bridge model, the HF model, the batch ----------------------------------------
@pytest.fixture(scope="module")
def model():
    """The zoo's scalar model on the bridge (tests hook it, never change it)."""
    return BridgeRewardModel.boot(zoo_path("scalar"))


@pytest.fixture(scope="module")
def hf():
    hf = load_model("scalar")
    hf.set_attn_implementation("eager")
    return hf


@pytest.fixture(scope="module")
def ids(model):
    ids = model.to_tokens([(PROMPT, r) for r in RESPONSES])
    assert ids.shape == (3, 18)
    return ids


@pytest.fixture(scope="module")
def run(model, ids):
    with torch.no_grad():
        return model.run_with_cache(ids)


@pytest.fixture(scope="module")
def gated():
    """(bridge model, HF model, ids) of the zoo's ArmoRM-style gated model."""
    model = BridgeRewardModel.boot(zoo_path("multi"))
    hf = load_model("multi")
    hf.set_attn_implementation("eager")
    return model, hf, model.to_tokens([(PROMPT, r) for r in RESPONSES])


def head_slice(model, h):
    return slice(h * model.cfg.d_head, (h + 1) * model.cfg.d_head)


def template_ids(tokenizer, response):
    """The checkpoint tokenizer's own chat template (HF's apply_chat_template), not `encode`."""
    chat = [{"role": "user", "content": PROMPT}, {"role": "assistant", "content": response}]
    return tokenizer.apply_chat_template(chat, return_tensors="pt", return_dict=False)[0]


# -- inputs ---------------------------------------------------------------------------------
def test_to_tokens_text_pair_batch_pad_batch_first_column_padding_side(model, ids):
    own = model.bridge.reward_tokenizer
    for i, response in enumerate(RESPONSES):
        expected = template_ids(own, response)
        assert len(expected) == LENGTHS[i]
        assert torch.equal(model.to_tokens((PROMPT, response))[0], expected)
        assert torch.equal(ids[i, token_columns(LENGTHS[i], 18)], expected)
    assert (ids[1, 1:6] == model.pad_token_id).all()  # pads after the first token
    assert ids[:, 0].tolist() == [own.bos_token_id] * 3 and ids[:, -1].tolist() == [2] * 3
    encoded = [model.encode(PROMPT, r) for r in RESPONSES]
    assert torch.equal(ids, pad_batch(encoded, model.pad_token_id)[0])
    assert model.tokenizer.padding_side == "left"
    batch = [(PROMPT, r) for r in RESPONSES]
    assert torch.equal(ids, model.to_tokens(batch, padding_side="left"))
    right = model.to_tokens(batch, padding_side="right")
    assert torch.equal(right[1, :13], template_ids(own, RESPONSES[1]))
    with pytest.warns(ReadingPositionWarning):
        model(right)
    with pytest.raises(NotForRewardModelsError, match=r"to_tokens\(\(prompt, response\)\)"):
        model.to_tokens(PROMPT + " " + RESPONSES[0])
    with pytest.raises(NotForRewardModelsError, match="objective index"):
        model.to_single_token(" oven")


def test_to_str_tokens_and_to_string(model, ids):
    tok = model.bridge.reward_tokenizer
    pair = model.to_str_tokens((PROMPT, RESPONSES[1]))
    assert pair == tok.convert_ids_to_tokens(template_ids(tok, RESPONSES[1]).tolist())
    assert model.to_str_tokens(ids[1]) == [tok.decode([i]) for i in ids[1].tolist()]
    for i in range(3):
        assert model.to_str_tokens(ids[i])[0] == "<bos>"
    assert model.to_string(ids[1, 6:]) == tok.decode(ids[1, 6:])


def test_tl_get_attention_mask(model, hf, ids):
    """TL 4 spelling: `utilities.get_attention_mask` (TL 4 has no `transformer_lens.utils`)."""
    mask = utilities.get_attention_mask(model.tokenizer, ids, True)
    expected = (ids != model.pad_token_id).long()  # the zoo's rows hold no pad id of their own
    assert torch.equal(mask.long(), expected)
    with torch.no_grad():
        assert_close(model.rewards(ids, mask), hf_rewards(hf, model, ids), **ATOL)


def test_gather_after_asking(model, hf, ids):
    lengths = (ids != model.pad_token_id).sum(1)
    side = model.tokenizer.padding_side
    reading = lengths - 1 if side == "right" else torch.full_like(lengths, ids.shape[1] - 1)
    with torch.no_grad():
        got = model(ids)[torch.arange(3), reading, 0]
    assert_close(got, hf_rewards(hf, model, ids), **ATOL)


# -- the forward ----------------------------------------------------------------------------
def test_logits_last_first_rewards_and_no_mask(model, hf, ids, run):
    logits, _ = run  # run_with_cache(ids): no attention_mask, inferred from the pad ids
    expected = hf_rewards(hf, model, ids)
    assert logits.shape == (3, 18, 1)
    assert_close(logits[:, -1, 0], expected, **ATOL)
    assert_close(model.rewards(ids), expected, **ATOL)
    with torch.no_grad():
        assert_close(model(ids)[:, -1, 0], expected, **ATOL)
        first = model(ids)[:, 0, 0]
        at_bos = [hf.score(hf.model(input_ids=r).last_hidden_state[0, 0]) for r in rows(model, ids)]
    assert_close(first, torch.cat(at_bos), **ATOL)


def test_right_padded_warns(model, ids):
    encoded = [model.encode(PROMPT, r) for r in RESPONSES]
    right, mask = pad_batch(encoded, model.pad_token_id, padding_side="right")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        logits = model(right, attention_mask=mask)
        model.run_with_cache(right, attention_mask=mask)
    found = [w for w in caught if issubclass(w.category, ReadingPositionWarning)]
    assert len(found) == 2 and all(w.filename == __file__ for w in found)
    assert "rows [1, 2]" in str(found[0].message)
    pool = model.pool_positions(right, mask)  # the reward itself is still right
    assert_close(logits[torch.arange(3), pool, 0], model.rewards(ids), **ATOL)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model(ids)  # the library's own batches never warn
        model.rewards(right, mask)


def test_left_pad_is_bos():
    model = BridgeRewardModel.boot(tiny_reward_model("llama", pad_token_id=1))  # BOS id 1 too
    ids, mask = random_batch(2, [6, 4])
    ids[ids == 1] = 7
    ids[1, :2] = 1
    with pytest.raises(MissingAttentionMaskError, match="attention_mask"):
        model.rewards(ids)
    hf = tiny_reward_model("llama", pad_token_id=1)
    alone = torch.cat([hf(input_ids=ids[i][mask[i].bool()][None]).logits[:, 0] for i in range(2)])
    assert_close(model.rewards(ids, mask), alone, **ATOL)


def test_language_model_idioms_are_refused(model, ids, run):
    """TL 4 spelling: `utilities.lm_cross_entropy_loss` / `lm_accuracy` / `test_prompt`."""
    logits, _ = run
    with pytest.raises(NotForRewardModelsError, match="reward"):
        model(ids, return_type="loss")
    with pytest.raises(NotForRewardModelsError, match="score"):
        model.generate(ids[:1], max_new_tokens=2)
    with pytest.raises(NotForRewardModelsError, match="Bradley-Terry"):
        model.loss_fn(logits, ids)
    with pytest.raises(NotForRewardModelsError, match="next-token"):
        utilities.lm_cross_entropy_loss(logits, ids)
    with pytest.raises(NotForRewardModelsError, match="next-token"):
        utilities.lm_accuracy(logits, ids)
    with pytest.raises(NotForRewardModelsError):
        utilities.test_prompt(PROMPT, "oven", model, print_details=False)
    vocab_logits = torch.randn(1, 4, 50)  # a language model's logits still go through TL
    assert utilities.lm_accuracy(vocab_logits, torch.tensor([[1, 2, 3, 4]])).ndim == 0


@torch.no_grad()
def test_stop_and_start_at_layer(model, hf, ids):
    expected = hf_rewards(hf, model, ids)
    outs = [hf_layer_outputs(hf, r) for r in rows(model, ids)]
    for layer in range(model.cfg.n_layers):
        resid = model(ids, stop_at_layer=layer + 1)
        assert_close(resid[:, -1], torch.stack([o[layer][0, -1] for o in outs]), **ATOL)
        resumed = model(resid, start_at_layer=layer + 1, tokens=ids)  # mask from tokens
        assert_close(resumed[:, -1, 0], expected, **ATOL)
        reward = model(resid, start_at_layer=layer + 1, tokens=ids, return_type="reward")
        assert_close(reward, expected, **ATOL)


# -- the cache ------------------------------------------------------------------------------
@torch.no_grad()
def test_cache_at_the_reading_and_first_tokens(model, hf, ids, run):
    _, cache = run
    for i, row in enumerate(rows(model, ids)):
        outs = hf_layer_outputs(hf, row)
        _, single = model.run_with_cache(ids[i], remove_batch_dim=True)  # one row, its pads too
        for layer in range(model.cfg.n_layers):
            assert_close(cache["resid_post", layer][i, -1], outs[layer][0, -1], **ATOL)
            assert_close(cache["resid_post", layer][i, 0], outs[layer][0, 0], **ATOL)
            assert_close(single["resid_post", layer][-1], outs[layer][0, -1], **ATOL)
            mlp = outs[layer][0, -1] - cache["resid_mid", layer][i, -1]
            assert_close(cache["mlp_out", layer][i, -1], mlp, **ATOL)
    _, last = model.run_with_cache(ids, pos_slice=-1)
    assert last["resid_post", 0].shape[1] == 1
    assert_close(last["resid_post", 1][:, -1], cache["resid_post", 1][:, -1])


@torch.no_grad()
def test_attention_patterns_z_and_the_sink(model, hf, ids, run):
    _, cache = run
    for i, row in enumerate(rows(model, ids)):
        attentions = hf.model(input_ids=row, output_attentions=True).attentions
        z_in: list = []
        grab = lambda m, a, z_in=z_in: z_in.append(a[0])  # noqa: E731
        handles = [
            layer.self_attn.o_proj.register_forward_pre_hook(grab) for layer in hf.model.layers
        ]
        try:
            hf(input_ids=row)
        finally:
            for handle in handles:
                handle.remove()
        cols = token_columns(row.shape[1], ids.shape[1])
        pads = torch.ones(ids.shape[1], dtype=torch.bool)
        pads[cols] = False
        for layer in range(model.cfg.n_layers):
            pattern = cache["pattern", layer][i]
            assert_close(pattern[:, -1, cols], attentions[layer][0, :, -1], **ATOL)
            assert float(pattern[:, -1, pads].abs().sum()) == 0.0  # pads get no weight
            assert_close(pattern[:, cols, 0], attentions[layer][0, :, :, 0], **ATOL)  # sink
            assert float(pattern[:, -1, 0].min()) > 0
            for h in range(model.cfg.n_heads):
                z = cache["z", layer][i, -1, h]
                assert_close(z, z_in[layer][0, -1, head_slice(model, h)], **ATOL)


@torch.no_grad()
def test_logit_lens(model, hf, ids, run):
    _, cache = run
    expected = hf_rewards(hf, model, ids)
    last = model.cfg.n_layers - 1
    hand = model.unembed(model.ln_final(cache["resid_post", last]))[:, -1, 0]
    assert_close(hand, expected, **ATOL)
    direction = model.tokens_to_residual_directions(0)
    stack = cache.accumulated_resid(apply_ln=True, pos_slice=-1)
    assert_close((stack @ direction)[-1] + model.b_U[0], expected, **ATOL)
    sliced = cache.accumulated_resid(pos_slice=slice(-1, None))
    listed = cache.accumulated_resid(pos_slice=[-1])
    plain = cache.accumulated_resid(pos_slice=-1)
    assert sliced.shape[2] == listed.shape[2] == 1
    assert_close(sliced[:, :, 0], plain) and assert_close(listed[:, :, 0], plain)
    # pos_slice="reward", bridge spelling: TL 4's cache read at each row's reading position
    at_reading = cache.accumulated_resid(apply_ln=True)[
        :, torch.arange(3), model.pool_positions(ids)
    ]
    assert_close(at_reading, stack)
    # every layer's lens against HF's hidden states. TL 4's apply_ln recomputes the final norm's
    # scale for each layer (TL 3.9 applied the last layer's scale to every layer): the last
    # layer is the reward on both, the earlier ones are each normalised by their own RMS here
    for layer in range(model.cfg.n_layers):
        for i, row in enumerate(rows(model, ids)):
            h = hf_layer_outputs(hf, row)[layer][0, -1]
            normed = h / h.pow(2).mean().add(model.cfg.eps).sqrt() * hf.model.norm.weight
            assert_close(
                stack[layer + 1, i] @ direction + model.b_U[0], hf.score(normed)[0], **ATOL
            )


@torch.no_grad()
def test_direct_attribution_adds_up(model, hf, ids, run):
    _, cache = run
    expected = hf_rewards(hf, model, ids) - model.b_U[0]
    direction = model.tokens_to_residual_directions(0)
    assert_close(direction, hf.model.norm.weight * hf.score.weight[0], **ATOL)
    with pytest.raises(NotForRewardModelsError, match="objective index"):
        model.tokens_to_residual_directions("oven")
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
    scale = cache["ln_final.hook_scale"][:, -1, 0]
    for layer in range(model.cfg.n_layers):
        for h in range(model.cfg.n_heads):
            out = cache["z", layer][:, -1, h] @ model.W_O[layer, h]
            assert_close(dla[layer * model.cfg.n_heads + h], (out @ direction) / scale, **ATOL)
    last = model.cfg.n_layers - 1
    neurons = cache.stack_neuron_results(last + 1, pos_slice=-1)
    assert neurons.shape[0] == model.cfg.n_layers * model.cfg.d_mlp
    per = cache.get_neuron_results(last, pos_slice=-1)  # the zoo's MLPs have no output bias
    assert_close(per.sum(-2), cache["mlp_out", last][:, -1], **ATOL)
    stack = cache.accumulated_resid(pos_slice=-1)
    one = cache.logit_attrs(stack[:, 1], tokens=0, pos_slice=-1, batch_slice=1, has_batch_dim=False)
    assert_close(one, cache.logit_attrs(stack, tokens=0, pos_slice=-1)[:, 1])


@torch.no_grad()
def test_unprocessed_models_add_up(hf):
    """Bridge spelling of `from_pretrained_no_processing`: `boot(..., process_weights=False)`.

    TL 4's `apply_ln_to_stack` and `get_full_resid_decomposition(apply_ln=True)` divide by the
    final norm's scale but leave its weight out (the default backend's cache applies it), so on
    unprocessed weights the parts add up once that weight is applied: `model.ln_final.w`.
    """
    model = BridgeRewardModel.boot(zoo_path("scalar"), process_weights=False)
    ids = model.to_tokens([(PROMPT, r) for r in RESPONSES])
    _, cache = model.run_with_cache(ids)
    expected = hf_rewards(hf, model, ids) - model.b_U[0]
    assert_close(model.W_U, hf.score.weight.T, **ATOL)  # the norm's weight is not folded in
    assert_close(model.ln_final.w, hf.model.norm.weight)
    normed = cache.apply_ln_to_stack(cache.decompose_resid(pos_slice=-1), -1, pos_slice=-1)
    assert_close(((normed * model.ln_final.w) @ model.W_U)[..., 0].sum(0), expected, **ATOL)
    assert ((normed @ model.W_U)[..., 0].sum(0) - expected).abs().min() > 0.1  # TL 4 as it is
    head = model.ln_final.w[:, None] * model.W_U
    full = cache.get_full_resid_decomposition(apply_ln=True, pos_slice=-1, project_output_onto=head)
    assert_close(full.sum(0)[:, 0], expected, **ATOL)
    lens = cache.accumulated_resid(apply_ln=True, pos_slice=-1)  # applies ln_final, weight too
    assert_close((lens[-1] @ model.W_U)[:, 0], expected, **ATOL)


def test_objectives_and_the_gated_score(gated):
    model, hf, ids = gated
    with torch.no_grad():
        alone = [hf(input_ids=r) for r in rows(model, ids)]
        logits = model(ids)
        per_obj = model(ids, return_type="objectives")[:, -1]
    assert logits.shape == (3, 18, 1)  # the gated score at every position
    assert_close(logits[:, -1, 0], torch.cat([o.score for o in alone]), **ATOL)
    assert_close(per_obj, torch.cat([o.rewards for o in alone]), **ATOL)
    _, cache = model.run_with_cache(ids)
    normed = model.ln_final(cache["resid_post", model.cfg.n_layers - 1])
    with pytest.raises(AmbiguousObjectiveError, match="gated score"):
        model.unembed(normed)
    with pytest.raises(AmbiguousObjectiveError, match="score_direction"):
        model.tokens_to_residual_directions(0)
    name = model.objective_names[1]
    direction = model.tokens_to_residual_directions(name)
    weight = hf.model.norm.weight * hf.regression_layer.weight[1]
    assert_close(direction, weight, **ATOL)


def test_unknown_hook(model, ids):
    with pytest.raises(UnknownHookError, match="blocks.0.hook_resid_pre"):
        model.run_with_cache(ids, names_filter="blocks.0.hook_resid")


def test_incl_bwd_gives_each_rows_gradient(model, ids, gated):
    name = "blocks.1.hook_resid_post"
    out, cache = model.run_with_cache(ids, return_type="reward", incl_bwd=True)
    assert_close(out, model.rewards(ids), atol=1e-5, rtol=0)
    for i, row in enumerate(rows(model, ids)):  # plain torch: autograd of the row alone
        grabbed: dict = {}

        def keep(act, hook, grabbed=grabbed):
            act.retain_grad()
            grabbed["x"] = act

        with model.bridge.hooks(fwd_hooks=[(name, keep)]):
            model.rewards(row, grad=True).sum().backward()
        real = ids[i] != model.pad_token_id
        assert_close(cache[name + "_grad"][i][real], grabbed["x"].grad[0], atol=1e-5, rtol=1e-4)
        assert float(cache[name + "_grad"][i][~real].abs().sum()) == 0.0
    with pytest.raises(InvalidArgumentError, match="return_type='reward'"):
        model.run_with_cache(ids, incl_bwd=True)
    gated_model, _, gated_ids = gated
    with pytest.raises(BridgeUnsupportedError, match="bwd_hooks"):
        gated_model.run_with_cache(gated_ids, return_type="reward", incl_bwd=True)


def test_pos_slice_prefix_is_refused(model, ids):
    """`run_with_cache(..., pos_slice=prefix)` is refused; TL 4's cache methods slice as TL."""
    for pos_slice in (slice(0, 4), [0, 1], 3, slice(-15, None)):
        with pytest.raises(InvalidArgumentError, match="hold padding in rows"):
            model.run_with_cache(ids, pos_slice=pos_slice)
    _, sliced = model.run_with_cache(ids, pos_slice=slice(-12, None))  # every row's own tokens
    assert sliced["resid_post", 0].shape[1] == 12


# -- interventions --------------------------------------------------------------------------
@torch.no_grad()
def test_zero_ablation_and_the_hooks_context(model, hf, ids):
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


@torch.no_grad()
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

    got = model.run_with_hooks(ids, fwd_hooks=[(utilities.get_act_name("z", layer), ablate)])
    o_proj = hf.model.layers[layer].self_attn.o_proj
    expected = hf_rewards(hf, model, ids, lambda i: [(o_proj, hf_ablate, True)])
    assert_close(got[:, -1, 0], expected, **ATOL)


@torch.no_grad()
@pytest.mark.parametrize("column", [-1, 0])
def test_steering_the_residual(model, hf, ids, column):
    layer = 1
    v = torch.linspace(-1, 1, model.cfg.d_model)

    def steer(resid, hook):
        resid[:, column] += v
        return resid

    def hf_steer(module, args, out):
        out = out.clone()
        out[:, column] += v
        return out

    got = model.run_with_hooks(ids, fwd_hooks=[(f"blocks.{layer}.hook_resid_post", steer)])
    expected = hf_rewards(hf, model, ids, lambda i: [(hf.model.layers[layer], hf_steer, False)])
    assert_close(got[:, -1, 0], expected, **ATOL)
    hooks = [(f"blocks.{layer}.hook_resid_post", steer)]
    assert_close(model.run_with_hooks(ids, return_type="reward", fwd_hooks=hooks), expected)
    model.add_perma_hook(f"blocks.{layer}.hook_resid_post", steer)
    try:
        assert_close(model.rewards(ids), expected, **ATOL)
    finally:
        model.reset_hooks(including_permanent=True)
    assert_close(model.rewards(ids), hf_rewards(hf, model, ids), **ATOL)


def knockout_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kw):
    """Plain-torch causal attention of one unpadded row, every weight on position 0 zeroed
    (as `tests/test_tl_habits.py`)."""
    groups = query.shape[1] // key.shape[1]
    key = key.repeat_interleave(groups, dim=1)
    value = value.repeat_interleave(groups, dim=1)
    scores = query @ key.transpose(-1, -2) * scaling
    n_q, n_k = scores.shape[-2:]
    causal = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
    weights = scores.masked_fill(~causal, float("-inf")).softmax(-1).clone()
    weights[..., 0] = 0.0
    return (weights @ value).transpose(1, 2).contiguous(), weights


@torch.no_grad()
def test_knocking_out_attention_to_bos(model, hf, ids):
    def knock(pattern, hook):
        pattern[:, :, :, 0] = 0.0
        return pattern

    hooks = [(f"blocks.{layer}.attn.hook_pattern", knock) for layer in range(model.cfg.n_layers)]
    ours = model.run_with_hooks(ids, return_type="reward", fwd_hooks=hooks)
    AttentionInterface.register("bos_knockout", knockout_attention)
    hf.set_attn_implementation("bos_knockout")
    try:
        expected = hf_rewards(hf, model, ids)
    finally:
        hf.set_attn_implementation("eager")
    assert_close(ours, expected, **ATOL)
    assert (ours - model.rewards(ids)).abs().max() > 1e-2  # the knockout matters


@torch.no_grad()
def test_plain_torch_hooks(model, hf, ids):
    row = ids[:1]  # one unpadded row: a hook that mixes positions sees the same sequence as HF

    def centre(module, args, out):
        return out - out.mean(1, keepdim=True)

    handle = model.blocks[-1].register_forward_hook(centre)
    try:
        got = model.rewards(row)
    finally:
        handle.remove()
    assert_close(got[0], hf_score(hf, row, [(hf.model.layers[-1], centre, False)]), **ATOL)
    assert (got[0] - model.rewards(row)[0]).abs() > 1e-2  # the hook matters

    v = torch.linspace(-2, 2, model.cfg.d_model)

    def shift(module, args):
        return (args[0] + v,)

    handle = model.ln_final.register_forward_pre_hook(shift)
    try:
        got = model.rewards(ids)
    finally:
        handle.remove()
    expected = hf_rewards(hf, model, ids, lambda i: [(hf.model.norm, shift, True)])
    assert_close(got, expected, **ATOL)
    assert (got - model.rewards(ids)).abs().min() > 1e-2  # the hook matters


# -- TransformerLens's own patching ---------------------------------------------------------
def hf_patch_grid(model, hf, ids, module_of):
    """HF, one row at a time: layer × position grid of the rejected row's reward with the chosen
    row's block input copied in, column by column of the batch (as `tests/test_habits.py`)."""
    clean, corrupted = rows(model, ids)
    width, pad = ids.shape[1], ids.shape[1] - corrupted.shape[1]
    grid = torch.zeros(model.cfg.n_layers, width)
    store = {}
    for layer in range(model.cfg.n_layers):
        hf_score(hf, clean, [(module_of(layer), lambda m, a: store.update(x=a[0].clone()), True)])
        for p in range(width):
            if 1 <= p <= pad:  # a pad of the rejected row: nothing reads it
                grid[layer, p] = hf_score(hf, corrupted)
                continue

            def put(module, args, p=p):
                x = args[0].clone()
                x[:, 0 if p == 0 else p - pad] = store["x"][:, p]
                return (x,)

            grid[layer, p] = hf_score(hf, corrupted, [(module_of(layer), put, True)])
    return grid


@torch.no_grad()
def test_transformer_lens_patching_on_one_batch(model, hf, ids):
    pair = ids[:2]  # chosen (18 tokens) and rejected (13) in one to_tokens batch
    _, clean_cache = model.run_with_cache(pair[:1])

    def metric(logits):
        return logits[0, -1, 0]

    grid = patching.get_act_patch_resid_pre(model, pair[1:], clean_cache, metric)
    expected = hf_patch_grid(model, hf, pair, lambda layer: hf.model.layers[layer])
    assert_close(grid, expected, **ATOL)
    every = patching.get_act_patch_block_every(model, pair[1:], clean_cache, metric)
    assert_close(every[0], grid)
    ours = activation_patching(
        model, pair[0], pair[1], site="resid_pre", alignment="end", metric=lambda r: r
    )
    n = ours.values.shape[1] - 1  # every column but the shorter row's first token
    assert_close(ours.values[:, 1:].float(), grid[:, -n:], **ATOL)


@torch.no_grad()
def test_transformer_lens_head_patching(model, hf, ids):
    pair = ids[:2]
    _, clean_cache = model.run_with_cache(pair[:1])
    grid = patching.get_act_patch_attn_head_out_all_pos(
        model, pair[1:], clean_cache, lambda logits: logits[0, -1, 0]
    )
    clean, corrupted = rows(model, pair)
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


def test_transformer_lens_patching_of_two_lengths_is_refused(model):
    chosen = model.to_tokens((PROMPT, RESPONSES[0]))
    rejected = model.to_tokens((PROMPT, RESPONSES[1]))
    for clean, corrupted in ((chosen, rejected), (rejected, chosen)):
        _, cache = model.run_with_cache(clean)
        with pytest.raises(AlignmentError, match="one batch"):
            patching.get_act_patch_resid_pre(model, corrupted, cache, lambda lg: lg[0, -1, 0])


def test_over_long_conversations_are_never_cut_unasked(model):
    long = (PROMPT, "the oven " * 40)
    for flag in (True, False):
        with pytest.raises(SequenceTooLongError, match="truncate='right'"):
            model.to_tokens(long, truncate=flag)
    cut = model.to_tokens(long, truncate="right")
    assert cut.shape[1] == model.cfg.n_ctx and cut[0, -1] == 2  # EOS stays
    with pytest.raises(InvalidArgumentError, match="truncate"):
        model.to_tokens(long, truncate="middle")


# -- weights --------------------------------------------------------------------------------
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
    assert_close(model.W_U, hf.model.norm.weight[:, None] * hf.score.weight.T, **ATOL)


@torch.no_grad()
def test_half_is_the_float16_model(ids):
    loaded = BridgeRewardModel.boot(zoo_path("scalar"), dtype=torch.float16)
    halved = BridgeRewardModel.boot(zoo_path("scalar")).half()
    assert isinstance(halved, BridgeRewardModel) and halved.cfg.dtype == torch.float16
    assert torch.equal(halved.rewards(ids), loaded.rewards(ids))
    back = halved.float()
    assert back.cfg.dtype == torch.float32 and back.rewards(ids).dtype == torch.float32


# -- the table ------------------------------------------------------------------------------
def test_every_habit_has_one_entry():
    """Every catalogue row is in `BRIDGE` once (read from the source: a dict keeps one of two)."""
    tree = ast.parse(Path(__file__).read_text())
    table = next(
        n.value for n in tree.body if isinstance(n, ast.AnnAssign) and n.target.id == "BRIDGE"
    )
    written = [key.value for key in table.keys]
    assert sorted(written) == sorted(h.key for h in HABITS)
    for key, verdict in BRIDGE.items():
        assert verdict == "checked" or verdict.startswith("not applicable on the bridge: "), key
    checked = sum(v == "checked" for v in BRIDGE.values())
    assert (checked, len(BRIDGE) - checked) == (79, 12)
