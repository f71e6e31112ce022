"""The TransformerBridge as a reward model the read-out analyses take (the backend protocol's cut).

The package's read-out analyses (`reward_lens_tl.lens`, `reward_lens_tl.attribution`) are written
against a small surface of the model: `cfg`, `blocks`, `W_U`/`b_U`, `ln_final`, `hooks`,
`run_with_cache(..., return_type="reward", names_filter=...)` whose cache holds `hook_reward`
(the pooled head output `[batch, n_objectives]`), `check_tokens`, `pool_positions`,
`n_objectives`, `objective_names`, `scored_head`. `HookedRewardModel` (TransformerLens 3.9) has
it natively; `BridgeRewardModel` gives a TransformerLens 4 bridge (`boot_reward_bridge`) the same
surface, so those analyses run on either backend without a branch, with the same numbers
(tests/tl4/test_analyses.py). Everything else is the bridge's own (`run_with_hooks`,
`to_str_tokens`, TransformerLens's `patching` utilities, ...).

Examples:
    >>> from reward_lens_tl.bridge import BridgeRewardModel
    >>> from reward_lens_tl.lens import reward_lens
    >>> from reward_lens_tl.zoo import zoo_path
    >>> model = BridgeRewardModel.boot(zoo_path("scalar"))
    >>> ids = torch.tensor([[1, 4, 27, 71, 6, 5, 40, 6, 2]])
    >>> lens = reward_lens(model, ids)
    >>> bool(torch.allclose(lens.values[-1], model.rewards(ids), atol=1e-5))  # ends at the reward
    True
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from ..errors import (
    ArgumentTypeError,
    BridgeUnsupportedError,
    InvalidArgumentError,
    ShapeMismatchError,
)
from .boot import _pad_token_id, boot_reward_bridge, bridge_rewards, reward_positions

__all__ = ["BridgeRewardModel"]


class BridgeRewardModel:
    """A reward model on TransformerLens 4's bridge with the surface the read-out analyses use.

    Attribute lookups the class does not define go to the bridge (`cfg`, `blocks`, `W_U`,
    `hooks`, `run_with_hooks`, ...).

    Args:
        bridge: A bridge from `boot_reward_bridge`.

    Examples:
        >>> from reward_lens_tl.bridge import BridgeRewardModel, boot_reward_bridge
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = BridgeRewardModel(boot_reward_bridge(tiny_reward_model("llama")))
        >>> model.n_objectives, model.objective_names, model.cfg.n_layers
        (1, ('reward',), 2)
    """

    #: No gated (ArmoRM-style) head and no scored (non-linear) head on this backend.
    gating = None
    scored_head = False

    def __init__(self, bridge: Any):
        """Wrap `bridge` (nothing is copied)."""
        self.bridge = bridge

    @classmethod
    def boot(cls, path_or_model: str | Path | nn.Module, **options: Any) -> BridgeRewardModel:
        """`BridgeRewardModel(boot_reward_bridge(path_or_model, **options))`.

        Args:
            path_or_model: A checkpoint directory, or an HF `*ForSequenceClassification` model.
            **options: `boot_reward_bridge`'s keywords (`dtype`, `device`, ...).

        Returns:
            The reward model.

        Examples:
            >>> from reward_lens_tl.bridge import BridgeRewardModel
            >>> from reward_lens_tl.testing import tiny_reward_model
            >>> BridgeRewardModel.boot(tiny_reward_model("gpt2")).cfg.n_layers
            2
        """
        return cls(boot_reward_bridge(path_or_model, **options))

    def __getattr__(self, name: str) -> Any:
        """The bridge's attribute `name` (a post-norm model's `blocks` refused: see below)."""
        if name == "bridge":  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        if name == "blocks" and _post_norms(self.bridge):
            raise BridgeUnsupportedError(
                "per-component analyses (direct attribution) of a model with post-norms "
                "(Gemma-2) are not supported on the TransformerBridge backend yet: the bridge's "
                "config does not report the post-norms and their weights are stored as offsets, "
                "so the parts would not add up. Use the default backend (HookedRewardModel, "
                "TransformerLens 3.9) for them; the reward lens runs here, and the bridge's own "
                "blocks are model.bridge.blocks"
            )
        return getattr(self.bridge, name)

    @property
    def ln_final(self) -> _AppliedNorm:
        """The final norm as the read-out sees it (`readout.effective_head`).

        Its `w` is the weight it applies: `1 + w` where the norm stores an offset (Gemma's).
        """
        offset = bool(getattr(self.bridge.cfg, "rmsnorm_uses_offset", False))
        return _AppliedNorm(self.bridge.ln_final, offset)

    @property
    def pad_token_id(self) -> int | None:
        """The checkpoint's pad id (where pair batches pad; HF's reading rule skips it)."""
        return _pad_token_id(self.bridge)

    @property
    def n_objectives(self) -> int:
        """The reward head's width (its columns: one per objective)."""
        return int(self.bridge.W_U.shape[1])

    @property
    def objective_names(self) -> tuple[str, ...]:
        """`("reward",)` for a scalar head, else `objective_0`, `objective_1`, ..."""
        if self.n_objectives == 1:
            return ("reward",)
        return tuple(f"objective_{i}" for i in range(self.n_objectives))

    @property
    def is_scalar(self) -> bool:
        """Whether the head has one column."""
        return self.n_objectives == 1

    def check_tokens(
        self, input_ids: Any, attention_mask: Tensor | None = None
    ) -> Int[Tensor, "batch pos"]:
        """`input_ids` as a `[batch, pos]` id tensor on the model's device, checked.

        Args:
            input_ids: Token ids.
            attention_mask: `[batch, pos]`, or `None`.

        Returns:
            The ids.

        Raises:
            ArgumentTypeError: Not an integer tensor.
            ShapeMismatchError: Not `[batch, pos]`, or a mask of another shape.
            InvalidArgumentError: An id outside the vocabulary.

        Examples:
            >>> from reward_lens_tl.bridge import BridgeRewardModel
            >>> from reward_lens_tl.testing import tiny_reward_model
            >>> model = BridgeRewardModel.boot(tiny_reward_model("llama"))
            >>> model.check_tokens(torch.tensor([[1, 5, 6]])).shape
            torch.Size([1, 3])
        """
        if not isinstance(input_ids, Tensor) or input_ids.is_floating_point():
            raise ArgumentTypeError(
                f"input_ids must be an integer tensor [batch, pos], got {type(input_ids).__name__}"
            )
        if input_ids.dim() != 2:
            shape = tuple(input_ids.shape)
            raise ShapeMismatchError(f"input_ids must be [batch, pos], got {shape}")
        if attention_mask is not None and attention_mask.shape != input_ids.shape:
            raise ShapeMismatchError(
                f"attention_mask {tuple(attention_mask.shape)} does not match input_ids "
                f"{tuple(input_ids.shape)}"
            )
        vocab = int(self.bridge.cfg.d_vocab)
        if input_ids.numel() and (int(input_ids.min()) < 0 or int(input_ids.max()) >= vocab):
            raise InvalidArgumentError(
                f"token ids must lie in [0, {vocab}): got {int(input_ids.min())} to "
                f"{int(input_ids.max())}"
            )
        return input_ids.to(self.bridge.cfg.device)

    def pool_positions(
        self,
        tokens: Int[Tensor, "batch pos"],
        attention_mask: Tensor | None = None,
        positions: Any = None,
    ) -> Int[Tensor, " batch"]:
        """Where each row is read: HF's rule (`reward_positions`), or `positions` given.

        Args:
            tokens: The token ids.
            attention_mask: Unused by HF's rule (the last token that is not the pad id), kept
                for the protocol's signature.
            positions: One position per row, or `None`.

        Returns:
            One position per row.

        Raises:
            ShapeMismatchError: `positions` not one per row.

        Examples:
            >>> from reward_lens_tl.bridge import BridgeRewardModel
            >>> from reward_lens_tl.testing import tiny_reward_model
            >>> model = BridgeRewardModel.boot(tiny_reward_model("llama"))   # pad id 0
            >>> model.pool_positions(torch.tensor([[1, 5, 6, 0], [1, 5, 6, 7]])).tolist()
            [2, 3]
        """
        if positions is None:
            return reward_positions(self.bridge, tokens)
        pos = torch.as_tensor(positions, device=tokens.device).reshape(-1)
        if pos.numel() != tokens.shape[0]:
            raise ShapeMismatchError(f"{pos.numel()} positions for {tokens.shape[0]} rows")
        return pos

    def run_with_cache(
        self,
        input_ids: Int[Tensor, "batch pos"],
        *,
        attention_mask: Tensor | None = None,
        return_type: str | None = "logits",
        names_filter: Any = None,
        **kwargs: Any,
    ) -> tuple[Tensor, Any]:
        """The bridge's `run_with_cache`, with `hook_reward` (the pooled head output) added.

        Args:
            input_ids: Token ids `[batch, pos]`.
            attention_mask: `[batch, pos]`, or `None`.
            return_type: `"reward"`: the pooled rewards (`[batch]` for a scalar head);
                anything else: the reward at every position `[batch, pos, n_objectives]`.
            names_filter: The hook names to cache (`hook_reward` is always there).
            **kwargs: Passed to the bridge.

        Returns:
            `(output, cache)`.

        Examples:
            >>> from reward_lens_tl.bridge import BridgeRewardModel
            >>> from reward_lens_tl.testing import tiny_reward_model
            >>> model = BridgeRewardModel.boot(tiny_reward_model("llama"))
            >>> rewards, cache = model.run_with_cache(
            ...     torch.tensor([[1, 5, 6, 7]]), return_type="reward",
            ...     names_filter=["ln_final.hook_scale"])
            >>> sorted(cache.keys()), rewards.shape
            (['hook_reward', 'ln_final.hook_scale'], torch.Size([1]))
        """
        tokens = self.check_tokens(input_ids, attention_mask)
        if isinstance(names_filter, str):
            names_filter = [names_filter]
        wanted = names_filter
        if names_filter is not None and not callable(names_filter):
            wanted = [n for n in names_filter if n != "hook_reward"]
        out, cache = self.bridge.run_with_cache(
            tokens, attention_mask=attention_mask, names_filter=wanted, **kwargs
        )
        rows = torch.arange(out.shape[0], device=out.device)
        pooled = out[rows, self.pool_positions(tokens, attention_mask).to(out.device)]
        cache.cache_dict["hook_reward"] = pooled
        if return_type == "reward":
            return (pooled[:, 0] if self.is_scalar else pooled), cache
        return out, cache

    def rewards(
        self,
        input_ids: Int[Tensor, "batch pos"],
        attention_mask: Tensor | None = None,
    ) -> Float[Tensor, " batch"] | Float[Tensor, "batch n_objectives"]:
        """Pooled rewards, one per row (`[batch]` for a scalar head), without gradients.

        Args:
            input_ids: Token ids `[batch, pos]`.
            attention_mask: `[batch, pos]`, or `None`.

        Returns:
            The rewards.

        Examples:
            >>> from reward_lens_tl.bridge import BridgeRewardModel
            >>> from reward_lens_tl.testing import tiny_reward_model
            >>> model = BridgeRewardModel.boot(tiny_reward_model("llama"))
            >>> model.rewards(torch.tensor([[1, 5, 6, 7], [1, 5, 6, 0]])).shape
            torch.Size([2])
        """
        tokens = self.check_tokens(input_ids, attention_mask)
        with torch.no_grad():
            return bridge_rewards(self.bridge, tokens, attention_mask)


def _post_norms(bridge: Any) -> bool:
    """Whether the bridge's blocks hold post-norms (`ln1_post`, Gemma-2's layout)."""
    return any(hasattr(block, "ln1_post") for block in bridge.blocks)


class _AppliedNorm:
    """A norm module seen through the weight it applies: `w` (`1 + w` with an offset), `b`."""

    def __init__(self, norm: nn.Module, offset: bool):
        self._norm, self._offset = norm, offset

    @property
    def w(self) -> Tensor | None:
        w = getattr(self._norm, "w", None)
        return None if w is None else (w + 1.0 if self._offset else w)

    @property
    def b(self) -> Tensor | None:
        return getattr(self._norm, "b", None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._norm, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._norm(*args, **kwargs)
