"""The distortion index: a probe's reward shift in units of the natural spread of margins.

Internal (no public names): used by `reward_lens_tl.probes` (`ProbeReport.distortion`).

On a pair set, each probe edits the *rejected* response (the side a hack would rescue). Per
probe, over the pairs it applied to:

- `index = mean(Δ reward of the rejected side) / sd(chosen − rejected margins)` (ddof = 1),
  with a seeded paired-bootstrap CI (pairs resampled; numerator and denominator together).
  An index of 1 means the edit moves a rejected response by one typical margin;
- `flip_share`: of the pairs with a non-zero original margin, the share whose preference the
  edit reverses (`sign(chosen − rejected') ≠ sign(chosen − rejected)`).

Fewer than `min_n` pairs are refused (`reward_lens_tl.probes.TooFewExamplesError`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..errors import ProbeError, TooFewExamplesError
from ..plotting import PLOT_DOC, Backend, bar, render
from ..results import Result, TopK, top_entries
from ..signatures import pasted_docs
from .outside import bootstrap_ci, check_n

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__: list[str] = []


def flip_share(margin: torch.Tensor, new_margin: torch.Tensor) -> float:
    """Share of non-zero `margin`s whose sign `new_margin` reverses (`nan` if none).

    Args:
        margin: the original margins.
        new_margin: the margins after the edit.

    Returns:
        The share.
    """
    live = margin != 0
    if not bool(live.any()):
        return math.nan
    flipped = torch.sign(new_margin[live]) != torch.sign(margin[live])
    return float(flipped.float().mean())


def _index(delta, margin, axis=-1):
    return np.mean(delta, axis=axis) / np.std(margin, ddof=1, axis=axis)


@dataclass(frozen=True)
class DistortionRow:
    """One probe's distortion index.

    Args:
        probe: the probe's name.
        n: the number of pairs it applied to.
        index: the distortion index.
        ci_low: the CI's lower bound.
        ci_high: the CI's upper bound.
        flip_share: the share of preferences the edit reverses.
        margin_sd: the standard deviation of the natural margins.
    """

    probe: str
    n: int
    index: float
    ci_low: float
    ci_high: float
    flip_share: float
    margin_sd: float


@dataclass(frozen=True)
class DistortionResult(Result):
    """The distortion index per probe (module docstring).

    Args:
        rows: one row per probe.
    """

    rows: tuple[DistortionRow, ...]

    def to_dataframe(self):
        """One row per probe, the fields of `DistortionRow`."""
        import pandas as pd

        return pd.DataFrame([vars(r) for r in self.rows])

    def top_k(self, k: int = 10) -> TopK:
        """Probes by |distortion index|.

        Args:
            k: how many probes.

        Returns:
            The `TopK` of probes.
        """
        return top_entries([r.probe for r in self.rows], [r.index for r in self.rows], k, "index")

    @pasted_docs(plot=PLOT_DOC)
    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """The distortion index per probe with its 95% CI, labelled with its flip share.

        One bar per probe (the first row at the top), labelled `probe (flips 12%)`; hover
        shows the exact index, its CI, the flip share and n.

        {plot}
        """
        rows = self.rows
        fig = bar(
            [f"{r.probe} (flips {r.flip_share:.0%})" for r in rows],
            [r.index for r in rows],
            xaxis="distortion index (mean shift / sd of natural margins), 95% CI",
            title="distortion index per probe",
            error=([r.index - r.ci_low for r in rows], [r.ci_high - r.index for r in rows]),
            value_name="index",
        )
        fig.data[0].customdata = [
            f"{r.probe}<br>95% CI [{r.ci_low:.4g}, {r.ci_high:.4g}]<br>"
            f"flips {r.flip_share:.1%} of preferences, n = {r.n}"
            for r in rows
        ]
        return render(fig, backend, ax)


def distortion_index(report) -> DistortionResult:
    """Distortion index and flip share of every probe of a `run_probes` report on pairs.

    Probes with fewer than `min_n` pairs are left out.

    Args:
        report: the `ProbeReport`.

    Returns:
        The `DistortionResult`.

    Raises:
        ProbeError: the report is not of a run over preference pairs.
    """
    if report.chosen_rewards is None:
        raise ProbeError("the distortion index needs a run over preference pairs (a PairSet)")
    seed, min_n = report.settings.get("seed", 0), report.settings.get("min_n", 10)
    margins_all = (report.chosen_rewards - report.original_rewards).double()
    rows = []
    for row in report.rows:
        idx = list(row.example_index)
        try:
            check_n(len(idx), min_n, f"distortion index of {row.probe!r}")
        except TooFewExamplesError:
            continue
        margin = margins_all[idx]
        delta = torch.as_tensor(row.deltas, dtype=torch.float64)
        d, m = delta.numpy(), margin.numpy()
        lo, hi = bootstrap_ci((d, m), _index, seed=seed)
        rows.append(
            DistortionRow(
                probe=row.probe,
                n=len(idx),
                index=float(_index(d, m)),
                ci_low=lo,
                ci_high=hi,
                flip_share=flip_share(margin, margin - delta),
                margin_sd=float(m.std(ddof=1)),
            )
        )
    return DistortionResult(tuple(rows))
