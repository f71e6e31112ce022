"""Running a sweep: mean and zero ablations, user hooks and cleanliness after errors, skipped
shared-prefix writes, several sites sharing runs, and the default chunk sizes."""

import warnings

import pytest
import torch
from transformer_lens import patching as tl_patching

from reward_lens_tl.padding import ReadingPositionWarning
from reward_lens_tl.patching import (
    MultiSitePatchResult,
    PatchingError,
    activation_patching,
    attribution_patching,
)
from reward_lens_tl.testing import random_batch
from tests.patching.conftest import no_hooks_left, pair


@pytest.fixture(scope="module")
def model(qwen2):
    """This module's multi-site tests run on the tiny qwen2 model (``qwen2`` in conftest),
    not on conftest's ``model`` over three families."""
    return qwen2


SITES = ("attn_out", "mlp_out", "heads", "resid_post")


def test_mean_ablation_uses_reference_means(llama):
    """Means over the reference's real tokens; per position, positions count from each
    sequence's first token whichever side the reference is padded on."""
    clean, _ = pair()
    lengths = [12, 8, 10, 9]
    ref, mask = random_batch(4, lengths, low=6, seed=11, padding_side="right")
    left = random_batch(4, lengths, low=6, seed=11)  # the same rows, left padded
    hook = "blocks.1.hook_mlp_out"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReadingPositionWarning)  # right padded on purpose
        _, cache = llama.run_with_cache(ref, attention_mask=mask, names_filter=hook)
    w = mask[..., None].float()
    token_mean = (cache[hook] * w).sum((0, 1)) / w.sum()
    position_mean = (cache[hook] * w).sum(0) / w.sum(0)  # right padded: column = position
    with torch.no_grad():
        reward = float(llama.rewards(clean[None])[0])
    for mean_over, mean, reference in [
        ("token", token_mean, (ref, mask)),
        ("position", position_mean[: len(clean)], (ref, mask)),
        ("position", position_mean[: len(clean)], left),
        ("position", position_mean[: len(clean)], left[0]),  # mask inferred from the pads
    ]:
        res = activation_patching(
            llama, clean, site="mlp_out", mode="mean", reference=reference, mean_over=mean_over
        )
        with torch.no_grad():
            ablated = llama.run_with_hooks(
                clean[None],
                return_type="reward",
                fwd_hooks=[(hook, lambda a, hook, m=mean: a * 0 + m)],
            )
        assert abs(float(res.values[1]) - (float(ablated[0]) - reward)) <= 1e-5
    zero = activation_patching(llama, clean, site="z", mode="zero", layers=[0], heads=[2])
    with torch.no_grad():
        killed = llama.run_with_hooks(
            clean[None],
            return_type="reward",
            fwd_hooks=[
                (
                    "blocks.0.attn.hook_z",
                    lambda z, hook: torch.cat([z[:, :, :2], 0 * z[:, :, 2:3], z[:, :, 3:]], 2),
                )
            ],
        )
    assert abs(float(zero.values[0, 0]) - (float(killed[0]) - reward)) <= 1e-5
    with pytest.raises(PatchingError, match="reference"):
        activation_patching(llama, clean, mode="mean")
    with pytest.raises(PatchingError, match="covering"):
        activation_patching(
            llama, clean, mode="mean", reference=(ref[:, :5], mask[:, :5]), mean_over="position"
        )


def test_user_hooks_compose(llama):
    clean, corrupted = pair()
    half = [("blocks.0.hook_mlp_out", lambda a, hook: a * 0.5)]
    with llama.hooks(fwd_hooks=half):
        _, clean_cache = llama.run_with_cache(clean[None])
        with torch.no_grad():
            expected = tl_patching.get_act_patch_resid_pre(
                llama, corrupted[None], clean_cache, lambda logits: logits[0, -1, 0]
            )
    got = activation_patching(
        llama, clean, corrupted, alignment="exact", metric=lambda r: r, fwd_hooks=half
    )
    assert (got.values - expected).abs().max() <= 1e-5
    assert no_hooks_left(llama)


def test_exception_mid_sweep_leaves_model_clean(llama):
    clean, corrupted = pair()
    weights = {k: v.clone() for k, v in llama.state_dict().items()}
    calls = []

    def bad_metric(r):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("metric failed on chunk 3")
        return r

    with pytest.raises(RuntimeError, match="chunk 3"):
        activation_patching(
            llama,
            clean,
            corrupted,
            site="z",
            by_position=True,
            chunk_size=4,
            metric=bad_metric,
            fwd_hooks=[("blocks.0.hook_mlp_out", lambda a, hook: a)],
        )
    assert no_hooks_left(llama)

    def bad_grad_metric(r):
        raise ValueError("nope")

    with pytest.raises(ValueError, match="nope"):
        attribution_patching(llama, clean, corrupted, metric=bad_grad_metric, graddrop=True)
    assert no_hooks_left(llama)
    assert all(torch.equal(v, weights[k]) for k, v in llama.state_dict().items())
    assert all(p.grad is None for p in llama.parameters())


