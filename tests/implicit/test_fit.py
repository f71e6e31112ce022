"""Fitting rewards on policy features: ridge recovers planted weights, divergence flags them, the
fit on the zoo and on SAE latents."""

import pytest
import torch

from reward_lens_tl.errors import InvalidArgumentError
from reward_lens_tl.implicit import (
    FeatureMatrix,
    divergence,
    fit_reward,
    implicit_feature_fit,
)
from reward_lens_tl.zoo import load_task, zoo_path
from tests.figures import check_figure


def test_ridge_recovers_planted_weights_and_divergence_flags_them():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(400, 4, generator=gen)
    groups = torch.arange(400) // 2
    feats = FeatureMatrix(x, ("a", "b", "c", "d"), groups)
    fit_a = fit_reward(feats, 3 * x[:, 0] + x[:, 1], alpha=1e-3, target_name="A")
    fit_b = fit_reward(feats, 3 * x[:, 0] - 2 * x[:, 2], alpha=1e-3, target_name="B")
    assert fit_a.r2 > 0.999 and fit_a.pairwise_agreement == 1.0 and fit_a.spearman > 0.99
    assert [n for n, _ in fit_a.top_k(2)] == ["a", "b"]
    table = divergence(fit_a, fit_b)
    verdict = dict(zip(table.names, table.verdict, strict=True))
    assert verdict == {"a": "both", "b": "A only", "c": "B only", "d": ""}
    assert fit_a.n_test % 2 == 0  # pairs never straddle the split
    fig = check_figure(fit_a.plot(k=3), static=fit_a.plot(k=3, backend="matplotlib"))
    assert list(fig.layout.yaxis.ticktext) == [name for name, _ in fit_a.top_k(3)]
    assert fig.data[0].x.tolist() == pytest.approx([w for _, w in fit_a.top_k(3)])
    assert f"R² {fit_a.r2:#.3g}" in fig.layout.title.text
    fig = check_figure(table.plot(k=3), static=table.plot(k=3, backend="matplotlib"))
    first = [name for name, _ in table.top_k(3)]  # the features that differ most
    assert list(fig.layout.yaxis.ticktext) == first and [t.name for t in fig.data] == ["A", "B"]
    rows = [table.names.index(name) for name in first]
    assert list(fig.data[0].x) == pytest.approx(table.weight_a[rows].tolist())
    assert list(fig.data[1].x) == pytest.approx(table.weight_b[rows].tolist())
    assert fig.data[0].customdata[0] == f"c ({verdict['c']})"


def test_implicit_feature_fit_on_the_zoo(irm):
    from reward_lens_tl import HookedRewardModel

    scalar = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    task = load_task().task
    pairs = [task.response_pair(__import__("random").Random(i)) for i in range(120)]
    result = implicit_feature_fit(irm, scalar, pairs, "blocks.1.hook_resid_post", alpha=10.0)
    assert result.features.values.shape == (240, irm.cfg.d_model)
    # the policy's summed residual explains the implicit reward (a sum over the same positions)
    assert result.implicit.r2 > 0.5 and result.implicit.pairwise_agreement > 0.7
    assert len(result.summary()) == 2 and len(result.divergence.to_dataframe()) == irm.cfg.d_model


def test_feature_fit_on_sae_latents(irm):
    from reward_lens_tl.implicit import policy_activations, policy_features
    from reward_lens_tl.sae import train_topk_sae

    task = load_task().task
    pairs = [task.response_pair(__import__("random").Random(i)) for i in range(40)]
    hook = "blocks.1.hook_resid_post"
    acts = policy_activations(irm, pairs, hook)
    assert acts.shape[1] == irm.cfg.d_model and acts.shape[0] > 40 * 2 * 8
    sae = train_topk_sae(acts, hook, d_sae=32, k=4, steps=30, batch_size=64, threads=1).sae
    feats = policy_features(irm, pairs, hook, sae=sae)
    assert feats.values.shape == (80, 32) and feats.names[0] == "latent0"
    # summed latents = latents of each predicting position, summed (checked on one pair)
    ids, attention, resp = irm.batch(list(pairs[0]))
    _, cache = irm.policy.run_with_cache(ids, attention_mask=attention, names_filter=[hook])
    lat = sae.encode(cache[hook])
    predicting = torch.zeros_like(resp, dtype=torch.float32)  # by hand: t - 1 predicts t
    for row, t in resp.nonzero().tolist():
        predicting[row, t - 1] = 1.0
    assert torch.allclose((lat * predicting[..., None]).sum(1), feats.values[:2], atol=1e-4)
    with pytest.raises(InvalidArgumentError, match="SAE reads"):
        policy_features(irm, pairs, "blocks.0.hook_resid_post", sae=sae)
