"""Reward sources compared together: a scalar model, an implicit reward and the objectives of the
multi-objective model."""

import pandas as pd
import pytest
import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.crossmodel import (
    BackboneMismatchError,
    ExplicitReward,
    UnknownModelError,
    compare_models,
)
from reward_lens_tl.zoo import zoo_path
from tests.figures import check_figure


def test_implicit_and_explicit_and_objectives(scalar, irm, pairs):
    multi = HookedRewardModel.from_pretrained(zoo_path("multi"))
    models = {
        "scalar": scalar,
        "implicit": irm,
        "helpfulness": ExplicitReward(multi, "helpfulness"),
        "harmlessness": ExplicitReward(multi, "harmlessness"),
    }
    cmp = compare_models(models, pairs, n_boot=100, batch_size=12)
    summary = cmp.summary()
    assert len(summary) == 6
    row = summary.set_index(["model_a", "model_b"]).loc[("scalar", "implicit")]
    assert 0.5 < row["pairwise_agreement"] <= 1.0 and pd.isna(row["attribution_spearman"])
    assert cmp.cka("scalar", "implicit").shape == (4, 3)  # 3 + 1 sites vs 2 + 1 sites
    rho = cmp.attribution_rank_correlation("helpfulness", "harmlessness")[0]
    assert -1.0 <= rho < 0.999  # same backbone, different read-out directions
    with pytest.raises(BackboneMismatchError, match="different backbones"):
        cmp.attribution_rank_correlation("scalar", "implicit")
    with pytest.raises(UnknownModelError):
        cmp.run("nope")
    # the agreement matrix: shares on a 0..1 scale, the diagonal 1, each value in its cell
    names = list(cmp.names)
    fig = check_figure(cmp.plot(), static=cmp.plot(backend="matplotlib"), x_labels=names)
    heat = fig.data[0]
    assert (heat.zmin, heat.zmax, heat.zmid) == (0.0, 1.0, None) and heat.texttemplate
    i, j = names.index("scalar"), names.index("implicit")
    assert heat.z[i][j] == heat.z[j][i] == row["pairwise_agreement"]
    assert all(heat.z[k][k] == 1.0 for k in range(len(names)))
    # the lens: one line per model over relative depth, a band each; hover names the site
    fig = check_figure(cmp.plot_lens(), static=cmp.plot_lens(backend="matplotlib"))
    lines = [t for t in fig.data if t.fill != "toself"]
    assert [t.name for t in lines] == names
    scalar_run = cmp.run("scalar")
    assert list(lines[0].customdata) == list(scalar_run.lens_labels)
    assert lines[0].x[0] == 0.0 and lines[0].x[-1] == 1.0 and len(lines[1].x) != len(lines[0].x)
    final = scalar_run.lens_margins / scalar_run.lens_margins[-1].std()
    assert list(lines[0].y) == pytest.approx(final.mean(1).tolist(), rel=1e-5)
    # CKA: a's sites down, b's across, 0..1
    fig = check_figure(
        cmp.plot_cka("scalar", "implicit"),
        static=cmp.plot_cka("scalar", "implicit", backend="matplotlib"),
        x_labels=list(cmp.run("implicit").representations),
    )
    assert list(fig.layout.yaxis.ticktext) == list(scalar_run.representations)
    assert (fig.data[0].zmin, fig.data[0].zmax) == (0.0, 1.0)
    torch.testing.assert_close(
        torch.tensor(fig.data[0].z), cmp.cka("scalar", "implicit").double(), equal_nan=True
    )
