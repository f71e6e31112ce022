"""Activation patching, batched: every patched variant of a chunk in one forward pass.

TransformerLens's `patching` module runs one full forward per cell. Here the cells of one
layer are stacked along the batch dimension and run together, and three things that cannot
change the reward are skipped, exactly (values agree with `transformer_lens.patching` to
float32 rounding, ~1e-7):

1. **Layers below the patch.** The target run's cached residual enters at the patched block
   (`start_at_layer`). `resid_pre` at layer `l` is written directly into that input,
   `resid_post` into the input of block `l + 1`; every other site is patched by a hook
   inside block `l`.
2. **Positions before the patch** (`reuse_prefix=True`). Causal attention means a patch at
   position `p` changes nothing at positions `< p`, so a chunk whose earliest patched
   position is `p0` only computes positions `p0 ..` and attends to the target run's cached
   keys and values for `0 .. p0 - 1` (TransformerLens's frozen key-value cache).
3. **Everything the reward head does not read.** Runs are cut after the reward-reading token,
   and the last block computes only that token's query, attention and MLP (its keys and
   values for the other positions are computed directly).

2 and 3 are switched off when `fwd_hooks` are given (a user hook may index absolute
positions) and for gated (ArmoRM-style) heads, whose gate reads a prompt position.

Memory: a chunk of `chunk_size` variants over `T` positions holds, per block, about
`chunk_size · T · (14·d_model + 4·d_mlp + 3·n_heads·T)` floats at its peak (TL keeps the
residual, normalised input, q/k/v and their rotated copies, z, the outputs, the MLP's hidden
activations, and the attention scores and pattern alive together), e.g. 16 variants × 128
tokens of a d_model=512, d_mlp=1376, 8-head model ≈ 0.13 GB in float32 (measured: 0.15 GB
of resident-set growth for the whole sweep); `chunk_memory_bytes` computes it.
With prefix reuse a chunk's cells should start at nearby positions (positions between a
chunk's first patch and a cell's own are recomputed for nothing), which is why the default
chunk is small (16 was fastest on CPU; on a GPU larger chunks pay off).

Writes that change nothing are dropped: where the source activation equals the target's
(e.g. positions before the first differing token of a clean/corrupted pair), a cell is the
target's reward exactly and costs no forward pass, and chunks start at the first real change.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.testing import tiny_reward_model, random_batch
    >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    >>> ids, _ = random_batch(2, [9, 7], low=6)   # left padded: row 1 starts with 2 pads
    >>> result = activation_patching(model, ids[0], ids[1], site="resid_pre")
    >>> result.axes, result.shape
    (('layer', 'pos'), (2, 7))
    >>> bool((result.values[0] - result.values[0, -1]).abs().max() < 2)   # a fraction per cell
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, overload

import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens.cache.key_value_cache import (
    TransformerLensKeyValueCache,
    TransformerLensKeyValueCacheEntry,
)
from transformer_lens.utilities.architectures import POST_NORM_ARCHITECTURES

from ..fast_attention import RotatedPrefixEntry, hooked, prepend
from ..readout import Objective
from ..signatures import checked_keywords, pasted_docs
from .alignment import AlignmentKind, PatchInput
from .errors import PatchingError
from .grids import HEAD_SITES, Site, canonical_site
from .plan import (
    REQUEST_DOC,
    FwdHooks,
    MeanOver,
    Metric,
    Mode,
    PatchPlan,
    PatchRequest,
    Reference,
    RewardReader,
    ablation_values,
    check_metric_output,
    gather_aligned,
    make_plan,
    margin_fraction,
    request_from,
    reward_change,
)
from .results import MultiSitePatchResult, PatchResult

if TYPE_CHECKING:
    from ..model import HookedRewardModel

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
    """
    device = torch.device(model.cfg.device or "cpu")
    if device.type != "cuda":
        return AUTO_CHUNK, CHUNK_TOKENS
    free, _ = torch.cuda.mem_get_info(device)
    per_token = chunk_memory_bytes(model, n_pos, 1) / max(n_pos, 1)
    return AUTO_CHUNK_CUDA, max(n_pos, int(free / 4 / per_token))


