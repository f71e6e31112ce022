"""Implicit reward models on the bridge (`reward_lens_tl/bridge/implicit.py`): the zoo's DPO policy
and reference booted as `BridgeCausalLM`s give the implicit reward, its lens and its exact
attribution with TransformerLens 3.9's numbers, and each equals a plain-HF computation of
`β Σ (log π − log π_ref)` over the response tokens (one unpadded row at a time); the tiny causal
LMs of every family the bridge boots agree with plain HF on left-padded batches."""

import pytest
import torch
import transformers
from torch.testing import assert_close

from tests.tl4.tl4_only import skip_unless_tl4

skip_unless_tl4()

from reward_lens_tl.bridge.implicit import BridgeCausalLM, boot_causal_lm  # noqa: E402
from reward_lens_tl.errors import (  # noqa: E402
    BridgeUnsupportedError,
    NonlinearUnembedError,
    UnsupportedArchitectureError,
)
from reward_lens_tl.implicit import (  # noqa: E402
    ImplicitRewardModel,
    implicit_attribution,
    implicit_lens,
    load_causal_lm,
    policy_features,
)
from reward_lens_tl.padding import hf_pad  # noqa: E402
from reward_lens_tl.testing import perturb_, tiny_config, tiny_reward_model  # noqa: E402
from reward_lens_tl.zoo import load_model, load_task, zoo_path  # noqa: E402

BETA = 0.1  # the zoo policy's metadata.json

# Three zoo conversations, `irm.batch([as_encoded(ex) for ex in task.examples(3, seed=3)])`
# (left padded, response words + <|end|> + <eos> marked), and what TransformerLens 3.9 gives on
# them, recorded with `.venv` (TL 3.9.0) by a script that runs, on
# `ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))`:
# `irm.rewards(ids, resp, att)` (and with `fwd_hooks` zeroing `blocks.1.hook_mlp_out`),
# `implicit_lens(..., resolution="sublayer").values.T`, `implicit_lens(..., reference="lens")
# .values.T`, `implicit_attribution(...)` (parts and terms, 6 decimals), `implicit_attribution(...,
# heads=False, lse="expected")`, `irm.pair_rewards(task.contrast_pairs("sycophancy", 4, seed=0),
# batch_size=2)` (chosen − rejected) and `policy_features(irm, task.contrast_pairs("harmful", 2,
# seed=0), "blocks.1.hook_resid_post").values[:, :3]` (5 decimals).
IDS = torch.tensor(
    [
        [1, 4, 31, 25, 36, 80, 74, 77, 22, 6, 5, 43, 50, 81, 72, 15, 101, 106, 108, 34, 6, 2],
        [0, 0, 0, 1, 4, 30, 92, 35, 34, 6, 5, 41, 36, 40, 12, 17, 40, 13, 25, 93, 6, 2],
        [0, 1, 4, 27, 9, 59, 53, 35, 6, 5, 38, 8, 53, 60, 55, 35, 11, 17, 54, 19, 6, 2],
    ]
)
ATT = (torch.arange(22) >= torch.tensor([[0], [3], [1]])).long()
RESP = (torch.arange(22) >= torch.tensor([[11], [11], [10]])).long()
TL39_REWARDS = [0.047330956906080246, -8.205904006958008, -0.8230301141738892]
TL39_ABLATED = [-0.10991876572370529, -3.8521320819854736, -0.4718775153160095]
TL39_LENS_FINAL_REF = [  # sites 0_pre, 0_mid, 1_pre, 1_mid, final
    [-2.279353380203247, -0.7321847081184387, -0.40521079301834106, -0.10991876572370529,
     0.047330956906080246],
    [-2.5516486167907715, -1.5718032121658325, -1.870507836341858, -3.8521320819854736,
     -8.205904006958008],
    [-3.357161045074463, -0.9573230743408203, -0.4222157895565033, -0.4718775153160095,
     -0.8230301141738892],
]  # fmt: skip
TL39_LENS_LENS_REF = [  # sites 0_pre, 1_pre, final
    [-0.40415313839912415, -0.24742774665355682, 0.047330956906080246],
    [-0.3305789828300476, -1.7387855052947998, -8.205904006958008],
    [-0.36884984374046326, -0.31347328424453735, -0.8230301141738892],
]
TL39_PARTS_TERM = {
    "embed": [0.052187, 0.040956, 0.035068],
    "L0H0": [-0.010023, -0.020927, 0.038863],
    "L1H2": [0.183225, -0.266153, 0.185803],
    "mlp0": [0.624987, 0.558127, 1.780626],
    "mlp1": [0.8752, -1.716883, 0.761967],
    "bias": [0.0, 0.0, 0.0],
}
TL39_TERMS_TERM = {
    "head_bias": [0.0, 0.0, 0.0],
    "nonlinear": [-6.85018, -9.833434, -8.198963],
    "reference": [4.699818, 3.792064, 4.138917],
}
TL39_PARTS_EXPECTED = {
    "attn1": [-0.254404, -3.671321, -0.305669],
    "mlp1": [-0.244903, -6.600679, -0.627061],
}
TL39_ENTROPY = [-3.681778, -1.407677, -3.621125]
TL39_PAIR_MARGINS = [0.7354421615600586, 0.5541138648986816, 0.3787820339202881, 0.94515061378479]
TL39_FEATURES = [
    [-2.29839, -7.92992, -24.58463],
    [-3.13513, -7.02904, -23.3583],
    [1.27091, -16.91392, -4.01939],
    [1.41635, -13.1012, 1.52848],
]


