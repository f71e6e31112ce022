"""Every family on CUDA: converted with ``device="cuda"``, against the HF model on CUDA.

(a) pooled rewards of a right-padded ragged batch vs HF on CUDA: float32 ≤ 1e-4 (TF32 off),
bf16/fp16 with tests/test_dtype.py's thresholds (vs HF in the same dtype and in float32);
(b) direct attribution adds up (parts + head bias == reward); (c) activation patching with
source == target reproduces the clean reward in every cell; (d) the SDPA attention path agrees
with TransformerLens's explicit-pattern path (``set_fast_attention(False)``).

Skipped when ``torch.cuda.is_available()`` is False (CI runs on CPU); the GPU results are in
benchmarks/RESULTS.md ("GPU figures").
"""

from __future__ import annotations

import pytest
import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.attribution import direct_attribution
from reward_lens_tl.patching.activation import activation_patching
from reward_lens_tl.testing import tiny_reward_model
from tests.adapters.test_parity import TOL
from tests.test_dtype import FAMILIES
from tests.test_dtype import TOL as LOW_TOL
from tests.test_fast_attention import (
    LENGTHS,
    SOFT_CAPPED,
    batch_for,
    hf_reward,
    sdpa_calls,  # noqa: F401  (the fixture counting SDPA calls)
)

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="needs a CUDA device (torch.cuda.is_available() is False); GPU-only checks",
)

CUDA = "cuda"
#: dtype: (vs HF in the same dtype, vs HF in float32, self-consistency of the read-outs)
TOLS = {torch.float32: (TOL, TOL, TOL), **LOW_TOL}
DTYPE_IDS = ["fp32", "bf16", "fp16"]


