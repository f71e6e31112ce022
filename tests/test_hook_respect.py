"""Every kind of hook is respected by the forward-pass optimisations.

The pooled last block (``return_type="reward"``), the SDPA attention path and the rotated
key prefix of patching sweeps each skip or reshape some module calls. Whatever could observe
or change those calls (TransformerLens hooks of every flavour, plain PyTorch module hooks,
PyTorch's global module hooks, replaced hook points, instance-level ``forward`` overrides)
must either switch the optimisation off or see exactly what the unoptimised path shows it.
The reference is always computed independently: the per-position forward (``return_type=
"logits"``) gathered at each row's reading position, or TL's attention
(``model.set_fast_attention(False)``)."""

import warnings
from functools import cache

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules import module as torch_module
from torch.testing import assert_close
from transformer_lens.hook_points import HookPoint

from reward_lens_tl import HookedRewardModel, pooled_forward
from reward_lens_tl.testing import tiny_reward_model

torch.set_num_threads(1)


@cache
def _load(name):
    return HookedRewardModel.from_pretrained(tiny_reward_model(name))


@pytest.fixture
def load(request):
    """A cached model (``"zoo"``: the shared ``zoo_scalar``), handed back clean (no hooks, fast
    attention on) after the test."""
    used = []

    def get(name):
        model = request.getfixturevalue("zoo_scalar") if name == "zoo" else _load(name)
        used.append(model)
        return model

    yield get
    for model in used:
        model.reset_hooks(including_permanent=True)
        model.set_fast_attention(True)


