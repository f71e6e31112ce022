"""Concept vectors from contrast sets."""

from __future__ import annotations

import pytest
import torch

from reward_lens_tl.sae import (
    concept_projection,
    concept_steering,
    concept_vectors_from_sets,
    decoder_alignment,
    reward_direction,
)
from reward_lens_tl.sae.testing import random_topk_sae
from tests.figures import check_figure
from tests.sae.conftest import FINAL


# ---- concept vectors ---------------------------------------------------------------------------
def test_concept_vectors_sanity(llama, batch):
    ids, mask = batch
    # two sets differing only in the last token: at the embedding the concept vector is exactly
    # the difference of the two embeddings
    base = [list(range(10, 16))] * 3
    pos = [s[:-1] + [40] for s in base]
    neg = [s[:-1] + [41] for s in base]
    cv = concept_vectors_from_sets(llama, pos, [5] * 3, neg, [5] * 3, name="40 vs 41")
    torch.testing.assert_close(cv["blocks.0.hook_resid_pre"], (llama.W_E[40] - llama.W_E[41]))
    assert len(cv.labels) == llama.cfg.n_layers + 1
    w = reward_direction(llama)
    cos = torch.nn.functional.cosine_similarity(cv[FINAL], w, dim=0)
    assert float(cos) == pytest.approx(float(cv.reward_cosine[-1]), abs=1e-5)
    # steering along the reward direction at the reward position raises the reward
    curve = concept_steering(
        llama, w, FINAL, ids, mask, coefficients=[-1.0, 0.0, 1.0], positions="reward"
    )
    torch.testing.assert_close(curve.rewards[1], llama.rewards(ids, mask))
    assert curve.slope() > 0 and (curve.rewards.diff(dim=0) > 0).all()
    # projecting out a direction orthogonal to every residual changes nothing; the reward
    # direction itself, at the final residual, leaves only the head bias
    proj = concept_projection(llama, w, FINAL, ids, mask)
    torch.testing.assert_close(proj.projected, llama.b_U[0].expand(4), atol=1e-5, rtol=0)
    sae = random_topk_sae(llama, FINAL)
    top = decoder_alignment(cv, sae, k=3)
    assert len(top) == 3 and abs(top[0][1]) >= abs(top[-1][1])
    assert len(cv.to_dataframe()) == 3
    ticks = ["L0 resid_pre", "L0 resid_post", "L1 resid_post"]  # the sites, shortened
    fig = check_figure(cv.plot(), static=cv.plot(backend="matplotlib"), x_labels=ticks)
    assert fig.data[0].y.tolist() == pytest.approx(cv.reward_cosine.tolist())
    assert list(fig.data[0].customdata) == list(cv.labels)  # hover: the full hook names
    fig = check_figure(curve.plot(), static=curve.plot(backend="matplotlib"))
    assert fig.data[-1].y.tolist() == pytest.approx(curve.mean().tolist())
    fig = check_figure(proj.plot(), static=proj.plot(backend="matplotlib"))
    assert fig.data[0].y.tolist() == pytest.approx(proj.projected.tolist())
    assert f"mean effect {float(proj.effect.mean()):#.3g}" in fig.layout.title.text
