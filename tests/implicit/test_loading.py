"""Loading causal LMs: logits equal Hugging Face's for every family and for the zoo's policy, and
pickle checkpoints are refused."""

import pytest
import torch

from reward_lens_tl.implicit import (
    load_causal_lm,
)
from reward_lens_tl.zoo import load_task
from tests.implicit.conftest import FAMILIES, tiny_causal


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


def test_pickle_checkpoints_are_refused(tmp_path):
    from reward_lens_tl.errors import UnsafeCheckpointError

    model = tiny_causal("llama")
    model.save_pretrained(tmp_path)
    for f in tmp_path.glob("*.safetensors"):
        f.unlink()
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")
    with pytest.raises(UnsafeCheckpointError, match="safetensors"):
        load_causal_lm(tmp_path)
