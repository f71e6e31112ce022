"""The reward lens: the reward read out of the residual stream after every (sub)layer.

At each site (`resid_pre` of every layer, optionally `resid_mid`, and the final
`resid_post`) the residual at the reward position is passed through the final norm and the
reward head. Two choices of norm:

- `norm="recompute"`: the final norm's scale is recomputed from that residual — "what would the
  model say if it stopped here" (the logit-lens convention);
- `norm="frozen"`: the scale the final norm actually used at the end is kept — a linear read-out,
  consistent with direct attribution (site values are then cumulative sums of components).

Both equal the model's reward at the last site. (The published reward-lens library skips the
norm, so its last layer does not reach the reward.)

Examples:
    >>> import torch
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.testing import tiny_reward_model, random_batch
    >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    >>> ids, mask = random_batch(2, [8, 5])
    >>> lens = reward_lens(model, ids, mask)
    >>> lens.labels[-1], bool((lens.values[-1] - model.rewards(ids, mask)).abs().max() < 1e-5)
    ('final', True)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

import torch
from jaxtyping import Float, Int
from torch import Tensor

from .errors import RewardLensError
from .indices import check_layer
from .pair_batches import OnError, SkippedPair, pair_index_columns
from .plotting import PLOT_DOC, RED, Backend, line, render
from .readout import Objective, ReadoutRun, gather_positions, recomputed_scale, run_readout
from .results import PAIR_RUN_DOC, Result, TopK, axes, run_pair_batches, tidy_frame, top_entries
from .signatures import pasted_docs

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from .model import HookedRewardModel

__all__ = ["pair_lens", "reward_lens"]

Norm = Literal["recompute", "frozen"]
Resolution = Literal["layer", "sublayer"]

#: The x axis of the lens figures: the residual stream read at each site.
SITE_AXIS = "lens site (residual stream)"
#: The colour of one pair's line behind the bold mean.
FAINT = "#b4c7e7"


@dataclass(frozen=True)
class RewardLensResult(Result):
    """Lens values `[site, example]` (or `[site, example, pos]` with `all_positions`)."""

    example_axes = axes(values=1, rewards=0)

    values: Float[Tensor, "site example ..."]
    labels: tuple[str, ...]
    rewards: Float[Tensor, " example"]
    norm: str

    def to_dataframe(self):
        """The lens rewards as a tidy frame (one row per site and example)."""
        values = self.values if self.values.ndim == 2 else self.values[..., -1]
        return tidy_frame(values, self.labels, "site", "lens_reward")

    def top_k(self, k: int = 5):
        """Sites with the largest mean |change| from the previous site.

        These are where the reward is written.
        """
        delta = self.values.diff(dim=0, prepend=torch.zeros_like(self.values[:1]))
        mean_abs = delta.abs().flatten(1).mean(1)
        return top_entries(self.labels, mean_abs.tolist(), k, "mean |Δ lens reward|")

    def plot(
        self,
        ax: Axes | None = None,
        examples: Sequence[int] | None = None,
        *,
        backend: Backend | None = None,
    ) -> Any:
        """Lens reward per site, one line per example, with the zero line.

        Hover shows the example, the site and the exact lens reward.

        Args:
            ax: Matplotlib axes to draw the static form on.
            examples: Examples to draw (default: the first 8).
            backend: `"plotly"` or `"matplotlib"` (see `reward_lens_tl.plotting`).

        Returns:
            The figure (not shown).
        """
        return render(self.figure(examples), backend, ax)

    def figure(self, examples: Sequence[int] | None = None):
        """The plotly figure `plot` returns (see there)."""
        values = self.values if self.values.ndim == 2 else self.values[..., -1]
        chosen = list(examples) if examples is not None else range(min(values.shape[1], 8))
        return line(
            {f"example {b}": values[:, b] for b in chosen},
            x=list(self.labels),
            xaxis=SITE_AXIS,
            yaxis=f"lens reward ({self.norm} norm)",
            title=f"reward lens: the reward read at each site ({self.norm} norm)",
            zero_line=True,
        )


@dataclass(frozen=True)
class PairLensResult(Result):
    """Lens of chosen and rejected responses and their margin per site.

    Example `j` is input pair `indices[j]` (source `records[j]`); pairs skipped with
    `on_error="skip"` are listed in `skipped`.
    """

    example_axes = axes(chosen=0, rejected=0, indices=0, records=0)

    chosen: RewardLensResult
    rejected: RewardLensResult
    indices: tuple[int, ...] = ()
    records: tuple[int | None, ...] = ()
    skipped: tuple[SkippedPair, ...] = ()

    @property
    def labels(self) -> tuple[str, ...]:
        """Site labels."""
        return self.chosen.labels

    @property
    def margins(self) -> Float[Tensor, "site example"]:
        """Chosen minus rejected lens reward, per site and pair."""
        return self.chosen.values - self.rejected.values

    def crystallization(self, fraction: float = 0.5) -> list[str | None]:
        """Per pair, the first site whose margin reaches `fraction` of the final margin.

        Margins are taken in the final margin's sign; `None` when the final margin is 0.
        """
        out: list[str | None] = []
        for b in range(self.margins.shape[1]):
            m = self.margins[:, b]
            final = float(m[-1])
            if final == 0.0:
                out.append(None)
                continue
            reached = (m * torch.sign(m[-1]) >= fraction * abs(final)).nonzero().flatten()
            out.append(self.labels[int(reached[0])])
        return out

    def top_k(self, k: int = 5) -> TopK:
        """Sites with the largest mean |change| of the margin from the previous site."""
        delta = self.margins.diff(dim=0, prepend=torch.zeros_like(self.margins[:1]))
        return top_entries(self.labels, delta.abs().mean(1).tolist(), k, "mean |Δ margin|")

    def to_dataframe(self):
        """The margins as a tidy frame, with chosen, rejected and the input pair's index."""
        frame = tidy_frame(self.margins, self.labels, "site", "margin")
        frame["chosen"] = tidy_frame(self.chosen.values, self.labels, "s", "v")["v"]
        frame["rejected"] = tidy_frame(self.rejected.values, self.labels, "s", "v")["v"]
        return pair_index_columns(frame, self.indices, self.records)

    @pasted_docs(plot=PLOT_DOC)
    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """Lens margin per site: a faint line per pair (up to 20) and their mean in bold.

        Hover shows the pair (its input index), the site and the exact margin.

        {plot}
        """
        return render(self.figure(), backend, ax)

    def figure(self, title: str | None = None):
        """The plotly figure `plot` returns (see there); `title` replaces its title."""
        m = self.margins.float().cpu()
        n = m.shape[1]
        shown = min(n, 20)
        names = [f"pair {self.indices[b] if self.indices else b}" for b in range(shown)]
        series: dict[str, Any] = {name: m[:, b] for b, name in enumerate(names)}
        series["mean margin"] = m.mean(1)
        some = f"{shown} of {n} pairs" if shown < n else f"{n} pairs"
        fig = line(
            series,
            x=list(self.labels),
            xaxis=SITE_AXIS,
            yaxis="lens margin (chosen − rejected)",
            title=title if title is not None else f"lens margin per site: {some} and their mean",
            markers=False,
            zero_line=True,
        )
        for trace in fig.data[:-1]:
            trace.update(line=dict(color=FAINT, width=1), showlegend=False)
        fig.data[-1].update(mode="lines+markers", line=dict(color=RED, width=3))
        fig.update_layout(showlegend=True)
        return fig


