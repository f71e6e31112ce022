"""The SDPA attention path: HF parity, equality with TL's own path, and the fallbacks."""

import pytest
import torch
import torch.nn.functional as F
from transformer_lens.cache.key_value_cache import TransformerLensKeyValueCache

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.testing import random_batch, tiny_reward_model

FAMILIES = ["llama", "mistral", "qwen2", "gemma2", "gpt2", "qwen3", "armorm"]
SOFT_CAPPED = {"gemma2"}  # score soft-capping: SDPA cannot do it, TL's path runs
LENGTHS = [12, 9, 5, 16]  # longer than mistral's (5) and gemma2's (4) sliding windows


def batch_for(family, seed=1):
    """Right padded: the tests that compare paddings left-pad it with ``left_padded``."""
    ids, mask = random_batch(4, LENGTHS, seed=seed, low=6, padding_side="right")
    if family == "armorm":
        ids[:, 3:5] = torch.tensor([3, 4])  # gating pattern of the tiny ArmoRM
    return ids, mask


def left_padded(ids, mask):
    """The same rows of a right-padded batch, left padded."""
    out, out_mask = torch.zeros_like(ids), torch.zeros_like(mask)
    for i, n in enumerate(mask.sum(1).tolist()):
        out[i, ids.shape[1] - n :] = ids[i, :n]
        out_mask[i, ids.shape[1] - n :] = 1
    return out, out_mask


