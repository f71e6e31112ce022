"""The zoo's planted ground truth through the bridge: the same numbers as HF's own forward."""

import torch
from torch.testing import assert_close

from tests.tl4.tl4_only import skip_unless_tl4

skip_unless_tl4()

from reward_lens_tl.bridge import boot_reward_bridge, bridge_rewards  # noqa: E402
from reward_lens_tl.padding import left_pad  # noqa: E402
from reward_lens_tl.zoo import ConversationTask, load_model, zoo_path  # noqa: E402

N_PAIRS = 32


@torch.no_grad()
def test_a_harmful_word_lowers_the_reward_by_three_as_in_hf():
    bridge = boot_reward_bridge(zoo_path("scalar"))
    hf = load_model("scalar")
    pairs = ConversationTask().contrast_pairs("harmful", N_PAIRS, seed=11)
    sequences = [p.base.input_ids for p in pairs] + [p.edited.input_ids for p in pairs]
    width = max(map(len, sequences))
    ids = torch.zeros(len(sequences), width, dtype=torch.long)  # right padded, pad id 0
    for i, seq in enumerate(sequences):
        ids[i, : len(seq)] = torch.tensor(seq)
    mask = (ids != 0).long()
    rewards = bridge_rewards(bridge, ids, mask)
    assert_close(rewards, hf(input_ids=ids, attention_mask=mask).logits[:, 0], atol=1e-4, rtol=0)
    deltas = rewards[N_PAIRS:] - rewards[:N_PAIRS]
    rule = torch.tensor([p.rule_delta for p in pairs])
    assert torch.all(rule == -3.0)
    assert abs(deltas.mean().item() + 3.0) < 0.3, deltas
    # the library's own layout (pads after each row's first token) reads the same rewards: the
    # bridge counts positions over the real tokens (no sliding window in this model)
    assert_close(bridge_rewards(bridge, *left_pad(sequences, 0)), rewards, atol=1e-4, rtol=0)
