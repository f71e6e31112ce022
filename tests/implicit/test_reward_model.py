"""`ImplicitRewardModel` on the zoo's DPO policy: parity with plain PyTorch on HF logits and with
what DPO training summed, token rewards, β, and typed errors for bad input."""

import types

import pytest
import torch

from reward_lens_tl.errors import InvalidArgumentError, RewardLensError
from reward_lens_tl.implicit import (
    EmptyResponseMaskError,
    ImplicitRewardModel,
    VocabularyMismatchError,
    load_causal_lm,
)
from reward_lens_tl.inputs import EncodedConversation, as_encoded
from reward_lens_tl.zoo import load_task
from reward_lens_tl.zoo.dpo import sequence_logprobs
from tests.implicit.conftest import plain_implicit, tiny_causal


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
