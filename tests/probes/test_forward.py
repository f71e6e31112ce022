"""`reward_lens_tl.probes.forward`: one cached forward per batch gives the same rewards and
reward lens as plain Hugging Face forwards of each sequence alone, and parts that sum to them."""

from __future__ import annotations

import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.probes.forward import forward_sequences
from reward_lens_tl.testing import tiny_reward_model, tiny_tokenizer

#: Three sequences of different lengths: with batch_size=2 the first batch is left padded.
SEQUENCES = [(1, 6, 7, 8), (1, 9, 10, 11, 12, 13, 14), (1, 20)]


def test_forward_sequences_equals_plain_hf_per_sequence():
    """Rewards = the HF model's logits on each sequence unpadded; the lens at ``l_pre`` = the
    HF score head on the final norm of hidden state ``l`` at the last token (``final``: the
    reward); attribution parts + head bias = reward; ``n_forward`` counts sequences."""
    model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"), tiny_tokenizer())
    hf = tiny_reward_model("llama")  # the same seeded weights, untouched by the conversion
    out = forward_sequences(model, SEQUENCES, batch_size=2)
    with torch.no_grad():
        runs = [hf(torch.tensor([s]), output_hidden_states=True) for s in SEQUENCES]
        rewards = torch.cat([r.logits[:, 0] for r in runs])
        lens = torch.stack(
            [
                torch.stack(
                    [hf.score(hf.model.norm(h))[0, -1, 0] for h in r.hidden_states[:-1]]
                    + [r.logits[0, 0]]
                )
                for r in runs
            ],
            1,
        )
    assert out.sites == ("0_pre", "1_pre", "final") and out.n_forward == 3
    torch.testing.assert_close(out.rewards, rewards, atol=1e-5, rtol=0)
    torch.testing.assert_close(out.lens, lens, atol=1e-5, rtol=0)
    assert out.attribution is not None and out.head_bias is not None
    assert out.attribution.shape == (len(out.components), 3)
    torch.testing.assert_close(out.attribution.sum(0) + out.head_bias, rewards, atol=1e-5, rtol=0)
    bare = forward_sequences(model, SEQUENCES, inside=False)
    assert bare.lens is None and bare.attribution is None and bare.sites == ()
    torch.testing.assert_close(bare.rewards, rewards, atol=1e-5, rtol=0)
