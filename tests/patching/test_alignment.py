"""Aligning two runs position by position (end, prefix, exact) and restricting a sweep to chosen
positions (`positions=`)."""

import pytest
import torch

from reward_lens_tl import EncodedConversation, HookedRewardModel
from reward_lens_tl.patching import (
    AlignmentError,
    PatchingError,
    activation_patching,
)
from reward_lens_tl.testing import random_batch, tiny_reward_model
from tests.patching.conftest import manual_patch, pair


def test_end_alignment_pairs_reading_tokens(llama):
    clean, corrupted = pair(lengths=[11, 7], seed=4)
    res = activation_patching(llama, clean, corrupted, site="resid_pre", metric=lambda r: r)
    assert res.shape == (2, 7) and res.grid.position_labels[-1] == "end-0"
    assert res.alignment.source.tolist() == list(range(4, 11))  # clean positions 4..10
    for j, layer in [(6, 1), (0, 0), (3, 1)]:  # last column = the reading tokens
        expected = manual_patch(llama, corrupted, clean, f"blocks.{layer}.hook_resid_pre", j, 4 + j)
        assert abs(float(res.rewards[layer, j]) - expected) <= 1e-5


def test_prefix_alignment(llama):
    tok = llama.tokenizer
    a = EncodedConversation(tuple(tok("w6 w7 w8 w9 w10 w11")["input_ids"]), response_start=4)
    b = EncodedConversation(tuple(tok("w12 w13 w14 w15 w16")["input_ids"]), response_start=4)
    res = activation_patching(llama, a, b, site="resid_pre", alignment="prefix")
    assert res.shape == (2, 4) and res.alignment.target.tolist() == [0, 1, 2, 3]
    ids_a, ids_b = torch.tensor(a.ids), torch.tensor(b.ids)
    expected = manual_patch(llama, ids_b, ids_a, "blocks.1.hook_resid_pre", 2, 2)
    assert abs(float(res.rewards[1, 2]) - expected) <= 1e-5
    with pytest.raises(AlignmentError, match="prefix_length"):
        activation_patching(llama, ids_a, ids_b, alignment="prefix")
    explicit = activation_patching(llama, ids_a, ids_b, alignment="prefix", prefix_length=4)
    assert torch.allclose(explicit.values, res.values)
    shifted = EncodedConversation(b.ids, response_start=3)
    with pytest.raises(AlignmentError, match="different lengths"):
        activation_patching(llama, a, shifted, alignment="prefix")


def test_exact_alignment_requires_equal_lengths(llama):
    clean, corrupted = pair(lengths=[9, 8])
    with pytest.raises(AlignmentError, match="equal lengths"):
        activation_patching(llama, clean, corrupted, alignment="exact")


def test_positions_patch_a_span_as_one_cell():
    model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    ids, _ = random_batch(2, [9, 9], low=6, seed=3)
    clean, corrupted = ids[0], ids[1]
    cells = activation_patching(model, clean, corrupted, site="resid_pre", alignment="exact")
    some = activation_patching(
        model, clean, corrupted, site="resid_pre", alignment="exact", positions=[2, 5]
    )
    assert some.alignment.target.tolist() == [2, 5]
    assert torch.allclose(some.values, cells.values[:, [2, 5]], atol=1e-6)
    span = activation_patching(
        model,
        clean,
        corrupted,
        site="resid_pre",
        alignment="exact",
        positions=[2, 5],
        by_position=False,
        metric=lambda r: r,
    )
    names = ["blocks.1.hook_resid_pre"]
    _, cache = model.run_with_cache(clean[None], names_filter=names)

    def write(act, hook):
        act = act.clone()
        act[0, [2, 5]] = cache[hook.name][0, [2, 5]]
        return act

    with torch.no_grad():
        expected = model.run_with_hooks(
            corrupted[None], return_type="reward", fwd_hooks=[(names[0], write)]
        )
    assert abs(float(span.values[1]) - float(expected[0])) <= 1e-5
    with pytest.raises(PatchingError, match="not aligned positions"):
        activation_patching(model, clean, corrupted, alignment="exact", positions=[42])


@pytest.mark.parametrize("mode", ["denoising", "noising"])
def test_positions_under_end_alignment_keep_labels_and_sides(mode):
    """Clean and corrupted of different lengths: ``positions`` are clean-run positions (the
    source when denoising, the target when noising), and cells keep the labels of the full
    alignment."""
    model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    ids, _ = random_batch(2, [10, 7], low=6, seed=8)  # left padded
    clean, corrupted = ids[0], ids[1, -7:]
    full = activation_patching(model, clean, corrupted, mode=mode, alignment="end")
    some = activation_patching(
        model, clean, corrupted, mode=mode, alignment="end", positions=[5, 7]
    )
    clean_side = full.alignment.source if mode == "denoising" else full.alignment.target
    keep = [j for j, p in enumerate(clean_side.tolist()) if p in (5, 7)]
    assert len(keep) == 2
    assert some.grid.position_labels == tuple(full.grid.position_labels[j] for j in keep)
    assert some.labels()[0] == f"L0 {full.grid.position_labels[keep[0]]}" != "L0 end-1"
    assert torch.allclose(some.values, full.values[:, keep], atol=1e-6)
    for bad in (5, [5.5], ["5"], [True]):
        with pytest.raises(PatchingError, match="positions"):
            activation_patching(model, clean, corrupted, alignment="end", positions=bad)
