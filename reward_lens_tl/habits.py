"""The catalogue of TransformerLens (and sae_lens) habits and what each does on a reward model.

Internal (no public names): read by `tests/test_habits.py` and the docs build (`docs/hooks.py`).

One entry per idiom a TL user writes routinely: the code, and either what it gives on a reward
model (`right`: the number equals an independent computation from the plain HF model, in
`tests/test_habits.py`) or the typed error it raises and what to use instead
(`refused`). The habits table of the docs page "Coming from TransformerLens" is rendered from
this list at build time (`markdown_table`, `docs/hooks.py`), and a test checks that every entry
has a test, so the table cannot drift.

Examples:
    >>> len(HABITS) >= 60, {h.verdict for h in HABITS} == {"right", "refused"}
    (True, True)
    >>> markdown_table().splitlines()[0]
    '| # | TL idiom | on a reward model |'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__: list[str] = []


@dataclass(frozen=True)
class Habit:
    """One idiom: `key` (used by the tests), the code, and its verdict and explanation."""

    key: str
    idiom: str
    verdict: Literal["right", "refused"]
    detail: str

    def row(self, number: int) -> str:
        """This habit's row of the habits table.

        Args:
            number: The row's number.

        Returns:
            The Markdown table row.
        """
        said = "right: " if self.verdict == "right" else "refused: "
        return f"| {number} | `{self.idiom}` | {said}{self.detail} |"


def _right(key: str, idiom: str, detail: str) -> Habit:
    return Habit(key, idiom, "right", detail)


def _refused(key: str, idiom: str, detail: str) -> Habit:
    return Habit(key, idiom, "refused", detail)


HABITS: tuple[Habit, ...] = (
    # -- inputs ------------------------------------------------------------------------------
    _refused(
        "to_tokens_text",
        "model.to_tokens(text)",
        "`NotForRewardModelsError`: use `model.to_tokens((prompt, response))` (the template changes rewards)",
    ),
    _right(
        "to_tokens_pair",
        "model.to_tokens((prompt, response))",
        "the conversation's ids (template, BOS, EOS), as HF's tokenizer gives them",
    ),
    _right(
        "to_tokens_batch",
        "model.to_tokens([(p, chosen), (p, rejected)])",
        "pads after each row's first token: column 0 is every row's first token, −1 its reading token",
    ),
    _right(
        "first_column",
        "ids[:, 0], ids[:, -1]",
        "every row's first token (BOS) and its last (EOS), in rows of 18, 13 and 16 tokens",
    ),
    _right(
        "padding_side",
        "model.tokenizer.padding_side; model.to_tokens(..., padding_side='right')",
        "`'left'`, as `to_tokens` and `pad_batch` pad (the model's own tokenizer copy); right padding when asked, with the `ReadingPositionWarning`",
    ),
    _right(
        "default_padding_side_right",
        "from_pretrained(..., default_padding_side='right')",
        "the tokenizer says `'right'` and `to_tokens` pads right (forwards warn; `rewards` read each row)",
    ),
    _right(
        "tl_get_attention_mask",
        "utils.get_attention_mask(model.tokenizer, ids, prepend_bos)",
        "the batch's mask (pads after the first token): TL's helper reads the layout for the model's tokenizer",
    ),
    _right(
        "gather_after_asking",
        "reading = lengths - 1 if tok.padding_side == 'right' else -1; logits[rows, reading]",
        "each row's reward: the tokenizer says how the batch is padded",
    ),
    _right(
        "logits_first",
        "model(ids)[:, 0, 0]",
        "the reward read at each row's first token (the gated score with the row's gate on ArmoRM-style heads), equal to HF's head there",
    ),
    _right(
        "to_str_tokens_first",
        "model.to_str_tokens(ids[i])[0]",
        "`'<bos>'` in every row",
    ),
    _right(
        "to_str_tokens_pair",
        "model.to_str_tokens((prompt, response))",
        "the tokens of the encoded conversation",
    ),
    _right(
        "to_str_tokens_ids",
        "model.to_str_tokens(ids[0])",
        "TL's answer (pads included, as TL shows them)",
    ),
    _right("to_string", "model.to_string(ids[0])", "TL's answer"),
    _refused(
        "to_single_token",
        "model.to_single_token(' word')",
        "`NotForRewardModelsError`: outputs are objectives, pass an objective index",
    ),
    _right(
        "pad_batch",
        "pad_batch([enc_a, enc_b], pad_id)",
        "ids and mask padded after each row's first token (`EncodedConversation`s accepted)",
    ),
    _right(
        "left_no_mask",
        "model(left_padded_ids)  # no attention_mask",
        "the mask is inferred from the pad ids (after the first token, or every pad first as an HF tokenizer pads); rewards equal one-by-one",
    ),
    _refused(
        "left_pad_is_bos",
        "model(ids)  # pad == BOS, runs of pad ids differ",
        "`MissingAttentionMaskError`: pass `attention_mask`",
    ),
    _right(
        "right_padded_warns",
        "model(right_padded_ids)[:, -1]",
        'warns once per line (`ReadingPositionWarning`): −1 is a pad in the shorter rows; left-pad or read `pos_slice="reward"`',
    ),
    # -- the forward -------------------------------------------------------------------------
    _right("logits_last", "logits[:, -1, 0]", "each row's reward (HF's pooled score)"),
    _right(
        "logits_last_gated",
        "logits[:, -1, 0]  # ArmoRM-style head",
        "the gated score `model.rewards` returns (logits are `[batch, pos, 1]`)",
    ),
    _right(
        "logits_objectives",
        "model(ids, return_type='objectives')[:, -1]",
        "every objective's head output at the reading token",
    ),
    _right("rewards", "model.rewards(ids)", "HF's pooled reward, every row read by HF's rule"),
    _refused(
        "return_type_loss",
        "model(ids, return_type='loss')",
        "`NotForRewardModelsError`: use `return_type='reward'`",
    ),
    _refused(
        "generate",
        "model.generate(...)",
        "`NotForRewardModelsError`: generate with the policy, score with `model.score`",
    ),
    _refused(
        "loss_fn",
        "model.loss_fn(logits, ids)",
        "`NotForRewardModelsError`: `-logsigmoid(margin)` of `score_pairs`",
    ),
    _refused(
        "lm_cross_entropy_loss",
        "utils.lm_cross_entropy_loss(logits, ids)",
        "`NotForRewardModelsError`: no next-token distribution",
    ),
    _refused(
        "lm_accuracy",
        "utils.lm_accuracy(logits, ids)",
        "`NotForRewardModelsError`: no next-token distribution (pairwise accuracy: `reward_lens_tl.evals`)",
    ),
    _refused(
        "test_prompt",
        "utils.test_prompt(prompt, answer, model)",
        "`NotForRewardModelsError`: use `model.score(prompt, response)`",
    ),
    _right(
        "stop_at_layer",
        "model(ids, stop_at_layer=L)[:, -1]",
        "the residual stream at each row's reading token",
    ),
    _right(
        "start_at_layer",
        "model(resid, start_at_layer=L, tokens=ids)[:, -1, 0]",
        "each row's reward (mask inferred from `tokens`)",
    ),
    _right(
        "start_at_layer_reward",
        "model(resid, start_at_layer=L, tokens=ids, return_type='reward')",
        "each row's reward on a padded batch",
    ),
    # -- the cache ---------------------------------------------------------------------------
    _right(
        "cache_resid_last",
        "cache['resid_post', L][:, -1]",
        "the residual at each row's reading token (HF hidden state)",
    ),
    _right(
        "cache_pattern_last",
        "cache['pattern', L][:, h, -1]",
        "the reading token's attention (pads get weight 0), equal to HF's",
    ),
    _right("cache_z_last", "cache['z', L][:, -1, h]", "head `h`'s value mix at the reading token"),
    _right(
        "cache_first",
        "cache['resid_post', L][:, 0]",
        "the residual at each row's first token (HF hidden state)",
    ),
    _right(
        "attention_to_first",
        "cache['pattern', L][:, h, -1, 0]",
        "the reading token's attention to BOS (the attention sink), equal to HF's; `[:, h, :, 0]` for every real query too, and a pad's pattern row is all zeros",
    ),
    _right("cache_mlp_last", "cache['mlp_out', L][:, -1]", "the MLP output at the reading token"),
    _right(
        "hand_lens",
        "model.unembed(model.ln_final(cache['resid_post', L]))[:, -1]",
        "the reward read out after layer L (each objective on an ungated multi-objective head)",
    ),
    _refused(
        "unembed_gated",
        "model.unembed(model.ln_final(resid))[:, -1, 0]  # ArmoRM-style head",
        "`AmbiguousObjectiveError`: the gate is not in `unembed`; `cache.residual_stack_to_reward(stack)`, `model.score_direction(ids)`, or name an objective",
    ),
    _right(
        "incl_bwd_batch",
        "model.run_with_cache(ids, return_type='reward', incl_bwd=True)",
        "`*_grad` entries are each row's own reward's gradient (the backward of the rows' sum: rows never interact); other return types are refused",
    ),
    _refused(
        "unknown_hook",
        "model.run_with_cache(ids, names_filter='blocks.0.hook_resid')",
        "`UnknownHookError` with the closest names",
    ),
    _right(
        "remove_batch_dim",
        "model.run_with_cache(row, remove_batch_dim=True); cache['resid_post', L][-1]",
        "the row's reading token",
    ),
    _right(
        "run_with_cache_pos_slice",
        "model.run_with_cache(ids, pos_slice=-1)",
        "the reading token only; `cache.reward_positions` follow the slice",
    ),
    _right(
        "accumulated_resid",
        "cache.accumulated_resid(apply_ln=True, pos_slice=-1) @ direction",
        "a reward lens whose last layer + `b_R` is the reward",
    ),
    _right(
        "accumulated_resid_slice",
        "cache.accumulated_resid(pos_slice=slice(-1, None))",
        "the reading token, position axis kept",
    ),
    _right(
        "accumulated_resid_list",
        "cache.accumulated_resid(pos_slice=[-1])",
        "the reading token, position axis kept",
    ),
    _refused(
        "pos_slice_prefix",
        "model.run_with_cache(ids, pos_slice=slice(0, k)); cache.accumulated_resid(pos_slice=[0, 1])",
        "`InvalidArgumentError` when the columns hold some row's pads (rows of different lengths share only column 0 and −1); a raw `cache[...][:, :k]` holds them as in TL: index by `padding.real_columns(mask)`",
    ),
    _right(
        "pos_slice_reward",
        "cache.accumulated_resid(pos_slice='reward')",
        "each row's own reading token, whatever the padding",
    ),
    _right(
        "decompose_resid",
        "cache.logit_attrs(cache.decompose_resid(pos_slice=-1), tokens=0)",
        "parts that sum to the reward − `b_R`",
    ),
    _right(
        "stack_head_results",
        "cache.apply_ln_to_stack(cache.stack_head_results(-1, pos_slice=-1), pos_slice=-1) @ direction",
        "per-head DLA, equal to a plain-torch computation",
    ),
    _right(
        "stack_neuron_results",
        "cache.stack_neuron_results(L, pos_slice=-1)",
        "per-neuron outputs at the reading token",
    ),
    _right(
        "get_neuron_results",
        "cache.get_neuron_results(L, pos_slice=-1)",
        "per-neuron outputs at the reading token",
    ),
    _right(
        "full_decomposition",
        "cache.get_full_resid_decomposition(apply_ln=True, pos_slice=-1, project_output_onto=model.W_U)",
        "parts that sum to the reward − `b_R`",
    ),
    _right(
        "full_decomposition_1d",
        "cache.get_full_resid_decomposition(..., project_output_onto=model.w_r)",
        "the same, `[component, batch]`",
    ),
    _right(
        "logit_attrs_no_batch",
        "cache.logit_attrs(stack_row, tokens=0, pos_slice=-1, batch_slice=i, has_batch_dim=False)",
        "row `i`'s attributions",
    ),
    _refused(
        "logit_attrs_no_batch_ambiguous",
        "cache.logit_attrs(stack_row, tokens=0, has_batch_dim=False)  # several rows",
        "`InvalidArgumentError`: pass `batch_slice=`",
    ),
    _right(
        "no_processing_apply_ln",
        "from_pretrained_no_processing(...); cache.apply_ln_to_stack(stack, -1) @ model.W_U",
        "the final norm's weight is applied: sums to the reward",
    ),
    _right(
        "no_processing_projected",
        "from_pretrained_no_processing(...); cache.get_full_resid_decomposition(apply_ln=True, project_output_onto=model.W_U)",
        "sums to the reward",
    ),
    _refused(
        "final_layernorm_bias",
        "unprocessed LayerNorm model (GPT-2); decompositions with `apply_ln=True`",
        "`RewardLensError`: the final LN bias belongs to no component; load with `fold_ln=True`",
    ),
    _right(
        "residual_directions",
        "model.tokens_to_residual_directions(0)",
        "`W_R[:, 0]`, the reward direction",
    ),
    _refused(
        "residual_directions_text",
        "model.tokens_to_residual_directions('word')",
        "`NotForRewardModelsError`: pass an objective index or name",
    ),
    _refused(
        "residual_directions_gated",
        "model.tokens_to_residual_directions(0)  # ArmoRM-style head",
        "`AmbiguousObjectiveError`: the score's direction is per input (`model.score_direction(ids)`), or name an objective",
    ),
    _right(
        "residual_directions_named",
        "model.tokens_to_residual_directions('helpfulness')",
        "that objective's head column",
    ),
    _right(
        "residual_stack_to_reward",
        "cache.residual_stack_to_reward(cache.accumulated_resid(pos_slice=-1))",
        "the model's reward read out (gated score per row on ArmoRM-style heads)",
    ),
    _refused(
        "logit_attrs_gated",
        "cache.logit_attrs(stack, tokens=0)  # ArmoRM-style head",
        "`AmbiguousObjectiveError`: `cache.residual_stack_to_reward(stack)`",
    ),
    # -- hooks and interventions -------------------------------------------------------------
    _right(
        "zero_ablation",
        "model.run_with_hooks(ids, fwd_hooks=[('blocks.L.attn.hook_z', zero_head_h)])",
        "equal to the HF model with that head's `o_proj` input zeroed",
    ),
    _right(
        "mean_ablation",
        "run_with_hooks(... hook_z ← mean over the batch ...)",
        "equal to the HF model with the mean head output",
    ),
    _right(
        "steering",
        "hook_resid_post: resid[:, -1] += v",
        "equal to HF with `v` added to that layer's output at the reading token",
    ),
    _right(
        "knockout_first",
        "hook_pattern: pattern[:, :, :, 0] = 0",
        "equal to HF with every weight on BOS zeroed, row by row",
    ),
    _right(
        "steer_first",
        "hook_resid_post: resid[:, 0] += v",
        "equal to HF with `v` added at each row's first token",
    ),
    _right(
        "hooks_context",
        "with model.hooks(fwd_hooks=...): model(ids)",
        "TL's context manager; hooks removed afterwards",
    ),
    _right(
        "torch_hook_last_block",
        "model.blocks[-1].register_forward_hook(centre_over_positions)",
        "the plain-path reward: optimisations switch off when a hook could see them",
    ),
    _right(
        "torch_pre_hook", "model.ln_final.register_forward_pre_hook(...)", "the plain-path reward"
    ),
    _right(
        "perma_hook", "model.add_perma_hook(name, fn)", "applies to every later forward, as in TL"
    ),
    # -- patching ----------------------------------------------------------------------------
    _right(
        "tl_patching_one_batch",
        "patching.get_act_patch_resid_pre(model, ids[1:], clean_cache, metric)  # rows of one to_tokens batch",
        "end-aligned at the reading token, equal to HF patched one-by-one",
    ),
    _right(
        "tl_patching_heads",
        "patching.get_act_patch_attn_head_out_all_pos(...)",
        "end-aligned, equal to a plain hook computation",
    ),
    _right("tl_patching_block_every", "patching.get_act_patch_block_every(...)", "end-aligned"),
    _refused(
        "tl_patching_lengths",
        "patching.get_act_patch_resid_pre(model, rejected_ids, chosen_cache, metric)  # 13 vs 18 tokens",
        "`AlignmentError`: encode both in one batch, or `activation_patching(..., alignment='end')`",
    ),
    _refused(
        "to_tokens_too_long",
        "model.to_tokens((prompt, response))  # longer than n_ctx",
        "`SequenceTooLongError` naming the modes: `to_tokens(..., truncate='right'|'left'|'both')` cuts by one (template, end-of-turn and EOS stay)",
    ),
    _right(
        "activation_patching",
        "activation_patching(model, chosen, rejected, site='resid_pre', alignment='end')",
        "end-aligned, batched, equal to TL's on one batch at every column but the shorter row's first token (TL pairs the two first tokens there)",
    ),
    # -- weights -----------------------------------------------------------------------------
    _right(
        "OV", "model.OV[L, h]", "a `FactoredMatrix` equal to HF's `W_V W_O` (norm weight folded in)"
    ),
    _right(
        "QK",
        "model.QK[L, h]",
        "a `FactoredMatrix` equal to HF's `W_Q W_Kᵀ` (norm weight folded in)",
    ),
    _right("W_U", "model.W_U", "the reward head (`W_R`), final norm weight folded in"),
    _right(
        "hub_id",
        "HookedRewardModel.from_pretrained('org/name', revision='main', dtype=torch.bfloat16, device='cuda')",
        "resolved with huggingface_hub (config, tokenizer and safetensors only) and converted one layer at a time, straight to the device",
    ),
    _right(
        "half",
        "model.half(); model.bfloat16(); model.float()",
        "`cfg.dtype` follows: the same model as `from_pretrained(..., dtype=torch.float16)`",
    ),
    _refused(
        "n_devices",
        "from_pretrained(..., n_devices=2)",
        "a typed error: one model over several devices is not wired yet; load it in bf16 on one device, or run pairs under torchrun",
    ),
    _refused(
        "center_unembed",
        "from_pretrained(..., center_unembed=True)",
        "a typed error: centring a one-column head zeroes it (`False` is accepted)",
    ),
    _refused(
        "unknown_option",
        "from_pretrained(..., fold_lnn=True)",
        "a typed error naming the close match",
    ),
    # -- sae_lens ----------------------------------------------------------------------------
    _right(
        "sae_cache",
        "model.add_sae(sae); cache[sae.cfg.metadata.hook_name + '.hook_sae_acts_post'][:, -1]",
        "the latents at the reading token, equal to `sae.encode` of HF's hidden state",
    ),
    _right(
        "run_with_cache_with_saes",
        "model.run_with_cache_with_saes(ids, saes=[sae])",
        "the spliced reward and latents at the reading token",
    ),
    _refused(
        "sae_exclude_special",
        "model.add_sae(sae, exclude_special_tokens=True)",
        "a typed error: the reward is read at a special token (EOS), which would bypass the SAE",
    ),
)


def markdown_table() -> str:
    """The "what changes" table of the docs, one row per `HABITS` entry."""
    head = ["| # | TL idiom | on a reward model |", "|---|---|---|"]
    return "\n".join(head + [h.row(i) for i, h in enumerate(HABITS, 1)])


def by_key() -> dict[str, Habit]:
    """Every habit, by its key."""
    return {h.key: h for h in HABITS}
