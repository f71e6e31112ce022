"""Memory checked before it is spent: a forward or a cache that cannot fit is refused up front.

Used by `reward_lens_tl.model` and the streaming analyses; its one public name is
`LargeCacheWarning`.

A forward of a `[batch, pos]` batch holds, per layer, the residual stream and its normed copy,
the attention's queries, keys, values and (on TransformerLens's explicit path) its
`[batch, head, pos, pos]` scores, and the MLP's hidden activations; `run_with_cache` also keeps
every cached activation until it returns. `forward_bytes` and `cache_bytes` estimate these from
the shapes and the dtype alone (a lower bound for the forward: one layer's working set, one copy
of each), `available_bytes` reads what the device has free, and `check_fits` refuses with
`MemoryEstimateError` when the estimate exceeds it, before any allocation, naming the estimate,
the memory available and the fix; a cache that fits but takes more than `WARN_SHARE` of the free
memory is announced with `LargeCacheWarning` (its size, the attention's share, how to cache
less). Estimates below `CHECK_ABOVE` bytes are never checked (no
read of the system's memory on every small forward).

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.zoo import zoo_path
    >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    >>> forward_bytes(model.cfg, 8, 64) < 10 * 2**20        # a small batch: a few MiB
    True
    >>> every = cache_bytes(model, 8, 64)                      # run_with_cache(ids), every hook
    >>> resid = cache_bytes(model, 8, 64, lambda n: n.endswith("hook_resid_post"))
    >>> every > 10 * resid > 0
    True
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch

from .errors import MemoryEstimateError

__all__ = ["LargeCacheWarning"]

#: Estimates below this many bytes are not checked against the free memory.
CHECK_ABOVE = 1 << 30

#: A cache that fits but takes more than this share of the free memory is announced.
WARN_SHARE = 0.25


class LargeCacheWarning(UserWarning):
    """A `run_with_cache` that will fit, but take a large share of the free memory.

    Said before anything is allocated, with the size, the share the attention scores and
    patterns take (they grow with the square of the length) and how to cache less.

    Examples:
        >>> import warnings
        >>> issubclass(LargeCacheWarning, UserWarning)
        True
    """


_PER_POSITION_D_MODEL = re.compile(
    r"(hook_embed|hook_pos_embed|hook_resid_pre|hook_resid_mid|hook_resid_post|hook_attn_out|"
    r"hook_mlp_out|hook_normalized|hook_attn_in|hook_mlp_in|hook_q_input|hook_k_input|"
    r"hook_v_input|hook_tokens)$"
)


def forward_bytes(cfg: Any, batch: int, n_pos: int, dtype: torch.dtype | None = None) -> int:
    """A lower bound on one forward's working set: one layer's activations, one copy each.

    The residual stream and its normed copy, queries/keys/values and the attention output, one
    `[batch, head, pos, pos]` score matrix, and the MLP's hidden activations.

    Args:
        cfg: The model's TransformerLens config.
        batch: Rows.
        n_pos: Positions.
        dtype: The activations' dtype (default `cfg.dtype`).

    Returns:
        Bytes.

    Examples:
        >>> from transformer_lens import HookedTransformerConfig
        >>> cfg = HookedTransformerConfig(n_layers=1, d_model=64, n_ctx=64, d_head=16, n_heads=4,
        ...                               d_mlp=256, d_vocab=10, act_fn="relu")
        >>> forward_bytes(cfg, 2, 8)   # 4 bytes × 2 × 8 × (2·64 + 4·64 + 4·8 + 256)
        43008
    """
    size = torch.finfo(dtype or cfg.dtype).bits // 8
    d_mlp = cfg.d_mlp or 0
    per_position = 2 * cfg.d_model + 4 * cfg.n_heads * cfg.d_head + cfg.n_heads * n_pos + d_mlp
    return size * batch * n_pos * per_position


def hook_elements(name: str, cfg: Any, n_pos: int) -> int:
    """Elements per row of the activation at hook `name` (TransformerLens's hook names).

    Args:
        name: The hook name.
        cfg: The model's config.
        n_pos: Positions.

    Returns:
        Elements per row (scores and patterns are `head × pos × pos`; unknown hooks count as a
        residual, `pos × d_model`).

    Examples:
        >>> from transformer_lens import HookedTransformerConfig
        >>> cfg = HookedTransformerConfig(n_layers=1, d_model=64, n_ctx=64, d_head=16, n_heads=4,
        ...                               d_vocab=10, attn_only=True)
        >>> hook_elements("blocks.0.attn.hook_pattern", cfg, 8), hook_elements("hook_embed", cfg, 8)
        (256, 512)
    """
    heads = cfg.n_heads
    kv_heads = getattr(cfg, "n_key_value_heads", None) or heads
    if name.endswith(("hook_attn_scores", "hook_pattern")):
        return heads * n_pos * n_pos
    if name.endswith(("hook_q", "hook_z", "hook_rot_q")):
        return n_pos * heads * cfg.d_head
    if name.endswith(("hook_k", "hook_v", "hook_rot_k")):
        return n_pos * kv_heads * cfg.d_head
    if name.endswith("hook_result"):
        return n_pos * heads * cfg.d_model
    if name.endswith(("hook_pre", "hook_post", "hook_pre_linear")):
        return n_pos * (cfg.d_mlp or cfg.d_model)
    if name.endswith("hook_scale"):
        return n_pos
    if name.endswith(("hook_reward", "hook_gate", "hook_score", "unembed.hook_out")):
        return max(n_pos * getattr(cfg, "d_vocab_out", 1), 1)
    return n_pos * cfg.d_model


#: Hooks that fire only when a config flag is set.
_FLAGGED = {
    "hook_attn_in": "use_attn_in",
    "hook_q_input": "use_split_qkv_input",
    "hook_k_input": "use_split_qkv_input",
    "hook_v_input": "use_split_qkv_input",
    "hook_mlp_in": "use_hook_mlp_in",
    "hook_result": "use_attn_result",
    "hook_tokens": "use_hook_tokens",
}


def fires(name: str, cfg: Any) -> bool:
    """Whether hook `name` fires in a forward under `cfg` (some hooks need a config flag).

    Args:
        name: The hook name.
        cfg: The model's config.

    Returns:
        Whether it fires.
    """
    flag = _FLAGGED.get(name.rsplit(".", 1)[-1])
    return flag is None or bool(getattr(cfg, flag, False))


def cache_bytes(
    model: Any,
    batch: int,
    n_pos: int,
    names_filter: str | Iterable[str] | Callable[[str], bool] | None = None,
    kept_positions: int | None = None,
    incl_bwd: bool = False,
) -> int:
    """The bytes `run_with_cache` keeps: every matching hook's activation (and gradient).

    Args:
        model: The hooked model (its `hook_dict` names the hooks).
        batch: Rows.
        n_pos: Positions.
        names_filter: TL's `names_filter` (`None`: every hook).
        kept_positions: Positions kept by `pos_slice` (default: all).
        incl_bwd: Gradients are cached too.

    Returns:
        Bytes.
    """
    size = torch.finfo(model.cfg.dtype).bits // 8
    names = [n for n in model.hook_dict if fires(n, model.cfg) and _selected(n, names_filter)]
    kept = n_pos if kept_positions is None else kept_positions
    total = 0
    for name in names:
        elements = hook_elements(name, model.cfg, n_pos)
        if not name.endswith(("hook_attn_scores", "hook_pattern")):
            elements = elements // max(n_pos, 1) * kept
        total += elements
    return size * batch * total * (2 if incl_bwd else 1)


def available_bytes(device: str | torch.device | None) -> int | None:
    """Free memory of `device`: a CUDA device's, or the system's (`MemAvailable`); else `None`.

    Args:
        device: The device.

    Returns:
        Bytes, or `None` where it cannot be read.

    Examples:
        >>> available_bytes("cpu") is None or available_bytes("cpu") > 0
        True
    """
    device = torch.device(device or "cpu")
    if device.type == "cuda" and torch.cuda.is_available():
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    if device.type != "cpu":
        return None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_fits(model: Any, tokens: torch.Tensor, what: str, cache: int = 0) -> None:
    """Refuse a forward (and cache) of `tokens` whose estimate exceeds the free memory.

    Args:
        model: The hooked model.
        tokens: The ids, `[batch, pos]`.
        what: The call, named in the message (`"rewards"`, `"run_with_cache"`).
        cache: Bytes the call also keeps (`cache_bytes`).

    Raises:
        MemoryEstimateError: The estimate exceeds the memory available.
    """
    batch, n_pos = tokens.shape[0], tokens.shape[-1]
    forward = forward_bytes(model.cfg, batch, n_pos)
    need = forward + cache
    if need < CHECK_ABOVE:
        return
    free = available_bytes(model.cfg.device)
    if free is None:
        return
    if need <= free:
        if cache > WARN_SHARE * free:
            warn_large_cache(model, batch, n_pos, cache, free)
        return
    fix = "run the batch in chunks of rows (e.g. batch_size= where the API has it)"
    if cache:
        fix += ", cache only the hooks you need (names_filter=), or fewer positions (pos_slice=)"
    raise MemoryEstimateError(
        f"{what} of a {batch} × {n_pos} batch needs at least {_gib(need)} "
        f"(forward working set {_gib(forward)}"
        + (f", cached activations {_gib(cache)}" if cache else "")
        + f"), and {model.cfg.device or 'cpu'} has {_gib(free)} available: {fix}"
    )


def warn_large_cache(model: Any, batch: int, n_pos: int, cache: int, free: int) -> None:
    """`LargeCacheWarning`: the cache's size, its attention share and how to cache less.

    Args:
        model: The hooked model.
        batch: Rows.
        n_pos: Positions.
        cache: The cache's bytes (`cache_bytes`).
        free: The memory available.
    """
    attention = cache_bytes(
        model, batch, n_pos, lambda n: n.endswith(("hook_attn_scores", "hook_pattern"))
    )
    warnings.warn(
        f"run_with_cache of a {batch} × {n_pos} batch will keep {_gib(cache)} of activations "
        f"({cache / free:.0%} of the {_gib(free)} available), {attention / max(cache, 1):.0%} "
        "of it attention scores and patterns (they grow with the square of the length). To keep "
        "less: names_filter= the hooks you read (e.g. lambda n: n.endswith('hook_resid_post')), "
        "pos_slice= the positions you read (e.g. 'reward'), or rows in smaller batches"
        + (
            "; with gradients enabled the output's autograd graph holds more beside the cache: "
            "run under torch.no_grad() unless you call backward"
            if torch.is_grad_enabled()
            else ""
        ),
        LargeCacheWarning,
        stacklevel=5,  # the caller of run_with_cache
    )


def _selected(name: str, names_filter: Any) -> bool:
    if names_filter is None:
        return True
    if isinstance(names_filter, str):
        return name == names_filter
    if callable(names_filter):
        return bool(names_filter(name))
    return name in set(names_filter)


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"
