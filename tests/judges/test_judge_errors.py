"""Bad input to judges and PRMs: typed errors (``RewardLensError`` subclasses) naming the
argument, and nothing the user passed is changed by loading."""

from __future__ import annotations

import copy

import pytest
import torch

from reward_lens_tl.errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    JudgeTemplateError,
    RewardLensError,
    StepSeparatorError,
    VerdictTokenError,
)
from reward_lens_tl.judges import HookedJudge, HookedPRM
from reward_lens_tl.testing import tiny_causal_lm

TEMPLATE = "{prompt} w8 {response} w9"
PAIR_TEMPLATE = "{prompt} w8 {response_a} w7 {response_b} w9"
PRM_OPTIONS = dict(step_tag="w40", labels=("w41", "w42"))


@pytest.fixture(scope="module")
def lm():
    return tiny_causal_lm("llama")


@pytest.fixture(scope="module")
def prm(lm):
    hf, tok = lm
    return HookedPRM.from_pretrained(hf, tokenizer=tok, **PRM_OPTIONS)


def judge(lm, **kw):
    hf, tok = lm
    return HookedJudge.from_pretrained(hf, tokenizer=tok, **{"template": TEMPLATE, **kw})


# -- verdict tokens ----------------------------------------------------------------------------
def test_a_verdict_of_several_tokens_is_refused(lm):
    with pytest.raises(VerdictTokenError, match=r"verdict: 'w10 w11' is 2 tokens"):
        judge(lm, verdict=("w10 w11", "w12"))


def test_a_verdict_outside_the_vocabulary_is_refused(lm):
    """The word-level tokenizer maps unknown words to ``<unk>`` (one token, id 5)."""
    _, tok = lm
    assert tok.encode("Yes", add_special_tokens=False) == [tok.unk_token_id]
    with pytest.raises(VerdictTokenError, match=r"verdict: 'Yes' is not in this tokenizer"):
        judge(lm)  # the default ("Yes", "No")
    with pytest.raises(VerdictTokenError, match="labels: 'nope'"):
        HookedPRM.from_pretrained(lm[0], tokenizer=lm[1], step_tag="w40", labels=("w41", "nope"))
    with pytest.raises(VerdictTokenError, match="step_tag: 'ки'"):
        HookedPRM.from_pretrained(lm[0], tokenizer=lm[1], labels=("w41", "w42"))


def test_duplicate_verdict_ids_are_refused(lm):
    with pytest.raises(VerdictTokenError, match=r"verdict .* not distinct"):
        judge(lm, verdict=("w10", 10))
    with pytest.raises(VerdictTokenError, match=r"verdict .* not distinct"):
        judge(lm, kind="likert", verdict=("w10", "w11", "w10"))


@pytest.mark.parametrize(
    ("verdict", "error", "words"),
    [
        (("w10",), VerdictTokenError, "needs 2 tokens"),
        (("w10", "w11", "w12"), VerdictTokenError, "needs 2 tokens"),
        (("w10", 97), VerdictTokenError, r"token id 97 is outside \[0, 97\)"),
        (("w10", 1.5), ArgumentTypeError, "verdict entries"),
        ("w10", ArgumentTypeError, "verdict must be a tuple"),
    ],
)
def test_verdict_shapes_and_types(lm, verdict, error, words):
    with pytest.raises(error, match=words):
        judge(lm, verdict=verdict)


# -- templates ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kind", "template", "words"),
    [
        ("pointwise", "{prompt} w8 w9", r"pointwise template has no \{response\}"),
        ("likert", "{response} w9", r"likert template has no \{prompt\}"),
        ("pairwise", "{prompt} {response_a} w9", r"pairwise template has no \{response_b\}"),
        ("pairwise", "{prompt} {response} w9", r"pairwise template has no \{response_a\}"),
        (
            "pointwise",
            "{prompt} {response} {context} w9",
            r"unknown placeholder\(s\) \['context'\]",
        ),
        ("pointwise", "{prompt} {response} {", "does not parse"),
    ],
)
def test_templates_without_their_slots_are_refused(lm, kind, template, words):
    verdict = ("w10", "w11", "w12") if kind == "likert" else ("w10", "w11")
    with pytest.raises(JudgeTemplateError, match=words):
        judge(lm, kind=kind, verdict=verdict, template=template)


