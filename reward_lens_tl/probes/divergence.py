"""Divergence-aware patching: is a patched state one the model could ever see?

Activation patching writes values into a run; the result is only evidence about the model's
mechanism if the patched residual stream still looks like a natural one. For every cell of an
`reward_lens_tl.patching.activation_patching` sweep this module computes the residual
**after the patch**, at each patched position:

- `resid_pre` / `resid_mid` / `resid_post`: the written vector itself;
- `attn_out` / `mlp_out`: the residual the component writes into (`resid_mid` /
  `resid_post` of the target run) with the target's component output swapped for the
  patched one;
- `z` (one head): `resid_mid` plus `(z_patched − z_target) @ W_O[head]`
  (pre-norm models; post-norm architectures are refused).

Its distance from natural states is the **Mahalanobis distance** under a Ledoit-Wolf shrinkage
covariance (`shrinkage_covariance`) of the residuals at the same hook over every real
token of `natural` sequences (half of them, alternating); the other half calibrates it: a
cell's **percentile** is the share of held-out natural distances below its own, and a cell is
**out of distribution** when the percentile is ≥ `ood_percentile` (default 99). A cell that
patches several positions reports its farthest one. Results are reported with and without the
out-of-distribution cells (`DivergenceResult.top_k`, `to_dataframe()['ood']`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from ..errors import ProbeError, TooFewExamplesError
from ..inputs import EncodedConversation, pad_batch
from ..padding import reading_position_known
from ..patching import activation_patching
from ..patching.grids import Site
from ..patching.patch_results import PatchResult
from ..patching.plan import PatchOptions, make_plan
from ..patching.runner import PatchRunner, gather_aligned
from ..plotting import PLOT_DOC, Backend, render, scatter
from ..results import Result, TopK, top_entries
from ..signatures import pasted_docs

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "divergence_aware_patching",
]

AFTER_HOOK = {
    "resid_pre": "hook_resid_pre",
    "resid_mid": "hook_resid_mid",
    "resid_post": "hook_resid_post",
    "attn_out": "hook_resid_mid",
    "mlp_out": "hook_resid_post",
    "z": "hook_resid_mid",
}


def shrinkage_covariance(
    x: Float[Tensor, "n d"],
) -> tuple[Float[Tensor, " d"], Float[Tensor, "d d"], float]:
    """`(mean, covariance, shrinkage)` with Ledoit and Wolf's (2004) optimal shrinkage.

    The sample covariance `S` is shrunk towards `mu·I` (`mu = tr(S)/d`):
    `Σ = (1 − s)·S + s·mu·I`, `s = min(b², d²)/d²` with `d² = ‖S − mu·I‖²_F` and
    `b² = (1/n²) Σ_k ‖x_k x_kᵀ − S‖²_F` (`S` with divisor n). Positive definite for
    any n ≥ 2.

    Args:
        x: the states, one per row.

    Returns:
        The mean, the shrunk covariance and the shrinkage `s`.

    Raises:
        TooFewExamplesError: fewer than 2 states.
    """
    x = x.double()
    n = x.shape[0]
    if n < 2:
        raise TooFewExamplesError(f"a covariance needs at least 2 states, got {n}")
    mean = x.mean(0)
    xc = x - mean
    S = xc.T @ xc / n
    mu = torch.trace(S) / S.shape[0]
    d2 = ((S - mu * torch.eye(S.shape[0], dtype=S.dtype)) ** 2).sum()
    # Σ_k ‖x_k x_kᵀ − S‖² = Σ_k ‖x_k‖⁴ − n‖S‖²
    b2 = ((xc.pow(2).sum(1) ** 2).sum() / n - (S**2).sum()) / n
    s = float(torch.clamp(b2 / d2, 0.0, 1.0)) if float(d2) > 0 else 1.0
    cov = (1 - s) * S + s * mu * torch.eye(S.shape[0], dtype=S.dtype)
    return mean, cov, s


@dataclass(frozen=True)
class NaturalStates:
    """The distribution of natural residuals at one hook: fit half and calibration half.

    Args:
        hook: the hook's name.
        mean: the fit half's mean.
        precision: the inverse of the fit half's shrunk covariance.
        shrinkage: the covariance's shrinkage.
        calibration: sorted Mahalanobis distances of held-out natural states.
    """

    hook: str
    mean: Tensor
    precision: Tensor
    shrinkage: float
    calibration: np.ndarray  # sorted Mahalanobis distances of held-out natural states

    def distance(self, x: Float[Tensor, "... d"]) -> Float[Tensor, "..."]:
        """The Mahalanobis distance of each state from the natural ones.

        Args:
            x: the states (last dimension `d`).

        Returns:
            The distances (in float64, on the CPU).
        """
        xc = x.detach().double().cpu() - self.mean
        return torch.einsum("...i,ij,...j->...", xc, self.precision, xc).clamp_min(0).sqrt()

    def percentile(self, distance: Tensor) -> Tensor:
        """Share (in %) of held-out natural distances strictly below each distance.

        Args:
            distance: the distances.

        Returns:
            The percentiles.
        """
        below = np.searchsorted(self.calibration, distance.numpy(), side="left")
        return torch.as_tensor(100.0 * below / len(self.calibration))


def natural_states(model, natural: Sequence, hooks: Sequence[str], batch_size: int = 32):
    """Per hook, `NaturalStates` from every real token of `natural` sequences.

    Even-indexed sequences fit the covariance, odd-indexed ones calibrate it.

    Args:
        model: the `HookedRewardModel`.
        natural: the natural sequences (`EncodedConversation`s or token ids).
        hooks: the hooks' names.
        batch_size: sequences per forward.

    Returns:
        `{hook: NaturalStates}`.

    Raises:
        TooFewExamplesError: fewer than 4 sequences.
    """
    seqs = [s.ids if isinstance(s, EncodedConversation) else tuple(s) for s in natural]
    if len(seqs) < 4:
        raise TooFewExamplesError(f"natural states need at least 4 sequences, got {len(seqs)}")
    acts: dict[str, list[list[Tensor]]] = {h: [[], []] for h in hooks}
    with torch.no_grad(), reading_position_known():  # every real token is read, not just -1
        for start in range(0, len(seqs), batch_size):
            ids, mask = pad_batch(seqs[start : start + batch_size], model.pad_token_id)
            ids, mask = ids.to(model.cfg.device), mask.to(model.cfg.device)
            _, cache = model.run_with_cache(ids, attention_mask=mask, names_filter=list(hooks))
            for h in hooks:
                for i in range(ids.shape[0]):
                    half = (start + i) % 2
                    acts[h][half].append(cache[h][i][mask[i].bool()].float().cpu())
    out = {}
    for h in hooks:
        fit, cal = torch.cat(acts[h][0]), torch.cat(acts[h][1])
        mean, cov, s = shrinkage_covariance(fit)
        precision = torch.linalg.inv(cov)
        partial = NaturalStates(h, mean, precision, s, np.zeros(1))
        calib = np.sort(partial.distance(cal).numpy())
        out[h] = NaturalStates(h, mean, precision, s, calib)
    return out


@dataclass(frozen=True)
class DivergenceResult(Result):
    """A patching sweep with, per cell, the patched state's distance from natural states.

    Args:
        patch: the patching sweep.
        distance: grid-shaped Mahalanobis distances.
        percentile: grid-shaped percentiles (0-100).
        ood_percentile: the percentile from which a cell is out of distribution.
        shrinkage: `{hook: shrinkage}` of the covariances.
    """

    patch: PatchResult
    distance: Tensor  # grid-shaped
    percentile: Tensor  # grid-shaped, 0-100
    ood_percentile: float
    shrinkage: dict

    @property
    def ood(self) -> Tensor:
        """Grid-shaped: the cell's patched state is out of distribution."""
        return self.percentile >= self.ood_percentile

    def ood_share(self) -> float:
        """The share of cells whose patched state is out of distribution."""
        return float(self.ood.float().mean())

    def in_distribution_values(self) -> Tensor:
        """The patch values with out-of-distribution cells set to `nan`."""
        return torch.where(self.ood, torch.nan, self.patch.values)

    def top_k(self, k: int = 10, include_ood: bool = False) -> TopK:
        """Cells by |effect| (shown), by default only in-distribution ones.

        Args:
            k: how many cells.
            include_ood: keep the out-of-distribution cells too.

        Returns:
            The `TopK` of cells.
        """
        labels, eff = self.patch.labels(), self.patch.effects()
        keep = torch.ones_like(eff, dtype=torch.bool) if include_ood else ~self.ood.reshape(-1)
        kept = [i for i in range(len(labels)) if keep[i]]
        return top_entries([labels[i] for i in kept], [float(eff[i]) for i in kept], k, "effect")

    def to_dataframe(self):
        """The patching frame with `distance`, `percentile` and `ood` columns."""
        frame = self.patch.to_dataframe()
        frame["distance"] = self.distance.reshape(-1).numpy()
        frame["percentile"] = self.percentile.reshape(-1).numpy()
        frame["ood"] = self.ood.reshape(-1).numpy()
        return frame

    @pasted_docs(plot=PLOT_DOC)
    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """The patching heat map (`PatchResult.plot`) with out-of-distribution cells marked ×.

        A cell is out of distribution when its percentile is ≥ `ood_percentile`. Hover on a
        cell shows its value, the patched state's Mahalanobis distance and its percentile
        among held-out natural states.

        {plot}
        """
        fig = self.patch.figure()
        heat = fig.data[0]
        distance, percentile, ood = (
            self._matrix(t).numpy() for t in (self.distance, self.percentile, self.ood.float())
        )
        labels = np.asarray(heat.customdata, dtype=object)
        heat.customdata = np.dstack([labels, distance, percentile])
        heat.hovertemplate = heat.hovertemplate.replace(
            "<extra></extra>",
            "<br>distance: %{customdata[2]:.4g}<br>percentile: %{customdata[3]:.1f}<extra></extra>",
        )
        rows, cols = np.nonzero(ood > 0)
        marks = scatter({"out of distribution": (cols, rows)}).data[0]
        marks.update(
            marker=dict(symbol="x", color="black", size=8, opacity=1.0),
            hoverinfo="skip",  # the cell's hover shows its percentile
            showlegend=False,
        )
        fig.add_trace(marks)
        title = f"{fig.layout.title.text} · × out of distribution: {self.ood_share():.0%} of cells"
        # a title never wraps: widen the figure to hold it
        fig.update_layout(title_text=title, width=max(fig.layout.width, int(7.5 * len(title)) + 40))
        return render(fig, backend, ax)

    def _matrix(self, grid_values: Tensor) -> Tensor:
        """A grid-shaped tensor laid out as the heat map (`PatchResult.matrix`)."""
        return dataclasses.replace(self.patch, values=grid_values).matrix()[0]


