"""Result objects of the patching package: values with their labels, frames and figures.

`PatchResult` holds one sweep (activation patching or an attribution-patching estimate)
as a grid shaped like `Grid.shape`, with one label per cell. Figures are returned, never
shown.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.patching import activation_patching
    >>> from reward_lens_tl.testing import tiny_reward_model, random_batch
    >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("gpt2"))
    >>> ids, _ = random_batch(2, [8, 8], low=6)
    >>> result = activation_patching(model, ids[0], ids[1], site="z", alignment="exact")
    >>> result.labels()[:3], list(result.to_dataframe().columns)
    (('L0H0', 'L0H1', 'L0H2'), ['layer', 'head', 'label', 'value', 'reward'])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from jaxtyping import Float
from torch import Tensor

from ..errors import InvalidArgumentError, UnknownNameError
from ..plotting import Backend, imshow, render, shown_token, side_by_side
from ..results import Result, TopK, top_entries
from .alignment import Alignment
from .grids import Grid

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["MultiSitePatchResult", "PatchResult"]


@dataclass(frozen=True)
class PatchResult(Result):
    """One sweep over a grid of cells.

    `values` is the metric per cell (for `method="activation"` the metric of the patched
    run, for `"atp"`/`"atp*"` its first-order estimate), shaped `grid.shape` with axes
    `grid.axes`. `rewards` holds the patched runs' rewards (activation patching only);
    `magnitude` the GradDrop score (AtP* with `graddrop=True`: non-negative, for ranking).
    `target_reward` is the reward of the run being patched, `source_reward` that of the
    run the values come from (`None` for ablations), `baseline` the metric of the unpatched
    target run (0 for the default metrics), so `values - baseline` is each cell's effect.

    Attributes:
        values: the metric per cell (or its estimate), shaped `grid.shape`.
        grid: the swept cells (`Grid`): site, layers, positions and heads.
        site: the canonical site name.
        mode: `denoising`, `noising`, `mean` or `zero`.
        method: `"activation"`, or the estimate: `"atp"`, `"atp+qk"`, `"atp+graddrop"`,
            `"atp*"`.
        alignment: the matched positions of the target and source runs.
        metric_name: what `values` measures, e.g. `"fraction restored"` or `"custom"`.
        target_reward: the reward of the run being patched.
        source_reward: the reward of the run the values come from (`None` for ablations).
        baseline: the metric of the unpatched target run.
        rewards: the patched runs' rewards, shaped like `values` (activation patching only).
        magnitude: AtP*'s GradDrop score, shaped like `values` (AtP with `graddrop=True`
            only).
        position_tokens: the token at each aligned position, `"a"` where both runs read
            `a`, `"a→b"` where the patched run reads `a` and the other run `b` (the figure's
            column labels); empty when the model has no tokenizer.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching import activation_patching
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> clean = model.encode("explain how to bake bread", "the oven and the flour")
        >>> corrupted = model.encode("explain how to bake bread", "the oven and the bomb")
        >>> result = activation_patching(model, clean, corrupted, site="attn_out")
        >>> result.metric_name, round(result.target_reward, 2), round(result.source_reward, 2)
        ('fraction restored', -3.34, 1.82)
        >>> gap = result.source_reward - result.target_reward   # value = share of the gap moved
        >>> [round((r - result.target_reward) / gap, 3) for r in result.flat("rewards").tolist()]
        [0.999, 0.232, 0.377]
        >>> [(label, round(v, 3)) for label, v in result.top_k(2)]
        [('L0', 0.999), ('L2', 0.377)]
    """

    values: Float[Tensor, "..."]
    grid: Grid
    site: str
    mode: str
    method: str
    alignment: Alignment
    metric_name: str
    target_reward: float
    source_reward: float | None
    baseline: float = 0.0
    rewards: Float[Tensor, "..."] | None = None
    magnitude: Float[Tensor, "..."] | None = None
    position_tokens: tuple[str, ...] = ()

    def __post_init__(self):
        """Check that the values have the grid's shape."""
        if tuple(self.values.shape) != self.grid.shape:
            raise InvalidArgumentError(
                f"values {tuple(self.values.shape)} vs grid {self.grid.shape}"
            )

    @property
    def axes(self) -> tuple[str, ...]:
        """The grid's axis names."""
        return self.grid.axes

    @property
    def shape(self) -> tuple[int, ...]:
        """The grid's shape."""
        return self.grid.shape

    def labels(self) -> tuple[str, ...]:
        """One label per cell, in the order of `flat`."""
        return self.grid.cell_labels()

    def flat(self, which: str = "values") -> Float[Tensor, " cell"]:
        """`values` (or `"rewards"`, `"magnitude"`) flattened in label order.

        Args:
            which: the field to flatten, `"values"`, `"rewards"` or `"magnitude"`.

        Returns:
            The field's cells `[cell]`, in the order of `labels`.

        Raises:
            InvalidArgumentError: if the result has no such field (e.g. `rewards` of an
                estimate).
        """
        t = getattr(self, which)
        if t is None:
            raise InvalidArgumentError(f"this result has no {which!r}")
        return t.reshape(-1)

    def effects(self) -> Float[Tensor, " cell"]:
        """Per-cell change of the metric caused by the patch, `values - baseline`, flat."""
        return self.flat() - self.baseline

    def ranking_score(self) -> Float[Tensor, " cell"]:
        """What ranks cells by importance: `magnitude` when present, else `|effect|`."""
        if self.magnitude is not None:
            return self.magnitude.reshape(-1)
        return self.effects().abs()

    def top_k(self, k: int = 10, by: str = "effect") -> TopK:
        """The `k` cells with the largest `|effect|` (`values - baseline`).

        They are shown as `[(label, effect)]`; `by="magnitude"` ranks and shows AtP*'s
        GradDrop magnitude.

        Args:
            k: how many cells to keep.
            by: `"effect"` or `"magnitude"` (AtP* with GradDrop only).

        Returns:
            The top `k` cells, `[(label, value)]`.

        Raises:
            InvalidArgumentError: if `by` is unknown, or `"magnitude"` for a result without
                one.
        """
        if by == "magnitude":
            if self.magnitude is None:
                raise InvalidArgumentError(
                    "this result has no magnitude (only AtP* with GradDrop does)"
                )
            return top_entries(self.labels(), self.flat("magnitude").tolist(), k, "magnitude")
        if by != "effect":
            raise InvalidArgumentError(f"by={by!r}: choose 'effect' or 'magnitude'")
        return top_entries(self.labels(), self.effects().tolist(), k, "effect")

    def to_dataframe(self):
        """One row per cell.

        The columns are `layer`, `pos` (grid index), `target_pos`, `source_pos`, `head` where the
        grid has them, then `label`, `value` (and `reward`/`magnitude` when present).
        """
        import pandas as pd

        index = torch.stack(
            torch.meshgrid(*[torch.arange(n) for n in self.shape], indexing="ij"), -1
        ).reshape(-1, len(self.shape))
        cols: dict[str, object] = {}
        for a, axis in enumerate(self.axes):
            ix = index[:, a]
            if axis == "layer":
                cols["layer"] = [self.grid.layers[i] for i in ix]
            elif axis == "head":
                cols["head"] = [(self.grid.heads or ())[i] for i in ix]
            else:
                cols["pos"] = ix.tolist()
                cols["target_pos"] = self.alignment.target.cpu()[ix].tolist()
                cols["source_pos"] = self.alignment.source.cpu()[ix].tolist()
        cols["label"] = list(self.labels())
        cols["value"] = self.flat().tolist()
        if self.rewards is not None:
            cols["reward"] = self.flat("rewards").tolist()
        if self.magnitude is not None:
            cols["magnitude"] = self.flat("magnitude").tolist()
        return pd.DataFrame(cols)

    def matrix(self) -> tuple[Float[Tensor, "row col"], list[str], list[str]]:
        """The grid as a 2-D matrix with row and column labels (for plotting).

        Layers × the last axis; `[layer, pos, head]` grids become `(layer, head)` rows × positions.
        """
        layer_labels = [f"L{layer}" for layer in self.grid.layers]
        pos_labels = list(self.grid.position_labels) or [str(j) for j in range(self.shape[-1])]
        if self.axes == ("layer",):
            return self.values[:, None], layer_labels, [self.site]
        if self.axes == ("layer", "pos"):
            return self.values, layer_labels, pos_labels
        grid_heads = self.grid.heads or ()
        heads = [f"H{h}" for h in grid_heads]
        if self.axes == ("layer", "head"):
            return self.values, layer_labels, heads
        rows = [f"L{layer}H{h}" for layer in self.grid.layers for h in grid_heads]
        v = self.values.permute(0, 2, 1).reshape(len(rows), -1)
        return v, rows, pos_labels

    def plot(
        self, ax: Axes | None = None, cmap: str = "RdBu", *, backend: Backend | None = None
    ) -> Any:
        """Heat map of the grid, colour scale centred at 0, columns labelled by their tokens.

        A column reads `"end-2 · bomb→flour"`: the aligned position, then the token of the run
        being patched and, where it differs, the token patched in. Hover shows the cell's
        exact value.

        Args:
            ax: Matplotlib axes to draw the static form on.
            cmap: The colour scale (a plotly name; diverging, centred at 0).
            backend: `"plotly"` or `"matplotlib"` (see `reward_lens_tl.plotting`).

        Returns:
            The figure (not shown).
        """
        return render(self.figure(cmap), backend, ax)

    def figure(self, cmap: str = "RdBu"):
        """The plotly heat map `plot` returns (see there).

        Args:
            cmap: The colour scale (a plotly name; diverging, centred at 0).

        Returns:
            The plotly figure.
        """
        m, rows, cols = self.matrix()
        if self.grid.by_position and len(self.position_tokens) == len(cols):
            cols = [
                f"{c} · {shown_token(t)}" for c, t in zip(cols, self.position_tokens, strict=True)
            ]
        what = "effect estimate" if self.method != "activation" else self.metric_name
        return imshow(
            m,
            x=cols,
            y=rows,
            xaxis="aligned position · token (patched run → patched in)"
            if self.grid.by_position
            else "",
            yaxis="layer" if rows and rows[0].count("H") == 0 else "layer, head",
            title=f"{self.method} patching · {self.site} · {self.mode}",
            value_name=what,
            colorscale=cmap,
        )

    def to_html(self, max_rows: int = 30) -> str:
        """The grid as a coloured table with the top cells boxed (Jupyter shows this).

        Args:
            max_rows: How many rows of the grid to show (layers, or layer-head pairs); a note
                counts the rest.

        Returns:
            The HTML table, the five largest |values| among the rows shown boxed.
        """
        from ..html import grid_html

        m, rows, cols = self.matrix()
        title = f"{self.method} · {self.site} · {self.mode} ({self.metric_name})"
        table = grid_html(m[:max_rows].tolist(), rows[:max_rows], cols, title=title, highlight=5)
        more = len(rows) - max_rows
        return table + (f"<p>… {more} more rows (to_dataframe())</p>" if more > 0 else "")


