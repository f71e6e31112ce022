"""A post-norm (Gemma-2) bridge as the per-component analyses read it: `cfg` and `blocks` views.

Gemma-2 normalises each sublayer's output before adding it to the residual (`ln1_post`,
`ln2_post`). TransformerLens 3.9 reports this in `cfg.use_normalization_before_and_after` and
keeps each norm's applied weight in `w`; TransformerLens 4's bridge has the two norms in every
block but leaves that flag `False`, and its `w` is Gemma's stored offset (the norm applies
`1 + w`: `cfg.rmsnorm_uses_offset`). `post_norm_view` reads both the way 3.9 does, so
`reward_lens_tl.attribution` freezes each post-norm's scale and the parts add up to the reward.
The rest already agrees: the bridge's `hook_attn_out`/`hook_mlp_out` are the post-norms' outputs
(`ln1_post.hook_out`, `ln2_post.hook_out`) and its `hook_scale` is the same denominator
`sqrt(mean(x²) + eps)`.

Examples:
    >>> import torch
    >>> from reward_lens_tl.bridge import boot_reward_bridge
    >>> from reward_lens_tl.bridge.post_norms import post_norm_view
    >>> from reward_lens_tl.testing import tiny_reward_model
    >>> bridge = boot_reward_bridge(tiny_reward_model("gemma2"))
    >>> bridge.cfg.use_normalization_before_and_after, bridge.cfg.rmsnorm_uses_offset
    (False, True)
    >>> post_norm_view(bridge, "cfg").use_normalization_before_and_after
    True
    >>> norm = post_norm_view(bridge, "blocks")[0].ln1_post
    >>> bool(torch.equal(norm.w, bridge.blocks[0].ln1_post.w + 1))  # the weight it applies
    True
    >>> post_norm_view(boot_reward_bridge(tiny_reward_model("llama")), "blocks") is None
    True
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from torch import Tensor, nn

__all__ = ["AppliedNorm", "has_post_norms", "post_norm_view"]

#: The norms of a block, seen through the weight they apply.
_NORMS = ("ln1", "ln2", "ln1_post", "ln2_post")


class AppliedNorm:
    """A norm module seen through the weight it applies: `w` (`1 + w` with an offset), `b`.

    Every other attribute (and calling it) is the module's own.

    Args:
        norm: The norm module (its stored weight is `w`).
        offset: Whether it applies `1 + w` (Gemma's norms).

    Examples:
        >>> import torch
        >>> norm = torch.nn.RMSNorm(3)
        >>> norm.w = torch.zeros(3)   # stored as an offset from 1
        >>> AppliedNorm(norm, offset=True).w.tolist(), AppliedNorm(norm, offset=False).w.tolist()
        ([1.0, 1.0, 1.0], [0.0, 0.0, 0.0])
    """

    def __init__(self, norm: nn.Module, offset: bool):
        """View `norm` (nothing is copied)."""
        self._norm, self._offset = norm, offset

    @property
    def w(self) -> Tensor | None:
        """The weight the norm multiplies by (`None` without one)."""
        w = getattr(self._norm, "w", None)
        return None if w is None else (w + 1.0 if self._offset else w)

    @property
    def b(self) -> Tensor | None:
        """The norm's bias (`None` without one)."""
        return getattr(self._norm, "b", None)

    def __getattr__(self, name: str) -> Any:
        """The module's attribute `name`."""
        if name in ("_norm", "_offset"):  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self._norm, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the module."""
        return self._norm(*args, **kwargs)


def has_post_norms(bridge: Any) -> bool:
    """Whether the bridge's blocks hold post-norms (`ln1_post`, Gemma-2's layout).

    Args:
        bridge: A bridge from `boot_reward_bridge`.

    Returns:
        Whether any block has `ln1_post`.

    Examples:
        >>> from reward_lens_tl.bridge import boot_reward_bridge
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> [has_post_norms(boot_reward_bridge(tiny_reward_model(f))) for f in ("gemma2", "gpt2")]
        [True, False]
    """
    return any(hasattr(block, "ln1_post") for block in bridge.blocks)


def post_norm_view(bridge: Any, name: str) -> Any:
    """TransformerLens 3.9's reading of the bridge's `cfg` or `blocks` for a post-norm model.

    Args:
        bridge: A bridge from `boot_reward_bridge`.
        name: The attribute asked for.

    Returns:
        A `_PostNormConfig` or `_PostNormBlocks` view, or `None` when the bridge's own attribute
        reads the same (not a post-norm model, or another name).

    Examples:
        >>> from reward_lens_tl.bridge import boot_reward_bridge
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> bridge = boot_reward_bridge(tiny_reward_model("gemma2"))
        >>> blocks = post_norm_view(bridge, "blocks")
        >>> len(blocks), type(blocks[0].ln2_post).__name__, post_norm_view(bridge, "W_U")
        (2, 'AppliedNorm', None)
    """
    if name not in ("cfg", "blocks") or not has_post_norms(bridge):
        return None
    if name == "cfg":
        return _PostNormConfig(bridge.cfg)
    return _PostNormBlocks(bridge.blocks, bool(getattr(bridge.cfg, "rmsnorm_uses_offset", False)))


class _PostNormConfig:
    """The bridge's config with `use_normalization_before_and_after = True`; the rest is its own.

    Setting an attribute sets it on the bridge's config.
    """

    use_normalization_before_and_after = True

    def __init__(self, cfg: Any):
        object.__setattr__(self, "_cfg", cfg)

    def __getattr__(self, name: str) -> Any:
        if name == "_cfg":  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self._cfg, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._cfg, name, value)

    def __repr__(self) -> str:
        return f"PostNormConfig({self._cfg!r})"


class _PostNormBlock:
    """A bridge block whose norms (`ln1`, `ln2`, `ln1_post`, `ln2_post`) are `AppliedNorm`s."""

    def __init__(self, block: nn.Module, offset: bool):
        self._block, self._offset = block, offset

    def __getattr__(self, name: str) -> Any:
        if name in ("_block", "_offset"):  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        value = getattr(self._block, name)
        if name in _NORMS:
            return AppliedNorm(value, bool(getattr(value, "uses_weight_offset", self._offset)))
        return value

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._block(*args, **kwargs)

    def __repr__(self) -> str:
        return f"PostNormBlock({self._block!r})"


class _PostNormBlocks(Sequence):
    """The bridge's blocks, each seen as a `_PostNormBlock`."""

    def __init__(self, blocks: Sequence[nn.Module], offset: bool):
        self._blocks, self._offset = blocks, offset

    def __len__(self) -> int:
        return len(self._blocks)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [_PostNormBlock(b, self._offset) for b in list(self._blocks)[index]]
        return _PostNormBlock(self._blocks[index], self._offset)

    def __iter__(self) -> Iterator[_PostNormBlock]:
        return (_PostNormBlock(b, self._offset) for b in self._blocks)
