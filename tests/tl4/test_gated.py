"""ArmoRM-style gated heads on the bridge (`reward_lens_tl/bridge/gated.py`).

The bridge's unembed is the regression layer (the objectives at every position) and the gate is
applied outside it. Checked against HF's own `LlamaForRewardModelWithGating` forward (objectives,
gate and score; batched on either side = each row alone), and against TransformerLens 3.9's
`HookedArmoRM` for the reward lens and direct attribution, whose parts add up to the objective
(or the gated score) read.
"""

import pytest
import torch
from torch.testing import assert_close

from tests.tl4.tl4_only import skip_unless_tl4

skip_unless_tl4()

from reward_lens_tl.attribution import direct_attribution  # noqa: E402
from reward_lens_tl.bridge import BridgeRewardModel, boot_reward_bridge, bridge_rewards  # noqa: E402
from reward_lens_tl.bridge.gated import GATE_INPUT, GatedBridgeRewardModel  # noqa: E402
from reward_lens_tl.errors import (  # noqa: E402
    AmbiguousObjectiveError,
    BridgeUnsupportedError,
    InvalidArgumentError,
    UnsupportedArchitectureError,
)
from reward_lens_tl.lens import reward_lens  # noqa: E402
from reward_lens_tl.testing import tiny_reward_model  # noqa: E402
from reward_lens_tl.zoo import load_model, zoo_path  # noqa: E402

TOL = dict(atol=1e-4, rtol=0)
PAIRS = [
    ("how bake bread", "oven flour"),
    ("explain how to bake bread at home", "the bomb"),
    ("hi", "the oven and the flour and the water"),
]


def zoo_rows(model):
    return [list(model.encode(p, r).ids) for p, r in PAIRS]


def tiny_armorm():
    """The tiny ArmoRM with a sharp gate (temperature 0.05, not 10): its gate then varies from
    row to row and moves by ~1e-2 when the final norm's weight is left out of it."""
    return tiny_reward_model("armorm", gating_temperature=0.05)


def tiny_rows():
    """Random rows (ids 5..96) with the tiny model's gating pattern `3, 4` inside."""
    gen = torch.Generator().manual_seed(2)
    rows = []
    for before, after in [(3, 4), (6, 2), (1, 7)]:
        ids = torch.randint(5, 97, (before + after,), generator=gen).tolist()
        rows.append([1, *ids[:before], 3, 4, *ids[before:]])
    return rows


def padded(rows, side):
    """`(ids, mask)` with pad id 0, `"right"` or `"leading"` (HF's left padding)."""
    width = max(map(len, rows))
    ids, mask = [], []
    for row in rows:
        pad = [0] * (width - len(row))
        ids.append(row + pad if side == "right" else pad + row)
        mask.append([1] * len(row) + pad if side == "right" else pad + [1] * len(row))
    return torch.tensor(ids), torch.tensor(mask)


@pytest.fixture(scope="module", params=["multi", "tiny"])
def gated(request):
    """(HF model, bridge model, rows): the zoo's model (T = identity) and the tiny one (a random
    T, perturbed final norm), so the transform's orientation and the norm's folding show."""
    if request.param == "multi":
        hf = load_model("multi").eval()
        model = BridgeRewardModel.boot(zoo_path("multi"))
        return hf, model, zoo_rows(model)
    hf = tiny_armorm()
    return hf, BridgeRewardModel.boot(hf), tiny_rows()


@torch.no_grad()
def hf_alone(hf, rows):
    """HF's outputs for each row alone (no padding): the ground truth of a batch."""
    outs = [hf(torch.tensor([row])) for row in rows]
    return {
        k: torch.cat([getattr(o, k) for o in outs]) for k in ("score", "rewards", "gating_output")
    }