def lens_sites(
    model, resolution: Resolution, layers: Sequence[int] | None = None
) -> list[tuple[str, str]]:
    """`(label, hook name)` of each site, in order; the last is the final residual."""
    if resolution not in ("layer", "sublayer"):
        raise RewardLensError(f"resolution must be 'layer' or 'sublayer', not {resolution!r}")
    chosen = (
        range(model.cfg.n_layers)
        if layers is None
        else sorted({check_layer(model, layer) for layer in layers})
    )
    sites = []
    for layer in chosen:
        sites.append((f"{layer}_pre", f"blocks.{layer}.hook_resid_pre"))
        if resolution == "sublayer":
            sites.append((f"{layer}_mid", f"blocks.{layer}.hook_resid_mid"))
    sites.append(("final", f"blocks.{model.cfg.n_layers - 1}.hook_resid_post"))
    return sites


def reward_lens(
    model: HookedRewardModel,
    input_ids: Int[Tensor, "batch pos"],
    attention_mask: Int[Tensor, "batch pos"] | None = None,
    *,
    norm: Norm = "recompute",
    resolution: Resolution = "layer",
    all_positions: bool = False,
    objective: Objective = None,
    layers: Sequence[int] | None = None,
    positions: Sequence[int] | Tensor | None = None,
    fwd_hooks: Sequence[tuple[str, Callable[..., Any]]] = (),
) -> RewardLensResult:
    """Lens reward at every site (see the module docstring for `norm`).

    Args:
        model: The reward model.
        input_ids: Token ids, one conversation per row (padded on either side).
        attention_mask: `1` on real tokens; `None` infers it from the pad ids.
        norm: `"recompute"` (the final norm's scale recomputed from each site's residual) or
            `"frozen"` (the scale the model used at the end kept: a linear read-out).
        resolution: `"layer"` (`resid_pre` of every layer) or `"sublayer"` (`resid_mid` too).
        all_positions: Read every position (`values [site, example, pos]`), not only the
            reward position.
        objective: One objective (name or index) of a multi-objective head; `None` reads the
            pooled reward.
        layers: Keep only these layers' sites (plus `final`).
        positions: Read at these positions (one per row) instead of the reward position.
        fwd_hooks: The user's own interventions (`(hook name, function)`), active during
            the run.

    Returns:
        The lens value of every site and example; the last site is the model's reward.

    Raises:
        RewardLensError: When `norm` or `resolution` is not one of its values.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> ids = model.to_tokens(
        ...     [("how bake bread", "oven flour"), ("how bake bread", "the bomb")])
        >>> lens = reward_lens(model, ids)
        >>> lens.labels
        ('0_pre', '1_pre', '2_pre', 'final')
        >>> [round(v, 2) for v in lens.values[:, 1].tolist()]  # the harmful word, site by site
        [-1.22, -3.1, -4.26, -6.86]
        >>> [round(r, 3) for r in model.rewards(ids).tolist()]  # where the lens ends
        [0.245, -6.865]
    """
    if norm not in ("recompute", "frozen"):
        raise RewardLensError(f"norm must be 'recompute' or 'frozen', not {norm!r}")
    sites = lens_sites(model, resolution, layers)
    run = run_readout(
        model,
        input_ids,
        attention_mask,
        [name for _, name in sites],
        objective=objective,
        positions=positions,
        fwd_hooks=fwd_hooks,
    )
    return lens_from_run(model, run, sites, norm=norm, all_positions=all_positions)