@pytest.fixture(scope="module")
def irm():
    return ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))


@pytest.fixture(scope="module")
def hf_pair():
    return load_model("policy"), load_model("reference")


# -- plain HF, one unpadded row at a time ------------------------------------------------------
def _rows(ids, att, resp):
    """Each row without its pads, and the positions of its response tokens."""
    for row in range(ids.shape[0]):
        keep = att[row] != 0
        x, r = ids[row][keep], resp[row][keep]
        yield x, r.nonzero()[:, 0]


def _taken(logits, x, targets):
    """log p of each target token from the logits one position before it."""
    return logits.log_softmax(-1)[targets - 1, x[targets]]


def plain_rewards(policy, reference, ids, att, resp, beta=BETA, policy_hook=None):
    """β Σ_t (log π − log π_ref)(y_t) over the response tokens, from HF logits."""
    out = []
    for x, t in _rows(ids, att, resp):
        handle = policy_hook() if policy_hook else None
        with torch.no_grad():
            pol = policy(input_ids=x[None]).logits[0]
            ref = reference(input_ids=x[None]).logits[0]
        if handle is not None:
            handle.remove()
        out.append(beta * (_taken(pol, x, t) - _taken(ref, x, t)).sum())
    return torch.stack(out)


def test_from_pretrained_boots_bridges_and_the_reward_is_plain_hfs_and_tl39s(irm, hf_pair):
    assert isinstance(irm.policy, BridgeCausalLM) and isinstance(irm.reference, BridgeCausalLM)
    assert irm.beta == BETA
    ours = irm.rewards(IDS, RESP, ATT)
    assert_close(ours, plain_rewards(*hf_pair, IDS, ATT, RESP), atol=1e-4, rtol=0)
    assert_close(ours, torch.tensor(TL39_REWARDS), atol=1e-4, rtol=0)
    tokens = irm.token_rewards(IDS, RESP, ATT)
    assert bool((tokens[RESP == 0] == 0).all())
    assert_close(tokens.sum(-1), ours, atol=1e-6, rtol=0)


def test_a_policy_hook_acts_as_on_tl39_and_in_hf(irm, hf_pair):
    def zero(value, hook):
        return torch.zeros_like(value)

    ablated = irm.rewards(IDS, RESP, ATT, fwd_hooks=[("blocks.1.hook_mlp_out", zero)])
    assert_close(ablated, torch.tensor(TL39_ABLATED), atol=1e-4, rtol=0)
    mlp = hf_pair[0].model.layers[1].mlp

    def hf_zero():
        return mlp.register_forward_hook(lambda module, args, out: torch.zeros_like(out))

    plain = plain_rewards(*hf_pair, IDS, ATT, RESP, policy_hook=hf_zero)
    assert_close(ablated, plain, atol=1e-4, rtol=0)
    assert not irm.policy.bridge.hook_dict["blocks.1.hook_mlp_out"].fwd_hooks  # removed after


def test_pair_rewards_match_tl39(irm):
    pairs = load_task().task.contrast_pairs("sycophancy", 4, seed=0)
    chosen, rejected = irm.pair_rewards(pairs, batch_size=2)
    assert_close(chosen - rejected, torch.tensor(TL39_PAIR_MARGINS), atol=1e-4, rtol=0)


def _hf_lens(model, x, t, layer):
    """Taken-token log-probs read from HF's residual entering `layer` (final norm, lm_head)."""
    with torch.no_grad():
        hidden = model(input_ids=x[None], output_hidden_states=True).hidden_states[layer]
        return _taken(model.lm_head(model.model.norm(hidden))[0], x, t)


