"""`HookedRewardModel`: a TransformerLens `HookedTransformer` whose unembed is the reward head.

`d_vocab_out` is the number of reward objectives (1 for a scalar reward model), `W_U` is the
head's weight (`W_R` is an alias) and `b_U` its bias. So `model(tokens)` is the reward at
every position, `[batch, pos, n_objectives]`, and everything TL offers (`run_with_cache`,
hooks, `accumulated_resid`, `apply_ln_to_stack`, `start_at_layer`) works unchanged. The
reward of a sequence is read at its pooling position, chosen by the adapter with exactly the HF
model's rule; `model.rewards(tokens)` does that, and `forward(..., return_type="reward")`
does it inside the forward pass so `run_with_cache` also sees the pooled hook points:

- `hook_reward`: pooled head output `[batch, n_objectives]`;
- ArmoRM-style models add `hook_gate` `[batch, n_objectives]` and `hook_score` `[batch]`.

Examples:
    >>> import torch
    >>> from reward_lens_tl.testing import tiny_reward_model
    >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    >>> ids = torch.tensor([[1, 5, 6, 7], [0, 1, 8, 9]])          # left padded, pad id 0
    >>> model.rewards(ids).shape, model(ids).shape
    (torch.Size([2]), torch.Size([2, 4, 1]))
"""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn, Self, Unpack, cast, overload

import torch
from jaxtyping import Float, Int
from sae_lens import HookedSAETransformer
from torch import Tensor, nn
from transformer_lens import ActivationCache, HookedTransformerConfig
from transformer_lens.cache.key_value_cache import TransformerLensKeyValueCache
from transformer_lens.components import Unembed
from transformer_lens.hook_points import HookPoint
from transformer_lens.utilities.slice import Slice

from . import fast_attention, memory, padding, pooled_forward
from .adapters import LlamaAdapter, RewardModelAdapter
from .armorm_module import gating_positions
from .cache import RewardActivationCache
from .errors import (
    AmbiguousObjectiveError,
    EmptyInputError,
    InvalidArgumentError,
    MissingAttentionMaskError,
    NonFiniteActivationError,
    NotForRewardModelsError,
    RewardLensError,
    SequenceTooLongError,
    ShapeMismatchError,
    TokenIdsTypeError,
    TokenOutOfVocabError,
    UnknownHookError,
    UnsupportedArchitectureError,
)
from .idioms import (
    RewardModelIdioms,
    check_patch_lengths,
    guard_lm_utilities,
    mark_reward_outputs,
)
from .loading import (
    NO_PROCESSING,
    LoadOptions,
    ModelFacts,
    load_planned,
    loading_entry_point,
    plan_conversion,
    positional_tokenizer,
    requested,
    verify_plan,
)

if TYPE_CHECKING:
    from .inputs import EncodedConversation, Prompt, Truncation

__all__ = [
    "HookedArmoRM",
    "HookedRewardModel",
    "ReturnType",
    "load_reward_model",
    "parity_at_load",
]

guard_lm_utilities()

#: What `forward` can return (TL's `"loss"` / `"both"` are refused with a pointer).
ReturnType = Literal["logits", "objectives", "reward"] | None
RETURN_TYPES = ("logits", "objectives", "reward", None)


def _tl_options(**options: Any) -> dict[str, Any]:
    """The TransformerLens forward keywords that were given (not `None`), passed on as is."""
    return {name: value for name, value in options.items() if value is not None}


