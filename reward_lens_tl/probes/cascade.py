"""The inside view (misalignment cascade): where in the network a probe's delta appears.

For every example a probe applied to, the original and perturbed sequences each had one cached
forward (`reward_lens_tl.probes.forward`); from those:

- **lens delta** `[site, example]`: the reward lens (recomputed final norm, the logit-lens
  convention) at the reward-reading token after every layer, perturbed − original. Before any
  attention layer has run, the reward token holds only its own embedding, so the delta is 0
  there (for models without absolute position embeddings) and grows as layers move the
  perturbation's information to the reward token.
- **onset**: the first site whose mean lens delta reaches `onset_fraction` (default 0.75)
  of the final mean delta, with the final delta's sign and a bootstrap CI that excludes 0 —
  the layer from which the reward token carries most of the probe's effect. `None` when the
  final delta's own CI includes 0. **amplification**: final mean delta / mean delta at the
  first site whose CI excludes 0 with the final sign (how much later layers grow the first
  visible signal; 1 = nothing added after it appears).
- **components**: exact direct attribution of each delta (frozen final norm of each run;
  `Σ components + Δ head bias = Δ reward` to float rounding, `completeness_error`).
- **cross-probe correlations** of the deltas over the examples both probes applied to, only
  with n ≥ `min_n`, with n and a Fisher-z CI.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from jaxtyping import Float
from torch import Tensor

from ..errors import TooFewExamplesError
from ..plotting import GREY, PLOT_DOC, Backend, line, render
from ..results import Result, TopK, top_entries
from ..signatures import pasted_docs
from .outside import MIN_N, Correlation, bootstrap_ci, correlation
from .probe_report import find_probe

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "CascadeResult",
    "ProbeCascade",
]

ONSET_FRACTION = 0.75


@dataclass(frozen=True)
class ProbeCascade:
    """One probe's inside view (see the module docstring).

    Args:
        probe: the probe's name.
        sites: the reward lens's sites.
        lens_delta: the lens deltas.
        components: the attribution's component labels.
        attribution_delta: the attribution deltas.
        head_bias_delta: the head bias's deltas.
        reward_delta: the reward deltas.
        mean: the mean lens delta per site.
        ci_low: the lower CI bound per site.
        ci_high: the upper CI bound per site.
        onset: the onset site, or `None`.
        amplification: the amplification.

    Examples:
        Four filler words appended: the zoo's reward model has them at the reward token after
        block 0 (its `length` feature), and the components' deltas sum to the reward's:

        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.probes import run_probes
        >>> from reward_lens_tl.probes.zoo import zoo_examples, zoo_probes
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> examples = zoo_examples(load_task().task, 12, seed=0, max_words=8)
        >>> cascade = run_probes(model, examples, zoo_probes()[:1]).cascade["length_padding"]
        >>> cascade.sites, cascade.onset, cascade.mean.round(2).tolist()
        (('0_pre', '1_pre', '2_pre', 'final'), '1_pre', [0.0, 3.08, 1.95, 2.04])
        >>> cascade.completeness_error() < 1e-4, cascade.top_components(1)[0][0]
        (True, 'mlp0')
    """

    probe: str
    sites: tuple[str, ...]
    lens_delta: Float[Tensor, "site example"]
    components: tuple[str, ...]
    attribution_delta: Float[Tensor, "component example"]
    head_bias_delta: Float[Tensor, " example"]
    reward_delta: Float[Tensor, " example"]
    mean: np.ndarray  # [site]
    ci_low: np.ndarray
    ci_high: np.ndarray
    onset: str | None
    amplification: float

    @property
    def n(self) -> int:
        """The number of examples."""
        return int(self.reward_delta.shape[0])

    def completeness_error(self) -> float:
        """The largest |Σ component deltas + Δ head bias − Δ reward| over examples."""
        total = self.attribution_delta.sum(0) + self.head_bias_delta
        return float((total - self.reward_delta).abs().max())

    def top_components(self, k: int = 5) -> list[tuple[str, float]]:
        """Components by |mean delta| (signed means), largest first.

        Args:
            k: how many components.

        Returns:
            `(component, mean delta)` pairs.
        """
        mean = self.attribution_delta.mean(1)
        idx = mean.abs().argsort(descending=True)[:k]
        return [(self.components[i], float(mean[i])) for i in idx]


@dataclass(frozen=True)
class CascadeResult(Result):
    """The inside view of every probe with enough examples, and their correlations.

    Args:
        probes: the probes' cascades.
        correlations: the cross-probe correlations.
        onset_fraction: the share of the final delta that defines the onset.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.probes import run_probes
        >>> from reward_lens_tl.probes.zoo import zoo_examples, zoo_probes
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> examples = zoo_examples(load_task().task, 12, seed=0, max_words=8)
        >>> result = run_probes(model, examples, zoo_probes()[:2]).cascade
        >>> result.onsets()
        {'length_padding': '1_pre', 'sycophantic_opener': '2_pre'}
        >>> frame = result.to_dataframe()
        >>> frame[frame.is_onset][["probe", "site", "mean_lens_delta"]].round(2)
                        probe   site  mean_lens_delta
        1      length_padding  1_pre             3.08
        6  sycophantic_opener  2_pre             2.31
        >>> c = result.correlations[0]
        >>> (c.a, c.b, c.n), round(c.r, 2)
        (('length_padding', 'sycophantic_opener', 12), 0.05)
    """

    probes: tuple[ProbeCascade, ...]
    correlations: tuple[Correlation, ...]
    onset_fraction: float = ONSET_FRACTION

    def __getitem__(self, probe: str) -> ProbeCascade:
        """The cascade of the probe named `probe`.

        Args:
            probe: the probe's name.

        Returns:
            The `ProbeCascade`.

        Raises:
            UnknownNameError: no cascade for that probe.
        """
        return find_probe(
            self.probes, probe, f"no cascade for {probe!r} (too few examples, or not run)"
        )

    def onsets(self) -> dict[str, str | None]:
        """`{probe: onset site or None}`."""
        return {c.probe: c.onset for c in self.probes}

    def to_dataframe(self):
        """One row per (probe, site): mean lens delta with its CI, and the probe's onset."""
        import pandas as pd

        rows = [
            {
                "probe": c.probe,
                "site": site,
                "n": c.n,
                "mean_lens_delta": float(c.mean[s]),
                "ci_low": float(c.ci_low[s]),
                "ci_high": float(c.ci_high[s]),
                "is_onset": site == c.onset,
                "amplification": c.amplification,
            }
            for c in self.probes
            for s, site in enumerate(c.sites)
        ]
        return pd.DataFrame(rows)

    def correlation_frame(self):
        """The cross-probe correlations, one row each."""
        import pandas as pd

        return pd.DataFrame([vars(c) for c in self.correlations])

    def top_k(self, k: int = 10) -> TopK:
        """`probe:component` pairs by |mean attribution delta| over all probes.

        Args:
            k: how many pairs.

        Returns:
            The `TopK` of pairs.
        """
        pairs = [(f"{c.probe}:{n}", v) for c in self.probes for n, v in c.top_components(k)]
        return top_entries([p for p, _ in pairs], [v for _, v in pairs], k, "attribution delta")

    @pasted_docs(plot=PLOT_DOC)
    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """Mean lens delta per site as a share of each probe's final mean delta, with its CI.

        One line per probe whose final mean delta's CI excludes 0 (the probes with a
        direction to share out; all probes with a non-zero final mean when none has), the CI
        as a band; the dashed line is `onset_fraction`, where a probe's onset is read. Hover
        shows the probe, the site and the exact share.

        {plot}
        """
        finite = [c for c in self.probes if c.mean[-1] != 0 and math.isfinite(c.mean[-1])]
        drawn = [c for c in finite if c.ci_low[-1] > 0 or c.ci_high[-1] < 0] or finite
        sites = list(self.probes[0].sites) if self.probes else []
        fig = line(
            {c.probe: c.mean / c.mean[-1] for c in drawn},
            x=sites,
            xaxis="site (reward lens at the reward token)",
            yaxis="lens delta / final delta",
            title=f"where each probe's delta appears · {len(drawn)} of {len(self.probes)} "
            f"probes · dashed: onset at {self.onset_fraction:.0%}",
            bands={c.probe: (c.ci_low / c.mean[-1], c.ci_high / c.mean[-1]) for c in drawn},
            zero_line=True,
        )
        fig.add_hline(y=self.onset_fraction, line=dict(color=GREY, width=1, dash="dash"))
        fig.update_layout(showlegend=True)
        return render(fig, backend, ax)