@torch.no_grad()
@pytest.mark.parametrize("side", ["right", "leading"])
def test_objectives_gate_and_score_equal_hf(gated, side):
    hf, model, rows = gated
    assert isinstance(model, GatedBridgeRewardModel)
    ids, mask = padded(rows, side)
    expected = hf_alone(hf, rows)
    assert_close(model.rewards(ids, mask), expected["score"], **TOL)
    assert_close(model.objective_rewards(ids, mask), expected["rewards"], **TOL)
    assert_close(model.gate(ids, mask), expected["gating_output"], **TOL)
    assert_close(bridge_rewards(model.bridge, ids, mask), expected["rewards"], **TOL)  # raw
    alone = torch.cat([model.rewards(torch.tensor([row])) for row in rows])
    assert_close(alone, expected["score"], **TOL)
    # HF's own batched forward: left padding needs its positions (armorm_module's docstring)
    positions = (mask.cumsum(-1) - 1).clamp(min=0) if side == "leading" else None
    batched = hf(ids, attention_mask=mask, position_ids=positions)
    assert_close(model.rewards(ids, mask), batched.score, **TOL)
    assert_close(model.objective_rewards(ids, mask), batched.rewards, **TOL)


@torch.no_grad()
def test_unprocessed_weights_give_the_same_score():
    """The gate reads the norm's output before its weight, which its first layer absorbs: the
    same with or without the bridge's weight processing (the tiny model's norm is perturbed)."""
    hf = tiny_armorm()
    assert not torch.allclose(hf.model.norm.weight, torch.ones(64))
    raw = BridgeRewardModel(boot_reward_bridge(hf, process_weights=False))
    ids, mask = padded(tiny_rows(), "right")
    expected = hf(ids, attention_mask=mask)
    assert_close(raw.gate(ids, mask), expected.gating_output, **TOL)
    assert_close(raw.rewards(ids, mask), expected.score, **TOL)


@torch.no_grad()
def test_run_with_cache_surface(gated):
    hf, model, rows = gated
    ids, mask = padded(rows, "right")
    expected = hf(ids, attention_mask=mask)
    score, cache = model.run_with_cache(
        ids, attention_mask=mask, return_type="reward", names_filter=["hook_gate"]
    )
    assert sorted(cache.keys()) == ["hook_gate", "hook_reward", "hook_score"]
    assert_close(score, expected.score, **TOL)
    assert_close(cache["hook_score"], score, atol=0, rtol=0)
    assert_close(cache["hook_reward"], expected.rewards, **TOL)
    objectives, cache = model.run_with_cache(
        ids, attention_mask=mask, return_type="objectives", names_filter=[GATE_INPUT]
    )
    assert GATE_INPUT in cache  # asked for: kept
    per_position, _ = model.run_with_cache(ids, attention_mask=mask)
    pos = model.pool_positions(ids, mask)
    rows_ = torch.arange(ids.shape[0])
    assert_close(objectives[rows_, pos], expected.rewards, **TOL)
    assert per_position.shape == (*ids.shape, 1)  # HookedArmoRM's "logits": the gated score
    assert_close(per_position[rows_, pos, 0], expected.score, **TOL)


@torch.no_grad()
def test_forward_from_ids_and_from_a_residual(gated):
    hf, model, rows = gated
    ids, mask = padded(rows, "leading")
    expected = hf_alone(hf, rows)
    assert_close(model(ids, return_type="reward", attention_mask=mask), expected["score"], **TOL)
    objectives = model(ids, return_type="objectives", attention_mask=mask)
    assert_close(objectives[:, -1], expected["rewards"], **TOL)  # leading pads: read at -1
    _, cache = model.run_with_cache(
        ids, attention_mask=mask, names_filter=["blocks.1.hook_resid_pre"]
    )
    resid = cache["blocks.1.hook_resid_pre"]
    resumed = model(resid, return_type="reward", start_at_layer=1, tokens=ids, attention_mask=mask)
    assert_close(resumed, expected["score"], **TOL)
    with pytest.raises(BridgeUnsupportedError, match="tokens="):
        model(resid, return_type="reward", start_at_layer=1, attention_mask=mask)
    with pytest.raises(BridgeUnsupportedError, match="HookedArmoRM"):
        model(ids, return_type="reward", stop_at_layer=1)