def test_shared_prefix_writes_are_skipped_exactly(llama):
    """A corrupted token at position 5: earlier positions carry identical activations, their
    cells are the target reward exactly, and everything still equals TransformerLens."""
    clean, _ = pair(length=10, seed=12)
    corrupted = clean.clone()
    corrupted[5] = 7 if int(clean[5]) != 7 else 8
    _, clean_cache = llama.run_with_cache(clean[None])
    metric = lambda logits: logits[0, -1, 0]  # noqa: E731
    with torch.no_grad():
        by_pos = tl_patching.get_act_patch_attn_head_out_by_pos(
            llama, corrupted[None], clean_cache, metric
        )
        all_pos = tl_patching.get_act_patch_attn_head_out_all_pos(
            llama, corrupted[None], clean_cache, metric
        )
        target = float(llama.rewards(corrupted[None])[0])
    res = activation_patching(llama, clean, corrupted, site="z", by_position=True)
    # exactly the sweep's own target run (batched with the source run: ~1e-8 from a lone one)
    assert bool((res.rewards[:, :5] == res.target_reward).all())
    assert abs(res.target_reward - target) <= 1e-6
    assert (res.rewards - by_pos).abs().max() <= 1e-5
    res = activation_patching(llama, clean, corrupted, site="z", metric=lambda r: r)
    assert (res.values - all_pos).abs().max() <= 1e-5


@pytest.mark.parametrize("sites", [SITES, SITES[:3]], ids=["separate", "one-forward-per-layer"])
@pytest.mark.parametrize("mode", ["denoising", "noising", "zero"])
def test_one_call_equals_single_site_calls(model, pair, mode, sites):
    """With only in-block sites (attn_out, mlp_out, heads) every layer's cells of all sites
    run as one forward; with resid_post among them each site keeps its own chunks."""
    args = pair if mode != "zero" else pair[:1]
    both = activation_patching(model, *args, site=sites, mode=mode, heads=[1, 3])
    assert isinstance(both, MultiSitePatchResult)
    assert both.sites == ("attn_out", "mlp_out", "z", "resid_post")[: len(sites)]
    for site in both.sites:
        single = activation_patching(
            model, *args, site=site, mode=mode, heads=[1, 3] if site == "z" else None
        )
        assert both[site].shape == single.shape
        assert (both[site].values - single.values).abs().max() <= 1e-6
        assert (both[site].rewards - single.rewards).abs().max() <= 1e-6
        assert both[site].target_reward == single.target_reward
    assert both["z"].grid.heads == (1, 3)


def test_default_chunks_shrink_with_length(model, monkeypatch):
    """By default a forward holds at most CHUNK_TOKENS variant-positions (fewer variants for
    longer runs); the values do not depend on the chunking."""
    from reward_lens_tl.patching import runner

    ids, _ = random_batch(2, [30, 30], low=6, seed=6)
    fixed = activation_patching(model, ids[0], ids[1], site="resid_pre", chunk_size=1)
    monkeypatch.setattr(runner, "CHUNK_TOKENS", 64)
    seen = []
    original = runner.Sweep.run_chunk

    def spy(self, layer, j, head, p0):
        seen.append((len(j), 30 - p0))
        return original(self, layer, j, head, p0)

    monkeypatch.setattr(runner.Sweep, "run_chunk", spy)
    auto = activation_patching(model, ids[0], ids[1], site="resid_pre")
    assert (auto.values - fixed.values).abs().max() <= 1e-5
    assert all(n * length <= 64 or n == 1 for n, length in seen)
    assert max(n for n, _ in seen) > 1  # late positions still share a forward


def test_one_objective_of_a_plain_head_is_its_column_of_a_plain_patched_forward():
    """`objective=` reads the head column the patched forward gives (a scalar head's only
    column is its reward): checked cell by cell against `objective_rewards` under a hand-written
    hook."""
    import torch

    from reward_lens_tl import HookedRewardModel
    from reward_lens_tl.patching import activation_patching
    from reward_lens_tl.testing import random_batch, tiny_reward_model

    ids, _ = random_batch(2, [8, 8], low=6)
    scalar = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    plain = activation_patching(scalar, ids[0], ids[1], site="resid_pre")
    column = activation_patching(scalar, ids[0], ids[1], site="resid_pre", objective=0)
    torch.testing.assert_close(column.rewards, plain.rewards, atol=0, rtol=0)
    multi = HookedRewardModel.from_pretrained(
        tiny_reward_model("llama", num_labels=3), objective_names=["a", "b", "c"]
    )
    result = activation_patching(multi, ids[0], ids[1], site="resid_pre", objective="c")
    _, clean = multi.run_with_cache(ids[:1])
    for layer, pos in [(0, 3), (1, 7), (1, 0)]:
        name = f"blocks.{layer}.hook_resid_pre"

        def write(act, hook, name=name, pos=pos):
            act = act.clone()
            act[:, pos] = clean[name][:, pos]
            return act

        with multi.hooks(fwd_hooks=[(name, write)]):
            expected = multi.objective_rewards(ids[1:])[0, 2]
        torch.testing.assert_close(result.rewards[layer, pos], expected, atol=1e-5, rtol=0)