def lens_from_run(
    model,
    run: ReadoutRun,
    sites: Sequence[tuple[str, str]],
    *,
    norm: Norm = "recompute",
    all_positions: bool = False,
) -> RewardLensResult:
    """`reward_lens` of a run already made.

    Its cache must hold the `sites` from `lens_sites`, so one forward pass can serve several
    analyses.
    """
    cache, pos, read = run.cache, run.positions, run.read
    final_scale = cache["ln_final.hook_scale"][..., 0]  # [batch, pos]
    values = []
    for _, name in sites:
        x = cache[name] if all_positions else gather_positions(cache[name], pos)[:, None]
        scale = (
            recomputed_scale(model, x)
            if norm == "recompute"
            else (final_scale if all_positions else gather_positions(final_scale, pos)[:, None])
        )
        values.append(read.project(x, scale) + read.bias[:, None])
    stacked = torch.stack(values)  # [site, batch, pos or 1]
    if not all_positions:
        stacked = stacked[..., 0]
    return RewardLensResult(
        values=stacked.detach().cpu(),
        labels=tuple(label for label, _ in sites),
        rewards=run.target.detach().float().cpu(),
        norm=norm,
    )


@pasted_docs(pair_run=PAIR_RUN_DOC)
def pair_lens(
    model: HookedRewardModel,
    pairs: Iterable[Any],
    *,
    batch_size: int = 16,
    truncation: str = "error",
    on_error: OnError = "raise",
    **kwargs: Any,
) -> PairLensResult:
    """Lens of each pair's chosen and rejected response.

    Both halves of a chunk of pairs run as one left-padded batch. `pairs` (any iterable, streamed):
    objects with `prompt/chosen/rejected` or `(chosen, rejected)` tuples of `EncodedConversation`;
    `truncation` applies to pairs given as text. A pair that cannot be encoded stops the run
    (`on_error="raise"`, the error names the pair) or is left out and listed in `.skipped`
    (`"skip"`); `.indices` says which input pair each example is. Runs split across processes under
    `torchrun` (`reward_lens_tl.distributed`).

    Args:
        {pair_run}
        **kwargs: Go to `reward_lens` (`norm`, `resolution`, `objective`, `layers`, ...).

    Returns:
        The lens of the chosen and the rejected responses and their margins.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.data import PreferencePair
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> pairs = [PreferencePair("how bake bread", "oven flour", "the bomb"),
        ...          PreferencePair("explain laptop", "screen code", "soup")]
        >>> lens = pair_lens(model, pairs)
        >>> [round(m, 3) for m in lens.margins[-1].tolist()], lens.crystallization()
        ([7.11, 4.776], ['2_pre', '2_pre'])

        A pair that cannot be encoded is skipped with `on_error="skip"`:

        >>> from reward_lens_tl.testing import tiny_reward_model, tiny_tokenizer

        >>> from types import SimpleNamespace as Pair
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"), tiny_tokenizer())
        >>> pairs = [Pair(prompt="w6", chosen="w7", rejected=r) for r in ("w8 " * 99, "w8")]
        >>> lens = pair_lens(model, pairs, on_error="skip")
        >>> lens.indices, lens.margins.shape[1], str(lens.skipped[0])[:6]
        ((1,), 1, 'pair 0')
    """
    analysis = partial(
        reward_lens, model, **kwargs
    )  # (ids, mask) of chosen rows then rejected rows
    return run_pair_batches(
        model,
        pairs,
        analysis,
        PairLensResult,
        batch_size=batch_size,
        truncation=truncation,
        on_error=on_error,
    )
