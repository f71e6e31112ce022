"""`hook_resid_mid` on the bridge: an edit there reaches the residual stream, as on TL 3.9.

On TransformerLens 4.3's bridge, `blocks.L.hook_resid_mid` is an alias of `blocks.L.ln2.hook_in`,
the input of the HF layer's second norm. The HF layer computes `residual = hidden + attn_out`,
hands that tensor to the norm, and adds the MLP's output to `residual` itself, so a hook that
returns a new tensor there changes only what the MLP reads: the residual stream goes on
unedited. Measured on the zoo's scalar model, adding 5.0 at `blocks.1.hook_resid_mid` moved the
reward from -7.42 to -7.32, where TransformerLens 3.9 (and the same edit written at
`hook_attn_out`) moves it to about -4.7. TransformerLens's `get_act_patch_resid_mid`, a user
hook and any analysis patching there would be silently wrong.

`route_resid_mid` gives each block's hook point at that name (`ResidualHookPoint`) the meaning
TransformerLens 3.9 has: when hooks are attached, they run on a copy of the residual, and what
they leave is written back into the residual tensor the layer goes on with, so the MLP and
every later layer see the edit. The norm's input is that same tensor in every family the
bridge boots (Llama, Mistral, Qwen2, Qwen3, Gemma-2, GPT-2). Gradients flow through the write
(attribution patching at `resid_mid` works), and a point without hooks costs nothing.

Examples:
    >>> import torch
    >>> from reward_lens_tl.bridge import BridgeRewardModel
    >>> from reward_lens_tl.testing import tiny_reward_model
    >>> model = BridgeRewardModel.boot(tiny_reward_model("llama"))
    >>> ids = torch.tensor([[1, 5, 6, 7]])
    >>> def add(value, hook):
    ...     return value + 1.0
    >>> at_mid = model.run_with_hooks(ids, fwd_hooks=[("blocks.0.hook_resid_mid", add)])
    >>> at_attn = model.run_with_hooks(ids, fwd_hooks=[("blocks.0.hook_attn_out", add)])
    >>> bool(torch.allclose(at_mid, at_attn, atol=1e-5))  # resid_mid = resid_pre + attn_out
    True
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

__all__ = ["ResidualHookPoint", "route_resid_mid"]


def _hook_point_class() -> type:
    from transformer_lens.hook_points import HookPoint

    return HookPoint


def route_resid_mid(bridge: Any) -> int:
    """Make every block's `hook_resid_mid` a residual-stream hook point (see the module doc).

    Args:
        bridge: A `TransformerBridge` (`boot_reward_bridge` calls this).

    Returns:
        How many hook points were routed (one per block; 0 when already routed).

    Examples:
        >>> from reward_lens_tl.bridge import boot_reward_bridge
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> bridge = boot_reward_bridge(tiny_reward_model("gpt2"))   # routed at boot
        >>> type(bridge.hook_dict["blocks.1.hook_resid_mid"]).__name__, route_resid_mid(bridge)
        ('ResidualHookPoint', 0)
    """
    hook_dict = bridge.hook_dict
    routed = 0
    for layer in range(int(bridge.cfg.n_layers)):
        point = hook_dict.get(f"blocks.{layer}.hook_resid_mid")
        if point is None or isinstance(point, ResidualHookPoint):
            continue
        point.__class__ = ResidualHookPoint
        routed += 1
    return routed


class ResidualHookPoint(_hook_point_class()):  # type: ignore[misc]
    """A hook point whose hooks' result is written back into the tensor it was given.

    Examples:
        >>> import torch
        >>> point = ResidualHookPoint()
        >>> _ = point.add_hook(lambda x, hook: x + 1.0)
        >>> x = torch.zeros(2)
        >>> out = point(x)
        >>> out is x, x.tolist()      # the caller's tensor holds the edit
        (True, [1.0, 1.0])
    """

    def __call__(self, x: Any, *args: Any, **kwargs: Any) -> Any:
        """Run the hooks on a copy of `x`, write the result into `x`, return `x`."""
        if not isinstance(x, Tensor) or not (self._forward_hooks or self._backward_hooks):
            return super().__call__(x, *args, **kwargs)
        out = super().__call__(x.clone(), *args, **kwargs)
        if out is None or not isinstance(out, Tensor) or out.shape != x.shape:
            return out  # a hook changed the shape: TransformerLens's own error follows
        x.copy_(out)
        return x
