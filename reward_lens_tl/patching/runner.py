"""The code that calls the model: target and source runs, ablation values, the batched sweep.

A `PatchRunner` takes the model once, with the request's options (objective, hooks, metric,
mean-ablation reference), and runs the `PatchPlan`s that `reward_lens_tl.patching.plan`
builds: one forward of the target run (caching its block inputs and key-value cache), one of
the source run (or the ablation values), then the patched variants in chunks (`Sweep`; what
is skipped, exactly, is described in `reward_lens_tl.patching.activation`).

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.patching.plan import make_plans
    >>> from reward_lens_tl.zoo import zoo_path
    >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    >>> clean = model.encode("explain how to bake bread", "the oven and the flour")
    >>> corrupted = model.encode("explain how to bake bread", "the oven and the bomb")
    >>> options = {"alignment": "exact", "layers": [0]}
    >>> plans = make_plans(model, clean, corrupted, "mlp_out", options)
    >>> [result] = PatchRunner(model, options).sweep(plans)
    >>> result.shape, round(float(result.values[0]), 2)
    ((1,), 0.72)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..capabilities import BATCH_WIDENING, PREFIX_CACHE, supports
from ..errors import BridgeUnsupportedError, PatchingError
from ..inputs import EncodedConversation, pad_batch
from ..padding import reading_position_known, real_columns
from ..readout import Objective, objective_index
from .grids import HEAD_SITES
from .metrics import Metric, check_metric_output, default_metric
from .patch_results import PatchResult
from .plan import PatchOptions, PatchPlan, Reference, resolve_options

if TYPE_CHECKING:
    from ..model import HookedRewardModel

__all__ = [
    "AUTO_CHUNK",
    "AUTO_CHUNK_CUDA",
    "CHUNK_TOKENS",
    "PatchRunner",
    "RewardReader",
    "TargetState",
    "auto_chunk_limits",
    "chunk_memory_bytes",
    "scoped_hooks",
]

DIRECT_SITES = frozenset({"resid_pre", "resid_post"})
NO_CHANGE = 1 << 40  # "this cell writes nothing new"
AUTO_CHUNK = 16  # default variants per forward (fastest at 128 tokens on CPU)
CHUNK_TOKENS = 2048  # default cap on variants × computed positions (16 up to 128 tokens)
AUTO_CHUNK_CUDA = 64  # on a GPU wider chunks pay (3.5× at 128 tokens, 5.3× at 512 on an H100)


def chunk_memory_bytes(model, n_tokens: int, chunk_size: int) -> int:
    """Approximate peak bytes of one chunk's forward (see the module docstring).

    Args:
        model: the `HookedRewardModel` that runs the chunk.
        n_tokens: the positions each variant computes.
        chunk_size: the variants per forward pass.

    Returns:
        The estimated peak memory of one chunk, in bytes.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching import chunk_memory_bytes
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))   # float32
        >>> chunk_memory_bytes(model, n_tokens=128, chunk_size=16) / 2**20   # MiB
        23.0
        >>> chunk_memory_bytes(model, 128, 32) == 2 * chunk_memory_bytes(model, 128, 16)
        True
    """
    cfg = model.cfg
    d_mlp = cfg.d_mlp or 4 * cfg.d_model
    per_token = 14 * cfg.d_model + 4 * d_mlp + 3 * cfg.n_heads * n_tokens
    return int(chunk_size * n_tokens * per_token * torch.finfo(cfg.dtype).bits // 8)


def auto_chunk_limits(model, n_pos: int) -> tuple[int, int]:
    """Default `(variants, variant-positions)` per forward.

    `AUTO_CHUNK`/`CHUNK_TOKENS` on the CPU; on CUDA `AUTO_CHUNK_CUDA` variants and as many positions
    as a quarter of the free GPU memory holds (`chunk_memory_bytes`).

    Args:
        model: the `HookedRewardModel` that runs the chunks.
        n_pos: the positions of the target run.

    Returns:
        `(max_variants, max_variant_positions)`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))   # on the CPU
        >>> auto_chunk_limits(model, n_pos=128)
        (16, 2048)
    """
    device = torch.device(model.cfg.device or "cpu")
    if device.type != "cuda":
        return AUTO_CHUNK, CHUNK_TOKENS
    free, _ = torch.cuda.mem_get_info(device)
    per_token = chunk_memory_bytes(model, n_pos, 1) / max(n_pos, 1)
    return AUTO_CHUNK_CUDA, max(n_pos, int(free / 4 / per_token))


@dataclass(frozen=True)
class TargetState:
    """What the sweep needs from the run being patched (`PatchRunner.target_and_source`).

    Attributes:
        reward: the target run's reward.
        ids: its token ids.
        block_inputs: `resid_pre` of every layer, then `resid_post` of the last.
        keys: per layer, the cached keys `[1, pos, kv_head, d_head]` (pre-rotary).
        values: per layer, the cached values.
        rotated_keys: the keys rotated (rotary models), else `None`.
        site_values: per grid layer, the site activation at the aligned positions.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching.plan import make_plan
        >>> from reward_lens_tl.testing import tiny_reward_model, random_batch
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> ids, _ = random_batch(1, [6], low=6)
        >>> plan = make_plan(model, ids[0], None, "resid_pre", {"mode": "zero"})
        >>> [target], _, _ = PatchRunner(model, {"mode": "zero"}).target_and_source([plan])
        >>> len(target.block_inputs), tuple(target.site_values[0].shape)
        (3, (6, 64))
    """

    reward: float
    ids: Int[Tensor, "1 pos"]
    block_inputs: list[Float[Tensor, "1 pos d_model"]]  # resid_pre[0..L-1], resid_post[L-1]
    keys: list[Tensor]  # per layer [1, pos, kv_head, d_head] (pre-rotary)
    values: list[Tensor]
    rotated_keys: list[Tensor] | None  # the keys rotated (rotary models), else None
    site_values: dict[int, Tensor]  # per grid layer, the site activation at aligned positions


class RewardReader:
    """Reads the reward a sweep scores from a forward pass.

    The reward is the model's reward, or one objective's head output; `hooks` captures
    `hook_reward` for objective columns.

    Args:
        model: the `HookedRewardModel`.
        objective: a head column (index or name), or `None` for the model's reward.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> reader = RewardReader(model)
        >>> reader.column, reader.hooks()
        (None, [])
    """

    def __init__(self, model: HookedRewardModel, objective: Objective = None):
        """Resolve the objective's column."""
        self.column = None if objective is None else objective_index(model, objective)
        self._pooled: Tensor | None = None
        # a plain head's output holds its columns; a gated or scored head's output is its
        # score, and its columns are read at `hook_reward`
        scored = getattr(model, "gating", None) is not None or getattr(model, "scored_head", False)
        self._from_output = not scored
        if scored and self.column is not None and "hook_reward" not in model.hook_dict:
            raise BridgeUnsupportedError(
                "patching one objective of a gated (ArmoRM-style) or scored head reads the hook "
                "point hook_reward, which this backend does not have; patch the model's score "
                "(objective=None) or use the TransformerLens 3.9 backend"
            )

    def hooks(self) -> list:
        """The hooks a forward pass needs for `read` (none for the model's reward).

        Returns:
            `[("hook_reward", fn)]` for an objective column, else `[]`.
        """
        if self.column is None or self._from_output:
            return []  # the output holds every column: `read` takes it from there

        def grab(act, hook):
            self._pooled = act

        return [("hook_reward", grab)]

    def read(self, out: Tensor) -> Float[Tensor, " variant"]:
        """The scored rewards `[variant]` of the forward pass that returned `out`.

        Args:
            out: the forward pass's output (`return_type="reward"`).

        Returns:
            The rewards, or the objective's column of the pooled head output.

        Raises:
            PatchingError: if no forward pass fired `hook_reward` before.
        """
        if self.column is None:
            return out
        if self._from_output:  # a scalar head's `[variant]` is its only column
            return out if out.ndim == 1 else out[:, self.column]
        if self._pooled is None:
            raise PatchingError("the reward was read before a forward pass fired hook_reward")
        return self._pooled[:, self.column]


