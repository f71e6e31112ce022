"""The inside view of a sweep: which heads and MLPs make a candidate optimal or pessimal.

For the top and bottom candidates of a `reward_lens_tl.sweep.SweepResult`,
`inside_view` runs exact direct attribution
(`reward_lens_tl.attribution.direct_attribution`) and subtracts the mean attribution over a
baseline sample of the sweep's candidates, so each component's value says how much it lifts this
candidate above (or pushes it below) the typical candidate; the values sum to
`reward − baseline mean reward`. It also runs the reward lens
(`reward_lens_tl.lens.reward_lens`) at the reward-reading position and at the candidate's last
token, to show where along the depth the candidate's reward is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from jaxtyping import Float
from torch import Tensor

from ..attribution import AttributionResult, direct_attribution
from ..errors import InvalidArgumentError
from ..lens import RewardLensResult, reward_lens
from ..plotting import Backend, imshow, line, render, shown_token, side_by_side
from ..results import Result, TopK, top_entries
from .sweep_result import SweepResult, candidate_index

__all__ = ["InsideView", "inside_view"]

if TYPE_CHECKING:
    from matplotlib.axes import Axes


@dataclass(frozen=True)
class InsideView(Result):
    """Attributions of the top and bottom candidates relative to the sweep's mean.

    `relative[component, candidate]` = attribution − baseline mean attribution, so
    `relative.sum(0) + bias_shift == rewards − baseline_reward` (`bias_shift`: the head
    bias minus its baseline mean, zero unless an ArmoRM gate mixes the bias); `lens` at the
    reward position and `candidate_lens` at the candidate's last token, one column each.

    Args:
        candidates: the candidates' labels.
        side: `"top"` or `"bottom"` per candidate.
        components: the attribution's component labels.
        relative: the relative attributions.
        rewards: the candidates' rewards.
        baseline_reward: the baseline's mean reward.
        bias_shift: the head bias minus its baseline mean.
        n_baseline: the number of baseline candidates.
        attribution: the candidates' attribution.
        lens: the reward lens at the reward position.
        candidate_lens: the reward lens at the candidate's last token.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sweep import inside_view, token_sweep
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> words = ["soup", "bread", "great question", "bomb", "the"]
        >>> view = inside_view(model, token_sweep(model, "how bake bread", words), k=1)
        >>> view.candidates, view.side
        (('great question', 'bomb'), ('top', 'bottom'))

        The relative attributions add up to each candidate's reward above the sweep's mean:

        >>> total = view.relative.sum(0) + view.bias_shift
        >>> [round(x, 3) for x in total.tolist()]
        [2.07, -3.657]
        >>> [round(x, 3) for x in (view.rewards - view.baseline_reward).tolist()]
        [2.07, -3.657]
        >>> component, value = view.top_k(1, "bomb")[0]  # what pushes "bomb" down most
        >>> component, round(value, 3)
        ('L2H3', -0.827)
    """

    no_example_axis = "its attributions are relative to the mean over every candidate"

    candidates: tuple[str, ...]
    side: tuple[str, ...]
    components: tuple[str, ...]
    relative: Float[Tensor, "component candidate"]
    rewards: Float[Tensor, " candidate"]
    baseline_reward: float
    bias_shift: Float[Tensor, " candidate"]
    n_baseline: int
    attribution: AttributionResult
    lens: RewardLensResult
    candidate_lens: RewardLensResult

    def completeness_error(self) -> float:
        """The largest |Σ relative + bias shift − (reward − baseline reward)|."""
        total = self.relative.sum(0) + self.bias_shift
        return float((total - (self.rewards - self.baseline_reward)).abs().max())

    def top_k(self, k: int = 5, candidate: int | str | None = None) -> TopK:
        """Components with the largest |relative value| for one candidate.

        Without a candidate, the largest |mean| over all; shown signed, sorted by |value|.

        Args:
            k: how many components.
            candidate: the candidate (index or label), or `None` for the mean.

        Returns:
            The `TopK` of components.
        """
        if candidate is None:
            vals = self.relative.mean(1)
        else:
            vals = self.relative[:, self.candidate_index(candidate)]
        return top_entries(list(self.components), vals.tolist(), k, "relative contribution")

    def candidate_index(self, candidate: int | str) -> int:
        """The column of `candidate` (an index, negative ones included, or a label).

        Args:
            candidate: The candidate's index or label.

        Returns:
            The index into `candidates`.

        Raises:
            InvalidArgumentError: No candidate has that label, or the index is out of range.
        """
        return candidate_index(self.candidates, candidate, "this view")

    def to_dataframe(self):
        """One row per (candidate, component): `candidate, side, component, relative`."""
        import pandas as pd

        rows = []
        for j, cand in enumerate(self.candidates):
            for i, comp in enumerate(self.components):
                rows.append((cand, self.side[j], comp, float(self.relative[i, j])))
        return pd.DataFrame(rows, columns=["candidate", "side", "component", "relative"])

    def plot(self, ax: Axes | None = None, k: int = 12, *, backend: Backend | None = None) -> Any:
        """Heat map of the `k` components with the largest |mean|, per candidate, beside the lens.

        Left: each component's attribution minus the sweep's mean, one column per candidate
        (labelled with its tokens; the top candidates, then past the dashed line the bottom
        ones), on a colour scale centred at 0. Right: the reward lens at the reward position,
        one line per candidate (dashed: bottom candidates).

        Args:
            ax: Not supported: the figure has two panels (`reward_lens_tl.plotting.render`
                refuses axes for it).
            k: How many components.
            backend: `"plotly"` or `"matplotlib"` (see `reward_lens_tl.plotting`).

        Returns:
            The figure (not shown).
        """
        top = [self.components.index(c) for c, _ in self.top_k(k)]
        columns = [shown_token(c) for c in self.candidates]
        heat = imshow(
            self.relative[top],
            x=columns,
            y=[self.components[i] for i in top],
            xaxis="candidate (top, then bottom)",
            yaxis="component",
            title=f"attribution − sweep mean ({len(top)} components)",
            value_name="attribution − sweep mean",
        )
        n_top = self.side.count("top")
        if 0 < n_top < len(self.candidates):
            heat.add_vline(x=n_top - 0.5, line=dict(color="black", width=1, dash="dash"))
        names: list[str] = []
        for col, side in zip(columns, self.side, strict=True):
            name = f"{col} ({side})"
            if name in names:  # two long labels cut to the same text stay two lines
                name = f"{name} #{len(names) + 1}"
            names.append(name)
        lens = line(
            {name: self.lens.values[:, j] for j, name in enumerate(names)},
            x=list(self.lens.labels),
            xaxis="site",
            yaxis="lens reward at the reward position",
            title="reward lens at the reward position",
        )
        for trace, side in zip(lens.data, self.side, strict=True):
            trace.line.dash = "solid" if side == "top" else "dash"
        fig = side_by_side([heat, lens], title="inside view of the sweep's extreme candidates")
        return render(fig, backend, ax)


def inside_view(
    model,
    result: SweepResult,
    k: int = 5,
    *,
    baseline: int = 256,
    seed: int = 0,
    batch_size: int = 64,
) -> InsideView:
    """Attribution relative to the sweep mean and the reward lens for the extreme candidates.

    It covers the top `k` and bottom `k` candidates. The baseline is the mean attribution over
    `baseline` candidates drawn at random (`seed`) from the sweep, or all of them when the
    sweep is smaller.

    Args:
        model: the `HookedRewardModel`.
        result: the sweep.
        k: how many candidates on each side.
        baseline: how many candidates the baseline averages.
        seed: the seed of the baseline's draw.
        batch_size: sequences per forward of the baseline.

    Returns:
        The `InsideView`.

    Raises:
        InvalidArgumentError: `k` is not a positive integer.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sweep import inside_view, token_sweep
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> words = ["soup", "bread", "great question", "bomb", "the"]
        >>> result = token_sweep(model, "how bake bread", words)
        >>> view = inside_view(model, result, k=2)
        >>> view.candidates, view.side
        (('great question', 'soup', 'bomb', 'the'), ('top', 'top', 'bottom', 'bottom'))
        >>> view.n_baseline, round(view.baseline_reward, 4) == round(result.mean, 4)
        (5, True)
        >>> view.completeness_error() < 1e-4
        True
    """
    if not isinstance(k, int) or k < 1:
        raise InvalidArgumentError(f"k must be a positive integer, got {k!r}")
    top = result.order()[:k].tolist()
    bottom = result.order(descending=False)[:k].tolist()
    chosen = top + [i for i in bottom if i not in top]
    side = tuple("top" if i in top else "bottom" for i in chosen)
    ids, mask = result.batch(chosen, model.pad_token_id)
    attr = direct_attribution(model, ids, mask, objective=result.objective)
    base_idx = _baseline_sample(len(result), baseline, seed)
    base_sum, base_reward, base_bias = torch.zeros_like(attr.values[:, 0]), 0.0, 0.0
    for s in range(0, len(base_idx), batch_size):
        rows = base_idx[s : s + batch_size]
        b_ids, b_mask = result.batch(rows, model.pad_token_id)
        b = direct_attribution(model, b_ids, b_mask, objective=result.objective)
        base_sum += b.values.sum(1)
        base_reward += float(b.rewards.double().sum())
        base_bias += float(b.head_bias.double().sum())
    n = len(base_idx)
    relative = attr.values - (base_sum / n)[:, None]
    lens = reward_lens(model, ids, mask, objective=result.objective)
    last = [len(result.prefix_ids) + len(result.candidates.ids[i]) - 1 for i in chosen]
    cand_lens = reward_lens(model, ids, mask, objective=result.objective, positions=last)
    return InsideView(
        candidates=tuple(result.labels[i] for i in chosen),
        side=side,
        components=attr.labels,
        relative=relative,
        rewards=attr.rewards,
        baseline_reward=base_reward / n,
        bias_shift=attr.head_bias - base_bias / n,
        n_baseline=n,
        attribution=attr,
        lens=lens,
        candidate_lens=cand_lens,
    )


def _baseline_sample(n: int, size: int, seed: int) -> list[int]:
    if size >= n:
        return list(range(n))
    gen = torch.Generator().manual_seed(seed)
    return sorted(torch.randperm(n, generator=gen)[:size].tolist())
