"""HookedJudge and HookedPRM: a judge's reward equals the verdict from HF's logits for every kind
(single rows, left-padded batches, Gemma-2 capping), one forward per verdict; bad options,
steps and arities refused with typed errors; a tied LM head streams from a directory."""

from __future__ import annotations

import copy
import warnings
from functools import cache

import pytest
import torch
from torch import Tensor

from reward_lens_tl.errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    JudgeTemplateError,
    RewardLensError,
    StepSeparatorError,
    VerdictTokenError,
)
from reward_lens_tl.judges import HookedJudge, HookedPRM
from reward_lens_tl.padding import ReadingPositionWarning
from reward_lens_tl.testing import tiny_causal_lm
from tests.judges.conftest import PRM_OPTIONS, STEPS, TEMPLATE, judge

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


PAIR_TEMPLATE = "{prompt} w8 {response_a} w7 {response_b} w9"


@pytest.fixture(scope="module")
def prm(lm):
    hf, tok = lm
    return HookedPRM.from_pretrained(hf, tokenizer=tok, **PRM_OPTIONS)


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


def test_step_view_warns_with_the_step_not_padding():
    hf, tok = tiny_causal_lm("llama")
    prm = HookedPRM.from_pretrained(hf, tokenizer=tok, step_tag="w40", labels=("w41", "w42"))
    ids = prm.encode_steps("w12 w13", STEPS).ids
    with pytest.warns(ReadingPositionWarning, match="read at step 0"):
        prm.step(0).run_with_cache(ids)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReadingPositionWarning)
        prm.step(-1).run_with_cache(ids)  # the last step is read at -1: nothing to warn about


@pytest.mark.parametrize("family", ["gemma2", "gpt2", "llama"])
def test_tied_lm_head_streams_from_a_directory(family, tmp_path):
    """A checkpoint that stores a tied LM head once (as the embedding) converts layer by layer,
    with no whole-model fallback, to the same judge as the in-memory model."""
    from reward_lens_tl.judges import HookedJudge
    from reward_lens_tl.streaming import WholeModelWarning

    hf, tok = tiny_causal_lm(family, tie_word_embeddings=True)
    hf.save_pretrained(tmp_path)
    from safetensors import safe_open

    with safe_open(str(tmp_path / "model.safetensors"), "pt") as f:
        assert "lm_head.weight" not in f.keys()  # stored once
    kw = dict(tokenizer=tok, verdict=("w10", "w11"), template="{prompt} w8 {response} w9")
    with warnings.catch_warnings():
        warnings.simplefilter("error", WholeModelWarning)
        from_dir = HookedJudge.from_pretrained(str(tmp_path), **kw)
    in_memory = HookedJudge.from_pretrained(hf, **kw)
    ids = in_memory.item_ids(["w12 w13", "w14"], ["w20 w21", "w30"])
    torch.testing.assert_close(from_dir.rewards(ids), in_memory.rewards(ids), atol=1e-5, rtol=0)
    with torch.no_grad():
        logits = hf(ids[:1]).logits[0, -1]  # Gemma-2's soft-capped, as the judge's reward
    torch.testing.assert_close(
        from_dir.rewards(ids[:1])[0], logits[10] - logits[11], atol=1e-4, rtol=0
    )
