"""Implicit rewards of the zoo's DPO policy: parity with plain PyTorch on HF logits, exact
attribution, the lens end point, the feature fit and typed errors."""

import dataclasses
import html
import types

import pytest
import torch
import transformers

from reward_lens_tl.errors import InvalidArgumentError, RewardLensError
from reward_lens_tl.implicit import (
    EmptyResponseMaskError,
    FeatureMatrix,
    ImplicitRewardModel,
    NonlinearUnembedError,
    VocabularyMismatchError,
    divergence,
    fit_reward,
    implicit_attribution,
    implicit_feature_fit,
    implicit_lens,
    load_causal_lm,
    pair_implicit_attribution,
    pair_implicit_lens,
)
from reward_lens_tl.inputs import EncodedConversation, as_encoded
from reward_lens_tl.plotting import shown_token
from reward_lens_tl.testing import perturb_, tiny_config
from reward_lens_tl.zoo import load_model, load_task, zoo_path
from reward_lens_tl.zoo.dpo import sequence_logprobs
from tests.figures import check_figure

FAMILIES = {
    "llama": "LlamaForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "mistral": "MistralForCausalLM",
    "gemma2": "Gemma2ForCausalLM",
    "gpt2": "GPT2LMHeadModel",
}


@pytest.fixture(scope="module")
def irm():
    return ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))


@pytest.fixture(scope="module")
def hf_pair():
    return load_model("policy"), load_model("reference")


@pytest.fixture(scope="module")
def examples():
    return load_task().task.examples(12, seed=3)


def tiny_causal(family: str, seed: int = 0):
    cfg = tiny_config(family)
    cfg.architectures = [FAMILIES[family]]
    torch.manual_seed(seed)
    return perturb_(getattr(transformers, FAMILIES[family])(cfg), seed=seed).eval()


def plain_implicit(policy, reference, enc: EncodedConversation, beta: float, end: int) -> float:
    """β Σ_{t in [response_start, end)} (log π − log π_ref)(ids[t]) from HF logits, one
    unpadded sequence at a time."""
    ids = torch.tensor([enc.ids])
    total = 0.0
    with torch.no_grad():
        lp = policy(input_ids=ids).logits[0].log_softmax(-1)
        lr = reference(input_ids=ids).logits[0].log_softmax(-1)
    for t in range(enc.response_start, end):
        total += float(lp[t - 1, enc.ids[t]] - lr[t - 1, enc.ids[t]])
    return beta * total


# -- conversion and parity ---------------------------------------------------------------------
@pytest.mark.parametrize("family", list(FAMILIES))
def test_causal_lm_logits_match_hf(family):
    hf = tiny_causal(family)
    model = load_causal_lm(hf)
    ids = torch.randint(3, 97, (2, 12))
    mask = torch.ones_like(ids)
    ids[1, 8:], mask[1, 8:] = 0, 0
    with torch.no_grad():
        ours, theirs = (
            model(ids, attention_mask=mask),
            hf(input_ids=ids, attention_mask=mask).logits,
        )
    assert (ours[0] - theirs[0]).abs().max() < 1e-4
    assert (ours[1, :8] - theirs[1, :8]).abs().max() < 1e-4


def test_zoo_policy_logits_match_hf(irm, hf_pair):
    ids = torch.tensor([list(ex.input_ids) for ex in load_task().task.examples(1, seed=0)])
    with torch.no_grad():
        assert (irm.policy(ids) - hf_pair[0](input_ids=ids).logits).abs().max() < 1e-4
        assert (irm.reference(ids) - hf_pair[1](input_ids=ids).logits).abs().max() < 1e-4


def test_beta_comes_from_the_zoo_metadata(irm):
    assert irm.beta == 0.1


@pytest.mark.parametrize("include_suffix", [True, False])
def test_implicit_reward_equals_plain_pytorch(irm, hf_pair, examples, include_suffix):
    # zoo examples end "<|end|> <eos>": the suffix is those two tokens
    encs = [
        EncodedConversation(ex.input_ids, ex.response_start, len(ex.input_ids) - 2)
        for ex in examples
    ]
    ids, attention, resp = irm.batch(encs, include_suffix=include_suffix)
    ours = irm.rewards(ids, resp, attention)
    ends = [len(e) if include_suffix else e.response_end for e in encs]
    plain = torch.tensor(
        [plain_implicit(*hf_pair, e, 0.1, end) for e, end in zip(encs, ends, strict=True)]
    )
    assert (ours - plain).abs().max() < 1e-4
    assert ids.shape[0] == len(examples) and bool((attention == 0).any())  # padded batch


