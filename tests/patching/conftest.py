"""Shared by the patching tests: tiny models, a clean/corrupted pair, a patch written by hand,
the zoo's contrast pairs, and one torch thread per module.

``pair`` is two things here: the plain helper ``pair(length, seed, lengths)`` (imported by the
tests that build their own pairs) and the fixture ``pair`` (a left-padded pair with a shared
prefix, requested by the multi-site tests on ``qwen2``).
"""

import pytest
import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.patching import mechanisms as gt
from reward_lens_tl.testing import random_batch, tiny_reward_model, tiny_tokenizer

__all__ = ["N", "manual_patch", "no_hooks_left", "pair"]


N = 50


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """Tiny models gain nothing from a second thread, and on a shared 2-core machine the
    thread pool's barriers make every small op many times slower; restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def pair(length=9, seed=5, lengths=None):
    ids, mask = random_batch(2, lengths or [length, length], low=6, seed=seed)  # padded
    return ids[0][mask[0].bool()], ids[1][mask[1].bool()]


def no_hooks_left(model) -> bool:
    return all(not h.fwd_hooks and not h.bwd_hooks for h in model.hook_dict.values())


def manual_patch(model, target, source, hook, tgt_pos, src_pos):
    _, cache = model.run_with_cache(source[None], names_filter=hook)

    def write(act, hook):
        act = act.clone()
        act[0, tgt_pos] = cache[hook.name][0, src_pos]
        return act

    with torch.no_grad():
        return float(
            model.run_with_hooks(target[None], return_type="reward", fwd_hooks=[(hook, write)])[0]
        )


@pytest.fixture(scope="module", params=["llama", "gemma2", "gpt2"])
def model(request):
    return HookedRewardModel.from_pretrained(tiny_reward_model(request.param))


@pytest.fixture(scope="module")
def llama():
    return HookedRewardModel.from_pretrained(tiny_reward_model("llama"), tiny_tokenizer())


@pytest.fixture(scope="module")
def qwen2():
    return HookedRewardModel.from_pretrained(tiny_reward_model("qwen2"))


@pytest.fixture(scope="module", name="pair")
def shared_prefix_pair():
    ids, _ = random_batch(2, [11, 9], low=6, seed=4)  # left padded
    clean, corrupted = ids[0], ids[1, -9:]
    corrupted[:4] = clean[:4]  # a shared prefix: the no-op writes there are skipped
    return clean, corrupted


@pytest.fixture(scope="module")
def zoo():
    from reward_lens_tl.zoo import load_task, zoo_path

    return HookedRewardModel.from_pretrained(zoo_path("scalar")), load_task().task


@pytest.fixture(scope="module")
def pairs(zoo):
    _, task = zoo
    return {f: task.contrast_pairs(f, N, 0, filler_swaps=2) for f in gt.SWAP_FEATURES}