@torch.no_grad()
def test_attribution_adds_up_to_hfs_score_and_each_objective(gated):
    """With the tiny model's random transform `T` too: the gated direction's orientation."""
    hf, model, rows = gated
    ids, mask = padded(rows, "right")
    expected = hf(ids, attention_mask=mask)
    attr = direct_attribution(model, ids, attention_mask=mask)
    assert_close(attr.values.sum(0) + attr.head_bias, expected.score, **TOL)
    for k, name in enumerate(model.objective_names):
        attr = direct_attribution(model, ids, attention_mask=mask, objective=name)
        assert_close(attr.values.sum(0) + attr.head_bias, expected.rewards[:, k], **TOL)


def test_partial_runs_and_unembed_are_refused():
    model = BridgeRewardModel.boot(tiny_reward_model("armorm"))
    ids = torch.tensor(tiny_rows()[:1])
    for kwargs in ({"stop_at_layer": 1}, {"start_at_layer": 1}):
        with pytest.raises(BridgeUnsupportedError, match="HookedArmoRM"):
            model.run_with_cache(ids, return_type="reward", **kwargs)
    with pytest.raises(AmbiguousObjectiveError, match="gated score"):
        model.unembed  # noqa: B018 - the lookup itself is refused
    with pytest.raises(InvalidArgumentError, match="gating token pattern"):
        model.rewards(torch.tensor([[1, 7, 8, 9]]))
    with pytest.raises(UnsupportedArchitectureError, match="ArmoRM"):
        GatedBridgeRewardModel(boot_reward_bridge(tiny_reward_model("llama")))


# The default backend's padded layout (pads after each row's first token) of three zoo
# conversations, and what TransformerLens 3.9's `HookedArmoRM` gives on them for the gated score
# (objective=None) and for `harmlessness`: `reward_lens(...).values.T` and four components of
# `direct_attribution(...).values`. Recorded with `.venv` (TL 3.9.0) by running
# `HookedRewardModel.from_pretrained(zoo_path("multi"))` through `reward_lens` and
# `direct_attribution` with these IDS / MASK and printing the values.
IDS = torch.tensor(
    [
        [1, 0, 0, 4, 27, 71, 21, 63, 66, 6, 5, 40, 38, 62, 43, 39, 20, 23, 6, 2],
        [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 29, 79, 80, 6, 5, 89, 6, 2],
        [1, 4, 32, 58, 39, 60, 57, 13, 16, 6, 5, 34, 35, 10, 23, 18, 7, 16, 6, 2],
    ]
)
MASK = torch.tensor([[1, 0, 0] + [1] * 17, [1] + [0] * 10 + [1] * 9, [1] * 20])
ZOO_ROWS = [row[keep.bool()].tolist() for row, keep in zip(IDS, MASK, strict=True)]
TL39_SCORES = [-1.166121244430542, 0.12001406401395798, 0.318942129611969]
TL39 = {
    None: {
        "lens": [
            [0.10500304400920868, 0.7191226482391357, -2.98293137550354, -1.1661211252212524],
            [0.10862860828638077, -1.8598265647888184, -1.4989173412322998, 0.12001417577266693],
            [0.06607836484909058, -0.46198081970214844, -0.22719229757785797, 0.31894198060035706],
        ],
        "embed": [0.00177, 0.00109, 0.00081],
        "L1H2": [-0.70651, -0.08693, 0.08984],
        "L2H3": [0.24706, 0.22436, -0.06094],
        "mlp2": [0.19403, 0.26046, -0.4107],
    },
    "harmlessness": {
        "lens": [
            [-0.02206425555050373, -7.206687927246094, -11.692112922668457, -9.0421781539917],
            [-0.02206425555050373, -1.2640587091445923, 0.6570039391517639, -0.0013452869607],
            [-0.02206425555050373, -2.1017940044403076, 0.3164712190628052, 0.042845048010349274],
        ],
        "embed": [-0.00037, -0.00022, -0.00027],
        "L1H2": [-1.04519, 0.48223, 0.47876],
        "L2H3": [-0.52752, -0.20478, -0.21762],
        "mlp2": [-0.34033, -0.96467, -0.94517],
    },
}