@dataclass(frozen=True)
class TargetState:
    """What the sweep needs from the run being patched."""

    reward: float
    ids: Int[Tensor, "1 pos"]
    block_inputs: list[Float[Tensor, "1 pos d_model"]]  # resid_pre[0..L-1], resid_post[L-1]
    keys: list[Tensor] | None  # per layer [1, pos, kv_head, d_head] (pre-rotary)
    values: list[Tensor] | None
    rotated_keys: list[Tensor] | None  # the keys rotated (rotary models), else None
    site_values: dict[int, Tensor]  # per grid layer, the site activation at aligned positions


def rotated_keys(model, keys: list[Tensor]) -> list[Tensor] | None:
    """Each layer's cached keys of one unpadded run, rotated as its attention rotates them.

    The positions are `0 ..`, so sweeps rotate only the keys they compute.
    """
    if model.cfg.positional_embedding_type != "rotary":
        return None
    blocks = model.blocks
    return [block.attn.apply_rotary(k, 0, None) for block, k in zip(blocks, keys, strict=True)]


def run_target(model, plan: PatchPlan, reader: RewardReader, fwd_hooks: Sequence) -> TargetState:
    """Forward the target run once, caching block inputs and its key-value cache."""
    return run_target_and_source(model, [plan], reader, fwd_hooks, with_source=False)[0][0]


def run_targets(
    model, plans: Sequence[PatchPlan], reader: RewardReader, fwd_hooks: Sequence
) -> list[TargetState]:
    """One target forward shared by several plans (same runs and alignment, other sites).

    Returns:
        One `TargetState` per plan, sharing block inputs and the key-value cache.
    """
    return run_target_and_source(model, plans, reader, fwd_hooks, with_source=False)[0]


@overload
def run_target_and_source(
    model: HookedRewardModel,
    plans: Sequence[PatchPlan],
    reader: RewardReader,
    fwd_hooks: Sequence,
    with_source: Literal[True] = ...,
) -> tuple[list[TargetState], list[dict[int, Tensor]], float]: ...


@overload
def run_target_and_source(
    model: HookedRewardModel,
    plans: Sequence[PatchPlan],
    reader: RewardReader,
    fwd_hooks: Sequence,
    with_source: Literal[False],
) -> tuple[list[TargetState], None, None]: ...


def run_target_and_source(
    model: HookedRewardModel,
    plans: Sequence[PatchPlan],
    reader: RewardReader,
    fwd_hooks: Sequence,
    with_source: bool = True,
) -> tuple[list[TargetState], list[dict[int, Tensor]] | None, float | None]:
    """The target run and, when the source run has the same length, the source run.

    The target run gives its block inputs, key-value cache and site values; a source of the
    same length runs in the same forward (batch row 1), a source of another length gets its
    own forward.
    """
    n_layers = model.cfg.n_layers
    names = [f"blocks.{layer}.hook_resid_pre" for layer in range(n_layers)]
    names.append(f"blocks.{n_layers - 1}.hook_resid_post")
    site_names = [[plan.hook(layer) for layer in plan.grid.layers] for plan in plans]
    ids = plans[0].target.batch()
    together = with_source and plans[0].source_run().batch().shape == ids.shape
    batch = torch.cat([ids, plans[0].source_run().batch().to(ids.device)]) if together else ids
    kv = TransformerLensKeyValueCache.init_cache(model.cfg, model.cfg.device, batch.shape[0])
    with model.hooks(fwd_hooks=[*fwd_hooks, *reader.hooks()]):
        out, cache = model.run_with_cache(
            batch,
            attention_mask=torch.ones_like(batch),
            return_type="reward",
            names_filter=list(dict.fromkeys(names + [n for ns in site_names for n in ns])),
            past_kv_cache=kv,
        )
    rewards = reader.read(out)
    shared: dict[str, Any] = dict(
        reward=float(rewards[0]),
        ids=ids,
        block_inputs=[cache[n][:1] for n in names],
        keys=[e.past_keys[:1] for e in kv.entries],
        values=[e.past_values[:1] for e in kv.entries],
        rotated_keys=rotated_keys(model, [e.past_keys[:1] for e in kv.entries]),
    )
    targets = [
        TargetState(
            **shared,
            site_values={
                layer: gather_aligned(cache[name][:1], plan.alignment.target)
                for layer, name in zip(plan.grid.layers, names_, strict=True)
            },
        )
        for plan, names_ in zip(plans, site_names, strict=True)
    ]
    if not with_source:
        return targets, None, None
    if not together:
        return (targets, *run_sources(model, plans, reader, fwd_hooks))
    sources = [
        {
            layer: gather_aligned(cache[name][1:], plan.alignment.source)
            for layer, name in zip(plan.grid.layers, names_, strict=True)
        }
        for plan, names_ in zip(plans, site_names, strict=True)
    ]
    return targets, sources, float(rewards[1])


