"""SAE tools: splicing identities, exact feature attribution, AtP vs ablation, concepts, and
the zoo's planted features. Tiny models; the whole file runs in well under a minute."""

from __future__ import annotations

import pytest
import torch
from sae_lens import SAE, StandardSAE, StandardSAEConfig
from sae_lens.saes.sae import SAEMetadata

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.errors import RewardLensError, UnknownHookError
from reward_lens_tl.pair_batches import pair_batches
from reward_lens_tl.sae import (
    SAEHookError,
    SAESiteError,
    add_sae,
    atp_check,
    collect_activations,
    concept_projection,
    concept_steering,
    concept_vectors_from_sets,
    decoder_alignment,
    feature_attribution,
    feature_steering,
    iter_activations,
    latent_ablation,
    latent_attribution_patching,
    load_sae,
    max_activating_contexts,
    pair_feature_attribution,
    rebatch,
    reward_direction,
    run_with_cache_with_saes,
    save_sae,
    splice_report,
    spliced,
    train_topk_sae,
)
from reward_lens_tl.sae.testing import random_topk_sae, tiny_trained_sae
from reward_lens_tl.stats import pearson
from reward_lens_tl.testing import random_batch, tiny_reward_model, tiny_tokenizer
from tests.figures import check_figure

FINAL = "blocks.1.hook_resid_post"  # the tiny models have two layers


@pytest.fixture(scope="module")
def llama():
    return HookedRewardModel.from_pretrained(tiny_reward_model("llama"), tiny_tokenizer())


@pytest.fixture(scope="module")
def gpt2():
    return HookedRewardModel.from_pretrained(tiny_reward_model("gpt2"))


@pytest.fixture(scope="module")
def batch():
    return random_batch(4, [9, 6, 12, 3])


@pytest.fixture(scope="module")
def trained_mid(llama):
    return tiny_trained_sae(llama, "blocks.0.hook_resid_post", d_sae=128, k=8, steps=150)


def _no_saes_or_hooks(model) -> bool:
    hooks = [h for hp in model.hook_dict.values() for h in hp.fwd_hooks + hp.bwd_hooks]
    return not model.acts_to_saes and not hooks


# ---- activations -------------------------------------------------------------------------------
def test_activations_exclude_padding_and_match_unpadded_runs(llama, batch):
    ids, mask = batch
    acts = collect_activations(llama, "blocks.0.hook_resid_post", [(ids, mask)])
    assert acts.shape == (int(mask.sum()), llama.cfg.d_model)
    n = int(mask[1].sum())  # row 1's tokens are its real columns (pads after its first)
    row = ids[1][mask[1].bool()][None]
    _, cache = llama.run_with_cache(row, names_filter="blocks.0.hook_resid_post")
    start = int(mask[0].sum())
    torch.testing.assert_close(acts[start : start + n], cache["blocks.0.hook_resid_post"][0])
    # an id tensor alone: padding found from the pad id; or plain id lists
    assert collect_activations(llama, "blocks.0.hook_resid_post", ids).shape == acts.shape
    lists = [row[m.bool()].tolist() for row, m in zip(ids, mask, strict=True)]
    torch.testing.assert_close(collect_activations(llama, "blocks.0.hook_resid_post", lists), acts)


def test_activations_from_pairs_and_rebatch(llama):
    from types import SimpleNamespace as Pair

    pairs = [Pair(prompt="w6 w7", chosen="w8", rejected="w9 w10 w11")] * 5
    chunks = list(iter_activations(llama, "hook_embed", pairs, batch_size=2))
    n_tokens = sum(int(m.sum()) for _, m, _ in pair_batches(llama, pairs, 2))
    assert sum(c.shape[0] for c in chunks) == n_tokens
    batches = list(rebatch(chunks, batch_size=8, buffer_batches=2))
    assert all(b.shape == (8, llama.cfg.d_model) for b in batches)
    assert len(batches) == n_tokens // 8


