"""Comparing methods over pairs (direct, AtP, AtP*, patching) and the agreement report's top-1
rank."""

from types import SimpleNamespace

import pytest
import torch

from reward_lens_tl.contrast import encode_contrast
from reward_lens_tl.patching import (
    activation_patching,
    atp_agreement,
    compare_methods,
)
from tests.figures import check_figure
from tests.patching.conftest import pair


def test_results_and_comparison_over_pairs(llama):
    import matplotlib.pyplot as plt

    pairs = [
        SimpleNamespace(
            prompt=f"w{6 + i} w{20 + i}",
            chosen=f"w{40 + i} w{41 + i} w{50 + i}",
            rejected=f"w{60 + i} w{70 + i}",
        )
        for i in range(3)
    ]
    comparison = compare_methods(llama, pairs, n_resamples=200)
    summary = comparison.summary()
    assert list(summary.columns) == [
        "method_a",
        "method_b",
        "mean_spearman",
        "ci_low",
        "ci_high",
        "n_pairs",
    ]
    assert len(summary) == 6 and (summary.n_pairs == 3).all()
    frame = comparison.to_dataframe()
    assert set(frame.method) == {"direct", "atp", "atp*", "patching"}
    assert len(frame) == 4 * 3 * llama.cfg.n_layers * (llama.cfg.n_heads + 1)
    fig = check_figure(comparison.plot(), static=comparison.plot(backend="matplotlib"))
    panels = [t for t in fig.data if t.type == "scatter"]
    assert [t.name for t in panels] == ["direct", "atp", "atp*"]  # one panel per other method
    assert [t.xaxis for t in panels] == ["x", "x2", "x3"]
    assert panels[1].y.tolist() == pytest.approx(torch.cat(comparison.values["atp"]).tolist())
    assert panels[0].x.tolist() == pytest.approx(torch.cat(comparison.values["patching"]).tolist())
    ids = compare_methods(
        llama, [pair(lengths=[10, 8])], components="resid", methods=("atp", "patching")
    )
    assert ids.labels[0][-1] == "L1 end-0"
    _, ax = plt.subplots()
    assert ids.plot(ax=ax) is ax.figure  # one other method: one panel, on the axes given
    result = activation_patching(llama, *pair(), site="z", by_position=True)
    df = result.to_dataframe()
    assert {"layer", "pos", "target_pos", "source_pos", "head", "value", "reward"} <= set(df)
    assert len(result.top_k(3)) == 3
    fig = check_figure(result.plot(), static=result.plot(backend="matplotlib"), diverging=True)
    matrix, rows, _ = result.matrix()
    torch.testing.assert_close(torch.tensor(fig.data[0].z, dtype=matrix.dtype), matrix)
    assert list(fig.layout.yaxis.ticktext) == rows
    plt.close("all")


def test_compare_methods_takes_contrast_pairs_and_reports_top1_rank(zoo, pairs):
    from reward_lens_tl.patching import compare_methods

    model, _ = zoo
    direct = compare_methods(model, pairs["sycophancy"][:3], methods=("direct", "patching"))
    encoded = compare_methods(
        model, [encode_contrast(p) for p in pairs["sycophancy"][:3]], methods=("direct", "patching")
    )
    assert torch.equal(direct.rho, encoded.rho)
    clean, corrupted = encode_contrast(pairs["harmful"][0])
    report = atp_agreement(model, clean, corrupted, site="z", alignment="exact", methods=("atp",))
    row, ref = report.rows[0], report.reference.effects().abs()
    best = int(ref.argmax())
    expected = 1 + int(
        (report.estimates[0].ranking_score() > report.estimates[0].ranking_score()[best]).sum()
    )
    assert row.top1_rank == expected
