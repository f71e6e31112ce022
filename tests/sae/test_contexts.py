"""Max-activating contexts find the maximum."""

from __future__ import annotations

import pytest
import torch

from reward_lens_tl.sae import (
    collect_activations,
    max_activating_contexts,
)
from tests.figures import check_figure


def test_max_activating_contexts_find_the_maximum(llama, batch, trained_mid):
    ids, mask = batch
    sae = trained_mid.sae
    with torch.no_grad():
        z = sae.encode(collect_activations(llama, sae.cfg.metadata.hook_name, [(ids, mask)]))
    feats = (z > 0).sum(0).argsort(descending=True)[:2].tolist() + [int(z.sum(0).argmin())]
    ctx = max_activating_contexts(llama, sae, [(ids, mask)], features=feats, k=3, window=(2, 1))
    for f in feats[:2]:
        assert ctx[f][0].activation == pytest.approx(float(z[:, f].max()), abs=1e-5)
        c = ctx[f][0]  # positions count the sequence's own tokens (not padded columns)
        sequence = ids[c.example][mask[c.example].bool()]
        assert int(sequence[c.position]) == c.window[c.position - c.window_start]
        assert ctx.frequency[feats.index(f)] == pytest.approx(float((z[:, f] > 0).float().mean()))
    assert ctx[feats[2]] == ()  # a latent that never fires has no contexts
    assert "[[" in ctx.to_dataframe()["context"].iloc[0]
    fig = check_figure(ctx.plot(), static=ctx.plot(backend="matplotlib"))
    assert list(fig.layout.yaxis.ticktext) == [f"f{f}" for f in feats]
    assert fig.data[0].x.tolist() == pytest.approx([ctx[f][0].activation for f in feats[:2]] + [0])
    assert "[[" in fig.data[0].customdata[0] and "never active" in fig.data[0].customdata[2]
