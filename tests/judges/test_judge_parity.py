"""A judge's reward = the same verdict read from HF's causal-LM logits (≤ 1e-4, float32).

The reference is plain HF plus plain torch: the rendered template tokenized by the tokenizer,
HF's ``logits[:, -1]`` of each row run alone and unpadded (HF's own output, so Gemma-2's logits
are soft-capped there), and ``logit(v0) − logit(v1)`` or ``Σ_k grade_k softmax(verdict
logits)_k`` taken from them. Left-padded batches are compared with those unpadded rows: the
judge reads a left-padded batch as the rows it holds.
"""

from __future__ import annotations

from functools import cache

import pytest
import torch
from torch import Tensor

from reward_lens_tl.judges import HookedJudge
from reward_lens_tl.testing import tiny_causal_lm

TOL = 1e-4
FAMILIES = ("llama", "mistral", "qwen2", "gemma2", "gpt2")
KINDS = ("pointwise", "pairwise", "likert")
TEMPLATES = {
    "pointwise": "{prompt} w8 {response} w9",
    "pairwise": "{prompt} w8 {response_a} w7 {response_b} w9",
    "likert": "{prompt} w8 {response} w9 w6",
}
VERDICTS = {
    "pointwise": ("w10", "w11"),
    "pairwise": ("w60", "w61"),
    "likert": ("w10", "w11", "w12", "w13", "w14"),
}
#: (prompt, response[, response_b]) items of different lengths (> the sliding windows).
ITEMS = {
    "pointwise": [("w12 w13", "w20"), ("w14", "w21 w22 w23 w24"), ("w15 w16 w17", "w25 w26")],
    "pairwise": [("w12", "w20", "w30 w31"), ("w14 w15 w16", "w21 w22 w23", "w32")],
}
ITEMS["likert"] = ITEMS["pointwise"]
TEMPLATE_CHAT = "{prompt} w8 {response}"


@cache
def model_pair(family: str, kind: str) -> tuple[torch.nn.Module, object, HookedJudge]:
    """``(hf, tokenizer, judge)``, built once per module run (tests read them only)."""
    hf, tok = tiny_causal_lm(family)
    judge = HookedJudge.from_pretrained(
        hf, kind=kind, tokenizer=tok, verdict=VERDICTS[kind], template=TEMPLATES[kind]
    )
    return hf, tok, judge


def rendered_ids(tok, kind: str, item: tuple[str, ...]) -> list[int]:
    """The tokenizer's ids of the template filled by ``str.format`` (the reference input)."""
    return tok(rendered_text(kind, item))["input_ids"]


def rendered_text(kind: str, item: tuple[str, ...]) -> str:
    slots = ("prompt", "response_a", "response_b") if kind == "pairwise" else ("prompt", "response")
    return TEMPLATES[kind].format(**dict(zip(slots, item, strict=True)))


def hf_last_logits(hf, row: list[int]) -> Tensor:
    """HF's logits at the last token of one unpadded row, ``[vocab]``."""
    with torch.no_grad():
        return hf(input_ids=torch.tensor([row])).logits[0, -1]


def verdict_score(kind: str, logits: Tensor, ids: list[int]) -> Tensor:
    """The published score from HF's logits: a difference, or the expected grade 1..K."""
    picked = logits[ids]
    if kind == "likert":
        grades = torch.arange(1, len(ids) + 1, dtype=picked.dtype)
        return (torch.softmax(picked, -1) * grades).sum()
    return picked[0] - picked[1]


def expected(family: str, kind: str, items) -> Tensor:
    hf, tok, _ = model_pair(family, kind)
    ids = tok.convert_tokens_to_ids(list(VERDICTS[kind]))
    rows = [rendered_ids(tok, kind, item) for item in items]
    return torch.stack([verdict_score(kind, hf_last_logits(hf, row), ids) for row in rows])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("family", FAMILIES)
def test_single_rows_equal_hf(family, kind):
    _, _, judge = model_pair(family, kind)
    ours = torch.stack([judge.score(*item) for item in ITEMS[kind]])
    torch.testing.assert_close(ours, expected(family, kind, ITEMS[kind]), atol=TOL, rtol=0)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("family", FAMILIES)
def test_left_padded_batch_equals_hf_rows_run_alone(family, kind):
    _, tok, judge = model_pair(family, kind)
    columns = [list(col) for col in zip(*ITEMS[kind], strict=True)]
    ids = judge.item_ids(*columns)
    lengths = [len(rendered_ids(tok, kind, item)) for item in ITEMS[kind]]
    assert ids.shape == (len(lengths), max(lengths))
    pads = (ids == tok.pad_token_id).sum(1).tolist()
    assert pads == [max(lengths) - n for n in lengths] and min(pads) == 0 < max(pads)
    assert bool((ids[:, -1] == tok.convert_tokens_to_ids(TEMPLATES[kind].split()[-1])).all())
    torch.testing.assert_close(
        judge.rewards(ids), expected(family, kind, ITEMS[kind]), atol=TOL, rtol=0
    )
    torch.testing.assert_close(judge.score(*columns), judge.rewards(ids), atol=0, rtol=0)