@dataclass(frozen=True)
class MultiSitePatchResult(Result):
    """Several sites swept over the same clean and corrupted runs.

    `activation_patching(..., site=("attn_out", "mlp_out"))` gives one `PatchResult` per
    site, in the order asked, sharing the target/source rewards and the metric.

    Attributes:
        results: one `PatchResult` per site, keyed by the site name, in the order asked.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching import activation_patching
        >>> from reward_lens_tl.testing import tiny_reward_model, random_batch
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> ids, _ = random_batch(2, [8, 8], low=6)
        >>> both = activation_patching(model, ids[0], ids[1], site=("attn_out", "mlp_out"))
        >>> both.sites, both["mlp_out"].shape, both.labels()[:2]
        (('attn_out', 'mlp_out'), (2,), ('attn_out L0', 'attn_out L1'))
    """

    results: dict[str, PatchResult]

    @property
    def sites(self) -> tuple[str, ...]:
        """The sites, in the order asked."""
        return tuple(self.results)

    def __getitem__(self, site: str) -> PatchResult:
        """The result of one site.

        Raises:
            UnknownNameError: if the site was not swept.
        """
        if site not in self.results:
            raise UnknownNameError(f"no site {site!r} in this result; sites: {self.sites}")
        return self.results[site]

    def labels(self) -> tuple[str, ...]:
        """`"{site} {cell label}"` for every cell of every site, in `flat` order."""
        return tuple(f"{s} {label}" for s, r in self.results.items() for label in r.labels())

    def flat(self, which: str = "values") -> Float[Tensor, " cell"]:
        """Every site's cells of `which`, flattened and concatenated.

        Args:
            which: the field to flatten, `"values"`, `"rewards"` or `"magnitude"`.

        Returns:
            The cells `[cell]`, in the order of `labels`.
        """
        return torch.cat([r.flat(which) for r in self.results.values()])

    def top_k(self, k: int = 10) -> TopK:
        """The `k` cells of all sites with the largest `|effect|`, `[(label, effect)]`.

        Args:
            k: how many cells to keep.

        Returns:
            The top `k` cells of every site together, labelled `"{site} {cell label}"`.
        """
        effects = torch.cat([r.effects() for r in self.results.values()])
        return top_entries(self.labels(), effects.tolist(), k, "effect")

    def to_dataframe(self):
        """The sites' frames stacked, with a leading `site` column."""
        import pandas as pd

        frames = [r.to_dataframe().assign(site=s) for s, r in self.results.items()]
        frame = pd.concat(frames, ignore_index=True)
        return frame[["site", *[c for c in frame.columns if c != "site"]]]

    def plot(
        self, ax: Axes | None = None, cmap: str = "RdBu", *, backend: Backend | None = None
    ) -> Any:
        """One heat map per site, side by side (each as `PatchResult.plot`).

        Args:
            ax: Matplotlib axes; only for a single site (several sites need their own panels).
            cmap: The colour scale.
            backend: `"plotly"` or `"matplotlib"` (see `reward_lens_tl.plotting`).

        Returns:
            The figure.
        """
        panels = [result.figure(cmap) for result in self.results.values()]
        fig = panels[0] if len(panels) == 1 else side_by_side(panels, title="patching by site")
        return render(fig, backend, ax)
