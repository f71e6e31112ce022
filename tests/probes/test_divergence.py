"""`reward_lens_tl.probes.divergence`: the shrinkage covariance against its formula, and
divergence-aware patching's calibration and out-of-distribution cells."""

import numpy as np
import pytest
import torch

from reward_lens_tl.inputs import EncodedConversation
from reward_lens_tl.probes.divergence import (
    divergence_aware_patching,
    natural_states,
    shrinkage_covariance,
)
from tests.figures import check_figure


def test_shrinkage_covariance_matches_the_formula():
    x = torch.randn(30, 8, dtype=torch.float64) * torch.linspace(0.5, 3, 8)
    mean, cov, s = shrinkage_covariance(x)
    xc = x - x.mean(0)
    S = xc.T @ xc / 30
    mu = torch.trace(S) / 8
    d2 = ((S - mu * torch.eye(8)) ** 2).sum()
    b2 = sum(((torch.outer(r, r) - S) ** 2).sum() for r in xc) / 30**2
    assert s == pytest.approx(float(min(b2, d2) / d2))
    torch.testing.assert_close(cov, (1 - s) * S + s * mu * torch.eye(8, dtype=torch.float64))
    _, wide, _ = shrinkage_covariance(torch.randn(5, 20))  # n < d: still invertible
    assert bool((torch.linalg.eigvalsh(wide) > 0).all())


def test_divergence_calibration_and_ood_cells(zoo_scalar, zoo_task):
    natural = [e.input_ids for e in zoo_task.examples(80, 11)]
    held_out = [e.input_ids for e in zoo_task.examples(40, 12)]
    states = natural_states(zoo_scalar, natural, ["blocks.1.hook_resid_pre"])[
        "blocks.1.hook_resid_pre"
    ]
    fresh = torch.cat([
        zoo_scalar.run_with_cache(torch.tensor([s]), names_filter=states.hook)[1][states.hook][0]
        for s in held_out
    ])  # fmt: skip
    share_ood = float((states.percentile(states.distance(fresh)) >= 99).float().mean())
    assert share_ood < 0.05  # natural states are in distribution
    clean, corrupted = (
        EncodedConversation(p.input_ids, p.response_start)
        for p in (lambda c: (c.edited, c.base))(
            zoo_task.contrast_pairs("topic_match", 1, seed=7)[0]
        )
    )
    natural_patch = divergence_aware_patching(
        zoo_scalar, clean, corrupted, natural=natural, site="resid_pre", alignment="exact"
    )
    assert natural_patch.ood_share() == 0.0  # patched states are natural clean states
    zeroed = divergence_aware_patching(
        zoo_scalar, clean, natural=natural, site="mlp_out", mode="zero"
    )
    assert bool(zeroed.ood[:2].all())  # removing block 0/1's MLP output leaves the manifold
    frame = zeroed.to_dataframe()
    assert {"distance", "percentile", "ood"} <= set(frame.columns)
    in_dist = zeroed.top_k(3)
    assert all(not frame.set_index("label").loc[label, "ood"] for label, _ in in_dist)
    assert len(zeroed.top_k(3, include_ood=True)) == 3
    fig = check_figure(zeroed.plot(), static=zeroed.plot(backend="matplotlib"),
                       x_labels=["mlp_out"], diverging=True)  # fmt: skip
    heat, marks = fig.data
    np.testing.assert_allclose(heat.z, zeroed.patch.matrix()[0].numpy(), rtol=1e-6)
    assert list(marks.y) == torch.nonzero(zeroed.ood).reshape(-1).tolist()  # × on the OOD rows
    assert [float(d) for d in heat.customdata[:, 0, 2]] == pytest.approx(zeroed.distance.tolist())
    assert f"{zeroed.ood_share():.0%} of cells" in fig.layout.title.text