class PatchRunner:
    """Runs patching plans on one model, with one request's options.

    Args:
        model: the `HookedRewardModel`.
        options: the request's options (`objective`, `fwd_hooks`, `metric`, `reference`,
            `mean_over` are read here; defaults: `reward_lens_tl.patching.plan`).

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching.plan import make_plan
        >>> from reward_lens_tl.testing import tiny_reward_model, random_batch
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> ids, _ = random_batch(1, [6], low=6)
        >>> plan = make_plan(model, ids[0], None, "mlp_out", {"mode": "zero"})
        >>> values, reward = PatchRunner(model, {"mode": "zero"}).source_values(plan)
        >>> sorted(values), tuple(values[0].shape), reward
        ([0, 1], (6, 64), None)
    """

    def __init__(self, model: HookedRewardModel, options: PatchOptions):
        """Keep the model and the options; resolve the objective's column."""
        self.model = model
        self.options = resolve_options(options)
        self.fwd_hooks = list(self.options["fwd_hooks"])
        self.reader = RewardReader(model, self.options["objective"])

    # -- the sweep --------------------------------------------------------------------------
    def sweep(
        self, plans: Sequence[PatchPlan], chunk_size: int | None = None, reuse_prefix: bool = True
    ) -> list[PatchResult]:
        """Run plans that share their runs over one target and one source forward.

        The plans share their inputs, mode and alignment (other sites).

        Args:
            plans: the plans (`make_plans`).
            chunk_size: the variants per forward pass (`None`: `auto_chunk_limits`).
            reuse_prefix: start each chunk at its earliest patched position.

        Returns:
            One `PatchResult` per plan.
        """
        with torch.no_grad():
            targets, values, source_reward = self.target_and_source(plans)
            target_reward, reward_tensor = targets[0].reward, target_reward_tensor(targets[0])
            metric, name = self.options["metric"], "custom"
            if metric is None:
                metric, name = default_metric(plans[0].mode, target_reward, source_reward)
            baseline = float(check_metric_output(metric(reward_tensor), 1)[0])
            sweeps = [
                Sweep(self, plan, target, source_values, reuse_prefix)
                for plan, target, source_values in zip(plans, targets, values, strict=True)
            ]
            if can_share_chunks(sweeps, chunk_size):
                outputs = run_shared_chunks(sweeps, metric)
            else:
                outputs = [sweep.run(metric, chunk_size) for sweep in sweeps]
        return [
            PatchResult(
                values=metric_values,
                grid=plan.grid,
                site=plan.site,
                mode=plan.mode,
                method="activation",
                alignment=plan.alignment,
                metric_name=name,
                target_reward=target_reward,
                source_reward=source_reward,
                baseline=baseline,
                rewards=rewards,
                position_tokens=plan.position_tokens,
            )
            for plan, (metric_values, rewards) in zip(plans, outputs, strict=True)
        ]

    # -- the target and source runs ---------------------------------------------------------
    @torch.no_grad()
    def target_and_source(
        self, plans: Sequence[PatchPlan]
    ) -> tuple[list[TargetState], list[dict[int, Tensor]], float | None]:
        """The target run and the values patched in: the source run's, or an ablation's.

        The target run gives its block inputs, key-value cache and site values; a source of
        the same length runs in the same forward (batch row 1), a source of another length
        gets its own forward.

        Args:
            plans: plans that share their runs and alignment.

        Returns:
            Per plan, the target's state and the values patched in (per grid layer, at the
            aligned positions); the source reward (`None` for ablations).
        """
        model = self.model
        n_layers = model.cfg.n_layers
        names = [f"blocks.{layer}.hook_resid_pre" for layer in range(n_layers)]
        names.append(f"blocks.{n_layers - 1}.hook_resid_post")
        site_names = [plan.hook_names for plan in plans]
        ids, source = plans[0].target.batch(), plans[0].source
        source_ids = None if source is None else source.batch()
        together = source_ids is not None and source_ids.shape == ids.shape
        batch = (
            ids
            if source_ids is None or not together
            else torch.cat([ids, source_ids.to(ids.device)])
        )
        kv = None
        if supports(model, PREFIX_CACHE):  # keep the keys and values for the prefix shortcut
            from .prefix import init_key_value_cache

            kv = {"past_kv_cache": init_key_value_cache(model, batch.shape[0])}
        with model.hooks(fwd_hooks=[*self.fwd_hooks, *self.reader.hooks()]):
            out, cache = model.run_with_cache(
                batch,
                attention_mask=torch.ones_like(batch),
                return_type="reward",
                names_filter=list(dict.fromkeys(names + [n for ns in site_names for n in ns])),
                **(kv or {}),
            )
        rewards = self.reader.read(out)
        shared: dict[str, Any] = dict(
            reward=float(rewards[0]),
            ids=ids,
            block_inputs=[cache[n][:1] for n in names],
            keys=[],
            values=[],
            rotated_keys=None,
        )
        if kv is not None:
            from .prefix import target_keys_values

            shared.update(target_keys_values(model, kv["past_kv_cache"]))
        targets = [
            TargetState(
                **shared,
                site_values=aligned_values(plan, cache, names_, plan.alignment.target, rows=0),
            )
            for plan, names_ in zip(plans, site_names, strict=True)
        ]
        if source is None:
            means = self.shared_means(plans)
            return targets, [self.ablation_values(plan, means) for plan in plans], None
        if not together:
            return (targets, *self.sources(plans))
        sources = [
            aligned_values(plan, cache, names_, plan.alignment.source, rows=1)
            for plan, names_ in zip(plans, site_names, strict=True)
        ]
        return targets, sources, float(rewards[1])

    def sources(self, plans: Sequence[PatchPlan]) -> tuple[list[dict[int, Tensor]], float]:
        """One source forward shared by several plans.

        Args:
            plans: plans that share their runs and alignment.

        Returns:
            Per plan, the site activations at the aligned positions; and the source reward.
        """
        site_names = [plan.hook_names for plan in plans]
        with self.model.hooks(fwd_hooks=[*self.fwd_hooks, *self.reader.hooks()]):
            out, cache = self.model.run_with_cache(
                plans[0].source_run().batch(),
                return_type="reward",
                names_filter=list(dict.fromkeys(n for ns in site_names for n in ns)),
            )
        values = [
            aligned_values(plan, cache, names_, plan.alignment.source, rows=0)
            for plan, names_ in zip(plans, site_names, strict=True)
        ]
        return values, float(self.reader.read(out)[0])

    def source_values(self, plan: PatchPlan) -> tuple[dict[int, Tensor], float | None]:
        """The values patched in (no gradient): the source run's, or the ablation's.

        Args:
            plan: the plan.

        Returns:
            Per grid layer, the `[n_aligned, ...]` values; and the source reward (`None` for
            ablations).
        """
        with torch.no_grad():
            if plan.is_ablation():
                return self.ablation_values(plan), None
            values, reward = self.sources([plan])
        return values[0], reward

    # -- ablations --------------------------------------------------------------------------
    def shared_means(self, plans: Sequence[PatchPlan]) -> dict[str, Tensor] | None:
        """The reference means of every plan's hooks from one pass over the reference set.

        Args:
            plans: plans of one request (one mode).

        Returns:
            Hook name → mean, or `None` when the plans are not mean ablations with a reference.
        """
        reference = self.options["reference"]
        if not plans or plans[0].mode != "mean" or reference is None:
            return None
        names = list(dict.fromkeys(name for plan in plans for name in plan.hook_names))
        return self.reference_means(reference, names, self.options["mean_over"])

    def ablation_values(
        self, plan: PatchPlan, means: dict[str, Tensor] | None = None
    ) -> dict[int, Tensor]:
        """Per grid layer, the `[n_aligned, ...]` values an ablation writes.

        Args:
            plan: a `mean` or `zero` plan.
            means: reference means computed already (`shared_means`), else computed here.

        Returns:
            Zeros, or the means over the options' `reference`.

        Raises:
            PatchingError: if `mode="mean"` has no `reference`, or `mean_over="position"`
                means do not cover every patched position.
        """
        cfg = self.model.cfg
        n = len(plan.alignment)
        if plan.mode == "zero":
            z = torch.zeros(n, *plan.value_shape, device=cfg.device, dtype=cfg.dtype)
            return {layer: z for layer in plan.grid.layers}
        reference, mean_over = self.options["reference"], self.options["mean_over"]
        if reference is None:
            raise PatchingError("mode='mean' needs reference= (a set of sequences to average over)")
        names = plan.hook_names
        if means is None:
            means = self.reference_means(reference, names, mean_over)
        out = {}
        for layer, name in zip(plan.grid.layers, names, strict=True):
            m = means[name]
            if mean_over == "token":
                out[layer] = m.expand(n, *m.shape)
                continue
            pos = plan.alignment.target.to(m.device)
            if int(pos.max()) >= m.shape[0] or bool(torch.isnan(m[pos]).any()):
                raise PatchingError(
                    f"mean_over='position' needs reference sequences covering every patched "
                    f"position (up to {int(pos.max())}); the reference reaches {m.shape[0] - 1} "
                    "or has gaps. Use longer references or mean_over='token'"
                )
            out[layer] = m[pos]
        return out

    def reference_means(
        self, reference: Reference, names: Sequence[str], mean_over: str, batch_size: int = 16
    ) -> dict[str, Tensor]:
        """Masked means of the hooked activations over a reference set.

        Args:
            reference: the reference sequences (`reward_lens_tl.patching.plan.Reference`).
            names: the hook names.
            mean_over: `"token"` or `"position"`.
            batch_size: the sequences per forward pass.

        Returns:
            `[...]` per name for `mean_over="token"`, `[pos, ...]` for `"position"` (`nan`
            where no sequence reaches; positions counted from each sequence's first real
            token, whatever the padding).

        Raises:
            PatchingError: if `mean_over` is neither.
        """
        if mean_over not in ("token", "position"):
            raise PatchingError(f"mean_over must be 'token' or 'position', not {mean_over!r}")
        model = self.model
        ids, mask = reference_batch(model, reference)
        sums: dict[str, Tensor] = {}
        count = torch.zeros(ids.shape[1])
        with torch.no_grad(), model.hooks(fwd_hooks=self.fwd_hooks), reading_position_known():
            for start in range(0, ids.shape[0], batch_size):
                chunk_ids = ids[start : start + batch_size].to(model.cfg.device)
                chunk_mask = mask[start : start + batch_size].to(model.cfg.device)
                _, cache = model.run_with_cache(
                    chunk_ids, attention_mask=chunk_mask, return_type=None, names_filter=list(names)
                )
                keep, columns = chunk_mask, None
                if mean_over == "position":  # position p = each sequence's p-th token
                    columns, keep = real_columns(chunk_mask)
                for name in names:
                    act = cache[name] if columns is None else gather_columns(cache[name], columns)
                    w = keep.to(act.device, torch.float32)
                    weights = w.reshape(*w.shape, *([1] * (act.ndim - 2)))
                    sums[name] = sums.get(name, 0) + (act * weights).sum(0)
                count += keep.sum(0).float().cpu()
        if mean_over == "token":
            return {n: s.sum(0) / count.sum() for n, s in sums.items()}
        denom = count.to(next(iter(sums.values())).device)
        return {n: s / denom.reshape(-1, *([1] * (s.ndim - 1))) for n, s in sums.items()}


