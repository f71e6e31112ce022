"""Patching results: a multi-site result's labels, frame, top cells and figure; the HTML view."""

import pytest
import torch

from reward_lens_tl.patching import (
    activation_patching,
)
from tests.figures import check_figure


@pytest.fixture(scope="module")
def model(qwen2):
    """This module's multi-site tests run on the tiny qwen2 model (``qwen2`` in conftest),
    not on conftest's ``model`` over three families."""
    return qwen2


def test_labels_frame_and_top_k(model, pair):
    both = activation_patching(model, *pair, site=("attn_out", "mlp_out"))
    n = model.cfg.n_layers
    assert both.labels() == tuple(f"{s} L{i}" for s in ("attn_out", "mlp_out") for i in range(n))
    frame = both.to_dataframe()
    assert list(frame["site"]) == ["attn_out"] * n + ["mlp_out"] * n
    assert torch.allclose(torch.tensor(frame["value"].values), both.flat().double())
    top = both.top_k(2)
    effects = both.flat() - both["attn_out"].baseline
    assert top[0] == (both.labels()[effects.abs().argmax()], float(effects[effects.abs().argmax()]))
    assert abs(top[0][1]) >= abs(top[1][1])
    fig = check_figure(both.plot(), static=both.plot(backend="matplotlib"), diverging=True)
    heat = [t for t in fig.data if t.type == "heatmap"]
    assert [t.xaxis for t in heat] == ["x", "x2"]  # one panel per site
    for trace, site in zip(heat, both.sites, strict=True):
        matrix = both[site].matrix()[0]
        torch.testing.assert_close(torch.tensor(trace.z, dtype=matrix.dtype), matrix)


def test_html_view_shows_at_most_max_rows(model, pair):
    result = activation_patching(model, *pair, site="z", by_position=True)  # rows: L{l}H{h}
    _, rows, _ = result.matrix()
    assert len(rows) == model.cfg.n_layers * model.cfg.n_heads > 2
    short, full = result.to_html(max_rows=2), result.to_html(max_rows=len(rows))
    assert rows[1] in short and rows[2] not in short
    assert f"… {len(rows) - 2} more rows" in short
    assert all(r in full for r in rows) and "more rows" not in full