class HookedRewardModel(RewardModelIdioms, HookedSAETransformer):
    """A reward model as a `HookedTransformer` (through sae_lens's `HookedSAETransformer`).

    Args:
        cfg: The TL config (`d_vocab_out` is the number of objectives).
        adapter: The family's adapter (default: `LlamaAdapter`).
        pad_token_id: The pad id.
        eos_token_id: The EOS id.
        objective_names: The reward objectives' names.
        tokenizer: The tokenizer (the model keeps a shallow copy; the one given is not modified).
        bos_token_id: The BOS id.
        move_to_device: Move the model to `cfg.device` (TL's meaning).
        padding_side: How `to_tokens` pads by default: `"left"` (pads after each row's first
            token) or `"right"`; the model's copy of the tokenizer says it.

    Examples:
        The forward pass returns TransformerLens's `[batch, pos, d_vocab_out]` logits, with the
        reward head as the unembed: the reward read at every position. Rows are left padded,
        so the last position holds each conversation's reward.

        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> prompt = "how bake bread"
        >>> ids = model.to_tokens([(prompt, "oven flour"), (prompt, "great question soup")])
        >>> logits, cache = model.run_with_cache(ids)
        >>> logits.shape
        torch.Size([2, 12, 1])
        >>> [round(r, 4) for r in model.rewards(ids).tolist()]
        [0.2454, 1.1531]
        >>> final = cache["ln_final.hook_normalized"][:, -1]
        >>> [round(r, 4) for r in (final @ model.W_U + model.b_U)[:, 0].tolist()]
        [0.2454, 1.1531]
    """

    def __init__(
        self,
        cfg: HookedTransformerConfig,
        *,
        adapter: RewardModelAdapter | None = None,
        pad_token_id: int | None = None,
        eos_token_id: int | None = None,
        objective_names: Sequence[str] = ("reward",),
        tokenizer: Any = None,
        bos_token_id: int | None = None,
        move_to_device: bool = True,
        padding_side: Literal["left", "right"] = "left",
    ):
        """Build the model from a TL config, with its reward-model facts.

        Args:
            cfg: The TL config (`d_vocab_out` is the number of objectives).
            adapter: The family's adapter (default: `LlamaAdapter`).
            pad_token_id: The pad id.
            eos_token_id: The EOS id.
            objective_names: The reward objectives' names.
            tokenizer: The tokenizer. The model keeps a shallow copy whose `padding_side` says
                how `to_tokens` pads (the tokenizer given is not modified).
            bos_token_id: The BOS id.
            move_to_device: Move the model to `cfg.device` (TL's meaning).
            padding_side: How `to_tokens` pads by default: `"left"` (this library's layout,
                pads after each row's first token) or `"right"`.
        """
        super().__init__(cfg, move_to_device=move_to_device)
        fast_attention.install(self)
        self.hook_reward = HookPoint()
        self.setup()
        self.adapter = adapter if adapter is not None else LlamaAdapter()
        self.pad_token_id = pad_token_id
        self.eos_token_id = eos_token_id
        self.bos_token_id = bos_token_id
        self.objective_names = tuple(objective_names)
        # set directly (TL's set_tokenizer reloads it by name), as a copy that says how we pad
        self.tokenizer = padding.tokenizer_with_side(tokenizer, padding_side, (bos_token_id,))

    # -- construction ---------------------------------------------------------------------
    @overload
    @classmethod
    def from_pretrained(
        cls,
        model_name: nn.Module | str | Path,
        tokenizer: Any = None,
        **options: Unpack[LoadOptions],
    ) -> Self: ...

    @overload
    @classmethod
    def from_pretrained(  # TransformerLens's form: positional flags, any keyword
        cls, model_name: nn.Module | str | Path, *args: Any, **options: Any
    ) -> Self: ...

    @classmethod
    @loading_entry_point(verify=True)
    def from_pretrained(
        cls, model_name: nn.Module | str | Path, tokenizer: Any = None, *args: Any, **options: Any
    ) -> Self:
        """Convert an in-memory HF reward model, a local checkpoint directory or a hub id.

        Touches the network only to fetch a hub id that is not cached (config, tokenizer and
        safetensors only), never runs remote code, leaves an HF model unmodified, and converts
        one layer at a time straight to `device`.
        The class built is the one the adapter asks for (e.g. `HookedArmoRM` for gated
        multi-objective heads; called on a subclass, a checkpoint of another kind is refused).
        The same as `load_reward_model`. TransformerLens's call form is accepted: its options
        are keywords here (`LoadOptions`), and its positional flags after the model are refused
        with an `ArgumentTypeError` (the second positional argument is the tokenizer).

        Args:
            {model}
            {options}
            {verify}

        Returns:
            The converted model.

        Raises:
            {unknown}
            ArgumentTypeError: A positional argument after the tokenizer, or a boolean in its
                place (TransformerLens's positional `fold_ln`).
            UnsupportedArchitectureError: A checkpoint whose kind is not this class (or a
                subclass of it).

        Examples:
            >>> from reward_lens_tl import HookedRewardModel
            >>> from reward_lens_tl.zoo import zoo_path
            >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"), dtype="float32")
            >>> model.cfg.n_layers, model.objective_names
            (3, ('reward',))
        """
        tokenizer = positional_tokenizer((tokenizer, *args))
        request = requested(options)
        verify = request.pop("verify")
        plan = plan_conversion(model_name, tokenizer, request)
        kind = MODEL_KINDS[plan.adapter.model_kind]
        if not issubclass(kind, cls):
            raise UnsupportedArchitectureError(
                f"this checkpoint converts to a {kind.__name__} ({plan.adapter.model_kind!r} "
                f"kind), which is not a {cls.__name__}: load it with "
                f"{kind.__name__}.from_pretrained or HookedRewardModel.from_pretrained"
            )
        return load_planned(kind, plan, verify)

    @overload
    @classmethod
    def from_pretrained_no_processing(
        cls,
        model_name: nn.Module | str | Path,
        tokenizer: Any = None,
        **options: Unpack[LoadOptions],
    ) -> Self: ...

    @overload
    @classmethod
    def from_pretrained_no_processing(  # TransformerLens's form, as from_pretrained
        cls, model_name: nn.Module | str | Path, *args: Any, **options: Any
    ) -> Self: ...

    @classmethod
    @loading_entry_point(verify=True, defaults=NO_PROCESSING)
    def from_pretrained_no_processing(
        cls, model_name: nn.Module | str | Path, tokenizer: Any = None, *args: Any, **options: Any
    ) -> Self:
        """Conversion without any weight folding (raw HF parametrisation).

        `fold_ln`, `center_writing_weights` and `fold_value_biases` default to `False`; otherwise
        `from_pretrained`.

        Args:
            {model}
            {options}
            {verify}

        Returns:
            The converted model.

        Raises:
            {unknown}

        Examples:
            >>> from reward_lens_tl import HookedRewardModel
            >>> from reward_lens_tl.zoo import zoo_path
            >>> raw = HookedRewardModel.from_pretrained_no_processing(zoo_path("scalar"))
            >>> folded = HookedRewardModel.from_pretrained(zoo_path("scalar"))
            >>> raw.cfg.normalization_type, folded.cfg.normalization_type
            ('RMS', 'RMSPre')
            >>> pair = ("how bake bread", "oven flour")
            >>> round(raw.score(*pair).item(), 4), round(folded.score(*pair).item(), 4)
            (0.2454, 0.2454)
        """
        return cls.from_pretrained(model_name, tokenizer, *args, **{**NO_PROCESSING, **options})

    # -- the head -------------------------------------------------------------------------
    @property
    def n_objectives(self) -> int:
        """The number of reward objectives (`d_vocab_out`; 1 for a scalar head)."""
        return self.cfg.d_vocab_out

    @property
    def scored_head(self) -> bool:
        """Whether the reward is a non-linear function of the head's outputs.

        For a Likert judge's expected grade, a classifier PRM's margin: exact read-outs then name a
        column (`objective=`); plain and gated heads are linear.
        """
        return False

    def linear_advice(self) -> str:
        """What to read out exactly when the score is not linear (`scored_head`).

        A judge or PRM names its own linear parts; a plain head is linear.

        Returns:
            The advice that an exact read-out's error gives.
        """
        return (
            "this score is not linear in the residual stream; exact read-outs (lens, attribution) "
            f"take one head output: objective=<one of {tuple(self.objective_names)[:6]}>"
        )

    @property
    def is_scalar(self) -> bool:
        """Whether the head has one objective."""
        return self.n_objectives == 1

    def final_norm_weight(self) -> Float[Tensor, " d_model"]:
        """The final norm's elementwise weight (ones once `fold_ln` moved it into `W_R`).

        Returns:
            The weight, `[d_model]`.
        """
        w = getattr(self.ln_final, "w", None)
        return w if w is not None else torch.ones(self.cfg.d_model, device=self.W_U.device)

    # -- input checks ---------------------------------------------------------------------
    def check_tokens(
        self, tokens: Tensor, attention_mask: Tensor | None = None
    ) -> Int[Tensor, "batch pos"]:
        """Validate token ids (shape, vocabulary, context length, mask); return them 2-D.

        Ids are an integer tensor: text, Python lists, float and bool tensors are refused with
        a `TokenIdsTypeError` that says how to build one.

        Args:
            tokens: Token ids, `[batch, pos]` or one sequence `[pos]`.
            attention_mask: The attention mask, checked to match the ids' shape.

        Returns:
            The ids, `[batch, pos]`.

        Raises:
            TokenIdsTypeError: Not an integer tensor.
            ShapeMismatchError: Not 1-D or 2-D, or a mask of another shape.
            EmptyInputError: No token.
            SequenceTooLongError: Longer than the model's context.
            TokenOutOfVocabError: Ids outside the vocabulary.
        """
        if not isinstance(tokens, Tensor):
            raise TokenIdsTypeError(_not_a_tensor_message(tokens))
        if tokens.ndim == 1:
            tokens = tokens[None]
        if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
            raise TokenIdsTypeError(
                f"expected integer token ids [batch, pos], got a {tokens.dtype} tensor"
                + (" (an attention mask?)" if tokens.dtype == torch.bool else "")
                + ": ids are never rounded or cast; pass the tokenizer's integer ids"
            )
        if tokens.ndim != 2:
            raise ShapeMismatchError(
                f"expected integer token ids [batch, pos], got {tuple(tokens.shape)} {tokens.dtype}"
            )
        if tokens.shape[1] == 0 or tokens.shape[0] == 0:
            raise EmptyInputError(
                f"token ids of shape {tuple(tokens.shape)}: a reward needs at least one token in "
                "at least one sequence"
            )
        if tokens.shape[1] > self.cfg.n_ctx:
            raise SequenceTooLongError(
                f"sequence of {tokens.shape[1]} tokens exceeds the model's context of "
                f"{self.cfg.n_ctx}; truncate it (encode(..., max_length=..., "
                "truncation='left'|'right')) or, if the checkpoint supports a longer context, "
                "load with from_pretrained(..., n_ctx=...)"
            )
        if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= self.cfg.d_vocab):
            bad = tokens[(tokens < 0) | (tokens >= self.cfg.d_vocab)].unique()[:10].tolist()
            raise TokenOutOfVocabError(
                f"token ids {bad} are outside the vocabulary [0, {self.cfg.d_vocab}); were they "
                "produced by a different tokenizer?"
            )
        if attention_mask is not None and attention_mask.shape[-2:] != tokens.shape:
            raise ShapeMismatchError(
                f"attention_mask {tuple(attention_mask.shape)} does not match input_ids "
                f"{tuple(tokens.shape)}"
            )
        return tokens

    def pool_positions(
        self,
        tokens: Int[Tensor, "batch pos"],
        attention_mask: Tensor | None = None,
        positions: Sequence[int] | Tensor | None = None,
    ) -> Int[Tensor, " batch"]:
        """Where each sequence's reward is read.

        By the HF model's own rule, or the explicit `positions` (one per row; checked to be inside
        the sequence and not padding).

        Args:
            tokens: Token ids, `[batch, pos]`.
            attention_mask: The attention mask (it says which positions are padding).
            positions: Explicit reading positions, one per row.

        Returns:
            One position per row, `[batch]`.

        Raises:
            InvalidArgumentError: Positions that are not integers.
            ShapeMismatchError: Not one position per row.
            RewardLensError: A position outside the sequence, or on padding.
        """
        if positions is not None:
            return padding.checked_positions(tokens, positions, attention_mask, self.pad_token_id)
        mask = attention_mask
        if mask is None:
            with contextlib.suppress(MissingAttentionMaskError):
                mask = self.infer_attention_mask(tokens)
        pos = self.adapter.pool_index(tokens, self.pad_token_id, attention_mask=mask)
        padding.check_not_padding(tokens, pos, attention_mask)
        return pos

    # -- forward --------------------------------------------------------------------------
    def _apply(self, fn, recurse=True):
        """Torch's `_apply` (behind `half()`, `float()`, `to(dtype)`); `cfg.dtype` follows.

        TransformerLens's norms cast their output to `cfg.dtype`, so `model.half()` without this
        fed float32 activations to float16 weights (a raw dtype error in the forward); now it
        gives the same model as loading with `dtype=torch.float16`.
        """
        out = super()._apply(fn, recurse)
        weight = getattr(getattr(self, "unembed", None), "W_U", None)
        if isinstance(weight, Tensor) and weight.is_floating_point():
            self.cfg.dtype = weight.dtype
        return out

    def set_fast_attention(self, enabled: bool = True) -> None:
        """Use SDPA for attention when no hook reads the pattern, or TL's explicit-pattern path.

        SDPA is on by default, and exact (see `reward_lens_tl.fast_attention`).

        Args:
            enabled: Use SDPA (`True`) or TL's explicit-pattern path everywhere (`False`).
        """
        fast_attention.set_enabled(self, enabled)

    # TL's forward (its parameters in its order; text refused), "reward"/"objectives" added
    @overload
    def forward(
        self,
        input: Int[Tensor, "batch pos"] | Float[Tensor, "batch pos d_model"],
        return_type: Literal["logits", "objectives", "reward"] = "logits",
        loss_per_token: bool = False,
        prepend_bos: bool | None = None,
        padding_side: Literal["left", "right"] | None = None,
        start_at_layer: int | None = None,
        tokens: Int[Tensor, "batch pos"] | None = None,
        shortformer_pos_embed: Float[Tensor, "batch pos d_model"] | None = None,
        attention_mask: Int[Tensor, "batch pos"] | None = None,
        stop_at_layer: int | None = None,
        past_kv_cache: TransformerLensKeyValueCache | None = None,
        *,
        pool_positions: Int[Tensor, " batch"] | None = None,
    ) -> Tensor: ...

    @overload
    def forward(  # TL's language-model losses: always refused
        self,
        input: Int[Tensor, "batch pos"] | Float[Tensor, "batch pos d_model"],
        return_type: Literal["loss", "both"],
        loss_per_token: bool = False,
        prepend_bos: bool | None = None,
        padding_side: Literal["left", "right"] | None = None,
        start_at_layer: int | None = None,
        tokens: Int[Tensor, "batch pos"] | None = None,
        shortformer_pos_embed: Float[Tensor, "batch pos d_model"] | None = None,
        attention_mask: Int[Tensor, "batch pos"] | None = None,
        stop_at_layer: int | None = None,
        past_kv_cache: TransformerLensKeyValueCache | None = None,
        *,
        pool_positions: Int[Tensor, " batch"] | None = None,
    ) -> NoReturn: ...

    @overload
    def forward(
        self,
        input: Int[Tensor, "batch pos"] | Float[Tensor, "batch pos d_model"],
        return_type: None,
        loss_per_token: bool = False,
        prepend_bos: bool | None = None,
        padding_side: Literal["left", "right"] | None = None,
        start_at_layer: int | None = None,
        tokens: Int[Tensor, "batch pos"] | None = None,
        shortformer_pos_embed: Float[Tensor, "batch pos d_model"] | None = None,
        attention_mask: Int[Tensor, "batch pos"] | None = None,
        stop_at_layer: int | None = None,
        past_kv_cache: TransformerLensKeyValueCache | None = None,
        *,
        pool_positions: Int[Tensor, " batch"] | None = None,
    ) -> None: ...

    def forward(
        self,
        input: Int[Tensor, "batch pos"] | Float[Tensor, "batch pos d_model"],
        return_type: ReturnType | Literal["loss", "both"] = "logits",
        loss_per_token: bool = False,
        prepend_bos: bool | None = None,
        padding_side: Literal["left", "right"] | None = None,
        start_at_layer: int | None = None,
        tokens: Int[Tensor, "batch pos"] | None = None,
        shortformer_pos_embed: Float[Tensor, "batch pos d_model"] | None = None,
        attention_mask: Int[Tensor, "batch pos"] | None = None,
        stop_at_layer: int | None = None,
        past_kv_cache: TransformerLensKeyValueCache | None = None,
        *,
        pool_positions: Int[Tensor, " batch"] | None = None,
    ) -> Tensor | None:
        """TL's forward, plus `return_type="reward"` for the pooled reward.

        `return_type`: `"logits"` (default) gives the model's reward at every position,
        `[batch, pos, n_objectives]` (for a gated ArmoRM-style head, the gated score,
        `[batch, pos, 1]`); `"objectives"` gives the head's per-objective outputs at every
        position for any head; `None` nothing (run for the hooks). `"reward"` gives what
        `rewards` documents and fires `hook_reward` (and the gating hooks), read at
        `pool_positions` (one per row) when given, else by the HF model's rule.

        `input` is token ids `[batch, pos]` (or one sequence `[pos]`), or with
        `start_at_layer` the residual stream entering that block (then `tokens` gives the
        ids, needed for padding masks and the reading rule). `attention_mask`: `[batch, pos]`
        ones for real tokens; whenever token ids are known, a left-padded batch without one gets
        its mask from the leading pad ids. `stop_at_layer`, `past_kv_cache`,
        `shortformer_pos_embed`, `prepend_bos` and `padding_side` are TransformerLens's
        (`prepend_bos`/`padding_side` only matter for text, which is refused);
        `loss_per_token` exists for TL's signature only: LM losses do not exist for reward
        models. A batch whose position `-1` is not every row's reading position warns
        (`ReadingPositionWarning`) unless it asks for `"reward"`.

        Args:
            input: Token ids `[batch, pos]` (or `[pos]`), or the residual stream entering
                `start_at_layer`.
            return_type: `"logits"`, `"objectives"`, `"reward"` or `None`.
            attention_mask: `[batch, pos]`, ones for real tokens.
            pool_positions: With `"reward"`: the reading position of each row.
            start_at_layer: Start at this block, from the residual stream given as `input`.
            tokens: With `start_at_layer`: the token ids.
            stop_at_layer: TransformerLens's: stop before this block.
            past_kv_cache: TransformerLens's key-value cache.
            shortformer_pos_embed: TransformerLens's.
            prepend_bos: TransformerLens's (only for text, which is refused).
            padding_side: TransformerLens's (only for text, which is refused).
            loss_per_token: For TL's signature only.

        Returns:
            The per-position rewards or objectives, the pooled reward, or `None`.

        Raises:
            NotForRewardModelsError: `return_type="loss"` or `"both"`.
            InvalidArgumentError: Another unknown `return_type`.
            RewardLensError: `"reward"` with `stop_at_layer`.
            NonFiniteActivationError: A reward that is not finite (the error locates it).
        """
        kwargs = _tl_options(
            stop_at_layer=stop_at_layer,
            past_kv_cache=past_kv_cache,
            shortformer_pos_embed=shortformer_pos_embed,
            prepend_bos=prepend_bos,
            padding_side=padding_side,
            loss_per_token=loss_per_token or None,
        )
        if return_type in ("loss", "both"):
            raise NotForRewardModelsError(
                "reward models have no language-model loss; use return_type='reward' (or "
                "'logits' for the reward at every position)"
            )
        if return_type not in RETURN_TYPES:
            raise InvalidArgumentError(
                f"return_type must be one of {RETURN_TYPES}, got {return_type!r}"
            )
        if start_at_layer is None:
            input = self.check_tokens(input, attention_mask)
            tokens = input
            memory.check_fits(self, input, "forward")
        elif tokens is not None:
            tokens = self.check_tokens(tokens, attention_mask)
        if tokens is not None and attention_mask is None and kwargs.get("past_kv_cache") is None:
            attention_mask = self.infer_attention_mask(tokens)
        if attention_mask is None:  # no padding: TL must not infer a mask of its own
            kwargs["padding_side"] = "right"
        if return_type != "reward":
            return self._per_position(
                input, return_type, tokens, attention_mask, start_at_layer, kwargs
            )
        if kwargs.get("stop_at_layer") is not None:
            raise RewardLensError("return_type='reward' cannot be combined with stop_at_layer")
        args = (input, attention_mask, pool_positions, start_at_layer, tokens, kwargs)
        reward = self._reward(*args)
        if not bool(torch.isfinite(reward).all()):  # one check per forward; located on error
            raise non_finite_reward_error(self, reward, args)
        return reward

    def _reward(self, input, attention_mask, pool_positions, start_at_layer, tokens, kwargs):
        """The pooled reward (the last block at the reading positions when nothing can see it)."""
        if pooled_forward.applies(self, start_at_layer, attention_mask, kwargs):
            # with stop_at_layer TL returns the residual (its overloads say None for None)
            resid = cast(
                Tensor,
                super().forward(
                    input,
                    return_type=None,
                    attention_mask=attention_mask,
                    tokens=tokens,
                    stop_at_layer=self.cfg.n_layers - 1,
                    **kwargs,
                ),
            )
            pool = pool_positions
            if pool is None:
                pool = self.pool_positions(tokens, attention_mask)
            resid = pooled_forward.last_block_at(self, resid, pool, attention_mask)
            return self._pooled_reward(resid, tokens, attention_mask, torch.zeros_like(pool))
        resid = self._final_residual(input, attention_mask, start_at_layer, tokens, kwargs)
        return self._pooled_reward(resid, tokens, attention_mask, pool_positions)

    def _final_residual(self, input, attention_mask, start_at_layer, tokens, kwargs):
        """The residual stream after the last block (before the final norm)."""
        return super().forward(
            input,
            return_type=None,
            attention_mask=attention_mask,
            start_at_layer=start_at_layer,
            tokens=tokens,
            stop_at_layer=self.cfg.n_layers,
            **kwargs,
        )

    def _per_position(self, input, return_type, tokens, attention_mask, start_at_layer, kwargs):
        """`"logits"` / `"objectives"` / `None` / `stop_at_layer` forwards."""
        if tokens is not None and kwargs.get("past_kv_cache") is None:
            self.check_reading_position(tokens, attention_mask)
        gated = return_type == "logits" and self._gated_logits_needed(kwargs)
        if not gated:
            out = super().forward(
                input,
                return_type="logits" if return_type == "objectives" else return_type,
                attention_mask=attention_mask,
                start_at_layer=start_at_layer,
                tokens=tokens,
                **kwargs,
            )
            logits = return_type is not None and kwargs.get("stop_at_layer") is None
            return mark_reward_outputs(out) if logits else out
        resid = self._final_residual(input, attention_mask, start_at_layer, tokens, kwargs)
        return mark_reward_outputs(self._gated_per_position(resid, tokens))

    def _gated_logits_needed(self, kwargs) -> bool:
        return getattr(self, "gating", None) is not None and kwargs.get("stop_at_layer") is None

    def _gated_per_position(self, resid, tokens):  # overridden by HookedArmoRM
        raise NotImplementedError

    def check_reading_position(
        self, tokens: Int[Tensor, "batch pos"], attention_mask: Tensor | None = None
    ) -> None:
        """Warn when position `-1` of `tokens` is not every row's reading position.

        The warning is a `ReadingPositionWarning`: right padding of unequal lengths, or a trailing
        pad == EOS that HF's rule skips.

        Args:
            tokens: Token ids, `[batch, pos]`.
            attention_mask: The attention mask.
        """
        if self.pad_token_id is None or padding.warnings_silenced():
            return
        positions = self.pool_positions(tokens, attention_mask)
        padding.warn_if_last_is_not_read(positions, tokens.shape[1], self.pad_token_id)

    def infer_attention_mask(self, tokens: Int[Tensor, "batch pos"]) -> Tensor | None:
        """The attention mask of a padded batch given without one, from the pad id.

        Two layouts are recognised: this library's (`pad_batch`, `model.to_tokens`: a run of
        pad ids right after each row's first token) and plain left padding (a run of pad ids
        from column 0, as an HF tokenizer with `padding_side="left"` builds). Right padding
        needs no mask (causal attention never looks ahead) and gets none. When the pad id is
        also the BOS id, runs of different lengths cannot be told from BOS and are refused
        (pass `attention_mask`).

        Args:
            tokens: Token ids, `[batch, pos]`.

        Returns:
            The mask, or `None` when none is needed.

        Raises:
            MissingAttentionMaskError: Runs of different lengths of a pad id that is also
                the BOS id.
            EmptyInputError: A row that is all padding.

        Examples:
            >>> import torch
            >>> from reward_lens_tl import HookedRewardModel
            >>> from reward_lens_tl.testing import tiny_reward_model
            >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))  # pad 0
            >>> model.infer_attention_mask(torch.tensor([[1, 5, 6], [1, 0, 6]])).tolist()
            [[1, 1, 1], [1, 0, 1]]
            >>> model.infer_attention_mask(torch.tensor([[1, 5, 6], [0, 1, 6]])).tolist()
            [[1, 1, 1], [0, 1, 1]]
        """
        bos = {self.bos_token_id, getattr(self.tokenizer, "bos_token_id", None)}
        return padding.padding_mask(tokens, self.pad_token_id, bos)

    def _pooled_reward(self, resid, tokens, attention_mask, pool_positions):
        if pool_positions is None:
            if tokens is None:
                raise RewardLensError("pass tokens= or pool_positions= with start_at_layer")
            pool_positions = self.pool_positions(tokens, attention_mask)
        normed = self.ln_final(resid) if self.cfg.normalization_type is not None else resid
        per_pos = self.unembed(normed)  # [batch, pos, n_objectives]
        rows = torch.arange(per_pos.shape[0], device=per_pos.device)
        pooled = self.hook_reward(per_pos[rows, pool_positions.to(per_pos.device)])
        return self._final_reward(pooled, normed, tokens)

    def _final_reward(self, pooled: Tensor, normed: Tensor, tokens: Tensor | None) -> Tensor:
        return pooled[:, 0] if self.is_scalar else pooled

    def rewards(
        self,
        input_ids: Int[Tensor, "batch pos"],
        attention_mask: Int[Tensor, "batch pos"] | None = None,
        *,
        pool_positions: Int[Tensor, " batch"] | None = None,
        grad: bool = False,
    ) -> Float[Tensor, " batch"] | Float[Tensor, "batch n_objectives"]:
        """Pooled rewards, one per row.

        `[batch]` for a scalar head, `[batch, n_objectives]` for a plain multi-objective head, and
        the gated score `[batch]` for ArmoRM-style heads (their objectives: `objective_rewards`).

        `input_ids`/`attention_mask` as for `forward` (a left-padded batch without a
        mask gets one from its leading pads); `pool_positions`: read row `b` at
        `pool_positions[b]` instead of by the HF model's rule. The result is a plain tensor,
        computed under `torch.no_grad` (`float(...)`, `.numpy()` just work); `grad`
        (`True`) keeps the autograd graph for a backward pass through the reward (the same as
        `model(input_ids, "reward", attention_mask=...)`).

        Args:
            input_ids: Token ids, `[batch, pos]`.
            attention_mask: `[batch, pos]`, ones for real tokens.
            pool_positions: Read row `b` at `pool_positions[b]`.
            grad: Keep the autograd graph.

        Returns:
            The pooled rewards.

        Examples:
            >>> from reward_lens_tl.testing import tiny_reward_model
            >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
            >>> ids = torch.tensor([[1, 5, 6, 7]])
            >>> model.rewards(ids).requires_grad, model.rewards(ids, grad=True).requires_grad
            (False, True)
        """
        with torch.set_grad_enabled(grad and torch.is_grad_enabled()):
            out = self.forward(
                input_ids, "reward", attention_mask=attention_mask, pool_positions=pool_positions
            )
        return out  # forward's overloads: return_type="reward" returns the rewards

    def pooled_rewards(
        self,
        input_ids: Int[Tensor, "batch pos"],
        attention_mask: Int[Tensor, "batch pos"] | None = None,
    ) -> Float[Tensor, " batch"] | Float[Tensor, "batch n_objectives"]:
        """The reward every analysis reads, one per row, without gradients.

        `rewards` for a reward model; for a PRM (whose `rewards` are per step) its reading step's
        reward.

        Args:
            input_ids: Token ids, `[batch, pos]`.
            attention_mask: `[batch, pos]`, ones for real tokens.

        Returns:
            The pooled rewards.
        """
        return HookedRewardModel.rewards(self, input_ids, attention_mask)

    def objective_rewards(
        self,
        input_ids: Int[Tensor, "batch pos"],
        attention_mask: Int[Tensor, "batch pos"] | None = None,
        *,
        grad: bool = False,
    ) -> Float[Tensor, "batch n_objectives"]:
        """Per-objective pooled head outputs, `[batch, n_objectives]`, for any head.

        `input_ids`, `attention_mask` and `grad` as for `rewards`.

        Args:
            input_ids: Token ids, `[batch, pos]`.
            attention_mask: `[batch, pos]`, ones for real tokens.
            grad: Keep the autograd graph.

        Returns:
            The head's pooled outputs, `[batch, n_objectives]`.
        """
        store: dict[str, Tensor] = {}

        def grab(act: Tensor, hook: HookPoint) -> None:
            store["r"] = act

        with torch.set_grad_enabled(grad and torch.is_grad_enabled()):
            self.run_with_hooks(
                input_ids,
                return_type="reward",
                attention_mask=attention_mask,
                fwd_hooks=[("hook_reward", grab)],
            )
        return store["r"]

    # -- hook names -----------------------------------------------------------------------
    def check_hook_names(self, names: Iterable[str]) -> None:
        """Raise `UnknownHookError` (with close matches) for names not on the model.

        Args:
            names: Hook names.

        Raises:
            UnknownHookError: A name that is not a hook point of the model.
        """
        unknown = [n for n in names if n not in self.hook_dict]
        if unknown:
            hints = {n: difflib.get_close_matches(n, self.hook_dict, n=3) for n in unknown}
            raise UnknownHookError(
                f"unknown hook name(s) {unknown}; closest existing: {hints}. "
                "All names: list(model.hook_dict)"
            )

    def run_with_cache(self, *model_args, names_filter=None, **kwargs):
        """TL's `run_with_cache`; a name (or list of names) that does not exist is an error.

        As in TransformerLens, the output keeps its autograd graph while gradients are enabled
        (`out.sum().backward()` works), and that graph holds what backward needs beside the
        detached cache; under `torch.no_grad()` (or `torch.set_grad_enabled(False)`, as TL's
        notebooks start) only the cache is kept (benchmarks/RESULTS.md, `bench_peers.py`).

        The cache is a `RewardActivationCache`: it knows each row's reward position
        (`cache.reward_positions`, in the cache's own position coordinates when `pos_slice=` kept
        only some), so `pos_slice="reward"` reads one position per row.

        Args:
            *model_args: The forward's arguments.
            names_filter: TL's: the hook names to cache (a name, a list, or a function).
            **kwargs: The forward's and TL's `run_with_cache` keywords.

        Returns:
            The forward's output and the cache.
        """
        if isinstance(names_filter, str):
            self.check_hook_names([names_filter])
        elif isinstance(names_filter, (list, tuple)):
            self.check_hook_names(names_filter)
        batch_mask = self._batch_mask(model_args, kwargs)
        problem = padding.padded_slice_problem(kwargs.get("pos_slice"), batch_mask)
        if problem is not None:
            raise InvalidArgumentError(problem)
        self._check_cache_fits(model_args, names_filter, kwargs)
        # TL drops the batch axis before slicing positions, which breaks on the head's
        # [batch, n_objectives] hook points: drop it here, after TL's slicing, instead
        unbatched = kwargs.pop("remove_batch_dim", False)
        if kwargs.get("incl_bwd"):
            out, cache = self._run_with_gradients(model_args, names_filter, kwargs)
        else:
            out, cache = super().run_with_cache(*model_args, names_filter=names_filter, **kwargs)
        if isinstance(cache, RewardActivationCache) or not isinstance(cache, ActivationCache):
            return out, cache
        cache_dict = cache.cache_dict
        if unbatched:
            cache_dict = {name: act[0] for name, act in cache_dict.items()}
        positions, note = self._cache_reward_positions(model_args, kwargs)
        wrapped = RewardActivationCache(
            cache_dict,
            self,
            has_batch_dim=not unbatched,
            reward_positions=positions,
            positions_note=note,
            attention_mask=None if kwargs.get("pos_slice") is not None else batch_mask,
        )
        return out, wrapped

    def _run_with_gradients(self, model_args, names_filter, kwargs) -> tuple[Tensor, Any]:
        """`run_with_cache(..., incl_bwd=True)`: the backward of the rewards' sum.

        TL calls `out.backward()`, which needs one number. Rows of a batch never interact, so the
        gradient of the sum of the rows' rewards at row `b`'s activations is row `b`'s own
        reward's gradient: the cached `*_grad` entries are per-row gradients. Only the pooled
        reward has that meaning; per-position outputs and unnamed objectives are refused.
        """
        return_type = kwargs.get("return_type", model_args[1] if len(model_args) > 1 else "logits")
        if return_type != "reward":
            raise InvalidArgumentError(
                f"run_with_cache(..., incl_bwd=True) needs a scalar to differentiate; "
                f"return_type={return_type!r} gives one value per position. Pass "
                "return_type='reward' (the gradient of each row's reward, cached as *_grad), or "
                "run your own scalar metric: with model.hooks(bwd_hooks=...): "
                "metric(model(ids)).backward()"
            )
        if self.n_objectives > 1 and getattr(self, "gating", None) is None:
            raise AmbiguousObjectiveError(
                f"run_with_cache(..., incl_bwd=True) on a head of {self.n_objectives} objectives: "
                "a gradient needs one of them. Differentiate your own metric of one objective "
                "(model.objective_rewards(ids)[:, k]) under model.hooks(bwd_hooks=...)"
            )
        kwargs = dict(kwargs)
        tl_keys = ("device", "reset_hooks_end", "clear_contexts", "pos_slice", "incl_bwd")
        options = {k: kwargs.pop(k) for k in tl_keys if k in kwargs}
        cache_dict, fwd, bwd = self.get_caching_hooks(
            names_filter,
            True,
            options.get("device"),
            pos_slice=Slice.unwrap(options.get("pos_slice")),
        )
        with self.hooks(
            fwd_hooks=fwd,
            bwd_hooks=bwd,
            reset_hooks_end=options.get("reset_hooks_end", True),
            clear_contexts=options.get("clear_contexts", False),
        ):
            out = self(*model_args, **kwargs)
            out.sum().backward()  # rows are independent: each row gets its own reward's gradient
        return out, ActivationCache(cache_dict, self, has_batch_dim=True)

    def _check_cache_fits(self, model_args, names_filter, kwargs) -> None:
        """Refuse a `run_with_cache` whose forward and cached activations cannot fit."""
        tokens = _call_tokens(model_args, kwargs)
        if tokens is None:
            return
        pos_slice = kwargs.get("pos_slice")
        kept = None
        if pos_slice is not None:
            kept = len(Slice.unwrap(pos_slice).indices(tokens.shape[1]).reshape(-1))
        need = memory.cache_bytes(
            self, tokens.shape[0], tokens.shape[1], names_filter, kept, bool(kwargs.get("incl_bwd"))
        )
        memory.check_fits(self, tokens, "run_with_cache", cache=need)

    def _batch_mask(self, model_args, kwargs) -> Tensor | None:
        """The padding mask of a forward's token ids (given or inferred), `None` when unpadded."""
        tokens = _call_tokens(model_args, kwargs)
        if tokens is None:
            return None
        mask = kwargs.get("attention_mask")
        if mask is None:
            with contextlib.suppress(RewardLensError):
                mask = self.infer_attention_mask(tokens)
        return None if mask is None else mask.cpu()

    def _cache_reward_positions(self, model_args, kwargs) -> tuple[Tensor | None, str]:
        """Each row's reading position in the cache's coordinates, or `None` and why not."""
        tokens = model_args[0] if model_args else kwargs.get("input")
        if kwargs.get("start_at_layer") is not None:
            tokens = kwargs.get("tokens")
        if kwargs.get("pool_positions") is not None:
            positions = torch.as_tensor(kwargs["pool_positions"]).reshape(-1).cpu()
        elif not isinstance(tokens, Tensor) or tokens.dtype.is_floating_point:
            return (
                None,
                "it was built from a run without token ids (pass tokens= with start_at_layer)",
            )
        else:
            tokens = tokens if tokens.ndim == 2 else tokens[None]
            mask = kwargs.get("attention_mask")
            if mask is None:
                mask = self.infer_attention_mask(tokens)
            if self.pad_token_id is None and tokens.shape[0] > 1:
                return None, "the model has no pad id, so rows of a batch have no reading rule"
            positions = self.pool_positions(tokens, mask).cpu()
        pos_slice = kwargs.get("pos_slice")
        if pos_slice is None or tokens is None:
            return positions, ""
        kept = torch.as_tensor(Slice.unwrap(pos_slice).indices(tokens.shape[-1]))
        kept = kept.reshape(-1) % tokens.shape[-1]
        where = positions[:, None] == kept[None, :]
        if not bool(where.any(1).all()):
            return None, (
                f"run_with_cache(pos_slice={pos_slice!r}) did not keep every row's reading "
                f"position {positions.tolist()}"
            )
        return where.long().argmax(1), ""

    def hooks(self, fwd_hooks=(), bwd_hooks=(), *args, **kwargs):
        """TL's `hooks` context manager; string hook names are checked first.

        Args:
            fwd_hooks: `(name, hook)` forward hooks.
            bwd_hooks: `(name, hook)` backward hooks.
            *args: TL's further arguments.
            **kwargs: TL's further keywords.

        Returns:
            The context manager.
        """
        fwd_hooks, bwd_hooks = list(fwd_hooks), list(bwd_hooks)
        self.check_hook_names(n for n, _ in [*fwd_hooks, *bwd_hooks] if isinstance(n, str))
        return super().hooks(fwd_hooks, bwd_hooks, *args, **kwargs)

    def run_with_hooks(self, *model_args, fwd_hooks=(), bwd_hooks=(), **kwargs):
        """TL's `run_with_hooks`; string hook names are checked first.

        A patch of another run's activations (TransformerLens's `patching` functions) whose length
        differs from this run's is refused instead of being paired prefix-aligned.

        Args:
            *model_args: The forward's arguments.
            fwd_hooks: `(name, hook)` forward hooks.
            bwd_hooks: `(name, hook)` backward hooks.
            **kwargs: The forward's and TL's keywords.

        Returns:
            The forward's output.
        """
        self.check_hook_names(n for n, _ in [*fwd_hooks, *bwd_hooks] if isinstance(n, str))
        tokens = model_args[0] if model_args else kwargs.get("input")
        if isinstance(tokens, Tensor) and not tokens.dtype.is_floating_point:
            check_patch_lengths(fwd_hooks, tokens.shape[-1])
        return super().run_with_hooks(
            *model_args, fwd_hooks=fwd_hooks, bwd_hooks=bwd_hooks, **kwargs
        )

    def attach_extras(self, extras: dict[str, Any]) -> None:
        """Attach the modules an adapter converts beyond backbone and head.

        They are `adapter.extra_modules`; a plain head has none.

        Args:
            extras: Name → module.

        Raises:
            InvalidArgumentError: Any extra module (a plain head takes none).
        """
        if extras:
            raise InvalidArgumentError(
                f"{type(self).__name__} takes no extra modules: {list(extras)}"
            )

    def add_sae(self, sae, use_error_term=None, exclude_special_tokens=False):
        """sae_lens's `add_sae`, with checks sae_lens does not make.

        A hook name that does not exist is an error (sae_lens only logs a warning and skips), so is
        an SAE whose `d_in` is not the hook's width (`check_sae_width`; sae_lens would fail inside
        the next forward), and excluding the token the reward is read at is refused
        (`check_special_token_exclusion`).

        Args:
            sae: The SAE.
            use_error_term: sae_lens's.
            exclude_special_tokens: sae_lens's (never the reading token).

        Returns:
            What sae_lens's `add_sae` returns.
        """
        from .sae.splice import check_sae_width, check_special_token_exclusion

        self.check_hook_names([sae.cfg.metadata.hook_name])
        check_sae_width(self, sae)
        exclude_special_tokens = check_special_token_exclusion(self, sae, exclude_special_tokens)
        return super().add_sae(sae, use_error_term, exclude_special_tokens)

    # -- text convenience -----------------------------------------------------------------
    def encode(
        self,
        prompt: Prompt,
        response: str,
        *,
        max_length: int | None = None,
        truncation: Truncation = "error",
        use_chat_template: bool | None = None,
    ) -> EncodedConversation:
        """Token ids for one conversation, with the response's span (`inputs.encode_conversation`).

        `prompt`: the user message, or the conversation so far; `response`: the assistant's
        reply. `max_length` defaults to the model's context; `truncation` (`"error"`,
        `"left"`, `"right"`, `"both"`) says what happens to a longer conversation;
        `use_chat_template` (default `None`: the tokenizer's template when it has one).
        Warns once (an `UnknownTokenWarning`) when more than a fifth of the sequence became the
        tokenizer's unknown token, naming the template used. Every analysis that edits or sweeps a
        response builds on it; a judge or PRM renders its template around the response instead.

        Args:
            prompt: The user message, or the conversation so far.
            response: The assistant's reply.
            max_length: The longest sequence (default: the model's context).
            truncation: `"error"`, `"left"`, `"right"` or `"both"`.
            use_chat_template: Use the tokenizer's chat template (default: when it has one).

        Returns:
            The `EncodedConversation`.
        """
        from .inputs import encode_checked

        return encode_checked(
            self._require_tokenizer(),
            prompt,
            response,
            max_length=self.cfg.n_ctx if max_length is None else max_length,
            truncation=truncation,
            use_chat_template=use_chat_template,
        )

    def score(
        self,
        prompt: Prompt,
        response: str,
        *,
        max_length: int | None = None,
        truncation: Truncation = "error",
        use_chat_template: bool | None = None,
    ) -> Tensor:
        """Reward of one (`prompt`, `response`) pair, from text.

        `max_length`, `truncation` and `use_chat_template` as for `encode`.

        Args:
            prompt: The user message, or the conversation so far.
            response: The assistant's reply.
            max_length: The longest sequence (default: the model's context).
            truncation: `"error"`, `"left"`, `"right"` or `"both"`.
            use_chat_template: Use the tokenizer's chat template (default: when it has one).

        Returns:
            A scalar tensor for a scalar head, `[n_objectives]` for a plain multi-objective head.
        """
        enc = self.encode(
            prompt,
            response,
            max_length=max_length,
            truncation=truncation,
            use_chat_template=use_chat_template,
        )
        return self.rewards(torch.tensor([enc.ids], device=self.cfg.device))[0]

    def _require_tokenizer(self):
        if self.tokenizer is None:
            raise RewardLensError(
                "this model has no tokenizer: pass tokenizer= to from_pretrained or feed ids"
            )
        return self.tokenizer