# ---- splicing ----------------------------------------------------------------------------------
@pytest.mark.parametrize("site", ["blocks.0.hook_resid_post", FINAL, "blocks.1.hook_mlp_out"])
def test_splice_with_error_term_leaves_reward_unchanged(llama, batch, site):
    ids, mask = batch
    sae = random_topk_sae(llama, site)
    report = splice_report(llama, sae, ids, mask)
    assert report.max_error_with_error_term <= 1e-5
    assert float(report.reconstruction_error.abs().max()) > 1e-3  # the reconstruction is not
    assert _no_saes_or_hooks(llama)
    fig = check_figure(report.plot(), static=report.plot(backend="matplotlib"))
    without, with_error = fig.data  # reconstruction and with-error rewards against the reward
    assert without.x.tolist() == with_error.x.tolist() == report.original.tolist()
    assert without.y.tolist() == report.reconstruction.tolist()
    r = pearson(report.original.numpy(), report.reconstruction.numpy())
    assert f"r = {r:#.3g}" in fig.layout.title.text


@torch.no_grad()
def test_add_sae_and_run_with_cache_with_saes(gpt2, batch):
    ids, mask = batch
    sae = random_topk_sae(gpt2, FINAL)
    clean = gpt2.rewards(ids, mask)
    out, cache = run_with_cache_with_saes(
        gpt2, ids, attention_mask=mask, return_type="reward", saes=[sae]
    )
    assert float((out - clean).abs().max()) <= 1e-5
    assert f"{FINAL}.hook_sae_acts_post" in cache
    add_sae(gpt2, sae)
    try:
        assert FINAL in gpt2.acts_to_saes
        assert float((gpt2.rewards(ids, mask) - clean).abs().max()) <= 1e-5
    finally:
        gpt2.reset_saes()
    assert float((gpt2.rewards(ids, mask) - clean).abs().max()) == 0.0


def test_splice_restores_model_after_an_exception(llama, batch):
    sae = random_topk_sae(llama, FINAL)
    with pytest.raises(RuntimeError), spliced(llama, sae):
        raise RuntimeError("boom")
    assert _no_saes_or_hooks(llama)


# ---- bad hook names ----------------------------------------------------------------------------
def test_bad_hook_name_is_an_error_with_close_matches(llama, batch):
    ids, mask = batch
    sae = random_topk_sae(llama, FINAL)
    sae.cfg.metadata.hook_name = "blocks.1.hook_resid_pots"
    for call in (
        lambda: splice_report(llama, sae, ids, mask),
        lambda: add_sae(llama, sae),
        lambda: run_with_cache_with_saes(llama, ids, saes=[sae]),
        lambda: collect_activations(llama, "blocks.1.hook_resid_pots", [(ids, mask)]),
    ):
        with pytest.raises(SAEHookError) as err:
            call()
        assert isinstance(err.value, UnknownHookError) and isinstance(err.value, KeyError)
        assert "blocks.1.hook_resid_post" in str(err.value)
    with pytest.raises(SAEHookError):
        random_topk_sae(llama, "blocks.7.hook_resid_post")
    assert _no_saes_or_hooks(llama)


def test_direct_attribution_refuses_other_sites(llama, batch):
    sae = random_topk_sae(llama, "blocks.0.hook_resid_post")
    with pytest.raises(SAESiteError, match="latent_attribution_patching"):
        feature_attribution(llama, sae, *batch)


def test_width_mismatch_is_an_error(llama, batch):
    sae = random_topk_sae(llama, FINAL, d_in=32)
    with pytest.raises(SAESiteError, match="d_model=64"):
        splice_report(llama, sae, *batch)


# ---- training, save / load ---------------------------------------------------------------------
def test_training_is_seeded_and_round_trips_through_disk(llama, batch, tmp_path, trained_mid):
    ids, mask = batch
    again = tiny_trained_sae(llama, "blocks.0.hook_resid_post", d_sae=128, k=8, steps=150)
    torch.testing.assert_close(again.sae.W_dec, trained_mid.sae.W_dec)
    assert trained_mid.stats.fvu < 0.6 and trained_mid.stats.l0 == 8
    path = save_sae(trained_mid, tmp_path / "sae")
    loaded = load_sae(path, model=llama)
    assert type(loaded).__name__ == "TopKSAE"
    for name, p in trained_mid.sae.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[name], p)
    a = splice_report(llama, trained_mid.sae, ids, mask).reconstruction
    b = splice_report(llama, loaded, ids, mask).reconstruction
    torch.testing.assert_close(a, b)


