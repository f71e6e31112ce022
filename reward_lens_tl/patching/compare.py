"""How well do cheap estimates agree with real patching, and observation with causation?

- `agreement` compares an estimate (AtP, AtP*, direct attribution...) with a reference
  sweep over the same cells: Spearman rank correlation of the signed effects and of their
  magnitudes (`reward_lens_tl.stats.spearman`), and top-`k` recall (the share of the
  reference's `k` largest cells that the estimate also ranks in its top `k`).
- `atp_agreement` runs activation patching and AtP / AtP* on one pair and reports both.
- `compare_methods` does it for a set of preference pairs: per pair, the Spearman
  correlation between direct attribution of the margin, AtP, AtP* and activation patching over
  the same components, aggregated over pairs with bootstrap confidence intervals
  (`reward_lens_tl.stats.bootstrap_ci`, percentile method).

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.testing import tiny_reward_model, random_batch
    >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    >>> ids, _ = random_batch(2, [9, 9], low=6)
    >>> report = atp_agreement(model, ids[0], ids[1], site="z", alignment="exact", k=3)
    >>> [row.estimate for row in report.rows]
    ['atp', 'atp*']
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Unpack

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from ..attribution import direct_attribution
from ..errors import PatchingError
from ..inputs import EncodedConversation, as_encoded
from ..pair_batches import encoded_pair
from ..plotting import PLOT_DOC, Backend, render, scatter, side_by_side
from ..results import Result, TopK, top_entries
from ..signatures import checked_options, pasted_docs
from ..stats import bootstrap_ci, spearman
from .activation import activation_patching
from .alignment import PatchInput, as_run
from .atp import attribution_patching
from .grids import Site
from .metrics import reward_change
from .patch_results import PatchResult
from .plan import REQUEST_DOC, PatchOptions, RunOptions, options_doc

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from ..model import HookedRewardModel

__all__ = [
    "Agreement",
    "AgreementReport",
    "MethodComparison",
    "agreement",
    "atp_agreement",
    "compare_methods",
]


def top_k_recall(score: Tensor, reference_score: Tensor, k: int) -> float:
    """Share of the reference's top-`k` cells (by score) found in the estimate's top `k`."""
    k = min(k, score.numel())
    top = set(score.reshape(-1).argsort(descending=True)[:k].tolist())
    ref = set(reference_score.reshape(-1).argsort(descending=True)[:k].tolist())
    return len(top & ref) / k if k else math.nan


@dataclass(frozen=True)
class Agreement:
    """Agreement of one estimate with a reference over `n_cells` cells.

    Built by `agreement`; `AgreementReport.rows` holds one per estimate.

    Attributes:
        estimate: the estimate's method (`PatchResult.method`), e.g. `"atp*"`.
        reference: the reference's method, e.g. `"activation"`.
        spearman: the Spearman correlation of the signed effects.
        spearman_abs: the Spearman correlation of the magnitudes (the estimate's GradDrop
            `magnitude` when it has one).
        top_k_recall: the share of the reference's `k` largest cells (by |effect|) that
            the estimate ranks in its top `k`.
        k: the `k` of the recall (at most `n_cells`).
        n_cells: the number of cells compared.
        top1_rank: where the reference's largest cell ranks in the estimate (1 = first).

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching import activation_patching, agreement, attribution_patching
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> clean = model.encode("explain how to bake bread", "the oven and the flour")
        >>> corrupted = model.encode("explain how to bake bread", "the oven and the bomb")
        >>> patched = activation_patching(model, clean, corrupted, site="mlp_out")
        >>> estimate = attribution_patching(model, clean, corrupted, site="mlp_out")
        >>> row = agreement(estimate, patched, k=1)
        >>> row.estimate, row.reference, row.n_cells, row.top_k_recall, row.top1_rank
        ('atp', 'activation', 3, 1.0, 1)
        >>> round(row.spearman, 2), round(row.spearman_abs, 2)   # right ranking, a sign wrong
        (-0.5, 1.0)
    """

    estimate: str
    reference: str
    spearman: float
    spearman_abs: float
    top_k_recall: float
    k: int
    n_cells: int
    top1_rank: int  # where the reference's largest cell ranks in the estimate (1 = first)


def agreement(estimate: PatchResult, reference: PatchResult, k: int = 10) -> Agreement:
    """Compare two sweeps of the same grid on their effects `values - baseline`.

    The magnitude ranking uses GradDrop's `magnitude` when the estimate has one.

    Args:
        estimate: the estimated sweep (AtP, AtP*, ...).
        reference: the reference sweep (activation patching).
        k: the top-`k` recall's `k`.

    Returns:
        The rank correlations, top-`k` recall and top-1 rank of the estimate.

    Raises:
        PatchingError: if the two sweeps have different sites or shapes.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching import activation_patching, agreement, atp_star
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> clean = model.encode("explain how to bake bread", "the oven and the flour")
        >>> corrupted = model.encode("explain how to bake bread", "the oven and the bomb")
        >>> patched = activation_patching(model, clean, corrupted, site="mlp_out")
        >>> star = atp_star(model, clean, corrupted, site="mlp_out")
        >>> row = agreement(star, patched, k=1)
        >>> row.estimate, round(row.spearman, 2), row.top_k_recall
        ('atp*', 1.0, 1.0)
    """
    if estimate.shape != reference.shape or estimate.site != reference.site:
        raise PatchingError(
            f"cannot compare a {estimate.site} grid {estimate.shape} with a {reference.site} "
            f"grid {reference.shape}; run both with the same site, layers, heads and alignment"
        )
    est, ref = estimate.effects(), reference.effects()
    return Agreement(
        estimate=estimate.method,
        reference=reference.method,
        spearman=spearman(est, ref),
        spearman_abs=spearman(estimate.ranking_score(), ref.abs()),
        top_k_recall=top_k_recall(estimate.ranking_score(), ref.abs(), k),
        k=min(k, ref.numel()),
        n_cells=ref.numel(),
        top1_rank=top1_rank(estimate.ranking_score(), ref.abs()),
    )


def top1_rank(score: Tensor, reference_score: Tensor) -> int:
    """Rank (1 = first) of the reference's largest cell in the estimate's ordering.

    A top-k recall can look fine while the single most important cell is ranked low.
    """
    score = score.reshape(-1)
    best = int(reference_score.reshape(-1).argmax())
    return 1 + int((score > score[best]).sum())  # ties share the better rank


@dataclass(frozen=True)
class AgreementReport(Result):
    """Activation patching of one grid, the estimates of the same grid and their agreement.

    Built by `atp_agreement`. Its `top_k` ranks the estimates by `|spearman|`.

    Attributes:
        reference: the activation-patching sweep.
        estimates: the estimated sweeps of the same grid, one per method asked.
        rows: the `Agreement` of each estimate with `reference`, in the same order.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching import atp_agreement
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> clean = model.encode("explain how to bake bread", "the oven and the flour")
        >>> corrupted = model.encode("explain how to bake bread", "the oven and the bomb")
        >>> report = atp_agreement(model, clean, corrupted, site="mlp_out", k=1)
        >>> report.reference.method, [e.method for e in report.estimates]
        ('activation', ['atp', 'atp*'])
        >>> report.to_dataframe()[["estimate", "spearman", "spearman_abs"]].round(2)
          estimate  spearman  spearman_abs
        0      atp      -0.5           1.0
        1     atp*       1.0           1.0
    """

    label_column, value_column = "estimate", "spearman"

    reference: PatchResult
    estimates: tuple[PatchResult, ...]
    rows: tuple[Agreement, ...]

    def to_dataframe(self):
        """One row per estimate: the fields of its `Agreement`."""
        import pandas as pd

        return pd.DataFrame([row.__dict__ for row in self.rows])

    @pasted_docs(plot=PLOT_DOC)
    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """Each estimate's effects against the patched effects, with the line y = x.

        One colour per estimate (its Spearman ρ in the legend); hover shows the cell and
        both exact effects. Points on the line are estimated exactly.

        {plot}
        """
        ref = self.reference.effects()
        cells = list(self.reference.labels())
        series = {
            f"{row.estimate} (ρ = {row.spearman:.3g})": (ref, est.effects())
            for est, row in zip(self.estimates, self.rows, strict=True)
        }
        fig = scatter(
            series,
            xaxis=f"activation patching effect ({self.reference.metric_name})",
            yaxis="estimated effect",
            title=f"estimates vs activation patching: {self.reference.site}, {len(cells)} cells",
            labels={name: cells for name in series},
            diagonal=True,
            width=700,
        )
        fig.update_layout(showlegend=True)
        return render(fig, backend, ax)


#: The first-order estimates `atp_agreement` can run: AtP, AtP with the QK fix, AtP*.
Estimate = Literal["atp", "atp+qk", "atp*"]


@checked_options(PatchOptions)
@pasted_docs(request=REQUEST_DOC)
def atp_agreement(
    model: HookedRewardModel,
    clean: PatchInput,
    corrupted: PatchInput | None = None,
    *,
    site: Site = "resid_pre",
    k: int = 10,
    methods: Sequence[Estimate] = ("atp", "atp*"),
    chunk_size: int = 16,
    **options: Unpack[PatchOptions],
) -> AgreementReport:
    """Activation patching and estimates of the same grid, with their `agreement`.

    The estimates are AtP (`"atp"`), AtP with the QK fix (`"atp+qk"`) and/or AtP*
    (`"atp*"`).

    Args:
        {request}
        k: the top-`k` recall's `k`.
        methods: the estimates to run, among `"atp"`, `"atp+qk"` and `"atp*"`.
        chunk_size: activation patching's variants per forward pass.

    Returns:
        The patched sweep, the estimates and one `Agreement` per estimate.

    Raises:
        PatchingError: if a method is unknown, the request is invalid, or it names several
            sites.
        UnknownKeywordError: for a keyword the function does not take (a `TypeError`).

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching import atp_agreement
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> clean = model.encode("explain how to bake bread", "the oven and the flour")
        >>> corrupted = model.encode("explain how to bake bread", "the oven and the bomb")
        >>> report = atp_agreement(model, clean, corrupted, site="mlp_out", k=1)
        >>> [(row.estimate, round(row.spearman, 2), row.top1_rank) for row in report.rows]
        [('atp', -0.5, 1), ('atp*', 1.0, 1)]
    """
    flags = {"atp": (False, False), "atp+qk": (True, False), "atp*": (True, True)}
    unknown = set(methods) - set(flags)
    if unknown:
        raise PatchingError(f"unknown methods {sorted(unknown)}; choose from {sorted(flags)}")
    patched = activation_patching(
        model, clean, corrupted, site=site, chunk_size=chunk_size, **options
    )
    if not isinstance(patched, PatchResult):
        raise PatchingError(f"atp_agreement compares one site's grid, not {site!r}")
    estimates = tuple(
        attribution_patching(
            model, clean, corrupted, site=site, qk_fix=flags[m][0], graddrop=flags[m][1], **options
        )
        for m in methods
    )
    rows = tuple(agreement(e, patched, k) for e in estimates)
    return AgreementReport(patched, estimates, rows)


# -- observational vs causal, over pairs ------------------------------------------------------
#: The methods `compare_methods` can compare.
Method = Literal["direct", "atp", "atp+qk", "atp*", "patching"]
METHODS: tuple[Method, ...] = ("direct", "atp", "atp*", "patching")


def pair_inputs(model, pair):
    """`(chosen, rejected)` of a pair.

    The pair is a pair object (`prompt`/`chosen`/`rejected` text), a zoo contrast pair (`edited`
    plays chosen), a tuple of encoded conversations, ids or zoo examples.
    """
    if hasattr(pair, "edited") and hasattr(pair, "base"):
        pair = (pair.edited, pair.base)
    if isinstance(pair, (tuple, list)) and len(pair) == 2:
        pair = tuple(_as_encoded(p) for p in pair)
        if all(isinstance(p, (EncodedConversation, Tensor, list, tuple)) for p in pair):
            return pair[0], pair[1]
    return encoded_pair(model, pair)


def _as_encoded(x):
    """A zoo example as an `EncodedConversation`; anything else unchanged."""
    if hasattr(x, "input_ids") and hasattr(x, "response_start"):
        return as_encoded(x)
    return x


def component_labels(model, components: str = "heads") -> tuple[str, ...]:
    """`L{l}H{h}` for every head of a layer, then `mlp{l}`.

    These are the labels of `direct_attribution`.

    Raises:
        PatchingError: if `components` is not `"heads"`.
    """
    if components != "heads":
        raise PatchingError(f"component labels are fixed only for 'heads', not {components!r}")
    n_heads = model.cfg.n_heads
    return tuple(
        label
        for layer in range(model.cfg.n_layers)
        for label in [*(f"L{layer}H{h}" for h in range(n_heads)), f"mlp{layer}"]
    )


def _heads_and_mlps(model, result_heads: PatchResult, result_mlps: PatchResult) -> Tensor:
    """`[layer, head]` and `[layer]` effects → one vector in `component_labels` order.

    The order is the heads of a layer, then its MLP.
    """
    heads = result_heads.effects().reshape(model.cfg.n_layers, -1)
    mlps = result_mlps.effects().reshape(model.cfg.n_layers, 1)
    return torch.cat([heads, mlps], 1).reshape(-1)


def pair_values(model, chosen, rejected, components, methods, options: RunOptions, chunk_size):
    """Per method, the vector of effects of one pair over the components, and their labels."""
    out: dict[str, Tensor] = {}
    labels = component_labels(model, "heads") if components == "heads" else ()
    fwd_hooks: list[Any] = list(options.get("fwd_hooks", ()))
    if components != "heads" and "direct" in methods:
        raise PatchingError(
            "direct attribution has no per-position residual counterpart; use "
            "components='heads' or drop 'direct' from methods"
        )
    common: PatchOptions = {**options, "fwd_hooks": fwd_hooks, "mode": "denoising"}
    if any(method != "direct" for method in methods):  # one baseline forward for every method
        common["metric"] = _margin_metric(model, rejected, fwd_hooks)
    if components == "heads":
        if "direct" in methods:
            ids_c, ids_r = (_ids(model, x) for x in (chosen, rejected))
            margin = direct_attribution(model, ids_c, fwd_hooks=fwd_hooks) - direct_attribution(
                model, ids_r, fwd_hooks=fwd_hooks
            )
            out["direct"] = torch.stack([margin[label] for label in labels])[:, 0]
        for method in methods:
            if method == "direct":
                continue
            parts = []
            for site in ("z", "mlp_out"):
                parts.append(
                    _run_method(model, method, chosen, rejected, site, False, chunk_size, common)
                )
            out[method] = _heads_and_mlps(model, *parts)
    else:  # resid
        for method in methods:
            r = _run_method(model, method, chosen, rejected, "resid_pre", True, chunk_size, common)
            out[method], labels = r.effects(), r.labels()
    return out, labels


def _ids(model, x) -> Tensor:
    ids = list(x.ids) if isinstance(x, EncodedConversation) else x
    return torch.as_tensor(ids, dtype=torch.long, device=model.cfg.device).reshape(1, -1)


def _run_method(
    model, method, chosen, rejected, site, by_position, chunk_size, common: PatchOptions
) -> PatchResult:
    kw: PatchOptions = {**common, "by_position": by_position}
    if method == "patching":
        return activation_patching(model, chosen, rejected, site=site, chunk_size=chunk_size, **kw)
    qk, gd = {"atp": (False, False), "atp+qk": (True, False), "atp*": (True, True)}[method]
    return attribution_patching(model, chosen, rejected, site=site, qk_fix=qk, graddrop=gd, **kw)


def _margin_metric(model, rejected, fwd_hooks):
    """`r - r(rejected)`: the reward change in reward units.

    It is comparable to the direct attribution of the margin.
    """
    run = as_run(model, rejected)
    with torch.no_grad(), model.hooks(fwd_hooks=list(fwd_hooks)):
        base = float(model.pooled_rewards(run.batch())[0])
    return reward_change(base)


@dataclass(frozen=True)
class MethodComparison(Result):
    """Per-pair effects of several methods over the same components, and their agreement.

    `values[method][pair]` is a vector over `labels[pair]` (heads and MLPs: the same
    labels for every pair; residual positions: per pair). `rho[pair, m]` is the Spearman
    correlation of `method_pairs[m]`; `summary` aggregates over pairs.

    Attributes:
        methods: the methods compared, in the order asked.
        labels: per pair, the labels of its components (`L0H1`, `mlp0`, or `resid_pre`
            cells such as `L1 end-3`).
        values: per method, one vector of effects per pair.
        method_pairs: every pair of methods, in the order of `rho`'s columns.
        rho: the Spearman correlation per pair and method pair, `[pair, method_pair]`.
        confidence_level: the confidence level of `summary`'s bootstrap intervals.
        n_resamples: the resamples of that bootstrap.
        seed: the seed of that bootstrap.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching import compare_methods
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> pairs = load_task().task.contrast_pairs("harmful", 2, seed=0)
        >>> found = compare_methods(model, pairs, methods=("direct", "patching"), n_resamples=200)
        >>> found.method_pairs, tuple(found.rho.shape), found.labels[0][:5]
        ((('direct', 'patching'),), (2, 1), ('L0H0', 'L0H1', 'L0H2', 'L0H3', 'mlp0'))
        >>> [(label, round(v, 2)) for label, v in found.top_k(2)]   # mean patching effect
        [('mlp0', -1.5), ('L0H1', -1.0)]
        >>> [(label, round(v, 2)) for label, v in found.top_k(2, method="direct")]
        [('L0H1', -0.98), ('L2H3', -0.89)]
    """

    methods: tuple[str, ...]
    labels: tuple[tuple[str, ...], ...]
    values: dict[str, tuple[Tensor, ...]]
    method_pairs: tuple[tuple[str, str], ...]
    rho: Float[Tensor, "pair method_pair"]
    confidence_level: float
    n_resamples: int
    seed: int

    def summary(self):
        """Mean Spearman over pairs per method pair, with a bootstrap confidence interval.

        The interval is that of the mean (pairs with an undefined correlation, e.g. a constant
        vector, are left out and counted in `n_pairs`).
        """
        import pandas as pd

        rows = []
        for m, (a, b) in enumerate(self.method_pairs):
            r = self.rho[:, m].numpy()
            r = r[np.isfinite(r)]
            lo = hi = math.nan
            if r.size:
                _, lo, hi = bootstrap_ci(
                    r, n_boot=self.n_resamples, confidence=self.confidence_level, seed=self.seed
                )
            rows.append(
                dict(
                    method_a=a,
                    method_b=b,
                    mean_spearman=float(r.mean()) if r.size else math.nan,
                    ci_low=lo,
                    ci_high=hi,
                    n_pairs=int(r.size),
                )
            )
        return pd.DataFrame(rows)

    def to_dataframe(self):
        """One row per (pair, component, method).

        The columns are `pair`, `component`, `method` and `effect`.
        """
        import pandas as pd

        rows = []
        for method in self.methods:
            for i, vec in enumerate(self.values[method]):
                for label, v in zip(self.labels[i], vec.tolist(), strict=True):
                    rows.append(dict(pair=i, component=label, method=method, effect=v))
        return pd.DataFrame(rows)

    def top_k(self, k: int = 10, method: str | None = None) -> TopK:
        """Components with the largest |mean effect| over pairs under `method`.

        Args:
            k: how many components to keep.
            method: the method whose effects rank them (default: activation patching when
                compared, else the first method).

        Returns:
            The top `k` components and their mean effects.
        """
        method = method or ("patching" if "patching" in self.methods else self.methods[0])
        frame = self.to_dataframe()
        mean = frame[frame["method"] == method].groupby("component", sort=False)["effect"].mean()
        return top_entries(mean.index.tolist(), mean.tolist(), k, f"mean {method} effect")

    def plot(
        self,
        ax: Axes | None = None,
        reference: str = "patching",
        *,
        backend: Backend | None = None,
    ) -> Any:
        """Every other method's effects against `reference`'s, all pairs pooled, with y = x.

        There is one panel per method, titled with its mean Spearman ρ over pairs; hover
        shows the pair, the component and both exact effects.

        Args:
            ax: Matplotlib axes; only when there is one other method (one panel).
            reference: The method on the x axis.
            backend: `"plotly"` or `"matplotlib"` (see `reward_lens_tl.plotting`).

        Returns:
            The figure (not shown).
        """
        others = [m for m in self.methods if m != reference]
        x = torch.cat(self.values[reference])
        cells = [f"pair {i} {label}" for i, labels in enumerate(self.labels) for label in labels]
        panels = []
        for method in others:
            m = self.method_pairs.index(_ordered(self.methods, method, reference))
            panel = scatter(
                {method: (x, torch.cat(self.values[method]))},
                xaxis=f"{reference} effect",
                yaxis=f"{method} effect",
                title=f"{method}: mean ρ = {float(np.nanmean(self.rho[:, m].numpy())):.3g}",
                labels={method: cells},
                diagonal=True,
            )
            panel.add_hline(y=0, line=dict(color="#bbbbbb", width=1))
            panel.add_vline(x=0, line=dict(color="#bbbbbb", width=1))
            panels.append(panel)
        n = len(self.labels)
        title = f"effects per component vs {reference}, {n} pair{'s' * (n != 1)} pooled"
        if len(panels) == 1:
            panels[0].update_layout(title_text=f"{panels[0].layout.title.text} ({title})")
            fig = panels[0]
        else:
            fig = side_by_side(panels, title=title)
        return render(fig, backend, ax)


def _ordered(methods, a, b):
    return (a, b) if methods.index(a) < methods.index(b) else (b, a)


@checked_options(RunOptions)
@pasted_docs(run_options=options_doc(*RunOptions.__annotations__))
def compare_methods(
    model: HookedRewardModel,
    pairs: Sequence,
    *,
    components: Literal["heads", "resid"] = "heads",
    methods: Sequence[Method] = METHODS,
    confidence_level: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    chunk_size: int = 16,
    **options: Unpack[RunOptions],
) -> MethodComparison:
    """Observational vs causal on a set of pairs (see the module docstring).

    `components="heads"`: every head (all aligned positions) and every MLP, with `direct`
    = direct attribution of the margin (chosen − rejected) and the causal methods denoising the
    rejected run with the chosen run's activations, scored as the reward change
    `r - r(rejected)`. `"resid"`: `resid_pre` per layer and aligned position (no
    `direct`). `components` picks one of the two.

    Args:
        model: the `HookedRewardModel`.
        pairs: objects with `prompt`/`chosen`/`rejected` (encoded with the model's
            tokenizer), zoo contrast pairs (`edited` plays chosen) or `(chosen, rejected)`
            zoo examples, `(chosen, rejected)` `EncodedConversation` tuples,
            `(chosen_ids, rejected_ids)` tuples of 1-D ids, or one
            `(chosen_ids, rejected_ids)` tuple of padded `[n_pairs, pos]` batches (left or
            right padded: each row's padding is stripped).
        components: `"heads"` or `"resid"` (see above).
        methods: at least two of `direct`, `atp`, `atp+qk`, `atp*`, `patching`.
        confidence_level: the confidence level of the bootstrap of
            `MethodComparison.summary`.
        n_resamples: the resamples of that bootstrap.
        seed: the seed of that bootstrap.
        chunk_size: activation patching's variants per forward pass.
        {run_options}

    Returns:
        The per-pair effects of every method and their agreement.

    Raises:
        PatchingError: if `methods` or `components` is invalid, or `pairs` is empty.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching import compare_methods
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> pairs = load_task().task.contrast_pairs("harmful", 2, seed=0)
        >>> found = compare_methods(
        ...     model, pairs, methods=("direct", "atp", "patching"), n_resamples=200)
        >>> found.summary()[["method_a", "method_b", "mean_spearman", "n_pairs"]].round(2)
          method_a  method_b  mean_spearman  n_pairs
        0   direct       atp           0.92        2
        1   direct  patching           0.74        2
        2      atp  patching           0.86        2
    """
    methods = tuple(methods)
    if (
        isinstance(pairs, tuple)
        and len(pairs) == 2
        and all(isinstance(p, Tensor) and p.ndim == 2 for p in pairs)
    ):  # (chosen_ids, rejected_ids) batches, one pair per row (as_run strips the padding)
        pairs = list(zip(pairs[0], pairs[1], strict=True))
    allowed = ("direct", "atp", "atp+qk", "atp*", "patching")
    if set(methods) - set(allowed) or len(methods) < 2:
        raise PatchingError(f"methods must be at least two of {allowed}; got {methods}")
    if components not in ("heads", "resid"):
        raise PatchingError("components must be 'heads' (heads and MLPs) or 'resid'")
    values: dict[str, list[Tensor]] = {m: [] for m in methods}
    labels = []
    for pair in pairs:
        chosen, rejected = pair_inputs(model, pair)
        vals, pair_labels = pair_values(
            model, chosen, rejected, components, methods, options, chunk_size
        )
        for m in methods:
            values[m].append(vals[m].detach().float().cpu())
        labels.append(tuple(pair_labels))
    if not labels:
        raise PatchingError("no pairs given")
    method_pairs = tuple(itertools.combinations(methods, 2))
    rho = torch.tensor(
        [
            [spearman(values[a][i], values[b][i]) for a, b in method_pairs]
            for i in range(len(labels))
        ]
    )
    return MethodComparison(
        methods=methods,
        labels=tuple(labels),
        values={m: tuple(v) for m, v in values.items()},
        method_pairs=method_pairs,
        rho=rho,
        confidence_level=confidence_level,
        n_resamples=n_resamples,
        seed=seed,
    )