def batch(model, padding, seed=0, lengths=(10, 7, 4)):
    """Rows of unequal lengths (random ids, never a special token), right or left padded,
    with their attention mask."""
    gen = torch.Generator().manual_seed(seed)
    width = max(lengths)
    ids = torch.full((len(lengths), width), model.pad_token_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, n in enumerate(lengths):
        span = slice(width - n, width) if padding == "left" else slice(0, n)
        ids[i, span] = torch.randint(6, model.cfg.d_vocab, (n,), generator=gen)
        mask[i, span] = 1
    return ids, mask


def plain_rewards(model, ids, mask):
    """The reward without the pooled block: the per-position forward at each reading position."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # position -1 is not every row's reading position
        logits = model(ids, attention_mask=mask)
    pos = model.pool_positions(ids, mask).to(logits.device)
    return logits[torch.arange(ids.shape[0]), pos, 0]


def count_calls(monkeypatch, owner, name: str) -> list:
    """Replace ``owner.name`` by a wrapper that records each call (undone by monkeypatch)."""
    calls = []
    original = getattr(owner, name)

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counting)
    return calls


@pytest.fixture
def pooled_calls(monkeypatch):
    return count_calls(monkeypatch, pooled_forward, "last_block_at")


@pytest.fixture
def sdpa_calls(monkeypatch):
    return count_calls(monkeypatch, F, "scaled_dot_product_attention")


def centre(x):
    """Mixes positions: what it returns at one position depends on all the others."""
    return x - x.mean(1, keepdim=True)


# -- where a hook goes, and how ---------------------------------------------------------------
TARGETS = {
    "block": lambda m: m.blocks[-1],
    "attn": lambda m: m.blocks[-1].attn,
    "mlp": lambda m: m.blocks[-1].mlp,
    "ln1": lambda m: m.blocks[-1].ln1,
    "ln2": lambda m: m.blocks[-1].ln2,
    "ln_final": lambda m: m.ln_final,
    "unembed": lambda m: m.unembed,
    "unembed.hook_out": lambda m: m.unembed.hook_out,
    "resid_post": lambda m: m.blocks[-1].hook_resid_post,
}


def main_input(args, kwargs):
    """The tensor a module is called on (TL's attention gets keywords only)."""
    if args:
        return args[0]
    return kwargs["query_input"]


def attach(kind, module, fn):
    """Register ``fn(tensor) -> tensor | None`` on ``module`` as a hook of ``kind``; returns
    the handle. Forward kinds see the output, pre kinds the (main) input."""
    if kind == "forward":
        return module.register_forward_hook(lambda mod, args, out: fn(out))
    if kind == "forward_kwargs":
        return module.register_forward_hook(
            lambda mod, args, kwargs, out: fn(out), with_kwargs=True
        )
    if kind == "pre":

        def pre(mod, args):
            new = fn(args[0])
            return None if new is None else (new, *args[1:])

        return module.register_forward_pre_hook(pre)
    if kind == "pre_kwargs":

        def pre_kw(mod, args, kwargs):
            new = fn(main_input(args, kwargs))
            if new is None:
                return None
            if args:
                return (new, *args[1:]), kwargs
            return args, {**kwargs, "query_input": new, "key_input": new, "value_input": new}

        return module.register_forward_pre_hook(pre_kw, with_kwargs=True)
    if kind == "global_forward":
        return torch_module.register_module_forward_hook(
            lambda mod, args, out: fn(out) if mod is module else None
        )
    if kind == "global_forward_kwargs":
        return torch_module.register_module_forward_hook(
            lambda mod, args, kwargs, out: fn(out) if mod is module else None, with_kwargs=True
        )
    if kind == "global_pre":

        def global_pre(mod, args):
            if mod is not module or not args:
                return None
            new = fn(args[0])
            return None if new is None else (new, *args[1:])

        return torch_module.register_module_forward_pre_hook(global_pre)
    raise ValueError(kind)


FORWARD_KINDS = ["forward", "forward_kwargs", "global_forward", "global_forward_kwargs"]
PRE_KINDS = ["pre", "pre_kwargs", "global_pre"]
CASES = [
    (target, kind)
    for target in TARGETS
    for kind in FORWARD_KINDS + PRE_KINDS
    if not (target == "attn" and kind in ("pre", "global_pre"))  # attention takes keywords
]


# -- 1. the pooled last block ----------------------------------------------------------------
@pytest.mark.parametrize("padding", ["right", "left"])
def test_centring_hook_on_the_last_block_gets_plain_path_rewards(load, padding):
    """The issue's example: a forward hook centring the last block's output over positions
    made every reward 0.0 (the pooled block hands it one position)."""
    model = load("zoo")
    ids, mask = batch(model, padding)
    handle = model.blocks[-1].register_forward_hook(lambda mod, args, out: centre(out))
    try:
        with torch.no_grad():
            expected = plain_rewards(model, ids, mask)
            got = model.rewards(ids, mask)
    finally:
        handle.remove()
    with torch.no_grad():
        unhooked = model.rewards(ids, mask)
    assert (expected - unhooked).abs().max() > 1e-2  # the hook does something
    assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("padding", ["right", "left"])
@pytest.mark.parametrize(("target", "kind"), CASES)
def test_writing_hook_on_what_the_pooled_block_reshapes(load, target, kind, padding):
    model = load("llama")
    ids, mask = batch(model, padding, seed=1)
    handle = attach(kind, TARGETS[target](model), centre)
    try:
        with torch.no_grad():
            expected = plain_rewards(model, ids, mask)
            got = model.rewards(ids, mask)
    finally:
        handle.remove()
    assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("padding", ["right", "left"])
@pytest.mark.parametrize(("target", "kind"), CASES)
def test_reading_hook_on_what_the_pooled_block_reshapes(load, target, kind, padding):
    model = load("qwen2")
    ids, mask = batch(model, padding, seed=2)
    seen = {"reward": [], "plain": []}
    key = ["reward"]
    handle = attach(kind, TARGETS[target](model), lambda x: seen[key[0]].append(x.clone()))
    try:
        with torch.no_grad():
            model.rewards(ids, mask)
            key[0] = "plain"
            plain_rewards(model, ids, mask)
    finally:
        handle.remove()
    assert len(seen["plain"]) > 0
    assert [t.shape for t in seen["reward"]] == [t.shape for t in seen["plain"]]
    for got, expected in zip(seen["reward"], seen["plain"], strict=True):
        assert_close(got, expected, atol=1e-5, rtol=1e-5)


TL_WAYS = ["add_hook", "add_perma_hook", "hooks_context", "run_with_hooks"]


@pytest.mark.parametrize("way", TL_WAYS)
@pytest.mark.parametrize(
    "name", ["unembed.hook_out", "unembed.hook_in", "ln_final.hook_normalized"]
)
def test_transformer_lens_hooks_on_the_head(load, way, name):
    """TL hooks on the final norm and the unembed (the head) see every position."""
    model = load("zoo")
    ids, mask = batch(model, "left", seed=3)
    hooks = [(name, lambda act, hook: centre(act))]
    try:
        with torch.no_grad():
            if way == "run_with_hooks":
                got = model.run_with_hooks(
                    ids, return_type="reward", attention_mask=mask, fwd_hooks=hooks
                )
            elif way == "hooks_context":
                with model.hooks(fwd_hooks=hooks):
                    got = model.rewards(ids, mask)
            else:
                getattr(model, way)(*hooks[0])
                got = model.rewards(ids, mask)
                model.reset_hooks(including_permanent=True)
            with model.hooks(fwd_hooks=hooks):
                expected = plain_rewards(model, ids, mask)
    finally:
        model.reset_hooks(including_permanent=True)
    assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")  # global hooks, every module
@pytest.mark.parametrize("padding", ["right", "left"])
@pytest.mark.parametrize(
    ("kind", "target"),
    [
        ("module", "block"),
        ("module", "mlp"),
        ("module", "unembed"),
        ("global", "block"),
        ("global", "ln_final"),
        ("transformer_lens", "resid_post"),
    ],
)
def test_backward_hooks_on_the_last_block_see_every_position(load, padding, kind, target):
    model = load("llama")
    ids, mask = batch(model, padding, seed=4)
    module = TARGETS[target](model)
    grads = {"reward": [], "plain": []}
    key = ["reward"]

    def record(mod, grad_input, grad_output):
        if mod is module:
            grads[key[0]].append(grad_output[0].clone())

    handle = None
    if kind == "module":
        handle = module.register_full_backward_hook(record)
    elif kind == "global":
        handle = torch_module.register_module_full_backward_hook(record)
    else:
        model.add_hook(module.name, lambda g, hook: record(module, None, (g,)), dir="bwd")
    try:
        model.rewards(ids, mask, grad=True).sum().backward()
        key[0] = "plain"
        plain_rewards(model, ids, mask).sum().backward()
    finally:
        if handle is not None:
            handle.remove()
        model.reset_hooks(including_permanent=True)
        model.zero_grad(set_to_none=True)
    assert len(grads["plain"]) == 1
    assert [g.shape for g in grads["reward"]] == [g.shape for g in grads["plain"]]
    assert_close(grads["reward"][0], grads["plain"][0], atol=1e-5, rtol=1e-5)


def test_backward_pre_hook_that_writes(load):
    """A full backward pre-hook rescaling the gradient of the last block's output by position."""
    model = load("llama")
    ids, mask = batch(model, "right", seed=5)
    block = model.blocks[-1]

    def ramp(mod, grad_output):
        g = grad_output[0]
        scale = torch.arange(1, g.shape[1] + 1, dtype=g.dtype)[None, :, None]
        return (g * scale,)

    out = []
    runs = (lambda: model.rewards(ids, mask, grad=True), lambda: plain_rewards(model, ids, mask))
    for run in runs:
        handle = block.register_full_backward_pre_hook(ramp)
        try:
            model.zero_grad(set_to_none=True)
            run().sum().backward()
            out.append(block.mlp.W_in.grad.clone())
        finally:
            handle.remove()
    model.zero_grad(set_to_none=True)
    assert_close(out[0], out[1], atol=1e-5, rtol=1e-5)


class Recorder(nn.Module):
    """Put where a hook point was: an identity that remembers what it saw."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def forward(self, x):
        self.seen.append(x.shape)
        return x


class RecordingHookPoint(HookPoint):
    def __init__(self):
        super().__init__()
        self.seen = []

    def forward(self, x):
        self.seen.append(x.shape)
        return centre(x)


@pytest.mark.parametrize("replacement", [Recorder, RecordingHookPoint])
@pytest.mark.parametrize("slot", ["hook_resid_post", "ln2.hook_normalized", "unembed.hook_out"])
def test_replaced_hook_points(load, pooled_calls, replacement, slot):
    model = load("llama")
    ids, mask = batch(model, "left", seed=6)
    parent_name, _, leaf = slot.rpartition(".")
    block = model.blocks[-1]
    parent = {"": block, "ln2": block.ln2, "unembed": model.unembed}[parent_name]
    original = getattr(parent, leaf)
    setattr(parent, leaf, replacement())
    try:
        with torch.no_grad():
            got = model.rewards(ids, mask)
            n_pooled = len(pooled_calls)
            expected = plain_rewards(model, ids, mask)
        seen = getattr(parent, leaf).seen
    finally:
        setattr(parent, leaf, original)
    assert n_pooled == 0
    assert seen[0] == seen[1] and seen[0][1] == ids.shape[1]
    assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_sae_spliced_into_the_last_block_switches_pooling_off(load, pooled_calls):
    from reward_lens_tl.sae.testing import random_topk_sae

    model = load("llama")
    ids, mask = batch(model, "right", seed=7)
    sae = random_topk_sae(model, "blocks.1.hook_resid_post")
    model.add_sae(sae)
    try:
        with torch.no_grad():
            got = model.rewards(ids, mask)
            n_pooled = len(pooled_calls)
            expected = plain_rewards(model, ids, mask)
    finally:
        model.reset_saes()
    assert n_pooled == 0
    assert_close(got, expected, atol=1e-5, rtol=1e-5)


class Wrapped(nn.Module):
    """A user's own component around a TL one: records what it is called on."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.seen = []

    def forward(self, x):
        self.seen.append(x.shape)
        return self.inner(x)


@pytest.mark.parametrize("where", ["mlp", "ln2"])
def test_own_component_in_the_last_block(load, pooled_calls, where):
    model = load("qwen2")
    ids, mask = batch(model, "left", seed=14)
    block = model.blocks[-1]
    original = getattr(block, where)
    setattr(block, where, Wrapped(original))
    try:
        with torch.no_grad():
            got = model.rewards(ids, mask)
            expected = plain_rewards(model, ids, mask)
        seen = getattr(block, where).seen
    finally:
        setattr(block, where, original)
    assert len(pooled_calls) == 0
    assert seen == [seen[-1]] * 2 and seen[-1][1] == ids.shape[1]
    assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("where", ["mlp", "ln_final", "block"])
def test_instance_forward_override_in_the_last_block(load, pooled_calls, where):
    """Wrapping a module's bound ``forward`` (as accelerate's hooks do) is a hook too."""
    model = load("gpt2")
    ids, mask = batch(model, "right", seed=8)
    module = TARGETS[where](model)
    had_own = "forward" in vars(module)
    original = module.forward
    module.forward = lambda *args, **kwargs: centre(original(*args, **kwargs))
    try:
        with torch.no_grad():
            got = model.rewards(ids, mask)
            n_pooled = len(pooled_calls)
            expected = plain_rewards(model, ids, mask)
    finally:
        if had_own:
            module.forward = original
        else:
            del module.forward
    assert n_pooled == 0
    assert_close(got, expected, atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        model.rewards(ids, mask)
    assert len(pooled_calls) == 1  # removing the override gives the optimisation back


@pytest.mark.parametrize("family", ["llama", "qwen2", "gpt2", "zoo"])
@pytest.mark.parametrize("padding", ["right", "left"])
def test_hooks_elsewhere_keep_the_pooled_block(load, pooled_calls, sdpa_calls, family, padding):
    """Hooks on earlier blocks (run in full either way) and on the model itself (it sees only
    the final reward) leave the optimisations on, with the plain path's numbers."""
    model = load(family)
    ids, mask = batch(model, padding, seed=9)
    with torch.no_grad():
        plain = model.rewards(ids, mask)
    assert len(pooled_calls) == 1 and len(sdpa_calls) == model.cfg.n_layers
    seen = {"reward": [], "plain": []}
    key = ["reward"]

    def read(mod, args, out):
        seen[key[0]].append(out.clone())

    handles = [
        model.blocks[0].register_forward_hook(lambda mod, args, out: centre(out)),
        model.blocks[-2].attn.register_forward_hook(read),
        model.blocks[-2].register_forward_pre_hook(lambda mod, args: (args[0] * 1.5, *args[1:])),
        model.register_forward_hook(lambda mod, args, kwargs, out: None, with_kwargs=True),
        model.register_forward_pre_hook(lambda mod, args: None),
        model.blocks[-1].register_forward_hook(lambda mod, args, out: None),
    ]
    handles.pop().remove()  # a hook that was removed again leaves nothing behind
    model.add_hook("blocks.0.hook_mlp_out", lambda act, hook: act * 0.5)
    try:
        with torch.no_grad():
            got = model.rewards(ids, mask)
            key[0] = "plain"
            expected = plain_rewards(model, ids, mask)
    finally:
        for handle in handles:
            handle.remove()
        model.reset_hooks()
    assert len(pooled_calls) == 2  # still pooled
    assert (got - plain).abs().max() > 1e-3
    assert_close(got, expected, atol=1e-5, rtol=1e-5)
    assert_close(seen["reward"], seen["plain"], atol=1e-5, rtol=1e-5)


def test_no_hooks_left_by_a_global_hook_once_removed(load, pooled_calls, sdpa_calls):
    model = load("llama")
    ids, mask = batch(model, "right")
    handle = torch_module.register_module_forward_hook(lambda mod, args, out: None)
    try:
        with torch.no_grad():
            model.rewards(ids, mask)
    finally:
        handle.remove()
    assert len(pooled_calls) == 0 and len(sdpa_calls) == 0
    with torch.no_grad():
        model.rewards(ids, mask)
    assert len(pooled_calls) == 1 and len(sdpa_calls) == model.cfg.n_layers


# -- 2. the SDPA attention path --------------------------------------------------------------
def hook_point_calls(model, run, fast):
    """Every (hook name, value) a global forward hook sees during ``run()``."""
    model.set_fast_attention(fast)
    seen = []

    def record(mod, args, out):
        if isinstance(mod, HookPoint):
            seen.append((mod.name, out.clone()))

    handle = torch_module.register_module_forward_hook(record)
    try:
        with torch.no_grad():
            result = run()
    finally:
        handle.remove()
        model.set_fast_attention(True)
    return result, seen


@pytest.mark.parametrize("family", ["llama", "gpt2"])
@pytest.mark.parametrize("padding", ["right", "left"])
def test_global_hook_sees_every_hook_point_on_the_fast_path(load, family, padding):
    model = load(family)
    ids, mask = batch(model, padding, seed=10)
    for run in (lambda: model.rewards(ids, mask), lambda: model(ids, attention_mask=mask)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out_fast, fast = hook_point_calls(model, run, fast=True)
            out_tl, tl = hook_point_calls(model, run, fast=False)
        assert any(name.endswith("hook_pattern") for name, _ in tl)
        assert [name for name, _ in fast] == [name for name, _ in tl]
        for (_, a), (_, b) in zip(fast, tl, strict=True):
            assert_close(a, b, atol=1e-5, rtol=1e-5)
        assert_close(out_fast, out_tl, atol=1e-5, rtol=1e-5)


def knock_out_head(x):
    """Head 1 of a pattern attends to nothing; of scores, uniformly to what it may see."""
    x = x.clone()
    x[:, 1] = 0.0 if bool((x >= 0).all()) else x[:, 1].masked_fill(x[:, 1] > -1e30, 0.0)
    return x


@pytest.mark.parametrize("padding", ["right", "left"])
@pytest.mark.parametrize("name", ["hook_pattern", "hook_attn_scores"])
@pytest.mark.parametrize(
    "kind", ["global_forward", "global_forward_kwargs", "global_pre", "forward", "pre"]
)
def test_pattern_editing_hooks_of_every_kind(load, padding, name, kind):
    """A hook editing a head's pattern (or scores) takes effect on the fast path too."""
    model = load("llama")
    ids, mask = batch(model, padding, seed=11)
    target = getattr(model.blocks[0].attn, name)
    results = []
    for fast in (True, False):
        model.set_fast_attention(fast)
        handle = attach(kind, target, knock_out_head)
        try:
            with torch.no_grad():
                results.append(model.rewards(ids, mask))
        finally:
            handle.remove()
            model.set_fast_attention(True)
    with torch.no_grad():
        unhooked = model.rewards(ids, mask)
    assert (results[1] - unhooked).abs().max() > 1e-3
    assert_close(results[0], results[1], atol=1e-5, rtol=1e-5)


def test_instance_forward_override_on_the_pattern_hook(load):
    model = load("llama")
    ids, mask = batch(model, "right", seed=12)
    point = model.blocks[0].attn.hook_pattern
    seen = []

    def forward(x):
        seen.append(x.shape)
        return x * 0.5

    results = []
    for fast in (True, False):
        model.set_fast_attention(fast)
        point.forward = forward
        try:
            with torch.no_grad():
                results.append(model.rewards(ids, mask))
        finally:
            del point.forward
            model.set_fast_attention(True)
    assert len(seen) == 2
    assert_close(results[0], results[1], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("padding", ["right", "left"])
@pytest.mark.parametrize("kind", ["forward", "forward_kwargs", "pre_kwargs", "global_forward"])
def test_hooks_on_the_attention_module_see_the_same_either_way(load, sdpa_calls, padding, kind):
    """The attention module's own calls are identical on both paths: a hook on it keeps SDPA
    (except a global hook, which also sees the pattern hook points) and reads and writes the
    same values."""
    model = load("qwen2")
    ids, mask = batch(model, padding, seed=13)
    attn = model.blocks[0].attn
    runs = {}
    for fast in (True, False):
        model.set_fast_attention(fast)
        seen = []
        sdpa_calls.clear()

        def write(x, seen=seen):
            seen.append(x.clone())
            return x * 0.7 + 0.1

        handle = attach(kind, attn, write)
        try:
            with torch.no_grad():
                runs[fast] = (model.rewards(ids, mask), seen, len(sdpa_calls))
        finally:
            handle.remove()
            model.set_fast_attention(True)
    (fast_r, fast_seen, fast_sdpa), (tl_r, tl_seen, tl_sdpa) = runs[True], runs[False]
    assert_close(fast_r, tl_r, atol=1e-5, rtol=1e-5)
    assert_close(fast_seen, tl_seen, atol=1e-5, rtol=1e-5)
    assert tl_sdpa == 0
    assert fast_sdpa == (0 if kind.startswith("global") else model.cfg.n_layers)


# -- 3. the rotated key prefix of patching sweeps --------------------------------------------
def patching_pair(model):
    gen = torch.Generator().manual_seed(3)
    clean = torch.randint(6, model.cfg.d_vocab, (11,), generator=gen)
    corrupted = clean.clone()
    corrupted[4:7] = torch.randint(6, model.cfg.d_vocab, (3,), generator=gen)
    return clean, corrupted


def sweep(model, fast, site="resid_pre", **kw):
    from reward_lens_tl.patching import activation_patching

    clean, corrupted = patching_pair(model)
    model.set_fast_attention(fast)
    try:
        return activation_patching(
            model, clean, corrupted, alignment="exact", metric=lambda r: r, site=site, **kw
        ).values
    finally:
        model.set_fast_attention(True)


def zero_key_2(act, hook):
    act = act.clone()
    act[:, 2] = 0.0
    return act


def scale_keys(act, hook):
    return act * 0.6


@pytest.mark.parametrize("site", ["resid_pre", "z"])
@pytest.mark.parametrize(
    ("name", "fn"),
    [("attn.hook_rot_k", zero_key_2), ("attn.hook_rot_k", scale_keys), ("attn.hook_k", scale_keys)],
)
@pytest.mark.parametrize("how", ["fwd_hooks", "perma_hook", "torch_hook"])
def test_key_hooks_in_patching_sweeps(load, name, fn, how, site):
    """The sweep's rotated prefix keys pass through ``hook_rot_k`` with the new ones, as
    TL's path rotates them: a hook on the keys gives the same values on both attention
    paths (and, where it does not index positions of ``hook_k``, without prefix reuse)."""
    model = load("llama")
    names = [f"blocks.{layer}.{name}" for layer in range(model.cfg.n_layers)]
    handles = []
    kw = {}
    if how == "fwd_hooks":
        kw["fwd_hooks"] = [(n, fn) for n in names]
    elif how == "perma_hook":
        for n in names:
            model.add_perma_hook(n, fn)
    else:
        for n in names:
            point = model.hook_dict[n]
            handles.append(point.register_forward_hook(lambda mod, args, out: fn(out, mod)))
    try:
        fast = sweep(model, True, site=site, **kw)
        tl = sweep(model, False, site=site, **kw)
        no_reuse = sweep(model, True, site=site, reuse_prefix=False, **kw)
    finally:
        for handle in handles:
            handle.remove()
        model.reset_hooks(including_permanent=True)
    unhooked = sweep(model, True, site=site)
    assert (tl - unhooked).abs().max() > 1e-4
    assert_close(fast, tl, atol=1e-5, rtol=1e-5)
    assert_close(no_reuse, tl, atol=1e-5, rtol=1e-5)


def test_reading_hook_on_attention_in_patching_sweeps(load):
    model = load("llama")
    seen = {True: [], False: []}
    key = [True]
    handle = model.blocks[1].attn.register_forward_hook(
        lambda mod, args, out: seen[key[0]].append(out.clone())
    )
    try:
        fast = sweep(model, True)
        key[0] = False
        tl = sweep(model, False)
    finally:
        handle.remove()
    assert_close(fast, tl, atol=1e-5, rtol=1e-5)
    assert_close(seen[True], seen[False], atol=1e-5, rtol=1e-5)


def zero_position_2(act, hook):
    act = act.clone()
    act[:, 2] = 0.0
    return act


@pytest.mark.parametrize("name", ["blocks.1.attn.hook_k", "blocks.1.hook_resid_pre"])
def test_persistent_position_hooks_in_patching_sweeps(load, name):
    """A hook already on the model (not passed as ``fwd_hooks``) that indexes positions must
    give the sweep the values it gives without the sweep's own shortcuts."""
    model = load("llama")
    model.add_perma_hook(name, zero_position_2)
    try:
        no_reuse = sweep(model, True, reuse_prefix=False)
        reused = sweep(model, True)
    finally:
        model.reset_hooks(including_permanent=True)
    assert_close(reused, no_reuse, atol=1e-5, rtol=1e-5)
