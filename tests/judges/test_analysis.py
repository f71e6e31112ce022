"""Judge and PRM analyses against HF: attribution complete and summing to HF's verdict / step
margin, lens, patching, linearised attribution of non-linear scores, position bias, step
segments, first-error analysis (also on non-linear heads)."""

from __future__ import annotations

from functools import cache

import pytest
import torch
from torch import Tensor

from reward_lens_tl.attribution import direct_attribution
from reward_lens_tl.errors import InvalidArgumentError, NonlinearUnembedError, RewardLensError
from reward_lens_tl.judges import (
    HookedJudge,
    HookedPRM,
    first_error_analysis,
    linearised_attribution,
    position_bias,
    step_segments,
)
from reward_lens_tl.lens import reward_lens
from reward_lens_tl.padding import reading_position_known
from reward_lens_tl.patching import activation_patching, attribution_patching
from reward_lens_tl.testing import tiny_causal_lm
from tests.judges.conftest import STEPS

TOL = 1e-4


TEMPLATE = "{prompt} w8 {response} w9"


PAIR_TEMPLATE = "{prompt} w8 {response_a} w7 {response_b} w9"


TAG, LABELS, TAG_ID = "w40", ("w41", "w42"), 40


PROMPT = "w12 w13"


#: A wrong solution and the same with step 1 corrected (same token counts, to patch across).
WRONG = ["w20 w21", "w22 w23", "w24", "w25 w26"]


RIGHT = ["w20 w21", "w30 w31", "w24", "w25 w26"]


#: The same with step 0 corrected instead.
RIGHT_0 = ["w35 w36", "w22 w23", "w24", "w25 w26"]


PROMPT_TOKENS = 3  # <bos> w12 w13


@cache
def judge_pair(family: str, kind: str = "pointwise"):
    hf, tok = tiny_causal_lm(family)
    verdict = ("w10", "w11", "w12", "w13", "w14") if kind == "likert" else ("w10", "w11")
    template = PAIR_TEMPLATE if kind == "pairwise" else TEMPLATE
    judge = HookedJudge.from_pretrained(
        hf, kind=kind, tokenizer=tok, verdict=verdict, template=template
    )
    return hf, tok, judge


@cache
def prm_pair(family: str, kind: str = "token"):
    hf, tok = tiny_causal_lm(family, head={"token": "lm"}.get(kind, kind))
    prm = HookedPRM.from_pretrained(
        hf, kind=kind, tokenizer=tok, step_tag=TAG, labels=LABELS, step_format="{step} {tag}"
    )
    return hf, tok, prm


def hf_hidden(hf, ids: Tensor) -> Tensor:
    """HF's final normalised hidden states of one unpadded row, ``[pos, d_model]``."""
    with torch.no_grad():
        return hf.model(input_ids=ids).last_hidden_state[0]


def hf_logits(hf, ids: Tensor) -> Tensor:
    with torch.no_grad():
        return hf(input_ids=ids).logits[0]


def tag_positions(ids: Tensor) -> list[int]:
    return (ids[0] == TAG_ID).nonzero().flatten().tolist()


# -- direct attribution and the lens -----------------------------------------------------------
@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_judge_attribution_is_complete_and_sums_to_hf_margin(family):
    hf, _, judge = judge_pair(family)
    ids = judge.item_ids("w12 w13 w14", "w20 w21")
    attr = direct_attribution(judge, ids)
    logits = hf_logits(hf, ids)[-1]
    torch.testing.assert_close(attr.rewards, (logits[10] - logits[11])[None], atol=TOL, rtol=0)
    torch.testing.assert_close(attr.values.sum(0) + attr.head_bias, attr.rewards, atol=TOL, rtol=0)
    assert {"embed", "L0H0", "L1H3", "mlp1"} <= set(attr.labels)


@pytest.mark.parametrize(("family", "kind"), [("llama", "token"), ("qwen2", "value")])
def test_prm_step_attribution_is_complete_and_sums_to_hf_step_margin(family, kind):
    hf, _, prm = prm_pair(family, kind)
    ids = prm.encode_steps(PROMPT, WRONG).ids
    logits = hf_logits(hf, ids)
    for k, tag in enumerate(tag_positions(ids)):
        attr = direct_attribution(prm.step(k), ids)
        want = logits[tag, 41] - logits[tag, 42] if kind == "token" else logits[tag, 0]
        torch.testing.assert_close(attr.rewards, want[None], atol=TOL, rtol=0)
        torch.testing.assert_close(attr.total(), attr.rewards, atol=TOL, rtol=0)


