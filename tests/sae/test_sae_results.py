"""SAE results on hand-made tensors: a direct attribution's total, completeness, top features and
differences; the AtP check's correlation, sign agreement and relative error against numpy;
the labels and index helpers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from reward_lens_tl.errors import RewardLensError
from reward_lens_tl.sae.sae_results import (
    AtPCheck,
    FeatureAttribution,
    as_index_tensor,
    feature_label,
    short_site,
)

SITE = "blocks.1.hook_resid_post"


def attribution(seed: int) -> FeatureAttribution:
    g = torch.Generator().manual_seed(seed)
    values, acts = torch.randn(6, 3, generator=g), torch.rand(6, 3, generator=g)
    error, dec, head = (
        torch.randn(3, generator=g),
        torch.randn(3, generator=g),
        torch.randn(3, generator=g),
    )
    rewards = values.sum(0) + error + dec + head + torch.tensor([0.0, 0.25, -0.5])
    return FeatureAttribution(values, acts, rewards, SITE, "direct", error, dec, head)


def test_a_direct_attributions_total_completeness_and_top_features():
    attr = attribution(0)
    v = attr.values.numpy()
    total = v.sum(0) + attr.error.numpy() + attr.decoder_bias.numpy() + attr.head_bias.numpy()
    np.testing.assert_allclose(attr.total().numpy(), total, atol=1e-6)
    assert attr.completeness_error() == pytest.approx(0.5, abs=1e-6)
    assert (
        attr.top_features(3, example=1) == np.argsort(-np.abs(v[:, 1]), kind="stable")[:3].tolist()
    )
    mean_order = np.argsort(-np.abs(v.mean(1)), kind="stable")[:2]
    top = attr.top_k(2)
    assert [label for label, _ in top] == [f"f{i}" for i in mean_order]
    assert [value for _, value in top] == pytest.approx(v.mean(1)[mean_order].tolist(), abs=1e-6)


def test_the_difference_of_two_attributions_is_termwise():
    a, b = attribution(0), attribution(1)
    d = a - b
    torch.testing.assert_close(d.values, a.values - b.values)
    torch.testing.assert_close(d.total(), a.total() - b.total(), atol=1e-5, rtol=0)
    atp = FeatureAttribution(a.values, a.activations, a.rewards, SITE, "atp")
    with pytest.raises(RewardLensError, match="different sites or methods"):
        a - atp
    with pytest.raises(RewardLensError, match="no exact decomposition"):
        atp.total()


def test_the_atp_check_against_numpy():
    g = torch.Generator().manual_seed(3)
    actual = torch.randn(4, 5, generator=g)
    estimate = actual + 0.3 * torch.randn(4, 5, generator=g)
    actual[0, 0] = 1e-4  # below min_effect: not counted in the sign agreement
    check = AtPCheck((1, 2, 3, 4), estimate, actual)
    e, a = estimate.numpy().ravel(), actual.numpy().ravel()
    assert check.pearson() == pytest.approx(np.corrcoef(e, a)[0, 1], abs=1e-6)
    keep = np.abs(a) >= 1e-3
    assert check.sign_agreement() == pytest.approx(np.mean(np.sign(e[keep]) == np.sign(a[keep])))
    assert check.relative_error() == pytest.approx(
        np.linalg.norm(e - a) / np.linalg.norm(a), rel=1e-5
    )
    assert check.summary()["features"] == 4


def test_labels_and_indices():
    assert feature_label(np.int64(7)) == "f7"
    assert (
        short_site("blocks.12.hook_mlp_out") == "L12 mlp_out"
        and short_site("hook_embed") == "embed"
    )
    idx = as_index_tensor([[1, 2], [3, 4]])
    assert idx.dtype == torch.long and idx.tolist() == [1, 2, 3, 4]