def test_a_prm_template_needs_prompt_and_steps(lm):
    hf, tok = lm
    with pytest.raises(JudgeTemplateError, match=r"prm template has no \{steps\}"):
        HookedPRM.from_pretrained(hf, tokenizer=tok, template="{prompt} w8", **PRM_OPTIONS)
    with pytest.raises(InvalidArgumentError, match="step_format must use exactly"):
        HookedPRM.from_pretrained(hf, tokenizer=tok, step_format="{step}", **PRM_OPTIONS)


def test_pairwise_and_pointwise_judges_refuse_the_other_arity(lm):
    pair = judge(lm, kind="pairwise", verdict=("w10", "w11"), template=PAIR_TEMPLATE)
    with pytest.raises(InvalidArgumentError, match="response_a, response_b"):
        pair.score("w12", "w20")
    with pytest.raises(InvalidArgumentError, match="not two responses"):
        judge(lm, verdict=("w10", "w11")).score("w12", "w20", "w21")
    with pytest.raises(InvalidArgumentError, match="same length"):
        judge(lm, verdict=("w10", "w11")).item_ids(["w12", "w13"], ["w20"])
    with pytest.raises(ArgumentTypeError, match="prompt must be a string"):
        judge(lm, verdict=("w10", "w11")).score(12, "w20")


# -- kinds -------------------------------------------------------------------------------------
def test_an_unknown_kind_is_refused(lm):
    hf, tok = lm
    with pytest.raises(InvalidArgumentError, match=r"kind must be one of \('pointwise'"):
        HookedJudge.from_pretrained(hf, kind="binary", tokenizer=tok, template=TEMPLATE)
    with pytest.raises(InvalidArgumentError, match=r"kind must be one of \('token'"):
        HookedPRM.from_pretrained(hf, kind="reward", tokenizer=tok, **PRM_OPTIONS)


def test_an_in_memory_model_needs_its_tokenizer(lm):
    with pytest.raises(InvalidArgumentError, match="tokenizer="):
        HookedJudge.from_pretrained(lm[0], verdict=(10, 11), template=TEMPLATE)


# -- PRM steps ---------------------------------------------------------------------------------
def test_a_step_holding_the_tag_is_refused(prm):
    with pytest.raises(StepSeparatorError, match=r"steps\[1\] contains the step tag 'w40'"):
        prm.encode_steps("w12", ["w20", "w21 w40 w22"])


def test_a_row_without_a_step_tag_is_refused(prm):
    ids = torch.tensor([[1, 12, 20, 21, 40], [1, 12, 13, 20, 21]])
    with pytest.raises(StepSeparatorError, match=r"rows \[1\] hold no step tag 'w40'"):
        prm.rewards(ids)
    with pytest.raises(StepSeparatorError, match="no step tag"):
        prm.step_positions(ids[1:])


def test_a_step_format_the_tokenizer_merges_is_refused_by_encode_steps(lm):
    """``"{step}{tag}"`` writes ``w20w40``: one unknown word, so the tag is gone."""
    hf, tok = lm
    merged = HookedPRM.from_pretrained(hf, tokenizer=tok, step_format="{step}{tag}", **PRM_OPTIONS)
    with pytest.raises(StepSeparatorError, match="hold no step tag 'w40'"):
        merged.encode_steps("w12", ["w20", "w21 w22"])  # every tag merged: none left
    with pytest.raises(StepSeparatorError, match="solution 0 has 2 steps but its text holds 1"):
        merged.encode_steps("w12", ["w20", "w21 "])  # the second tag follows a space: kept
    with pytest.raises(StepSeparatorError, match="merges the tag"):
        merged.step_rewards("w12", ["w20", "w21 "])


def test_empty_steps_are_refused(prm):
    with pytest.raises(StepSeparatorError, match="non-empty list"):
        prm.encode_steps("w12", [])
    with pytest.raises(StepSeparatorError, match="non-empty list"):
        prm.encode_steps("w12", "w20 w21")
    with pytest.raises(ArgumentTypeError, match=r"steps\[1\] must be a string"):
        prm.encode_steps("w12", ["w20", 21])


