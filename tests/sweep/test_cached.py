"""`reward_lens_tl.sweep.cached`: the KV-cached path equals the exact path (tiny models, the zoo,
gated objectives, a reading position inside the prefix)."""

from __future__ import annotations

import pytest
import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.sweep import (
    CandidateSet,
    PrefixCache,
    exact_sweep,
    token_candidates,
    token_sweep,
)
from reward_lens_tl.testing import tiny_reward_model, tiny_tokenizer

LONG_PROMPT = " ".join(f"w{6 + (7 * i) % 80}" for i in range(40))  # 40 words: rotary offsets


def tiny(family: str, **kwargs) -> HookedRewardModel:
    return HookedRewardModel.from_pretrained(
        tiny_reward_model(family, **kwargs), tokenizer=tiny_tokenizer()
    )


def mixed_candidates() -> CandidateSet:
    """Candidates of 1-3 tokens, including a pad id inside one (right padding must not leak)."""
    ids = [(7,), (50, 51, 52), (9, 10), (96,), (0, 30), (11, 12, 13), (40,)]
    return CandidateSet(tuple(f"c{i}" for i in range(len(ids))), tuple(ids))


@pytest.mark.parametrize("family", ["llama", "gpt2", "qwen2", "mistral", "gemma2"])
def test_cached_equals_exact_on_tiny_models(family):
    """Every family, through the shared-prefix attention where the layer allows it."""
    model = tiny(family)
    for prompt, cands in [
        (LONG_PROMPT, mixed_candidates()),
        ("w8 w9", token_candidates(model, range(6, 97))),
    ]:
        fast = token_sweep(model, prompt, cands, chunk_size=5)
        slow = exact_sweep(model, prompt, cands, chunk_size=64)
        assert fast.method == "cached" and slow.method == "exact"
        torch.testing.assert_close(fast.scores, slow.scores, atol=1e-4, rtol=0)
        assert fast.scores.std() > 1e-3  # the candidates really differ


def test_cached_equals_exact_on_the_zoo(zoo_scalar, task_prompts):
    words = ["great question", "soup", "the bomb and", "a", "great question soup oven"]
    for prompt in list(task_prompts.values())[:3]:
        for cands in (None, words):
            fast, slow = (
                token_sweep(zoo_scalar, prompt, cands),
                exact_sweep(zoo_scalar, prompt, cands),
            )
            torch.testing.assert_close(fast.scores, slow.scores, atol=1e-4, rtol=0)


def test_cached_gated_score_and_objectives_equal_exact(zoo_multi):
    multi = zoo_multi
    cands = ["great question", "soup", "the bomb", "a"]
    for objective in (None, "harmlessness", 0):
        fast = token_sweep(multi, "how bake bread", cands, objective=objective)
        slow = exact_sweep(multi, "how bake bread", cands, objective=objective)
        torch.testing.assert_close(fast.scores, slow.scores, atol=1e-4, rtol=0)


def test_reading_position_inside_the_prefix():
    """With pad == eos a continuation of pad ids is skipped by HF pooling, which then reads a
    prompt position: the cached path serves it from the prefix run."""
    model = tiny("llama")
    model.pad_token_id = model.tokenizer.eos_token_id
    cands = CandidateSet(("eos", "w7"), ((2,), (7,)))
    fast, slow = token_sweep(model, "w8 w9", cands), exact_sweep(model, "w8 w9", cands)
    torch.testing.assert_close(fast.scores, slow.scores, atol=1e-5, rtol=0)
    cache = PrefixCache.build(model, fast.prefix_ids)
    torch.testing.assert_close(fast.scores[0], cache.head_outputs[-1, 0])
