"""Cross-model comparison on one pair set: where do reward models disagree, and how deep.

`compare_models` runs every model **once** over the pairs (streamed in chunks; see
`reward_lens_tl.crossmodel.sources.run_on_pairs`) and keeps per-pair rewards, lens margins,
margin attributions and, for up to `max_rep_pairs` pairs, residual representations. Every
metric of `ModelComparison` is then computed from those cached runs, for any two models:

- reward correlation (Pearson over all responses), pairwise agreement (same preferred response)
  and margin rank correlation (Spearman), each with a bootstrap CI over pairs;
- the disagreement list: pairs the two order differently, ranked by the difference of their
  margins in each model's own margin standard deviations;
- lens trajectories side by side (relative depth) and crystallization depth with CIs;
- attribution rank correlation over matching components (same backbone only, else
  `reward_lens_tl.errors.BackboneMismatchError`);
- linear CKA between residual representations for every layer pair;
- Kendall τ-b between token sweeps, when sweeps are given.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.zoo import load_task, zoo_path
    >>> scalar = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    >>> pairs = load_task().task.contrast_pairs("harmful", 12, seed=0)
    >>> cmp = compare_models({"a": scalar, "b": scalar}, pairs, n_boot=100)
    >>> row = cmp.agreement().iloc[0]
    >>> float(row["pairwise_agreement"]), round(float(row["margin_spearman"]), 6)
    (1.0, 1.0)
    >>> round(float(cmp.cka("a", "b")[-1, -1]), 6)
    1.0
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from ..errors import BackboneMismatchError, InvalidArgumentError, UnknownModelError
from ..plotting import PALETTE, PLOT_DOC, Backend, imshow, line, render
from ..results import Result, TopK, ranked
from ..signatures import pasted_docs
from ..stats import Interval, bootstrap_ci, pearson, spearman
from .similarity import crystallization_depth, linear_cka, sweep_tau
from .sources import SourceRun, as_source, check_shared_tokenizer, run_on_pairs

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["ModelComparison", "compare_models"]


@dataclass(frozen=True)
class ModelComparison(Result):
    """Cached runs of several reward-like models on one pair set, and the metrics between them.

    `sweeps` (optional) maps model names to token-sweep results (anything with per-candidate
    scores, e.g. a pandas Series keyed by candidate).

    Args:
        runs: model name -> its cached run.
        n_boot: bootstrap resamples of every CI.
        seed: the bootstrap's seed.
        sweeps: model name -> its token-sweep result.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.crossmodel import compare_models
        >>> from reward_lens_tl.implicit import ImplicitRewardModel
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> scalar = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> irm = ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))
        >>> pairs = load_task().task.contrast_pairs("topic_match", 8, seed=0)  # edited: chosen
        >>> cmp = compare_models({"scalar": scalar, "implicit": irm}, pairs, n_boot=100)
        >>> cmp.names, cmp.n_pairs
        (('scalar', 'implicit'), 8)
        >>> cmp.accuracy().round(3)  # share of pairs whose chosen response each prefers
              model  accuracy  ci_low  ci_high
        0    scalar      1.00   1.000      1.0
        1  implicit      0.75   0.309      1.0
        >>> table = cmp.disagreements("scalar", "implicit")  # the pairs they order differently
        >>> table[["pair", "margin_scalar", "margin_implicit"]].round(3)
           pair  margin_scalar  margin_implicit
        0     3          2.016           -0.048
        1     6          2.009           -0.026
        >>> cmp.crystallization()[["model", "n_sites", "depth"]].round(3)  # relative lens depth
              model  n_sites  depth
        0    scalar        4  1.000
        1  implicit        3  0.562
    """

    runs: dict[str, SourceRun]
    n_boot: int = 1000
    seed: int = 0
    sweeps: Mapping[str, Any] | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """The models' names."""
        return tuple(self.runs)

    @property
    def n_pairs(self) -> int:
        """How many pairs the models ran on."""
        return len(next(iter(self.runs.values())).chosen)

    def run(self, name: str) -> SourceRun:
        """The cached run of model `name`.

        Args:
            name: a model's name.

        Returns:
            The run.

        Raises:
            UnknownModelError: no model has that name.
        """
        if name not in self.runs:
            raise UnknownModelError(f"unknown model {name!r}; this comparison has {self.names}")
        return self.runs[name]

    def _ci(self, values: np.ndarray) -> Interval:
        """The mean of `values` with this comparison's seeded bootstrap CI."""
        return bootstrap_ci(values, n_boot=self.n_boot, seed=self.seed)

    def _pairs_of_models(self, a: str | None, b: str | None) -> list[tuple[str, str]]:
        if a is not None and b is not None:
            self.run(a), self.run(b)
            return [(a, b)]
        return list(combinations(self.names, 2))

    # -- rewards --------------------------------------------------------------------------
    def accuracy(self):
        """Per model: share of pairs whose chosen response it prefers, with a bootstrap CI.

        Returns:
            A `pandas.DataFrame`, one row per model.
        """
        import pandas as pd

        rows = []
        for name, run in self.runs.items():
            prefers = (run.margins.numpy() > 0).astype(float)
            est, lo, hi = self._ci(prefers)
            rows.append({"model": name, "accuracy": est, "ci_low": lo, "ci_high": hi})
        return pd.DataFrame(rows)

    def agreement(self, a: str | None = None, b: str | None = None):
        """Per model pair: reward Pearson r, pairwise agreement, margin Spearman ρ, with CIs.

        Args:
            a: the first model's name (default: every pair of models).
            b: the second model's name.

        Returns:
            A `pandas.DataFrame`, one row per model pair.
        """
        import pandas as pd

        rows = [
            {
                "model_a": x,
                "model_b": y,
                **_agreement(self.run(x), self.run(y), self.n_boot, self.seed),
            }
            for x, y in self._pairs_of_models(a, b)
        ]
        return pd.DataFrame(rows)

    def disagreements(self, a: str, b: str, k: int | None = None):
        """Pairs that `a` and `b` order differently, ranked by `|z_a − z_b|`.

        `z` is each model's margin divided by its margin std over the pair set.

        Args:
            a: the first model's name.
            b: the second model's name.
            k: how many pairs (`None`: all).

        Returns:
            A `pandas.DataFrame`, one row per pair.
        """
        import pandas as pd

        ma, mb = self.run(a).margins, self.run(b).margins
        za = ma / ma.std().clamp_min(1e-12)
        zb = mb / mb.std().clamp_min(1e-12)
        differ = torch.sign(ma) != torch.sign(mb)
        idx = differ.nonzero().flatten()
        frame = pd.DataFrame(
            {
                "pair": idx.numpy(),
                f"margin_{a}": ma[idx].numpy(),
                f"margin_{b}": mb[idx].numpy(),
                f"z_{a}": za[idx].numpy(),
                f"z_{b}": zb[idx].numpy(),
                "difference": (za[idx] - zb[idx]).abs().numpy(),
            }
        )
        frame = frame.sort_values("difference", ascending=False, ignore_index=True)
        return frame if k is None else frame.head(k)

    def top_k(self, k: int = 10, a: str | None = None, b: str | None = None) -> TopK:
        """The `k` pairs on which `a` and `b` (default: the first two) disagree most.

        Args:
            k: how many pairs.
            a: the first model's name.
            b: the second model's name.

        Returns:
            `[(pair, |z-scored margin difference|)]`, largest first (the full rows:
            `disagreements`).
        """
        a = a or self.names[0]
        b = b or self.names[1]
        frame = self.disagreements(a, b, k)
        return ranked(
            zip(frame.iloc[:, 0].astype(str), frame["difference"], strict=True), "difference"
        )

    # -- lens -----------------------------------------------------------------------------
    def crystallization(self, fraction: float = 0.5):
        """Per model: mean relative depth at which the lens margin first reaches `fraction`.

        Depth is relative (0 = first site, 1 = final), `fraction` is of the final margin, and
        each mean has a bootstrap CI over pairs.

        Args:
            fraction: the share of the final margin.

        Returns:
            A `pandas.DataFrame`, one row per model.
        """
        import pandas as pd

        rows = []
        for name, run in self.runs.items():
            depth = crystallization_depth(run.lens_margins, fraction)
            ok = depth[np.isfinite(depth)]
            est, lo, hi = self._ci(ok)
            rows.append(
                {
                    "model": name,
                    "n_sites": len(run.lens_labels),
                    "depth": est,
                    "ci_low": lo,
                    "ci_high": hi,
                }
            )
        return pd.DataFrame(rows)

    def plot_lens(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """Mean lens margin per relative depth for each model, side by side on one axis.

        Margins are in units of the model's final margin std (shaded: ± one standard error);
        depth is relative (0: the first site, 1: the final residual), so models of different
        depths share the axis. Hover shows each point's site and exact margin.

        Args:
            ax: Matplotlib axes to draw the static form on.
            backend: `"plotly"` or `"matplotlib"` (see `reward_lens_tl.plotting`).

        Returns:
            The figure (not shown).
        """
        panels = []
        for i, (name, run) in enumerate(self.runs.items()):
            m = run.lens_margins / run.lens_margins[-1].std().clamp_min(1e-12)
            mean = m.mean(1).numpy()
            se = (m.std(1) / max(m.shape[1], 1) ** 0.5).numpy()
            one = line(
                {name: mean},
                x=np.linspace(0, 1, m.shape[0]).tolist(),
                bands={name: (mean - se, mean + se)},
                xaxis="relative depth (0: first site, 1: final residual)",
                yaxis="lens margin / std of final margin",
                title="lens margin by depth, per model (band: ± 1 standard error)",
                zero_line=True,
            )
            color = PALETTE[i % len(PALETTE)]
            for trace in one.data:
                if trace.fill == "toself":
                    trace.update(fillcolor=_rgba(color, 0.2), mode="lines")  # no vertex dots
                else:
                    trace.line.color = color
                    trace.customdata = list(run.lens_labels)
                    trace.hovertemplate = (
                        f"{name}<br>site: %{{customdata}} (depth %{{x:.2f}})<br>"
                        "lens margin / std: %{y:.5g}<extra></extra>"
                    )
            panels.append(one)
        fig = panels[0]
        for other in panels[1:]:
            fig.add_traces(list(other.data))
        fig.update_layout(showlegend=True)
        return render(fig, backend, ax)

    # -- components -----------------------------------------------------------------------
    def attribution_rank_correlation(self, a: str, b: str):
        """Spearman ρ between the two models' margin attributions, per pair.

        The attributions are over their (matching) components.

        Args:
            a: the first model's name.
            b: the second model's name.

        Returns:
            `(mean ρ, ci_low, ci_high)`.

        Raises:
            BackboneMismatchError: the models' backbones differ.
        """
        ra, rb = self.run(a), self.run(b)
        if ra.backbone != rb.backbone:
            raise BackboneMismatchError(
                f"{a!r} and {b!r} have different backbones ({_describe(ra)} vs {_describe(rb)}); "
                "component attributions only correspond when both models share one "
                "architecture (same layers, heads and component labels). Compare their rewards, "
                "lens or CKA instead"
            )
        va, vb = ra.attribution_margins.numpy(), rb.attribution_margins.numpy()
        rho = np.array([spearman(va[:, i], vb[:, i]) for i in range(va.shape[1])])
        return self._ci(rho[np.isfinite(rho)])

    def cka(self, a: str, b: str) -> Tensor:
        """Linear CKA `[sites of a, sites of b]` between residual representations.

        It is NaN where a representation is constant over examples, e.g. the embedding of a
        fixed reading token at the first site of an explicit RM.

        Args:
            a: the first model's name.
            b: the second model's name.

        Returns:
            The CKA matrix.
        """
        ra, rb = self.run(a), self.run(b)
        out = torch.zeros(len(ra.representations), len(rb.representations))
        for i, x in enumerate(ra.representations.values()):
            for j, y in enumerate(rb.representations.values()):
                out[i, j] = linear_cka(x, y)
        return out

    def plot_cka(
        self, a: str, b: str, ax: Axes | None = None, *, backend: Backend | None = None
    ) -> Any:
        """The CKA matrix of `a` and `b` (see `cka`) as a heat map, 0 to 1.

        Rows are `a`'s sites, columns `b`'s; hover shows both sites and the exact CKA (NaN
        cells, a constant representation, stay blank).

        Args:
            a: The first model's name.
            b: The second model's name.
            ax: Matplotlib axes to draw the static form on.
            backend: `"plotly"` or `"matplotlib"` (see `reward_lens_tl.plotting`).

        Returns:
            The figure (not shown).
        """
        fig = imshow(
            self.cka(a, b),
            x=list(self.run(b).representations),
            y=list(self.run(a).representations),
            xaxis=f"site of {b}",
            yaxis=f"site of {a}",
            title=f"linear CKA between the residuals of {a} and {b}",
            value_name="linear CKA",
            midpoint=None,
            zmin=0.0,
            zmax=1.0,
            colorscale="Viridis",
        )
        return render(fig, backend, ax)

    def sweep_tau(self, a: str | None = None, b: str | None = None):
        """Kendall τ-b between the models' token sweeps on shared candidates.

        Models without a sweep are skipped.

        Args:
            a: the first model's name (default: every pair of models).
            b: the second model's name.

        Returns:
            A `pandas.DataFrame`, one row per model pair.
        """
        import pandas as pd

        sweeps = dict(self.sweeps or {})
        rows = []
        for x, y in self._pairs_of_models(a, b):
            if x in sweeps and y in sweeps:
                rows.append({"model_a": x, "model_b": y, **sweep_tau(sweeps[x], sweeps[y])})
        return pd.DataFrame(rows, columns=["model_a", "model_b", "tau", "p_value", "n_shared"])

    # -- summary --------------------------------------------------------------------------
    def summary(self):
        """One row per model pair.

        Columns: agreement numbers, final-layer CKA, attribution ρ (NaN where backbones
        differ) and sweep τ (NaN without sweeps).
        """
        frame = self.agreement()
        cka, attr, tau = [], [], []
        taus = self.sweep_tau()
        for x, y in zip(frame["model_a"], frame["model_b"], strict=True):
            cka.append(float(self.cka(x, y)[-1, -1]))
            try:
                attr.append(self.attribution_rank_correlation(x, y)[0])
            except BackboneMismatchError:
                attr.append(float("nan"))
            hit = taus[(taus["model_a"] == x) & (taus["model_b"] == y)]
            tau.append(float(hit["tau"].iloc[0]) if len(hit) else float("nan"))
        frame["final_cka"] = cka
        frame["attribution_spearman"] = attr
        frame["sweep_tau"] = tau
        return frame

    def to_dataframe(self):
        """The `summary` table."""
        return self.summary()

    @pasted_docs(plot=PLOT_DOC)
    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """Pairwise agreement between every two models as a matrix, 0 to 1, values written.

        A cell is the share of pairs on which both models prefer the same response (the
        diagonal is 1); hover shows both names and the exact share.

        {plot}
        """
        names = list(self.names)
        matrix = np.eye(len(names))
        for _, row in self.agreement().iterrows():
            i, j = names.index(row["model_a"]), names.index(row["model_b"])
            matrix[i, j] = matrix[j, i] = row["pairwise_agreement"]
        fig = imshow(
            matrix,
            x=names,
            y=names,
            title=f"pairwise agreement of {len(names)} models (share of pairs ordered alike)",
            value_name="pairwise agreement",
            midpoint=None,
            zmin=0.0,
            zmax=1.0,
            colorscale="Viridis",
            text=True,
        )
        return render(fig, backend, ax)


def _rgba(color: str, alpha: float) -> str:
    """`"#rrggbb"` as a plotly `rgba(...)` colour of opacity `alpha`."""
    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _agreement(rx: SourceRun, ry: SourceRun, n_boot: int, seed: int) -> dict:
    """Reward Pearson r, pairwise agreement and margin Spearman ρ, each with a bootstrap CI."""
    rewards = (rx.chosen, rx.rejected, ry.chosen, ry.rejected)  # resampled by pair, together
    margins = (rx.margins, ry.margins)
    metrics: dict[str, tuple[tuple[Tensor, ...], Callable[..., float]]] = {
        "reward_pearson": (
            rewards,
            lambda cx, jx, cy, jy: pearson(np.concatenate([cx, jx]), np.concatenate([cy, jy])),
        ),
        "pairwise_agreement": (margins, lambda a, b: float((np.sign(a) == np.sign(b)).mean())),
        "margin_spearman": (margins, spearman),
    }
    row: dict = {"n_pairs": len(rx.margins)}
    for key, (samples, fn) in metrics.items():
        est, lo, hi = bootstrap_ci(samples, fn, n_boot=n_boot, seed=seed)
        row.update({key: est, f"{key}_low": lo, f"{key}_high": hi})
    return row


def _describe(run: SourceRun) -> str:
    n_layers, d_model, n_heads, d_head, d_mlp, labels = run.backbone
    return f"{n_layers} layers, d_model {d_model}, {n_heads} heads, {len(labels)} components"


def compare_models(
    models: Mapping[str, Any] | Sequence[Any],
    pairs: Sequence,
    *,
    batch_size: int = 16,
    n_boot: int = 1000,
    seed: int = 0,
    max_rep_pairs: int = 256,
    sweeps: Mapping[str, Any] | None = None,
) -> ModelComparison:
    """Run each model once over `pairs` and return the `ModelComparison`.

    Models are `HookedRewardModel`s, `ImplicitRewardModel`s or
    `reward_lens_tl.crossmodel.sources.ExplicitReward` /
    `reward_lens_tl.crossmodel.sources.ImplicitReward` (an objective, a hooked variant).
    Token ids (the first two forms of `pairs`) need models that share one vocabulary; for
    models whose tokenizers differ they raise
    `reward_lens_tl.crossmodel.sources.PreEncodedPairsError`: pass text.

    Args:
        models: `{name: model or source}` or a list of sources / models (named by their
            source's name).
        pairs: encoded `(chosen, rejected)` tuples, zoo contrast pairs (edited plays chosen)
            or objects with `prompt/chosen/rejected` text (each model encodes with its own
            tokenizer).
        batch_size: pairs per chunk of the streamed runs.
        n_boot: bootstrap resamples of every CI.
        seed: the bootstrap's seed.
        max_rep_pairs: how many pairs keep residual representations (for CKA).
        sweeps: model name -> its token-sweep result.

    Returns:
        The comparison.

    Raises:
        InvalidArgumentError: fewer than two models, or names that repeat.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.crossmodel import BackboneMismatchError, compare_models
        >>> from reward_lens_tl.implicit import ImplicitRewardModel
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> scalar = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> irm = ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))
        >>> pairs = load_task().task.contrast_pairs("topic_match", 8, seed=0)  # edited: chosen
        >>> cmp = compare_models({"scalar": scalar, "implicit": irm}, pairs, n_boot=100)
        >>> row = cmp.agreement("scalar", "implicit").iloc[0]
        >>> {k: round(float(row[k]), 3) for k in ("pairwise_agreement", "reward_pearson")}
        {'pairwise_agreement': 0.75, 'reward_pearson': 0.883}
        >>> tuple(cmp.cka("scalar", "implicit").shape)  # 3 + 1 sites against 2 + 1 sites
        (4, 3)
        >>> try:  # components only correspond within one architecture
        ...     cmp.attribution_rank_correlation("scalar", "implicit")
        ... except BackboneMismatchError as e:
        ...     print(type(e).__name__)
        BackboneMismatchError
    """
    items = list(models.items()) if isinstance(models, Mapping) else [(None, m) for m in models]
    sources = [as_source(m, name) for name, m in items]
    names = [s.name for s in sources]
    if len(sources) < 2:
        raise InvalidArgumentError(f"a comparison needs at least two models, got {len(sources)}")
    if len(set(names)) != len(names):
        raise InvalidArgumentError(f"model names must be unique, got {names}; pass a dict")
    pairs = list(pairs)
    check_shared_tokenizer(sources, pairs)
    runs = {s.name: run_on_pairs(s, pairs, batch_size, max_rep_pairs) for s in sources}
    return ModelComparison(runs=runs, n_boot=n_boot, seed=seed, sweeps=sweeps)