def _patched_states(model, plan, cache, values: dict[int, Tensor], layer: int) -> Tensor:
    """`[n_aligned, d]` (or `[n_aligned, head, d]` for `z`) residuals after the patch."""
    tpos = plan.alignment.target
    site = plan.site
    v = values[layer].float()
    if site in ("resid_pre", "resid_mid", "resid_post"):
        return v
    after = gather_aligned(cache[f"blocks.{layer}.{AFTER_HOOK[site]}"], tpos).float()
    own = gather_aligned(cache[plan.hook(layer)], tpos).float()
    if site in ("attn_out", "mlp_out"):
        return after - own + v
    W_O = model.blocks[layer].attn.W_O.detach().float()  # [head, d_head, d_model]
    return after[:, None] + torch.einsum("phe,hed->phd", v - own, W_O)


def divergence_aware_patching(
    model,
    clean,
    corrupted=None,
    *,
    natural: Sequence,
    site: str = "resid_pre",
    mode: str = "denoising",
    ood_percentile: float = 99.0,
    reference=None,
    mean_over: str = "token",
    objective=None,
    **kwargs,
) -> DivergenceResult:
    """`reward_lens_tl.patching.activation_patching` plus each patched state's divergence.

    Per cell, it measures how far the patched state lies from `natural` states (module
    docstring).

    Args:
        model: the `HookedRewardModel`.
        clean: the clean input.
        corrupted: the corrupted input (none for ablations).
        natural: the natural sequences that define natural states.
        site: the patched site (one of `AFTER_HOOK`).
        mode: `"denoising"` or another mode of `activation_patching`.
        ood_percentile: the percentile from which a cell is out of distribution.
        reference: the reference of ablations.
        mean_over: what a mean ablation averages over.
        objective: picks a head column of a multi-objective model.
        **kwargs: go to `activation_patching` (alignment, positions, by_position, layers,
            heads, ...).

    Returns:
        The `DivergenceResult`.

    Raises:
        ProbeError: an unsupported site, `site='z'` on a post-norm architecture, or a sweep
            of several sites.

    Examples:
        Zero-ablating each MLP's output: which patched states no natural input produces?

        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> natural = [e.input_ids for e in load_task().task.examples(40, 11)]
        >>> enc = model.encode("how bake bread", "soup oven flour")
        >>> zeroed = divergence_aware_patching(
        ...     model, enc, natural=natural, site="mlp_out", mode="zero")
        >>> zeroed.to_dataframe()[["label", "ood"]].values.tolist()
        [['L0', True], ['L1', False], ['L2', False]]
    """
    if site not in AFTER_HOOK:
        raise ProbeError(f"divergence is measured for sites {tuple(AFTER_HOOK)}, not {site!r}")
    if site == "z" and model.cfg.use_normalization_before_and_after:
        raise ProbeError("site='z' on post-norm architectures: patch 'attn_out' instead")
    chunking: dict[str, Any] = {
        k: kwargs.pop(k) for k in ("chunk_size", "reuse_prefix") if k in kwargs
    }
    options = cast(
        PatchOptions,
        dict(mode=mode, reference=reference, mean_over=mean_over, objective=objective, **kwargs),
    )
    one_site = cast(Site, site)
    patch = activation_patching(model, clean, corrupted, site=one_site, **chunking, **options)
    if not isinstance(patch, PatchResult):  # one site (checked above): one grid
        raise ProbeError(f"divergence is measured for one site, got {type(patch).__name__}")
    plan = make_plan(model, clean, corrupted, one_site, options)
    layers = plan.grid.layers
    after_hooks = {layer: f"blocks.{layer}.{AFTER_HOOK[site]}" for layer in layers}
    names = list(dict.fromkeys([*after_hooks.values(), *(plan.hook(layer) for layer in layers)]))
    with torch.no_grad():
        _, cache = model.run_with_cache(plan.target.batch(), names_filter=names)
    values, _ = PatchRunner(model, {**options, "fwd_hooks": ()}).source_values(plan)
    nat = natural_states(model, natural, sorted(set(after_hooks.values())))
    dist_rows, pct_rows = [], []
    for layer in layers:
        states = _patched_states(model, plan, cache, values, layer)
        n = nat[after_hooks[layer]]
        dist = n.distance(states)  # [n_aligned] or [n_aligned, head]
        j, head = plan.grid.layer_cells()
        per = dist if dist.ndim == 2 else dist[:, None]
        h = head.clamp(min=0)
        cell = per.max(0).values[h] if not plan.grid.by_position else per[j, h]
        dist_rows.append(cell)
        pct_rows.append(n.percentile(cell))
    shape = plan.grid.shape
    return DivergenceResult(
        patch=patch,
        distance=torch.stack(dist_rows).reshape(shape).float(),
        percentile=torch.stack(pct_rows).reshape(shape).float(),
        ood_percentile=ood_percentile,
        shrinkage={h: nat[h].shrinkage for h in nat},
    )
