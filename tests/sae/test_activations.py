"""Activations collected from a model: padding excluded, pairs and re-batching."""

from __future__ import annotations

import torch

from reward_lens_tl.pair_batches import pair_batches
from reward_lens_tl.sae import (
    collect_activations,
    iter_activations,
    rebatch,
)


# ---- activations -------------------------------------------------------------------------------
def test_activations_exclude_padding_and_match_unpadded_runs(llama, batch):
    ids, mask = batch
    acts = collect_activations(llama, "blocks.0.hook_resid_post", [(ids, mask)])
    assert acts.shape == (int(mask.sum()), llama.cfg.d_model)
    n = int(mask[1].sum())  # row 1's tokens are its real columns (pads after its first)
    row = ids[1][mask[1].bool()][None]
    _, cache = llama.run_with_cache(row, names_filter="blocks.0.hook_resid_post")
    start = int(mask[0].sum())
    torch.testing.assert_close(acts[start : start + n], cache["blocks.0.hook_resid_post"][0])
    # an id tensor alone: padding found from the pad id; or plain id lists
    assert collect_activations(llama, "blocks.0.hook_resid_post", ids).shape == acts.shape
    lists = [row[m.bool()].tolist() for row, m in zip(ids, mask, strict=True)]
    torch.testing.assert_close(collect_activations(llama, "blocks.0.hook_resid_post", lists), acts)


def test_activations_from_pairs_and_rebatch(llama):
    from types import SimpleNamespace as Pair

    pairs = [Pair(prompt="w6 w7", chosen="w8", rejected="w9 w10 w11")] * 5
    chunks = list(iter_activations(llama, "hook_embed", pairs, batch_size=2))
    n_tokens = sum(int(m.sum()) for _, m, _ in pair_batches(llama, pairs, 2))
    assert sum(c.shape[0] for c in chunks) == n_tokens
    batches = list(rebatch(chunks, batch_size=8, buffer_batches=2))
    assert all(b.shape == (8, llama.cfg.d_model) for b in batches)
    assert len(batches) == n_tokens // 8