def aligned_values(
    plan: PatchPlan, cache: Any, names: Sequence[str], positions: Tensor, rows: int
) -> dict[int, Tensor]:
    """Per grid layer, batch row `rows` of the cached site activation at `positions`."""
    return {
        layer: cache[name][rows, positions.to(cache[name].device)]
        for layer, name in zip(plan.grid.layers, names, strict=True)
    }


def gather_aligned(act: Tensor, positions: Tensor) -> Tensor:
    """`act[0, positions]` for a batch-1 activation `[1, pos, ...]`."""
    return act[0, positions.to(act.device)]


def reference_batch(model: HookedRewardModel, reference: Reference) -> tuple[Tensor, Tensor]:
    """Ids and mask of a reference set.

    The set is given as a `[n, pos]` tensor (padded with the model's pad id, on the left or the
    right; tokens after each row's reading position do not count), an `(ids, mask)` tuple, or a
    list of id sequences / conversations (left padded).
    """
    if isinstance(reference, tuple) and len(reference) == 2 and isinstance(reference[0], Tensor):
        return reference[0], reference[1]
    if isinstance(reference, Tensor):
        ids = model.check_tokens(reference)
        leading = model.infer_attention_mask(ids)  # left padding, if any
        pool = model.pool_positions(ids, leading)
        mask = (torch.arange(ids.shape[1], device=ids.device)[None] <= pool[:, None]).long()
        return ids, mask if leading is None else mask * leading.to(mask)
    seqs = [list(r.ids) if isinstance(r, EncodedConversation) else list(r) for r in reference]
    return pad_batch(seqs, model.pad_token_id)


