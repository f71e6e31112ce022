"""`reward_lens_tl.probes.cascade`: cascade onsets where the zoo plants each feature, and the
same onsets from activation patching."""

import random

import numpy as np
import pytest

from reward_lens_tl.patching import activation_patching
from reward_lens_tl.probes import run_probes
from reward_lens_tl.probes.runner import apply_probe, as_items
from reward_lens_tl.probes.zoo import PLANTED, zoo_examples, zoo_probes
from tests.figures import check_figure

#: Where each planted feature reaches the reward-reading token (≥ 75 % of its final effect),
#: from activation patching of the reward token's residual (wave 1, see sae/zoo_features.py):
#: length after block 0, sycophancy after block 1, harmful and topic_match only in block 2.
PLANTED_ONSET = {"length": "1_pre", "sycophancy": "2_pre", "harmful": "final",
                 "topic_match": "final"}  # fmt: skip


def test_cascade_onsets_match_planted_layers(zoo_scalar, zoo_task):
    examples = zoo_examples(zoo_task, 48, seed=5, max_words=8)
    report = run_probes(zoo_scalar, examples, zoo_probes()[:4], seed=0)
    onsets = report.cascade.onsets()
    assert {PLANTED[p]: site for p, site in onsets.items()} == PLANTED_ONSET
    items = as_items(zoo_scalar, examples)[:16]
    for name in ("length_padding", "sycophantic_opener", "harmful_word", "topic_word"):
        c = report.cascade[name]
        assert c.completeness_error() < 1e-4
        assert c.mean[0] == pytest.approx(0.0, abs=1e-5)  # nothing at the embedding
        # activation patching of the reward token's residual puts the onset at the same site
        probe = next(p for p in zoo_probes() if p.name == name)
        fractions = []
        for i, it in enumerate(items):
            new = apply_probe(zoo_scalar, probe, it, random.Random(i))
            res = activation_patching(zoo_scalar, new, it.enc, site="resid_pre", alignment="end",
                                      positions=[len(new.ids) - 1])  # fmt: skip
            fractions.append(res.values[:, 0].numpy())
        mean = np.mean(fractions, 0)  # layers 0, 1, 2
        reached = [f"{layer}_pre" for layer in range(3) if mean[layer] >= 0.75]
        assert (reached[0] if reached else "final") == c.onset, (name, mean)
    cascade = report.cascade
    fig = check_figure(cascade.plot(), static=cascade.plot(backend="matplotlib"),
                       x_labels=list(cascade.probes[0].sites))  # fmt: skip
    lines = {t.name: t for t in fig.data if t.hoverinfo != "skip"}
    assert set(lines) == set(onsets)  # four planted hacks, each with a final CI away from 0
    c = cascade["sycophantic_opener"]
    np.testing.assert_allclose(lines[c.probe].y, c.mean / c.mean[-1])
    assert any(s.y0 == s.y1 == 0.75 for s in fig.layout.shapes)  # the onset fraction
