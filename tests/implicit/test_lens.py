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


def test_soft_capped_policy_lens_ends_at_the_plain_hf_reward():
    """Gemma-2 soft-caps its logits after the unembed: the lens reads through the cap, so its last
    site is the reward (`plain_implicit`, HF logits); without the cap it was 0.0553, not 0.0579."""
    from reward_lens_tl.implicit import ImplicitRewardModel, load_causal_lm
    from reward_lens_tl.inputs import EncodedConversation
    from reward_lens_tl.padding import hf_pad
    from tests.implicit.conftest import plain_implicit, tiny_causal

    policy, reference = tiny_causal("gemma2", 0), tiny_causal("gemma2", 1)
    model = ImplicitRewardModel(load_causal_lm(policy), load_causal_lm(reference), 0.1)
    rows = [[1, 7, 8, 9, 10, 11, 12, 13], [1, 14, 15, 16, 17]]
    ids, att = hf_pad(rows, 0)
    resp = (torch.arange(8) >= torch.tensor([[4], [5]])).long()
    lens = implicit_lens(model, ids, resp, att)
    starts = [4, 2]  # the response's first token in each unpadded row
    plain = [
        plain_implicit(policy, reference, EncodedConversation(tuple(r), s), 0.1, len(r))
        for r, s in zip(rows, starts, strict=True)
    ]
    assert (lens.values[-1] - torch.tensor(plain)).abs().max() < 1e-5
