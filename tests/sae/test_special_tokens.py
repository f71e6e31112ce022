"""sae_lens's ``exclude_special_tokens`` on a reward model.

sae_lens bypasses the SAE at special tokens (BOS, EOS, pad, ...) or at a list of ids. A reward
model reads its reward at the EOS that closes the chat template (the zoo model: ``<eos>``), so
``exclude_special_tokens=True`` makes the spliced reward ignore the SAE exactly where it is read,
while the cache still holds the SAE's latents there: an attribution from the cached latents no
longer adds up to the reward (measured below: up to 0.88 of reward on eight zoo conversations).
:func:`~reward_lens_tl.sae.splice.check_special_token_exclusion` refuses that; excluding only the
BOS stays allowed and is exact. ``HookedRewardModel.add_sae`` calls the check (so ``saes()``,
``run_with_saes`` and ``run_with_cache_with_saes``, which go through ``add_sae``, do too).
"""

from __future__ import annotations

import pytest
import torch
from sae_lens import HookedSAETransformer

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.errors import InvalidArgumentError, RewardLensError
from reward_lens_tl.inputs import pad_batch
from reward_lens_tl.sae.activations import collect_activations
from reward_lens_tl.sae.splice import check_special_token_exclusion, reading_token_ids
from reward_lens_tl.sae.testing import random_topk_sae
from reward_lens_tl.sae.training import train_topk_sae
from reward_lens_tl.testing import tiny_reward_model, tiny_tokenizer

FINAL = "blocks.2.hook_resid_post"  # the zoo model has three layers
MID = "blocks.0.hook_resid_post"
SAE_HOOKS = ("hook_sae_input", "hook_sae_acts_post", "hook_sae_error")


@pytest.fixture(scope="module")
def zoo():
    """The shipped zoo model (it is package data: missing means a broken install, a failure)."""
    from reward_lens_tl.zoo import load_task, zoo_path

    return HookedRewardModel.from_pretrained(zoo_path("scalar")), load_task().task


@pytest.fixture(scope="module")
def model(zoo):
    return zoo[0]


@pytest.fixture(scope="module")
def batch(zoo):
    """Eight zoo conversations, left padded (BOS at different positions in each row)."""
    model, task = zoo
    return pad_batch([e.input_ids for e in task.examples(8, seed=0)], model.pad_token_id)


def _train(zoo, hook_name):
    model, task = zoo
    ids, mask = pad_batch([e.input_ids for e in task.examples(128, seed=1)], model.pad_token_id)
    acts = collect_activations(model, hook_name, [(ids, mask)])
    return train_topk_sae(
        acts, hook_name, d_sae=128, k=8, steps=200, batch_size=128, seed=0, model=model, threads=1
    ).sae


@pytest.fixture(scope="module")
def final_sae(zoo):
    return _train(zoo, FINAL)


@pytest.fixture(scope="module")
def mid_sae(zoo):
    return _train(zoo, MID)


@pytest.fixture(autouse=True)
def _no_saes_left(model):
    yield
    model.reset_saes()


def _spliced_run(model, sae, ids, mask):
    """The reward with ``sae`` attached as it is, and the SAE's cache entries."""
    name = sae.cfg.metadata.hook_name
    with torch.no_grad():
        return model.run_with_cache(
            ids,
            attention_mask=mask,
            return_type="reward",
            names_filter=[f"{name}.{h}" for h in SAE_HOOKS],
        )


def _reward_from_final_residual(model, resid_at_reading):
    """The head applied by hand to the final residual at the reading position."""
    with torch.no_grad():
        return model.unembed(model.ln_final(resid_at_reading[:, None]))[:, 0, 0]


def _at_reading(model, cache_entry, ids, mask):
    pos = model.pool_positions(ids, mask)
    return cache_entry[torch.arange(len(pos)), pos]


# ---- where the zoo model reads its reward -----------------------------------------------------
def test_the_zoo_model_reads_its_reward_at_eos(model, batch):
    ids, mask = batch
    eos = model.tokenizer.eos_token_id
    assert reading_token_ids(model) == {eos}
    assert model.encode("a", "b").ids[-1] == eos
    read = ids[torch.arange(len(ids)), model.pool_positions(ids, mask)]
    assert read.tolist() == [eos] * len(ids)


# ---- the check itself --------------------------------------------------------------------------
def test_true_is_refused_on_the_zoo_model(model, final_sae, mid_sae):
    for sae in (final_sae, mid_sae):
        with pytest.raises(InvalidArgumentError) as info:
            check_special_token_exclusion(model, sae, True)
        assert isinstance(info.value, RewardLensError)
        msg = str(info.value)
        assert "'<eos>' (id 2)" in msg and "reads its reward" in msg
        assert "exclude_special_tokens=False" in msg
        assert "exclude_special_tokens=[0, 1]" in msg  # pad and BOS: never read
        assert sae.cfg.metadata.hook_name in msg


