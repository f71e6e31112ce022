"""Observational tools on the zoo's scalar model, scored against the planted mechanisms.

Thresholds (≥ 50 contrast pairs per feature; the measured values are in the closing note and
the demo report): completeness ≤ 1e-4; the margin matches the hidden rule within 15 %;
zero-ablating the three components with the largest direct attribution removes ≥ 50 % of the
margin; the top component is among the three largest ablation effects; for aligned pairs, some
layer's heads read ≥ 50 % of their margin contribution from the planted tokens; and the
attention-dependent topic feature crystallises later in the lens than the local harmful-word
feature.
"""

import pytest
import torch

from reward_lens_tl.observational import observational_ground_truth
from reward_lens_tl.zoo import load_task, zoo_path

pytestmark = pytest.mark.skipif(
    not (zoo_path("scalar") / "model.safetensors").exists(), reason="zoo model not built"
)

FEATURES = ("topic_match", "harmful", "sycophancy", "length")


@pytest.fixture(scope="module")
def report():
    from reward_lens_tl import HookedRewardModel

    model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    with torch.no_grad():
        return observational_ground_truth(model, load_task().task, features=FEATURES, n=50)


@pytest.mark.parametrize("feature", FEATURES)
def test_margin_decomposes_and_matches_rule(report, feature):
    f = report[feature]
    assert f.n_pairs == 50
    assert f.completeness_error <= 1e-4
    assert abs(f.mean_margin - f.mean_rule_delta) <= 0.15 * abs(f.mean_rule_delta)


@pytest.mark.parametrize("feature", FEATURES)
def test_top_attributed_components_are_causal(report, feature):
    f = report[feature]
    removed = -f.top3_ablation_effect / f.mean_margin
    assert removed >= 0.5, f"ablating top-3 components removed only {removed:.0%}"
    assert f.top_component_ablation_rank <= 3


@pytest.mark.parametrize("feature", ["topic_match", "harmful", "sycophancy"])
def test_heads_read_the_planted_tokens(report, feature):
    assert max(report[feature].planted_source_share) >= 0.5


def test_attention_dependent_feature_appears_later_in_the_lens(report):
    order = ["0_pre", "1_pre", "2_pre", "final"]

    def median_site(feature):
        sites = [s for s, n in report[feature].crystallization for _ in range(n)]
        return sorted(order.index(s) for s in sites)[len(sites) // 2]

    assert median_site("topic_match") > median_site("harmful")