@pytest.mark.parametrize("kind", KINDS)
def test_encode_is_the_tokenized_template_and_score_is_its_reward(kind):
    _, tok, judge = model_pair("llama", kind)
    for item in ITEMS[kind]:
        ids = judge.item_ids(*item)
        assert ids.tolist() == [rendered_ids(tok, kind, item)]
        assert judge.render(*item) == rendered_text(kind, item)
        torch.testing.assert_close(judge.score(*item), judge.rewards(ids)[0], atol=0, rtol=0)
        assert judge.score(*item).shape == ()


def test_gemma2_scores_are_capped_like_hf():
    """The cap changes the verdict difference here, so a judge without it would fail parity."""
    hf, tok, judge = model_pair("gemma2", "pointwise")
    row = rendered_ids(tok, "pointwise", ITEMS["pointwise"][1])
    ids = tok.convert_tokens_to_ids(list(VERDICTS["pointwise"]))
    with torch.no_grad():
        hidden = hf.model(input_ids=torch.tensor([row])).last_hidden_state[0, -1]
    raw = hidden @ hf.lm_head.weight[ids].T
    cap = hf.config.final_logit_softcapping
    assert cap and (raw[0] - raw[1]).abs() > 1e-3
    capped = cap * torch.tanh(raw / cap)
    assert (capped[0] - capped[1] - (raw[0] - raw[1])).abs() > 10 * TOL
    ours = judge.rewards(torch.tensor([row]))[0]
    torch.testing.assert_close(ours, capped[0] - capped[1], atol=TOL, rtol=0)
    torch.testing.assert_close(ours, verdict_score("pointwise", hf_last_logits(hf, row), ids))


@pytest.mark.parametrize("family", ["llama", "gemma2"])
def test_verdict_logits_are_hf_logits_of_the_verdict_tokens(family):
    hf, tok, judge = model_pair(family, "likert")
    row = rendered_ids(tok, "likert", ITEMS["likert"][0])
    ids = tok.convert_tokens_to_ids(list(VERDICTS["likert"]))
    torch.testing.assert_close(
        judge.verdict_logits(torch.tensor([row]))[0], hf_last_logits(hf, row)[ids], atol=TOL, rtol=0
    )


def test_verdict_given_as_ids_reads_the_same_tokens():
    hf, tok = tiny_causal_lm("qwen2")
    by_ids = HookedJudge.from_pretrained(
        hf, tokenizer=tok, verdict=(10, 11), template=TEMPLATES["pointwise"]
    )
    _, _, by_text = model_pair("qwen2", "pointwise")
    assert by_ids.verdict_ids == by_text.verdict_ids == (10, 11)
    item = ITEMS["pointwise"][0]
    torch.testing.assert_close(by_ids.score(*item), by_text.score(*item), atol=0, rtol=0)


def test_a_chat_judge_reads_the_verdict_after_the_generation_prompt():
    hf, tok = tiny_causal_lm("mistral")
    judge = HookedJudge.from_pretrained(
        hf, tokenizer=tok, verdict=VERDICTS["pointwise"], template=TEMPLATE_CHAT, chat=True
    )
    item = ITEMS["pointwise"][2]
    text = TEMPLATE_CHAT.format(prompt=item[0], response=item[1])
    row = tok.apply_chat_template(
        [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True
    )
    row = list(row["input_ids"] if hasattr(row, "keys") else row)
    assert row[-1] == tok.convert_tokens_to_ids("<|assistant|>")
    assert judge.item_ids(*item).tolist() == [row]
    logits = hf_last_logits(hf, row)
    torch.testing.assert_close(judge.score(*item), logits[10] - logits[11], atol=TOL, rtol=0)


def test_pairwise_order_matters_and_each_order_equals_hf():
    """``score(p, a, b)`` and ``score(p, b, a)`` are two different inputs, each HF's margin."""
    _, _, judge = model_pair("llama", "pairwise")
    prompt, a, b = ITEMS["pairwise"][1]
    ab, ba = judge.score(prompt, a, b), judge.score(prompt, b, a)
    want = expected("llama", "pairwise", [(prompt, a, b), (prompt, b, a)])
    torch.testing.assert_close(torch.stack([ab, ba]), want, atol=TOL, rtol=0)
    assert (ab - ba).abs() > 10 * TOL


def count_forwards(model) -> tuple[list[int], object]:
    calls: list[int] = []
    handle = model.embed.register_forward_hook(lambda *_: calls.append(1))
    return calls, handle


@pytest.mark.parametrize("kind", KINDS)
def test_a_verdict_costs_one_forward(kind):
    _, _, judge = model_pair("llama", kind)
    calls, handle = count_forwards(judge)
    try:
        judge.score(*ITEMS[kind][0])
        assert len(calls) == 1
        columns = [list(col) for col in zip(*ITEMS[kind], strict=True)]
        judge.score(*columns)  # a batch: one forward too
        assert len(calls) == 2
    finally:
        handle.remove()
