"""Reward lens and direct attribution: end points, completeness and identities, exactly."""

import pytest
import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.attribution import direct_attribution, pair_attribution
from reward_lens_tl.errors import RewardLensError, UnknownHookError
from reward_lens_tl.lens import pair_lens, reward_lens
from reward_lens_tl.padding import real_columns
from reward_lens_tl.testing import random_batch, tiny_reward_model, tiny_tokenizer
from tests.figures import check_figure

FAMILIES = ["llama", "mistral", "qwen2", "gemma2", "gpt2", "qwen3", "armorm"]


def batch_for(family, seed=0):
    """Left padded (rows of 12, 9 and 7 tokens in 12 columns)."""
    ids, mask = random_batch(3, [12, 9, 7], seed=seed, low=6)
    if family == "armorm":  # gating pattern of the tiny ArmoRM at each row's positions 3, 4
        cols, _ = real_columns(mask)
        for row in range(ids.shape[0]):
            ids[row, cols[row, 3:5]] = torch.tensor([3, 4])
    return ids, mask


@pytest.fixture(scope="module", params=FAMILIES)
def family_model(request):
    fold = request.param != "gpt2"  # also cover an unfolded LayerNorm model
    hf = tiny_reward_model(request.param)
    flags = dict(fold_ln=fold, center_writing_weights=fold, fold_value_biases=fold)
    return request.param, HookedRewardModel.from_pretrained(hf, **flags)


def test_completeness_every_family(family_model):
    family, model = family_model
    ids, mask = batch_for(family)
    attr = direct_attribution(model, ids, mask, sources=True, neurons=True)
    assert attr.completeness_error() <= 1e-4
    assert (attr.rewards - model.rewards(ids, mask)).abs().max() <= 1e-5
    # source positions sum to each head; neurons sum to each MLP
    assert (attr.sources.sum(-1) - attr.head_matrix()).abs().max() <= 1e-5
    mlps = torch.stack([attr[f"mlp{layer}"] for layer in range(model.cfg.n_layers)])
    assert (attr.neurons.sum(-1) - mlps).abs().max() <= 1e-5
    # nothing attends to padding (row 1's pads, right after its first token)
    assert mask[1, 0] == 1 and (mask[1] == 0).sum() == 3
    assert attr.sources[..., 1, mask[1] == 0].abs().max() == 0


def test_lens_end_point_every_family(family_model):
    family, model = family_model
    ids, mask = batch_for(family, seed=1)
    reward = model.rewards(ids, mask)
    for norm in ("recompute", "frozen"):
        lens = reward_lens(model, ids, mask, norm=norm, resolution="sublayer")
        assert (
            lens.labels[0] == "0_pre" and lens.labels[1] == "0_mid" and lens.labels[-1] == "final"
        )
        assert len(lens.labels) == 2 * model.cfg.n_layers + 1
        assert (lens.values[-1] - reward).abs().max() <= 1e-4


def test_frozen_lens_is_the_running_sum_of_attribution(family_model):
    """Frozen-scale lens at resid_pre of layer l = embed + sublayers < l (with their biases)."""
    family, model = family_model
    ids, mask = batch_for(family, seed=2)
    lens = reward_lens(model, ids, mask, norm="frozen")
    attr = direct_attribution(model, ids, mask, heads=False, split_bias=True)
    assert attr.completeness_error() <= 1e-4
    running = attr["embed"] + (attr["pos_embed"] if "pos_embed" in attr.labels else 0)
    running = running + attr.head_bias
    for layer in range(model.cfg.n_layers):
        assert (lens.values[layer] - running).abs().max() <= 1e-4, layer
        for part in (f"attn{layer}", f"attn{layer}.bias", f"mlp{layer}", f"mlp{layer}.bias"):
            running = running + attr[part]
    assert (lens.values[-1] - running).abs().max() <= 1e-4


