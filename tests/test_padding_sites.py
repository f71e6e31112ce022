"""Library code that maps token positions into its padded batches (pads after each row's first
token; a policy's batches with every pad first): each row's positions are mapped through its
padding, so a batch reads what each sequence alone reads."""

import random
import warnings

import pytest
import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.implicit import EmptyResponseMaskError, policy_features
from reward_lens_tl.implicit.batches import response_masks
from reward_lens_tl.inputs import EncodedConversation
from reward_lens_tl.padding import ReadingPositionWarning
from reward_lens_tl.patching import as_run
from reward_lens_tl.sae import collect_activations
from reward_lens_tl.sae.concepts import site_activations
from reward_lens_tl.testing import random_batch, tiny_reward_model
from reward_lens_tl.token_view import token_attribution


@pytest.fixture(scope="module")
def llama():
    return HookedRewardModel.from_pretrained(tiny_reward_model("llama"))


def test_random_batch_pads_on_the_left_unless_asked():
    left, left_mask = random_batch(2, [5, 3], seed=1)
    right, right_mask = random_batch(2, [5, 3], seed=1, padding_side="right")
    assert left_mask.tolist() == [[1] * 5, [1, 0, 0, 1, 1]]
    assert right_mask.tolist() == [[1] * 5, [1, 1, 1, 0, 0]]
    assert left[1, [0, 3, 4]].tolist() == right[1, :3].tolist()  # the same tokens either side


def test_site_activations_read_each_sequence_at_its_own_positions(llama):
    ids, mask = random_batch(2, [9, 5], seed=2, low=6)
    seqs = [row[m.bool()].tolist() for row, m in zip(ids, mask, strict=True)]
    sites = ["blocks.0.hook_resid_post", "blocks.1.hook_resid_post"]
    where = [(2, 8), (1, -1)]  # positions in each sequence (-1: its last token)
    batched = site_activations(llama, seqs, where, sites)
    alone = [site_activations(llama, [s], [p], sites) for s, p in zip(seqs, where, strict=True)]
    alone = torch.cat(alone, 1)
    torch.testing.assert_close(batched, alone, atol=1e-5, rtol=0)


def test_token_view_of_a_left_padded_row_is_the_sequence_alone(llama):
    ids, _ = random_batch(2, [9, 5], seed=3, low=6)
    for mode in ("attribution", "position"):
        row = ids[1][ids[1] != llama.pad_token_id]
        padded, alone = (token_attribution(llama, x, mode=mode) for x in (ids[1], row))
        assert padded.tokens == alone.tokens and padded.reward_position == 4
        torch.testing.assert_close(padded.values, alone.values, atol=1e-5, rtol=0)


def test_activations_of_id_tensors_padded_either_side(llama):
    left, left_mask = random_batch(3, [9, 5, 7], seed=4, low=6)
    right, _ = random_batch(3, [9, 5, 7], seed=4, low=6, padding_side="right")
    hook = "blocks.1.hook_resid_post"
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReadingPositionWarning)  # the library reads by the mask
        from_left = collect_activations(llama, hook, left)
        from_right = collect_activations(llama, hook, right)
    assert from_left.shape == (int(left_mask.sum()), llama.cfg.d_model)
    torch.testing.assert_close(from_left, from_right, atol=1e-5, rtol=0)


def test_patching_runs_drop_left_padding(llama):
    ids, mask = random_batch(2, [9, 6], seed=5, low=6)
    run = as_run(llama, ids[1:2])
    assert run.ids.tolist() == ids[1][mask[1].bool()].tolist() and run.pool == 5
    plain, plain_mask = random_batch(2, [9, 6], seed=5, low=6, padding_side="leading")
    assert as_run(llama, plain[1]).ids.tolist() == run.ids.tolist()  # every pad first


def test_response_masks_follow_the_left_padding():
    short = EncodedConversation(ids=(1, 4, 9, 2), response_start=2)
    long = EncodedConversation(ids=(1, 4, 9, 5, 7, 8, 2), response_start=4)
    assert response_masks([short, long]).tolist() == [
        [0, 0, 0, 0, 0, 1, 1],
        [0, 0, 0, 0, 1, 1, 1],
    ]
    assert response_masks([short, long], padding_side="right")[0].tolist() == [0, 0, 1, 1, 0, 0, 0]


def test_implicit_batches_mark_responses_after_each_rows_padding(zoo_implicit, zoo_task):
    task = zoo_task
    encs = [
        zoo_implicit.encode("how bake bread", "soup"),
        zoo_implicit.encode("how bake bread", "soup oven rain"),
    ]
    ids, attention, resp = zoo_implicit.batch(encs)
    pads = int((attention[0] == 0).sum())
    assert pads == len(encs[1]) - len(encs[0]) > 0
    assert resp[0, pads:].tolist() == response_masks(encs[:1])[0].tolist()
    batched = zoo_implicit.rewards(ids, resp, attention)
    for row, enc in enumerate(encs):
        one_ids, one_attention, one_resp = zoo_implicit.batch([enc])
        alone = zoo_implicit.rewards(one_ids, one_resp, one_attention)[0]
        torch.testing.assert_close(batched[row], alone, atol=1e-5, rtol=0)
    resp = resp.clone()
    resp[0, pads] = 1  # the shorter row's first real token: nothing predicts it
    with pytest.raises(EmptyResponseMaskError, match="first token"):
        zoo_implicit.rewards(ids, resp, attention)
    pairs = [task.contrast_pair(random.Random(i), "length", 8) for i in range(4)]
    pairs = [(p.edited, p.base) for p in pairs]  # different lengths in one batch
    hook = "blocks.1.hook_resid_post"
    for pooling in ("last", "sum"):
        together = policy_features(zoo_implicit, pairs, hook, pooling=pooling, batch_size=4).values
        one_by_one = policy_features(
            zoo_implicit, pairs, hook, pooling=pooling, batch_size=1
        ).values
        torch.testing.assert_close(together, one_by_one, atol=1e-4, rtol=0)


def test_latent_ablation_effects_of_a_padded_subset_equal_each_row_alone(llama):
    """`zoo_features._ablation_effect` trims the columns only padding fills; every row keeps its
    first token (the padding follows it), so the effect equals the rows run alone."""
    from reward_lens_tl.sae.attribution import latent_ablation
    from reward_lens_tl.sae.testing import random_topk_sae
    from reward_lens_tl.sae.zoo_features import _ablation_effect

    sae = random_topk_sae(llama, f"blocks.{llama.cfg.n_layers - 1}.hook_resid_post", k=32)
    ids, mask = random_batch(3, [12, 6, 8], seed=7, low=6)  # the active rows are the short two
    activity = torch.tensor([0.0, 1.0, 1.0])
    latent = 0
    got = _ablation_effect(llama, sae, ids, mask, activity, latent, n_effect=5)
    alone = [
        float(latent_ablation(llama, sae, ids[i][mask[i].bool()][None], None, [latent]).values[0])
        for i in (1, 2)
    ]
    assert got == pytest.approx(sum(alone) / 2, abs=1e-5)