def run_source(
    model, plan: PatchPlan, reader: RewardReader, fwd_hooks: Sequence
) -> tuple[dict[int, Tensor], float]:
    """The source run's site activations at the aligned positions, and its reward."""
    values, reward = run_sources(model, [plan], reader, fwd_hooks)
    return values[0], reward


def run_sources(
    model, plans: Sequence[PatchPlan], reader: RewardReader, fwd_hooks: Sequence
) -> tuple[list[dict[int, Tensor]], float]:
    """One source forward shared by several plans.

    Returns:
        Per plan, the site activations at the aligned positions; and the source reward.
    """
    site_names = [[plan.hook(layer) for layer in plan.grid.layers] for plan in plans]
    with model.hooks(fwd_hooks=[*fwd_hooks, *reader.hooks()]):
        out, cache = model.run_with_cache(
            plans[0].source_run().batch(),
            return_type="reward",
            names_filter=list(dict.fromkeys(n for ns in site_names for n in ns)),
        )
    values = [
        {
            layer: gather_aligned(cache[name], plan.alignment.source)
            for layer, name in zip(plan.grid.layers, names_, strict=True)
        }
        for plan, names_ in zip(plans, site_names, strict=True)
    ]
    return values, float(reader.read(out)[0])


def target_reward_tensor(target: TargetState) -> Tensor:
    """The target run's reward as a one-element tensor of its activations' dtype and device."""
    x = target.block_inputs[0]
    return torch.tensor([target.reward], dtype=x.dtype, device=x.device)


def default_metric(plan: PatchPlan, target_reward: float, source_reward: float | None):
    """The plan's default metric and its name.

    Ablations get the reward change; denoising and noising the fraction of the margin moved.

    Raises:
        PatchingError: if a denoising or noising plan has no source reward.
    """
    if plan.is_ablation():
        return reward_change(target_reward), "reward change (patched - clean)"
    if source_reward is None:
        raise PatchingError(f"mode={plan.mode!r} needs the source run's reward")
    name = "fraction restored" if plan.mode == "denoising" else "fraction destroyed"
    return margin_fraction(target_reward, source_reward), name


@overload
def activation_patching(
    model: HookedRewardModel,
    clean: PatchInput,
    corrupted: PatchInput | None = ...,
    *,
    site: Site = ...,
    mode: Mode = ...,
    alignment: AlignmentKind = ...,
    prefix_length: int | None = ...,
    positions: Sequence[int] | None = ...,
    by_position: bool | None = ...,
    layers: Sequence[int] | None = ...,
    heads: Sequence[int] | None = ...,
    metric: Metric | None = ...,
    objective: Objective = ...,
    reference: Reference | None = ...,
    mean_over: MeanOver = ...,
    fwd_hooks: FwdHooks = ...,
    chunk_size: int | None = ...,
    reuse_prefix: bool = ...,
) -> PatchResult: ...