def test_pair_margins_decompose():
    tok = tiny_tokenizer()
    model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"), tok)
    from types import SimpleNamespace as Pair

    pairs = [
        Pair(prompt=f"w{6 + i} w{7 + i}", chosen=f"w{20 + i} w{21 + i} w30", rejected=f"w{40 + i}")
        for i in range(7)
    ]
    result = pair_attribution(model, pairs, batch_size=3)
    margin = result.margin
    assert margin.values.shape == (len(margin.labels), 7)
    scores = torch.tensor(
        [float(model.score(p.prompt, p.chosen) - model.score(p.prompt, p.rejected)) for p in pairs]
    )
    assert (margin.total() - scores).abs().max() <= 1e-4
    # streaming in chunks gives the same numbers as one big chunk
    whole = pair_attribution(model, pairs, batch_size=16).margin
    assert (whole.values - margin.values).abs().max() <= 1e-5
    lens = pair_lens(model, pairs, batch_size=4)
    assert (lens.margins[-1] - scores).abs().max() <= 1e-4
    assert len(lens.crystallization(0.5)) == 7
    frame = margin.to_dataframe()
    assert set(frame.columns) == {"component", "example", "contribution"}
    assert margin.top_k(3)[0][0] in margin.labels


def test_crystallization_definition():
    from reward_lens_tl.lens import PairLensResult, RewardLensResult

    labels = ("0_pre", "1_pre", "2_pre", "final")
    chosen = RewardLensResult(
        torch.tensor([[0.0, 0.0], [0.2, -0.1], [0.6, -0.9], [1.0, -1.0]]),
        labels,
        torch.tensor([1.0, -1.0]),
        "recompute",
    )
    rejected = RewardLensResult(torch.zeros(4, 2), labels, torch.zeros(2), "recompute")
    result = PairLensResult(chosen, rejected)
    assert result.crystallization(0.5) == ["2_pre", "2_pre"]
    assert result.crystallization(0.1) == ["1_pre", "1_pre"]
    # a faint line per pair (no legend entry) and the mean in bold
    fig = check_figure(result.plot(), static=result.plot(backend="matplotlib"), x_labels=labels)
    assert [t.name for t in fig.data] == ["pair 0", "pair 1", "mean margin"]
    assert [t.showlegend for t in fig.data] == [False, False, None]
    assert fig.data[2].line.width > fig.data[0].line.width
    torch.testing.assert_close(torch.tensor(fig.data[0].y), result.margins[:, 0].double())
    torch.testing.assert_close(torch.tensor(fig.data[2].y), result.margins.mean(1).double())


def test_explicit_positions_and_errors():
    model = HookedRewardModel.from_pretrained(tiny_reward_model("qwen2"))
    ids, mask = random_batch(2, [8, 5], seed=3)  # left padded: row 1 starts at column 3
    per_pos = model(ids, attention_mask=mask)[..., 0]
    attr = direct_attribution(model, ids, mask, positions=[3, 5])
    assert (attr.rewards - per_pos[[0, 1], [3, 5]]).abs().max() <= 1e-5
    assert attr.completeness_error() <= 1e-4
    lens = reward_lens(model, ids, mask, positions=[3, 5])
    assert (lens.values[-1] - per_pos[[0, 1], [3, 5]]).abs().max() <= 1e-4
    with pytest.raises(RewardLensError, match="padding"):
        direct_attribution(model, ids, mask, positions=[3, 1])
    with pytest.raises(RewardLensError, match="out of range"):
        reward_lens(model, ids, mask, layers=[5])
    assert reward_lens(model, ids, mask, layers=[-1]).labels == ("1_pre", "final")
    with pytest.raises(UnknownHookError):
        reward_lens(model, ids, mask, fwd_hooks=[("blocks.0.hook_nothing", lambda a, hook: a)])


