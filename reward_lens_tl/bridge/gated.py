"""ArmoRM-style gated heads on the TransformerBridge backend: the gate, outside the bridge.

An ArmoRM-style model (`LlamaForRewardModelWithGating`, `reward_lens_tl.armorm_module`) reads
its objectives with a linear `regression_layer` at the last real token, and mixes them into one
score with a gate computed from the prompt:
`score = Σ gate ⊙ (objectives @ T)`, `gate = softmax(MLP(h_p) / temperature) · logit_scale`, where
`h_p` is the final normalised hidden state at the gating position (the start of the last
`gating_token_pattern` occurrence) and `T` the reward transform matrix.

On the bridge, the regression layer is the unembed (`families.causal_stand_in`), so the bridge's
output is the objectives at every position, `[batch, pos, n_objectives]`: the lens and direct
attribution decompose each objective exactly, as they do on `HookedArmoRM`. The gate is applied
here, outside the bridge, by `RewardGate` (built at boot, `bridge.reward_gate`) and
`GatedBridgeRewardModel` (what `BridgeRewardModel` of such a bridge is), with `HookedArmoRM`'s
surface: `rewards` is the gated score `[batch]`, `objective_rewards` the objectives,
`run_with_cache(..., return_type="reward")` caches `hook_reward` (the objectives), `hook_gate`
and `hook_score`, and `gating` is the gate's MLP. As in `HookedArmoRM` (the ArmoRM adapter), the
gate reads the final norm's *normalised* output (`ln_final.hook_normalized`) and its first layer
absorbs the norm's weight `g` (`W ← W · diag(g)`), so it sees exactly what HF's gate sees whether or
not the bridge's weights are processed.

Examples:
    >>> import torch
    >>> from reward_lens_tl.bridge import BridgeRewardModel
    >>> from reward_lens_tl.zoo import load_model, zoo_path
    >>> model = BridgeRewardModel.boot(zoo_path("multi"))
    >>> type(model).__name__, model.objective_names
    ('GatedBridgeRewardModel', ('helpfulness', 'harmlessness', 'verbosity'))
    >>> ids = torch.tensor([[1, 4, 27, 71, 6, 5, 40, 6, 2]])
    >>> hf = load_model("multi")(ids)
    >>> bool(torch.allclose(model.rewards(ids), hf.score, atol=1e-5))
    True
    >>> bool(torch.allclose(model.objective_rewards(ids), hf.rewards, atol=1e-5))
    True
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from ..armorm_module import (
    LLAMA3_GATING_PATTERN,
    LlamaForRewardModelWithGating,
    gating_positions,
    read_positions,
)
from ..errors import (
    AmbiguousObjectiveError,
    BridgeUnsupportedError,
    MissingPadTokenError,
    UnsupportedArchitectureError,
)
from ..padding import called_by_user, reading_position_known
from .reward_model import BridgeRewardModel

__all__ = ["GatedBridgeRewardModel", "RewardGate", "armorm_positions"]

#: The hook the gate reads: the final norm's output before its weight (folded into the gate).
GATE_INPUT = "ln_final.hook_normalized"
#: Hook names the gated model adds to every cache (`HookedArmoRM`'s hook points).
GATE_HOOKS = ("hook_gate", "hook_score")
_ADVICE = "use the default backend (HookedArmoRM, TransformerLens 3.9)"


def armorm_positions(
    input_ids: Int[Tensor, "batch pos"],
    pad_token_id: int | None,
    attention_mask: Tensor | None = None,
) -> Int[Tensor, " batch"]:
    """ArmoRM's reading rule: the token before the first pad (the ArmoRM adapter's rule).

    Without a mask this is HF's own rule (`armorm_module.first_pad_minus_one`). With one, the rule
    is applied to each row's real tokens, so a padded row is read where the row alone is (pads the
    mask hides are not "the first pad"); as `HookedArmoRM.pool_positions`.

    Args:
        input_ids: The token ids (`[batch, pos]`).
        pad_token_id: The pad id.
        attention_mask: `[batch, pos]`, nonzero at real tokens, or `None`.

    Returns:
        One position per row.

    Raises:
        MissingPadTokenError: No pad id (HF's ArmoRM forward needs one too).

    Examples:
        >>> ids = torch.tensor([[1, 7, 8, 0, 0], [0, 0, 1, 7, 8], [1, 0, 0, 7, 8]])
        >>> armorm_positions(ids, 0).tolist()                       # HF's rule
        [2, 4, 0]
        >>> armorm_positions(ids, 0, (ids != 0).long()).tolist()    # each row alone
        [2, 4, 4]
    """
    if pad_token_id is None:
        raise MissingPadTokenError(
            "ArmoRM reads the token before the first pad: its config needs a pad_token_id"
        )
    return read_positions(input_ids, pad_token_id, attention_mask)


class RewardGate:
    """ArmoRM's gate and reward transform, as applied outside the bridge.

    Args:
        gating: The gate's MLP (`armorm_module.GatingNetwork`), its first layer reading the
            normalised final hidden state (the final norm's weight folded in).
        reward_transform_matrix: `T`, `[n_objectives, n_objectives]`.
        gating_token_pattern: The token ids that end the prompt.
        objective_names: One name per objective.
        pad_token_id: The pad id (ArmoRM's reading rule).

    Examples:
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> gate = RewardGate.of(tiny_reward_model("armorm"))
        >>> gate.gating_token_pattern                       # the tiny model's prompt end
        (3, 4)
        >>> ids = torch.tensor([[1, 3, 4, 9]])
        >>> gate.reward_transform_matrix.shape, gate.positions(ids).tolist()
        (torch.Size([3, 3]), [1])
    """

    def __init__(
        self,
        gating: nn.Module,
        reward_transform_matrix: Float[Tensor, "n_obj n_obj"],
        gating_token_pattern: Sequence[int],
        objective_names: Sequence[str],
        pad_token_id: int | None,
    ):
        """Hold the gate's parts (nothing is copied)."""
        self.gating = gating
        self.reward_transform_matrix = reward_transform_matrix
        self.gating_token_pattern = tuple(int(t) for t in gating_token_pattern)
        self.objective_names = tuple(objective_names)
        self.pad_token_id = pad_token_id

    @classmethod
    def of(cls, reward_model: nn.Module) -> RewardGate | None:
        """The gate of an ArmoRM-style model (`None` for any other reward model).

        The gate's MLP and `T` are copied in float32; the final norm's weight is read now, before
        the bridge's weight processing folds it into the unembed.

        Args:
            reward_model: The HF reward model, before it is booted.

        Returns:
            The gate, or `None`.

        Raises:
            UnsupportedArchitectureError: A gated model that is not this library's layout.
        """
        if type(reward_model).__name__ != "LlamaForRewardModelWithGating":
            return None
        if not isinstance(reward_model, LlamaForRewardModelWithGating):
            raise UnsupportedArchitectureError(
                f"{type(reward_model).__module__}.LlamaForRewardModelWithGating is not "
                "reward_lens_tl.armorm_module's layout, so the bridge cannot apply its gate "
                f"exactly; load it from its directory (remote code is never run), or {_ADVICE}"
            )
        gating = copy.deepcopy(reward_model.gating).float().eval()
        g = reward_model.model.norm.weight.detach().float()
        with torch.no_grad():
            first: Any = gating.layers[0]
            first.weight.mul_(g[None, :].to(first.weight.device))
        for p in gating.parameters():
            p.requires_grad_(False)
        config = reward_model.config
        n_obj = int(reward_model.regression_layer.out_features)
        names = getattr(config, "objective_names", None)
        if not names or len(names) != n_obj:
            names = [f"objective_{i}" for i in range(n_obj)]
        return cls(
            gating,
            reward_model.reward_transform_matrix.detach().float().clone(),
            getattr(config, "gating_token_pattern", LLAMA3_GATING_PATTERN),
            names,
            config.pad_token_id,
        )

    def positions(self, tokens: Int[Tensor, "batch pos"]) -> Int[Tensor, " batch"]:
        """Where each row's gate is read: the start of the last gating pattern (the prompt's end).

        Args:
            tokens: Token ids, `[batch, pos]`.

        Returns:
            One position per row.

        Raises:
            InvalidArgumentError: A row without the pattern.
        """
        return gating_positions(tokens, self.gating_token_pattern)

    def read_positions(
        self, tokens: Int[Tensor, "batch pos"], attention_mask: Tensor | None = None
    ) -> Int[Tensor, " batch"]:
        """Where each row's objectives are read (`armorm_positions`).

        Args:
            tokens: Token ids, `[batch, pos]`.
            attention_mask: `[batch, pos]`, nonzero at real tokens, or `None`.

        Returns:
            One position per row.
        """
        return armorm_positions(tokens, self.pad_token_id, attention_mask)

    def __call__(
        self, normalized: Float[Tensor, "batch pos d_model"], tokens: Int[Tensor, "batch pos"]
    ) -> Float[Tensor, "batch n_obj"]:
        """The gate of each row, from the normalised final residual (`GATE_INPUT`).

        Computed in float32 (as `HookedArmoRM`'s), on `normalized`'s device.

        Args:
            normalized: `ln_final.hook_normalized`, `[batch, pos, d_model]`.
            tokens: Token ids, `[batch, pos]` (where the gate is read).

        Returns:
            The gate, `[batch, n_objectives]`.
        """
        self.gating.to(normalized.device)
        rows = torch.arange(normalized.shape[0], device=normalized.device)
        prompt_state = normalized[rows, self.positions(tokens).to(normalized.device)]
        return self.gating(prompt_state.float())

    def mix(self, gate: Float[Tensor, "batch n_obj"]) -> Float[Tensor, "batch n_obj"]:
        """`gate @ Tᵀ`: the weight of each objective in the score (`score = objectives · mix`).

        Args:
            gate: The gate, `[batch, n_objectives]`.

        Returns:
            The weights, `[batch, n_objectives]`.
        """
        return gate @ self.reward_transform_matrix.to(gate.device).T

    def score(
        self, objectives: Float[Tensor, "batch n_obj"], gate: Float[Tensor, "batch n_obj"]
    ) -> Float[Tensor, " batch"]:
        """HF's score, `Σ gate ⊙ (objectives @ T)`, in `objectives`' dtype.

        Args:
            objectives: The objectives where each row is read, `[batch, n_objectives]`.
            gate: The gate, `[batch, n_objectives]`.

        Returns:
            The score, `[batch]`.
        """
        transform = self.reward_transform_matrix.to(objectives.device, objectives.dtype)
        return (gate.to(objectives.dtype) * (objectives @ transform)).sum(-1)


class GatedBridgeRewardModel(BridgeRewardModel):
    """`BridgeRewardModel` of an ArmoRM-style bridge: objectives in the bridge, gate outside.

    `BridgeRewardModel(bridge)` builds this class for a bridge with a gate; its surface is
    `HookedArmoRM`'s (the module docstring).

    Args:
        bridge: A bridge from `boot_reward_bridge` of an ArmoRM-style model.

    Raises:
        UnsupportedArchitectureError: A bridge without a gate.

    Examples:
        >>> from reward_lens_tl.bridge import BridgeRewardModel
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = BridgeRewardModel.boot(tiny_reward_model("armorm"))
        >>> ids = torch.tensor([[1, 7, 3, 4, 9, 8]])        # 3, 4: the gating pattern
        >>> score, cache = model.run_with_cache(ids, return_type="reward", names_filter=[])
        >>> sorted(cache.keys()), tuple(score.shape)
        (['hook_gate', 'hook_reward', 'hook_score'], (1,))
        >>> gated = model.run_with_cache(ids)[0]       # the gated score at every position
        >>> tuple(gated.shape), bool(torch.allclose(gated[:, -1, 0], score))
        ((1, 6, 1), True)
    """

    def __init__(self, bridge: Any):
        """Wrap `bridge` (nothing is copied)."""
        if getattr(bridge, "reward_gate", None) is None:
            raise UnsupportedArchitectureError(
                "GatedBridgeRewardModel needs a bridge booted from an ArmoRM-style model "
                "(boot_reward_bridge attaches its gate); use BridgeRewardModel for others"
            )
        super().__init__(bridge)

    def __getattr__(self, name: str) -> Any:
        """The bridge's attribute `name`; `unembed` refused to a user, as `HookedArmoRM`'s is.

        The library's own code (a read-out of one objective) gets the bridge's unembed.
        """
        if name == "unembed" and called_by_user():
            raise AmbiguousObjectiveError(
                "model.unembed of a gated multi-objective model gives every objective, not the "
                "gated score: the gate depends on the prompt, which unembed does not see. For one "
                "objective: normed @ model.W_U[:, model.objective_names.index(name)] (the "
                "bridge's own unembed: model.bridge.unembed); for the score: model.rewards(ids)"
            )
        return super().__getattr__(name)

    @property
    def reward_gate(self) -> RewardGate:
        """The gate (`RewardGate`)."""
        return self.bridge.reward_gate

    @property
    def gating(self) -> nn.Module:
        """The gate's MLP, reading the normalised final residual (as `HookedArmoRM.gating`)."""
        return self.reward_gate.gating

    @property
    def reward_transform_matrix(self) -> Float[Tensor, "n_obj n_obj"]:
        """`T`, `[n_objectives, n_objectives]`."""
        return self.reward_gate.reward_transform_matrix

    @property
    def gating_token_pattern(self) -> tuple[int, ...]:
        """The token ids that end the prompt."""
        return self.reward_gate.gating_token_pattern

    @property
    def objective_names(self) -> tuple[str, ...]:
        """The config's objective names (`objective_0`, ... when it has none)."""
        return self.reward_gate.objective_names

    def gate_positions(self, tokens: Int[Tensor, "batch pos"]) -> Int[Tensor, " batch"]:
        """Where each row's gate is read (the prompt's end).

        Args:
            tokens: Token ids, `[batch, pos]`.

        Returns:
            One position per row.
        """
        return self.reward_gate.positions(tokens)

    def _rule_positions(self, tokens: Tensor, attention_mask: Tensor | None) -> Tensor:
        """ArmoRM's reading rule (`armorm_positions`), on the mask (inferred when not given)."""
        return self.reward_gate.read_positions(tokens, attention_mask)

    def run_with_cache(
        self,
        input_ids: Int[Tensor, "batch pos"],
        *,
        attention_mask: Tensor | None = None,
        return_type: str | None = "logits",
        names_filter: Any = None,
        **kwargs: Any,
    ) -> tuple[Tensor, Any]:
        """The bridge's `run_with_cache`, with `hook_reward`, `hook_gate` and `hook_score` added.

        Args:
            input_ids: Token ids `[batch, pos]`.
            attention_mask: `[batch, pos]`, or `None`.
            return_type: `"reward"`: the gated score `[batch]`; `"objectives"`: the objectives
                at every position `[batch, pos, n_objectives]`; anything else: the gated score at
                every position `[batch, pos, 1]` (each row's own gate), as `HookedArmoRM`.
            names_filter: The hook names to cache (the three above are always there).
            **kwargs: Passed to the bridge.

        Returns:
            `(output, cache)`.

        Raises:
            BridgeUnsupportedError: `start_at_layer` / `stop_at_layer` (the gate needs the full
                run from the tokens).
        """
        partial = [k for k in ("start_at_layer", "stop_at_layer") if kwargs.get(k) is not None]
        if partial:
            raise BridgeUnsupportedError(
                f"{partial[0]} on a gated (ArmoRM-style) model: the gate reads the final "
                f"residual at the prompt's end, which a partial run does not reach; {_ADVICE}, "
                "or run the bridge itself (model.bridge) for the objectives"
            )
        wanted, drop = _with_gate_input(names_filter)
        tokens = self.check_tokens(input_ids, attention_mask)
        objectives, cache = super().run_with_cache(
            tokens,
            attention_mask=attention_mask,
            return_type="reward" if return_type == "reward" else "objectives",  # reward: unused
            names_filter=wanted,
            **kwargs,
        )
        gate = self.reward_gate(cache[GATE_INPUT], tokens).to(objectives.dtype)
        score = self.reward_gate.score(cache["hook_reward"], gate)
        cache.cache_dict.update(hook_gate=gate, hook_score=score)
        if drop:
            del cache.cache_dict[GATE_INPUT]
        if return_type == "reward":
            return score, cache
        if return_type == "objectives":
            return objectives, cache
        return (objectives * self.reward_gate.mix(gate)[:, None, :]).sum(-1, keepdim=True), cache

    def forward(
        self,
        input: Tensor,
        *,
        return_type: str | None = "logits",
        pool_positions: Tensor | None = None,
        tokens: Tensor | None = None,
        attention_mask: Tensor | None = None,
        **kwargs: Any,
    ) -> Tensor:
        """`HookedArmoRM`'s forward: `BridgeRewardModel.forward` with the gate applied.

        Args:
            input: Token ids `[batch, pos]`, or with `start_at_layer` the residual entering
                that block.
            return_type: As `run_with_cache`'s (`"reward"`: the gated score `[batch]`).
            pool_positions: Where each row's objectives are read (default: ArmoRM's rule).
            tokens: With `start_at_layer`: the token ids (the gate needs the prompt's end).
            attention_mask: `[batch, pos]`, or `None`.
            **kwargs: `BridgeRewardModel.forward`'s (`start_at_layer`, ...).

        Returns:
            As `return_type` says.

        Raises:
            BridgeUnsupportedError: `stop_at_layer`, or a residual run without `tokens=`.

        Examples:
            >>> from reward_lens_tl.bridge import BridgeRewardModel
            >>> from reward_lens_tl.testing import tiny_reward_model
            >>> model = BridgeRewardModel.boot(tiny_reward_model("armorm"))
            >>> ids = torch.tensor([[1, 7, 3, 4, 9, 8]])
            >>> _, cache = model.run_with_cache(ids, names_filter=["blocks.1.hook_resid_pre"])
            >>> resumed = model(cache["blocks.1.hook_resid_pre"], return_type="reward",
            ...                 start_at_layer=1, tokens=ids)
            >>> bool(torch.allclose(resumed, model.rewards(ids), atol=1e-5))
            True
        """
        if kwargs.get("stop_at_layer") is not None:
            raise BridgeUnsupportedError(
                "stop_at_layer on a gated (ArmoRM-style) model: the gate reads the final "
                f"residual, which a partial run does not reach; {_ADVICE}, or run the bridge "
                "itself (model.bridge)"
            )
        if kwargs.get("start_at_layer") is None:
            tokens = self.check_tokens(input, attention_mask)
        elif tokens is None:
            raise BridgeUnsupportedError(
                "a gated model's run from a residual (start_at_layer) needs tokens= to find the "
                "gating position (the prompt's end)"
            )
        attention_mask = self._mask_for(tokens, attention_mask)  # where the objectives are read
        grabbed: dict[str, Tensor] = {}

        def grab(act: Tensor, hook: Any) -> None:
            grabbed["x"] = act

        if return_type != "reward":  # the base's forward (objectives) is read at each row
            self.check_reading_position(tokens, attention_mask)
        with self.bridge.hooks(fwd_hooks=[(GATE_INPUT, grab)]), reading_position_known():
            objectives = super().forward(
                input,
                return_type="objectives",
                tokens=tokens,
                attention_mask=attention_mask,
                **kwargs,
            )
        gate = self.reward_gate(grabbed["x"], tokens).to(objectives.dtype)
        if return_type == "objectives":
            return objectives
        if return_type != "reward":
            return (objectives * self.reward_gate.mix(gate)[:, None, :]).sum(-1, keepdim=True)
        if pool_positions is None:
            pool_positions = self.pool_positions(tokens, attention_mask)
        rows = torch.arange(objectives.shape[0], device=objectives.device)
        pooled = objectives[rows, pool_positions.to(objectives.device)]
        return self.reward_gate.score(pooled, gate)

    def gate(
        self,
        input_ids: Int[Tensor, "batch pos"],
        attention_mask: Tensor | None = None,
    ) -> Float[Tensor, "batch n_obj"]:
        """The gate of each row (HF's `gating_output`), without gradients.

        Args:
            input_ids: Token ids `[batch, pos]`.
            attention_mask: `[batch, pos]`, or `None`.

        Returns:
            The gate, `[batch, n_objectives]`.
        """
        return self._cached(input_ids, attention_mask, "hook_gate")

    def _cached(self, input_ids: Tensor, attention_mask: Tensor | None, name: str) -> Tensor:
        with torch.no_grad():
            _, cache = self.run_with_cache(
                input_ids, attention_mask=attention_mask, return_type="reward", names_filter=[]
            )
        return cache[name]


def _with_gate_input(names_filter: Any) -> tuple[Any, bool]:
    """`names_filter` with the gate's input added, and whether to drop it from the cache after."""
    if names_filter is None:
        return None, False
    if callable(names_filter):
        drop = not names_filter(GATE_INPUT)
        return (lambda name: names_filter(name) or name == GATE_INPUT), drop
    names = [names_filter] if isinstance(names_filter, str) else list(names_filter)
    names = [n for n in names if n not in GATE_HOOKS]
    if GATE_INPUT in names:
        return names, False
    return [*names, GATE_INPUT], True