def test_lens_matches_tl39_and_plain_hf(irm, hf_pair):
    policy, reference = hf_pair
    lens = implicit_lens(irm, IDS, RESP, ATT, resolution="sublayer")
    assert lens.labels == ("0_pre", "0_mid", "1_pre", "1_mid", "final")
    assert_close(lens.values.T, torch.tensor(TL39_LENS_FINAL_REF), atol=1e-4, rtol=0)
    assert_close(lens.values[-1], plain_rewards(*hf_pair, IDS, ATT, RESP), atol=1e-4, rtol=0)
    assert_close(lens.values, lens.token_values.sum(-1), atol=1e-6, rtol=0)
    both = implicit_lens(irm, IDS, RESP, ATT, reference="lens")
    assert_close(both.values.T, torch.tensor(TL39_LENS_LENS_REF), atol=1e-4, rtol=0)
    for row, (x, t) in enumerate(_rows(IDS, ATT, RESP)):  # plain HF, sites 0_pre and 1_pre
        with torch.no_grad():
            ref_final = _taken(reference(input_ids=x[None]).logits[0], x, t)
        for layer, site in ((0, 0), (1, 2)):
            pol = _hf_lens(policy, x, t, layer)
            expected = BETA * (pol - ref_final).sum()
            assert_close(lens.values[site, row], expected, atol=1e-4, rtol=0)
            expected = BETA * (pol - _hf_lens(reference, x, t, layer)).sum()
            assert_close(both.values[layer, row], expected, atol=1e-4, rtol=0)


def _hf_parts(policy, x, t):
    """β Σ_t c · (g ⊙ W_U[y_t]) / scale, for the embedding and each MLP, from HF's activations."""
    acts, handles = {}, []

    def keep(name):
        return lambda module, args, out: acts.__setitem__(name, out[0])

    handles.append(policy.model.embed_tokens.register_forward_hook(keep("embed")))
    for layer, block in enumerate(policy.model.layers):
        handles.append(block.mlp.register_forward_hook(keep(f"mlp{layer}")))
    handles.append(
        policy.model.norm.register_forward_pre_hook(
            lambda module, args: acts.__setitem__("final", args[0][0])
        )
    )
    with torch.no_grad():
        logits = policy(input_ids=x[None]).logits[0]
    for handle in handles:
        handle.remove()
    final = acts.pop("final")
    eps = policy.config.rms_norm_eps
    scale = (final.pow(2).mean(-1) + eps).sqrt()[t - 1]  # the final norm's frozen scale
    direction = policy.lm_head.weight[x[t]] * policy.model.norm.weight  # [target, d]
    parts = {
        name: BETA * ((act[t - 1] * direction).sum(-1) / scale).sum() for name, act in acts.items()
    }
    probs = logits.softmax(-1)[t - 1]
    parts["entropy"] = BETA * (probs * probs.log()).sum()  # −β Σ H(p)
    return parts


def test_attribution_matches_tl39_and_plain_hf(irm, hf_pair):
    attr = implicit_attribution(irm, IDS, RESP, ATT)
    for label, expected in TL39_PARTS_TERM.items():
        got = attr.values[attr.labels.index(label)]
        assert_close(got, torch.tensor(expected), atol=1e-4, rtol=0, msg=label)
    for name, value in attr.terms().items():
        assert_close(value, torch.tensor(TL39_TERMS_TERM[name]), atol=1e-4, rtol=0, msg=name)
    # the parts and terms add up to the plain-HF implicit reward
    assert_close(attr.total(), plain_rewards(*hf_pair, IDS, ATT, RESP), atol=1e-4, rtol=0)
    assert attr.linear_error() < 1e-4 and attr.completeness_error() < 1e-4
    expected_lse = implicit_attribution(irm, IDS, RESP, ATT, heads=False, lse="expected")
    for label, expected in TL39_PARTS_EXPECTED.items():
        got = expected_lse.values[expected_lse.labels.index(label)]
        assert_close(got, torch.tensor(expected), atol=1e-4, rtol=0, msg=label)
    assert_close(expected_lse.nonlinear, torch.tensor(TL39_ENTROPY), atol=1e-4, rtol=0)
    assert expected_lse.completeness_error() < 1e-4
    policy, reference = hf_pair
    for row, (x, t) in enumerate(_rows(IDS, ATT, RESP)):  # each part from HF's activations
        parts = _hf_parts(policy, x, t)
        for label in ("embed", "mlp0", "mlp1"):
            got = attr.values[attr.labels.index(label), row]
            assert_close(got, parts[label], atol=1e-4, rtol=0, msg=label)
        assert_close(expected_lse.nonlinear[row], parts["entropy"], atol=1e-4, rtol=0)
        with torch.no_grad():
            ref = _taken(reference(input_ids=x[None]).logits[0], x, t)
        assert_close(attr.reference[row], -BETA * ref.sum(), atol=1e-4, rtol=0)