def test_lens_final_site_is_the_reward():
    _, _, judge = judge_pair("qwen2")
    _, _, prm = prm_pair("qwen2")
    ids = judge.item_ids(["w12", "w13 w14 w15"], ["w20 w21 w22", "w23"])  # left padded
    lens = reward_lens(judge, ids)
    assert lens.labels[-1] == "final" and lens.values.shape == (len(lens.labels), 2)
    torch.testing.assert_close(lens.values[-1], judge.rewards(ids), atol=TOL, rtol=0)
    enc = prm.encode_steps(PROMPT, WRONG)
    margins = prm.step_margins(enc.ids)[0]
    for k in range(len(WRONG)):
        step_lens = reward_lens(prm.step(k), enc.ids)
        torch.testing.assert_close(step_lens.values[-1, 0], margins[k], atol=TOL, rtol=0)


def test_exact_readouts_of_a_non_linear_score_say_what_is_linear():
    _, _, judge = judge_pair("llama", "likert")
    ids = judge.item_ids("w12", "w20")
    with pytest.raises(RewardLensError, match="linearised_attribution"):
        direct_attribution(judge, ids)
    per_grade = direct_attribution(judge, ids, objective="w12")  # one grade's logit: linear
    torch.testing.assert_close(per_grade.rewards, judge.verdict_logits(ids)[:, 2], atol=TOL, rtol=0)
    assert issubclass(NonlinearUnembedError, RewardLensError)


# -- patching ----------------------------------------------------------------------------------
def patch_cases():
    _, _, judge = judge_pair("llama")
    _, _, prm = prm_pair("llama")
    clean_j = judge.item_ids("w12 w13", "w20 w21")
    corrupt_j = judge.item_ids("w12 w13", "w50 w51")
    clean_p = prm.encode_steps(PROMPT, RIGHT).ids
    corrupt_p = prm.encode_steps(PROMPT, WRONG).ids
    return {"judge": (judge, clean_j, corrupt_j), "prm": (prm.step(1), clean_p, corrupt_p)}


def reading_prefix(model, ids: Tensor) -> list[int]:
    """Every position up to the reading one (a PRM step's tag; later positions cannot matter)."""
    return list(range(int(model.pool_positions(ids)[0]) + 1))


@pytest.mark.parametrize("case", ["judge", "prm"])
def test_activation_patching_every_position_restores_the_source(case):
    model, clean, corrupt = patch_cases()[case]
    r_clean, r_corrupt = model.pooled_rewards(clean), model.pooled_rewards(corrupt)
    assert (r_clean - r_corrupt).abs() > 1e-3
    every = reading_prefix(model, clean)
    res = activation_patching(model, clean, corrupt, positions=every, by_position=False)
    assert res.values.shape == (model.cfg.n_layers,)
    assert res.rewards is not None
    torch.testing.assert_close(
        res.rewards.float(), r_clean.expand(model.cfg.n_layers), atol=TOL, rtol=0
    )
    torch.testing.assert_close(res.values, torch.ones(model.cfg.n_layers), atol=1e-3, rtol=0)
    assert res.target_reward == pytest.approx(float(r_corrupt), abs=TOL)
    per_position = activation_patching(model, clean, corrupt, layers=[1])
    assert per_position.values.shape == (1, len(every))


def first_order_patch(model, clean: Tensor, corrupt: Tensor, layer: int) -> Tensor:
    """``R(corrupt) + ∇R · (resid_clean − resid_corrupt)`` at ``blocks.{layer}.hook_resid_pre``,
    every position, by a plain TL hook and autograd."""
    name = f"blocks.{layer}.hook_resid_pre"
    with reading_position_known():  # a PRM step is read at its tag, not at -1: known here
        _, clean_cache = model.run_with_cache(clean, names_filter=[name], return_type=None)
    grabbed: dict[str, Tensor] = {}

    def grab(act, hook):
        leaf = act.detach().requires_grad_(True)
        grabbed["x"] = leaf
        return leaf

    with torch.enable_grad(), model.hooks(fwd_hooks=[(name, grab)]):
        reward = model(corrupt, "reward")
        (grad,) = torch.autograd.grad(reward.sum(), grabbed["x"])
    delta = clean_cache[name] - grabbed["x"].detach()
    return reward.detach()[0] + (grad * delta).sum()