class GatedUnembed(Unembed):
    """The head of a gated multi-objective model: its columns are objectives, not the score.

    The gated score mixes the objectives with a gate computed from the prompt, which
    `model.unembed(x)` does not see, so a user's `model.unembed(model.ln_final(resid))[..., 0]`
    would silently read objective 0. Called from a user's code it raises
    `AmbiguousObjectiveError` pointing to the forms that say which; the library's own calls
    (and TransformerLens's inside the forward) run it as TL's `Unembed`.
    """

    __slots__ = ()

    def forward(self, residual: Float[Tensor, "batch pos d_model"]) -> Tensor:
        """TL's unembed, for the library; refused when a user calls it directly.

        Args:
            residual: The normalised residual stream.

        Returns:
            The objectives at every position, `[batch, pos, n_objectives]`.

        Raises:
            AmbiguousObjectiveError: Called from outside the library.
        """
        if padding.called_by_user():
            raise AmbiguousObjectiveError(
                "model.unembed(...) of a gated multi-objective model gives every objective, not "
                "the gated score: the gate depends on the prompt, which unembed does not see. "
                "For the score, read cache.residual_stack_to_reward(stack) (or "
                "model.score_direction(ids) for its per-input direction); for one objective, "
                "name it: normed @ model.W_U[:, model.objective_names.index(name)], or "
                "model(ids, return_type='objectives')"
            )
        return super().forward(residual)


