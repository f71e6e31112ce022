"""Several patching sites in one call: shared clean and corrupted runs, same values."""

import pytest
import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.patching import MultiSitePatchResult, PatchingError, activation_patching
from reward_lens_tl.testing import random_batch, tiny_reward_model
from tests.figures import check_figure

SITES = ("attn_out", "mlp_out", "heads", "resid_post")


@pytest.fixture(scope="module")
def model():
    return HookedRewardModel.from_pretrained(tiny_reward_model("qwen2"))


@pytest.fixture(scope="module")
def pair():
    ids, _ = random_batch(2, [11, 9], low=6, seed=4)  # left padded
    clean, corrupted = ids[0], ids[1, -9:]
    corrupted[:4] = clean[:4]  # a shared prefix: the no-op writes there are skipped
    return clean, corrupted


@pytest.mark.parametrize("sites", [SITES, SITES[:3]], ids=["separate", "one-forward-per-layer"])
@pytest.mark.parametrize("mode", ["denoising", "noising", "zero"])
def test_one_call_equals_single_site_calls(model, pair, mode, sites):
    """With only in-block sites (attn_out, mlp_out, heads) every layer's cells of all sites
    run as one forward; with resid_post among them each site keeps its own chunks."""
    args = pair if mode != "zero" else pair[:1]
    both = activation_patching(model, *args, site=sites, mode=mode, heads=[1, 3])
    assert isinstance(both, MultiSitePatchResult)
    assert both.sites == ("attn_out", "mlp_out", "z", "resid_post")[: len(sites)]
    for site in both.sites:
        single = activation_patching(
            model, *args, site=site, mode=mode, heads=[1, 3] if site == "z" else None
        )
        assert both[site].shape == single.shape
        assert (both[site].values - single.values).abs().max() <= 1e-6
        assert (both[site].rewards - single.rewards).abs().max() <= 1e-6
        assert both[site].target_reward == single.target_reward
    assert both["z"].grid.heads == (1, 3)


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


def test_bad_site_lists(model, pair):
    with pytest.raises(PatchingError, match="twice"):
        activation_patching(model, *pair, site=("z", "heads"))
    with pytest.raises(PatchingError, match="sequence"):
        activation_patching(model, *pair, site=())
    with pytest.raises(PatchingError, match="unknown patching site"):
        activation_patching(model, *pair, site=("attn_out", "mlp"))
    with pytest.raises(KeyError, match="sites"):
        activation_patching(model, *pair, site=("attn_out", "mlp_out"))["z"]


def test_default_chunks_shrink_with_length(model, monkeypatch):
    """By default a forward holds at most CHUNK_TOKENS variant-positions (fewer variants for
    longer runs); the values do not depend on the chunking."""
    from reward_lens_tl.patching import runner

    ids, _ = random_batch(2, [30, 30], low=6, seed=6)
    fixed = activation_patching(model, ids[0], ids[1], site="resid_pre", chunk_size=1)
    monkeypatch.setattr(runner, "CHUNK_TOKENS", 64)
    seen = []
    original = runner.Sweep.run_chunk

    def spy(self, layer, j, head, p0):
        seen.append((len(j), 30 - p0))
        return original(self, layer, j, head, p0)

    monkeypatch.setattr(runner.Sweep, "run_chunk", spy)
    auto = activation_patching(model, ids[0], ids[1], site="resid_pre")
    assert (auto.values - fixed.values).abs().max() <= 1e-5
    assert all(n * length <= 64 or n == 1 for n, length in seen)
    assert max(n for n, _ in seen) > 1  # late positions still share a forward


def test_html_view_shows_at_most_max_rows(model, pair):
    result = activation_patching(model, *pair, site="z", by_position=True)  # rows: L{l}H{h}
    _, rows, _ = result.matrix()
    assert len(rows) == model.cfg.n_layers * model.cfg.n_heads > 2
    short, full = result.to_html(max_rows=2), result.to_html(max_rows=len(rows))
    assert rows[1] in short and rows[2] not in short
    assert f"… {len(rows) - 2} more rows" in short
    assert all(r in full for r in rows) and "more rows" not in full
