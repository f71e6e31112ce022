"""Splicing SAEs into a reward model: the error term keeps the reward, hooks are restored, hook
names and widths are checked."""

from __future__ import annotations

import pytest
import torch

from reward_lens_tl.errors import UnknownHookError
from reward_lens_tl.sae import (
    SAEHookError,
    SAESiteError,
    add_sae,
    collect_activations,
    run_with_cache_with_saes,
    splice_report,
    spliced,
)
from reward_lens_tl.sae.testing import random_topk_sae
from reward_lens_tl.stats import pearson
from tests.figures import check_figure
from tests.sae.conftest import FINAL, _no_saes_or_hooks


# ---- splicing ----------------------------------------------------------------------------------
@pytest.mark.parametrize("site", ["blocks.0.hook_resid_post", FINAL, "blocks.1.hook_mlp_out"])
def test_splice_with_error_term_leaves_reward_unchanged(llama, batch, site):
    ids, mask = batch
    sae = random_topk_sae(llama, site)
    report = splice_report(llama, sae, ids, mask)
    assert report.max_error_with_error_term <= 1e-5
    assert float(report.reconstruction_error.abs().max()) > 1e-3  # the reconstruction is not
    assert _no_saes_or_hooks(llama)
    fig = check_figure(report.plot(), static=report.plot(backend="matplotlib"))
    without, with_error = fig.data  # reconstruction and with-error rewards against the reward
    assert without.x.tolist() == with_error.x.tolist() == report.original.tolist()
    assert without.y.tolist() == report.reconstruction.tolist()
    r = pearson(report.original.numpy(), report.reconstruction.numpy())
    assert f"r = {r:#.3g}" in fig.layout.title.text


@torch.no_grad()
def test_add_sae_and_run_with_cache_with_saes(gpt2, batch):
    ids, mask = batch
    sae = random_topk_sae(gpt2, FINAL)
    clean = gpt2.rewards(ids, mask)
    out, cache = run_with_cache_with_saes(
        gpt2, ids, attention_mask=mask, return_type="reward", saes=[sae]
    )
    assert float((out - clean).abs().max()) <= 1e-5
    assert f"{FINAL}.hook_sae_acts_post" in cache
    add_sae(gpt2, sae)
    try:
        assert FINAL in gpt2.acts_to_saes
        assert float((gpt2.rewards(ids, mask) - clean).abs().max()) <= 1e-5
    finally:
        gpt2.reset_saes()
    assert float((gpt2.rewards(ids, mask) - clean).abs().max()) == 0.0


def test_splice_restores_model_after_an_exception(llama, batch):
    sae = random_topk_sae(llama, FINAL)
    with pytest.raises(RuntimeError), spliced(llama, sae):
        raise RuntimeError("boom")
    assert _no_saes_or_hooks(llama)


# ---- bad hook names ----------------------------------------------------------------------------
def test_bad_hook_name_is_an_error_with_close_matches(llama, batch):
    ids, mask = batch
    sae = random_topk_sae(llama, FINAL)
    sae.cfg.metadata.hook_name = "blocks.1.hook_resid_pots"
    for call in (
        lambda: splice_report(llama, sae, ids, mask),
        lambda: add_sae(llama, sae),
        lambda: run_with_cache_with_saes(llama, ids, saes=[sae]),
        lambda: collect_activations(llama, "blocks.1.hook_resid_pots", [(ids, mask)]),
    ):
        with pytest.raises(SAEHookError) as err:
            call()
        assert isinstance(err.value, UnknownHookError) and isinstance(err.value, KeyError)
        assert "blocks.1.hook_resid_post" in str(err.value)
    with pytest.raises(SAEHookError):
        random_topk_sae(llama, "blocks.7.hook_resid_post")
    assert _no_saes_or_hooks(llama)


def test_width_mismatch_is_an_error(llama, batch):
    sae = random_topk_sae(llama, FINAL, d_in=32)
    with pytest.raises(SAESiteError, match="d_model=64"):
        splice_report(llama, sae, *batch)