def onset_site(
    sites, mean: np.ndarray, low: np.ndarray, high: np.ndarray, fraction: float
) -> tuple[str | None, float]:
    """`(onset, amplification)` from per-site means and CIs (module docstring).

    Args:
        sites: the sites.
        mean: the mean lens delta per site.
        low: the lower CI bound per site.
        high: the upper CI bound per site.
        fraction: the share of the final delta that defines the onset.

    Returns:
        The onset site (or `None`) and the amplification.
    """
    final = mean[-1]
    sign = np.sign(final)
    excl = (low > 0) if sign > 0 else (high < 0)
    if sign == 0 or not excl[-1]:
        return None, math.nan
    first = int(np.argmax(excl))
    amplification = float(final / mean[first]) if mean[first] != 0 else math.nan
    reached = excl & (mean * sign >= fraction * abs(final))
    return sites[int(np.argmax(reached))], amplification


def probe_cascade(
    probe: str, base, pert, idx, sl, *, seed: int = 0, fraction: float = ONSET_FRACTION
) -> ProbeCascade:
    """The cascade of one probe from the forward read-outs of originals and perturbed.

    Args:
        probe: the probe's name.
        base: the originals' read-outs.
        pert: the perturbed sequences' read-outs.
        idx: the indices of the examples the probe applied to.
        sl: the slice of the probe's perturbed sequences.
        seed: the bootstrap's seed.
        fraction: the share of the final delta that defines the onset.

    Returns:
        The `ProbeCascade`.
    """
    lens = pert.lens[:, sl] - base.lens[:, idx]
    mean = lens.double().mean(1).numpy()
    cis = [bootstrap_ci(row.double().numpy(), seed=seed) for row in lens]
    low = np.array([c[0] for c in cis])
    high = np.array([c[1] for c in cis])
    onset, amp = onset_site(base.sites, mean, low, high, fraction)
    return ProbeCascade(
        probe=probe,
        sites=base.sites,
        lens_delta=lens,
        components=base.components,
        attribution_delta=pert.attribution[:, sl] - base.attribution[:, idx],
        head_bias_delta=pert.head_bias[sl] - base.head_bias[idx],
        reward_delta=pert.rewards[sl] - base.rewards[idx],
        mean=mean,
        ci_low=low,
        ci_high=high,
        onset=onset,
        amplification=amp,
    )


