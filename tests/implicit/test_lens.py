"""The implicit-reward lens: its end point is the implicit reward, and the pair lens
crystallizes."""

import dataclasses
import html

import pytest
import torch

from reward_lens_tl.implicit import (
    implicit_lens,
    pair_implicit_lens,
)
from reward_lens_tl.inputs import as_encoded
from reward_lens_tl.plotting import shown_token
from reward_lens_tl.zoo import load_task
from tests.figures import check_figure


@pytest.mark.parametrize("reference", ["final", "lens"])
def test_lens_reaches_the_implicit_reward(irm, examples, reference):
    ids, attention, resp = irm.batch([as_encoded(ex) for ex in examples[:5]])
    lens = implicit_lens(irm, ids, resp, attention, reference=reference, resolution="sublayer")
    assert lens.labels == ("0_pre", "0_mid", "1_pre", "1_mid", "final")
    assert (lens.values[-1] - irm.rewards(ids, resp, attention)).abs().max() < 1e-4
    assert torch.allclose(lens.values, lens.token_values.sum(-1))
    assert bool((lens.token_values[:, resp == 0] == 0).all())
    fig = check_figure(lens.plot(), static=lens.plot(backend="matplotlib"), x_labels=["final"])
    for trace, values in zip(fig.data, lens.values.T, strict=True):  # one line per example
        assert list(trace.y) == pytest.approx(values.tolist())
    tokens = irm.tokenizer.convert_ids_to_tokens(ids[1].tolist())
    assert lens.tokens[1] == tuple(tokens) and lens.take([1]).tokens == (lens.tokens[1],)
    fig = check_figure(
        lens.plot(example=1),
        static=lens.plot(example=1, backend="matplotlib"),
        x_labels=[html.unescape(shown_token(t)) for t in tokens],
        diverging=True,
    )
    assert fig.data[0].z.tolist() == lens.token_values[:, 1].tolist()
    assert list(fig.layout.yaxis.ticktext) == list(lens.labels)
    unnamed = dataclasses.replace(lens, tokens=())  # no tokenizer: the columns are positions
    fig = check_figure(unnamed.plot(example=1), x_labels=["0", str(ids.shape[1] - 1)])
    assert fig.layout.xaxis.title.text == "position"


def test_pair_lens_crystallizes(irm):
    pairs = load_task().task.contrast_pairs("harmful", 6, seed=2)
    lens = pair_implicit_lens(irm, pairs, batch_size=4)
    chosen, rejected = irm.pair_rewards(pairs)
    assert (lens.margins[-1] - (chosen - rejected)).abs().max() < 1e-4
    assert all(site in lens.labels for site in lens.crystallization())