class HookedArmoRM(HookedRewardModel):
    """ArmoRM layout: objectives, a gate, and their gated score.

    Objectives at the last real token, a gate over the prompt's final hidden state, and
    `score = Σ gate ⊙ (objectives @ reward_transform_matrix)`.

    The attribution direction of the score for one input is `W_R @ (T @ gate)`
    (`score_direction`); single objectives use the columns of `W_R`.

    Args:
        cfg: The TL config.
        **facts: `HookedRewardModel`'s reward-model facts (`loading.ModelFacts`).

    Examples:
        The zoo's multi-objective model: three objectives, gated into one score.

        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("multi"))
        >>> type(model).__name__, model.objective_names
        ('HookedArmoRM', ('helpfulness', 'harmlessness', 'verbosity'))
        >>> ids = model.to_tokens([("how bake bread", "oven flour")])
        >>> _, cache = model.run_with_cache(ids)
        >>> objectives, gate = model.objective_rewards(ids), cache["hook_gate"]
        >>> [round(x, 3) for x in gate[0].tolist()]
        [0.501, 0.299, 0.2]
        >>> score = (gate * (objectives @ model.reward_transform_matrix)).sum(-1)
        >>> round(score.item(), 4), round(model.rewards(ids).item(), 4)
        (2.1978, 2.1978)
    """

    #: `T`, `[n_objectives, n_objectives]` (a buffer, set by `attach_gating`)
    reward_transform_matrix: Tensor

    def __init__(self, cfg: HookedTransformerConfig, **facts: Unpack[ModelFacts]):
        """Build the model with gating hook points; the gating module is attached later.

        Args:
            cfg: The TL config.
            **facts: `HookedRewardModel`'s reward-model facts (`loading.ModelFacts`).
        """
        super().__init__(cfg, **facts)
        self.hook_gate = HookPoint()
        self.hook_score = HookPoint()
        self.setup()
        self.gating: torch.nn.Module | None = None
        self.gating_token_pattern: tuple[int, ...] = ()

    def attach_extras(self, extras: dict[str, Any]) -> None:
        """Attach the gating module and reward transform (`attach_gating`).

        Args:
            extras: `attach_gating`'s keywords.
        """
        self.attach_gating(**extras)

    def attach_gating(self, gating, reward_transform_matrix, gating_token_pattern) -> None:
        """Attach the gating module, the reward transform matrix and the gating token pattern.

        Args:
            gating: The gating module.
            reward_transform_matrix: `T`, `[n_objectives, n_objectives]`.
            gating_token_pattern: The token ids that mark the prompt's end.
        """
        self.gating = gating.to(self.cfg.device)
        self.register_buffer("reward_transform_matrix", reward_transform_matrix.to(self.cfg.device))
        self.gating_token_pattern = tuple(gating_token_pattern)
        self.unembed.__class__ = (
            GatedUnembed  # the same module, refusing to be read as "the reward"
        )

    def gate_positions(self, tokens: Int[Tensor, "batch pos"]) -> Int[Tensor, " batch"]:
        """Where each row's gate is read (the prompt's end).

        Args:
            tokens: Token ids, `[batch, pos]`.

        Returns:
            One position per row.
        """
        return gating_positions(tokens, self.gating_token_pattern)

    def _gate_from(self, normed: Tensor, tokens: Tensor | None) -> Float[Tensor, "batch n_obj"]:
        if tokens is None:
            raise RewardLensError(
                "ArmoRM scores need tokens= (with start_at_layer) to find the gating position"
            )
        if self.gating is None:
            raise RewardLensError("this HookedArmoRM has no gating module: call attach_gating")
        rows = torch.arange(normed.shape[0], device=normed.device)
        prompt_state = normed[rows, self.gate_positions(tokens).to(normed.device)]
        return self.hook_gate(self.gating(prompt_state.to(self.reward_transform_matrix.dtype)))

    def _final_reward(self, pooled, normed, tokens):
        gate = self._gate_from(normed, tokens)
        transformed = pooled @ self.reward_transform_matrix.to(pooled.dtype)
        return self.hook_score((gate.to(pooled.dtype) * transformed).sum(-1))

    def _gated_per_position(self, resid, tokens):
        """The gated score at every position, `[batch, pos, 1]`.

        The objectives there mixed with this row's gate, `objectives @ (T @ gate)` (at the reading
        position: the score).
        """
        normed = self.ln_final(resid) if self.cfg.normalization_type is not None else resid
        objectives = self.unembed(normed)
        gate = self._gate_from(normed, tokens).to(objectives.dtype)
        mix = gate @ self.reward_transform_matrix.T.to(objectives.dtype)  # [batch, n_obj]
        return (objectives * mix[:, None, :]).sum(-1, keepdim=True)

    def gate(self, input_ids, attention_mask=None) -> Float[Tensor, "batch n_obj"]:
        """The gate of each row, `[batch, n_obj]`.

        Args:
            input_ids: Token ids, `[batch, pos]`.
            attention_mask: `[batch, pos]`, ones for real tokens.

        Returns:
            The gate.
        """
        _, cache = self.run_with_cache(
            input_ids,
            return_type="reward",
            attention_mask=attention_mask,
            names_filter="hook_gate",
        )
        return cache["hook_gate"]

    def score_direction(self, input_ids, attention_mask=None) -> Float[Tensor, "batch d_model"]:
        """Per-input direction `g ⊙ (W_R @ T @ gate)` of the score.

        Along it, `ln_final.hook_normalized` at the reward position gives the score minus
        `b_R @ T @ gate` (`g` is the final norm's weight when it was not folded into `W_R`, else 1).

        Args:
            input_ids: Token ids, `[batch, pos]`.
            attention_mask: `[batch, pos]`, ones for real tokens.

        Returns:
            One direction per row, `[batch, d_model]`.
        """
        gate = self.gate(input_ids, attention_mask)
        direction = (self.reward_transform_matrix @ gate.T).T @ self.W_R.T
        return direction * self.final_norm_weight()