def gather_columns(act: Tensor, columns: Tensor) -> Tensor:
    """`act[b, columns[b, p]]` for `act` `[batch, pos, ...]`."""
    index = columns.to(act.device).reshape(*columns.shape, *([1] * (act.ndim - 2)))
    return act.gather(1, index.expand(*columns.shape, *act.shape[2:]))


def target_reward_tensor(target: TargetState) -> Tensor:
    """The target run's reward as a one-element tensor of its activations' dtype and device."""
    x = target.block_inputs[0]
    return torch.tensor([target.reward], dtype=x.dtype, device=x.device)


class Sweep:
    """Runs the cells of one plan in chunks (what is skipped: `reward_lens_tl.patching.activation`).

    Built by `PatchRunner.sweep`, one per plan.

    Args:
        runner: the runner (its model, reward reader and hooks).
        plan: the plan whose cells it runs.
        target: the target run's state.
        source_values: per grid layer, the values patched in at the aligned positions.
        reuse_prefix: whether a chunk may start at its earliest patched position.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching.plan import make_plan
        >>> from reward_lens_tl.testing import tiny_reward_model, random_batch
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> ids, _ = random_batch(2, [6, 6], low=6)
        >>> plan = make_plan(model, ids[0], ids[1], "mlp_out", {})
        >>> runner = PatchRunner(model, {})
        >>> [target], [values], source_reward = runner.target_and_source([plan])
        >>> sweep = Sweep(runner, plan, target, values, reuse_prefix=True)
        >>> metric = lambda r: r
        >>> tuple(sweep.run(metric, chunk_size=None)[0].shape)
        (2,)
    """

    def __init__(
        self,
        runner: PatchRunner,
        plan: PatchPlan,
        target: TargetState,
        source_values: dict[int, Tensor],
        reuse_prefix: bool,
    ):
        """Keep the sweep's parts and decide whether the exact shortcuts apply."""
        model = runner.model
        self.model, self.plan, self.target = model, plan, target
        self.source_values, self.reader, self.fwd_hooks = (
            source_values,
            runner.reader,
            runner.fwd_hooks,
        )
        gated = getattr(model, "gating", None) is not None
        self.shortcuts = (
            reuse_prefix
            and supports(model, PREFIX_CACHE)
            and not self.fwd_hooks
            and not gated
            and prefix_shortcuts_safe(model)
        )
        self.pool = plan.target.pool

    def chunks(self, cells: Tensor, first: Tensor, chunk_size: int | None) -> list[Tensor]:
        """Split cells (sorted by first change) into forward passes.

        `chunk_size` each, or by default up to `AUTO_CHUNK` variants and `CHUNK_TOKENS`
        variant-positions (a chunk computes positions `p0 ..` for each variant).
        """
        if chunk_size is not None:
            return list(cells.split(max(1, int(chunk_size))))
        n_pos = self.target.block_inputs[0].shape[1]
        max_variants, max_tokens = auto_chunk_limits(self.model, n_pos)
        out, start = [], 0
        starts = first[cells].tolist()
        for i in range(1, len(cells) + 1):
            p0 = starts[start] if self.shortcuts else 0
            if (
                i == len(cells)
                or i - start >= max_variants
                or (i - start + 1) * (n_pos - p0) > max_tokens
            ):
                out.append(cells[start:i])
                start = i
        return out

    def run(self, metric: Metric, chunk_size: int | None) -> tuple[Tensor, Tensor]:
        """Run every cell of the grid.

        Args:
            metric: the metric of the patched rewards.
            chunk_size: the variants per forward pass (`None`: the default limits).

        Returns:
            The metric values and the patched rewards, each of the grid's shape.
        """
        grid = self.plan.grid
        per_layer = grid.cells_per_layer
        values = torch.empty(len(grid.layers) * per_layer)
        rewards = torch.empty_like(values)
        for li, layer in enumerate(grid.layers):
            j, head = grid.layer_cells(device=self.plan.alignment.target.device)
            first = self.first_change(layer, j, head)
            order = first.argsort(stable=True)
            noop = order[first[order] == NO_CHANGE]
            work = self.chunks(order[first[order] != NO_CHANGE], first, chunk_size)
            for chunk in [c for c in (noop, *work) if len(c)]:
                if chunk is noop:  # every write equals the value already there
                    r = torch.full((len(chunk),), self.target.reward)
                else:
                    r = self.run_chunk(layer, j[chunk], head[chunk], int(first[chunk].min()))
                vals = check_metric_output(metric(r), len(chunk))
                flat = li * per_layer + chunk.cpu()
                values[flat] = vals.detach().float().cpu()
                rewards[flat] = r.detach().float().cpu()
        return values.reshape(grid.shape), rewards.reshape(grid.shape)

    def changed(self, layer: int) -> Tensor:
        """Where the patched value differs from the target's own activation.

        A mask `[n_aligned]` (or `[n_aligned, head]`). Equal values (e.g. a prompt shared by both
        runs) make the write a no-op, so those entries are dropped and later positions start later.
        """
        src, tgt = self.source_values[layer], self.target.site_values[layer]
        return (src.to(tgt.dtype) != tgt).any(-1)

    def first_change(self, layer: int, j: Tensor, head: Tensor) -> Tensor:
        """Per cell, the earliest target position it actually changes (`NO_CHANGE` if none).

        Prefix reuse starts a chunk there.
        """
        changed = self.changed(layer)
        if changed.ndim == 2:
            changed = changed[:, head.clamp(min=0)].T  # [cell, n_aligned]
        else:
            changed = changed[None].expand(j.shape[0], -1)
        if self.plan.grid.by_position:
            changed = changed.gather(1, j[:, None].clamp(min=0))
            pos = self.plan.alignment.target[j][:, None]
        else:
            pos = self.plan.alignment.target[None].expand(j.shape[0], -1)
        return torch.where(changed, pos, NO_CHANGE).min(1).values

    # -- one chunk --------------------------------------------------------------------------
    def patch_entries(self, layer: int, j: Tensor, head: Tensor):
        """Flat `(row, position, head, aligned index)` of a chunk's effective writes."""
        n, n_aligned = j.shape[0], len(self.plan.alignment)
        rows = torch.arange(n, device=j.device)
        if not self.plan.grid.by_position:
            rows = rows.repeat_interleave(n_aligned)
            head = head.repeat_interleave(n_aligned)
            j = torch.arange(n_aligned, device=j.device).repeat(n)
        changed = self.changed(layer)
        keep = changed[j, head] if changed.ndim == 2 else changed[j]
        rows, head, j = rows[keep], head[keep], j[keep]
        return rows, self.plan.alignment.target[j], head, j

    def chunk_hook(self, layer: int, j: Tensor, head: Tensor, p0: int, n: int, offset: int = 0):
        """The in-block hook writing these cells' patches into a chunk.

        The patches go into rows `offset ..` of an `n`-variant chunk that starts at position
        `p0`.
        """
        rows, pos, head, jj = self.patch_entries(layer, j, head)
        src = self.source_values[layer]
        if self.plan.site in HEAD_SITES:
            vals = src[jj.to(src.device), head.to(src.device)]
        else:
            vals = src[jj]
        return (self.plan.hook(layer), patch_hook(rows + offset, pos - p0, head, vals, n))

    def run_chunk(self, layer: int, j: Tensor, head: Tensor, p0: int) -> Tensor:
        """Run one chunk of cells of one layer, starting at position `p0`.

        Args:
            layer: the patched layer.
            j: per cell, the aligned index.
            head: per cell, the head (or -1).
            p0: the chunk's earliest changed position.

        Returns:
            The patched rewards `[cell]`.
        """
        plan, n = self.plan, j.shape[0]
        p0 = p0 if self.shortcuts else 0
        start = layer + 1 if plan.site == "resid_post" else layer
        x = self.target.block_inputs[start][:, p0:]
        hooks = list(self.fwd_hooks)
        if plan.site in DIRECT_SITES:
            rows, pos, _, jj = self.patch_entries(layer, j, head)
            x = x.expand(n, -1, -1).clone()
            x[rows, pos - p0] = self.source_values[layer][jj].to(x.dtype)
        else:
            # block `layer` runs once up to the hook point (its input is the same for every
            # variant); the hook widens the batch to the n variants and writes their patches
            hooks.append(self.chunk_hook(layer, j, head, p0, n))
            if not supports(self.model, BATCH_WIDENING):  # the n rows from the block's input
                x = x.expand(n, -1, -1)
        with scoped_hooks(self.model, [*hooks, *self.reader.hooks()]):
            out = self.forward_from(x, n, start, p0, in_block=plan.site not in DIRECT_SITES)
        return self.reader.read(out)

    def forward_from(self, x: Tensor, n: int, start: int, p0: int, in_block: bool) -> Tensor:
        """Run the blocks from `start` on `x` and return the pooled rewards `[n]`.

        `x` has batch 1 when an in-block hook widens it to the `n` variants.
        """
        model = self.model
        if self.shortcuts:
            from .prefix import forward_with_shortcuts

            return forward_with_shortcuts(self, x, n, start, p0, in_block)
        pool = torch.full((n,), self.pool, dtype=torch.long, device=x.device)
        tokens = None
        if getattr(model, "gating", None) is not None:
            tokens = self.target.ids.expand(n, -1)
        return model(
            x, return_type="reward", start_at_layer=start, pool_positions=pool, tokens=tokens
        )