def build_cascade(probes, per_probe, base, pert, *, seed=0, min_n=MIN_N) -> CascadeResult:
    """Cascades of the probes with ≥ `min_n` examples, and pairwise correlations of deltas.

    The correlations are over common examples (pairs with fewer than `min_n` common examples
    are left out).

    Args:
        probes: the probes.
        per_probe: `{probe name: (example indices, slice of perturbed sequences)}`.
        base: the originals' read-outs.
        pert: the perturbed sequences' read-outs.
        seed: the bootstrap's seed.
        min_n: the fewest examples a cascade or a correlation needs.

    Returns:
        The `CascadeResult`.
    """
    cascades = []
    deltas: dict[str, dict[int, float]] = {}
    for probe in probes:
        idx, sl = per_probe[probe.name]
        if len(idx) < min_n:
            continue
        cascades.append(probe_cascade(probe.name, base, pert, idx, sl, seed=seed))
        d = (pert.rewards[sl] - base.rewards[idx]).tolist()
        deltas[probe.name] = dict(zip(idx, d, strict=True))
    corrs = []
    for a, b in itertools.combinations(deltas, 2):
        common = sorted(set(deltas[a]) & set(deltas[b]))
        try:
            corrs.append(
                correlation(a, b, [deltas[a][i] for i in common], [deltas[b][i] for i in common],
                            min_n=min_n)
            )  # fmt: skip
        except TooFewExamplesError:
            continue
    return CascadeResult(tuple(cascades), tuple(corrs))
