"""Failure explanations: they name the zoo's sycophancy hack, are exact (attribution parts + head
bias = margin), add up over tokens, and make the report's failures section."""

from __future__ import annotations

import re

import pytest
import torch

from reward_lens_tl.data import PreferencePair, RankedItem
from reward_lens_tl.errors import (
    EmptyInputError,
    RewardLensError,
)
from reward_lens_tl.evals import eval_result, scores
from reward_lens_tl.evals.run import score_items
from tests.evals.conftest import count_rows, rb
from tests.figures import check_figure


def test_explanation_names_the_sycophancy_hack(zoo_model, zoo_eval):
    from reward_lens_tl.attribution import pair_attribution
    from reward_lens_tl.contrast import encode_contrast

    task, result = zoo_eval
    failures = result.failures().filter(subset="zoo-sycophancy-hack")
    count, hook = count_rows(zoo_model)
    with zoo_model.hooks(fwd_hooks=[hook]):
        ex = failures.explain(zoo_model)
    # one forward of the failures' sequences plus a quarter as many successes
    assert count["rows"] <= 1.5 * 2 * len(failures)
    # exact: parts + head bias = margin, and the lens ends at the margin
    assert ex.margin.completeness_error() < 1e-4
    assert torch.allclose(ex.lens.margins[-1], ex.margin.rewards, atol=1e-4)
    assert torch.allclose(ex.margin.rewards, torch.tensor([c.margin for c in failures]), atol=1e-4)
    # the tokens: the rejected response's sycophantic opener drives the wrong preference
    top = ex.tokens(2, part="response")
    assert set(top["token"]) == {"great", "question"} and (top["rejected"] > 0).all()
    assert ex.per_failure()["top_token"].str.startswith("rejected:").all()
    # the components: the same ones that carry sycophancy on the task's contrast pairs
    contrast = [encode_contrast(p) for p in task.contrast_pairs("sycophancy", 24, seed=7)]
    planted = [label for label, _ in pair_attribution(zoo_model, contrast).margin.top_k(3)]
    assert ex.wrong_way_components(1)[0] in planted
    assert ex.crystallization_site() is not None


def test_rewardmath_explains_the_hardest_wrong_solution(zoo_model):
    items = [RankedItem("how bake bread", "soup", ("great question the soup", "rain"), id=0)]
    result = score_items(zoo_model, items, progress=False)
    (failure,) = result.failures()
    assert failure.rejected_index == 0  # the sycophantic one outscored the correct solution
    ex = result.failures().explain(zoo_model, reference=None)
    assert ex.reference is None and len(ex.comparisons) == 1


def test_explanation_plot_takes_ax_first(zoo_model):
    """``plot(ax=None, k=...)`` like every result: the top ``k`` components, both backends."""
    import matplotlib.pyplot as plt

    items = [RankedItem("how bake bread", "soup", ("great question the soup", "rain"), id=0)]
    ex = score_items(zoo_model, items, progress=False).failures().explain(zoo_model, reference=None)
    top = ex.components().head(3)
    fig = check_figure(ex.plot(k=3), static=ex.plot(k=3, backend="matplotlib"))
    assert list(fig.layout.yaxis.ticktext) == top["component"].tolist()  # most wrong-way on top
    failures, successes = (t for t in fig.data if t.xaxis == "x")
    assert (failures.name, successes.name) == ("failures", "successes")
    assert failures.x.tolist() == pytest.approx(top["failures"].tolist())
    lens = [t for t in fig.data if t.xaxis == "x2"]
    assert lens[-1].name == "mean margin" and list(lens[-1].y) == pytest.approx(
        ex.lens.margins.mean(1).tolist()
    )
    static = ex.plot(k=3, backend="matplotlib")
    assert [t.get_text() for t in static.axes[0].get_yticklabels()] == top["component"].tolist()
    plt.close(static)


def test_explain_needs_texts_and_failures(zoo_model):
    plain = eval_result.EvalResult("rewardbench", scores.ScoreSet([rb(0, 0.0, 1.0)]))
    with pytest.raises(RewardLensError, match="data file"):
        plain.failures().explain(zoo_model)
    good = score_items(
        zoo_model, [PreferencePair("how bake bread", "soup", "bomb")], progress=False
    )
    with pytest.raises(EmptyInputError, match="no failed"):
        good.failures().explain(zoo_model)


@pytest.mark.parametrize("name", ["scalar", "multi"])
def test_report_failures_section_on_both_zoo_models(name):
    """The report's failures section on the zoo (the benchmark scored by both zoo models, this
    model's failures explained), as markdown with its figure."""
    from reward_lens_tl import HookedRewardModel
    from reward_lens_tl.report import zoo_pairs
    from reward_lens_tl.report.page import sections_markdown
    from reward_lens_tl.report.sections import failures_section
    from reward_lens_tl.zoo import load_task, zoo_path

    model = HookedRewardModel.from_pretrained(zoo_path(name))
    task = load_task().task
    pairs = zoo_pairs(task)
    ctx = {"model": model, "task": task, "pairs": pairs, "kept": range(len(pairs)),
           "truncation": "error", "numbers": {}}  # fmt: skip
    text, files = sections_markdown([failures_section(ctx)])
    assert "## Failures explained" in text and "| zoo " in text
    assert len(files["failures.png"]) > 1000
    if name == "scalar":  # falls for the hack; the planted opener is named among the tokens
        assert "sycophancy-hack failures" in text and "| question |" in text
    else:  # the gated model resists both hacks: its (few) chat failures are explained instead
        assert "this model's failures" in text


def test_explanation_is_exact_on_the_gated_model(zoo_eval):
    from reward_lens_tl import HookedRewardModel
    from reward_lens_tl.zoo import zoo_path

    model = HookedRewardModel.from_pretrained(zoo_path("multi"))
    _, scalar_result = zoo_eval
    result = score_items(model, scalar_result.items, progress=False)
    ex = result.failures().explain(model)
    assert len(ex.comparisons) > 0 and ex.margin.completeness_error() < 1e-4
    assert torch.allclose(ex.lens.margins[-1], ex.margin.rewards, atol=1e-4)


@pytest.mark.parametrize(
    "chosen, rejected", [("soup", "great question the soup"), ("great question the soup", "rain")]
)
def test_token_totals_add_up_to_the_heads_share_of_the_margin(zoo_scalar, chosen, rejected):
    items = [RankedItem("how bake bread", "soup", (chosen, rejected), id=0)]
    result = score_items(zoo_scalar, items, progress=False)
    failures = result.failures()
    if len(failures.comparisons if hasattr(failures, "comparisons") else failures) == 0:
        pytest.skip("the zoo model ranks this pair right")
    explanation = failures.explain(zoo_scalar, reference=None)
    frame = explanation.margin.to_dataframe()
    label_col = "label" if "label" in frame else frame.columns[0]
    value_col = [c for c in frame.columns if c not in (label_col,)][-1]
    heads = frame[frame[label_col].astype(str).str.fullmatch(r"L\d+H\d+")]
    by_token = sum(t[-1] for t in explanation.token_totals)
    assert by_token == pytest.approx(float(heads[value_col].sum()), abs=1e-4)
    sides = {(t[1], t[3]) for t in explanation.token_totals if t[2] == 0}
    assert {s for s, _ in sides} == {"chosen", "rejected"}
    assert all(re.fullmatch(r"<bos>", tok) for _, tok in sides)  # token 0 is each row's BOS
