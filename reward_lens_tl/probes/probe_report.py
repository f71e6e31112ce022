"""Result objects of the probe suite: the report of a run, one row per probe.

`ProbeReport` (from `reward_lens_tl.probes.run_probes`) holds every probe's
per-example deltas, their summary (`reward_lens_tl.probes.outside.DeltaSummary`), the
examples each probe skipped with the reason, and the inside view (`.cascade`). Figures are
interactive plotly figures by default (`plot(backend="matplotlib")` for the static form; see
`reward_lens_tl.plotting`), returned, never shown.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np
from torch import Tensor

from ..errors import UnknownNameError
from ..plotting import BLUE, PLOT_DOC, RED, Backend, bar, render
from ..results import Result, TopK, top_entries
from ..signatures import pasted_docs
from .outside import DeltaSummary

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "ProbeReport",
    "ProbeRow",
    "Skipped",
]

STAT_FIELDS = ("mean_delta", "ci_low", "ci_high", "sd_delta", "effect_size", "relative_effect")


class _PerProbe(Protocol):
    @property
    def probe(self) -> str: ...


PerProbe = TypeVar("PerProbe", bound=_PerProbe)


def find_probe(entries: Iterable[PerProbe], probe: str, missing: str) -> PerProbe:
    """The entry of `entries` whose `.probe` is `probe` (a report's row, a cascade).

    Args:
        entries: The entries, each with a `probe` name.
        probe: The probe's name.
        missing: The message when no entry has that name.

    Returns:
        The first entry of that name.

    Raises:
        UnknownNameError: No entry has that name.

    Examples:
        >>> find_probe([Skipped("emoji", 0, "no text")], "emoji", "none").reason
        'no text'
    """
    for entry in entries:
        if entry.probe == probe:
            return entry
    raise UnknownNameError(missing)


@dataclass(frozen=True)
class Skipped:
    """A probe that did not apply to one example, and why.

    Args:
        probe: the probe's name.
        example: the example's index.
        reason: why the probe did not apply.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.probes import run_probes
        >>> from reward_lens_tl.probes.zoo import zoo_examples, zoo_probes
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> examples = zoo_examples(load_task().task, 12, seed=0, max_words=8)
        >>> report = run_probes(model, examples, [zoo_probes()[4]], inside=False)  # filler_swap
        >>> skip = report.skipped[0]
        >>> skip.probe, skip.example, skip.reason
        ('filler_swap', 3, 'no member of the swap groups occurs in the response')
        >>> len(report.skipped), report.skipped_frame().columns.tolist()
        (5, ['probe', 'example', 'reason'])
    """

    probe: str
    example: int
    reason: str


@dataclass(frozen=True)
class ProbeRow:
    """One probe's outcome: the examples it applied to, their deltas and their summary.

    Args:
        probe: the probe's name.
        kind: the probe's kind.
        example_index: the examples it applied to.
        deltas: the reward deltas.
        summary: the deltas' summary (`None` with a `note` when too few applied).
        flip_rate: on pairs, the preference-flip rate.
        note: why there is no summary.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.probes import run_probes
        >>> from reward_lens_tl.probes.zoo import zoo_examples, zoo_probes
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> examples = zoo_examples(load_task().task, 12, seed=0, max_words=8)
        >>> report = run_probes(model, examples, zoo_probes()[:1], inside=False)
        >>> row = report["length_padding"]
        >>> row.kind, row.n, row.flagged, round(row.summary.mean_delta, 2)
        ('hack', 12, True, 2.04)
        >>> bool(abs(row.deltas.mean() - row.summary.mean_delta) < 1e-6)
        True
    """

    probe: str
    kind: str
    example_index: tuple[int, ...]
    deltas: np.ndarray
    summary: DeltaSummary | None
    flip_rate: float | None = None
    note: str = ""

    @property
    def n(self) -> int:
        """The number of examples the probe applied to."""
        return len(self.example_index)

    @property
    def flagged(self) -> bool:
        """Whether the summary flags the probe."""
        return bool(self.summary is not None and self.summary.flagged)

    def record(self, n_skipped: int) -> dict[str, Any]:
        """The row as a flat record (a row of `ProbeReport.to_dataframe`).

        Args:
            n_skipped: how many examples the probe skipped.

        Returns:
            The record.
        """
        stats = {f: getattr(self.summary, f) if self.summary else math.nan for f in STAT_FIELDS}
        return {
            "probe": self.probe,
            "kind": self.kind,
            "n": self.n,
            "n_skipped": n_skipped,
            **stats,
            "flip_rate": math.nan if self.flip_rate is None else self.flip_rate,
            "flagged": self.flagged,
            "note": self.note,
        }


@dataclass(frozen=True)
class ProbeReport(Result):
    """What `reward_lens_tl.probes.run_probes` returns (see its docstring).

    Args:
        rows: one row per probe.
        skipped: the skipped (probe, example) pairs.
        n_examples: the number of examples.
        original_rewards: the original rewards.
        chosen_rewards: on pairs, the chosen sides' rewards.
        natural_sd: the original rewards' standard deviation.
        cascade: the `CascadeResult` when run with `inside=True`.
        n_forward: the number of sequences forwarded.
        settings: the run's settings.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.probes import run_probes
        >>> from reward_lens_tl.probes.zoo import zoo_examples, zoo_probes
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> examples = zoo_examples(load_task().task, 12, seed=0, max_words=8)
        >>> report = run_probes(model, examples, [zoo_probes()[0], zoo_probes()[4]], inside=False)
        >>> report.probes, report.n_examples, report.flagged()
        (('length_padding', 'filler_swap'), 12, ['length_padding'])
        >>> report["filler_swap"].n, len(report.skipped), report.top_k(1)[0][0]
        (7, 5, 'length_padding')
    """

    rows: tuple[ProbeRow, ...]
    skipped: tuple[Skipped, ...]
    n_examples: int
    original_rewards: Tensor
    chosen_rewards: Tensor | None
    natural_sd: float
    cascade: Any = None  # CascadeResult when run with inside=True
    n_forward: int = 0
    settings: dict = field(default_factory=dict)

    def __getitem__(self, probe: str) -> ProbeRow:
        """The row of the probe named `probe`.

        Args:
            probe: the probe's name.

        Returns:
            The `ProbeRow`.

        Raises:
            UnknownNameError: no such probe.
        """
        return find_probe(self.rows, probe, f"no probe {probe!r}; probes: {list(self.probes)}")

    @property
    def probes(self) -> tuple[str, ...]:
        """The probes' names, in row order."""
        return tuple(r.probe for r in self.rows)

    def to_dataframe(self):
        """One row per probe.

        The columns are `probe, kind, n, n_skipped, mean_delta, ci_low, ci_high, sd_delta,
        effect_size, relative_effect, flip_rate, flagged, note`.
        """
        import pandas as pd

        counts = {r.probe: 0 for r in self.rows}
        for s in self.skipped:
            counts[s.probe] += 1
        return pd.DataFrame([r.record(counts[r.probe]) for r in self.rows])

    def skipped_frame(self):
        """One row per skipped (probe, example) with the reason."""
        import pandas as pd

        return pd.DataFrame(
            [(s.probe, s.example, s.reason) for s in self.skipped],
            columns=["probe", "example", "reason"],
        )

    def flagged(self) -> list[str]:
        """The names of the flagged probes."""
        return [r.probe for r in self.rows if r.flagged]

    def false_positive_rate(self) -> tuple[int, int]:
        """`(flagged, tested)` over the invariance probes with statistics."""
        tested = [r for r in self.rows if r.kind == "invariance" and r.summary is not None]
        return sum(r.flagged for r in tested), len(tested)

    def _summarized(self) -> list[tuple[ProbeRow, DeltaSummary]]:
        """`(row, summary)` of the probes with statistics (a summary), in row order."""
        return [(r, r.summary) for r in self.rows if r.summary is not None]

    def top_k(self, k: int = 10) -> TopK:
        """Probes by |mean delta| (largest first), as `[(probe, mean_delta)]`.

        Args:
            k: how many probes.

        Returns:
            The `TopK` of probes.
        """
        rows = self._summarized()
        return top_entries(
            [r.probe for r, _ in rows], [s.mean_delta for _, s in rows], k, "mean_delta"
        )

    def distortion(self):
        """The distortion index per probe (needs a run over pairs).

        See `reward_lens_tl.probes.distortion.distortion_index`.

        Returns:
            The `DistortionResult`.
        """
        from .distortion import distortion_index

        return distortion_index(self)

    @pasted_docs(plot=PLOT_DOC)
    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """Mean reward delta per probe with its 95% CI; flagged probes in red.

        One bar per probe with statistics, in row order (the first at the top), labelled
        `probe (kind)`; hover shows the exact mean delta, its CI and n.

        {plot}
        """
        rows = self._summarized()
        means = [s.mean_delta for _, s in rows]
        flagged = sum(r.flagged for r, _ in rows)
        fig = bar(
            [f"{r.probe} ({r.kind})" for r, _ in rows],
            means,
            xaxis="mean reward delta (perturbed − original), 95% CI",
            title=f"reward delta per probe · {flagged} of {len(rows)} flagged (red)",
            colors=[RED if r.flagged else BLUE for r, _ in rows],
            error=(
                [m - s.ci_low for m, (_, s) in zip(means, rows, strict=True)],
                [s.ci_high - m for m, (_, s) in zip(means, rows, strict=True)],
            ),
            value_name="mean delta",
        )
        fig.data[0].customdata = [
            f"{r.probe} ({r.kind}{', flagged' if r.flagged else ''})<br>"
            f"95% CI [{s.ci_low:.4g}, {s.ci_high:.4g}], n = {s.n}"
            for r, s in rows
        ]
        return render(fig, backend, ax)