def test_policy_features_match_tl39(irm):
    pairs = load_task().task.contrast_pairs("harmful", 2, seed=0)
    features = policy_features(irm, pairs, "blocks.1.hook_resid_post")
    assert_close(features.values[:, :3], torch.tensor(TL39_FEATURES), atol=1e-3, rtol=0)


# `implicit_feature_fit(irm, scalar, pairs, "blocks.1.hook_resid_post", alpha=10.0)` with `scalar`
# the zoo's scalar reward model and `pairs = [task.response_pair(random.Random(i)) for i in
# range(20)]` (the function's own example), recorded with `.venv` (TL 3.9.0, HookedRewardModel):
# the held-out R² of the implicit and of the explicit fit.
TL39_FIT_R2 = [0.8823472908253063, -0.012804016477617752]


def test_feature_fit_against_an_explicit_bridge_model_matches_tl39(irm):
    import random

    from reward_lens_tl.bridge import BridgeRewardModel
    from reward_lens_tl.implicit import implicit_feature_fit

    task = load_task().task
    pairs = [task.response_pair(random.Random(i)) for i in range(20)]
    scalar = BridgeRewardModel.boot(zoo_path("scalar"))
    result = implicit_feature_fit(irm, scalar, pairs, "blocks.1.hook_resid_post", alpha=10.0)
    r2 = [result.implicit.r2, result.explicit.r2]
    assert_close(torch.tensor(r2), torch.tensor(TL39_FIT_R2), atol=1e-4, rtol=0)


# -- every family, left-padded batches ----------------------------------------------------------
CAUSAL = {
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "gemma2": "Gemma2ForCausalLM",
    "gpt2": "GPT2LMHeadModel",
}


def tiny_causal(family, seed):
    config = tiny_config(family)
    config.architectures = [CAUSAL[family]]
    torch.manual_seed(seed)
    return perturb_(getattr(transformers, CAUSAL[family])(config), seed=seed).eval()


def left_padded():
    """Two rows (8 and 5 tokens) padded on the left; the last 4 and 3 tokens are the response."""
    ids, att = hf_pad([[1, 7, 8, 9, 10, 11, 12, 13], [1, 14, 15, 16, 17]], 0)
    resp = (torch.arange(8) >= torch.tensor([[4], [5]])).long()
    return ids, att, resp


@pytest.mark.parametrize("family", list(CAUSAL))
def test_every_family_matches_plain_hf_on_left_padded_rows(family):
    """Absolute positions (GPT-2) count from each row's first token, as HF unpadded; Gemma-2's
    soft-capped logits: the reward and the lens agree, exact attribution is refused."""
    hf_policy, hf_reference = tiny_causal(family, 0), tiny_causal(family, 1)
    before = {k: v.clone() for k, v in hf_policy.state_dict().items()}
    model = ImplicitRewardModel(boot_causal_lm(hf_policy), boot_causal_lm(hf_reference), BETA)
    assert all(torch.equal(v, hf_policy.state_dict()[k]) for k, v in before.items())  # untouched
    ids, att, resp = left_padded()
    plain = plain_rewards(hf_policy, hf_reference, ids, att, resp)
    assert_close(model.rewards(ids, resp, att), plain, atol=1e-5, rtol=0)
    lens = implicit_lens(model, ids, resp, att)
    assert_close(lens.values[-1], plain, atol=1e-5, rtol=0)
    if family == "gemma2":
        with pytest.raises(NonlinearUnembedError, match="soft-caps"):
            implicit_attribution(model, ids, resp, att)
        return
    attr = implicit_attribution(model, ids, resp, att, lse="expected")
    assert_close(attr.total(), plain, atol=1e-4, rtol=0)


def test_refusals():
    with pytest.raises(BridgeUnsupportedError, match="boot_causal_lm"):
        load_causal_lm(zoo_path("policy"))
    with pytest.raises(BridgeUnsupportedError, match="n_ctx"):
        boot_causal_lm(zoo_path("policy"), n_ctx=8)
    with pytest.raises(UnsupportedArchitectureError, match="boot_reward_bridge"):
        boot_causal_lm(tiny_reward_model("llama"))


@torch.no_grad()
def test_pads_inside_a_row_of_a_sliding_window_policy_read_as_the_row_alone():
    """The window counts real tokens (`bridge.windows`), as on TL 3.9: plain HF on the row."""
    hf = tiny_causal("mistral", 0)  # sliding window 5
    mistral = boot_causal_lm(hf)
    ids = torch.tensor([[1, 7, 0, 0, 8, 9, 10, 11]])
    real = ids[ids != 0][None]
    logits = mistral(ids, attention_mask=(ids != 0).long())[ids != 0]
    assert_close(logits, hf(input_ids=real).logits[0], atol=1e-4, rtol=0)
