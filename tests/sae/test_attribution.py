"""Feature attribution is complete; attribution patching over latents agrees with ablation;
steering and ablation on the final residual."""

from __future__ import annotations

import pytest
import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.sae import (
    SAESiteError,
    atp_check,
    feature_attribution,
    feature_steering,
    latent_ablation,
    latent_attribution_patching,
    pair_feature_attribution,
)
from reward_lens_tl.sae.testing import random_topk_sae
from reward_lens_tl.testing import tiny_reward_model
from tests.figures import check_figure
from tests.sae.conftest import FINAL, _no_saes_or_hooks


def test_direct_attribution_refuses_other_sites(llama, batch):
    sae = random_topk_sae(llama, "blocks.0.hook_resid_post")
    with pytest.raises(SAESiteError, match="latent_attribution_patching"):
        feature_attribution(llama, sae, *batch)


# ---- attribution -------------------------------------------------------------------------------
@pytest.mark.parametrize("family", ["llama", "gpt2", "gemma2"])
def test_final_residual_feature_attribution_is_complete(family, batch):
    model = HookedRewardModel.from_pretrained(tiny_reward_model(family))
    sae = random_topk_sae(model, FINAL)
    attr = feature_attribution(model, sae, *batch)
    assert attr.completeness_error() <= 1e-4
    torch.testing.assert_close(attr.rewards, model.rewards(*batch).float())
    # columns of each row's tokens 1, 2, 3, 0 (pads after each row's first token: tokens 1.. of
    # the rows of 9, 6, 12, 3 tokens start at columns 4, 7, 1, 10)
    at_pos = feature_attribution(model, sae, *batch, positions=[4, 8, 3, 0])
    assert at_pos.completeness_error() <= 1e-4
    assert (attr.values != 0).sum(0).le(8).all()  # TopK: at most k latents contribute
    assert _no_saes_or_hooks(model)


def test_pair_margin_attribution_is_complete(llama):
    from types import SimpleNamespace as Pair

    pairs = [
        Pair(prompt="w6 w7", chosen="w8 w30", rejected="w9 w10 w11"),
        Pair(prompt="w12", chosen="w13", rejected="w40 w41"),
    ]
    sae = random_topk_sae(llama, FINAL)
    margin = pair_feature_attribution(llama, sae, pairs, batch_size=1).margin
    assert margin.completeness_error() <= 1e-4
    assert len(margin.top_k(3, example=0)) == 3
    assert len(margin.to_dataframe(k=3)) == 6
    fig = check_figure(margin.plot(k=3, example=0), static=margin.plot(k=3, backend="matplotlib"))
    top = margin.top_k(3, example=0)
    terms = {name: float(term[0]) for name, term in margin.terms().items()}
    assert list(fig.layout.yaxis.ticktext) == [label for label, _ in top] + list(terms)
    assert fig.data[0].x.tolist() == pytest.approx([v for _, v in top] + list(terms.values()))
    assert "example 0" in fig.layout.title.text
    fig = check_figure(pair_feature_attribution(llama, sae, pairs).plot(k=2))
    assert len(fig.data[0].x) == 2 + 3  # the margin's top 2 and its three terms


def test_atp_over_latents_agrees_with_ablation(llama, batch, trained_mid):
    ids, mask = batch
    check = atp_check(llama, trained_mid.sae, ids, mask, k=10)
    assert check.pearson() > 0.9
    assert check.sign_agreement() >= 0.9
    direct = latent_ablation(llama, trained_mid.sae, ids, mask, list(check.features))
    torch.testing.assert_close(direct.values, check.actual)
    fig = check_figure(check.plot(), static=check.plot(backend="matplotlib"))
    assert fig.data[0].x.tolist() == check.actual.flatten().tolist()
    assert fig.data[0].y.tolist() == check.estimate.flatten().tolist()
    assert fig.layout.title.text.endswith(f"r = {check.pearson():#.3g}")
    assert len(fig.layout.shapes) == 1  # the line estimate = actual
    fig = check_figure(direct.plot(k=4), static=direct.plot(k=4, backend="matplotlib"))
    assert fig.data[0].x.tolist() == pytest.approx([v for _, v in direct.top_k(4)])
    atp = latent_attribution_patching(llama, trained_mid.sae, ids, mask)
    fig = check_figure(atp.plot(k=5), static=atp.plot(k=5, backend="matplotlib"))
    assert list(fig.layout.yaxis.ticktext) == [label for label, _ in atp.top_k(5)]  # no terms
    assert _no_saes_or_hooks(llama)
    assert all(p.grad is None for p in llama.parameters())


def test_feature_steering_and_ablation_on_the_final_residual(llama, batch):
    ids, mask = batch
    sae = random_topk_sae(llama, FINAL)
    attr = feature_attribution(llama, sae, ids, mask)
    f = attr.top_features(1)[0]
    curve = feature_steering(llama, sae, ids, mask, feature=f, coefficients=[0.0, 1.0])
    torch.testing.assert_close(curve.rewards[0], llama.rewards(ids, mask))
    fig = check_figure(curve.plot(), static=curve.plot(backend="matplotlib"))
    band, mean = fig.data  # ± 1 std over the 4 examples, then the mean
    assert list(mean.x) == [0.0, 1.0] and list(mean.y) == pytest.approx(curve.mean().tolist())
    assert band.hoverinfo == "skip" and f"{curve.slope():#.3g}" in fig.layout.title.text
    # ablating a latent at the reward position only: its direct effect up to the final norm's
    # change of scale, so same sign when large
    effect = latent_ablation(llama, sae, ids, mask, [f], positions="reward").values[0]
    big = attr.values[f].abs() > 0.05  # values [feature, example]
    assert (effect[big].sign() == attr.values[f, big].sign()).all()