def test_default_sums_what_dpo_training_summed(irm, hf_pair, examples):
    pol, ref = hf_pair
    with torch.no_grad():
        training = 0.1 * (sequence_logprobs(pol, examples) - sequence_logprobs(ref, examples))
    ids, attention, resp = irm.batch([as_encoded(ex) for ex in examples])
    assert (irm.rewards(ids, resp, attention) - training).abs().max() < 1e-4


def test_token_rewards_sum_and_stay_in_the_mask(irm, examples):
    ids, attention, resp = irm.batch([as_encoded(ex) for ex in examples[:4]])
    tokens = irm.token_rewards(ids, resp, attention)
    assert bool((tokens[resp == 0] == 0).all()) and bool((tokens[resp == 1] != 0).any())
    assert torch.allclose(tokens.sum(-1), irm.rewards(ids, resp, attention))


def test_pair_rewards_are_batch_invariant(irm):
    pairs = load_task().task.contrast_pairs("sycophancy", 5, seed=1)
    c1, r1 = irm.pair_rewards(pairs, batch_size=2)
    c2, r2 = irm.pair_rewards(pairs, batch_size=5)
    assert (c1 - c2).abs().max() < 1e-5 and (r1 - r2).abs().max() < 1e-5


def test_score_from_text(irm):
    enc = irm.encode("how bake bread", "soup oven")
    ids, attention, resp = irm.batch([enc])
    assert abs(float(irm.score("how bake bread", "soup oven") - irm.rewards(ids, resp)[0])) < 1e-6


# -- attribution -------------------------------------------------------------------------------
@pytest.mark.parametrize("lse", ["term", "expected"])
@pytest.mark.parametrize("heads", [True, False])
def test_attribution_parts_sum_exactly(irm, examples, lse, heads):
    ids, attention, resp = irm.batch([as_encoded(ex) for ex in examples[:6]])
    attr = implicit_attribution(irm, ids, resp, attention, lse=lse, heads=heads)
    assert attr.linear_error() < 1e-4  # parts + head bias = linear part (from logits)
    assert attr.completeness_error() < 1e-4  # + nonlinear + reference = implicit reward
    assert (attr.rewards - irm.rewards(ids, resp, attention)).abs().max() < 1e-4
    if lse == "term":  # the linear part is β Σ logit of the taken tokens
        with torch.no_grad():
            logits = irm.policy(ids, attention_mask=attention)
        taken = logits[:, :-1].gather(-1, ids[:, 1:, None])[..., 0]
        expected = 0.1 * (taken * resp[:, 1:]).sum(-1)
        assert (attr.linear.rewards - expected).abs().max() < 1e-4


@pytest.mark.parametrize("heads", [True, False])
def test_attribution_components_are_a_reward_models(irm, examples, heads):
    """The implicit split walks the components as a reward model's attribution does, so its
    rows carry the same components, with TransformerLens's names."""
    from reward_lens_tl import HookedRewardModel
    from reward_lens_tl.attribution import direct_attribution
    from reward_lens_tl.testing import random_batch, tiny_reward_model

    ids, attention, resp = irm.batch([as_encoded(ex) for ex in examples[:2]])
    linear = implicit_attribution(irm, ids, resp, attention, heads=heads).linear
    n_layers, n_heads = irm.cfg.n_layers, irm.cfg.n_heads
    expected = ["embed"]
    for layer in range(n_layers):
        attn = [f"L{layer}H{h}" for h in range(n_heads)] if heads else [f"{layer}_attn_out"]
        expected += [*attn, f"{layer}_mlp_out"]
    assert list(linear.tl_labels) == [*expected, "bias"]
    rm = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))  # 2 layers, as the policy
    assert (rm.cfg.n_layers, rm.cfg.n_heads) == (n_layers, n_heads)
    reward = direct_attribution(rm, *random_batch(1, [5]), heads=heads)
    assert reward.components == linear.components


def test_attribution_exact_with_layernorm_policy():
    policy, reference = tiny_causal("gpt2", 0), tiny_causal("gpt2", 1)
    irm = ImplicitRewardModel(load_causal_lm(policy), load_causal_lm(reference), beta=0.5)
    encs = [EncodedConversation(tuple(range(3, 3 + n)), 4) for n in (9, 12)]
    ids, attention, resp = irm.batch(encs)
    for lse in ("term", "expected"):
        attr = implicit_attribution(irm, ids, resp, attention, lse=lse)
        assert attr.linear_error() < 1e-4 and attr.completeness_error() < 1e-4