@pytest.mark.parametrize("case", ["judge", "prm"])
def test_attribution_patching_is_the_first_order_term(case):
    model, clean, corrupt = patch_cases()[case]
    every = reading_prefix(model, clean)
    res = attribution_patching(
        model, clean, corrupt, positions=every, by_position=False, metric=lambda r: r
    )
    assert res.values.shape == (model.cfg.n_layers,)
    want = torch.stack([first_order_patch(model, clean, corrupt, layer) for layer in range(2)])
    torch.testing.assert_close(res.values, want.float(), atol=TOL, rtol=0)


# -- linearised attribution --------------------------------------------------------------------
def likert_score(logits: Tensor, cap: float | None) -> Tensor:
    capped = logits if cap is None else cap * torch.tanh(logits / cap)
    grades = torch.arange(1, logits.shape[-1] + 1, dtype=logits.dtype)
    return (torch.softmax(capped, -1) * grades).sum(-1)


@pytest.mark.parametrize("family", ["llama", "gemma2"])
def test_likert_linearised_attribution_is_the_first_order_term(family):
    """On a left-padded batch; the reference runs each row alone through HF."""
    hf, tok, judge = judge_pair(family, "likert")
    items = [("w12 w13", "w20 w21 w22"), ("w14", "w23")]
    cap = hf.config.final_logit_softcapping if family == "gemma2" else None
    first_order, scores = [], []
    for prompt, response in items:
        row = torch.tensor([tok(TEMPLATE.format(prompt=prompt, response=response))["input_ids"]])
        raw = hf_hidden(hf, row)[-1] @ hf.lm_head.weight[10:15].T  # uncapped verdict logits
        point = raw.detach().requires_grad_(True)
        (grad,) = torch.autograd.grad(likert_score(point, cap), point)
        first_order.append((grad * raw).sum())
        scores.append(likert_score(raw, cap))
        torch.testing.assert_close(  # the score is HF's expected grade
            scores[-1], likert_score(hf_logits(hf, row)[-1, 10:15], None), atol=TOL, rtol=0
        )
    ids = judge.item_ids(*[list(col) for col in zip(*items, strict=True)])
    assert int((ids == tok.pad_token_id).sum()) > 0
    attr = linearised_attribution(judge, ids)
    torch.testing.assert_close(attr.rewards, torch.stack(first_order), atol=TOL, rtol=0)
    torch.testing.assert_close(attr.values.sum(0) + attr.head_bias, attr.rewards, atol=TOL, rtol=0)
    assert attr.score is not None and attr.remainder is not None
    torch.testing.assert_close(attr.score, torch.stack(scores), atol=TOL, rtol=0)
    torch.testing.assert_close(attr.rewards + attr.remainder, attr.score, atol=1e-6, rtol=0)
    assert attr.remainder.abs().max() > 1e-3  # the curvature of the softmax is not nothing


def test_classifier_prm_remainder_is_the_last_layers_bias_difference():
    hf, _, prm = prm_pair("qwen2", "classifier")
    ids = prm.encode_steps(PROMPT, WRONG).ids
    head = hf.score
    with torch.no_grad():
        logits = head(hf_hidden(hf, ids))
    bias = head[2].bias.detach()
    for k, tag in enumerate(tag_positions(ids)):
        attr = linearised_attribution(prm.step(k), ids)
        assert attr.score is not None and attr.remainder is not None
        torch.testing.assert_close(
            attr.score, (logits[tag, 1] - logits[tag, 0])[None], atol=TOL, rtol=0
        )
        torch.testing.assert_close(attr.remainder, (bias[1] - bias[0])[None], atol=1e-5, rtol=0)
        torch.testing.assert_close(attr.total(), attr.rewards, atol=TOL, rtol=0)


def test_linearised_attribution_of_a_linear_head_is_direct_attribution():
    _, _, judge = judge_pair("llama")
    ids = judge.item_ids("w12 w13", "w20")
    lin, direct = linearised_attribution(judge, ids), direct_attribution(judge, ids)
    torch.testing.assert_close(lin.values, direct.values, atol=1e-5, rtol=0)
    assert lin.remainder is not None
    torch.testing.assert_close(lin.remainder, torch.zeros(1), atol=1e-6, rtol=0)