@pytest.fixture(scope="module")
def zoo():
    return BridgeRewardModel.boot(zoo_path("multi"))


@torch.no_grad()
@pytest.mark.parametrize("objective", [None, "harmlessness"])
def test_lens_and_attribution_give_the_default_backends_numbers(zoo, objective):
    expected = TL39[objective]
    assert_close(zoo.rewards(IDS, MASK), torch.tensor(TL39_SCORES), **TOL)
    lens = reward_lens(zoo, IDS, attention_mask=MASK, objective=objective)
    assert_close(lens.values.T, torch.tensor(expected["lens"]), **TOL)
    attr = direct_attribution(zoo, IDS, attention_mask=MASK, objective=objective)
    for label in ("embed", "L1H2", "L2H3", "mlp2"):
        got = attr.values[attr.labels.index(label)]
        assert_close(got, torch.tensor(expected[label]), **TOL, msg=label)
    # the parts add up to what HF gives each row alone: the objective read, or the gated score
    out = hf_alone(load_model("multi"), ZOO_ROWS)
    col = None if objective is None else zoo.objective_names.index(objective)
    target = out["score"] if col is None else out["rewards"][:, col]
    assert_close(attr.values.sum(0) + attr.head_bias, target, **TOL)
    assert_close(lens.values[-1], target, **TOL)


@torch.no_grad()
def test_a_heads_part_of_the_score_is_its_output_along_the_gated_direction(zoo):
    """Recomputed in plain torch: head L2H3's `z W_O` read along `W_U (T gate)` over the frozen
    final scale, with HF's own gate."""
    attr = direct_attribution(zoo, IDS, attention_mask=MASK)
    _, cache = zoo.run_with_cache(IDS, attention_mask=MASK)
    rows, pos = torch.arange(3), zoo.pool_positions(IDS, MASK)
    gate = hf_alone(load_model("multi"), ZOO_ROWS)["gating_output"]
    direction = (gate @ zoo.reward_transform_matrix.T) @ zoo.W_U.T  # [batch, d_model]
    scale = cache["ln_final.hook_scale"][rows, pos, 0]
    z = cache["blocks.2.attn.hook_z"][rows, pos, 3]  # [batch, d_head]
    part = torch.einsum("be,ed,bd->b", z, zoo.blocks[2].attn.W_O[3], direction) / scale
    assert_close(attr.values[attr.labels.index("L2H3")], part, **TOL)


@torch.no_grad()
def test_without_a_mask_the_packages_padding_is_read_as_each_row_alone():
    """`to_tokens` pads after each row's first token; without a mask, every reading (pooled
    objectives, the lens, attribution) infers it, as TL 3.9 does, and equals HF on each row."""
    model = BridgeRewardModel.boot(zoo_path("multi"))
    hf = load_model("multi")
    prompt = "explain how to bake bread"
    pairs = [(prompt, "great question the oven and the flour"), (prompt, "soup")]
    ids = model.to_tokens(pairs)
    rows = [model.to_tokens([p])[0] for p in pairs]
    alone = torch.cat([hf(input_ids=r[None]).rewards for r in rows])
    assert model.pool_positions(ids).tolist() == [ids.shape[1] - 1] * 2
    assert_close(model.objective_rewards(ids), alone, atol=1e-4, rtol=0)
    score = torch.cat([hf(input_ids=r[None]).score.reshape(-1) for r in rows])
    assert_close(model.rewards(ids), score, atol=1e-4, rtol=0)
    assert_close(reward_lens(model, ids).values[-1], score, atol=1e-4, rtol=0)
    attr = direct_attribution(model, ids)
    assert_close(attr.values.sum(0) + attr.head_bias, score, atol=1e-4, rtol=0)