def test_margin_attribution_and_frame(irm):
    pairs = load_task().task.contrast_pairs("harmful", 6, seed=2)
    margin = pair_implicit_attribution(irm, pairs, batch_size=4).margin
    chosen, rejected = irm.pair_rewards(pairs)
    assert (margin.rewards - (chosen - rejected)).abs().max() < 1e-4
    assert margin.completeness_error() < 1e-4
    frame = margin.to_dataframe()
    assert set(frame["component"]) >= {"embed", "mlp0", "nonlinear", "reference", "head_bias"}
    assert margin.top_k(3)[0][0] in margin.labels
    fig = check_figure(margin.plot(k=3), static=margin.plot(k=3, backend="matplotlib"))
    terms = [(name, float(t.mean())) for name, t in margin.terms().items()][::-1]
    shown = [*margin.top_k(3), *terms]  # the top components, then the three terms
    assert list(fig.layout.yaxis.ticktext) == [label for label, _ in shown]
    assert fig.data[0].x.tolist() == pytest.approx([v for _, v in shown])
    pair = pair_implicit_attribution(irm, pairs[:2])
    check_figure(pair.plot(k=3), static=pair.plot(k=3, backend="matplotlib"))


def test_attribution_refuses_soft_capped_logits():
    policy, reference = tiny_causal("gemma2", 0), tiny_causal("gemma2", 1)
    irm = ImplicitRewardModel(load_causal_lm(policy), load_causal_lm(reference), beta=0.1)
    ids, attention, resp = irm.batch([EncodedConversation(tuple(range(3, 12)), 4)])
    with pytest.raises(NonlinearUnembedError, match="soft-caps"):
        implicit_attribution(irm, ids, resp, attention)


# -- lens --------------------------------------------------------------------------------------
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


# -- feature fit -------------------------------------------------------------------------------
def test_ridge_recovers_planted_weights_and_divergence_flags_them():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(400, 4, generator=gen)
    groups = torch.arange(400) // 2
    feats = FeatureMatrix(x, ("a", "b", "c", "d"), groups)
    fit_a = fit_reward(feats, 3 * x[:, 0] + x[:, 1], alpha=1e-3, target_name="A")
    fit_b = fit_reward(feats, 3 * x[:, 0] - 2 * x[:, 2], alpha=1e-3, target_name="B")
    assert fit_a.r2 > 0.999 and fit_a.pairwise_agreement == 1.0 and fit_a.spearman > 0.99
    assert [n for n, _ in fit_a.top_k(2)] == ["a", "b"]
    table = divergence(fit_a, fit_b)
    verdict = dict(zip(table.names, table.verdict, strict=True))
    assert verdict == {"a": "both", "b": "A only", "c": "B only", "d": ""}
    assert fit_a.n_test % 2 == 0  # pairs never straddle the split
    fig = check_figure(fit_a.plot(k=3), static=fit_a.plot(k=3, backend="matplotlib"))
    assert list(fig.layout.yaxis.ticktext) == [name for name, _ in fit_a.top_k(3)]
    assert fig.data[0].x.tolist() == pytest.approx([w for _, w in fit_a.top_k(3)])
    assert f"R² {fit_a.r2:#.3g}" in fig.layout.title.text
    fig = check_figure(table.plot(k=3), static=table.plot(k=3, backend="matplotlib"))
    first = [name for name, _ in table.top_k(3)]  # the features that differ most
    assert list(fig.layout.yaxis.ticktext) == first and [t.name for t in fig.data] == ["A", "B"]
    rows = [table.names.index(name) for name in first]
    assert list(fig.data[0].x) == pytest.approx(table.weight_a[rows].tolist())
    assert list(fig.data[1].x) == pytest.approx(table.weight_b[rows].tolist())
    assert fig.data[0].customdata[0] == f"c ({verdict['c']})"


