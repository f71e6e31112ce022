"""A PRM's step scores = HF's at every step tag (≤ 1e-4, float32), all from one forward.

References, from plain HF and torch on the unpadded row the tokenizer gives for the rendered
solution: a token PRM's ``softmax(logits[tag, (+, −)])[0]`` from HF's causal-LM logits (all five
families; Gemma-2's soft-capped by HF); a value PRM's ``sigmoid`` of HF's one-label
``*ForTokenClassification`` output at each tag; a classifier PRM's ``softmax(score(h))[..., 1]``
with ``h = hf.model(...).last_hidden_state`` (``score = Sequential(Linear, ReLU, Linear)``).
"""

from __future__ import annotations

from functools import cache

import pytest
import torch
from torch import Tensor

from reward_lens_tl.judges import HookedPRM
from reward_lens_tl.testing import tiny_causal_lm

TOL = 1e-4
TAG, LABELS = "w40", ("w41", "w42")
TAG_ID, LABEL_IDS = 40, [41, 42]
PROMPT = "w12 w13"
STEPS = ["w20 w21", "w22", "w23 w24 w25", "w26"]
#: A second solution with fewer steps and another length (for left-padded batches).
PROMPT_2, STEPS_2 = "w14", ["w30 w31 w32 w33 w34 w35 w36"]
KIND_FAMILIES = {
    "token": ("llama", "mistral", "qwen2", "gemma2", "gpt2"),
    "value": ("llama", "qwen2", "gpt2"),
    "classifier": ("llama", "qwen2"),
}
CASES = [(kind, family) for kind, families in KIND_FAMILIES.items() for family in families]
HEADS = {"token": "lm", "value": "value", "classifier": "classifier"}


@cache
def model_pair(kind: str, family: str) -> tuple[torch.nn.Module, object, HookedPRM]:
    """``(hf, tokenizer, prm)`` with the tag ``w40`` after every step (``"{step} {tag}"``)."""
    hf, tok = tiny_causal_lm(family, head=HEADS[kind])
    prm = HookedPRM.from_pretrained(
        hf, kind=kind, tokenizer=tok, step_tag=TAG, labels=LABELS, step_format="{step} {tag}"
    )
    return hf, tok, prm


def solution_ids(tok, prompt: str, steps: list[str]) -> list[int]:
    """The tokenizer's ids of ``"{prompt} {step} w40 {step} w40 …"`` (the reference input)."""
    return tok(prompt + " " + " ".join(f"{s} {TAG}" for s in steps))["input_ids"]


def hf_step_scores(kind: str, hf, row: list[int]) -> Tensor:
    """Each step's score from HF on one unpadded row, ``[n_steps]``."""
    ids = torch.tensor([row])
    tags = (ids[0] == TAG_ID).nonzero().flatten()
    with torch.no_grad():
        if kind == "token":
            return torch.softmax(hf(input_ids=ids).logits[0, tags][:, LABEL_IDS], -1)[:, 0]
        if kind == "value":
            return torch.sigmoid(hf(input_ids=ids).logits[0, tags, 0])
        hidden = hf.model(input_ids=ids).last_hidden_state
        return torch.softmax(hf.score(hidden)[0, tags], -1)[:, 1]


@pytest.mark.parametrize(("kind", "family"), CASES)
def test_step_scores_equal_hf_at_every_tag(kind, family):
    hf, tok, prm = model_pair(kind, family)
    row = solution_ids(tok, PROMPT, STEPS)
    enc = prm.encode_steps(PROMPT, STEPS)
    assert enc.ids.tolist() == [row]
    want_positions = [i for i, t in enumerate(row) if t == TAG_ID]
    assert enc.step_positions.tolist() == [want_positions] and enc.n_steps == (len(STEPS),)
    ours = prm.step_rewards(PROMPT, STEPS)
    assert ours.shape == (len(STEPS),)
    torch.testing.assert_close(ours, hf_step_scores(kind, hf, row), atol=TOL, rtol=0)
    torch.testing.assert_close(prm.rewards(enc.ids)[0], ours, atol=0, rtol=0)


