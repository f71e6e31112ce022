"""Shared by the judge tests: the tiny llama causal LM, a helper building a judge on it with a
default template, PRM options and three steps."""

from __future__ import annotations

import pytest

from reward_lens_tl.judges import HookedJudge
from reward_lens_tl.testing import tiny_causal_lm

__all__ = ["PRM_OPTIONS", "STEPS", "TEMPLATE", "judge"]

STEPS = ["w20 w21", "w22", "w23 w24"]
TEMPLATE = "{prompt} w8 {response} w9"
PRM_OPTIONS = dict(step_tag="w40", labels=("w41", "w42"))


@pytest.fixture(scope="module")
def lm():
    return tiny_causal_lm("llama")


def judge(lm, **kw):
    hf, tok = lm
    return HookedJudge.from_pretrained(hf, tokenizer=tok, **{"template": TEMPLATE, **kw})
