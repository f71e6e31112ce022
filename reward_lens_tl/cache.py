"""``RewardActivationCache``: TransformerLens's ``ActivationCache`` plus per-row read-outs.

A TL user reads the last position (``pos_slice=-1``). In a right-padded batch of unequal
lengths that is a pad for every shorter row, and a reward model reads each sequence at its own
pooling position anyway. ``run_with_cache`` on a reward model therefore returns this cache,
which knows each row's reading position (``cache.reward_positions``) and accepts
``pos_slice="reward"`` wherever TL takes a ``pos_slice`` — ``accumulated_resid``,
``decompose_resid``, ``stack_head_results``, ``stack_neuron_results``,
``get_full_resid_decomposition``, ``apply_ln_to_stack``, ``logit_attrs`` — returning
``[..., batch, d_model]`` stacks read at one position per row. TL's ``pos_slice=-1`` means the
same here (the last *real* token the reward is read from), so a ported logit-lens cell gives
the right numbers on ragged batches instead of reading pads. :meth:`residual_stack_to_reward`
turns such a stack into reward contributions (final norm with its frozen scale, then the head).

It also refuses the one TL idiom that silently goes wrong on a model loaded without weight
processing: ``apply_ln_to_stack`` ignores the final norm's weight in TL. Here the weight is
applied, and a final LayerNorm *bias* (which belongs to no component) is an error.

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

import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens import ActivationCache
from transformer_lens.utilities.slice import Slice

from .errors import RewardLensError

REWARD = "reward"


def _per_row_method(name: str):
    """TL's ``ActivationCache.<name>`` taking ``pos_slice="reward"`` (or ``-1``) per row."""
    base = getattr(ActivationCache, name)

    def method(self, *args, pos_slice=None, return_labels=False, **kwargs):
        return self._per_row(
            base.__get__(self), *args, pos_slice=pos_slice, return_labels=return_labels, **kwargs
        )

    method.__name__ = name
    method.__doc__ = (
        f"TL's ``{name}``; ``pos_slice='reward'`` (or TL's ``-1``) reads each row's reward "
        "position, giving ``[..., batch, d_model]``."
    )
    return method


class RewardActivationCache(ActivationCache):
    """An ``ActivationCache`` that knows each row's reward-reading position."""

    def __init__(self, cache_dict, model, has_batch_dim: bool = True, reward_positions=None):
        super().__init__(cache_dict, model, has_batch_dim=has_batch_dim)
        self.reward_positions: Int[Tensor, " batch"] | None = reward_positions

    # -- per-row gathering ---------------------------------------------------------------
    def _rows(self) -> Int[Tensor, " batch"]:
        if self.reward_positions is None:
            raise RewardLensError(
                "this cache does not know the reward positions (it was built from a run without "
                "token ids, e.g. start_at_layer): pass explicit positions instead of 'reward'"
            )
        if not self.has_batch_dim:
            raise RewardLensError("pos_slice='reward' needs a cache with its batch dimension")
        return self.reward_positions

    def gather_reward_positions(
        self, stack: Float[Tensor, "... batch pos d"]
    ) -> Float[Tensor, "... batch d"]:
        """``stack[..., b, reward_positions[b], :]`` for every row ``b``."""
        pos = self._rows().to(stack.device)
        rows = torch.arange(pos.shape[0], device=stack.device)
        return stack[..., rows, pos, :]

    def _reads_reward(self, pos_slice) -> bool:
        """``"reward"``, or TL's last-position habit ``-1`` on a cache that knows the reward
        positions (on a right-padded batch ``-1`` would be a pad for the shorter rows)."""
        if _is_reward(pos_slice):
            return True
        last = (
            pos_slice == -1
            if isinstance(pos_slice, int)
            else (
                isinstance(pos_slice, Slice)
                and isinstance(pos_slice.slice, int)
                and pos_slice.slice == -1
            )
        )
        return bool(last) and self.reward_positions is not None and self.has_batch_dim

    def _per_row(self, method, *args, pos_slice=None, return_labels=False, **kwargs):
        if not self._reads_reward(pos_slice):
            return method(*args, pos_slice=pos_slice, return_labels=return_labels, **kwargs)
        out = method(*args, pos_slice=None, return_labels=return_labels, **kwargs)
        if return_labels:
            stack, labels = out
            return self.gather_reward_positions(stack), labels
        return self.gather_reward_positions(out)

    accumulated_resid = _per_row_method("accumulated_resid")
    decompose_resid = _per_row_method("decompose_resid")
    stack_head_results = _per_row_method("stack_head_results")
    stack_neuron_results = _per_row_method("stack_neuron_results")
    get_full_resid_decomposition = _per_row_method("get_full_resid_decomposition")

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
        """TL's ``apply_ln_to_stack``, with the final norm's weight applied when the model was
        loaded without folding it (TL ignores it), and ``pos_slice="reward"`` for stacks read
        at each row's reward position (``[..., batch, d_model]``)."""
        final = layer is None or layer == -1 or layer == self.model.cfg.n_layers
        if final and not recompute_ln:
            self._check_no_final_bias()
        if self._reads_reward(pos_slice):
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
        if final and not recompute_ln:
            out = out * self._final_weight(out)
        return out

    def _apply_ln_per_row(self, stack, layer, mlp_input, recompute_ln):
        if recompute_ln:
            raise RewardLensError("recompute_ln with pos_slice='reward' is not supported")
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

    def logit_attrs(self, residual_stack, tokens=0, incorrect_tokens=None, pos_slice=None, **kw):
        """TL's ``logit_attrs``; ``tokens`` are objective indices of the reward head (``0``
        for a scalar head), and ``pos_slice="reward"`` reads each row's reward position."""
        if not self._reads_reward(pos_slice):
            return super().logit_attrs(residual_stack, tokens, incorrect_tokens, pos_slice, **kw)
        direction = self.model.tokens_to_residual_directions(tokens)
        if incorrect_tokens is not None:
            direction = direction - self.model.tokens_to_residual_directions(incorrect_tokens)
        scaled = self.apply_ln_to_stack(residual_stack, -1, pos_slice=REWARD)
        return (scaled * direction).sum(-1)

    def residual_stack_to_reward(
        self, stack: Float[Tensor, "... batch d_model"], objective: int = 0
    ) -> Float[Tensor, "... batch"]:
        """Contributions to objective ``objective`` (a head column) of a stack read at each
        row's reward position: final norm with its cached scale, then ``W_R[:, objective]``
        (without the head's bias ``b_R``). For ``accumulated_resid`` the last entry plus
        ``b_R`` is the reward (a reward lens); for a decomposition (``decompose_resid`` with
        the biases, ``get_full_resid_decomposition``) the entries sum to the reward minus
        ``b_R``."""
        scaled = self.apply_ln_to_stack(stack, -1, pos_slice=REWARD)
        direction = self.model.tokens_to_residual_directions(objective)
        return (scaled * direction).sum(-1)


def _is_reward(pos_slice) -> bool:
    return isinstance(pos_slice, str) and pos_slice == REWARD
