"""Edge cases an outside review found: PRMs through the package's text functions, negative
steps, step tags in the prompt, explicit verdicts, chat PRMs, non-linear heads at every
position, templates that would change the text."""

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from reward_lens_tl.data import PreferencePair
from reward_lens_tl.errors import InvalidArgumentError, JudgeTemplateError, StepSeparatorError
from reward_lens_tl.evals.run import score_items
from reward_lens_tl.judges import HookedJudge, HookedPRM, first_error_analysis
from reward_lens_tl.testing import tiny_causal_lm
from reward_lens_tl.zoo import zoo_path
from reward_lens_tl.zoo.judge import JUDGE_PAIRWISE_TEMPLATE

PROMPT, STEPS = "what is 4 - 1 + 7", ["4 - 1 = 3", "clearly 3 + 7 = 7"]


@pytest.fixture(scope="module")
def prm():
    return HookedPRM.from_pretrained(zoo_path("prm"))


def test_a_prm_through_text_functions_reads_its_solution(prm):
    text = "4 - 1 = 3 ки clearly 3 + 7 = 7 ки"
    assert prm.split_steps(text) == STEPS
    enc = prm.encode(PROMPT, text)
    steps = prm.encode_steps(PROMPT, STEPS)
    assert list(enc.ids) == steps.ids[0].tolist()
    assert prm.tokenizer.decode(list(enc.response_ids())).split()[-1] == "7"  # last tag outside
    torch.testing.assert_close(prm.score(PROMPT, text), prm.step_rewards(PROMPT, STEPS)[-1])
    last = prm.step_margins(steps.ids)[0, -1]
    one = prm.encode(PROMPT, "4 - 1 = 3")  # no tag: one step
    assert prm.tokenizer.convert_ids_to_tokens(list(one.ids))[-1] == "ки"
    result = score_items(prm, [PreferencePair(PROMPT, text, "4 - 1 = 2 ки")], progress=False)
    (record,) = result.scores.items
    # the last step's margin (the analyses' reward), not the first step's
    assert record.chosen[0] == pytest.approx(float(last), abs=1e-5)


def test_negative_steps_count_from_the_end(prm):
    ids = prm.encode_steps(PROMPT, STEPS + ["7 + 1 = 8"]).ids
    margins = prm.step_margins(ids)[0]
    for k in (-1, -2, -3, 0, 2):
        torch.testing.assert_close(
            prm.step(k).pooled_rewards(ids)[0], margins[k], atol=1e-5, rtol=0
        )
    with pytest.raises(StepSeparatorError, match="step -4 does not exist"):
        prm.step(-4).pooled_rewards(ids)


def test_step_tags_in_the_prompt_are_not_steps():
    hf, tok = tiny_causal_lm("llama")
    prm = HookedPRM.from_pretrained(hf, tokenizer=tok, step_tag="w40", labels=("w41", "w42"))
    enc = prm.encode_steps("w12 w40 w13", ["w20 w21", "w22"])  # the prompt holds the tag
    assert enc.tag_offset == (1,) and enc.n_steps == (2,)
    ids = enc.ids[0].tolist()
    assert [ids[p] for p in enc.step_positions[0].tolist()] == [40, 40]
    assert enc.step_positions[0, 0] > ids.index(40)  # not the prompt's
    with torch.no_grad():
        logits = hf(enc.ids).logits[0]
    want = torch.softmax(logits[enc.step_positions[0]][:, [41, 42]], -1)[:, 0]
    torch.testing.assert_close(prm.rewards(enc)[0], want, atol=1e-5, rtol=0)
    res = first_error_analysis(prm, "w12 w40 w13", ["w20 w21", "w22"], 0)
    torch.testing.assert_close(res.lens.values[-1, 0], res.margins[0], atol=1e-5, rtol=0)
    assert res.segments == ("prompt", "step 0")


def test_explicit_verdicts_are_kept_and_the_default_is_the_kinds():
    pairwise = HookedJudge.from_pretrained(
        zoo_path("judge"), kind="pairwise", template=JUDGE_PAIRWISE_TEMPLATE
    )
    assert pairwise.verdict == ("A", "B")
    asked = HookedJudge.from_pretrained(
        zoo_path("judge"), kind="pairwise", verdict=("Yes", "No"), template=JUDGE_PAIRWISE_TEMPLATE
    )
    assert asked.verdict == ("Yes", "No")
    hf = AutoModelForCausalLM.from_pretrained(zoo_path("judge"), trust_remote_code=False).eval()
    ids = asked.item_ids("how bake bread", "soup", "rain")
    yes, no = asked.verdict_ids
    with torch.no_grad():
        logits = hf(ids).logits[0, -1]
    torch.testing.assert_close(asked.rewards(ids)[0], logits[yes] - logits[no], atol=1e-4, rtol=0)
    ids_np = HookedJudge.from_pretrained(
        zoo_path("judge"), verdict=(np.int64(yes), np.int64(no)), template="{prompt} {response}"
    )
    assert ids_np.verdict_ids == (yes, no)


@pytest.mark.parametrize("family,kind", [("gemma2", "pointwise"), ("llama", "likert")])
def test_non_linear_scores_at_every_position(family, kind):
    hf, tok = tiny_causal_lm(family)
    verdict = ("w10", "w11") if kind == "pointwise" else ("w10", "w11", "w12")
    judge = HookedJudge.from_pretrained(
        hf, kind=kind, tokenizer=tok, verdict=verdict, template="{prompt} w8 {response} w9"
    )
    assert judge.scored_head
    ids = judge.item_ids(["w12 w13", "w14"], ["w20", "w30 w31"])
    with torch.no_grad():
        torch.testing.assert_close(judge(ids)[:, -1, 0], judge.rewards(ids), atol=1e-5, rtol=0)


def test_a_chat_prm_has_one_bos_and_its_prompt_segment():
    hf, tok = tiny_causal_lm("llama")
    prm = HookedPRM.from_pretrained(
        hf, tokenizer=tok, step_tag="w40", labels=("w41", "w42"), chat=True, system="w7 w8"
    )
    ids = prm.encode_steps("w12", ["w20", "w21"]).ids[0].tolist()
    assert ids[:2] != [1, 1] and ids.count(1) == 1
    res = first_error_analysis(prm, "w12", ["w20", "w21"], 1)
    start = prm.body_start("w12", ["w20", "w21"])
    assert prm.tokenizer.convert_ids_to_tokens(ids[start]) == "w20"
    assert res.segments == ("prompt", "step 0", "step 1")


def test_bad_options_are_refused():
    hf, tok = tiny_causal_lm("llama", head="value")
    with pytest.raises(InvalidArgumentError, match="transform"):
        HookedPRM.from_pretrained(hf, tok, kind="value", step_tag="w40", transform="softmax")
    hf, tok = tiny_causal_lm("llama")
    for template in ("{prompt} {response!r}", "{prompt} {response:>9}"):
        with pytest.raises(JudgeTemplateError, match="conversion or format spec"):
            HookedJudge.from_pretrained(
                hf, tokenizer=tok, verdict=("w10", "w11"), template=template
            )
    prm = HookedPRM.from_pretrained(hf, tokenizer=tok, step_tag="w40", labels=("w41", "w42"))
    with pytest.raises(Exception, match="step must be an int"):
        first_error_analysis(prm, "w12", ["w20", "w21"], True)