@pytest.fixture(autouse=True)
def _exact_float32_matmuls():
    """float32 parity is measured without TF32 (PyTorch's default, asserted here)."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = before


def cuda_batch(family, seed=1):
    ids, mask = batch_for(family, seed=seed)  # right padded, lengths 12 / 9 / 5 / 16
    return ids.to(CUDA), mask.to(CUDA)


def convert(family, dtype=torch.float32, **flags):
    model = HookedRewardModel.from_pretrained(
        tiny_reward_model(family), dtype=dtype, device=CUDA, **flags
    )
    params = list(model.parameters())
    assert all(p.device.type == "cuda" for p in params)
    assert {p.dtype for p in params if p.is_floating_point()} == {dtype}
    return model


def hf_outputs(family, ids, mask, dtype=torch.float32):
    """The HF model on CUDA in ``dtype``: (pooled reward, ArmoRM objectives or None), float32."""
    hf = tiny_reward_model(family).to(CUDA, dtype)
    with torch.no_grad():
        out = hf(input_ids=ids, attention_mask=mask)
    objectives = out.rewards.float() if family == "armorm" else None
    return hf_reward(hf, family, ids, mask).float(), objectives


@pytest.mark.parametrize("dtype", list(TOLS), ids=DTYPE_IDS)
@pytest.mark.parametrize("family", FAMILIES)
def test_rewards_match_hf_on_cuda(family, dtype):
    same_tol, f32_tol, _ = TOLS[dtype]
    ids, mask = cuda_batch(family)
    model = convert(family, dtype)
    with torch.no_grad():
        ours = model.rewards(ids, mask)
        objectives = model.objective_rewards(ids, mask).float() if family == "armorm" else None
    assert ours.device.type == "cuda" and ours.shape == (len(LENGTHS),)
    ours = ours.float()
    ref, ref_objectives = hf_outputs(family, ids, mask, dtype)
    ref32, ref32_objectives = hf_outputs(family, ids, mask)
    torch.testing.assert_close(ours, ref, atol=same_tol, rtol=0)
    torch.testing.assert_close(ours, ref32, atol=f32_tol, rtol=0)
    if family == "armorm":
        torch.testing.assert_close(objectives, ref_objectives, atol=same_tol, rtol=0)
        torch.testing.assert_close(objectives, ref32_objectives, atol=f32_tol, rtol=0)


@pytest.mark.parametrize("family", FAMILIES)
def test_convert_an_hf_model_that_is_on_cuda(family):
    """An HF model already on the GPU converts too (and is left where it was)."""
    hf = tiny_reward_model(family).to(CUDA)
    ids, mask = cuda_batch(family, seed=2)
    model = HookedRewardModel.from_pretrained(hf, device=CUDA)
    assert next(hf.parameters()).device.type == "cuda"
    with torch.no_grad():
        err = (model.rewards(ids, mask) - hf_reward(hf, family, ids, mask)).abs().max()
    assert err <= TOL


@pytest.mark.parametrize("dtype", list(TOLS), ids=DTYPE_IDS)
@pytest.mark.parametrize("family", FAMILIES)
def test_attribution_is_complete_on_cuda(family, dtype):
    self_tol = TOLS[dtype][2]
    ids, mask = cuda_batch(family)
    model = convert(family, dtype)
    attr = direct_attribution(model, ids, mask, heads=True, sources=True, neurons=True)
    assert attr.values.dtype == torch.float32  # results are read out in float32 on the CPU
    assert attr.completeness_error() <= self_tol
    with torch.no_grad():
        rewards = model.rewards(ids, mask).float().cpu()
    torch.testing.assert_close(attr.rewards, rewards, atol=self_tol, rtol=0)
    # parts + head bias, summed here rather than by the result object
    total = attr.values.sum(0) + attr.head_bias
    torch.testing.assert_close(total, rewards, atol=self_tol, rtol=0)
    torch.testing.assert_close(attr.sources.sum(-1), attr.head_matrix(), atol=self_tol, rtol=0)


@pytest.mark.parametrize("dtype", list(TOLS), ids=DTYPE_IDS)
@pytest.mark.parametrize("family", FAMILIES)
def test_self_patching_reproduces_the_clean_reward(family, dtype):
    """source == target: every cell (layer × position of resid_pre, and every head) is the
    clean reward; batched cells and key-value prefix reuse change nothing on CUDA."""
    self_tol = TOLS[dtype][2]
    ids, mask = cuda_batch(family)
    row = ids[3, : LENGTHS[3]]  # the longest row, no padding
    model = convert(family, dtype)
    with torch.no_grad():
        clean = float(model.rewards(row[None]).float())
    resid = activation_patching(model, row, row, site="resid_pre", metric=lambda r: r)
    heads = activation_patching(model, row, row, site="z", metric=lambda r: r)
    assert resid.values.shape == (model.cfg.n_layers, LENGTHS[3])
    assert heads.values.shape == (model.cfg.n_layers, model.cfg.n_heads)
    assert abs(resid.target_reward - clean) <= self_tol
    for cells in (resid.values.float(), heads.values.float()):
        torch.testing.assert_close(cells, torch.full_like(cells, clean), atol=self_tol, rtol=0)


@pytest.mark.parametrize("dtype", list(TOLS), ids=DTYPE_IDS)
@pytest.mark.parametrize("family", FAMILIES)
def test_sdpa_path_equals_tl_path_on_cuda(family, dtype, sdpa_calls):  # noqa: F811
    # two implementations of attention in one dtype: 1e-5 in float32 (as on the CPU,
    # tests/test_fast_attention.py), test_dtype's "vs HF in the same dtype" in bf16/fp16
    low = dtype != torch.float32
    reward_tol = TOLS[dtype][0] if low else 1e-5
    ids, mask = cuda_batch(family, seed=3)
    model = convert(family, dtype)
    resid = lambda name: name.endswith("hook_resid_post")  # noqa: E731
    runs = []
    for fast in (True, False):
        model.set_fast_attention(fast)
        sdpa_calls.clear()
        with torch.no_grad():
            runs.append(
                model.run_with_cache(
                    ids, attention_mask=mask, return_type="reward", names_filter=resid
                )
            )
        sdpa = model.cfg.n_layers if fast and family not in SOFT_CAPPED else 0
        assert len(sdpa_calls) == sdpa  # the path compared is the one that ran
    (r_fast, c_fast), (r_tl, c_tl) = runs
    torch.testing.assert_close(r_fast.float(), r_tl.float(), atol=reward_tol, rtol=0)
    # the residual stream at every real (non-pad) position: 1e-5 in float32, a few units in
    # the last place of its size in bf16/fp16
    cache_tol = 8 * torch.finfo(dtype).eps if low else 1e-5
    real = mask.bool()
    assert len(c_tl.keys()) == model.cfg.n_layers
    for name in c_tl.keys():
        fast, tl = c_fast[name].float()[real], c_tl[name].float()[real]
        tol = cache_tol * max(1.0, float(tl.abs().max()))
        torch.testing.assert_close(fast, tl, atol=tol, rtol=0, msg=f"{name} differs")
