"""Activation and attribution patching: equality with TransformerLens, identities, signs,
alignments, exactness of AtP's linearisation and of the AtP* QK fix, cleanliness."""

import warnings
from types import SimpleNamespace

import pytest
import torch
from transformer_lens import patching as tl_patching

from reward_lens_tl import EncodedConversation, HookedRewardModel
from reward_lens_tl.padding import ReadingPositionWarning
from reward_lens_tl.patching import (
    AlignmentError,
    PatchingError,
    activation_patching,
    agreement,
    atp_agreement,
    atp_star,
    attribution_patching,
    compare_methods,
)
from reward_lens_tl.testing import random_batch, tiny_reward_model, tiny_tokenizer
from tests.figures import check_figure


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """Tiny models gain nothing from a second thread, and on a shared 2-core machine the
    thread pool's barriers make every small op many times slower; restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def pair(length=9, seed=5, lengths=None):
    ids, mask = random_batch(2, lengths or [length, length], low=6, seed=seed)  # padded
    return ids[0][mask[0].bool()], ids[1][mask[1].bool()]


def no_hooks_left(model) -> bool:
    return all(not h.fwd_hooks and not h.bwd_hooks for h in model.hook_dict.values())


@pytest.fixture(scope="module", params=["llama", "gemma2", "gpt2"])
def model(request):
    return HookedRewardModel.from_pretrained(tiny_reward_model(request.param))


@pytest.fixture(scope="module")
def llama():
    return HookedRewardModel.from_pretrained(tiny_reward_model("llama"), tiny_tokenizer())


# -- equality with transformer_lens.patching -------------------------------------------------
TL_SWEEPS = [
    ("resid_pre", True, tl_patching.get_act_patch_resid_pre),
    ("resid_mid", True, tl_patching.get_act_patch_resid_mid),
    ("attn_out", True, tl_patching.get_act_patch_attn_out),
    ("mlp_out", True, tl_patching.get_act_patch_mlp_out),
    ("z", True, tl_patching.get_act_patch_attn_head_out_by_pos),
    ("z", False, tl_patching.get_act_patch_attn_head_out_all_pos),
    ("k", True, tl_patching.get_act_patch_attn_head_k_by_pos),
]


@pytest.mark.parametrize("site,by_position,tl_fn", TL_SWEEPS)
def test_equals_transformer_lens(model, site, by_position, tl_fn):
    clean, corrupted = pair(length=7)
    _, clean_cache = model.run_with_cache(clean[None])
    with torch.no_grad():
        expected = tl_fn(model, corrupted[None], clean_cache, lambda logits: logits[0, -1, 0])
    got = activation_patching(
        model,
        clean,
        corrupted,
        site=site,
        by_position=by_position,
        alignment="exact",
        metric=lambda r: r,
        chunk_size=5,
    )
    assert got.shape == tuple(expected.shape)
    assert (got.values - expected).abs().max() <= 1e-5
    if site in ("resid_pre", "z"):  # the unshortcut path agrees as well
        plain = activation_patching(
            model,
            clean,
            corrupted,
            site=site,
            by_position=by_position,
            alignment="exact",
            metric=lambda r: r,
            reuse_prefix=False,
        )
        assert (plain.values - expected).abs().max() <= 1e-5


def test_multi_objective_gated_model_equals_transformer_lens():
    """A gated head's logits are its gated score (what TL's patching reads); one objective is
    checked against the same patch written by hand (``return_type="objectives"``)."""
    model = HookedRewardModel.from_pretrained(tiny_reward_model("armorm"))
    clean, corrupted = pair(seed=2)
    clean[3:5] = corrupted[3:5] = torch.tensor([3, 4])  # gating pattern
    _, clean_cache = model.run_with_cache(clean[None])
    with torch.no_grad():
        expected = tl_patching.get_act_patch_resid_pre(
            model, corrupted[None], clean_cache, lambda logits: logits[0, -1, 0]
        )
    got = activation_patching(model, clean, corrupted, alignment="exact", metric=lambda r: r)
    assert (got.values - expected).abs().max() <= 1e-5
    harmless = activation_patching(
        model, clean, corrupted, alignment="exact", objective="harmless", metric=lambda r: r
    )
    for layer, pos in [(0, 2), (1, 6), (1, 8)]:
        name = f"blocks.{layer}.hook_resid_pre"

        def write(act, hook, pos=pos):
            act = act.clone()
            act[0, pos] = clean_cache[hook.name][0, pos]
            return act

        with torch.no_grad():
            by_hand = model.run_with_hooks(
                corrupted[None], return_type="objectives", fwd_hooks=[(name, write)]
            )
        assert abs(float(harmless.values[layer, pos]) - float(by_hand[0, -1, 1])) <= 1e-5


# -- identities and signs ------------------------------------------------------------------
def test_clean_into_clean_changes_nothing(model):
    clean, _ = pair()
    with torch.no_grad():
        reward = float(model.rewards(clean[None])[0])
    for site in ("resid_pre", "z", "mlp_out", "resid_post"):
        res = activation_patching(model, clean, clean, site=site, metric=lambda r: r)
        assert (res.rewards - reward).abs().max() <= 1e-5


def test_first_layer_all_positions_reproduces_clean(model):
    clean, corrupted = pair()
    with torch.no_grad():
        r_clean = float(model.rewards(clean[None])[0])
        r_corrupted = float(model.rewards(corrupted[None])[0])
    kw = dict(site="resid_pre", by_position=False, layers=[0], alignment="exact")
    denoised = activation_patching(model, clean, corrupted, mode="denoising", **kw)
    noised = activation_patching(model, clean, corrupted, mode="noising", **kw)
    assert abs(float(denoised.rewards[0]) - r_clean) <= 1e-5
    assert abs(float(noised.rewards[0]) - r_corrupted) <= 1e-5
    # both default metrics read 1 here: the patch moves the reward all the way to the source
    assert abs(float(denoised.values[0]) - 1) <= 1e-4 and abs(float(noised.values[0]) - 1) <= 1e-4
    assert denoised.target_reward == pytest.approx(r_corrupted, abs=1e-6)
    assert noised.target_reward == pytest.approx(r_clean, abs=1e-6)


def test_default_metric_signs(llama):
    clean, corrupted = pair(seed=3)
    den = activation_patching(llama, clean, corrupted, site="z", alignment="exact")
    noi = activation_patching(llama, clean, corrupted, site="z", alignment="exact", mode="noising")
    r_c, r_x = den.source_reward, den.target_reward
    assert torch.allclose(den.values, (den.rewards - r_x) / (r_c - r_x), atol=1e-5)
    assert torch.allclose(noi.values, (r_c - noi.rewards) / (r_c - r_x), atol=1e-5)
    assert den.baseline == 0 and noi.baseline == 0


# -- alignments --------------------------------------------------------------------------------
def manual_patch(model, target, source, hook, tgt_pos, src_pos):
    _, cache = model.run_with_cache(source[None], names_filter=hook)

    def write(act, hook):
        act = act.clone()
        act[0, tgt_pos] = cache[hook.name][0, src_pos]
        return act

    with torch.no_grad():
        return float(
            model.run_with_hooks(target[None], return_type="reward", fwd_hooks=[(hook, write)])[0]
        )


def test_end_alignment_pairs_reading_tokens(llama):
    clean, corrupted = pair(lengths=[11, 7], seed=4)
    res = activation_patching(llama, clean, corrupted, site="resid_pre", metric=lambda r: r)
    assert res.shape == (2, 7) and res.grid.position_labels[-1] == "end-0"
    assert res.alignment.source.tolist() == list(range(4, 11))  # clean positions 4..10
    for j, layer in [(6, 1), (0, 0), (3, 1)]:  # last column = the reading tokens
        expected = manual_patch(llama, corrupted, clean, f"blocks.{layer}.hook_resid_pre", j, 4 + j)
        assert abs(float(res.rewards[layer, j]) - expected) <= 1e-5


def test_prefix_alignment(llama):
    tok = llama.tokenizer
    a = EncodedConversation(tuple(tok("w6 w7 w8 w9 w10 w11")["input_ids"]), response_start=4)
    b = EncodedConversation(tuple(tok("w12 w13 w14 w15 w16")["input_ids"]), response_start=4)
    res = activation_patching(llama, a, b, site="resid_pre", alignment="prefix")
    assert res.shape == (2, 4) and res.alignment.target.tolist() == [0, 1, 2, 3]
    ids_a, ids_b = torch.tensor(a.ids), torch.tensor(b.ids)
    expected = manual_patch(llama, ids_b, ids_a, "blocks.1.hook_resid_pre", 2, 2)
    assert abs(float(res.rewards[1, 2]) - expected) <= 1e-5
    with pytest.raises(AlignmentError, match="prefix_length"):
        activation_patching(llama, ids_a, ids_b, alignment="prefix")
    explicit = activation_patching(llama, ids_a, ids_b, alignment="prefix", prefix_length=4)
    assert torch.allclose(explicit.values, res.values)
    shifted = EncodedConversation(b.ids, response_start=3)
    with pytest.raises(AlignmentError, match="different lengths"):
        activation_patching(llama, a, shifted, alignment="prefix")


def test_resid_post_is_the_next_resid_pre(model):
    clean, corrupted = pair(lengths=[10, 8], seed=9)
    post = activation_patching(model, clean, corrupted, site="resid_post", metric=lambda r: r)
    pre = activation_patching(model, clean, corrupted, site="resid_pre", metric=lambda r: r)
    assert torch.allclose(post.rewards[:-1], pre.rewards[1:], atol=1e-5)
    last = model.cfg.n_layers - 1
    for j in (0, 5, 7):
        expected = manual_patch(model, corrupted, clean, f"blocks.{last}.hook_resid_post", j, j + 2)
        assert abs(float(post.rewards[last, j]) - expected) <= 1e-5


def test_exact_alignment_requires_equal_lengths(llama):
    clean, corrupted = pair(lengths=[9, 8])
    with pytest.raises(AlignmentError, match="equal lengths"):
        activation_patching(llama, clean, corrupted, alignment="exact")


# -- ablations -----------------------------------------------------------------------------
def test_mean_ablation_uses_reference_means(llama):
    """Means over the reference's real tokens; per position, positions count from each
    sequence's first token whichever side the reference is padded on."""
    clean, _ = pair()
    lengths = [12, 8, 10, 9]
    ref, mask = random_batch(4, lengths, low=6, seed=11, padding_side="right")
    left = random_batch(4, lengths, low=6, seed=11)  # the same rows, left padded
    hook = "blocks.1.hook_mlp_out"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReadingPositionWarning)  # right padded on purpose
        _, cache = llama.run_with_cache(ref, attention_mask=mask, names_filter=hook)
    w = mask[..., None].float()
    token_mean = (cache[hook] * w).sum((0, 1)) / w.sum()
    position_mean = (cache[hook] * w).sum(0) / w.sum(0)  # right padded: column = position
    with torch.no_grad():
        reward = float(llama.rewards(clean[None])[0])
    for mean_over, mean, reference in [
        ("token", token_mean, (ref, mask)),
        ("position", position_mean[: len(clean)], (ref, mask)),
        ("position", position_mean[: len(clean)], left),
        ("position", position_mean[: len(clean)], left[0]),  # mask inferred from the pads
    ]:
        res = activation_patching(
            llama, clean, site="mlp_out", mode="mean", reference=reference, mean_over=mean_over
        )
        with torch.no_grad():
            ablated = llama.run_with_hooks(
                clean[None],
                return_type="reward",
                fwd_hooks=[(hook, lambda a, hook, m=mean: a * 0 + m)],
            )
        assert abs(float(res.values[1]) - (float(ablated[0]) - reward)) <= 1e-5
    zero = activation_patching(llama, clean, site="z", mode="zero", layers=[0], heads=[2])
    with torch.no_grad():
        killed = llama.run_with_hooks(
            clean[None],
            return_type="reward",
            fwd_hooks=[
                (
                    "blocks.0.attn.hook_z",
                    lambda z, hook: torch.cat([z[:, :, :2], 0 * z[:, :, 2:3], z[:, :, 3:]], 2),
                )
            ],
        )
    assert abs(float(zero.values[0, 0]) - (float(killed[0]) - reward)) <= 1e-5
    with pytest.raises(PatchingError, match="reference"):
        activation_patching(llama, clean, mode="mean")
    with pytest.raises(PatchingError, match="covering"):
        activation_patching(
            llama, clean, mode="mean", reference=(ref[:, :5], mask[:, :5]), mean_over="position"
        )