def _call_tokens(model_args: tuple, kwargs: dict) -> Tensor | None:
    """The token ids `[batch, pos]` of a forward call (`tokens=` with `start_at_layer`), or `None`.

    `None` when the call holds no integer ids of one or two dimensions (a residual input
    without `tokens=`, text, …): the forward's own checks say what is wrong with those.
    """
    tokens = model_args[0] if model_args else kwargs.get("input")
    if kwargs.get("start_at_layer") is not None:
        tokens = kwargs.get("tokens")
    if not isinstance(tokens, Tensor) or tokens.is_floating_point() or tokens.ndim not in (1, 2):
        return None
    return tokens if tokens.ndim == 2 else tokens[None]


def _not_a_tensor_message(tokens: Any) -> str:
    if _holds_text(tokens):
        return (
            "HookedRewardModel takes token ids, not strings (BOS and chat templates matter for "
            "rewards): build them with reward_lens_tl.inputs.encode_conversation / "
            "model.encode(prompt, response)"
        )
    if isinstance(tokens, (list, tuple)):
        return (
            f"token ids came as a Python {type(tokens).__name__} (a list of ints); pass a tensor: "
            "torch.tensor([...]) for one sequence, or reward_lens_tl.pad_batch(sequences, "
            "model.pad_token_id) for several (it returns input_ids and attention_mask)"
        )
    return (
        f"expected a tensor of integer token ids, got a {type(tokens).__name__}; convert it "
        "with torch.as_tensor(...)"
    )