def test_user_hooks_compose_and_are_removed():
    model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    ids, mask = random_batch(2, [8, 5], seed=4)

    def kill_head(z, hook):
        z[:, :, 1] = 0.0
        return z

    attr = direct_attribution(model, ids, mask, fwd_hooks=[("blocks.1.attn.hook_z", kill_head)])
    assert attr["L1H1"].abs().max() == 0
    ablated = model.run_with_hooks(
        ids,
        return_type="reward",
        attention_mask=mask,
        fwd_hooks=[("blocks.1.attn.hook_z", kill_head)],
    )
    assert (attr.rewards - ablated).abs().max() <= 1e-6
    assert all(not h.fwd_hooks for h in model.hook_dict.values())

    def boom(act, hook):
        raise RuntimeError("user hook failed")

    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(RuntimeError, match="user hook failed"):
        reward_lens(model, ids, mask, fwd_hooks=[("blocks.0.hook_resid_post", boom)])
    assert all(not h.fwd_hooks for h in model.hook_dict.values())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_multi_objective_readouts():
    model = HookedRewardModel.from_pretrained(tiny_reward_model("armorm"))
    ids, mask = batch_for("armorm", seed=5)
    objectives = model.objective_rewards(ids, mask)
    for i, name in enumerate(model.objective_names):
        attr = direct_attribution(model, ids, mask, objective=name)
        assert (attr.total() - objectives[:, i]).abs().max() <= 1e-4
    with pytest.raises(RewardLensError, match="unknown objective"):
        direct_attribution(model, ids, mask, objective="nope")


def test_results_plot_and_frames():
    import matplotlib

    matplotlib.use("Agg")
    model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    ids, mask = random_batch(2, [8, 5], seed=6)
    attr = direct_attribution(model, ids, mask)
    lens = reward_lens(model, ids, mask)
    bars = check_figure(attr.plot(k=5), static=attr.plot(k=5, backend="matplotlib"))
    top = attr.top_k(5)
    assert list(bars.layout.yaxis.ticktext) == [label for label, _ in top]
    torch.testing.assert_close(bars.data[0].x.tolist(), [v for _, v in top])
    lines = check_figure(lens.plot(), static=lens.plot(backend="matplotlib"), x_labels=lens.labels)
    assert [t.name for t in lines.data] == ["example 0", "example 1"]  # one line per example
    torch.testing.assert_close(torch.tensor(lines.data[1].y), lens.values[:, 1].double())
    assert lines.layout.shapes[0].y0 == 0  # the zero line
    assert len(lens.to_dataframe()) == len(lens.labels) * 2
    assert attr.head_matrix().shape == (model.cfg.n_layers, model.cfg.n_heads, 2)


def test_tuned_lens_fit_save_load(tmp_path):
    from reward_lens_tl.tuned_lens import TunedRewardLens

    model = HookedRewardModel.from_pretrained(tiny_reward_model("mistral"))
    batches = [random_batch(64, seq_len=10, seed=s) for s in range(8)]
    tuned = TunedRewardLens.fit(model, batches, heldout_fraction=0.25)
    rep = tuned.report
    assert rep.n_train + rep.n_heldout == 512 and rep.n_heldout == 128
    assert rep.heldout_mse[-1] <= 1e-8 and rep.heldout_r2[-1] >= 0.999999
    assert rep.readable_site(0.999) is not None
    fig = check_figure(rep.plot(), static=rep.plot(backend="matplotlib"), x_labels=rep.labels)
    assert [t.name for t in fig.data] == ["tuned lens", "plain lens"]
    assert list(fig.data[0].y) == list(rep.heldout_mse) and fig.layout.yaxis.type == "log"
    # with n >> d_model, the cross-validated translators beat the plain lens on held-out data
    assert all(t < p for t, p in zip(rep.heldout_mse[:-1], rep.lens_heldout_mse[:-1], strict=True))
    tuned.save(tmp_path / "lens")
    loaded = TunedRewardLens.load(tmp_path / "lens")
    ids, mask = random_batch(3, [10, 7, 4], seed=99)
    a, b = tuned(model, ids, mask), loaded(model, ids, mask)
    assert torch.equal(a.values, b.values) and loaded.report == rep
    assert (a.values[-1] - model.rewards(ids, mask)).abs().max() <= 1e-4