def test_training_from_an_iterator_that_ends_too_soon(llama):
    acts = torch.randn(64, 8)
    with pytest.raises(RewardLensError, match="ended after"):
        train_topk_sae(iter(acts.split(16)), "x", d_sae=16, k=2, steps=10, batch_size=16)


def test_load_any_sae_lens_sae(llama, batch, tmp_path):
    torch.manual_seed(0)
    sae = StandardSAE(StandardSAEConfig(d_in=64, d_sae=96, metadata=SAEMetadata(hook_name=FINAL)))
    sae.save_model(tmp_path / "standard")
    loaded = load_sae(tmp_path / "standard", model=llama)
    assert isinstance(loaded, SAE) and type(loaded).__name__ == "StandardSAE"
    attr = feature_attribution(llama, loaded, *batch)
    assert attr.completeness_error() <= 1e-4
    with pytest.raises(FileNotFoundError, match="cfg.json"):
        load_sae(tmp_path / "missing")


# ---- attribution -------------------------------------------------------------------------------
@pytest.mark.parametrize("family", ["llama", "gpt2", "gemma2"])
def test_final_residual_feature_attribution_is_complete(family, batch):
    model = HookedRewardModel.from_pretrained(tiny_reward_model(family))
    sae = random_topk_sae(model, FINAL)
    attr = feature_attribution(model, sae, *batch)
    assert attr.completeness_error() <= 1e-4
    torch.testing.assert_close(attr.rewards, model.rewards(*batch).float())
    # columns of each row's tokens 1, 2, 3, 0 (pads after each row's first token: tokens 1.. of
    # the rows of 9, 6, 12, 3 tokens start at columns 4, 7, 1, 10)
    at_pos = feature_attribution(model, sae, *batch, positions=[4, 8, 3, 0])
    assert at_pos.completeness_error() <= 1e-4
    assert (attr.values != 0).sum(0).le(8).all()  # TopK: at most k latents contribute
    assert _no_saes_or_hooks(model)


def test_pair_margin_attribution_is_complete(llama):
    from types import SimpleNamespace as Pair

    pairs = [
        Pair(prompt="w6 w7", chosen="w8 w30", rejected="w9 w10 w11"),
        Pair(prompt="w12", chosen="w13", rejected="w40 w41"),
    ]
    sae = random_topk_sae(llama, FINAL)
    margin = pair_feature_attribution(llama, sae, pairs, batch_size=1).margin
    assert margin.completeness_error() <= 1e-4
    assert len(margin.top_k(3, example=0)) == 3
    assert len(margin.to_dataframe(k=3)) == 6
    fig = check_figure(margin.plot(k=3, example=0), static=margin.plot(k=3, backend="matplotlib"))
    top = margin.top_k(3, example=0)
    terms = {name: float(term[0]) for name, term in margin.terms().items()}
    assert list(fig.layout.yaxis.ticktext) == [label for label, _ in top] + list(terms)
    assert fig.data[0].x.tolist() == pytest.approx([v for _, v in top] + list(terms.values()))
    assert "example 0" in fig.layout.title.text
    fig = check_figure(pair_feature_attribution(llama, sae, pairs).plot(k=2))
    assert len(fig.data[0].x) == 2 + 3  # the margin's top 2 and its three terms


def test_atp_over_latents_agrees_with_ablation(llama, batch, trained_mid):
    ids, mask = batch
    check = atp_check(llama, trained_mid.sae, ids, mask, k=10)
    assert check.pearson() > 0.9
    assert check.sign_agreement() >= 0.9
    direct = latent_ablation(llama, trained_mid.sae, ids, mask, list(check.features))
    torch.testing.assert_close(direct.values, check.actual)
    fig = check_figure(check.plot(), static=check.plot(backend="matplotlib"))
    assert fig.data[0].x.tolist() == check.actual.flatten().tolist()
    assert fig.data[0].y.tolist() == check.estimate.flatten().tolist()
    assert fig.layout.title.text.endswith(f"r = {check.pearson():#.3g}")
    assert len(fig.layout.shapes) == 1  # the line estimate = actual
    fig = check_figure(direct.plot(k=4), static=direct.plot(k=4, backend="matplotlib"))
    assert fig.data[0].x.tolist() == pytest.approx([v for _, v in direct.top_k(4)])
    atp = latent_attribution_patching(llama, trained_mid.sae, ids, mask)
    fig = check_figure(atp.plot(k=5), static=atp.plot(k=5, backend="matplotlib"))
    assert list(fig.layout.yaxis.ticktext) == [label for label, _ in atp.top_k(5)]  # no terms
    assert _no_saes_or_hooks(llama)
    assert all(p.grad is None for p in llama.parameters())