@pytest.mark.parametrize(
    "ids", [[2], (1, 2), torch.tensor([1, 2]), {2}], ids=["list", "tuple", "tensor", "set"]
)
def test_a_reading_id_in_a_list_is_refused(model, final_sae, ids):
    with pytest.raises(InvalidArgumentError, match=r"'<eos>' \(id 2\).*reads its reward") as info:
        check_special_token_exclusion(model, final_sae, ids)
    assert "exclude_special_tokens=[1]" in str(info.value)  # the BOS is offered instead


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ([1], [1]),
        ((1,), [1]),
        (torch.tensor([1]), [1]),  # sae_lens would treat a tensor as True: made a list
        ([0, 1, 1], [0, 1]),
        (False, False),
        (None, False),
        ([], False),
    ],
)
def test_bos_only_is_allowed_and_normalised(model, final_sae, value, expected):
    assert check_special_token_exclusion(model, final_sae, value) == expected


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (1, "list of token ids"),
        ("<bos>", "list of token ids"),
        ([1.0], "integer token ids"),
        ([True], "integer token ids"),
        (torch.tensor([1.0]), "tensor"),
        ([500], "outside the vocabulary"),
        ([-1], "outside the vocabulary"),
    ],
)
def test_malformed_exclusions_are_refused(model, final_sae, value, match):
    with pytest.raises(InvalidArgumentError, match=match):
        check_special_token_exclusion(model, final_sae, value)


def test_true_without_a_tokenizer_is_refused():
    """sae_lens would log a warning and exclude nothing."""
    model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    sae = random_topk_sae(model, "blocks.1.hook_resid_post")
    with pytest.raises(InvalidArgumentError, match="tokenizer"):
        check_special_token_exclusion(model, sae, True)
    assert check_special_token_exclusion(model, sae, [1]) == [1]
    with pytest.raises(InvalidArgumentError, match=r"id 2.*reads its reward"):
        check_special_token_exclusion(model, sae, [2])  # the config's EOS


def test_true_is_allowed_where_the_reward_is_not_read_at_a_special_token():
    """pad == EOS: HF's rule skips the trailing EOS and reads the last word, which sae_lens does
    not exclude; the spliced reward is then the reward of the reconstruction there."""
    hf = tiny_reward_model("llama", pad_token_id=2, eos_token_id=2)
    model = HookedRewardModel.from_pretrained(hf, tiny_tokenizer())
    name = "blocks.1.hook_resid_post"
    sae = random_topk_sae(model, name)
    assert 2 not in reading_token_ids(model)
    assert check_special_token_exclusion(model, sae, True) is True
    ids = torch.tensor([list(model.encode("w10 w11", "w12 w13 w14").ids)])
    assert ids[0, -1] == 2 and model.pool_positions(ids).item() == ids.shape[1] - 2
    HookedSAETransformer.add_sae(model, sae, False, True)
    try:
        reward, cache = _spliced_run(model, sae, ids, None)
    finally:
        model.reset_saes()
    acts = _at_reading(model, cache[f"{name}.hook_sae_acts_post"], ids, None)
    hand = _reward_from_final_residual(model, sae.decode(acts))
    assert (reward - hand).abs().max() < 1e-5


# ---- why: the refused exclusion really changes the numbers ------------------------------------
def test_excluding_the_reading_token_breaks_the_hand_attribution(model, final_sae, batch):
    """What the refusal prevents, with sae_lens's own add_sae (no check): at the final residual
    the spliced reward stays the original one while the latents cached at the reading token
    give another reward."""
    ids, mask = batch
    with torch.no_grad():
        original = model.rewards(ids, mask)
    HookedSAETransformer.add_sae(model, final_sae, False, True)
    try:
        reward, cache = _spliced_run(model, final_sae, ids, mask)
    finally:
        model.reset_saes()
    acts = _at_reading(model, cache[f"{FINAL}.hook_sae_acts_post"], ids, mask)
    hand = _reward_from_final_residual(model, final_sae.decode(acts))
    assert (reward - original).abs().max() < 1e-5  # the SAE was bypassed where it is read
    assert (reward - hand).abs().max() > 0.1  # measured: 0.88 (300 steps), > 0.3 here