# -- attribution patching --------------------------------------------------------------------
@pytest.mark.parametrize("site", ["resid_pre", "z", "mlp_out"])
def test_atp_is_the_exact_linearisation(model, site):
    """AtP = d metric(a + εΔ)/dε at 0, computed independently (autograd through a hook that
    adds εΔ), and close to a central finite difference."""
    clean, corrupted = pair(seed=7)
    est = attribution_patching(
        model, clean, corrupted, site=site, alignment="exact", by_position=True, metric=lambda r: r
    )
    _, clean_cache = model.run_with_cache(clean[None])
    _, corr_cache = model.run_with_cache(corrupted[None])
    effects = est.effects().reshape(est.shape)
    for layer, j in [(0, 3), (1, 8), (1, 0)]:
        name = f"blocks.{layer}.{'attn.hook_z' if site == 'z' else 'hook_' + site}"
        delta = clean_cache[name][0, j] - corr_cache[name][0, j]

        def run(eps, name=name, j=j, delta=delta):
            def add(act, hook):
                act = act.clone()
                act[0, j] = act[0, j] + eps * delta
                return act

            return model.run_with_hooks(
                corrupted[None], return_type="reward", fwd_hooks=[(name, add)]
            )[0]

        eps = torch.zeros((), requires_grad=True)
        (derivative,) = torch.autograd.grad(run(eps), eps)
        want = effects[layer, j].sum()  # heads: the whole position = sum over heads
        assert abs(float(derivative) - float(want)) <= 1e-4 * max(1, abs(float(want)))
        with torch.no_grad():
            fd = (run(torch.tensor(1e-2)) - run(torch.tensor(-1e-2))) / 2e-2
        assert abs(float(fd) - float(want)) <= 2e-3 + 2e-2 * abs(float(want))


