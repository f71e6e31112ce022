"""The package's read-out analyses on the bridge (`BridgeRewardModel`), unchanged: the reward
lens and exact direct attribution give TransformerLens 3.9's numbers on the zoo's scalar model,
and their identities hold in every family the bridge boots."""

import pytest
import torch
from torch.testing import assert_close

from tests.tl4.tl4_only import skip_unless_tl4

skip_unless_tl4()

from reward_lens_tl.attribution import direct_attribution  # noqa: E402
from reward_lens_tl.bridge import BRIDGE_ARCHITECTURES, BridgeRewardModel  # noqa: E402
from reward_lens_tl.lens import reward_lens  # noqa: E402
from reward_lens_tl.testing import random_batch, tiny_reward_model  # noqa: E402
from reward_lens_tl.zoo import zoo_path  # noqa: E402

# Three zoo conversations (task.examples(3, seed=1)) in the default backend's padded layout (pads
# after each row's first token), and what TransformerLens 3.9's `HookedRewardModel` gives on
# them: `reward_lens(...).values.T` and four components of `direct_attribution(...).values`
# (recorded with `.venv`, TL 3.9.0).
IDS = torch.tensor(
    [
        [1, 0, 0, 4, 27, 71, 21, 63, 66, 6, 5, 40, 38, 62, 43, 39, 20, 23, 6, 2],
        [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 29, 79, 80, 6, 5, 89, 6, 2],
        [1, 4, 32, 58, 39, 60, 57, 13, 16, 6, 5, 34, 35, 10, 23, 18, 7, 16, 6, 2],
    ]
)
MASK = torch.tensor(
    [
        [1, 0, 0] + [1] * 17,
        [1] + [0] * 10 + [1] * 9,
        [1] * 20,
    ]
)
TL39_LENS = [
    [-1.2157624959945679, -0.8256697654724121, -3.100093126296997, -7.91694974899292],
    [-1.2157624959945679, -1.9095017910003662, -2.597486734390259, -4.529534339904785],
    [-1.2157624959945679, 2.9389119148254395, 2.558431386947632, 1.0986683368682861],
]
TL39_PARTS = {
    "embed": [-0.03207, -0.0255, -0.02738],
    "L1H2": [-1.25455, -0.78859, -0.73134],
    "L2H3": [-2.29967, -0.75022, -0.61184],
    "mlp2": [-0.07932, -0.06173, 0.04865],
}


@pytest.fixture(scope="module")
def zoo():
    return BridgeRewardModel.boot(zoo_path("scalar"))


def test_the_lens_gives_the_default_backends_numbers(zoo):
    lens = reward_lens(zoo, IDS, attention_mask=MASK)
    assert lens.labels == ("0_pre", "1_pre", "2_pre", "final")
    assert_close(lens.values.T, torch.tensor(TL39_LENS), atol=1e-4, rtol=0)
    assert_close(lens.values[-1], zoo.rewards(IDS, MASK), atol=1e-5, rtol=0)  # ends at the reward


def test_direct_attribution_gives_the_default_backends_numbers(zoo):
    attr = direct_attribution(zoo, IDS, attention_mask=MASK)
    for label, expected in TL39_PARTS.items():
        got = attr.values[attr.labels.index(label)]
        assert_close(got, torch.tensor(expected), atol=1e-4, rtol=0, msg=label)
    assert attr.completeness_error() < 1e-4


