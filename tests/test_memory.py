"""Memory is checked before it is spent: a forward or a cache that cannot fit is refused with a
typed error naming the estimate, the memory available and the fix; the estimates are lower
bounds of what torch really allocates (so nothing that fits is refused)."""

from unittest import mock

import pytest
import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.errors import MemoryEstimateError
from reward_lens_tl.memory import cache_bytes, forward_bytes
from reward_lens_tl.zoo import zoo_path

FREE = "reward_lens_tl.memory.available_bytes"


@pytest.fixture(scope="module", params=["scalar", "multi"])
def model(request):
    return HookedRewardModel.from_pretrained(zoo_path(request.param))


def rows(model, n):
    """`n` copies of one real conversation (the gated model needs its template's header)."""
    return model.to_tokens(("explain how to bake bread", "the oven and the flour")).expand(n, -1)


def test_a_batch_that_cannot_fit_is_refused_before_anything_is_allocated(model):
    ids = torch.ones(300_000, 64, dtype=torch.long)
    with mock.patch(FREE, return_value=8 * 2**30):
        for call in (model.rewards, model, lambda x: model.run_with_cache(x)):
            with pytest.raises(MemoryEstimateError, match=r"300000 × 64 batch.*8\.0 GiB available"):
                call(ids)
        with pytest.raises(MemoryEstimateError, match="names_filter"):
            model.run_with_cache(ids[:20_000])  # the forward fits; every cached hook does not
        # a small batch with one hook cached and one position kept is not even checked
        model.run_with_cache(rows(model, 2), names_filter="blocks.0.hook_resid_post", pos_slice=-1)


def test_nothing_is_checked_when_memory_cannot_be_read_or_the_estimate_is_small(model):
    ids = rows(model, 2)
    with mock.patch(FREE, return_value=1) as free:
        model.rewards(ids)  # a few KiB: below the threshold, the free memory is not read
    assert free.call_count == 0
    with mock.patch(FREE, return_value=None):
        assert forward_bytes(model.cfg, 300_000, 64) > 2**30  # would be checked, cannot be


def test_the_estimates_are_below_what_torch_allocates(model):
    """The cache estimate equals the bytes of the tensors the cache returns (every hook), and
    the forward estimate is below the activations of one layer's hooks."""
    ids = rows(model, 3)
    _, cache = model.run_with_cache(ids)
    held = sum(t.numel() * t.element_size() for t in cache.values())
    estimate = cache_bytes(model, 3, ids.shape[1])
    assert 0.9 * held <= estimate <= 1.1 * held
    one_layer = sum(
        t.numel() * t.element_size() for name, t in cache.items() if name.startswith("blocks.0.")
    )
    assert forward_bytes(model.cfg, 3, ids.shape[1]) <= one_layer


def test_a_cache_that_fits_but_takes_much_of_the_memory_is_announced_first(model):
    """`run_with_cache(ids)` of everything at length: it runs, after a `LargeCacheWarning` that
    names the size, the share of the free memory, the attention's share and the fix; a cache
    that takes little of the memory is silent, and so is the same call with a filter."""
    import warnings

    from reward_lens_tl.memory import LargeCacheWarning

    ids = rows(model, 1)
    need = cache_bytes(model, 1, ids.shape[1])
    attention = cache_bytes(
        model, 1, ids.shape[1], lambda n: n.endswith(("hook_attn_scores", "hook_pattern"))
    )
    with mock.patch("reward_lens_tl.memory.CHECK_ABOVE", 0):
        with mock.patch(FREE, return_value=2 * need), pytest.warns(LargeCacheWarning) as seen:
            _, cache = model.run_with_cache(ids)
        message = str(seen[0].message)
        assert f"1 × {ids.shape[1]} batch" in message and "50% of the" in message
        assert f"{attention / need:.0%} of it attention" in message and "names_filter=" in message
        assert seen[0].filename == __file__  # said at the caller's line
        assert len(cache) > 50
        with mock.patch(FREE, return_value=100 * need), warnings.catch_warnings():
            warnings.simplefilter("error", LargeCacheWarning)
            model.run_with_cache(ids)
            with mock.patch(FREE, return_value=2 * need):
                model.run_with_cache(ids, names_filter=lambda n: n.endswith("hook_resid_post"))