@pytest.mark.parametrize(("kind", "family"), CASES)
def test_a_batch_of_two_solutions_pads_steps_with_nan(kind, family):
    hf, tok, prm = model_pair(kind, family)
    enc = prm.encode_steps([PROMPT, PROMPT_2], [STEPS[:3], STEPS_2])
    rows = [solution_ids(tok, PROMPT, STEPS[:3]), solution_ids(tok, PROMPT_2, STEPS_2)]
    width = max(map(len, rows))
    assert enc.ids.shape == (2, width) and enc.n_steps == (3, 1)
    assert enc.attention_mask.sum(1).tolist() == [len(r) for r in rows]
    for b, row in enumerate(rows):  # left padded: each row's tags shifted by its padding
        pad = width - len(row)
        tags = [pad + i for i, t in enumerate(row) if t == TAG_ID]
        assert enc.step_positions[b, : len(tags)].tolist() == tags
    assert enc.step_positions[1, 1:].tolist() == [-1, -1]
    scores = prm.rewards(enc.ids, enc.attention_mask, step_positions=enc.step_positions)
    assert scores.shape == (2, 3)
    assert bool(scores[1, 1:].isnan().all()) and not bool(scores[0].isnan().any())
    torch.testing.assert_close(scores[0], prm.step_rewards(PROMPT, STEPS[:3]), atol=TOL, rtol=0)
    torch.testing.assert_close(scores[1, :1], prm.step_rewards(PROMPT_2, STEPS_2), atol=TOL, rtol=0)
    torch.testing.assert_close(scores[0], hf_step_scores(kind, hf, rows[0]), atol=TOL, rtol=0)
    torch.testing.assert_close(scores[1, :1], hf_step_scores(kind, hf, rows[1]), atol=TOL, rtol=0)
    # without a mask or positions the batch is read the same way (mask from the leading pads)
    torch.testing.assert_close(prm.rewards(enc.ids), scores, atol=0, rtol=0, equal_nan=True)


@pytest.mark.parametrize("family", ["llama", "gemma2"])
def test_token_margins_are_the_label_logit_differences(family):
    """``step_margins`` (what the analyses read) = ``l[+] − l[−]`` of HF's logits at each tag."""
    hf, tok, prm = model_pair("token", family)
    row = solution_ids(tok, PROMPT, STEPS)
    with torch.no_grad():
        logits = hf(input_ids=torch.tensor([row])).logits[0]
    tags = [i for i, t in enumerate(row) if t == TAG_ID]
    want = logits[tags, LABEL_IDS[0]] - logits[tags, LABEL_IDS[1]]
    torch.testing.assert_close(prm.step_margins(torch.tensor([row]))[0], want, atol=TOL, rtol=0)


def test_tag_and_labels_given_as_ids_read_the_same_tokens():
    hf, tok, by_text = model_pair("token", "mistral")
    by_ids = HookedPRM.from_pretrained(hf, tokenizer=tok, step_tag=TAG_ID, labels=LABEL_IDS)
    assert by_ids.render_steps(PROMPT, STEPS) == by_text.render_steps(PROMPT, STEPS)
    torch.testing.assert_close(
        by_ids.step_rewards(PROMPT, STEPS), by_text.step_rewards(PROMPT, STEPS), atol=0, rtol=0
    )


def test_value_prm_without_transform_gives_the_raw_head():
    hf, tok = tiny_causal_lm("qwen2", head="value")
    prm = HookedPRM.from_pretrained(
        hf, kind="value", tokenizer=tok, step_tag=TAG, step_format="{step} {tag}", transform=None
    )
    row = solution_ids(tok, PROMPT, STEPS)
    with torch.no_grad():
        raw = hf(input_ids=torch.tensor([row])).logits[0, :, 0]
    tags = [i for i, t in enumerate(row) if t == TAG_ID]
    torch.testing.assert_close(prm.step_rewards(PROMPT, STEPS), raw[tags], atol=TOL, rtol=0)


@pytest.mark.parametrize("kind", list(KIND_FAMILIES))
def test_all_step_scores_cost_one_forward(kind):
    _, _, prm = model_pair(kind, "llama")
    calls: list[int] = []
    handle = prm.embed.register_forward_hook(lambda *_: calls.append(1))
    try:
        scores = prm.step_rewards(PROMPT, STEPS)
    finally:
        handle.remove()
    assert scores.shape == (4,) and len(calls) == 1