@pytest.mark.parametrize("family", ["llama", "mistral", "qwen2", "qwen3", "gpt2", "gemma2"])
def test_lens_and_attribution_identities_in_every_family(family):
    """The lens ends at the reward and the parts add up to it, against the bridge's own pooled
    output (HF's numbers: tests/tl4/test_parity.py); per head, the part is `z W_O` read along
    the frozen-scale direction, recomputed from the cache in plain torch."""
    model = BridgeRewardModel.boot(tiny_reward_model(family))
    ids, mask = random_batch(2, [9, 6], seed=3, low=6, padding_side="right")
    ids = ids * mask  # right-padded with the pad id 0, HF's layout
    rewards = model.rewards(ids, mask)
    lens = reward_lens(model, ids, attention_mask=mask)
    assert_close(lens.values[-1], rewards, atol=1e-5, rtol=0)
    attr = direct_attribution(model, ids, attention_mask=mask)
    assert_close(attr.values.sum(0) + attr.head_bias, rewards, atol=1e-4, rtol=0)
    if family == "gemma2":  # post-norms: each part against HF's weights in test_gemma2.py
        return
    _, cache = model.run_with_cache(ids, attention_mask=mask)
    pos = model.pool_positions(ids)
    rows = torch.arange(2)
    scale = cache["ln_final.hook_scale"][rows, pos]  # [batch, 1]
    w = model.W_U[:, 0]
    if family == "gpt2":  # LayerNorm: the direction is centred
        w = w - w.mean()
    layer = model.cfg.n_layers - 1
    z = cache[f"blocks.{layer}.attn.hook_z"][rows, pos]  # [batch, head, d_head]
    per_head = torch.einsum("bhe,hed,d->hb", z, model.blocks[layer].attn.W_O, w) / scale[:, 0]
    head = attr.values[attr.labels.index(f"L{layer}H0")]
    assert_close(head, per_head[0], atol=1e-5, rtol=0)
    assert set(BRIDGE_ARCHITECTURES)  # every family booted here is one the backend lists


# `task.contrast_pairs("harmful", 4, seed=1)` as (edited, base) encodings: what TL 3.9 gives for
# pair_attribution's margins (and head L2H3's part of them), pair_lens (pair 0, both sides) and
# token_attribution (pair 0's edited side), recorded with `.venv`, TL 3.9.0.
TL39_MARGINS = [-2.8034377098083496, -2.861356019973755, -3.2162256240844727, -3.066194772720337]
TL39_L2H3 = [-0.5433523654937744, -0.4454367160797119, -0.6833241581916809, -0.5410135984420776]
TL39_PAIR_LENS = (
    [-1.2157624959945679, -3.0513226985931396, -4.3048319816589355, -6.2859086990356445],
    [-1.2157624959945679, -1.3331021070480347, -2.425173759460449, -3.4824697971343994],
)
TL39_TOKENS = [
    0.022684387862682343, 0.02627476304769516, 0.02487303875386715, 0.04651275649666786,
    0.04116781800985336, 0.005916377529501915, 0.0075400881469249725, 0.02882823348045349,
    -0.34020501375198364, -0.6885003447532654, -2.1609249114990234, 0.11059794574975967,
    0.09180799126625061, -2.4493603706359863, -0.554966926574707, -0.4981541931629181,
]  # fmt: skip


def test_pair_analyses_and_token_views_give_the_default_backends_numbers(zoo):
    from reward_lens_tl.attribution import pair_attribution
    from reward_lens_tl.contrast import as_contrast_pair
    from reward_lens_tl.lens import pair_lens
    from reward_lens_tl.token_view import token_attribution
    from reward_lens_tl.zoo import load_task

    pairs = [as_contrast_pair(p) for p in load_task().task.contrast_pairs("harmful", 4, seed=1)]
    encs = [(p.edited, p.base) for p in pairs]
    margin = pair_attribution(zoo, encs).margin
    assert_close(margin.rewards, torch.tensor(TL39_MARGINS), atol=1e-4, rtol=0)
    l2h3 = margin.values[margin.labels.index("L2H3")]
    assert_close(l2h3, torch.tensor(TL39_L2H3), atol=1e-4, rtol=0)
    lens = pair_lens(zoo, encs)
    assert_close(lens.chosen.values[:, 0], torch.tensor(TL39_PAIR_LENS[0]), atol=1e-4, rtol=0)
    assert_close(lens.rejected.values[:, 0], torch.tensor(TL39_PAIR_LENS[1]), atol=1e-4, rtol=0)
    view = token_attribution(zoo, encs[0][0])
    assert_close(view.values, torch.tensor(TL39_TOKENS), atol=1e-4, rtol=0)