def test_qk_fix_is_exact_for_queries_and_keys(model):
    """For q/k patches the QK-fixed estimate is Σ ∂m/∂A (A' − A) with A' the exactly patched
    pattern (checked by brute force); only the step from the pattern on is linear."""
    clean, corrupted = pair(seed=8)
    layer = 1
    pattern_name = f"blocks.{layer}.attn.hook_pattern"
    store = {}
    with (
        torch.enable_grad(),
        model.hooks(fwd_hooks=[(pattern_name, lambda a, hook: store.__setitem__("A", a))]),
    ):
        r = model(corrupted[None], return_type="reward")
        (g_pattern,) = torch.autograd.grad(r.sum(), store["A"])
    base = store["A"].detach()
    _, clean_cache = model.run_with_cache(clean[None])
    for site in ("q", "k"):
        est = attribution_patching(
            model,
            clean,
            corrupted,
            site=site,
            alignment="exact",
            by_position=True,
            layers=[layer],
            qk_fix=True,
            metric=lambda r: r,
        )
        name = f"blocks.{layer}.attn.hook_{site}"
        for j, h in [(0, 0), (4, 1), (8, 0)]:

            def write(act, hook, j=j, h=h, name=name):
                act = act.clone()
                act[0, j, h] = clean_cache[name][0, j, h]
                return act

            with (
                torch.no_grad(),
                model.hooks(
                    fwd_hooks=[(name, write), (pattern_name, lambda a, hook: store.update(A=a))]
                ),
            ):
                model(corrupted[None], return_type="reward")
            exact = float(((store["A"] - base) * g_pattern).sum())
            assert abs(float(est.effects().reshape(est.shape)[0, j, h]) - exact) <= 1e-5


