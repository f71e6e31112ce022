"""Families outside the tested table: any classifier whose causal LM TL 4 has an adapter for.

The bridge backend boots them through the same stand-in (`families.generic_stand_in`), checks
the bridge against HF on random tokens at boot, and refuses a family it cannot reproduce.
"""

import pytest
import torch
import transformers
from torch.testing import assert_close

from tests.tl4.tl4_only import skip_unless_tl4

skip_unless_tl4()

from reward_lens_tl.attribution import direct_attribution  # noqa: E402
from reward_lens_tl.bridge import BridgeRewardModel, boot  # noqa: E402
from reward_lens_tl.errors import UnsupportedArchitectureError, UsageError  # noqa: E402
from reward_lens_tl.lens import reward_lens  # noqa: E402

COMMON = dict(
    vocab_size=96,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_labels=1,
    pad_token_id=0,
)
CONFIGS = {
    "Phi3": lambda: transformers.Phi3Config(num_key_value_heads=2, **COMMON),
    "Gemma": lambda: transformers.GemmaConfig(num_key_value_heads=2, head_dim=16, **COMMON),
    "Mixtral": lambda: transformers.MixtralConfig(
        num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, **COMMON
    ),
    "Olmo2": lambda: transformers.Olmo2Config(**COMMON),
}


def classifier(family: str, config=None) -> torch.nn.Module:
    torch.manual_seed(0)
    config = CONFIGS[family]() if config is None else config
    model = getattr(transformers, f"{family}ForSequenceClassification")(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.02 * torch.randn_like(p))
    return model


@pytest.mark.parametrize("family", list(CONFIGS))
@torch.no_grad()
def test_an_untested_family_boots_with_hf_rewards_lens_and_attribution(family):
    hf = classifier(family)
    model = BridgeRewardModel.boot(hf)
    ids = torch.randint(3, 96, (2, 9), generator=torch.Generator().manual_seed(4))
    ids[1, 6:] = 0  # right padded
    mask = (ids != 0).long()
    alone = torch.cat(
        [hf(input_ids=ids[i : i + 1, : int(mask[i].sum())]).logits[:, 0] for i in (0, 1)]
    )
    rewards = model.rewards(ids, mask)
    assert_close(rewards, alone, atol=1e-4, rtol=0)
    assert_close(
        reward_lens(model, ids, attention_mask=mask).values[-1], rewards, atol=1e-4, rtol=0
    )
    attr = direct_attribution(model, ids, attention_mask=mask)
    assert_close(attr.values.sum(0) + attr.head_bias, rewards, atol=1e-4, rtol=0)
    if family == "Mixtral":  # experts, not one dense MLP: no per-neuron parts
        with pytest.raises(UsageError, match="dense MLP"):
            direct_attribution(model, ids, attention_mask=mask, neurons=True)


def test_a_family_the_bridge_cannot_reproduce_is_refused(monkeypatch):
    hf = classifier("Phi3")
    # as if HF's own forward had said something else: the boot-time check catches it
    monkeypatch.setattr(boot, "_hf_rewards", lambda model, ids: torch.full((2, 1), 7.0))
    with pytest.raises(UnsupportedArchitectureError, match="differ from HF's"):
        BridgeRewardModel.boot(hf)


def test_a_family_whose_head_processing_fails_is_refused_with_the_reason():
    config = transformers.GPTNeoXConfig(**COMMON)
    with pytest.raises(UnsupportedArchitectureError, match="not in the tested families"):
        BridgeRewardModel.boot(classifier("GPTNeoX", config))


@torch.no_grad()
def test_a_family_without_a_pad_id_boots_its_check_runs_row_by_row():
    config = transformers.Phi3Config(num_key_value_heads=2, **dict(COMMON, pad_token_id=None))
    hf = classifier("Phi3", config)
    model = BridgeRewardModel.boot(hf)
    ids = torch.randint(3, 96, (1, 9), generator=torch.Generator().manual_seed(5))
    assert_close(model.rewards(ids), hf(input_ids=ids).logits[:, 0], atol=1e-5, rtol=0)