SHAREABLE_SITES = frozenset({"attn_out", "mlp_out", "z", "resid_mid"})


def can_share_chunks(sweeps: Sequence[Sweep], chunk_size: int | None) -> bool:
    """Whether several sweeps can run as one forward per layer.

    Several sites patched inside the same blocks (by a hook, not through the block input)
    whose cells of one layer fit in one chunk run as one forward per layer.
    """
    layers = {sweep.plan.grid.layers for sweep in sweeps}
    if chunk_size is None:
        n_pos = sweeps[0].target.block_inputs[0].shape[1]
        max_variants, max_tokens = auto_chunk_limits(sweeps[0].model, n_pos)
        chunk_size = min(max_variants, max(2, max_tokens // n_pos))
    return (
        len(sweeps) > 1
        and len(layers) == 1
        and all(sweep.plan.site in SHAREABLE_SITES for sweep in sweeps)
        and sum(sweep.plan.grid.cells_per_layer for sweep in sweeps) <= chunk_size
    )


def run_shared_chunks(sweeps: Sequence[Sweep], metric: Metric) -> list[tuple[Tensor, Tensor]]:
    """Per layer, the cells of every sweep in one forward.

    Each site's hook writes its own rows (the batch is widened by the first hook that fires), so the
    values are those of separate runs.
    """
    first_sweep = sweeps[0]
    outs = [torch.empty(len(s.plan.grid.layers) * s.plan.grid.cells_per_layer) for s in sweeps]
    rewards = [torch.empty_like(o) for o in outs]
    device = first_sweep.plan.alignment.target.device
    for li, layer in enumerate(first_sweep.plan.grid.layers):
        parts = []
        for sweep in sweeps:
            j, head = sweep.plan.grid.layer_cells(device=device)
            first = sweep.first_change(layer, j, head)
            parts.append((sweep, j, head, first, (first != NO_CHANGE).nonzero().flatten()))
        n = sum(len(work) for *_, work in parts)
        r_all = torch.empty(0)  # the chunk's rewards (none when no cell writes anything)
        if n:
            p0 = min(int(first[work].min()) for _, _, _, first, work in parts if len(work))
            p0 = p0 if first_sweep.shortcuts else 0
            hooks, offset = list(first_sweep.fwd_hooks), 0
            for sweep, j, head, _, work in parts:
                if len(work):
                    hooks.append(sweep.chunk_hook(layer, j[work], head[work], p0, n, offset))
                    offset += len(work)
            x = first_sweep.target.block_inputs[layer][:, p0:]
            if not supports(first_sweep.model, BATCH_WIDENING):
                x = x.expand(n, -1, -1)
            with scoped_hooks(first_sweep.model, [*hooks, *first_sweep.reader.hooks()]):
                out = first_sweep.forward_from(x, n, layer, p0, in_block=True)
            r_all = first_sweep.reader.read(out)
        offset = 0
        for k, (sweep, _, _, first, work) in enumerate(parts):
            r = torch.full((first.shape[0],), sweep.target.reward, dtype=torch.float32)
            if len(work):
                r = r.to(r_all.dtype).to(r_all.device)
                r[work] = r_all[offset : offset + len(work)]
                offset += len(work)
            per_layer = sweep.plan.grid.cells_per_layer
            vals = check_metric_output(metric(r), per_layer)
            outs[k][li * per_layer : (li + 1) * per_layer] = vals.detach().float().cpu()
            rewards[k][li * per_layer : (li + 1) * per_layer] = r.detach().float().cpu()
    return [
        (o.reshape(s.plan.grid.shape), r.reshape(s.plan.grid.shape))
        for o, r, s in zip(outs, rewards, sweeps, strict=True)
    ]


@contextmanager
def scoped_hooks(model: HookedRewardModel, fwd_hooks: Sequence) -> Iterator[None]:
    """`model.hooks(fwd_hooks)`, but on exit only the hook points it touched are cleaned.

    (TL's context manager walks every hook point of the model, ~1 ms per chunk on a small
    model). Hooks named by a filter function go through `model.hooks`.

    Args:
        model: the `HookedRewardModel`.
        fwd_hooks: `(hook name or filter, fn)` pairs.

    Yields:
        Nothing; the hooks are on inside the block.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> with scoped_hooks(model, [("blocks.0.hook_resid_pre", lambda act, hook: act)]):
        ...     len(model.hook_dict["blocks.0.hook_resid_pre"].fwd_hooks)
        1
        >>> len(model.hook_dict["blocks.0.hook_resid_pre"].fwd_hooks)
        0
    """
    if not all(isinstance(name, str) for name, _ in fwd_hooks):
        with model.hooks(fwd_hooks=fwd_hooks):
            yield
        return
    model.check_hook_names(name for name, _ in fwd_hooks)
    model.context_level += 1
    level, points = model.context_level, []
    try:
        for name, fn in fwd_hooks:
            point = model.hook_dict[name]
            points.append(point)
            point.add_hook(fn, dir="fwd", level=level)
        yield
    finally:
        for point in points:
            point.remove_hooks("fwd", including_permanent=False, level=level)
        model.context_level -= 1


def patch_hook(rows: Tensor, pos: Tensor, head: Tensor, vals: Tensor, n: int):
    """A TL hook writing `vals` at `[rows, pos(, head)]`.

    It first widens its activation's batch to `n` (if it is 1).
    """

    def hook(act, hook):
        act = act.expand(n, *act.shape[1:]).clone() if act.shape[0] != n else act.clone()
        if act.ndim == 4:
            act[rows, pos, head] = vals.to(act.dtype)
        else:
            act[rows, pos] = vals.to(act.dtype)
        return act

    return hook


def prefix_shortcuts_safe(model) -> bool:
    """Whether no hook already on the model could see the prefix shortcut's skipped calls.

    Hooks already on the model (permanent hooks, torch or global hooks, spliced SAEs) could see
    the reused prefix or the last block at the reading positions only.
    """
    from ..fast_attention import hooked

    ln_final = getattr(model, "ln_final", None)
    roots = [model.blocks, model.unembed] + ([ln_final] if ln_final is not None else [])
    return not hooked(roots)
