"""Shared by the probe suite's tests: a tiny llama reward model with or without a chat template.

The zoo fixtures (``zoo_scalar``, ``zoo_multi``, ``zoo_task``) come from ``tests/conftest.py``.
"""

from __future__ import annotations

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.testing import tiny_reward_model, tiny_tokenizer

__all__ = ["tiny"]


def tiny(chat_template: bool):
    tok = tiny_tokenizer(chat_template=chat_template)
    return HookedRewardModel.from_pretrained(tiny_reward_model("llama"), tok)
