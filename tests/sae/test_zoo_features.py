"""The planted-feature report, on a stub task and (slow tier) on the zoo model."""

from __future__ import annotations

import pytest
import torch

from reward_lens_tl import HookedRewardModel
from tests.figures import check_figure


# ---- ground truth -------------------------------------------------------------------------------
def test_planted_feature_report_on_a_stub_task(llama, trained_mid):
    """The report's plumbing on a stand-in task: feature "w40" = positions of token 40."""
    import random
    from types import SimpleNamespace

    from reward_lens_tl.sae.zoo_features import (
        column_correlations,
        latent_table,
        planted_feature_report,
    )

    def example(rng):
        ids = [1] + [rng.choice([40, *range(10, 30)]) for _ in range(rng.randint(3, 10))]
        where = tuple(i for i, t in enumerate(ids) if t == 40)
        return SimpleNamespace(
            input_ids=tuple(ids),
            feature_positions={"w40": where},
            contributions={"w40": float(len(where))},
        )

    class Task:
        rule = SimpleNamespace(weight=lambda feature: 1.0)

        def examples(self, n, seed):
            rng = random.Random(seed)
            return [example(rng) for _ in range(n)]

    report = planted_feature_report(llama, trained_mid.sae, Task(), features=("w40",), n=60)
    row = report["w40"]
    assert -1 <= row.correlation <= 1 and row.latent in range(trained_mid.sae.cfg.d_sae)
    assert row.best_correlation >= row.correlation
    assert "passed" in report.to_dataframe()
    fig = check_figure(report.plot(), static=report.plot(backend="matplotlib"))
    assert fig.data[0].x.tolist() == [row.correlation]
    assert list(fig.layout.yaxis.ticktext) == [f"w40 → f{row.latent}"]
    at_reward = planted_feature_report(
        llama, trained_mid.sae, Task(), features=("w40",), n=60, metric="reward_token"
    )["w40"]
    assert at_reward.metric == "reward_token"
    assert at_reward.correlation == at_reward.reward_token_correlation
    with pytest.raises(ValueError, match="metric"):
        planted_feature_report(llama, trained_mid.sae, Task(), features=("w40",), metric="x")
    examples = Task().examples(20, seed=0)
    *_, owner, reads = latent_table(llama, trained_mid.sae, examples, ("w40",))
    last = torch.cumsum(torch.bincount(owner), 0) - 1  # the reward is read at the last token
    assert reads.nonzero().flatten().tolist() == last.tolist()
    z = torch.randn(50, 3)
    assert column_correlations(z, z[:, 1])[1] == pytest.approx(1.0)
    assert column_correlations(torch.zeros(5, 2), torch.arange(5.0)).eq(0).all()


# ---- ground truth on the zoo -------------------------------------------------------------------
def _zoo():
    try:
        from reward_lens_tl.zoo import load_task, zoo_path
    except ImportError as err:
        pytest.skip(f"the model zoo package is not importable ({err})")
    path = zoo_path("scalar")
    if not (path / "config.json").exists():
        pytest.skip(f"zoo model missing at {path}: run the zoo training to create it")
    return HookedRewardModel.from_pretrained(path), load_task().task


@pytest.mark.slow  # tens of seconds: the slow tier (make test-all / CI)
def test_zoo_planted_features_have_matching_latents():
    """Issue 6's ground truth on the shipped scalar model: every planted feature has a latent
    correlating ≥ 0.8 with it whose ablation moves the reward by ≥ 0.05 with the planted sign.
    topic_match and harmful are read on their tokens at blocks.0.hook_resid_post (summed
    activation); length and sycophancy at the reward token of the final residual, where the
    model gathers them. Two 128-latent k=8 TopK SAEs, seed 0 (≈ 4 s of training each on one
    thread); seeds 1 and 2 pass as well (see reward_lens_tl.sae.zoo_features)."""
    from reward_lens_tl.sae.zoo_features import ZOO_PLAN, zoo_ground_truth

    model, task = _zoo()
    report, trained = zoo_ground_truth(model, task)
    assert set(trained) == {"blocks.0.hook_resid_post", "blocks.2.hook_resid_post"}
    assert [r.feature for r in report.rows] == list(ZOO_PLAN)
    for row in report.rows:
        assert (row.hook_name, row.metric) == ZOO_PLAN[row.feature]
        assert row.correlation >= 0.8 and row.passed, row
        assert row.effect * row.planted_sign >= 0.05, row
    assert report["harmful"].correlation >= 0.95 and report["sycophancy"].correlation >= 0.95