def test_feature_steering_and_ablation_on_the_final_residual(llama, batch):
    ids, mask = batch
    sae = random_topk_sae(llama, FINAL)
    attr = feature_attribution(llama, sae, ids, mask)
    f = attr.top_features(1)[0]
    curve = feature_steering(llama, sae, ids, mask, feature=f, coefficients=[0.0, 1.0])
    torch.testing.assert_close(curve.rewards[0], llama.rewards(ids, mask))
    fig = check_figure(curve.plot(), static=curve.plot(backend="matplotlib"))
    band, mean = fig.data  # ± 1 std over the 4 examples, then the mean
    assert list(mean.x) == [0.0, 1.0] and list(mean.y) == pytest.approx(curve.mean().tolist())
    assert band.hoverinfo == "skip" and f"{curve.slope():#.3g}" in fig.layout.title.text
    # ablating a latent at the reward position only: its direct effect up to the final norm's
    # change of scale, so same sign when large
    effect = latent_ablation(llama, sae, ids, mask, [f], positions="reward").values[0]
    big = attr.values[f].abs() > 0.05  # values [feature, example]
    assert (effect[big].sign() == attr.values[f, big].sign()).all()


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


# ---- concept vectors ---------------------------------------------------------------------------
def test_concept_vectors_sanity(llama, batch):
    ids, mask = batch
    # two sets differing only in the last token: at the embedding the concept vector is exactly
    # the difference of the two embeddings
    base = [list(range(10, 16))] * 3
    pos = [s[:-1] + [40] for s in base]
    neg = [s[:-1] + [41] for s in base]
    cv = concept_vectors_from_sets(llama, pos, [5] * 3, neg, [5] * 3, name="40 vs 41")
    torch.testing.assert_close(cv["blocks.0.hook_resid_pre"], (llama.W_E[40] - llama.W_E[41]))
    assert len(cv.labels) == llama.cfg.n_layers + 1
    w = reward_direction(llama)
    cos = torch.nn.functional.cosine_similarity(cv[FINAL], w, dim=0)
    assert float(cos) == pytest.approx(float(cv.reward_cosine[-1]), abs=1e-5)
    # steering along the reward direction at the reward position raises the reward
    curve = concept_steering(
        llama, w, FINAL, ids, mask, coefficients=[-1.0, 0.0, 1.0], positions="reward"
    )
    torch.testing.assert_close(curve.rewards[1], llama.rewards(ids, mask))
    assert curve.slope() > 0 and (curve.rewards.diff(dim=0) > 0).all()
    # projecting out a direction orthogonal to every residual changes nothing; the reward
    # direction itself, at the final residual, leaves only the head bias
    proj = concept_projection(llama, w, FINAL, ids, mask)
    torch.testing.assert_close(proj.projected, llama.b_U[0].expand(4), atol=1e-5, rtol=0)
    sae = random_topk_sae(llama, FINAL)
    top = decoder_alignment(cv, sae, k=3)
    assert len(top) == 3 and abs(top[0][1]) >= abs(top[-1][1])
    assert len(cv.to_dataframe()) == 3
    ticks = ["L0 resid_pre", "L0 resid_post", "L1 resid_post"]  # the sites, shortened
    fig = check_figure(cv.plot(), static=cv.plot(backend="matplotlib"), x_labels=ticks)
    assert fig.data[0].y.tolist() == pytest.approx(cv.reward_cosine.tolist())
    assert list(fig.data[0].customdata) == list(cv.labels)  # hover: the full hook names
    fig = check_figure(curve.plot(), static=curve.plot(backend="matplotlib"))
    assert fig.data[-1].y.tolist() == pytest.approx(curve.mean().tolist())
    fig = check_figure(proj.plot(), static=proj.plot(backend="matplotlib"))
    assert fig.data[0].y.tolist() == pytest.approx(proj.projected.tolist())
    assert f"mean effect {float(proj.effect.mean()):#.3g}" in fig.layout.title.text