# -- position bias -----------------------------------------------------------------------------
@pytest.mark.parametrize("family", ["llama", "gemma2"])
def test_position_bias_is_half_the_sum_of_hf_margins_in_both_orders(family):
    hf, tok, judge = judge_pair(family, "pairwise")
    prompts, a, b = ["w12", "w13 w14"], ["w20 w21", "w22"], ["w30", "w31 w32 w33"]

    def hf_margin(p, x, y):
        row = torch.tensor(
            [tok(PAIR_TEMPLATE.format(prompt=p, response_a=x, response_b=y))["input_ids"]]
        )
        logits = hf_logits(hf, row)[-1]
        return logits[10] - logits[11]

    m_ab = torch.stack([hf_margin(*item) for item in zip(prompts, a, b, strict=True)])
    m_ba = torch.stack([hf_margin(*item) for item in zip(prompts, b, a, strict=True)])
    res = position_bias(judge, prompts, a, b)
    torch.testing.assert_close(res.margin_ab, m_ab, atol=TOL, rtol=0)
    torch.testing.assert_close(res.margin_ba, m_ba, atol=TOL, rtol=0)
    torch.testing.assert_close(res.bias, (m_ab + m_ba) / 2, atol=TOL, rtol=0)
    torch.testing.assert_close(res.values.sum(0) + res.head_bias, res.bias_linear, atol=TOL, rtol=0)
    if family == "llama":  # a linear judge: the decomposed bias is the bias itself
        torch.testing.assert_close(res.bias_linear, res.bias, atol=TOL, rtol=0)
    assert res.consistent.shape == (2,)
    top = res.top_k(3)
    mean_share = res.values.mean(1)
    assert len(top) == 3 and top[0][0] == res.labels[int(mean_share.abs().argmax())]


def test_position_bias_needs_a_pairwise_judge():
    _, _, judge = judge_pair("llama")
    with pytest.raises(InvalidArgumentError, match="pairwise"):
        position_bias(judge, "w12", "w20", "w21")


# -- a PRM's first wrong step ------------------------------------------------------------------
def test_step_segments_of_hand_made_positions():
    names, seg = step_segments([3, 6, 8, -1], 10, 2)
    assert names == ("prompt", "step 0", "step 1", "step 2")
    assert seg.tolist() == [0, 0, 1, 1, 2, 2, 2, 3, 3, 3]
    names, seg = step_segments([1], 2, 1)
    assert names == ("prompt", "step 0") and seg.tolist() == [0, 1]


def patched_margins(prm: HookedPRM, right: Tensor, wrong: Tensor, step: int) -> Tensor:
    """Step ``step``'s margin in ``wrong`` with the step's own tokens (after the previous tag,
    or after the prompt, before its own) overwritten from ``right`` at
    ``blocks.{l}.hook_resid_pre``, per layer."""
    tags = tag_positions(wrong)
    start = tags[step - 1] + 1 if step > 0 else PROMPT_TOKENS
    span = list(range(start, tags[step]))
    out = []
    for layer in range(prm.cfg.n_layers):
        name = f"blocks.{layer}.hook_resid_pre"
        _, source = prm.run_with_cache(right, names_filter=[name], return_type=None)

        def overwrite(act, hook, source=source[name]):
            act[:, span] = source[:, span]
            return act

        with torch.no_grad():
            per_pos = prm.run_with_hooks(
                wrong, return_type="objectives", fwd_hooks=[(name, overwrite)]
            )
        out.append(per_pos[0, tags[step], 0])
    return torch.stack(out)


def turn_index(values: Tensor) -> int:
    """The first site from which the lens keeps its final sign to the end."""
    signs = torch.sign(values).tolist()
    idx = len(signs) - 1
    while idx > 0 and signs[idx - 1] == signs[-1]:
        idx -= 1
    return idx


