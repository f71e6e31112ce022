"""How a residual vector becomes a reward: the final norm and the reward direction.

Every observational analysis reads residual vectors along the reward head. This module holds
the one definition of that read-out, for every head kind and folding choice:

`reward = norm(x) · W_eff[:, i] + b_eff[i]` where `W_eff = g ⊙ W_R` (`g` the final norm's
weight if not folded), `b_eff = b_R + β · W_R` (`β` the final LayerNorm bias, if any), and
`norm` divides by the final norm's scale (after centring for LayerNorm). For ArmoRM-style
models the score's direction is per example: `W_eff @ T @ gate`.

With the **frozen** scale (the one the final norm actually used at that position), the
read-out is linear, so it distributes over a sum of components exactly:
`reward = Σ_c c · u + b` with `u = centre(direction) / scale`.

Examples:
    The tiny test GPT-2 has its final norm folded into the head, so there the read-out's
    direction and bias are the head's own:

    >>> import torch
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.testing import tiny_reward_model
    >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("gpt2"))
    >>> W_eff, b_eff = effective_head(model)
    >>> torch.equal(W_eff, model.W_U), torch.equal(b_eff, model.b_U)
    (True, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from jaxtyping import Float
from torch import Tensor

from .errors import NonlinearUnembedError, RewardLensError
from .indices import check_index

if TYPE_CHECKING:
    from transformer_lens import ActivationCache

__all__ = ["Objective", "Readout", "effective_head", "readout"]

#: Which reward a read-out targets: `None` (the model's reward: the scalar, or the gated
#: score), an objective name or index, or `"score"`.
Objective = str | int | None


def effective_head(
    model,
) -> tuple[Float[Tensor, "d_model n_objectives"], Float[Tensor, " n_objectives"]]:
    """`(W_eff, b_eff)`: the head as seen from the *normalised* (pre-weight) final residual.

    Args:
        model: The hooked reward model.

    Returns:
        `W_eff [d_model, n_objectives]` (the final norm's weight folded in) and
        `b_eff [n_objectives]` (its bias read through the head).

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("gpt2"))
        >>> W, b = effective_head(model)
        >>> W.shape, b.shape
        (torch.Size([64, 1]), torch.Size([1]))
    """
    W, b = model.W_U, model.b_U
    w_norm = getattr(model.ln_final, "w", None)
    b_norm = getattr(model.ln_final, "b", None)
    if w_norm is not None:
        W = w_norm[:, None] * W
    if b_norm is not None:
        b = b + b_norm @ model.W_U
    return W, b


def is_centred(model) -> bool:
    """LayerNorm (not RMSNorm) centres the residual before scaling."""
    return str(model.cfg.normalization_type).startswith("LN")


def objective_index(model, objective: Objective) -> int | None:
    """Column of the head for `objective`; `None` means the gated score."""
    gated = getattr(model, "gating", None) is not None
    if objective is None:
        if gated or model.scored_head:
            return None
        if model.n_objectives > 1:
            raise RewardLensError(
                f"this head has {model.n_objectives} objectives {model.objective_names}; pass "
                "objective=<name or index>"
            )
        return 0
    if objective == "score":
        if not gated:
            raise RewardLensError("objective='score' needs an ArmoRM-style gated head")
        return None
    if isinstance(objective, str):
        if objective not in model.objective_names:
            raise RewardLensError(
                f"unknown objective {objective!r}; this model has {model.objective_names}"
            )
        return model.objective_names.index(objective)
    return check_index(objective, model.n_objectives, "objective index")


@dataclass(frozen=True)
class Readout:
    """Per-example reward direction and bias in normalised-residual space.

    Attributes:
        direction: The reward direction of each example.
        bias: The reward bias of each example.
        centred: Whether the final norm centres the residual (LayerNorm) before scaling.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("gpt2"))
        >>> r = readout(model, None, batch=2)
        >>> r.direction.shape, r.centred
        (torch.Size([2, 64]), True)
    """

    direction: Float[Tensor, "batch d_model"]
    bias: Float[Tensor, " batch"]
    centred: bool

    def project(
        self, x: Float[Tensor, "batch pos d_model"], scale: Float[Tensor, "batch pos"]
    ) -> Float[Tensor, "batch pos"]:
        """`norm(x) · direction` for residuals at any positions, given their scale; no bias.

        Computed in float32 at least (bf16/fp16 models read out without a second rounding).

        Args:
            x: Residual vectors.
            scale: The final norm's scale at each of them.

        Returns:
            The projections, without the bias.

        Examples:
            >>> import torch
            >>> from reward_lens_tl import HookedRewardModel
            >>> from reward_lens_tl.testing import tiny_reward_model
            >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("gpt2"))
            >>> r = readout(model, None, batch=1)
            >>> r.project(torch.randn(1, 3, 64), torch.ones(1, 3)).shape
            torch.Size([1, 3])
        """
        x = wide(x)
        if self.centred:
            x = x - x.mean(-1, keepdim=True)
        return (x * wide(self.direction)[:, None, :]).sum(-1) / scale

    def unit(self, scale: Float[Tensor, " batch"]) -> Float[Tensor, "batch d_model"]:
        """`u` with `c · u` = the contribution of component `c` under a frozen scale.

        Args:
            scale: The final norm's (frozen) scale of each example.

        Returns:
            The unit read-out vector of each example.

        Examples:
            >>> import torch
            >>> from reward_lens_tl import HookedRewardModel
            >>> from reward_lens_tl.testing import tiny_reward_model
            >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("gpt2"))
            >>> readout(model, None, batch=2).unit(torch.ones(2)).shape
            torch.Size([2, 64])
        """
        d = wide(self.direction)
        if self.centred:
            d = d - d.mean(-1, keepdim=True)
        return d / scale[:, None]


def wide(t: Tensor) -> Tensor:
    """`t` in float32 if it is a lower-precision float (bf16, fp16), else unchanged."""
    return t.float() if t.is_floating_point() and t.element_size() < 4 else t


def readout(model, objective: Objective, batch: int, gate: Tensor | None = None) -> Readout:
    """The read-out for `objective` (the score needs `gate [batch, n_objectives]`).

    Args:
        model: The hooked reward model.
        objective: Which reward: `None` (the model's reward), an objective name or index, or
            `"score"` (a gated head's score).
        batch: The number of examples.
        gate: The gate `[batch, n_objectives]` (`hook_gate`), for a gated score only.

    Returns:
        The read-out.

    Raises:
        NonlinearUnembedError: the model's score is not linear in its residual.
        RewardLensError: the gated score without `gate`, or an unknown objective.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("gpt2"))
        >>> readout(model, None, batch=3).bias.shape
        torch.Size([3])
    """
    W, b = effective_head(model)
    col = objective_index(model, objective)
    if col is not None:
        direction = W[:, col].expand(batch, -1)
        bias = b[col].expand(batch)
    else:
        if model.scored_head and getattr(model, "gating", None) is None:
            raise NonlinearUnembedError(model.linear_advice())
        if gate is None:
            raise RewardLensError("the gated score's direction needs the gate (hook_gate)")
        transform = model.reward_transform_matrix.T.to(W.dtype)
        mix = gate.to(W.dtype) @ transform  # [batch, n_objectives]
        direction = mix @ W.T
        bias = mix @ b
    return Readout(direction=direction, bias=bias, centred=is_centred(model))


def recomputed_scale(model, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "..."]:
    """The scale the final norm would compute for `x` (RMS, or std for LayerNorm)."""
    x = wide(x)
    if is_centred(model):
        x = x - x.mean(-1, keepdim=True)
    return (x.pow(2).mean(-1) + model.cfg.eps).sqrt()


def readout_hook_names(model, explicit_positions: bool = False) -> list[str]:
    """Hook names a read-out must cache.

    Args:
        model: The hooked reward model.
        explicit_positions: Also cache the head's per-position outputs.

    Returns:
        The hook names.
    """
    names = ["ln_final.hook_scale", "hook_reward"]
    if explicit_positions:
        names.append("unembed.hook_out")
    if getattr(model, "gating", None) is not None:
        names.append("hook_gate")
    return names


def gather_positions(act: Tensor, positions: Tensor) -> Tensor:
    """`act[b, positions[b]]` for `act` `[batch, pos, ...]`."""
    rows = torch.arange(act.shape[0], device=act.device)
    return act[rows, positions.to(act.device)]


def rewards_at(model, cache, rewards: Tensor, objective: Objective, pos: Tensor | None):
    """The reward that a read-out of `objective` must reproduce.

    The model's pooled reward, or, at explicit positions `pos`, the per-position head output there
    (`None` = pooled).
    """
    col = objective_index(model, objective)
    if pos is None:
        return rewards if col is None else cache["hook_reward"][:, col]
    per_pos = gather_positions(cache["unembed.hook_out"], pos)  # [batch, n_objectives]
    if col is not None:
        return per_pos[:, col]
    mix = cache["hook_gate"] @ model.reward_transform_matrix.T
    return (per_pos * mix).sum(-1)


@dataclass(frozen=True)
class ReadoutRun:
    """One `run_with_cache` for a read-out analysis and what every such analysis needs."""

    rewards: Tensor  # what ``forward(return_type="reward")`` returned
    cache: ActivationCache  # only the requested names
    positions: Tensor  # [batch] where each row is read
    read: Readout
    target: Tensor  # [batch] the reward the read-out must reproduce


def run_readout(
    model,
    input_ids: Tensor,
    attention_mask: Tensor | None,
    names: list[str],
    *,
    objective: Objective = None,
    positions=None,
    fwd_hooks=(),
) -> ReadoutRun:
    """Run the model once, caching `names` plus what the read-out needs.

    The user's `fwd_hooks` are active, and removed afterwards, even on error.
    """
    names = list(dict.fromkeys([*names, *readout_hook_names(model, positions is not None)]))
    with torch.no_grad(), model.hooks(fwd_hooks=list(fwd_hooks)):
        rewards, cache = model.run_with_cache(
            input_ids, attention_mask=attention_mask, return_type="reward", names_filter=names
        )
    tokens = model.check_tokens(input_ids, attention_mask)
    pos = model.pool_positions(tokens, attention_mask, positions)
    gate = cache["hook_gate"] if "hook_gate" in cache else None
    read = readout(model, objective, tokens.shape[0], gate)
    explicit = None if positions is None else pos
    target = rewards_at(model, cache, rewards, objective, explicit)
    return ReadoutRun(rewards, cache, pos, read, target)


def retarget(model, run: ReadoutRun, objective: Objective) -> ReadoutRun:
    """The same run read out for another `objective`.

    No new forward pass; pooled positions only.
    """
    cache = run.cache
    gate = cache["hook_gate"] if "hook_gate" in cache else None
    read = readout(model, objective, run.positions.shape[0], gate)
    target = rewards_at(model, cache, run.rewards, objective, None)
    return ReadoutRun(run.rewards, cache, run.positions, read, target)
