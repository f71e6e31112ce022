"""bf16 and fp16 models end to end: folding in float32 then cast; rewards against HF in the
same dtype and in float32; lens, attribution and patching run and add up, per-dtype thresholds.

Thresholds (absolute, on the tiny models whose rewards are |r| ≤ 0.7), about 2-3× the largest
error measured over the seven families (benchmarks/RESULTS.md lists the measured values):

==========  ===========  ================  ======================================
dtype       vs HF, same  vs HF float32     lens last site / attribution sum
==========  ===========  ================  ======================================
float32     1e-4         1e-4              1e-4 (tests/adapters/test_parity.py and others)
bfloat16    2.5e-2       1.5e-2            1e-2
float16     2.5e-3       2e-3              1e-3
==========  ===========  ================  ======================================
"""

from __future__ import annotations

import pytest
import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.attribution import direct_attribution
from reward_lens_tl.lens import reward_lens
from reward_lens_tl.patching.activation import activation_patching
from reward_lens_tl.testing import random_batch, tiny_reward_model

FAMILIES = ["llama", "mistral", "qwen2", "gemma2", "gpt2", "qwen3", "armorm"]
#: dtype: (vs HF in the same dtype, vs HF in float32, self-consistency of the read-outs)
TOL = {torch.bfloat16: (2.5e-2, 1.5e-2, 1e-2), torch.float16: (2.5e-3, 2e-3, 1e-3)}


def batch() -> torch.Tensor:
    ids, _ = random_batch(3, seq_len=12, seed=1)
    ids[:, 5:7] = torch.tensor([3, 4])  # the ArmoRM-style gate's prompt-end marker
    return ids


@pytest.mark.parametrize("dtype", list(TOL), ids=["bf16", "fp16"])
@pytest.mark.parametrize("family", FAMILIES)
def test_low_precision_end_to_end(family, dtype):
    same_tol, f32_tol, self_tol = TOL[dtype]
    ids = batch()
    hf = tiny_reward_model(family)
    model = HookedRewardModel.from_pretrained(hf, dtype=dtype)
    assert model.W_U.dtype == dtype and model.blocks[0].attn.W_Q.dtype == dtype
    assert hf.dtype == torch.float32  # the HF model passed in is not changed
    with torch.no_grad():
        ref32 = model.adapter.reference_rewards(hf, ids).float()
        ref = model.adapter.reference_rewards(tiny_reward_model(family).to(dtype), ids).float()
        ours = (model.objective_rewards(ids) if ref32.ndim == 2 else model.rewards(ids)).float()
        rewards = model.rewards(ids).float()
    torch.testing.assert_close(ours, ref, atol=same_tol, rtol=0)
    torch.testing.assert_close(ours, ref32, atol=f32_tol, rtol=0)
    lens = reward_lens(model, ids)  # read out in float32
    torch.testing.assert_close(lens.values[-1], rewards, atol=self_tol, rtol=0)
    attribution = direct_attribution(model, ids, heads=True, neurons=True)
    assert attribution.completeness_error() <= self_tol
    assert attribution.values.dtype == torch.float32
    # patching every position of layer 0's input from the clean run reproduces it exactly
    patch = activation_patching(
        model, ids[0], ids[1], site="resid_pre", layers=[0], by_position=False, metric=lambda r: r
    )
    assert float(patch.values.flatten()[0]) == float(rewards[0])


@pytest.mark.parametrize("dtype", list(TOL), ids=["bf16", "fp16"])
def test_folding_happens_in_float32_then_cast(dtype):
    hf = tiny_reward_model("gemma2")
    low = HookedRewardModel.from_pretrained(hf, dtype=dtype).state_dict()
    cast = HookedRewardModel.from_pretrained(hf).to(dtype).state_dict()
    assert low.keys() == cast.keys()
    for name, value in cast.items():
        assert torch.equal(low[name], value), name