def _holds_text(obj: Any, depth: int = 0) -> bool:
    if isinstance(obj, (str, dict)):
        return True
    if isinstance(obj, (list, tuple)) and depth < 2:
        return any(_holds_text(x, depth + 1) for x in obj[:8])
    return False


#: Hook points the non-finite search skips: masked attention scores are `-inf` by design,
#: and hooking either would move attention off the fast path the failing run took.
_NOT_SEARCHED = ("hook_attn_scores", "hook_pattern")
#: Hook points of pooled outputs, `[batch, ...]` without a position axis.
_POOLED_HOOKS = ("hook_reward", "hook_gate", "hook_score")


def non_finite_reward_error(model, reward: Tensor, args: tuple) -> NonFiniteActivationError:
    """The error for a reward that is not finite.

    It names which rows, which value, and the first hook point whose output at the reading token
    is not finite. Finding it re-runs the forward with read-only hooks, on this error path only
    (a finite reward costs one `isfinite` check).

    Args:
        model: The model.
        reward: The reward computed.
        args: The arguments of the forward that computed it.

    Returns:
        The error (not raised).
    """
    flat = reward.detach().reshape(reward.shape[0], -1)
    rows = (~torch.isfinite(flat)).any(-1).nonzero().flatten().tolist()
    head = f"the reward of row(s) {rows[:8]} is {_first_bad_value(flat[rows])}"
    return NonFiniteActivationError(f"{head}: {_locate_non_finite(model, args, rows)} "
                                    f"{_non_finite_advice(model)}")  # fmt: skip


