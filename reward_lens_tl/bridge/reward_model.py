"""The TransformerBridge as a reward model the read-out analyses take (the backend protocol's cut).

The package's read-out analyses (`reward_lens_tl.lens`, `reward_lens_tl.attribution`) are written
against a small surface of the model: `cfg`, `blocks`, `W_U`/`b_U`, `ln_final`, `hooks`,
`run_with_cache(..., return_type="reward", names_filter=...)` whose cache holds `hook_reward`
(the pooled head output `[batch, n_objectives]`), `check_tokens`, `pool_positions`,
`n_objectives`, `objective_names`, `scored_head`. `HookedRewardModel` (TransformerLens 3.9) has
it natively; `BridgeRewardModel` gives a TransformerLens 4 bridge (`boot_reward_bridge`) the same
surface, so those analyses run on either backend without a branch, with the same numbers
(tests/tl4/test_analyses.py). A TransformerLens notebook's idioms (`to_tokens`,
`to_str_tokens`, `run_with_hooks` and TransformerLens's `patching` through it, the refused
language-model ones) answer as on `HookedRewardModel` (`tl_surface`; the habits catalogue on the
bridge: tests/tl4/test_habits_bridge.py), and a batch without `attention_mask` gets the mask its
pad ids imply, as there. Everything else is the bridge's own.

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
    NotForRewardModelsError,
    RewardLensError,
    ShapeMismatchError,
    UnknownHookError,
)
from ..inputs import EncodedConversation, Prompt, Truncation, encode_checked
from ..padding import (
    check_not_padding,
    checked_positions,
    padded_slice_problem,
    padding_mask,
    reading_position_known,
    tokenizer_with_side,
    warn_if_last_is_not_read,
    warnings_silenced,
)
from .boot import _config_token_id, _pad_token_id, boot_reward_bridge, reward_positions
from .post_norms import AppliedNorm, post_norm_view
from .tl_surface import BridgeIdioms, cache_with_gradients
from .windows import bridge_inputs

__all__ = ["BridgeRewardModel"]


class BridgeRewardModel(BridgeIdioms):
    """A reward model on TransformerLens 4's bridge with the surface the read-out analyses use.

    Attribute lookups the class does not define go to the bridge (`cfg`, `blocks`, `W_U`,
    `hooks`, ...). TransformerLens's notebook idioms (`to_tokens`, `to_str_tokens`,
    `run_with_hooks`, the refused language-model ones) answer as on `HookedRewardModel`
    (`tl_surface.BridgeIdioms`).

    Args:
        bridge: A bridge from `boot_reward_bridge`.

    Examples:
        >>> from reward_lens_tl.bridge import BridgeRewardModel, boot_reward_bridge
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = BridgeRewardModel(boot_reward_bridge(tiny_reward_model("llama")))
        >>> model.n_objectives, model.objective_names, model.cfg.n_layers
        (1, ('reward',), 2)
    """

    #: No gated head here (an ArmoRM-style bridge gets `gated.GatedBridgeRewardModel`).
    gating: Any = None

    @property
    def scored_head(self) -> bool:
        """Whether the score is non-linear in the head outputs (a judge's, `bridge.judges`)."""
        return False

    #: No TransformerLens 3.9 key/value cache: sweeps score full sequences
    #: (`reward_lens_tl.capabilities`).
    supports_prefix_cache = False
    #: The HF layers under the bridge do not broadcast a batch widened by a hook mid-block.
    supports_batch_widening = False
    #: No TransformerLens 3.9 attention components (the AtP* QK fix is refused).
    supports_tl_attention = False

    def __new__(cls, bridge: Any = None, *args: Any, **kwargs: Any) -> BridgeRewardModel:
        """An ArmoRM-style bridge (with `reward_gate`) gets `gated.GatedBridgeRewardModel`."""
        if cls is BridgeRewardModel and getattr(bridge, "reward_gate", None) is not None:
            from .gated import GatedBridgeRewardModel

            cls = GatedBridgeRewardModel
        return super().__new__(cls)

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
        """The bridge's attribute `name`; a post-norm model's `cfg`/`blocks` as 3.9 reads them.

        (`post_norms.post_norm_view`: the post-norm flag set, norm weights as applied; the
        bridge's own are `model.bridge.cfg`, `model.bridge.blocks`.)
        """
        if name == "bridge":  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        view = post_norm_view(self.bridge, name)
        return getattr(self.bridge, name) if view is None else view

    @property
    def ln_final(self) -> AppliedNorm:
        """The final norm as the read-out sees it (`readout.effective_head`).

        Its `w` is the weight it applies: `1 + w` where the norm stores an offset (Gemma's).
        """
        offset = bool(getattr(self.bridge.cfg, "rmsnorm_uses_offset", False))
        return AppliedNorm(self.bridge.ln_final, offset)

    @property
    def tokenizer(self) -> Any:
        """The checkpoint's tokenizer, as `HookedRewardModel` keeps it (`None` if there is none).

        A copy whose `padding_side` is `"left"`: how `to_tokens` and `pad_batch` pad (after each
        row's first token), and what TransformerLens's `utilities.get_attention_mask` reads
        (`padding.tokenizer_with_side`). The checkpoint's own is `model.bridge.reward_tokenizer`.

        Examples:
            >>> from reward_lens_tl.bridge import BridgeRewardModel
            >>> from reward_lens_tl.zoo import zoo_path
            >>> model = BridgeRewardModel.boot(zoo_path("scalar"))
            >>> model.tokenizer.padding_side, model.bridge.reward_tokenizer.padding_side
            ('left', 'right')
        """
        own = getattr(self.bridge, "reward_tokenizer", None)
        own = own if own is not None else getattr(self.bridge, "tokenizer", None)
        if own is None:
            return None
        view = self.__dict__.get("_tokenizer_view")  # (the checkpoint's, the copy), made once
        if view is None or view[0] is not own:
            bos = getattr(self.bridge.original_model.config, "bos_token_id", None)
            view = self.__dict__["_tokenizer_view"] = (own, tokenizer_with_side(own, "left", [bos]))
        return view[1]

    def encode(
        self,
        prompt: Prompt,
        response: str,
        *,
        max_length: int | None = None,
        truncation: Truncation = "error",
        use_chat_template: bool | None = None,
    ) -> EncodedConversation:
        """Token ids for one conversation, as `HookedRewardModel.encode` (`inputs.encode_checked`).

        Args:
            prompt: The user message, or the conversation so far.
            response: The assistant's reply.
            max_length: The longest sequence (default: the model's context).
            truncation: `"error"`, `"left"`, `"right"` or `"both"`.
            use_chat_template: Use the tokenizer's chat template (default: when it has one).

        Returns:
            The `EncodedConversation`.

        Raises:
            RewardLensError: The model has no tokenizer.

        Examples:
            >>> from reward_lens_tl.bridge import BridgeRewardModel
            >>> from reward_lens_tl.zoo import zoo_path
            >>> model = BridgeRewardModel.boot(zoo_path("scalar"))
            >>> enc = model.encode("explain how to bake bread", "the oven and the flour")
            >>> round(float(model.rewards(torch.tensor([enc.ids]))[0]), 2)
            1.82
        """
        if self.tokenizer is None:
            raise RewardLensError(
                "this model has no tokenizer: boot it with tokenizer= or feed ids"
            )
        return encode_checked(
            self.tokenizer,
            prompt,
            response,
            max_length=int(self.bridge.cfg.n_ctx) if max_length is None else max_length,
            truncation=truncation,
            use_chat_template=use_chat_template,
        )

    def score(self, prompt: Prompt, response: str, **options: Any) -> Tensor:
        """The reward of one (`prompt`, `response`) pair from text (`encode`'s keywords).

        Args:
            prompt: The user message, or the conversation so far.
            response: The assistant's reply.
            **options: `encode`'s keywords.

        Returns:
            A scalar tensor for a scalar head, `[n_objectives]` otherwise.
        """
        enc = self.encode(prompt, response, **options)
        return self.rewards(torch.tensor([enc.ids]))[0]

    @property
    def pad_token_id(self) -> int | None:
        """The checkpoint's pad id (where pair batches pad; HF's reading rule skips it)."""
        return _pad_token_id(self.bridge)

    @property
    def eos_token_id(self) -> int | None:
        """The checkpoint's EOS id (where a probe finds a hand-built conversation's suffix)."""
        return _config_token_id(self.bridge, "eos_token_id")

    def objective_rewards(
        self,
        input_ids: Int[Tensor, "batch pos"],
        attention_mask: Tensor | None = None,
        *,
        grad: bool = False,
    ) -> Float[Tensor, "batch n_objectives"]:
        """Every head column where the reward is read, `[batch, n_objectives]`.

        Args:
            input_ids: Token ids `[batch, pos]`.
            attention_mask: `[batch, pos]`, or `None`.
            grad: Keep the autograd graph (as `HookedRewardModel.objective_rewards`).

        Returns:
            The head's pooled outputs.
        """
        tokens = self.check_tokens(input_ids, attention_mask)
        with torch.set_grad_enabled(grad and torch.is_grad_enabled()), reading_position_known():
            out = self.forward(tokens, return_type="objectives", attention_mask=attention_mask)
        rows = torch.arange(out.shape[0], device=out.device)
        return out[rows, self.pool_positions(tokens, attention_mask).to(out.device)]

    def pooled_rewards(
        self, input_ids: Int[Tensor, "batch pos"], attention_mask: Tensor | None = None
    ) -> Float[Tensor, " batch"] | Float[Tensor, "batch n_objectives"]:
        """The reward every analysis reads: `rewards` (the score for a gated head).

        Args:
            input_ids: Token ids `[batch, pos]`.
            attention_mask: `[batch, pos]`, or `None`.

        Returns:
            As `rewards`.
        """
        return self.rewards(input_ids, attention_mask)

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
            input_ids: Token ids, `[batch, pos]` or one sequence `[pos]` (as TransformerLens).
            attention_mask: `[batch, pos]`, or `None`.

        Returns:
            The ids.

        Raises:
            ArgumentTypeError: Not an integer tensor.
            ShapeMismatchError: Not 1-D or 2-D, or a mask of another shape.
            InvalidArgumentError: An id outside the vocabulary.

        Examples:
            >>> from reward_lens_tl.bridge import BridgeRewardModel
            >>> from reward_lens_tl.testing import tiny_reward_model
            >>> model = BridgeRewardModel.boot(tiny_reward_model("llama"))
            >>> model.check_tokens(torch.tensor([[1, 5, 6]])).shape
            torch.Size([1, 3])
            >>> model.check_tokens(torch.tensor([1, 5, 6])).shape   # one sequence
            torch.Size([1, 3])
        """
        if not isinstance(input_ids, Tensor) or input_ids.is_floating_point():
            raise ArgumentTypeError(
                f"input_ids must be an integer tensor [batch, pos], got {type(input_ids).__name__}"
            )
        if input_ids.dim() == 1:
            input_ids = input_ids[None]
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
            attention_mask: `[batch, pos]`, or `None` (inferred from the pad ids).
            positions: One position per row, or `None`; checked as `HookedRewardModel` checks
                them (`padding.checked_positions`).

        Returns:
            One position per row.

        Raises:
            InvalidArgumentError: Positions that are not integers.
            ShapeMismatchError: `positions` not one per row.
            RewardLensError: A position outside the sequence, or on padding.

        Examples:
            >>> from reward_lens_tl.bridge import BridgeRewardModel
            >>> from reward_lens_tl.testing import tiny_reward_model
            >>> model = BridgeRewardModel.boot(tiny_reward_model("llama"))   # pad id 0
            >>> model.pool_positions(torch.tensor([[1, 5, 6, 0], [1, 5, 6, 7]])).tolist()
            [2, 3]
        """
        if positions is not None:
            return checked_positions(tokens, positions, attention_mask, self.pad_token_id)
        pos = self._rule_positions(tokens, self._mask_for(tokens, attention_mask))
        check_not_padding(tokens, pos, attention_mask)
        return pos

    def _rule_positions(self, tokens: Tensor, attention_mask: Tensor | None) -> Tensor:
        """The checkpoint's own reading rule (HF's: the last token that is not the pad id)."""
        return reward_positions(self.bridge, tokens)

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
            **kwargs: Passed to the bridge; `incl_bwd=True` (with `return_type="reward"`) caches
                each row's reward gradient as `*_grad` (`tl_surface.cache_with_gradients`).

        Returns:
            `(output, cache)`.

        Raises:
            UnknownHookError: A hook name the model does not have (with the closest).
            InvalidArgumentError: A `pos_slice` that selects some row's pads.
            BridgeUnsupportedError: `incl_bwd` on a gated head.

        Without `attention_mask`, the mask is inferred from the pad ids (`infer_attention_mask`).

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
        attention_mask = self._mask_for(tokens, attention_mask)
        if isinstance(names_filter, str):
            names_filter = [names_filter]
        wanted = names_filter
        if names_filter is not None and not callable(names_filter):
            wanted = [n for n in names_filter if n != "hook_reward"]
            self.check_hook_names(wanted)
        problem = padded_slice_problem(kwargs.get("pos_slice"), attention_mask)
        if problem is not None:
            raise InvalidArgumentError(problem)
        if return_type != "reward":
            self.check_reading_position(tokens, attention_mask)
        if kwargs.pop("incl_bwd", False):
            if self.gating is not None:
                raise BridgeUnsupportedError(
                    "run_with_cache(..., incl_bwd=True) on a gated head is not wired on the "
                    "bridge: differentiate model.rewards(ids, grad=True).sum() under "
                    "model.hooks(bwd_hooks=...), or use HookedArmoRM (TransformerLens 3.9)"
                )
            out, cache = cache_with_gradients(
                self, tokens, attention_mask, wanted, return_type, **kwargs
            )
            cache.cache_dict["hook_reward"] = out[:, None]
            return out, cache
        out, cache = self.bridge.run_with_cache(
            tokens, names_filter=wanted, **kwargs, **bridge_inputs(self.bridge, attention_mask)
        )
        rows = torch.arange(out.shape[0], device=out.device)
        pooled = out[rows, self.pool_positions(tokens, attention_mask).to(out.device)]
        cache.cache_dict["hook_reward"] = pooled
        if return_type == "reward":
            return (pooled[:, 0] if self.is_scalar else pooled), cache
        return out, cache

    def __call__(self, *args: Any, **kwargs: Any) -> Tensor:
        """`forward`."""
        return self.forward(*args, **kwargs)

    def forward(
        self,
        input: Tensor,
        *,
        return_type: str | None = "logits",
        start_at_layer: int | None = None,
        pool_positions: Tensor | None = None,
        tokens: Tensor | None = None,
        attention_mask: Tensor | None = None,
        past_kv_cache: Any = None,
        **kwargs: Any,
    ) -> Tensor:
        """`HookedRewardModel`'s forward: from ids, or from a block's input residual.

        Args:
            input: Token ids `[batch, pos]`, or with `start_at_layer` the residual entering
                that block `[batch, pos, d_model]`.
            return_type: `"reward"`: the pooled rewards (`[batch]` for a scalar head);
                anything else: the reward at every position `[batch, pos, n_objectives]`.
            start_at_layer: Resume at this block (the bridge's own, exact).
            pool_positions: Where each row is read (needed from a residual without `tokens`).
            tokens: The ids of the rows (to find where they are read).
            attention_mask: `[batch, pos]`, or `None`.
            past_kv_cache: Refused: TransformerLens 3.9's key-value cache is not on the bridge.
            **kwargs: Passed to the bridge.

        Returns:
            As `return_type` says.

        Raises:
            BridgeUnsupportedError: A key-value cache; a residual without reading positions.
            NotForRewardModelsError: `return_type="loss"` or `"both"`.

        Without `attention_mask`, the mask is inferred from the pad ids (of `input`, or of
        `tokens` with `start_at_layer`), as `HookedRewardModel` infers it.

        Examples:
            >>> from reward_lens_tl.bridge import BridgeRewardModel
            >>> from reward_lens_tl.testing import tiny_reward_model
            >>> model = BridgeRewardModel.boot(tiny_reward_model("llama"))
            >>> ids = torch.tensor([[1, 5, 6, 7]])
            >>> _, cache = model.run_with_cache(ids, names_filter=["blocks.1.hook_resid_pre"])
            >>> resid = cache["blocks.1.hook_resid_pre"]
            >>> resumed = model(resid, return_type="reward", start_at_layer=1,
            ...                 pool_positions=torch.tensor([3]))
            >>> bool(torch.allclose(resumed, model.rewards(ids), atol=1e-5))
            True
        """
        if past_kv_cache is not None:
            raise BridgeUnsupportedError(
                "a key-value cache (past_kv_cache) is TransformerLens 3.9's; the bridge runs "
                "every position. Use HookedRewardModel for prefix reuse"
            )
        _check_return_type(return_type)
        if start_at_layer is None:
            input = self.check_tokens(input, attention_mask)
            tokens = input if tokens is None else tokens
        elif tokens is not None:
            tokens = self.check_tokens(tokens, attention_mask)
        attention_mask = self._mask_for(tokens, attention_mask)
        if return_type != "reward" and tokens is not None:
            self.check_reading_position(tokens, attention_mask)
        out = self._run(input, attention_mask, start_at_layer, kwargs)
        if return_type != "reward":
            return out
        if pool_positions is None:
            if tokens is None:
                raise BridgeUnsupportedError(
                    "a run from a residual (start_at_layer) needs pool_positions= or tokens= to "
                    "know where each row is read"
                )
            pool_positions = self.pool_positions(tokens, attention_mask)
        rows = torch.arange(out.shape[0], device=out.device)
        pooled = out[rows, pool_positions.to(out.device)]
        return pooled[:, 0] if self.is_scalar else pooled

    def _run(
        self, input: Tensor, attention_mask: Tensor | None, start_at_layer: Any, kwargs: dict
    ) -> Tensor:
        """The bridge's forward, with TransformerLens 3.9's meaning at the last block's edge.

        `start_at_layer=n_layers` (the bridge refuses it) is the final norm, then the head;
        `stop_at_layer=n_layers` (where the bridge runs the head too) is the last block's output.
        """
        n_layers = int(self.bridge.cfg.n_layers)
        if start_at_layer is not None and attention_mask is not None:
            kwargs.setdefault("position_ids", resumed_positions(attention_mask))
        if start_at_layer == n_layers:
            return self.bridge.unembed(self.bridge.ln_final(input))
        run = dict(kwargs, start_at_layer=start_at_layer)
        run.update(bridge_inputs(self.bridge, attention_mask))  # windows over real tokens
        if kwargs.get("stop_at_layer") != n_layers:
            return self.bridge(input, **run)
        grabbed: dict[str, Tensor] = {}

        def grab(act: Tensor, hook: Any) -> None:
            grabbed["x"] = act

        del run["stop_at_layer"]
        with self.bridge.hooks(fwd_hooks=[(f"blocks.{n_layers - 1}.hook_resid_post", grab)]):
            self.bridge(input, **run)
        return grabbed["x"]

    def _mask_for(self, tokens: Tensor | None, attention_mask: Tensor | None) -> Tensor | None:
        """`attention_mask`, or the mask the pad ids of `tokens` imply (`infer_attention_mask`)."""
        if attention_mask is not None or tokens is None:
            return attention_mask
        return self.infer_attention_mask(tokens)

    def check_reading_position(
        self, tokens: Int[Tensor, "batch pos"], attention_mask: Tensor | None = None
    ) -> None:
        """Warn (`ReadingPositionWarning`) when position `-1` is not every row's reading position.

        As `HookedRewardModel.check_reading_position`: right padding of unequal lengths makes
        `logits[:, -1]` read a pad in the shorter rows.

        Args:
            tokens: Token ids, `[batch, pos]`.
            attention_mask: `[batch, pos]`, or `None`.

        Examples:
            >>> import warnings
            >>> from reward_lens_tl.bridge import BridgeRewardModel
            >>> from reward_lens_tl.testing import tiny_reward_model
            >>> model = BridgeRewardModel.boot(tiny_reward_model("llama"))   # pad id 0
            >>> with warnings.catch_warnings(record=True) as caught:
            ...     warnings.simplefilter("always")
            ...     model.check_reading_position(torch.tensor([[1, 5, 6], [1, 5, 0]]))
            >>> [w.category.__name__ for w in caught]
            ['ReadingPositionWarning']
        """
        if self.pad_token_id is None or warnings_silenced():
            return
        positions = self.pool_positions(tokens, attention_mask)
        warn_if_last_is_not_read(positions, tokens.shape[1], self.pad_token_id)

    def infer_attention_mask(self, tokens: Int[Tensor, "batch pos"]) -> Tensor | None:
        """The mask of a padded batch given without one (`HookedRewardModel`'s rule).

        Args:
            tokens: Token ids, `[batch, pos]`.

        Returns:
            The mask, or `None` when none is needed (`padding.padding_mask`).

        Examples:
            >>> from reward_lens_tl.bridge import BridgeRewardModel
            >>> from reward_lens_tl.testing import tiny_reward_model
            >>> model = BridgeRewardModel.boot(tiny_reward_model("llama"))   # pad id 0
            >>> model.infer_attention_mask(torch.tensor([[1, 5, 6], [0, 1, 6]])).tolist()
            [[1, 1, 1], [0, 1, 1]]
        """
        config = self.bridge.original_model.config
        bos = {getattr(config, "bos_token_id", None), getattr(self.tokenizer, "bos_token_id", None)}
        return padding_mask(tokens, self.pad_token_id, bos)

    def check_hook_names(self, names: Any) -> None:
        """Refuse a hook name the bridge does not have, with the closest ones.

        Args:
            names: Hook names.

        Raises:
            UnknownHookError: An unknown name (a `KeyError`, as `HookedRewardModel` raises).
        """
        known = self.bridge.hook_dict
        for name in names:
            if name not in known:
                import difflib

                close = difflib.get_close_matches(name, list(known), n=3)
                raise UnknownHookError(
                    f"no hook point {name!r} on this model; closest: {close}. "
                    "All names: list(model.hook_dict)"
                )

    @property
    def context_level(self) -> int:
        """The bridge's hook context level (hooks added at a level are removed with it)."""
        return int(getattr(self.bridge, "context_level", 0))

    @context_level.setter
    def context_level(self, value: int) -> None:
        self.bridge.context_level = value

    def rewards(
        self,
        input_ids: Int[Tensor, "batch pos"],
        attention_mask: Tensor | None = None,
        *,
        grad: bool = False,
    ) -> Float[Tensor, " batch"] | Float[Tensor, "batch n_objectives"]:
        """Pooled rewards, one per row (`[batch]` for a scalar head; a gated head's score).

        Args:
            input_ids: Token ids `[batch, pos]`.
            attention_mask: `[batch, pos]`, or `None`.
            grad: Keep the autograd graph (default: none, as `HookedRewardModel.rewards`).

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
        with torch.set_grad_enabled(grad and torch.is_grad_enabled()):
            return self.forward(tokens, return_type="reward", attention_mask=attention_mask)


def resumed_positions(attention_mask: Tensor) -> Int[Tensor, "batch pos"]:
    """The position ids of a run from a residual (`start_at_layer`) with `attention_mask`.

    The bridge derives positions from the mask in a run from token ids (a real token's is the
    number of real tokens before it; rows whose mask moves no real token keep `arange`), but
    feeds a residual as embeddings, where HF counts every column: with pads before a real token
    (this package's layout, or HF's left padding) the rotary positions, and the rewards, would
    differ from the run from ids. Passing these keeps the two runs equal.

    Args:
        attention_mask: `[batch, pos]`, nonzero at real tokens.

    Returns:
        The position ids, `[batch, pos]`.

    Examples:
        >>> resumed_positions(torch.tensor([[1, 0, 0, 1, 1], [1, 1, 1, 1, 0]])).tolist()
        [[0, 0, 0, 1, 2], [0, 1, 2, 3, 4]]
    """
    mask = attention_mask.long()
    derived = (mask.cumsum(1) - 1).clamp(min=0)
    columns = torch.arange(mask.shape[1], device=mask.device).expand_as(derived)
    moved = ((derived != columns) & (mask != 0)).any(1, keepdim=True)
    return torch.where(moved, derived, columns)


_RETURN_TYPES = ("logits", "objectives", "reward", None)


def _check_return_type(return_type: Any) -> None:
    """Refuse TransformerLens's language-model losses and unknown return types."""
    if return_type in ("loss", "both"):
        raise NotForRewardModelsError(
            "reward models have no language-model loss; use return_type='reward' (or "
            "'logits' for the reward at every position)"
        )
    if return_type not in _RETURN_TYPES:
        raise InvalidArgumentError(
            f"return_type must be one of {_RETURN_TYPES}, got {return_type!r}"
        )