@pytest.fixture
def sdpa_calls(monkeypatch):
    calls = []
    original = F.scaled_dot_product_attention

    def counting(*args, **kwargs):
        calls.append(kwargs.get("attn_mask") is None)
        return original(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", counting)
    return calls


def hf_reward(hf, family, ids, mask):
    out = hf(input_ids=ids, attention_mask=mask)
    return out.score if family == "armorm" else out.logits[:, 0]


@pytest.mark.parametrize("family", FAMILIES)
def test_hf_parity_through_the_fast_path(family, sdpa_calls):
    hf = tiny_reward_model(family)
    ids, mask = batch_for(family)
    model = HookedRewardModel.from_pretrained(hf)
    with torch.no_grad():
        ref = hf_reward(hf, family, ids, mask)
        sdpa_calls.clear()
        ours = model.rewards(ids, mask)
    torch.testing.assert_close(ours, ref, atol=1e-4, rtol=0)
    expected = 0 if family in SOFT_CAPPED else model.cfg.n_layers
    assert len(sdpa_calls) == expected


def z_names(name):
    return name.endswith(("hook_z", "hook_attn_out", "hook_resid_post", "hook_rot_k"))


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("padding", ["right", "left"])
@pytest.mark.filterwarnings("ignore::reward_lens_tl.padding.ReadingPositionWarning")  # right
def test_fast_path_equals_tl_path_with_hooks_on_z(family, padding):
    model = HookedRewardModel.from_pretrained(tiny_reward_model(family))
    ids, mask = batch_for(family, seed=2)
    if padding == "left":
        ids, mask = left_padded(ids, mask)
        model.pad_token_id = None  # read the last position, the only one HF pools left-padded
    runs = []
    for fast in (True, False):
        model.set_fast_attention(fast)
        with torch.no_grad():
            runs.append(model.run_with_cache(ids, attention_mask=mask, names_filter=z_names))
    (r_fast, c_fast), (r_tl, c_tl) = runs
    assert sorted(c_fast.keys()) == sorted(c_tl.keys()) and len(c_fast.keys()) > 0
    names = list(c_tl.keys())  # as dicts, so that a mismatch names the hook
    by_name = [{n: cache[n] for n in names} for cache in (c_fast, c_tl)]
    torch.testing.assert_close(*by_name, atol=1e-5, rtol=0)
    torch.testing.assert_close(r_fast, r_tl, atol=1e-5, rtol=0)


def test_use_attn_result_fires_hook_result(sdpa_calls):
    model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    model.set_use_attn_result(True)
    ids, mask = left_padded(*batch_for("llama"))
    caches = []
    for fast in (True, False):
        model.set_fast_attention(fast)
        sdpa_calls.clear()
        with torch.no_grad():
            names = lambda n: z_names(n) or n.endswith("hook_result")  # noqa: E731
            caches.append(model.run_with_cache(ids, attention_mask=mask, names_filter=names)[1])
        assert len(sdpa_calls) == (2 if fast else 0)
    fast_cache, tl_cache = caches
    for layer in range(model.cfg.n_layers):
        name = f"blocks.{layer}.attn.hook_result"
        torch.testing.assert_close(fast_cache[name], tl_cache[name], atol=1e-5, rtol=0)
    # heads sum to the attention output (its bias aside)
    summed = fast_cache["blocks.0.attn.hook_result"].sum(-2) + model.blocks[0].attn.b_O
    torch.testing.assert_close(summed, fast_cache["blocks.0.hook_attn_out"], atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", ["hook_pattern", "hook_attn_scores"])
def test_pattern_requests_fall_back_with_the_same_numbers(name, sdpa_calls):
    model = HookedRewardModel.from_pretrained(tiny_reward_model("qwen2"))
    ids, mask = batch_for("qwen2")
    with torch.no_grad():
        plain = model.rewards(ids, mask)
        assert len(sdpa_calls) == model.cfg.n_layers
        sdpa_calls.clear()
        out, cache = model.run_with_cache(
            ids, attention_mask=mask, return_type="reward", names_filter=f"blocks.1.attn.{name}"
        )
        assert len(sdpa_calls) == 1  # layer 0 by SDPA, layer 1 by the explicit path
        assert cache[f"blocks.1.attn.{name}"].shape == (4, 4, 16, 16)
        torch.testing.assert_close(out, plain, atol=1e-5, rtol=0)

        def knock_out_head(act, hook):  # an editing hook must take effect
            act = act.clone()
            if name == "hook_pattern":
                act[:, 2] = 0.0
            else:
                act[:, 2] = act[:, 2].masked_fill(act[:, 2] > -1e30, 0.0)
            return act

        hooks = [(f"blocks.0.attn.{name}", knock_out_head)]
        edited = model.run_with_hooks(
            ids, attention_mask=mask, return_type="reward", fwd_hooks=hooks
        )
        model.set_fast_attention(False)
        edited_tl = model.run_with_hooks(
            ids, attention_mask=mask, return_type="reward", fwd_hooks=hooks
        )
    assert (edited - plain).abs().max() > 1e-3
    torch.testing.assert_close(edited, edited_tl, atol=1e-5, rtol=0)


def test_frozen_prefix_cache_and_gradients_match():
    """Batched patching restarts from a frozen key-value prefix; AtP differentiates through
    attention. Both agree with TL's path."""
    model = HookedRewardModel.from_pretrained(tiny_reward_model("mistral"))
    ids, _ = random_batch(1, [14], seed=3, low=6)
    p0 = 6
    results = []
    for fast in (True, False):
        model.set_fast_attention(fast)
        cache = TransformerLensKeyValueCache.init_cache(model.cfg, model.cfg.device, 1)
        with torch.no_grad():
            model(ids[:, :p0], attention_mask=torch.ones_like(ids[:, :p0]), past_kv_cache=cache)
        cache.freeze()
        with torch.no_grad():
            tail = model(
                ids[:, p0:], past_kv_cache=cache, attention_mask=torch.ones_like(ids[:, p0:])
            )
        store = {}

        def keep(act, hook, store=store):
            act.retain_grad()
            store[hook.name] = act

        with model.hooks(fwd_hooks=[(lambda n: n.endswith("hook_z"), keep)]):
            model.rewards(ids, grad=True).sum().backward()
        results.append((tail, {n: a.grad for n, a in store.items()}))
    (tail_fast, grads_fast), (tail_tl, grads_tl) = results
    with torch.no_grad():
        full = model(ids)[:, p0:]
    torch.testing.assert_close(tail_fast, tail_tl, atol=1e-5, rtol=0)
    torch.testing.assert_close(tail_fast, full, atol=1e-4, rtol=0)
    assert grads_fast.keys() == grads_tl.keys()
    for name, grad in grads_tl.items():
        torch.testing.assert_close(grads_fast[name], grad, atol=1e-5, rtol=0)


def test_other_models_untouched():
    """The fast path is installed per instance: TL's own classes keep their forward."""
    from transformer_lens.components import GroupedQueryAttention

    model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    assert isinstance(model.blocks[0].attn, GroupedQueryAttention)
    assert type(model.blocks[0].attn) is not GroupedQueryAttention
    assert GroupedQueryAttention.forward.__qualname__ == "AbstractAttention.forward"


def test_gated_mlp_without_weight_copies_is_tl_mlp():
    from transformer_lens.components.mlps.gated_mlp import GatedMLP

    model = HookedRewardModel.from_pretrained(tiny_reward_model("qwen2"))
    mlp = model.blocks[1].mlp
    assert type(mlp) is not GatedMLP and isinstance(mlp, GatedMLP)
    x = torch.randn(2, 5, model.cfg.d_model)
    with torch.no_grad():
        torch.testing.assert_close(mlp(x), GatedMLP.forward(mlp, x), atol=1e-6, rtol=0)
        ids, mask = left_padded(*batch_for("qwen2"))
        _, cache = model.run_with_cache(
            ids,
            attention_mask=mask,
            names_filter=lambda n: n.endswith(("hook_in", "ln2.hook_normalized")),
        )
    # sae_lens's mlp.hook_in still fires, with the MLP's input
    assert torch.equal(cache["blocks.1.mlp.hook_in"], cache["blocks.1.ln2.hook_normalized"])


@pytest.mark.parametrize("family", ["llama", "qwen2", "gemma2"])
def test_rotary_tables_are_hfs(family):
    """Angles as HF computes them (position * inv_freq in float32); TL's position / freq
    drifts by ~ulp(position), ~1e-4 in the reward of a d512 model at 1,000 tokens."""
    from transformer_lens.components.abstract_attention import AbstractAttention

    n = 4096
    hf = tiny_reward_model(family, max_position_embeddings=n)
    model = HookedRewardModel.from_pretrained(hf, n_ctx=n)
    attn = model.blocks[0].attn
    x = torch.zeros(1, n, model.cfg.d_head)
    cos, sin = hf.model.rotary_emb(x, torch.arange(n)[None])
    with torch.no_grad():
        model.rewards(torch.randint(6, 90, (1, 3000)))  # extends the tables past 2048
    assert attn.rotary_cos.shape[0] >= 3000
    m = attn.rotary_cos.shape[0]
    torch.testing.assert_close(attn.rotary_cos, cos[0, :m], atol=1e-6, rtol=0)
    torch.testing.assert_close(attn.rotary_sin, sin[0, :m], atol=1e-6, rtol=0)
    tl_sin, _ = AbstractAttention.calculate_sin_cos_rotary(
        attn, attn.cfg.rotary_dim, m, base=attn._rotary_base()
    )
    assert (tl_sin - sin[0, :m]).abs().max() > 1e-5  # what the override fixes


def test_full_context_rows_do_not_rebuild_rotary_tables(monkeypatch):
    """The pooled last block's query sits one past a full row; TL capped its table growth at
    n_ctx and so rebuilt the same tables on every such call."""
    from transformer_lens.components.abstract_attention import AbstractAttention

    model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    n = model.cfg.n_ctx
    rebuilt = []
    original = AbstractAttention._extend_rotary_embeddings
    monkeypatch.setattr(
        AbstractAttention,
        "_extend_rotary_embeddings",
        lambda self, size: rebuilt.append(size) or original(self, size),
    )
    ids, mask = random_batch(2, [n, n - 5], vocab=model.cfg.d_vocab, seed=0)
    with torch.no_grad():
        first, again = model.rewards(ids, mask), model.rewards(ids, mask)
        full, _ = model.run_with_cache(  # a hook on ln_final: the full (unpooled) path
            ids, attention_mask=mask, return_type="reward", names_filter="ln_final.hook_normalized"
        )
    assert rebuilt == [] and torch.equal(first, again)
    torch.testing.assert_close(first, full, atol=1e-5, rtol=0)


def test_padding_answer_follows_the_mask_tensor():
    from reward_lens_tl.fast_attention import has_padding

    mask = torch.ones(2, 5, dtype=torch.long)
    assert not has_padding(mask) and not has_padding(mask)
    mask[1, 4] = 0  # edited in place: its version changes, the answer is recomputed
    assert has_padding(mask)
    assert not has_padding(torch.ones(2, 5, dtype=torch.long))


def test_sweeps_reuse_rotated_prefix_keys_on_both_attention_paths():
    """Patching sweeps hand the attention pre-rotated prefix keys (``RotatedPrefixEntry``);
    a pattern hook sends the layers through TL's path, which must use the unrotated ones."""
    from reward_lens_tl.patching import activation_patching

    model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    gen = torch.Generator().manual_seed(3)
    clean = torch.randint(3, model.cfg.d_vocab, (11,), generator=gen)
    corrupted = clean.clone()
    corrupted[4:7] = torch.randint(3, model.cfg.d_vocab, (3,), generator=gen)

    def sweep(**kw):
        return activation_patching(
            model, clean, corrupted, alignment="exact", metric=lambda r: r, **kw
        ).values

    fast, plain = sweep(), sweep(reuse_prefix=False)
    for layer in range(model.cfg.n_layers):
        model.add_hook(f"blocks.{layer}.attn.hook_pattern", lambda x, hook: x)
    try:
        tl_path = sweep()
    finally:
        model.reset_hooks()
    torch.testing.assert_close(fast, plain, atol=1e-5, rtol=0)
    torch.testing.assert_close(tl_path, plain, atol=1e-5, rtol=0)


def expanded_prefix_cache(model, prefix_ids, n, shared):
    """A frozen cache of `prefix_ids` for a batch of `n`: one row expanded (stride 0, the
    shared-prefix path) or the same rows copied (the concatenating path)."""
    from transformer_lens.cache.key_value_cache_entry import TransformerLensKeyValueCacheEntry

    from reward_lens_tl.fast_attention import RotatedPrefixEntry

    kv = TransformerLensKeyValueCache.init_cache(model.cfg, model.cfg.device, 1)
    with torch.no_grad():
        model(
            prefix_ids,
            attention_mask=torch.ones_like(prefix_ids),
            past_kv_cache=kv,
            return_type=None,
            stop_at_layer=model.cfg.n_layers,
        )

    def grow(t):
        t = t.expand(n, *t.shape[1:])
        return t if shared else t.contiguous()

    entries: list[TransformerLensKeyValueCacheEntry] = []
    for block, e in zip(model.blocks, kv.entries, strict=True):
        rotated = None
        if model.cfg.positional_embedding_type == "rotary":
            rotated = grow(block.attn.apply_rotary(e.past_keys, 0, None))
        entries.append(RotatedPrefixEntry(grow(e.past_keys), grow(e.past_values), True, rotated))
    mask = torch.ones(n, prefix_ids.shape[1], dtype=torch.long)
    return TransformerLensKeyValueCache(entries, mask, frozen=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("family", FAMILIES)
def test_shared_prefix_attention_equals_attention_over_the_whole_sequence(family, dtype):
    """Rows continuing one cached prefix (a token sweep's candidates) attend to it through
    `shared_prefix_z` — the prefix never expanded — and give what attention over the
    concatenated keys gives, right-padded continuations included; the full sequences scored
    from scratch agree too."""
    from reward_lens_tl import fast_attention

    model = HookedRewardModel.from_pretrained(tiny_reward_model(family), dtype=dtype)
    prefix, _ = random_batch(1, [7], seed=4, low=6)
    tails, mask = random_batch(3, [4, 2, 3], seed=5, low=6, padding_side="right")
    calls = []
    original = fast_attention.shared_prefix_z
    residual = dict(return_type=None, stop_at_layer=model.cfg.n_layers)  # every family alike

    def counting(*args):
        calls.append(args[0].shape[0])
        return original(*args)

    outs = {}
    for shared in (True, False):
        cache = expanded_prefix_cache(model, prefix, 3, shared)
        with torch.no_grad(), pytest.MonkeyPatch.context() as mp:
            mp.setattr(fast_attention, "shared_prefix_z", counting)
            outs[shared] = model(tails, past_kv_cache=cache, attention_mask=mask, **residual)
        if shared:
            global_layers = [b.attn.attn_type == "global" for b in model.blocks]
            expect = 0 if family in SOFT_CAPPED else sum(global_layers)
            assert len(calls) == expect  # every global layer, none through TL's soft-capped path
    real = mask.bool()
    tol = 1e-5 if dtype == torch.float32 else 3e-2
    torch.testing.assert_close(outs[True][real], outs[False][real], atol=tol, rtol=0)
    full_ids = torch.cat([prefix.expand(3, -1), tails], 1)
    full_mask = torch.cat([torch.ones(3, 7, dtype=torch.long), mask], 1)
    with torch.no_grad():
        whole = model(full_ids, attention_mask=full_mask, **residual)
    torch.testing.assert_close(outs[True][real], whole[:, 7:][real], atol=tol * 10, rtol=0)


@pytest.mark.parametrize("padding", ["left", "right"])
@pytest.mark.parametrize("family", FAMILIES)
def test_full_cache_through_the_explicit_path_equals_tls(family, padding, sdpa_calls):
    """A cache of every hook reads each layer's scores and pattern: they are materialised by
    `explicit_z` (no extra `[batch, head, query, key]` tensors), and every cached activation
    equals TL's own path (-inf where masked, padded query rows' patterns zero)."""
    model = HookedRewardModel.from_pretrained(tiny_reward_model(family))
    ids, mask = batch_for(family)
    if padding == "left":
        ids, mask = left_padded(ids, mask)
    sdpa_calls.clear()  # (HF's own, verifying the conversion)
    caches = []
    for fast in (True, False):
        model.set_fast_attention(fast)
        with torch.no_grad():
            caches.append(model.run_with_cache(ids, attention_mask=mask)[1])
    assert not sdpa_calls  # every layer's pattern is read
    fast_cache, tl_cache = caches
    assert fast_cache.keys() == tl_cache.keys()
    for name in tl_cache:
        a, b = fast_cache[name], tl_cache[name]
        if name.endswith("hook_attn_scores"):
            assert torch.equal(torch.isinf(a), torch.isinf(b)), name
            a, b = a.masked_fill(torch.isinf(a), 0), b.masked_fill(torch.isinf(b), 0)
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5, msg=name)


@pytest.mark.parametrize("edit", [None, "scores", "pattern", "scores_in_place"])
def test_long_full_cache_in_causal_blocks_equals_tls(edit, monkeypatch):
    """Long sequences go through `explicit_z` in blocks of queries (the masked triangle written,
    not computed); a hook editing the scores or the pattern, by a new tensor or in place,
    still sees and gets TL's whole rows."""
    from reward_lens_tl import fast_attention

    monkeypatch.setattr(fast_attention, "CAUSAL_MIN", 16)  # blocks at the tiny model's length
    model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    ids, _ = random_batch(2, [40, 40], seed=7, low=6)
    assert len(fast_attention.causal_blocks(40, 0)) == 8  # 5 queries each

    def editing(act, hook):
        if edit == "scores_in_place":
            act[:, 1, :, 0] = 0.0  # the first key visible to every query... and past the mask
            act[:, 1, 3, 20] = 2.0
            return None
        act = act.clone()
        act[:, 1, 3, 20] = 2.0  # above the diagonal: TL's softmax / product sees it
        return act

    hook_name = {"scores": "hook_attn_scores", "scores_in_place": "hook_attn_scores"}
    hooks = []
    if edit is not None:
        hooks = [(f"blocks.0.attn.{hook_name.get(edit, 'hook_pattern')}", editing)]
    caches = []
    for fast in (True, False):
        model.set_fast_attention(fast)
        with torch.no_grad(), model.hooks(fwd_hooks=hooks):
            caches.append(model.run_with_cache(ids)[1])
    fast_cache, tl_cache = caches
    for name in tl_cache:
        a, b = fast_cache[name], tl_cache[name]
        if name.endswith("hook_attn_scores") and edit is None:
            assert torch.equal(torch.isinf(a), torch.isinf(b)), name
            a, b = a.masked_fill(torch.isinf(a), 0), b.masked_fill(torch.isinf(b), 0)
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5, msg=name, equal_nan=True)
    if edit is not None:  # the edit took effect
        plain = model.run_with_cache(ids)[1]
        assert (
            plain["blocks.0.hook_attn_out"] - fast_cache["blocks.0.hook_attn_out"]
        ).abs().max() > 1e-4


def test_a_full_cache_keeps_tls_autograd_graph_on_its_output():
    """As in TL, `run_with_cache`'s output can be differentiated while gradients are enabled
    (the explicit path's in-place steps never touch what backward needs), with TL's gradients."""
    model = HookedRewardModel.from_pretrained(tiny_reward_model("qwen2"))
    ids, mask = batch_for("qwen2")
    grads = []
    for fast in (True, False):
        model.set_fast_attention(fast)
        model.zero_grad()
        out, cache = model.run_with_cache(ids, attention_mask=mask, return_type="reward")
        assert "blocks.0.attn.hook_pattern" in cache
        out.sum().backward()
        grads.append(model.blocks[0].attn.W_Q.grad.clone())
    torch.testing.assert_close(grads[0], grads[1], atol=1e-5, rtol=1e-4)
    assert grads[0].abs().max() > 0
    with torch.no_grad():
        out, _ = model.run_with_cache(ids, attention_mask=mask, return_type="reward")
    assert not out.requires_grad


@pytest.mark.parametrize("family", FAMILIES)
def test_shared_prefix_with_a_leading_part_per_row(family):
    """Rows that each see a leading part of the shared prefix (`reward_lens_tl.unfolding`: row
    t sees the first p + t cached keys) go through `shared_prefix_z` with the prefix mask and
    equal each row's own sequence scored from scratch; a pad before a real prefix key does not
    (its positions would move): TL's path."""
    from reward_lens_tl import fast_attention

    model = HookedRewardModel.from_pretrained(tiny_reward_model(family))
    prefix, _ = random_batch(1, [7], seed=4, low=6)
    tail, _ = random_batch(1, [2], seed=5, low=6)
    seen = torch.tensor([3, 5, 7])
    cache = expanded_prefix_cache(model, prefix, 3, True)
    cache.previous_attention_mask = (torch.arange(7)[None] < seen[:, None]).long()
    calls = []
    original = fast_attention.shared_prefix_z

    def counting(*args):
        calls.append(args[0].shape[0])
        return original(*args)

    residual = dict(return_type=None, stop_at_layer=model.cfg.n_layers)
    tails = tail.expand(3, -1)
    with torch.no_grad(), pytest.MonkeyPatch.context() as mp:
        mp.setattr(fast_attention, "shared_prefix_z", counting)
        out = model(tails, past_kv_cache=cache, attention_mask=torch.ones_like(tails), **residual)
    global_layers = sum(b.attn.attn_type == "global" for b in model.blocks)
    assert len(calls) == (0 if family in SOFT_CAPPED else global_layers)
    for row, n in enumerate(seen.tolist()):
        ids = torch.cat([prefix[:, :n], tail], 1)
        with torch.no_grad():
            whole = model(ids, **residual)
        torch.testing.assert_close(out[row], whole[0, n:], atol=1e-5, rtol=0)
    assert fast_attention.leading_ones(cache.previous_attention_mask)
    assert not fast_attention.leading_ones(torch.tensor([[0, 1, 1]]))