def _locate_non_finite(model, args: tuple, rows: list[int]) -> str:
    _, attention_mask, pool_positions, _, tokens, kwargs = args
    if kwargs.get("past_kv_cache") is not None:
        return "(not located: a run that extends a key-value cache is not repeated)."
    positions = pool_positions
    if positions is None and tokens is not None:
        positions = model.pool_positions(tokens, attention_mask)
    if positions is None:
        return "(not located: the reading positions are unknown without tokens=)."
    rows_t = torch.as_tensor(rows)
    at = torch.as_tensor(positions).reshape(-1).cpu()[rows_t]
    found: list[str] = []

    def probe(act, hook):
        if not found:
            where = _non_finite_at(act, hook.name, rows_t, at)
            if where is not None:
                found.append(where)

    searched = [(lambda name: not name.endswith(_NOT_SEARCHED), probe)]
    try:
        with torch.no_grad(), model.hooks(fwd_hooks=searched):
            model._reward(*args)
    except Exception as err:  # noqa: BLE001 - locating must never hide the real error
        return f"(not located: re-running with hooks raised {type(err).__name__}: {err})."
    if not found:
        return (
            "(not located: a second run with read-only hooks is finite at every hook point; the "
            "unhooked run takes faster paths: compare with model.set_fast_attention(False))."
        )
    name = found[0].split(" ", 1)[0]
    edited = " (a hook attached there edits it)" if model.hook_dict[name].fwd_hooks else ""
    return f"{found[0]}{edited}, the first hook point whose output there is not finite."


