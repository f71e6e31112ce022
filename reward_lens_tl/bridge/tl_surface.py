"""TransformerLens's notebook idioms on `BridgeRewardModel`, answered as the default backend does.

A TransformerLens notebook calls `model.to_tokens(...)`, `to_str_tokens`, `to_single_token`,
`generate`, `loss_fn`, `tokens_to_residual_directions`, `run_with_hooks`, TransformerLens's
`patching` and `utilities.lm_cross_entropy_loss`. Left to TransformerLens 4, these give a
language model's answers on the bridge: text tokenised without the chat template, a generated
continuation, index errors, a meaningless accuracy, hooks run without the padding mask.
`BridgeIdioms` (mixed into `BridgeRewardModel`) gives each `HookedRewardModel`'s answer (the
same methods, `reward_lens_tl.idioms.RewardModelIdioms`): conversations through the chat
template, left padded after each row's first token, language-model idioms refused with a
`NotForRewardModelsError` that says what to use. `run_with_hooks` runs the reward model's
forward (the padding mask inferred from the pad ids, `return_type="reward"`), and refuses a
TransformerLens patch whose clean activation has another length (`AlignmentError`: TL pairs
positions from the start, not at the reward token). `cache_with_gradients` is
`run_with_cache(..., return_type="reward", incl_bwd=True)`: each row's own reward's gradient.
Importing this module installs the language-model utilities' guard (`idioms.guard_lm_utilities`)
in TransformerLens 4's `utilities`.

Examples:
    >>> from reward_lens_tl.bridge import BridgeRewardModel
    >>> from reward_lens_tl.zoo import zoo_path
    >>> model = BridgeRewardModel.boot(zoo_path("scalar"))
    >>> ids = model.to_tokens([("explain how to bake bread", "the oven"), ("why", "so")])
    >>> ids.shape, model.to_str_tokens(ids[1])[:3]    # pads after each row's first token
    (torch.Size([2, 13]), ['<bos>', '<pad>', '<pad>'])
    >>> model.to_str_tokens(("why", "so"))[-3:]
    ['so', '<|end|>', '<eos>']
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import torch
from jaxtyping import Int
from torch import Tensor

from ..errors import InvalidArgumentError, RewardLensError
from ..idioms import RewardModelIdioms, _is_pair, check_patch_lengths, guard_lm_utilities

__all__: list[str] = []

guard_lm_utilities()

if TYPE_CHECKING:  # RewardModelIdioms is typed as a HookedTransformer, which the bridge is not
    _Idioms = object
else:
    _Idioms = RewardModelIdioms


class BridgeIdioms(_Idioms):
    """`RewardModelIdioms` on the bridge, with the bridge's own `to_str_tokens` for ids.

    A mixin of `BridgeRewardModel` (which provides `bridge`, `forward`, `encode`, `tokenizer`).

    Examples:
        >>> from reward_lens_tl.bridge import BridgeRewardModel
        >>> from reward_lens_tl.errors import NotForRewardModelsError
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = BridgeRewardModel.boot(zoo_path("scalar"))
        >>> try:
        ...     model.generate(model.to_tokens(("why", "so")))
        ... except NotForRewardModelsError as err:
        ...     print(str(err)[:40])
        generate() needs a language-model head;
    """

    if TYPE_CHECKING:  # provided by BridgeRewardModel
        bridge: Any
        tokenizer: Any

        def forward(self, *args: Any, **kwargs: Any) -> Tensor: ...

    def to_str_tokens(self, input: Any, prepend_bos: Any = None, padding_side: Any = None) -> Any:
        """TL's `to_str_tokens`: a `(prompt, response)` pair's template tokens, or ids' strings.

        Args:
            input: A `(prompt, response)` pair, a list of pairs, or token ids.
            prepend_bos: Passed to TransformerLens for token ids; ignored for pairs.
            padding_side: Passed to TransformerLens for token ids; ignored for pairs.

        Returns:
            The token strings (a list of lists for a list of pairs).

        Raises:
            NotForRewardModelsError: `input` is a bare string (no chat template).

        Examples:
            >>> from reward_lens_tl.bridge import BridgeRewardModel
            >>> from reward_lens_tl.zoo import zoo_path
            >>> model = BridgeRewardModel.boot(zoo_path("scalar"))
            >>> model.to_str_tokens(("why", "so"))
            ['<bos>', '<|user|>', 'why', '<|end|>', '<|assistant|>', 'so', '<|end|>', '<eos>']
            >>> model.to_str_tokens(torch.tensor([1, 0, 2]))
            ['<bos>', '<pad>', '<eos>']
        """
        pairs = isinstance(input, list) and bool(input) and all(_is_pair(p) for p in input)
        if isinstance(input, str) or _is_pair(input) or pairs:
            return cast(Any, RewardModelIdioms).to_str_tokens(self, input)
        return self.bridge.to_str_tokens(input, prepend_bos=prepend_bos, padding_side=padding_side)

    def _require_tokenizer(self) -> Any:
        """The tokenizer (`RewardModelIdioms` reads pairs with it)."""
        if self.tokenizer is None:
            raise RewardLensError(
                "this model has no tokenizer: boot it with tokenizer= or feed ids"
            )
        return self.tokenizer

    def run_with_hooks(
        self,
        *model_args: Any,
        fwd_hooks: Any = (),
        bwd_hooks: Any = (),
        reset_hooks_end: bool = True,
        clear_contexts: bool = False,
        **kwargs: Any,
    ) -> Tensor:
        """The reward model's forward with hooks (TransformerLens's `run_with_hooks`).

        The forward is `BridgeRewardModel.forward` (the mask inferred from the pad ids;
        `return_type="reward"` pools), so TransformerLens's `patching` functions and a notebook's
        ablations read the rewards the default backend gives.

        Args:
            *model_args: The forward's arguments (token ids first).
            fwd_hooks: `(name, hook)` forward hooks.
            bwd_hooks: `(name, hook)` backward hooks.
            reset_hooks_end: Remove the hooks afterwards.
            clear_contexts: Clear the hook points' contexts afterwards.
            **kwargs: The forward's keywords.

        Returns:
            The forward's output.

        Raises:
            AlignmentError: A TransformerLens patch of a clean run of another length.

        Examples:
            >>> from reward_lens_tl.bridge import BridgeRewardModel
            >>> from reward_lens_tl.zoo import zoo_path
            >>> model = BridgeRewardModel.boot(zoo_path("scalar"))
            >>> ids = model.to_tokens([("explain how to bake bread", "the oven"), ("why", "so")])
            >>> def zero(z, hook):
            ...     z[:, :, 0] = 0.0
            ...     return z
            >>> ablated = model.run_with_hooks(
            ...     ids, return_type="reward", fwd_hooks=[("blocks.1.attn.hook_z", zero)])
            >>> ablated.shape, bool((ablated != model.rewards(ids)).all())
            (torch.Size([2]), True)
        """
        tokens = model_args[0] if model_args else kwargs.get("input")
        if isinstance(tokens, Tensor) and not tokens.is_floating_point():
            check_patch_lengths(list(fwd_hooks), tokens.shape[-1])
        with self.bridge.hooks(list(fwd_hooks), list(bwd_hooks), reset_hooks_end, clear_contexts):
            return self.forward(*model_args, **kwargs)

    def half(self) -> Any:
        """The model in float16, `cfg.dtype` following (as `boot(..., dtype=torch.float16)`).

        Returns:
            This model.

        Examples:
            >>> from reward_lens_tl.bridge import BridgeRewardModel
            >>> from reward_lens_tl.testing import tiny_reward_model
            >>> model = BridgeRewardModel.boot(tiny_reward_model("llama")).half()
            >>> model.cfg.dtype, model.float().cfg.dtype
            (torch.float16, torch.float32)
        """
        return self._cast(torch.float16)

    def bfloat16(self) -> Any:
        """The model in bfloat16, `cfg.dtype` following (`half`'s example).

        Returns:
            This model.
        """
        return self._cast(torch.bfloat16)

    def float(self) -> Any:
        """The model in float32, `cfg.dtype` following (`half`'s example).

        Returns:
            This model.
        """
        return self._cast(torch.float32)

    def _cast(self, dtype: torch.dtype) -> Any:
        # TransformerLens 4's `to` updates `cfg.dtype`; its `half()` (nn.Module's) does not
        self.bridge.to(dtype, print_details=False)
        return self


def cache_with_gradients(
    model: Any,
    tokens: Int[Tensor, "batch pos"],
    attention_mask: Tensor | None,
    names_filter: Any,
    return_type: Any,
    **options: Any,
) -> tuple[Tensor, Any]:
    """`run_with_cache(ids, return_type="reward", incl_bwd=True)`: each row's reward gradient.

    The backward of the rows' rewards' sum: rows never interact, so row `b`'s `*_grad` entries
    are row `b`'s own reward's gradient (as on `HookedRewardModel`). TransformerLens 4 itself
    differentiates only a scalar output.

    Args:
        model: A `BridgeRewardModel` (not gated; its `hook_reward` is added by the caller).
        tokens: Token ids, `[batch, pos]`.
        attention_mask: `[batch, pos]`, or `None`.
        names_filter: The hook names to cache (TransformerLens's filter).
        return_type: Must be `"reward"`.
        **options: `device` and `pos_slice` (TransformerLens's caching options).

    Returns:
        The rewards and the cache (forward activations and their `*_grad`).

    Raises:
        InvalidArgumentError: Another `return_type`, several objectives, or gradients disabled.

    Examples:
        >>> from reward_lens_tl.bridge import BridgeRewardModel
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = BridgeRewardModel.boot(zoo_path("scalar"))
        >>> ids = model.to_tokens(("why", "so"))
        >>> rewards, cache = model.run_with_cache(
        ...     ids, return_type="reward", incl_bwd=True, names_filter=["hook_embed"])
        >>> cache["hook_embed_grad"].shape
        torch.Size([1, 8, 64])
    """
    if return_type != "reward":
        raise InvalidArgumentError(
            f"run_with_cache(..., incl_bwd=True) needs a scalar to differentiate; "
            f"return_type={return_type!r} gives one value per position. Pass "
            "return_type='reward' (the gradient of each row's reward, cached as *_grad), or "
            "differentiate your own metric: with model.hooks(bwd_hooks=...): "
            "metric(model(ids)).backward()"
        )
    if model.n_objectives > 1 or not torch.is_grad_enabled():
        raise InvalidArgumentError(
            "run_with_cache(..., incl_bwd=True) needs gradients enabled (not under "
            "torch.no_grad()) and one reward per row; for one objective of several, "
            "differentiate model.objective_rewards(ids, grad=True)[:, k].sum() under "
            "model.hooks(bwd_hooks=...)"
        )
    if names_filter is None:  # every name, legacy ones included, as in the plain run's cache
        off = getattr(model.bridge, "_gated_hook_reason", lambda name: None)  # points never run
        names_filter = [n for n, p in model.bridge.hook_dict.items() if off(p.name or n) is None]
    cache_dict, fwd, bwd = model.bridge.get_caching_hooks(
        names_filter,
        incl_bwd=True,
        device=options.get("device"),
        pos_slice=options.get("pos_slice"),
    )
    with model.bridge.hooks(fwd_hooks=fwd, bwd_hooks=bwd):
        out = model.forward(tokens, return_type="reward", attention_mask=attention_mask)
        out.sum().backward()  # rows are independent: each row gets its own reward's gradient
    from transformer_lens import ActivationCache

    return out.detach(), ActivationCache(cache_dict, model.bridge, has_batch_dim=True)