# ---- ground truth -------------------------------------------------------------------------------
def test_planted_feature_report_on_a_stub_task(llama, trained_mid):
    """The report's plumbing on a stand-in task: feature "w40" = positions of token 40."""
    import random
    from types import SimpleNamespace

    from reward_lens_tl.sae.zoo_features import (
        column_correlations,
        latent_table,
        planted_feature_report,
    )

    def example(rng):
        ids = [1] + [rng.choice([40, *range(10, 30)]) for _ in range(rng.randint(3, 10))]
        where = tuple(i for i, t in enumerate(ids) if t == 40)
        return SimpleNamespace(
            input_ids=tuple(ids),
            feature_positions={"w40": where},
            contributions={"w40": float(len(where))},
        )

    class Task:
        rule = SimpleNamespace(weight=lambda feature: 1.0)

        def examples(self, n, seed):
            rng = random.Random(seed)
            return [example(rng) for _ in range(n)]

    report = planted_feature_report(llama, trained_mid.sae, Task(), features=("w40",), n=60)
    row = report["w40"]
    assert -1 <= row.correlation <= 1 and row.latent in range(trained_mid.sae.cfg.d_sae)
    assert row.best_correlation >= row.correlation
    assert "passed" in report.to_dataframe()
    fig = check_figure(report.plot(), static=report.plot(backend="matplotlib"))
    assert fig.data[0].x.tolist() == [row.correlation]
    assert list(fig.layout.yaxis.ticktext) == [f"w40 → f{row.latent}"]
    at_reward = planted_feature_report(
        llama, trained_mid.sae, Task(), features=("w40",), n=60, metric="reward_token"
    )["w40"]
    assert at_reward.metric == "reward_token"
    assert at_reward.correlation == at_reward.reward_token_correlation
    with pytest.raises(ValueError, match="metric"):
        planted_feature_report(llama, trained_mid.sae, Task(), features=("w40",), metric="x")
    examples = Task().examples(20, seed=0)
    *_, owner, reads = latent_table(llama, trained_mid.sae, examples, ("w40",))
    last = torch.cumsum(torch.bincount(owner), 0) - 1  # the reward is read at the last token
    assert reads.nonzero().flatten().tolist() == last.tolist()
    z = torch.randn(50, 3)
    assert column_correlations(z, z[:, 1])[1] == pytest.approx(1.0)
    assert column_correlations(torch.zeros(5, 2), torch.arange(5.0)).eq(0).all()


# ---- ground truth on the zoo -------------------------------------------------------------------
def _zoo():
    try:
        from reward_lens_tl.zoo import load_task, zoo_path
    except ImportError as err:
        pytest.skip(f"the model zoo package is not importable ({err})")
    path = zoo_path("scalar")
    if not (path / "config.json").exists():
        pytest.skip(f"zoo model missing at {path}: run the zoo training to create it")
    return HookedRewardModel.from_pretrained(path), load_task().task


@pytest.mark.slow  # tens of seconds: the slow tier (make test-all / CI)
def test_zoo_planted_features_have_matching_latents():
    """Issue 6's ground truth on the shipped scalar model: every planted feature has a latent
    correlating ≥ 0.8 with it whose ablation moves the reward by ≥ 0.05 with the planted sign.
    topic_match and harmful are read on their tokens at blocks.0.hook_resid_post (summed
    activation); length and sycophancy at the reward token of the final residual, where the
    model gathers them. Two 128-latent k=8 TopK SAEs, seed 0 (≈ 4 s of training each on one
    thread); seeds 1 and 2 pass as well (see reward_lens_tl.sae.zoo_features)."""
    from reward_lens_tl.sae.zoo_features import ZOO_PLAN, zoo_ground_truth

    model, task = _zoo()
    report, trained = zoo_ground_truth(model, task)
    assert set(trained) == {"blocks.0.hook_resid_post", "blocks.2.hook_resid_post"}
    assert [r.feature for r in report.rows] == list(ZOO_PLAN)
    for row in report.rows:
        assert (row.hook_name, row.metric) == ZOO_PLAN[row.feature]
        assert row.correlation >= 0.8 and row.passed, row
        assert row.effect * row.planted_sign >= 0.05, row
    assert report["harmful"].correlation >= 0.95 and report["sycophancy"].correlation >= 0.95
