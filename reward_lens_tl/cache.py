"""`RewardActivationCache`: TransformerLens's `ActivationCache` plus per-row read-outs.

A TL user reads the last position (`pos_slice=-1`). Every batch this library builds is left
padded, so `-1` is each row's reading token there (see `reward_lens_tl.padding`), and TL's
`pos_slice` arguments mean exactly what they mean in TL. This cache also knows each row's
reading position (`cache.reward_positions`, in the cache's own coordinates when
`run_with_cache(pos_slice=...)` kept only some positions) and accepts `pos_slice="reward"`
wherever TL takes a `pos_slice` — `accumulated_resid`, `decompose_resid`,
`stack_head_results`, `stack_neuron_results`, `get_neuron_results`,
`get_full_resid_decomposition`, `apply_ln_to_stack`, `logit_attrs` — reading one position
per row whatever the padding. `residual_stack_to_reward` turns a stack read there into
contributions to the model's reward (final norm with its frozen scale, then the head; for a
gated ArmoRM-style head, the gated score with this run's gate).

It also refuses the one TL idiom that silently goes wrong on a model loaded without weight
processing: `apply_ln_to_stack` ignores the final norm's weight in TL. Here the weight is
applied, and a final LayerNorm *bias* (which belongs to no component) is an error.

Examples:
    >>> import torch
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.testing import tiny_reward_model, random_batch
    >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    >>> ids, mask = random_batch(2, [7, 4])
    >>> _, cache = model.run_with_cache(ids, attention_mask=mask)
    >>> stack = cache.accumulated_resid(pos_slice="reward")
    >>> lens = cache.residual_stack_to_reward(stack) + model.b_R[0]   # [layers + 1, batch]
    >>> bool(torch.allclose(lens[-1], model.rewards(ids, mask), atol=1e-4))
    True
"""

from __future__ import annotations

import contextlib

import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens import ActivationCache
from transformer_lens.utilities.slice import Slice, SliceInput

from .errors import InvalidArgumentError, RewardLensError
from .padding import padded_slice_problem

__all__ = [
    "RewardActivationCache",
]

REWARD = "reward"


def _per_row_method(name: str):
    """TL's `ActivationCache.<name>` taking `pos_slice="reward"` per row."""
    base = getattr(ActivationCache, name)

    def method(self, *args, pos_slice=None, return_labels=False, **kwargs):
        bound = base.__get__(self)
        with self._final_weight_in_projection(name, args, kwargs) as kwargs:
            return self._per_row(
                bound, *args, pos_slice=pos_slice, return_labels=return_labels, **kwargs
            )

    method.__name__ = name
    method.__doc__ = (
        f"TL's ``{name}``; ``pos_slice='reward'`` reads each row's reward position, giving "
        "``[..., batch, d_model]`` (or ``[..., batch]`` with a 1-D ``project_output_onto``).\n\n"
        "Args:\n"
        "    *args: TL's positional arguments.\n"
        "    pos_slice: TL's ``pos_slice``, or ``'reward'``.\n"
        "    return_labels: Also return the labels (as in TL).\n"
        "    **kwargs: TL's other keyword arguments.\n"
    )
    return method


#: Cache methods whose `apply_ln=True` + `project_output_onto` TL fuses (its analytical
#: path skips `apply_ln_to_stack`), with the position of their `layer` argument.
_PROJECTING = {"get_full_resid_decomposition": 0, "stack_neuron_results": 0}