def _non_finite_at(act: Tensor, name: str, rows: Tensor, at: Tensor) -> str | None:
    """`"<name> at row r, position p (the reading token) is inf"` or `None` if finite."""
    rows = rows.to(act.device)
    pooled = name.endswith(_POOLED_HOOKS) or act.ndim < 2
    if act.shape[0] <= int(rows.max()) or (not pooled and act.shape[1] <= int(at.max())):
        return None  # no batch or position axis that the rows and reading positions index
    sel = act[rows] if pooled else act[rows, at.to(act.device)]
    finite = torch.isfinite(sel.reshape(len(rows), -1)).all(-1)
    if bool(finite.all()):
        return None
    i = int((~finite).nonzero()[0])
    place = "" if pooled else f", position {int(at[i])} (the reading token)"
    return f"{name} at row {int(rows[i])}{place} is {_first_bad_value(sel[i])}"


def _first_bad_value(values: Tensor) -> str:
    return str(float(values[~torch.isfinite(values)].reshape(-1)[0]))


def _non_finite_advice(model) -> str:
    if model.embed.W_E.dtype == torch.float16:
        return (
            "The model overflows in float16 (largest value 65504): load it with "
            "dtype=torch.bfloat16 or torch.float32 (from_pretrained(..., dtype=...))."
        )
    return (
        "Check the hooks that edit activations and any residual passed with start_at_layer "
        "(checkpoint weights are checked finite when they load)."
    )


MODEL_KINDS: dict[str, type[HookedRewardModel]] = {
    "scalar": HookedRewardModel,
    "armorm": HookedArmoRM,
}


@loading_entry_point(verify=True)
def load_reward_model(
    model_or_path: nn.Module | str | Path,
    tokenizer: Any = None,
    **options: Unpack[LoadOptions],
) -> HookedRewardModel:
    """Convert a reward model into a `HookedRewardModel` (or the subclass its adapter asks for).

    The function form of `HookedRewardModel.from_pretrained` (same options, same result). The
    model is an HF module, or a local checkpoint directory read as untrusted input: see
    `reward_lens_tl.checkpoint`. The options are `convert_hf_model`'s, plus `verify`
    (`reward_lens_tl.loading.LoadOptions`).

    Args:
        {model}
        {options}
        {verify}

    Returns:
        The converted model.

    Raises:
        {unknown}

    Examples:
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> load_reward_model(tiny_reward_model("gpt2")).cfg.normalization_type
        'LNPre'
    """
    return HookedRewardModel.from_pretrained(model_or_path, tokenizer, **options)


def parity_at_load(model_or_path: nn.Module | str | Path, n_layers: int = 2) -> float:
    """The check `from_pretrained(..., verify=True)` runs, alone, with the default options.

    Max |converted − HF| reward on random tokens, from a checkpoint on a truncated copy of
    `n_layers` layers (`reward_lens_tl.loading.verify_plan`, built as the class the adapter asks
    for), so it is cheap at any size.

    Args:
        model_or_path: An HF model, a checkpoint directory or a hub id.
        n_layers: The layers of the truncated copy.

    Returns:
        The largest difference.

    Examples:
        >>> from reward_lens_tl.zoo import zoo_path
        >>> parity_at_load(zoo_path("scalar")) < 1e-4
        True
    """
    plan = plan_conversion(model_or_path, None, requested({}))
    return verify_plan(MODEL_KINDS[plan.adapter.model_kind], plan, n_layers)