@overload
def activation_patching(
    model: HookedRewardModel,
    clean: PatchInput,
    corrupted: PatchInput | None = ...,
    *,
    site: tuple[Site, ...] | list[Site],
    mode: Mode = ...,
    alignment: AlignmentKind = ...,
    prefix_length: int | None = ...,
    positions: Sequence[int] | None = ...,
    by_position: bool | None = ...,
    layers: Sequence[int] | None = ...,
    heads: Sequence[int] | None = ...,
    metric: Metric | None = ...,
    objective: Objective = ...,
    reference: Reference | None = ...,
    mean_over: MeanOver = ...,
    fwd_hooks: FwdHooks = ...,
    chunk_size: int | None = ...,
    reuse_prefix: bool = ...,
) -> MultiSitePatchResult: ...


@overload
def activation_patching(
    model: HookedRewardModel,
    clean: PatchRequest,
    corrupted: None = ...,
    *,
    chunk_size: int | None = ...,
    reuse_prefix: bool = ...,
) -> PatchResult | MultiSitePatchResult: ...


@checked_keywords()
@pasted_docs(request=REQUEST_DOC)
def activation_patching(
    model: HookedRewardModel,
    clean: PatchInput | PatchRequest,
    corrupted: PatchInput | None = None,
    *,
    site: Site | Sequence[Site] = "resid_pre",
    mode: Mode = "denoising",
    alignment: AlignmentKind = "end",
    prefix_length: int | None = None,
    positions: Sequence[int] | None = None,
    by_position: bool | None = None,
    layers: Sequence[int] | None = None,
    heads: Sequence[int] | None = None,
    metric: Metric | None = None,
    objective: Objective = None,
    reference: Reference | None = None,
    mean_over: MeanOver = "token",
    fwd_hooks: FwdHooks = (),
    chunk_size: int | None = None,
    reuse_prefix: bool = True,
) -> PatchResult | MultiSitePatchResult:
    """Patch every cell of a grid and score each patched run.

    One site gives a `PatchResult`; a sequence of sites, e.g.
    `site=("attn_out", "mlp_out")`, is swept over one shared clean and one shared corrupted
    run and gives a `MultiSitePatchResult` (one `PatchResult` per site;
    `by_position`/`heads` apply to the sites that have that axis). The sweep is described
    by its `PatchRequest`'s fields (`model` to `fwd_hooks` below), plus two settings of the
    sweep itself (`chunk_size`, `reuse_prefix`).

    Args:
        {request}
        chunk_size: the variants per forward pass (memory: `chunk_memory_bytes`); the
            default (`None`) takes up to 16 and at most `CHUNK_TOKENS` (2048)
            variant-positions on the CPU, i.e. fewer variants for longer runs, and up to 64 on
            CUDA within a quarter of the free GPU memory (`auto_chunk_limits`).
        reuse_prefix: start each chunk at its earliest patched position, attending to the
            target run's cached keys and values before it (exact; see the module docstring).

    Returns:
        A `PatchResult` for one site, a `MultiSitePatchResult` for a sequence of sites.

    Raises:
        PatchingError: if the request is invalid (an unknown site or mode, a missing
            corrupted run or `reference`, a request together with keyword fields, ...).
        AlignmentError: if the runs cannot be aligned as asked.
        UnknownKeywordError: for a keyword the function does not take (a `TypeError`).

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching import activation_patching
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> clean = model.encode("explain how to bake bread", "the oven and the flour")
        >>> corrupted = model.encode("explain how to bake bread", "the oven and the bomb")
        >>> result = activation_patching(model, clean, corrupted, site="resid_pre", layers=[0])
        >>> result.shape   # layer 0 × 16 aligned positions
        (1, 16)
        >>> [(label, round(v, 3)) for label, v in result.top_k(2)]   # only the swapped word
        [('L0 end-2', 1.0), ('L0 end-15', 0.0)]
    """
    req = request_from(locals())  # the parameters above, as a PatchRequest
    site = req.site
    sites = [site] if isinstance(site, str) else list(site)
    if not sites or not all(isinstance(s, str) for s in sites):
        raise PatchingError(f"site must be a site name or a sequence of them, not {site!r}")
    if len({canonical_site(s) for s in sites}) != len(sites):
        raise PatchingError(f"site={site!r} names a site twice")
    plans = [
        make_plan(
            model,
            req.replace(
                site=s,
                heads=req.heads if canonical_site(s) in HEAD_SITES or len(sites) == 1 else None,
            ),
        )
        for s in sites
    ]
    results = sweep_plans(
        model,
        plans,
        req.objective,
        req.metric,
        req.reference,
        req.mean_over,
        chunk_size,
        reuse_prefix,
        list(req.fwd_hooks),
    )
    if isinstance(site, str):
        return results[0]
    return MultiSitePatchResult({r.site: r for r in results})