def test_a_step_beyond_a_rows_steps_is_refused(prm):
    enc = prm.encode_steps(["w12", "w13"], [["w20", "w21", "w22"], ["w23"]])
    with pytest.raises(StepSeparatorError, match=r"step 1 does not exist in rows \[1\]"):
        prm.step(1).pooled_rewards(enc.ids, enc.attention_mask)
    with pytest.raises(StepSeparatorError, match=r"step 3 does not exist in rows \[0, 1\]"):
        prm.step(3).pooled_rewards(enc.ids, enc.attention_mask)
    with pytest.raises(ArgumentTypeError, match="step must be an int"):
        prm.step(1.0)
    # in range: the step's margin, the same number step_margins gives
    torch.testing.assert_close(
        prm.step(0).pooled_rewards(enc.ids, enc.attention_mask),
        prm.step_margins(enc.ids, enc.attention_mask)[:, 0],
        atol=1e-5,
        rtol=0,
    )


def test_prm_rewards_refuse_grad(prm):
    ids = prm.encode_steps("w12", ["w20"]).ids
    with pytest.raises(InvalidArgumentError, match="use step"):
        prm.rewards(ids, grad=True)


def test_every_error_here_is_a_reward_lens_error():
    for cls in (VerdictTokenError, JudgeTemplateError, StepSeparatorError):
        assert issubclass(cls, RewardLensError) and issubclass(cls, ValueError)


# -- nothing the user passed is changed ---------------------------------------------------------
LOADERS = {
    "judge": ("llama", "lm", dict(verdict=("w10", "w11"), template=TEMPLATE)),
    "gemma2-likert": (
        "gemma2",
        "lm",
        dict(kind="likert", verdict=("w10", "w11", "w12"), template=TEMPLATE),
    ),
    "value-prm": ("gpt2", "value", dict(kind="value", step_tag="w40")),
    "classifier-prm": ("qwen2", "classifier", dict(kind="classifier", step_tag="w40")),
}


@pytest.mark.parametrize("case", list(LOADERS))
def test_loading_changes_nothing_the_user_passed(case):
    family, head, options = LOADERS[case]
    cls = HookedPRM if case.endswith("prm") else HookedJudge
    hf, tok = tiny_causal_lm(family, head=head)
    state = copy.deepcopy(hf.state_dict())
    config = hf.config.to_dict()
    vocab, sides = tok.get_vocab(), (tok.padding_side, tok.truncation_side)
    model = cls.from_pretrained(hf, tokenizer=tok, **options)
    after = hf.state_dict()
    assert after.keys() == state.keys()
    for name, tensor in state.items():
        assert torch.equal(after[name], tensor), name
        assert after[name].dtype == tensor.dtype and after[name].device == tensor.device
    assert hf.config.to_dict() == config and hf.config.architectures is None
    assert tok.get_vocab() == vocab and (tok.padding_side, tok.truncation_side) == sides
    assert hf.training is False and all(p.requires_grad for p in hf.parameters())
    assert model.tokenizer is not None


@pytest.mark.parametrize("empty", ["", "   ", "\n\t"])
def test_an_empty_step_is_refused_not_scored_from_its_neighbour(prm, empty):
    from reward_lens_tl.errors import EmptyInputError

    with pytest.raises(EmptyInputError, match=r"steps\[1\] is empty"):
        prm.encode_steps("w12", ["w20", empty, "w22"])
    with pytest.raises(EmptyInputError, match=r"steps\[0\] is empty"):
        prm.encode_steps(["w12", "w13"], [["w20"], [empty]])


@pytest.mark.parametrize(
    "grades", [[1.0, float("nan")], [float("inf"), 2.0], ["a", 2.0], [True, 2]]
)
def test_likert_grades_must_be_finite_numbers(lm, grades):
    hf, tok = lm
    with pytest.raises((InvalidArgumentError, ArgumentTypeError), match="grades"):
        HookedJudge.from_pretrained(
            hf,
            tokenizer=tok,
            kind="likert",
            verdict=("w10", "w11"),
            grades=grades,
            template=TEMPLATE,
        )


def test_likert_verdicts_that_read_as_non_finite_numbers_get_ranks():
    from reward_lens_tl.judges.templates import grades_of

    assert grades_of(("1", "nan", "3")) == [1.0, 2.0, 3.0]
    assert grades_of(("inf", "2")) == [1.0, 2.0]