def test_atp_star_beats_atp_on_saturated_attention():
    """Sharpened queries saturate every softmax: AtP's gradient through it vanishes and it
    misranks key patches; the QK fix recomputes the patterns and recovers the ranking."""
    model = HookedRewardModel.from_pretrained(tiny_reward_model("gpt2"))
    with torch.no_grad():
        for block in model.blocks:
            block.attn.W_Q.mul_(10)
    clean, corrupted = pair(length=12, seed=5)
    report = atp_agreement(
        model,
        clean,
        corrupted,
        site="k",
        by_position=True,
        alignment="exact",
        k=5,
        methods=("atp", "atp+qk"),
        metric=lambda r: r,
    )
    atp, fixed = report.rows
    assert fixed.spearman > atp.spearman + 0.05
    assert fixed.top_k_recall >= atp.top_k_recall
    assert fixed.spearman_abs > atp.spearman_abs


def test_graddrop_magnitudes(llama):
    clean, corrupted = pair(seed=6)
    plain = attribution_patching(llama, clean, corrupted, site="z", alignment="exact")
    star = atp_star(llama, clean, corrupted, site="z", alignment="exact")
    assert star.method == "atp*" and bool((star.magnitude >= 0).all())
    # heads of the last layer: every dropped layer but their own leaves their gradient alone,
    # their own zeroes it, so the GradDrop score is |AtP|
    assert torch.allclose(
        star.magnitude[-1], plain.effects().reshape(plain.shape)[-1].abs(), atol=1e-6
    )
    row = agreement(
        star, activation_patching(llama, clean, corrupted, site="z", alignment="exact"), k=3
    )
    assert row.n_cells == 8 and -1 <= row.spearman <= 1