# ---- the allowed case is exact -----------------------------------------------------------------
@pytest.mark.parametrize("use_error_term", [False, True], ids=["reconstruction", "error_term"])
def test_bos_only_spliced_reward_equals_the_hand_computation(
    model, final_sae, batch, use_error_term
):
    """BOS excluded, SAE on the final residual: the spliced reward is the head applied to the
    reconstruction from the cached latents at the reading token (plus the cached error term)."""
    ids, mask = batch
    bos = model.bos_token_id
    assert bool((ids == bos).any())
    exclude = check_special_token_exclusion(model, final_sae, [bos])
    HookedSAETransformer.add_sae(model, final_sae, use_error_term, exclude)
    try:
        reward, cache = _spliced_run(model, final_sae, ids, mask)
        with torch.no_grad():
            plain = model.rewards(ids, mask)
    finally:
        model.reset_saes()
    acts = _at_reading(model, cache[f"{FINAL}.hook_sae_acts_post"], ids, mask)
    resid = final_sae.decode(acts)
    if use_error_term:
        resid = resid + _at_reading(model, cache[f"{FINAL}.hook_sae_error"], ids, mask)
    hand = _reward_from_final_residual(model, resid)
    assert (reward - hand).abs().max() < 1e-5
    assert (plain - reward).abs().max() < 1e-5  # model.rewards agrees with run_with_cache
    if use_error_term:
        with torch.no_grad():
            assert (reward - model.rewards(ids, mask)).abs().max() < 1e-5


def test_bos_only_at_a_mid_layer_equals_the_hand_computation(model, mid_sae, batch):
    """BOS excluded at ``blocks.0``: the spliced reward equals the model run with that residual
    replaced by the reconstruction from the cached latents everywhere but at BOS."""
    ids, mask = batch
    bos = model.bos_token_id
    HookedSAETransformer.add_sae(model, mid_sae, False, [bos])
    try:
        reward, cache = _spliced_run(model, mid_sae, ids, mask)
    finally:
        model.reset_saes()
    x = cache[f"{MID}.hook_sae_input"]
    recon = mid_sae.decode(cache[f"{MID}.hook_sae_acts_post"])
    patched = torch.where((ids == bos)[..., None], x, recon)

    def replace(act, hook):
        return patched

    with torch.no_grad():
        hand = model.run_with_hooks(
            ids, attention_mask=mask, return_type="reward", fwd_hooks=[(MID, replace)]
        )
        everywhere = model.run_with_saes(
            ids, attention_mask=mask, return_type="reward", saes=[mid_sae], use_error_term=False
        )
    assert (reward - hand).abs().max() < 1e-5
    assert (reward - everywhere).abs().max() > 1e-4  # the BOS exclusion did change something


# ---- through HookedRewardModel.add_sae ---------------------------------------------------------
def test_add_sae_refuses_true_on_the_zoo_model(model, final_sae):
    with pytest.raises(InvalidArgumentError, match="reads its reward"):
        model.add_sae(final_sae, exclude_special_tokens=True)
    assert model.acts_to_saes == {}
    with pytest.raises(InvalidArgumentError, match="reads its reward"):
        model.add_sae(final_sae, use_error_term=True, exclude_special_tokens=[2])
    assert model.acts_to_saes == {}


def test_saes_context_and_run_with_saes_refuse_true(model, mid_sae, batch):
    ids, mask = batch
    with pytest.raises(InvalidArgumentError, match="reads its reward"):
        with model.saes(saes=[mid_sae], exclude_special_tokens=True):
            pass
    with pytest.raises(InvalidArgumentError, match="reads its reward"):
        model.run_with_cache_with_saes(
            ids, attention_mask=mask, saes=[mid_sae], exclude_special_tokens=torch.tensor([2])
        )
    assert model.acts_to_saes == {}


def test_add_sae_with_bos_only_is_exact(model, final_sae, batch):
    ids, mask = batch
    model.add_sae(final_sae, use_error_term=False, exclude_special_tokens=torch.tensor([1]))
    # handed to sae_lens as a list (a tensor would mean "all special tokens" to sae_lens)
    assert model._acts_to_saes[FINAL].exclude_special_tokens == [1]
    reward, cache = _spliced_run(model, final_sae, ids, mask)
    acts = _at_reading(model, cache[f"{FINAL}.hook_sae_acts_post"], ids, mask)
    hand = _reward_from_final_residual(model, final_sae.decode(acts))
    assert (reward - hand).abs().max() < 1e-5


def test_add_sae_keeps_the_default_and_checks_hook_names(model, final_sae, batch):
    ids, mask = batch
    model.add_sae(final_sae)
    assert model._acts_to_saes[FINAL].exclude_special_tokens is False
    model.reset_saes()
    sae = random_topk_sae(model, FINAL)
    sae.cfg.metadata.hook_name = "blocks.2.hook_resid_pots"
    with pytest.raises(RewardLensError):
        model.add_sae(sae, exclude_special_tokens=[1])


def test_tiny_models_reading_ids():
    """The EOS of the config for a model without a tokenizer; the template's reading token and
    the gate's prompt-end marker for an ArmoRM-style model."""
    plain = HookedRewardModel.from_pretrained(tiny_reward_model("gpt2"))
    assert reading_token_ids(plain) == {2}
    armorm = HookedRewardModel.from_pretrained(tiny_reward_model("armorm"), tiny_tokenizer())
    assert reading_token_ids(armorm) == {2, armorm.gating_token_pattern[0]}