@pytest.mark.parametrize(("step", "correct"), [(1, RIGHT), (0, RIGHT_0)])
def test_first_error_analysis_against_attribution_and_a_hooked_run(step, correct):
    hf, _, prm = prm_pair("llama")
    res = first_error_analysis(prm, PROMPT, WRONG, step, correct_steps=correct)
    ids = prm.encode_steps(PROMPT, WRONG).ids
    logits = hf_logits(hf, ids)
    tags = tag_positions(ids)
    margins = logits[tags, 41] - logits[tags, 42]
    torch.testing.assert_close(res.margins, margins, atol=TOL, rtol=0)
    torch.testing.assert_close(res.scores, torch.sigmoid(margins), atol=TOL, rtol=0)
    # the prompt and the steps up to this one (a step's tag cannot read later steps)
    assert res.segments == ("prompt", "step 0", "step 1", "step 2", "step 3")[: step + 2]
    attr = direct_attribution(prm.step(step), ids, sources=True)
    head_rows = [i for i, label in enumerate(attr.labels) if label.startswith("L")]
    assert len(head_rows) == prm.cfg.n_layers * prm.cfg.n_heads
    heads_total = attr.values[head_rows, 0].sum()
    torch.testing.assert_close(res.by_source_step.sum(), heads_total, atol=TOL, rtol=0)
    assert res.head_sources.shape == (prm.cfg.n_layers, prm.cfg.n_heads, len(res.segments))
    torch.testing.assert_close(
        res.head_sources.sum(-1), attr.head_matrix()[..., 0], atol=TOL, rtol=0
    )
    # each segment's share = the heads' sources summed over the segment's positions
    assert attr.sources is not None
    bounds = [0, PROMPT_TOKENS] + [t + 1 for t in tags]
    for i in range(len(res.segments)):
        span = attr.sources[:, :, 0, bounds[i] : bounds[i + 1]].sum()
        torch.testing.assert_close(res.by_source_step[i], span, atol=TOL, rtol=0)
    # a step's tag reads nothing after it (causal): later positions carry no head weight
    later = attr.sources[:, :, 0, bounds[step + 2] :]
    torch.testing.assert_close(later, torch.zeros_like(later), atol=1e-6, rtol=0)
    torch.testing.assert_close(res.lens.values[-1, 0], margins[step], atol=TOL, rtol=0)
    lens = reward_lens(prm.step(step), ids)
    assert res.turn_site == lens.labels[turn_index(lens.values[:, 0])]
    right = prm.encode_steps(PROMPT, correct).ids
    assert res.patch is not None and res.patch.shape == (prm.cfg.n_layers,)
    want = patched_margins(prm, right, ids, step)
    torch.testing.assert_close(res.patch, want, atol=TOL, rtol=0)
    assert (want[0] - margins[step]).abs() > 1e-3  # the patch changes the step's margin


def test_first_error_analysis_refuses_bad_steps_and_lengths():
    _, _, prm = prm_pair("llama")
    with pytest.raises(InvalidArgumentError, match=r"step must be in \[0, 4\)"):
        first_error_analysis(prm, PROMPT, WRONG, 4)
    with pytest.raises(RewardLensError, match="same number of tokens"):
        first_error_analysis(prm, PROMPT, WRONG, 1, correct_steps=["w20 w21", "w30", "w24", "w25"])


FIXED = ["w20 w21", "w27", "w23 w24"]


@pytest.mark.parametrize("family,head", [("qwen2", "classifier"), ("gemma2", "lm")])
def test_first_error_analysis_on_non_linear_heads(family, head):
    hf, tok = tiny_causal_lm(family, head=head)
    kind = "classifier" if head == "classifier" else "token"
    labels = ("+", "-") if kind == "classifier" else ("w41", "w42")
    prm = HookedPRM.from_pretrained(
        hf, tok, kind=kind, step_tag="w40", labels=labels, step_format="{step} {tag}"
    )
    assert prm.scored_head
    res = first_error_analysis(prm, "w12 w13", STEPS, 1, correct_steps=FIXED)
    # the lens applies the whole head at every layer: its final site is the step's margin
    torch.testing.assert_close(res.lens.values[-1, 0], res.margins[1], atol=1e-5, rtol=0)
    assert not res.margins.requires_grad and res.patch is not None and res.patch.shape == (2,)
    fixed = HookedPRM.step_margins(prm, prm.encode_steps("w12 w13", FIXED).ids)[0, 1]
    assert not torch.isclose(fixed, res.margins[1])  # the patch has something to move