# -- hooks, errors, results ------------------------------------------------------------------
def test_user_hooks_compose(llama):
    clean, corrupted = pair()
    half = [("blocks.0.hook_mlp_out", lambda a, hook: a * 0.5)]
    with llama.hooks(fwd_hooks=half):
        _, clean_cache = llama.run_with_cache(clean[None])
        with torch.no_grad():
            expected = tl_patching.get_act_patch_resid_pre(
                llama, corrupted[None], clean_cache, lambda logits: logits[0, -1, 0]
            )
    got = activation_patching(
        llama, clean, corrupted, alignment="exact", metric=lambda r: r, fwd_hooks=half
    )
    assert (got.values - expected).abs().max() <= 1e-5
    assert no_hooks_left(llama)


def test_exception_mid_sweep_leaves_model_clean(llama):
    clean, corrupted = pair()
    weights = {k: v.clone() for k, v in llama.state_dict().items()}
    calls = []

    def bad_metric(r):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("metric failed on chunk 3")
        return r

    with pytest.raises(RuntimeError, match="chunk 3"):
        activation_patching(
            llama,
            clean,
            corrupted,
            site="z",
            by_position=True,
            chunk_size=4,
            metric=bad_metric,
            fwd_hooks=[("blocks.0.hook_mlp_out", lambda a, hook: a)],
        )
    assert no_hooks_left(llama)

    def bad_grad_metric(r):
        raise ValueError("nope")

    with pytest.raises(ValueError, match="nope"):
        attribution_patching(llama, clean, corrupted, metric=bad_grad_metric, graddrop=True)
    assert no_hooks_left(llama)
    assert all(torch.equal(v, weights[k]) for k, v in llama.state_dict().items())
    assert all(p.grad is None for p in llama.parameters())


