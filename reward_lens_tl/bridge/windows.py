"""Sliding-window models on the bridge with pads inside a row: attention prepared over real tokens.

HF (and so TransformerLens 4's bridge) counts Mistral's and Gemma-2's attention window over
columns, pads included; TransformerLens 3.9 counts real tokens. With this package's padding
layout (each row's pads right after its first token, `reward_lens_tl.padding.left_pad`) a row
wider than the window then gets other rewards on the bridge (measured: Gemma-2 0.15, Mistral
0.12 off). `bridge_inputs` hands HF the masks it would build for the row without its pads: a
prepared 4-D additive mask per layer type (full causal, and causal within the window, both
counted over real tokens; HF uses a prepared mask as given) and position ids counting real
tokens. HF's own layouts (every pad before the first token, or after the last) need nothing and
are passed through unchanged, as is every batch of a model without a window.

Examples:
    >>> import torch
    >>> from reward_lens_tl.bridge import BridgeRewardModel
    >>> from reward_lens_tl.padding import left_pad
    >>> from reward_lens_tl.testing import tiny_reward_model
    >>> hf = tiny_reward_model("gemma2")          # a window of 4
    >>> model = BridgeRewardModel.boot(hf)
    >>> rows = [[90, 89, 19, 76, 89, 89, 30, 31], [90, 89, 19, 76, 89]]
    >>> alone = torch.cat([hf(input_ids=torch.tensor([r])).logits[:, 0] for r in rows])
    >>> bool(torch.allclose(model.rewards(*left_pad(rows, 0)), alone, atol=1e-5))
    True
"""

from __future__ import annotations

from typing import Any

import torch
from jaxtyping import Int
from torch import Tensor

__all__ = ["bridge_inputs", "inner_pads", "sliding_window"]


def sliding_window(bridge: Any) -> int | None:
    """The checkpoint's attention window, or `None` when no layer slides.

    Args:
        bridge: A `TransformerBridge` (its `original_model.config` is read).

    Returns:
        The window, in tokens.

    Examples:
        >>> from reward_lens_tl.bridge import boot_reward_bridge
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> sliding_window(boot_reward_bridge(tiny_reward_model("mistral")))
        5
    """
    config = bridge.original_model.config
    window = getattr(config, "sliding_window", None)
    if not window or getattr(config, "use_sliding_window", True) is False:
        return None
    return int(window)


def inner_pads(attention_mask: Int[Tensor, "batch pos"]) -> bool:
    """Whether some row has a pad with real tokens on both sides (this package's layout).

    Args:
        attention_mask: `[batch, pos]`, nonzero at real tokens.

    Returns:
        `True` for pads inside a row; `False` for HF's left or right padding, or none.

    Examples:
        >>> import torch
        >>> inner_pads(torch.tensor([[1, 0, 1]])), inner_pads(torch.tensor([[0, 1, 1]]))
        (True, False)
    """
    real = attention_mask != 0
    before = real.long().cummax(-1).values.bool()
    after = real.flip(-1).long().cummax(-1).values.flip(-1).bool()
    return bool((~real & before & after).any())


def bridge_inputs(bridge: Any, attention_mask: Tensor | None) -> dict[str, Any]:
    """The bridge call's `attention_mask` (and `position_ids`) for this batch (module doc).

    Args:
        bridge: The `TransformerBridge`.
        attention_mask: `[batch, pos]`, nonzero at real tokens, or `None`.

    Returns:
        `{"attention_mask": attention_mask}`, or for a sliding-window model with pads inside a
        row wider than the window, the prepared masks (a dict by layer type where the layers
        differ) and `position_ids`.

    Examples:
        >>> import torch
        >>> from reward_lens_tl.bridge import boot_reward_bridge
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> bridge = boot_reward_bridge(tiny_reward_model("mistral"))   # a window of 5
        >>> mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 0, 0, 1, 1, 1]])
        >>> prepared = bridge_inputs(bridge, mask)
        >>> tuple(prepared["attention_mask"].shape), prepared["position_ids"][1].tolist()
        ((2, 1, 6, 6), [0, 0, 0, 1, 2, 3])
    """
    window = sliding_window(bridge)
    if (
        attention_mask is None
        or window is None
        or attention_mask.shape[-1] <= window
        or not inner_pads(attention_mask)
    ):
        return {"attention_mask": attention_mask}
    real = attention_mask != 0
    positions = (real.long().cumsum(-1) - 1).clamp(min=0)
    query, key = positions[:, :, None], positions[:, None, :]
    causal = real[:, None, :] & (key <= query)
    dtype = bridge.cfg.dtype if bridge.cfg.dtype.is_floating_point else torch.float32
    masks = {
        "full_attention": _additive(causal, dtype),
        "sliding_attention": _additive(causal & (query - key < window), dtype),
    }
    layer_types = getattr(bridge.original_model.config, "layer_types", None)
    prepared: Any = masks if layer_types else masks["sliding_attention"]
    return {"attention_mask": prepared, "position_ids": positions}


def _additive(allowed: Tensor, dtype: torch.dtype) -> Tensor:
    """`[batch, 1, query, key]`: 0 where attention is allowed, the dtype's minimum elsewhere."""
    out = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    return out.masked_fill(~allowed, torch.finfo(dtype).min)[:, None]