def sweep_plans(
    model,
    plans: Sequence[PatchPlan],
    objective: Objective,
    metric: Metric | None,
    reference,
    mean_over: str,
    chunk_size: int | None,
    reuse_prefix: bool,
    fwd_hooks: Sequence,
) -> list[PatchResult]:
    """Run plans that share their runs over one target and one source forward.

    The plans share their inputs, mode and alignment (other sites).

    Returns:
        One `PatchResult` per plan.
    """
    reader = RewardReader(model, objective)
    with torch.no_grad():
        if plans[0].is_ablation():
            targets = run_targets(model, plans, reader, fwd_hooks)
            values = [ablation_values(model, p, reference, mean_over, fwd_hooks) for p in plans]
            source_reward = None
        else:
            targets, values, source_reward = run_target_and_source(model, plans, reader, fwd_hooks)
        target_reward = targets[0].reward
        name = "custom"
        if metric is None:
            metric, name = default_metric(plans[0], target_reward, source_reward)
        baseline = float(check_metric_output(metric(target_reward_tensor(targets[0])), 1)[0])
        sweeps = [
            Sweep(model, plan, target, source_values, reader, fwd_hooks, reuse_prefix)
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
            position_tokens=plan.position_tokens(model),
        )
        for plan, (metric_values, rewards) in zip(plans, outputs, strict=True)
    ]


