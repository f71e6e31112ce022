"""Planted-feature effects per model: a planted ablation is found by feature, and the report's
implicit-reward section."""

import numpy as np
import pytest

from reward_lens_tl.crossmodel import (
    feature_effects,
)
from reward_lens_tl.zoo import FEATURES, load_task
from tests.figures import check_figure


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
    # the figure: one bar per model and feature with its CI, grouped by feature
    fig = check_figure(fx.plot(), static=fx.plot(backend="matplotlib"), x_labels=list(FEATURES))
    assert [t.name for t in fig.data] == list(fx.models)
    scalar_bars = fig.data[list(fx.models).index("scalar")]
    assert list(scalar_bars.y) == pytest.approx([frame.loc[f, "effect"] for f in FEATURES])
    assert list(scalar_bars.error_y.array) == pytest.approx(
        [frame.loc[f, "ci_high"] - frame.loc[f, "effect"] for f in FEATURES]
    )
    centres = np.mean([t.x for t in fig.data], axis=0)
    assert list(centres) == pytest.approx(list(range(len(FEATURES))))  # each group at its tick


def test_report_implicit_section(scalar):
    """The report's implicit-reward section on the zoo, as markdown with its figure."""
    from reward_lens_tl.report import zoo_pairs
    from reward_lens_tl.report.page import sections_markdown
    from reward_lens_tl.report.zoo import implicit_section

    task = load_task().task
    pairs = zoo_pairs(task)
    ctx = {"model": scalar, "task": task, "pairs": pairs, "kept": range(len(pairs)),
           "truncation": "error", "numbers": {}}  # fmt: skip
    text, files = sections_markdown([implicit_section(ctx)])
    assert "implicit_feature_effects.png" in files
    assert "| topic_match |" in text and "agree on" in text
