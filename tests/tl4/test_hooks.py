"""The bridge's hooks on the zoo's scalar model: names, lens end point, completeness, resumption."""

import pytest
import torch
from torch.testing import assert_close

from tests.tl4.tl4_only import skip_unless_tl4

skip_unless_tl4()

from reward_lens_tl.bridge import boot_reward_bridge, reward_positions  # noqa: E402
from reward_lens_tl.zoo import zoo_path  # noqa: E402

#: HookedTransformer's hook names of one block of a rotary, gated-MLP, RMSNorm model: every one is
#: on the bridge under the same name.
LEGACY_BLOCK_HOOKS = [
    "hook_resid_pre",
    "ln1.hook_scale",
    "ln1.hook_normalized",
    "attn.hook_q",
    "attn.hook_k",
    "attn.hook_v",
    "attn.hook_rot_q",
    "attn.hook_rot_k",
    "attn.hook_attn_scores",
    "attn.hook_pattern",
    "attn.hook_z",
    "hook_attn_out",
    "hook_resid_mid",
    "ln2.hook_scale",
    "ln2.hook_normalized",
    "mlp.hook_pre",
    "mlp.hook_pre_linear",
    "mlp.hook_post",
    "hook_mlp_out",
    "hook_resid_post",
]
IDS = torch.tensor([[1, 4, 27, 6, 5, 43, 6, 2], [1, 4, 27, 6, 5, 38, 0, 0]])
MASK = (IDS != 0).long()


@pytest.fixture(scope="module")
def bridge():
    return boot_reward_bridge(zoo_path("scalar"))


@pytest.fixture(scope="module")
def run(bridge):
    with torch.no_grad():
        return bridge.run_with_cache(IDS, attention_mask=MASK)


def test_run_with_cache_hook_names_and_count(bridge, run):
    _, cache = run
    names = set(cache.keys())
    n_layers = bridge.cfg.n_layers
    assert n_layers == 3
    legacy = {f"blocks.{i}.{h}" for i in range(n_layers) for h in LEGACY_BLOCK_HOOKS}
    legacy |= {"hook_embed", "ln_final.hook_scale", "ln_final.hook_normalized"}
    assert legacy <= names, sorted(legacy - names)
    # measured on TL 4.3.0: 44 per block (the legacy names and the bridge's own
    # `*.hook_in`/`*.hook_out`) and 13 outside the blocks
    assert len(names) == 44 * n_layers + 13


def test_lens_ends_at_the_reward_and_attribution_sums_to_it(bridge, run):
    out, cache = run
    rows, pos = torch.arange(2), reward_positions(bridge, IDS)
    reward = out[rows, pos, 0]
    W_U, b_U = bridge.W_U[:, 0], bridge.b_U[0]
    acc, labels = cache.accumulated_resid(apply_ln=True, return_labels=True)
    assert labels[-1] == "final_post"
    assert_close(acc[-1][rows, pos] @ W_U + b_U, reward, atol=1e-5, rtol=0)
    parts, labels = cache.decompose_resid(apply_ln=True, return_labels=True)
    assert labels[0] == "embed" and len(labels) == 1 + 2 * bridge.cfg.n_layers
    assert_close((parts[:, rows, pos] @ W_U).sum(0) + b_U, reward, atol=1e-5, rtol=0)
    heads = cache.stack_head_results(layer=-1, apply_ln=True)
    assert heads.shape[0] == bridge.cfg.n_layers * bridge.cfg.n_heads


@torch.no_grad()
def test_start_at_layer_resumes_exactly(bridge, run):
    out, cache = run
    for layer in range(1, bridge.cfg.n_layers):
        resid = cache[f"blocks.{layer}.hook_resid_pre"]
        resumed = bridge(resid, start_at_layer=layer, attention_mask=MASK)
        assert_close(resumed, out, atol=1e-6, rtol=0)


@torch.no_grad()
def test_run_with_hooks_edits_flow_to_the_reward(bridge, run):
    """A `run_with_hooks` edit of the final norm's output at the reading token moves the reward
    by exactly its dot product with the head (the read-out is linear there); a zeroed head
    leaves every position before the edit untouched and changes the reading position."""
    out, _ = run
    rows, pos = torch.arange(2), reward_positions(bridge, IDS)
    delta = torch.randn(bridge.cfg.d_model, generator=torch.Generator().manual_seed(0))

    def shift(x, hook):
        x = x.clone()
        x[rows, pos] += delta
        return x

    edited = bridge.run_with_hooks(
        IDS, attention_mask=MASK, fwd_hooks=[("ln_final.hook_normalized", shift)]
    )
    moved = edited[rows, pos, 0] - out[rows, pos, 0]
    assert_close(moved, (delta @ bridge.W_U[:, 0]).expand(2), atol=1e-5, rtol=0)

    def zero_head(z, hook):
        z = z.clone()
        z[:, -1, 0] = 0.0  # head 0's output at the last position only
        return z

    ablated = bridge.run_with_hooks(
        IDS, attention_mask=MASK, fwd_hooks=[("blocks.2.attn.hook_z", zero_head)]
    )
    assert_close(ablated[:, :-1], out[:, :-1], atol=1e-6, rtol=0)  # causal: earlier positions
    assert not torch.allclose(ablated[0, -1], out[0, -1])
