"""Cross-model comparison: identities on a model compared with itself, a planted ablation found
by feature, objectives of the multi-objective model, and typed errors."""

import copy
import random

import pandas as pd
import pytest
import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.crossmodel import (
    BackboneMismatchError,
    ExplicitReward,
    UnknownModelError,
    compare_models,
    feature_effects,
    sweep_tau,
)
from reward_lens_tl.errors import EmptyInputError, InvalidArgumentError
from reward_lens_tl.implicit import ImplicitRewardModel
from reward_lens_tl.zoo import FEATURES, load_task, zoo_path
from reward_lens_tl.zoo.vocab import FILLER_WORDS, HARMFUL_WORDS, VOCAB


@pytest.fixture(scope="module")
def scalar():
    return HookedRewardModel.from_pretrained(zoo_path("scalar"))


@pytest.fixture(scope="module")
def ablated(scalar):
    """A copy of the scalar model whose harmful words embed like an average filler word."""
    model = copy.deepcopy(scalar)
    with torch.no_grad():
        filler = model.W_E[[VOCAB[w] for w in FILLER_WORDS]].mean(0)
        model.W_E[[VOCAB[w] for w in HARMFUL_WORDS]] = filler
    return model


@pytest.fixture(scope="module")
def irm():
    return ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))


@pytest.fixture(scope="module")
def pairs():
    task, rng = load_task().task, random.Random(11)
    out = []
    while len(out) < 24:
        a, b = task.response_pair(rng, max_words=10)
        if a.score != b.score:
            out.append((a, b) if a.score > b.score else (b, a))
    return out


@pytest.fixture(scope="module")
def self_comparison(scalar, pairs):
    return compare_models({"a": scalar, "b": scalar}, pairs, n_boot=200, batch_size=8)


def test_a_model_compared_with_itself(self_comparison):
    row = self_comparison.agreement().iloc[0]
    assert row["pairwise_agreement"] == 1.0
    assert row["reward_pearson"] == pytest.approx(1.0, abs=1e-6)
    assert row["margin_spearman"] == pytest.approx(1.0, abs=1e-9)
    assert row["pairwise_agreement_low"] == 1.0  # every resample agrees too
    cka = self_comparison.cka("a", "b")
    # the first site is the embedding of the reading token (<eos>, the same in every row): a
    # constant representation has no CKA (NaN); every other site matches itself exactly
    assert cka.shape == (4, 4) and bool(cka[0].isnan().all())
    assert torch.allclose(cka.diagonal()[1:], torch.ones(3), atol=1e-6)
    rho, lo, hi = self_comparison.attribution_rank_correlation("a", "b")
    assert rho == pytest.approx(1.0) and lo == pytest.approx(1.0)
    assert self_comparison.disagreements("a", "b").empty
    depth = self_comparison.crystallization()
    assert depth["depth"].iloc[0] == depth["depth"].iloc[1]


def test_sweep_tau_of_a_model_with_itself(self_comparison, scalar):
    sweep = pd.Series({tok: float(i % 7) + 0.1 * i for i, tok in enumerate(FILLER_WORDS)})
    cmp = type(self_comparison)(self_comparison.runs, n_boot=50, sweeps={"a": sweep, "b": sweep})
    assert cmp.sweep_tau()["tau"].iloc[0] == pytest.approx(1.0)
    assert cmp.summary()["sweep_tau"].iloc[0] == pytest.approx(1.0)
    reversed_sweep = {k: -v for k, v in sweep.items()}
    assert sweep_tau(sweep, reversed_sweep)["tau"] == pytest.approx(-1.0)
    with pytest.raises(EmptyInputError, match="share 0"):
        sweep_tau({"x": 1.0}, {"y": 2.0})


def test_ablated_copy_is_flagged_for_that_feature_only(scalar, ablated):
    task = load_task().task
    fx = feature_effects({"scalar": scalar, "ablated": ablated}, task, n=32, n_boot=300)
    assert fx.flagged("scalar", "ablated") == ["harmful"]
    assert fx.flagged("scalar", "scalar") == []
    assert fx.flagged("rule", "scalar") == []  # the explicit RM learned what was planted
    table = fx.compare("scalar", "ablated").set_index("feature")
    assert abs(table.loc["harmful", "effect_ablated"]) < 0.1 * abs(
        table.loc["harmful", "effect_scalar"]
    )
    # matched to the rule, the scalar model's effects are the planted weights
    frame = fx.to_dataframe().query("model == 'scalar'").set_index("feature")
    rule = task.rule
    for f in FEATURES:
        assert frame.loc[f, "effect"] == pytest.approx(rule.weight(f), rel=0.1)


def test_disagreements_are_ranked(scalar, ablated):
    pairs = load_task().task.contrast_pairs("harmful", 16, seed=5)
    cmp = compare_models({"scalar": scalar, "ablated": ablated}, pairs, n_boot=100)
    table = cmp.disagreements("scalar", "ablated")
    assert len(table) > 0 and table["difference"].is_monotonic_decreasing
    assert bool(((table["margin_scalar"] > 0) != (table["margin_ablated"] > 0)).all())
    top = cmp.top_k(3)
    assert [label for label, _ in top] == [str(p) for p in table["pair"].head(3)]
    assert [v for _, v in top] == pytest.approx(table["difference"].head(3).tolist())


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
    assert cmp.plot() is not None and cmp.plot_lens() is not None


def test_bad_comparisons(scalar, pairs):
    with pytest.raises(InvalidArgumentError, match="at least two"):
        compare_models([scalar], pairs)
    with pytest.raises(InvalidArgumentError, match="unique"):
        compare_models([scalar, scalar], pairs)
    with pytest.raises(EmptyInputError):
        compare_models({"a": scalar, "b": scalar}, [])


def test_demo_section(scalar, tmp_path):
    from reward_lens_tl.crossmodel.report import implicit_section

    lines = implicit_section(scalar, load_task().task, tmp_path)
    text = "\n".join(lines)
    assert (tmp_path / "implicit_feature_effects.png").is_file()
    assert "| topic_match |" in text and "agree on" in text