def test_errors(llama):
    clean, corrupted = pair()
    with pytest.raises(PatchingError, match="unknown patching site"):
        activation_patching(llama, clean, corrupted, site="resid")
    with pytest.raises(PatchingError, match="unknown mode"):
        activation_patching(llama, clean, corrupted, mode="resample")
    with pytest.raises(PatchingError, match="takes no corrupted"):
        activation_patching(llama, clean, corrupted, mode="zero")
    with pytest.raises(PatchingError, match="one value per patched run"):
        activation_patching(llama, clean, corrupted, metric=lambda r: r.sum())
    with pytest.raises(PatchingError, match="undefined"):
        activation_patching(llama, clean, clean)  # equal rewards: no margin to restore


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


def test_shared_prefix_writes_are_skipped_exactly(llama):
    """A corrupted token at position 5: earlier positions carry identical activations, their
    cells are the target reward exactly, and everything still equals TransformerLens."""
    clean, _ = pair(length=10, seed=12)
    corrupted = clean.clone()
    corrupted[5] = 7 if int(clean[5]) != 7 else 8
    _, clean_cache = llama.run_with_cache(clean[None])
    metric = lambda logits: logits[0, -1, 0]  # noqa: E731
    with torch.no_grad():
        by_pos = tl_patching.get_act_patch_attn_head_out_by_pos(
            llama, corrupted[None], clean_cache, metric
        )
        all_pos = tl_patching.get_act_patch_attn_head_out_all_pos(
            llama, corrupted[None], clean_cache, metric
        )
        target = float(llama.rewards(corrupted[None])[0])
    res = activation_patching(llama, clean, corrupted, site="z", by_position=True)
    # exactly the sweep's own target run (batched with the source run: ~1e-8 from a lone one)
    assert bool((res.rewards[:, :5] == res.target_reward).all())
    assert abs(res.target_reward - target) <= 1e-6
    assert (res.rewards - by_pos).abs().max() <= 1e-5
    res = activation_patching(llama, clean, corrupted, site="z", metric=lambda r: r)
    assert (res.values - all_pos).abs().max() <= 1e-5


def test_one_set_of_options_describes_a_sweep_for_both_methods():
    """The same keywords (`PatchOptions`, declared once) describe a sweep for activation
    patching and AtP alike; an unknown keyword is a typed error naming the closest one."""
    from reward_lens_tl.errors import ArgumentTypeError
    from reward_lens_tl.patching import PatchOptions, activation_patching, attribution_patching
    from reward_lens_tl.zoo import zoo_path

    model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    clean = model.encode("explain how to bake bread", "the oven and the flour")
    corrupted = model.encode("explain how to bake bread", "the oven and the bomb")
    options: PatchOptions = {"alignment": "exact", "layers": [0, 2]}
    by_options = activation_patching(model, clean, corrupted, site="z", **options)
    by_keywords = activation_patching(
        model, clean, corrupted, site="z", alignment="exact", layers=[0, 2]
    )
    assert torch.equal(by_options.values, by_keywords.values)
    estimate = attribution_patching(model, clean, corrupted, site="z", **options)
    assert estimate.shape == by_options.shape and estimate.method != by_options.method
    resid = activation_patching(model, clean, corrupted, site="resid_pre", alignment="exact")
    assert resid.site == "resid_pre" and options == {"alignment": "exact", "layers": [0, 2]}
    with pytest.raises(ArgumentTypeError, match="unknown keyword 'sites'. Did you mean 'site'"):
        activation_patching(model, clean, corrupted, sites="z")  # a TypeError, as Python's
    with pytest.raises(ArgumentTypeError, match="unknown keyword 'layer'. Did you mean 'layers'"):
        attribution_patching(model, clean, corrupted, layer=[0])
