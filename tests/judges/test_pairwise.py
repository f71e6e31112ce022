"""`judge_pairs`: a pairwise judge's margins in both orders equal HF's verdict-logit differences,
and the summary figures are the plain means of those margins."""

from __future__ import annotations

import pytest
import torch

from reward_lens_tl.data import PreferencePair
from reward_lens_tl.errors import EmptyInputError, InvalidArgumentError
from reward_lens_tl.judges import HookedJudge, judge_pairs
from reward_lens_tl.testing import tiny_causal_lm

PAIRWISE = "{prompt} w8 {response_a} w7 {response_b} w9"
PAIRS = [
    PreferencePair("w12 w13", "w20 w21", "w30", subset="a"),
    PreferencePair("w14", "w22", "w31 w32 w33", subset="a"),
    PreferencePair("w15 w16 w17", "w23 w24", "w34", subset="b"),
]


@pytest.fixture(scope="module")
def setup():
    hf, tok = tiny_causal_lm("llama")
    judge = HookedJudge.from_pretrained(
        hf, kind="pairwise", tokenizer=tok, verdict=("w10", "w11"), template=PAIRWISE
    )
    return hf, tok, judge


def hf_margin(hf, tok, prompt: str, first: str, second: str) -> float:
    """HF's logit of `w10` minus that of `w11` at the last token of the filled template."""
    ids = tok(PAIRWISE.format(prompt=prompt, response_a=first, response_b=second))["input_ids"]
    a, b = tok.convert_tokens_to_ids(["w10", "w11"])
    with torch.no_grad():
        logits = hf(input_ids=torch.tensor([ids])).logits[0, -1]
    return float(logits[a] - logits[b])


@pytest.mark.parametrize("batch_size", [1, 2, 16])
def test_both_orders_equal_hf_and_the_figures_are_their_means(setup, batch_size):
    hf, tok, judge = setup
    res = judge_pairs(judge, PAIRS, batch_size=batch_size)
    ab = [hf_margin(hf, tok, p.prompt, p.chosen, p.rejected) for p in PAIRS]
    ba = [hf_margin(hf, tok, p.prompt, p.rejected, p.chosen) for p in PAIRS]
    torch.testing.assert_close(res.margin_ab, torch.tensor(ab), atol=1e-4, rtol=0)
    torch.testing.assert_close(res.margin_ba, torch.tensor(ba), atol=1e-4, rtol=0)
    right = [(x > 0) + (y < 0) for x, y in zip(ab, ba, strict=True)]
    assert res.accuracy() == pytest.approx(sum(right) / (2 * len(PAIRS)))
    assert res.consistent_accuracy() == pytest.approx(right.count(2) / len(PAIRS))
    bias = sum((x + y) / 2 for x, y in zip(ab, ba, strict=True)) / len(PAIRS)
    assert res.position_bias() == pytest.approx(bias, abs=1e-4)
    assert res.subsets == ("a", "a", "b")


def test_bad_arguments_are_refused(setup):
    hf, tok, judge = setup
    pointwise = HookedJudge.from_pretrained(
        hf, tokenizer=tok, verdict=("w10", "w11"), template="{prompt} w8 {response} w9"
    )
    with pytest.raises(InvalidArgumentError, match="pairwise HookedJudge"):
        judge_pairs(pointwise, PAIRS)
    with pytest.raises(EmptyInputError, match="no pairs"):
        judge_pairs(judge, [])
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        judge_pairs(judge, PAIRS, batch_size=0)
