"""Templates and verdict tokens: slots, verdict shapes, tokens and ids, Likert grades read from
the verdicts."""

from __future__ import annotations

import pytest

from reward_lens_tl.errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    JudgeTemplateError,
    VerdictTokenError,
)
from reward_lens_tl.judges import HookedPRM
from tests.judges.conftest import PRM_OPTIONS, judge


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


def test_likert_verdicts_that_read_as_non_finite_numbers_get_ranks():
    from reward_lens_tl.judges.templates import grades_of

    assert grades_of(("1", "nan", "3")) == [1.0, 2.0, 3.0]
    assert grades_of(("inf", "2")) == [1.0, 2.0]