def test_implicit_feature_fit_on_the_zoo(irm):
    from reward_lens_tl import HookedRewardModel

    scalar = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    task = load_task().task
    pairs = [task.response_pair(__import__("random").Random(i)) for i in range(120)]
    result = implicit_feature_fit(irm, scalar, pairs, "blocks.1.hook_resid_post", alpha=10.0)
    assert result.features.values.shape == (240, irm.cfg.d_model)
    # the policy's summed residual explains the implicit reward (a sum over the same positions)
    assert result.implicit.r2 > 0.5 and result.implicit.pairwise_agreement > 0.7
    assert len(result.summary()) == 2 and len(result.divergence.to_dataframe()) == irm.cfg.d_model


# -- bad input ---------------------------------------------------------------------------------
def test_vocabulary_mismatch_is_refused(irm):
    other = load_causal_lm(tiny_causal("llama"))  # 97 tokens, the zoo has 122
    with pytest.raises(VocabularyMismatchError, match="d_vocab=122"):
        ImplicitRewardModel(irm.policy, other, 0.1)
    fake = types.SimpleNamespace(cfg=irm.reference.cfg, tokenizer=types.SimpleNamespace(
        get_vocab=lambda: {"<pad>": 0, "other": 1}))  # fmt: skip
    with pytest.raises(VocabularyMismatchError, match="tokenizers differ"):
        ImplicitRewardModel(irm.policy, fake, 0.1)


def test_empty_response_masks_are_refused(irm):
    ids, attention, resp = irm.batch([irm.encode("how bake bread", "soup")] * 2)
    resp[1] = 0
    with pytest.raises(EmptyResponseMaskError, match=r"rows \[1\]"):
        irm.rewards(ids, resp, attention)
    resp = torch.zeros_like(ids)
    resp[:, 0] = 1
    with pytest.raises(EmptyResponseMaskError, match="position 0"):
        irm.rewards(ids, resp, attention)
    assert issubclass(EmptyResponseMaskError, (RewardLensError, ValueError))


def test_beta_is_required_and_positive(irm, tmp_path):
    with pytest.raises(InvalidArgumentError, match="beta"):
        ImplicitRewardModel(irm.policy, irm.reference, 0.0)
    hf = tiny_causal("llama")
    hf.save_pretrained(tmp_path)
    with pytest.raises(InvalidArgumentError, match="pass beta="):
        ImplicitRewardModel.from_pretrained(tmp_path, tmp_path)


def test_no_hook_left_after_an_error(irm):
    ids, attention, resp = irm.batch([irm.encode("how bake bread", "soup")])

    def boom(act, hook):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        implicit_attribution(irm, ids, resp, attention, fwd_hooks=[("blocks.0.hook_mlp_out", boom)])
    assert all(not hp.fwd_hooks for hp in irm.policy.hook_dict.values())


def test_feature_fit_on_sae_latents(irm):
    from reward_lens_tl.implicit import policy_activations, policy_features
    from reward_lens_tl.sae import train_topk_sae

    task = load_task().task
    pairs = [task.response_pair(__import__("random").Random(i)) for i in range(40)]
    hook = "blocks.1.hook_resid_post"
    acts = policy_activations(irm, pairs, hook)
    assert acts.shape[1] == irm.cfg.d_model and acts.shape[0] > 40 * 2 * 8
    sae = train_topk_sae(acts, hook, d_sae=32, k=4, steps=30, batch_size=64, threads=1).sae
    feats = policy_features(irm, pairs, hook, sae=sae)
    assert feats.values.shape == (80, 32) and feats.names[0] == "latent0"
    # summed latents = latents of each predicting position, summed (checked on one pair)
    ids, attention, resp = irm.batch(list(pairs[0]))
    _, cache = irm.policy.run_with_cache(ids, attention_mask=attention, names_filter=[hook])
    lat = sae.encode(cache[hook])
    predicting = torch.zeros_like(resp, dtype=torch.float32)  # by hand: t - 1 predicts t
    for row, t in resp.nonzero().tolist():
        predicting[row, t - 1] = 1.0
    assert torch.allclose((lat * predicting[..., None]).sum(1), feats.values[:2], atol=1e-4)
    with pytest.raises(InvalidArgumentError, match="SAE reads"):
        policy_features(irm, pairs, "blocks.0.hook_resid_post", sae=sae)


def test_pickle_checkpoints_are_refused(tmp_path):
    from reward_lens_tl.errors import UnsafeCheckpointError

    model = tiny_causal("llama")
    model.save_pretrained(tmp_path)
    for f in tmp_path.glob("*.safetensors"):
        f.unlink()
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")
    with pytest.raises(UnsafeCheckpointError, match="safetensors"):
        load_causal_lm(tmp_path)