class RewardActivationCache(ActivationCache):
    """An `ActivationCache` that knows each row's reward-reading position.

    `model.run_with_cache` returns one; see the module docstring.

    Args:
        cache_dict: The cached activations.
        model: The model that produced them.
        has_batch_dim: Whether the activations have a batch dimension.
        reward_positions: Each row's reward-reading position (`[batch]`), or `None`.
        positions_note: A note on how the positions were found, for error messages.
        attention_mask: The batch's padding mask in the cache's position coordinates
            (`None`: unpadded or unknown); a `pos_slice` that lands on a row's pads is
            refused (`reward_lens_tl.padding.padded_slice_problem`).

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> ids = model.to_tokens(
        ...     [("how bake bread", "oven flour"), ("how bake bread", "the bomb")])
        >>> _, cache = model.run_with_cache(ids)
        >>> stack, labels = cache.decompose_resid(pos_slice="reward", return_labels=True)
        >>> parts = cache.residual_stack_to_reward(stack)  # [component, batch]
        >>> [round(r, 3) for r in (parts.sum(0) + cache.reward_bias()).tolist()]
        [0.245, -6.865]
    """

    def __init__(
        self,
        cache_dict,
        model,
        has_batch_dim: bool = True,
        reward_positions=None,
        positions_note: str = "",
        attention_mask=None,
    ):
        """Wrap `cache_dict` with each row's reward-reading position (the class's Args)."""
        super().__init__(cache_dict, model, has_batch_dim=has_batch_dim)
        self.reward_positions: Int[Tensor, " batch"] | None = reward_positions
        self._positions_note = positions_note
        self._weight_folded_into_projection = False
        self.attention_mask = attention_mask

    def check_pos_slice(self, pos_slice) -> None:
        """Refuse a `pos_slice` that would read some row's pads as tokens.

        Args:
            pos_slice: TL's `pos_slice`.

        Raises:
            InvalidArgumentError: The selection lands on a pad of some row.
        """
        if not self.has_batch_dim:
            return
        problem = padded_slice_problem(pos_slice, self.attention_mask)
        if problem is not None:
            raise InvalidArgumentError(problem)

    # -- per-row gathering ---------------------------------------------------------------
    def _rows(self) -> Int[Tensor, " batch"]:
        if self.reward_positions is None:
            why = self._positions_note or "it was built without token ids"
            raise RewardLensError(
                f"this cache does not know the reward positions: {why}. Pass explicit positions "
                "instead of pos_slice='reward', or rerun run_with_cache with the token ids"
            )
        return self.reward_positions

    def _one_position(self) -> int | None:
        """The reading position shared by every row, or `None` when rows differ."""
        pos = self._rows()
        return int(pos[0]) if bool((pos == pos[0]).all()) else None

    def gather_reward_positions(
        self, stack: Float[Tensor, "... batch pos d"], pos_dim: int = -2
    ) -> Float[Tensor, "... batch d"]:
        """`stack[..., b, reward_positions[b], :]` for every row `b`.

        `pos_dim=-1` is for a stack without its last `d` axis.

        Args:
            stack: Activations with batch and position axes.
            pos_dim: The position axis (`-2`, or `-1` without a `d` axis).

        Returns:
            The stack at each row's reward position.
        """
        pos = self._rows().to(stack.device)
        if not self.has_batch_dim:
            return stack.select(pos_dim, int(pos[0]))
        rows = torch.arange(pos.shape[0], device=stack.device)
        if pos_dim == -1:
            return stack[..., rows, pos]
        return stack[..., rows, pos, :]

    def _per_row(self, method, *args, pos_slice=None, return_labels=False, **kwargs):
        self.check_pos_slice(pos_slice)
        if not _is_reward(pos_slice):
            return method(*args, pos_slice=pos_slice, return_labels=return_labels, **kwargs)
        shared = self._one_position()
        if shared is not None:  # every row read at one position (left padding): TL's own slice
            return method(*args, pos_slice=shared, return_labels=return_labels, **kwargs)
        out = method(*args, pos_slice=None, return_labels=return_labels, **kwargs)
        project = kwargs.get("project_output_onto")
        pos_dim = -1 if project is not None and project.ndim == 1 else -2
        if return_labels:
            stack, labels = out
            return self.gather_reward_positions(stack, pos_dim), labels
        return self.gather_reward_positions(out, pos_dim)

    accumulated_resid = _per_row_method("accumulated_resid")
    decompose_resid = _per_row_method("decompose_resid")
    stack_head_results = _per_row_method("stack_head_results")
    stack_neuron_results = _per_row_method("stack_neuron_results")
    get_full_resid_decomposition = _per_row_method("get_full_resid_decomposition")

    def get_neuron_results(
        self,
        layer: int,
        neuron_slice: Slice | SliceInput = None,
        pos_slice: Slice | SliceInput | str = None,
        project_output_onto: Tensor | None = None,
    ) -> Tensor:
        """TL's `get_neuron_results`; `pos_slice='reward'` reads each row's reward position.

        Args:
            layer: The layer.
            neuron_slice: The neurons (as in TL).
            pos_slice: TL's `pos_slice`, or `"reward"`.
            project_output_onto: A direction to project each neuron's output onto (as in TL).

        Returns:
            Each neuron's output (or its projection).
        """
        base = ActivationCache.get_neuron_results.__get__(self)
        project = project_output_onto
        self.check_pos_slice(pos_slice)
        if not _is_reward(pos_slice):
            return base(layer, neuron_slice, pos_slice, project_output_onto=project)
        shared = self._one_position()
        if shared is not None:
            return base(layer, neuron_slice, shared, project_output_onto=project)
        # [batch, pos, neuron, (d | n_out)]
        out = base(layer, neuron_slice, None, project_output_onto=project)
        pos_dim = -2 if project is not None and project.ndim == 1 else -3
        return self.gather_reward_positions(out.movedim(pos_dim, -2), -2)

    @contextlib.contextmanager
    def _final_weight_in_projection(self, name, args, kwargs):
        """Fold an unfolded final norm weight into the projection of TL's fused path.

        With `apply_ln=True` and `project_output_onto` at the final norm, TL's fused path never
        calls `apply_ln_to_stack`, so an unfolded final norm weight would be lost: fold it into the
        projection (`W → w ⊙ W`) and skip it in `apply_ln_to_stack`.
        """
        project = kwargs.get("project_output_onto")
        layer = args[_PROJECTING[name]] if name in _PROJECTING and args else kwargs.get("layer")
        fused = (
            not self._weight_folded_into_projection  # an outer call already folded it
            and name in _PROJECTING
            and project is not None
            and kwargs.get("apply_ln", False)
            and not kwargs.get("mlp_input", False)
            and (layer is None or layer == -1 or layer == self.model.cfg.n_layers)
        )
        if not fused:
            yield kwargs
            return
        self._check_no_final_bias()
        w = getattr(self.model.ln_final, "w", None)
        if w is not None:
            w = w.to(project.device, project.dtype)
            project = w * project if project.ndim == 1 else w[:, None] * project
        self._weight_folded_into_projection = True
        try:
            yield {**kwargs, "project_output_onto": project}
        finally:
            self._weight_folded_into_projection = False

    # -- the final norm ------------------------------------------------------------------
    def apply_ln_to_stack(
        self,
        residual_stack,
        layer=None,
        mlp_input=False,
        pos_slice=None,
        batch_slice=None,
        has_batch_dim=True,
        recompute_ln=False,
    ):
        """TL's `apply_ln_to_stack`, with the unfolded final norm weight and `pos_slice="reward"`.

        The final norm's weight is applied when the model was loaded without folding it (TL ignores
        it), and `pos_slice="reward"` serves stacks read at each row's reward position
        (`[..., batch, d_model]`).

        Args:
            residual_stack: The stack of residual-stream components.
            layer: The layer whose norm applies (`None` or `-1`: the final norm).
            mlp_input: Apply the layer's MLP-input norm instead of its attention-input norm.
            pos_slice: TL's `pos_slice`, or `"reward"`.
            batch_slice: TL's `batch_slice`.
            has_batch_dim: Whether the stack has a batch axis.
            recompute_ln: Recompute the norm's scale from the stack (as in TL).

        Returns:
            The normalised stack.
        """
        final = layer is None or layer == -1 or layer == self.model.cfg.n_layers
        if final and not recompute_ln:
            self._check_no_final_bias()
        self._check_one_row(has_batch_dim, batch_slice)
        self.check_pos_slice(pos_slice)
        if _is_reward(pos_slice):
            shared = self._one_position()
            pos_slice = shared if shared is not None else pos_slice
        if _is_reward(pos_slice):
            out = self._apply_ln_per_row(residual_stack, layer, mlp_input, recompute_ln)
        else:
            out = super().apply_ln_to_stack(
                residual_stack,
                layer,
                mlp_input,
                pos_slice,
                batch_slice,
                has_batch_dim,
                recompute_ln,
            )
        if final and not recompute_ln and not self._weight_folded_into_projection:
            out = out * self._final_weight(out)
        return out

    def _check_one_row(self, has_batch_dim, batch_slice) -> None:
        """A stack without a batch axis needs one row of the cache to take scales from."""
        first = next(iter(self.cache_dict.values()), None)
        rows = None if first is None else first.shape[0]
        if has_batch_dim or not self.has_batch_dim or batch_slice is not None or rows == 1:
            return
        raise InvalidArgumentError(
            "has_batch_dim=False: this stack has no batch axis but the cache holds several rows; "
            "pass batch_slice=<row> to say whose scales to use (or keep the batch axis)"
        )

    def _apply_ln_per_row(self, stack, layer, mlp_input, recompute_ln):
        if recompute_ln:
            raise RewardLensError(
                "recompute_ln with pos_slice='reward' on a batch whose rows are read at "
                "different positions is not supported: left-pad the batch (model.to_tokens, "
                "pad_batch) so every row is read at -1"
            )
        cfg = self.model.cfg
        if cfg.normalization_type not in ("LN", "LNPre", "RMS", "RMSPre"):
            return stack
        if cfg.normalization_type in ("LN", "LNPre"):
            stack = stack - stack.mean(dim=-1, keepdim=True)
        layer = cfg.n_layers if layer is None or layer == -1 else layer
        scale = self._get_cached_ln_scale(layer, mlp_input, Slice(None), Slice(None))
        return stack / self.gather_reward_positions(scale)

    def _final_weight(self, like: Tensor) -> Tensor:
        w = getattr(self.model.ln_final, "w", None)
        if w is None:
            return torch.ones((), device=like.device, dtype=like.dtype)
        return w.to(like.device, like.dtype)

    def _check_no_final_bias(self) -> None:
        b = getattr(self.model.ln_final, "b", None)
        if b is not None and bool((b != 0).any()):
            raise RewardLensError(
                "this model's final LayerNorm keeps its bias (it was loaded without fold_ln, e.g. "
                "from_pretrained_no_processing): the bias belongs to no component, so a "
                "decomposition of the residual cannot sum to the reward. Load with "
                "HookedRewardModel.from_pretrained (fold_ln=True) or use "
                "reward_lens_tl.attribution.direct_attribution"
            )

    def logit_attrs(
        self,
        residual_stack,
        tokens=0,
        incorrect_tokens=None,
        pos_slice=None,
        batch_slice=None,
        has_batch_dim=True,
    ):
        """TL's `logit_attrs`.

        `tokens` are objective indices (or names) of the reward head (`0` for a scalar head; refused
        for a gated head, whose direction depends on the input: use `residual_stack_to_reward`), and
        `pos_slice="reward"` reads each row's reward position.

        Args:
            residual_stack: The stack of residual-stream components.
            tokens: Objective indices or names of the reward head.
            incorrect_tokens: Objectives whose direction is subtracted (as in TL).
            pos_slice: TL's `pos_slice`, or `"reward"`.
            batch_slice: TL's `batch_slice`.
            has_batch_dim: Whether the stack has a batch axis.

        Returns:
            Each component's attribution along the head's direction.
        """
        direction = self.model.tokens_to_residual_directions(tokens)
        if incorrect_tokens is not None:
            direction = direction - self.model.tokens_to_residual_directions(incorrect_tokens)
        if _is_reward(pos_slice):
            shared = self._one_position()
            pos_slice = shared if shared is not None else pos_slice
        scaled = self.apply_ln_to_stack(
            residual_stack,
            -1,
            pos_slice=pos_slice,
            batch_slice=batch_slice,
            has_batch_dim=has_batch_dim,
        )
        return (scaled * direction).sum(-1)

    def residual_stack_to_reward(
        self, stack: Float[Tensor, "... batch d_model"], objective: str | int | None = None
    ) -> Float[Tensor, "... batch"]:
        """Contributions to the model's reward of a stack read at each row's reward position.

        The stack is read with `pos_slice="reward"`: the final norm with its cached scale, then the
        head (without its bias: see `reward_bias`). The reward is the scalar head, or, for a gated
        ArmoRM-style head, the gated score (per row, with the gate of this run: cache `hook_gate`);
        `objective=` (a name or index) reads one head column instead, and is required for a
        multi-objective head without a gate. For `accumulated_resid` the last entry plus the bias is
        the reward (a reward lens); for a decomposition (`decompose_resid`,
        `get_full_resid_decomposition`) the entries sum to it.

        Args:
            stack: The stack, read at each row's reward position.
            objective: One head column (name or index); `None` reads the reward.

        Returns:
            Each entry's contribution to the reward, per row.
        """
        self._check_no_final_bias()
        normed = self._apply_ln_per_row(stack, None, False, False)
        read = self._readout(objective)
        return (normed * read.direction.to(normed.dtype)).sum(-1)

    def reward_bias(self, objective: str | int | None = None) -> Float[Tensor, " batch"]:
        """The head's bias along the reward `residual_stack_to_reward` reads (per row).

        Args:
            objective: One head column (name or index); `None` reads the reward.

        Returns:
            The bias, per row.
        """
        return self._readout(objective).bias

    def _readout(self, objective):
        from .readout import readout

        gate = self["hook_gate"] if "hook_gate" in self.cache_dict else None
        if getattr(self.model, "gating", None) is not None and objective is None and gate is None:
            raise RewardLensError(
                "the gated score's direction depends on this run's gate, which the cache does "
                "not hold: run run_with_cache without a names_filter that drops 'hook_gate', or "
                "name an objective (objective='...')"
            )
        batch = self._rows().shape[0] if self.has_batch_dim else 1
        if gate is not None and not self.has_batch_dim:
            gate = gate[None]
        return readout(self.model, objective, batch, gate)


def _is_reward(pos_slice) -> bool:
    return isinstance(pos_slice, str) and pos_slice == REWARD