class Sweep:
    """Runs the cells of a plan in chunks (see the module docstring for what is skipped)."""

    def __init__(self, model, plan, target, source_values, reader, fwd_hooks, reuse_prefix):
        """Keep the sweep's parts and decide whether the exact shortcuts apply."""
        self.model, self.plan, self.target = model, plan, target
        self.source_values, self.reader, self.fwd_hooks = source_values, reader, fwd_hooks
        gated = getattr(model, "gating", None) is not None
        # hooks already on the model (perma hooks, torch or global hooks, spliced SAEs) could
        # see the reused prefix or the last block at the reading positions only
        ln_final = getattr(model, "ln_final", None)
        roots = [model.blocks, model.unembed] + ([ln_final] if ln_final is not None else [])
        self.shortcuts = reuse_prefix and not fwd_hooks and not gated and not hooked(roots)
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
        with scoped_hooks(self.model, [*hooks, *self.reader.hooks()]):
            out = self.forward_from(x, n, start, p0, in_block=plan.site not in DIRECT_SITES)
        return self.reader.read(out)

    def forward_from(self, x: Tensor, n: int, start: int, p0: int, in_block: bool) -> Tensor:
        """Run the blocks from `start` on `x` and return the pooled rewards `[n]`.

        `x` has batch 1 when an in-block hook widens it to the `n` variants.
        """
        model = self.model
        last = model.cfg.n_layers - 1
        prefix = self.kv_prefix(p0, n, start if in_block else None) if p0 > 0 else None
        if self.shortcuts and fast_last_block_ok(model) and (start < last or not in_block):
            if start < last:
                x = model(x, start_at_layer=start, stop_at_layer=last, past_kv_cache=prefix)
            x = self.last_block_at_pool(x, p0) if start <= last else x[:, -1:]
            pool = torch.zeros(n, dtype=torch.long, device=x.device)
            return model(x, return_type="reward", start_at_layer=last + 1, pool_positions=pool)
        pool = torch.full((n,), self.pool - p0, dtype=torch.long, device=x.device)
        tokens = None
        if getattr(model, "gating", None) is not None:
            tokens = self.target.ids.expand(n, -1)
        return model(
            x,
            return_type="reward",
            start_at_layer=start,
            pool_positions=pool,
            tokens=tokens,
            past_kv_cache=prefix,
        )

    def kv_prefix(self, p0: int, n: int, narrow_layer: int | None) -> TransformerLensKeyValueCache:
        """The target run's keys/values of positions `< p0`, expanded to `n` variants.

        They have batch 1 at `narrow_layer`, where the block still runs unwidened, except for the
        patched `k` or `v` whose hook widens it).
        """
        entries: list[TransformerLensKeyValueCacheEntry] = []
        rotated = self.target.rotated_keys or [None] * len(self.target.keys)
        for layer, (k, v, rk) in enumerate(
            zip(self.target.keys, self.target.values, rotated, strict=True)
        ):
            nk = nv = n
            if layer == narrow_layer:
                nk = n if self.plan.site == "k" else 1
                nv = n if self.plan.site == "v" else 1
            entries.append(
                RotatedPrefixEntry(
                    past_keys=k[:, :p0].expand(nk, -1, -1, -1),
                    past_values=v[:, :p0].expand(nv, -1, -1, -1),
                    frozen=True,
                    rotated_keys=None if rk is None else rk[:, :p0].expand(nk, -1, -1, -1),
                )
            )
        mask = torch.ones(n, p0, dtype=torch.long, device=self.target.ids.device)
        return TransformerLensKeyValueCache(entries, mask, frozen=True)

    def last_block_at_pool(self, resid: Float[Tensor, "n pos d_model"], p0: int) -> Tensor:
        """The last block's output at the reading position only.

        Keys and values of the other positions are projected directly and handed to the block as a
        frozen cache.
        """
        model = self.model
        last = model.cfg.n_layers - 1
        block = model.blocks[last]
        n = resid.shape[0]
        before = resid[:, :-1]
        keys = self.target.keys[last][:, :p0].expand(n, -1, -1, -1)
        values = self.target.values[last][:, :p0].expand(n, -1, -1, -1)
        rotated = self.target.rotated_keys
        rotated = None if rotated is None else rotated[last][:, :p0].expand(n, -1, -1, -1)
        if before.shape[1]:
            normed = block.ln1(before)
            _, k, v = block.attn.calculate_qkv_matrices(normed[:, :1], normed, normed)
            keys, values = prepend(keys, k), prepend(values, v)
            if rotated is not None:
                rotated = prepend(rotated, block.attn.apply_rotary(k, p0, None))
        entry = RotatedPrefixEntry(keys, values, frozen=True, rotated_keys=rotated)
        return block(resid[:, -1:], past_kv_cache_entry=entry)


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
def scoped_hooks(model, fwd_hooks: Sequence):
    """`model.hooks(fwd_hooks)`, but on exit only the hook points it touched are cleaned.

    (TL's context manager walks every hook point of the model, ~1 ms per chunk on a small
    model). Hooks named by a filter function go through `model.hooks`.
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


def fast_last_block_ok(model) -> bool:
    """Whether the model's last block can run at the reading position only (exactly)."""
    cfg = model.cfg
    return not (
        cfg.use_attn_in
        or cfg.use_split_qkv_input
        or cfg.parallel_attn_mlp
        or cfg.original_architecture in POST_NORM_ARCHITECTURES
        or cfg.positional_embedding_type not in ("standard", "rotary")
        or cfg.use_attention_sinks
        or cfg.use_logn_attn
    )
