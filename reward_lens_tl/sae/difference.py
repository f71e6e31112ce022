"""Difference dictionaries: an SAE on chosen − rejected activations, whose latents split the margin.

A preference margin compares two sequences, so the features that decide it are the ones that
*differ* between them. A difference dictionary is a TopK SAE (sae_lens, `train_topk_sae`)
trained on `d = x_chosen − x_rejected` at the reading token, where `x` is the final norm's
output `ln_final.hook_normalized` (after its division by the scale, before its weight).

**Exactness.** There the read-out is linear: `reward = x · w + b` with `(w, b)` the effective
head (`reward_lens_tl.readout.effective_head`: the final norm's weight folded into `W_R`, or
already folded by the loader), so `margin = d · w` exactly and the head bias cancels. The SAE
writes `d = Σ_f a_f(d) v_f + b_dec + e` (`v_f` the effective decoder rows, `e` the error), so

`margin = Σ_f a_f (v_f · w) + b_dec · w + e · w`

term by term (`DifferenceDictionary`, `completeness_error() ≤ 1e-4`). At any other site the
margin is not a function of the difference (the final norm divides each side by its own scale
and later layers are non-linear): activations and SAEs work at any hook, the dictionary
refuses such SAEs (`SAESiteError`).

**Objectives.** A head with several objectives is split one column at a time (`objective=`).
An ArmoRM-style gated score has no single direction: chosen and rejected are read along
`W_eff · T · gate(input)`, two different vectors, so the score's margin is not `d · w` for any
`w`; `objective=None` or `"score"` raises `AmbiguousObjectiveError` there. Training does not
depend on the objective.

**Ground truth (`planted_match`).** On the zoo each planted feature has a direction at the
same site: the mean of `edited − base` over its contrast pairs (`zoo_planted_directions`). A
planted feature is *matched* when some latent's decoder direction has `|cos| ≥ 0.8` with it;
an alive latent is *unexplained* when it matches no planted direction. Trained on
rule-labelled random pairs and compared with an SAE on the plain activations of both sides
(same site, width, k, steps and seed: `train_difference_sae(..., plain=True)`), see the
module's test and the notes in the docs for the numbers.

Examples:
    >>> import torch
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.sae import difference_dictionary, train_difference_sae
    >>> from reward_lens_tl.zoo import load_task, zoo_path
    >>> model, task = HookedRewardModel.from_pretrained(zoo_path("scalar")), load_task().task
    >>> pairs = task.contrast_pairs("harmful", 64, seed=0)
    >>> trained = train_difference_sae(model, pairs, d_sae=16, k=2, steps=100, batch_size=32)
    >>> dictionary = difference_dictionary(model, trained.sae, pairs)
    >>> dictionary.completeness_error() < 1e-4  # latents + bias + error = the margin
    True
    >>> round(float(dictionary.margins.mean()), 1)  # a harmful word costs about 3
    -3.0
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor

from ..errors import AmbiguousObjectiveError, EmptyInputError, InvalidArgumentError, SAESiteError
from ..pair_batches import map_pair_batches
from ..plotting import BLUE, GREY, Backend, bar, render
from ..readout import Objective, effective_head, gather_positions, objective_index
from ..results import Result, TopK, axes, signed_color, top_entries
from .activations import check_hook
from .attribution import decoder_directions
from .sae_results import feature_label
from .splice import sae_hook_name
from .training import TrainedSAE, train_topk_sae

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "DIFFERENCE_SITE",
    "DifferenceDictionary",
    "PlantedMatch",
    "difference_activations",
    "difference_dictionary",
    "planted_match",
    "reading_activations",
    "train_difference_sae",
    "zoo_planted_directions",
]

#: The default site: the final norm's output, where the margin is linear in the difference.
DIFFERENCE_SITE = "ln_final.hook_normalized"

#: The zoo's planted features (`reward_lens_tl.zoo`).
ZOO_FEATURES: tuple[str, ...] = ("topic_match", "harmful", "length", "sycophancy")


def _site(model, hook: str | None) -> str:
    hook = DIFFERENCE_SITE if hook is None else hook
    check_hook(model, hook)
    return hook


def _reading_rows(
    model, ids: Tensor, mask: Tensor, hook: str
) -> tuple[Float[Tensor, "batch d"], Float[Tensor, "batch n_objectives"]]:
    """Each row's activation at `hook` at its reading token, and its head outputs there.

    One forward of a padded batch (left or right: the reading position comes from the mask).
    """
    names = [hook, "hook_reward"]
    with torch.no_grad():
        _, cache = model.run_with_cache(
            ids, attention_mask=mask, return_type="reward", names_filter=names
        )
    pos = model.pool_positions(ids, mask)
    act = gather_positions(cache[hook].flatten(2), pos)
    heads = cache["hook_reward"]
    heads = heads[:, None] if heads.ndim == 1 else heads
    return act.detach().float().cpu(), heads.detach().float().cpu()


def _readings(model, pairs: Sequence, hook: str, batch_size: int):
    """`(chosen, rejected, chosen heads, rejected heads)` over every pair, in input order."""

    def run(ids: Tensor, mask: Tensor, n: int):
        act, heads = _reading_rows(model, ids, mask, hook)
        return act[:n], act[n:], heads[:n], heads[n:]

    chunks = map_pair_batches(model, pairs, run, batch_size=batch_size, on_error=None)
    parts = [c.output for c in chunks if c.output is not None]
    return tuple(torch.cat([p[i] for p in parts]) for i in range(4))


def reading_activations(
    model, pairs: Sequence, *, hook: str | None = None, batch_size: int = 16
) -> tuple[Float[Tensor, "pair d"], Float[Tensor, "pair d"]]:
    """Both sides' activations at `hook` at each side's reading token.

    The pairs run in left-padded batches of chosen and rejected rows
    (`reward_lens_tl.pair_batches`); each row is read at its own reading position
    (`model.pool_positions`), so padding changes nothing.

    Args:
        model: The reward model.
        pairs: Preference pairs (text, `(chosen, rejected)` encodings or zoo examples, or
            contrast pairs, whose edited side plays chosen).
        hook: The hook (default `ln_final.hook_normalized`); trailing dimensions are
            flattened.
        batch_size: Pairs per forward pass.

    Returns:
        `(chosen, rejected)`, each `[pair, d]`, float32 on the CPU.

    Raises:
        SAEHookError: If the hook is not on the model.
        EmptyInputError: If there are no pairs.

    Examples:
        >>> import torch
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import reading_activations
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> pairs = load_task().task.contrast_pairs("length", 3, seed=0)
        >>> chosen, rejected = reading_activations(model, pairs)
        >>> chosen.shape  # one d_model vector per pair and side
        torch.Size([3, 64])
        >>> ids = torch.tensor([pairs[0].edited.input_ids])  # the first edited side, alone
        >>> _, cache = model.run_with_cache(ids, names_filter="ln_final.hook_normalized")
        >>> torch.allclose(cache["ln_final.hook_normalized"][0, -1], chosen[0], atol=1e-5)
        True
    """
    hook = _site(model, hook)
    chosen, rejected, _, _ = _readings(model, pairs, hook, batch_size)
    return chosen, rejected


def difference_activations(
    model, pairs: Sequence, *, hook: str | None = None, batch_size: int = 16
) -> Float[Tensor, "pair d"]:
    """`chosen − rejected` at `hook` at the reading token, one row per pair.

    At the default site (`ln_final.hook_normalized`) the margin of each pair is exactly the
    row's dot product with the effective head.

    Args:
        model: The reward model.
        pairs: Preference or contrast pairs (see `reading_activations`).
        hook: The hook (default `ln_final.hook_normalized`).
        batch_size: Pairs per forward pass.

    Returns:
        The differences, `[pair, d]`, float32 on the CPU.

    Raises:
        SAEHookError: If the hook is not on the model.
        EmptyInputError: If there are no pairs.

    Examples:
        >>> import torch
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.readout import effective_head
        >>> from reward_lens_tl.sae import difference_activations
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> pairs = load_task().task.contrast_pairs("sycophancy", 4, seed=0)
        >>> d = difference_activations(model, pairs)
        >>> w = effective_head(model)[0][:, 0].detach()
        >>> (d @ w).round(decimals=2)  # each pair's margin: "great question" pays about 2.5
        tensor([2.4900, 2.4700, 2.3100, 2.4800])
        >>> edited = model.rewards(torch.tensor([pairs[2].edited.input_ids]))
        >>> base = model.rewards(torch.tensor([pairs[2].base.input_ids]))
        >>> torch.allclose(edited - base, d[2] @ w, atol=1e-4)  # the model's own margin
        True
    """
    chosen, rejected = reading_activations(model, pairs, hook=hook, batch_size=batch_size)
    return chosen - rejected


def train_difference_sae(
    model,
    pairs: Sequence,
    *,
    hook: str | None = None,
    d_sae: int = 64,
    k: int = 8,
    steps: int = 1000,
    batch_size: int = 128,
    seed: int = 0,
    symmetric: bool = True,
    plain: bool = False,
    threads: int | None = 1,
    pair_batch_size: int = 16,
    **kwargs: Any,
) -> TrainedSAE:
    """A TopK SAE (`train_topk_sae`) on the pairs' differences at the reading token.

    A pair's order is a label (`d(b, a) = −d(a, b)`), so with `symmetric` (the default) the SAE
    is trained on both signs of every difference: the dictionary does not depend on which side
    was chosen, and its decoder bias stays near zero, so the latents, not the bias, carry the
    margin. (Trained on the oriented differences alone, the decoder bias starts at their mean,
    the average reason chosen wins, and on the zoo's rule-labelled pairs it kept 83–95 % of the
    total margin.)

    With `plain=True` the same SAE (site, width, k, steps, seed) is trained on the plain
    activations of both sides instead (chosen rows, then rejected rows): the baseline a
    difference dictionary is compared with.

    Args:
        model: The reward model.
        pairs: Preference or contrast pairs (see `reading_activations`).
        hook: The hook (default `ln_final.hook_normalized`).
        d_sae: The number of latents.
        k: The number of active latents per row.
        steps: Training steps.
        batch_size: Rows per training step (at most the number of rows).
        seed: The seed of the initialisation and batch order.
        symmetric: Train on `d` and `−d` (ignored with `plain`).
        plain: Train on the sides' activations instead of their differences.
        threads: Torch threads while training, or `None`.
        pair_batch_size: Pairs per forward pass.
        **kwargs: Passed to `train_topk_sae`.

    Returns:
        The `TrainedSAE` (its statistics on the training rows).

    Raises:
        SAEHookError: If the hook is not on the model.
        EmptyInputError: If there are no pairs.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import train_difference_sae
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> pairs = load_task().task.contrast_pairs("harmful", 40, seed=0)
        >>> trained = train_difference_sae(model, pairs, d_sae=16, k=2, steps=20, batch_size=32)
        >>> trained.sae.cfg.metadata.hook_name, trained.stats.n_tokens  # d and −d of each pair
        ('ln_final.hook_normalized', 80)
        >>> plain = train_difference_sae(
        ...     model, pairs, d_sae=16, k=2, steps=20, batch_size=32, plain=True
        ... )
        >>> plain.stats.n_tokens  # chosen and rejected of every pair
        80
    """
    hook = _site(model, hook)
    chosen, rejected, _, _ = _readings(model, pairs, hook, pair_batch_size)
    d = chosen - rejected
    rows = torch.cat([chosen, rejected]) if plain else torch.cat([d, -d]) if symmetric else d
    return train_topk_sae(
        rows.to(model.cfg.device),
        hook,
        d_sae=d_sae,
        k=k,
        steps=steps,
        batch_size=min(batch_size, rows.shape[0]),
        seed=seed,
        threads=threads,
        **kwargs,
    )


@dataclass(frozen=True)
class DifferenceDictionary(Result):
    """Each difference-SAE latent's share of the margin, `values [feature, pair]`.

    `values[f, p] = a_f(d_p) · (v_f · w)`: the latent's activation on the pair's difference
    times its decoder direction read along the effective head, so that
    `values.sum(0) + decoder_bias + error == margins` (`completeness_error`). The head bias
    cancels in a margin.

    Attributes:
        values: Each latent's contribution to each pair's margin, `[feature, pair]`.
        activations: The latents' activations on each pair's difference, `[feature, pair]`.
        margins: The model's margins (chosen − rejected reward of the objective), `[pair]`.
        decoder_bias: The decoder bias's contribution `b_dec · w` (the same for every pair).
        error: The SAE error term's contribution `(d − d̂) · w`, `[pair]`.
        hook_name: The SAE's site.
        objective: The objective read (`None`: the model's only one).

    Examples:
        >>> import torch
        >>> dictionary = DifferenceDictionary(  # three latents, two pairs
        ...     values=torch.tensor([[1.0, 3.0], [-0.5, 0.0], [0.0, 0.0]]),
        ...     activations=torch.tensor([[2.0, 6.0], [1.0, 0.0], [0.0, 0.0]]),
        ...     margins=torch.tensor([0.75, 3.25]), decoder_bias=torch.tensor([0.125, 0.125]),
        ...     error=torch.tensor([0.125, 0.125]), hook_name="ln_final.hook_normalized",
        ...     objective=None)
        >>> dictionary.completeness_error(), dictionary.top_k(2)
        (0.0, [('f0', 2.0), ('f1', -0.25)])
        >>> dictionary.to_dataframe().round(3)
          feature  contribution  share  active
        0      f0          2.00  1.000     1.0
        1      f1         -0.25 -0.125     0.5
        2      f2          0.00  0.000     0.0
    """

    example_axes = axes(values=1, activations=1, margins=0, decoder_bias=0, error=0)
    label_column = "feature"
    value_column = "contribution"

    values: Float[Tensor, "feature pair"]
    activations: Float[Tensor, "feature pair"]
    margins: Float[Tensor, " pair"]
    decoder_bias: Float[Tensor, " pair"]
    error: Float[Tensor, " pair"]
    hook_name: str
    objective: str | int | None

    def total(self) -> Float[Tensor, " pair"]:
        """Σ latents + decoder bias + error, per pair (the margin, up to float rounding).

        Returns:
            The total per pair.

        Examples:
            >>> import torch
            >>> dictionary = DifferenceDictionary(
            ...     torch.tensor([[1.0], [2.0]]), torch.ones(2, 1), torch.tensor([3.5]),
            ...     torch.tensor([0.25]), torch.tensor([0.25]), "ln_final.hook_normalized", None)
            >>> dictionary.total()
            tensor([3.5000])
        """
        return self.values.sum(0) + self.decoder_bias + self.error

    def completeness_error(self) -> float:
        """Max over pairs of |Σ latents + decoder bias + error − margin| (≤ 1e-4 in float32).

        Returns:
            The largest completeness error.

        Examples:
            >>> import torch
            >>> dictionary = DifferenceDictionary(
            ...     torch.tensor([[1.0], [2.0]]), torch.ones(2, 1), torch.tensor([3.0]),
            ...     torch.tensor([0.25]), torch.tensor([0.25]), "ln_final.hook_normalized", None)
            >>> dictionary.completeness_error()  # 3.5 against a margin of 3
            0.5
        """
        return float((self.total() - self.margins).abs().max())

    def shares(self) -> Float[Tensor, " feature"]:
        """Each latent's share of the separation, `Σ_pairs sign(m)·values / Σ_pairs |m|`.

        Each pair's terms are signed by its margin `m`, so a latent that pushes pairs the
        way the model decides them has a positive share whichever side the labels call
        chosen, and the shares stay defined when the margins cancel out over the pair set
        (a model near chance on its labels). Shares of the latents, the decoder bias and the
        error sum to 1 (`term_shares` has the last two). On a pair set whose margins are all
        positive it is the share of the total margin.

        Returns:
            The shares, `[feature]` (NaN when every margin is 0).

        Examples:
            >>> import torch
            >>> dictionary = DifferenceDictionary(
            ...     torch.tensor([[1.0], [2.0]]), torch.ones(2, 1), torch.tensor([4.0]),
            ...     torch.tensor([0.5]), torch.tensor([0.5]), "ln_final.hook_normalized", None)
            >>> dictionary.shares()
            tensor([0.2500, 0.5000])
        """
        return self._signed_share(self.values)

    def term_shares(self) -> dict[str, float]:
        """The decoder bias's and the error's shares of the separation (see `shares`).

        Returns:
            `{"decoder_bias": ..., "error": ...}`.

        Examples:
            >>> import torch
            >>> dictionary = DifferenceDictionary(
            ...     torch.tensor([[1.0, -1.0]]), torch.ones(1, 2), torch.tensor([2.0, -2.0]),
            ...     torch.tensor([0.5, -0.5]), torch.tensor([0.5, -0.5]), "hook", None)
            >>> dictionary.shares(), dictionary.term_shares()  # margins cancel: still defined
            (tensor([0.5000]), {'decoder_bias': 0.25, 'error': 0.25})
        """
        terms = {"decoder_bias": self.decoder_bias, "error": self.error}
        return {name: float(self._signed_share(t[None])[0]) for name, t in terms.items()}

    def _signed_share(self, parts: Tensor) -> Tensor:
        separation = self.margins.abs().sum()
        if float(separation) == 0.0:
            return torch.full((parts.shape[0],), float("nan"))
        return (parts * self.margins.sign()).sum(1) / separation

    def terms(self) -> dict[str, float]:
        """The mean decoder-bias and error contributions over pairs.

        Returns:
            `{"decoder_bias": ..., "error": ...}`.

        Examples:
            >>> import torch
            >>> dictionary = DifferenceDictionary(
            ...     torch.tensor([[1.0, 1.0]]), torch.ones(1, 2), torch.tensor([2.0, 1.0]),
            ...     torch.tensor([0.5, 0.5]), torch.tensor([0.5, -0.5]),
            ...     "ln_final.hook_normalized", None)
            >>> dictionary.terms()
            {'decoder_bias': 0.5, 'error': 0.0}
        """
        return {"decoder_bias": float(self.decoder_bias.mean()), "error": float(self.error.mean())}

    def top_features(self, k: int = 10) -> list[int]:
        """The indices of the `k` latents with the largest |mean contribution|.

        Args:
            k: How many latents.

        Returns:
            The latent indices, largest first.

        Examples:
            >>> import torch
            >>> dictionary = DifferenceDictionary(
            ...     torch.tensor([[0.5], [-2.0], [1.0]]), torch.ones(3, 1), torch.tensor([-0.5]),
            ...     torch.zeros(1), torch.zeros(1), "ln_final.hook_normalized", None)
            >>> dictionary.top_features(2)
            [1, 2]
        """
        mean = self.values.mean(1)
        return mean.abs().argsort(descending=True, stable=True)[: max(int(k), 0)].tolist()

    def to_dataframe(self):
        """One row per latent: mean contribution, share of the separation, fraction active.

        Returns:
            A pandas DataFrame with columns `feature`, `contribution`, `share`, `active`.
        """
        import pandas as pd

        return pd.DataFrame(
            {
                "feature": [feature_label(i) for i in range(self.values.shape[0])],
                "contribution": self.values.mean(1).tolist(),
                "share": self.shares().tolist(),
                "active": (self.activations > 0).float().mean(1).tolist(),
            }
        )

    def top_k(self, k: int = 10) -> TopK:
        """The `k` latents with the largest |mean contribution to the margin|.

        Args:
            k: How many latents.

        Returns:
            The labelled top entries.
        """
        mean = self.values.mean(1)
        top = self.top_features(k)
        return top_entries(
            [feature_label(i) for i in top], [float(mean[i]) for i in top], k, "contribution"
        )

    def plot(self, ax: Axes | None = None, k: int = 12, *, backend: Backend | None = None) -> Any:
        """The top `k` latents' mean contribution to the margin, labelled with their share.

        Latents are red where they lower the margin, blue where they raise it; the decoder-bias
        and error terms are grey, below them. Each label carries the latent's share of the
        separation (`shares`); hover shows the exact value.

        Args:
            ax: Matplotlib axes to draw the static form on.
            k: How many latents.
            backend: `"plotly"` or `"matplotlib"` (see `reward_lens_tl.plotting`).

        Returns:
            The figure (not shown).

        Examples:
            >>> import torch
            >>> dictionary = DifferenceDictionary(
            ...     torch.tensor([[1.0], [2.0]]), torch.ones(2, 1), torch.tensor([4.0]),
            ...     torch.tensor([0.5]), torch.tensor([0.5]), "ln_final.hook_normalized", None)
            >>> list(dictionary.plot().layout.yaxis.ticktext)
            ['f1 (50%)', 'f0 (25%)', 'decoder bias (12%)', 'error (12%)']
        """
        shares = self.shares()
        mean = self.values.mean(1)
        top = self.top_features(k)
        term_shares = self.term_shares()
        labels = [f"{feature_label(i)} ({_percent(float(shares[i]))})" for i in top]
        values = [float(mean[i]) for i in top]
        colors = [signed_color(v) for v in values]
        for name, term in (("decoder bias", self.decoder_bias), ("error", self.error)):
            share = term_shares["decoder_bias" if name == "decoder bias" else "error"]
            labels.append(f"{name} ({_percent(share)})")
            values.append(float(term.mean()))
            colors.append(GREY)
        n = self.values.shape[1]
        which = "" if self.objective is None else f" · objective {self.objective}"
        fig = bar(
            labels,
            values,
            xaxis="mean contribution to the margin (reward units)",
            colors=colors,
            title=(
                f"difference dictionary · {self.hook_name}{which} · mean margin "
                f"{float(self.margins.mean()):+.3g} over {n} pair{'s' * (n != 1)}"
            ),
        )
        return render(fig, backend, ax)


def _percent(share: float) -> str:
    return "n/a" if share != share else f"{100 * share:.0f}%"


def _column(model, objective: Objective) -> int:
    """The head column whose margin is linear in the difference; a typed error otherwise."""
    gated = getattr(model, "gating", None) is not None
    if gated and objective in (None, "score"):
        raise AmbiguousObjectiveError(
            "the gated score reads chosen and rejected along different directions (each side's "
            "own gate mixes the objectives), so its margin is not a function of their "
            f"difference: pass objective= one of {model.objective_names}"
        )
    if objective is None and model.n_objectives > 1:
        raise AmbiguousObjectiveError(
            f"this head has {model.n_objectives} objectives {model.objective_names}: pass "
            "objective=<name or index>"
        )
    col = objective_index(model, objective)
    if col is None:
        raise AmbiguousObjectiveError(
            "this model's score is not linear in its final residual: pass objective= one of "
            f"the head's columns {model.objective_names}"
        )
    return col


@torch.no_grad()
def difference_dictionary(
    model, sae, pairs: Sequence, *, objective: Objective = None, batch_size: int = 16
) -> DifferenceDictionary:
    """Split every pair's margin over a difference SAE's latents, exactly.

    The SAE must read `ln_final.hook_normalized` (`train_difference_sae`'s default), where
    `margin = d · w` with `w` the effective head's column: each latent contributes
    `a_f(d) (v_f · w)`, the decoder bias `b_dec · w` and the error `(d − d̂) · w`. The margins
    are the model's own (the head's outputs at the reading tokens, chosen − rejected).

    Args:
        model: The reward model.
        sae: The difference SAE (an sae_lens SAE, or a `TrainedSAE`).
        pairs: Preference or contrast pairs (see `reading_activations`).
        objective: The head column (name or index) for a multi-objective head; needed for a
            gated (ArmoRM-style) model, whose score has no single direction.
        batch_size: Pairs per forward pass.

    Returns:
        The `DifferenceDictionary`.

    Raises:
        SAESiteError: If the SAE does not read `ln_final.hook_normalized`, or its width is not
            `d_model`.
        AmbiguousObjectiveError: For a gated score or a multi-objective head without
            `objective=`.
        EmptyInputError: If there are no pairs.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import difference_dictionary, train_difference_sae
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> pairs = load_task().task.contrast_pairs("topic_match", 64, seed=0)
        >>> sae = train_difference_sae(model, pairs, d_sae=16, k=2, steps=100, batch_size=32).sae
        >>> dictionary = difference_dictionary(model, sae, pairs)
        >>> dictionary.values.shape, dictionary.completeness_error() < 1e-4
        (torch.Size([16, 64]), True)
        >>> [(f, round(v, 2)) for f, v in dictionary.top_k(2)]  # carrying an on-topic word's +2
        [('f9', 1.01), ('f10', 0.98)]
        >>> round(dictionary.terms()["decoder_bias"], 2)  # trained on ±d: the bias carries ~0
        -0.01
    """
    sae = sae.sae if isinstance(sae, TrainedSAE) else sae
    hook = sae_hook_name(sae)
    if hook != DIFFERENCE_SITE:
        raise SAESiteError(
            f"this SAE reads {hook!r}; a margin is exactly linear in chosen − rejected only at "
            f"the final norm's output: train the SAE at {DIFFERENCE_SITE!r} "
            "(train_difference_sae's default)"
        )
    if sae.cfg.d_in != model.cfg.d_model:
        raise SAESiteError(
            f"the SAE has d_in={sae.cfg.d_in}, the model d_model={model.cfg.d_model}"
        )
    col = _column(model, objective)
    check_hook(model, hook)
    chosen, rejected, heads_c, heads_r = _readings(model, pairs, hook, batch_size)
    W, _ = effective_head(model)
    w = W[:, col].detach().float().cpu()
    sae_cpu_dtype = sae.W_dec.dtype
    d = chosen - rejected
    device = sae.W_dec.device
    z = sae.encode(d.to(device, sae_cpu_dtype)).float().cpu()
    directions = decoder_directions(sae).detach().float().cpu()
    b_dec = sae.b_dec.detach().float().cpu()
    recon = z @ directions + b_dec
    per_latent = directions @ w  # [feature]
    values = (z * per_latent).T.contiguous()
    margins = heads_c[:, col] - heads_r[:, col]
    return DifferenceDictionary(
        values=values,
        activations=z.T.contiguous(),
        margins=margins,
        decoder_bias=(b_dec @ w).expand(d.shape[0]).clone(),
        error=(d - recon) @ w,
        hook_name=hook,
        objective=objective,
    )


@dataclass(frozen=True)
class PlantedMatch(Result):
    """Which planted directions an SAE's decoder recovers, and which alive latents none explains.

    Each alive latent (it fires on the activations given) is assigned to the planted direction
    its decoder direction has the largest |cos| with; it *explains* that feature when the |cos|
    reaches `threshold`. A planted feature is *matched* when some latent explains it, and an
    alive latent is *unexplained* when it explains none. The assignment matters when planted
    directions are close to each other (on the zoo's final norm output they share much of the
    reward direction): a latent then counts for one feature only.

    Attributes:
        features: The planted features.
        cosines: Cosine of every latent's decoder direction with every planted direction,
            `[feature, latent]`.
        alive: Whether each latent fires on the activations given (all `True` without them).
        threshold: The smallest |cos| that counts as a match.
        hook_name: The SAE's site.

    Examples:
        >>> import torch
        >>> match = PlantedMatch(
        ...     features=("a", "b"),
        ...     cosines=torch.tensor([[0.95, -0.1, 0.2, 0.85], [0.1, -0.85, 0.3, 0.9]]),
        ...     alive=torch.tensor([True, True, True, True]), threshold=0.8, hook_name="site")
        >>> match.matched, match.explained_latents(), match.n_unexplained
        ([True, True], [0, 1, 3], 1)
        >>> match.to_dataframe()  # latent 3 is closer to b: it explains b only
          feature  latent  cosine  matched  n_latents
        0       a       0    0.95     True          1
        1       b       3    0.90     True          2
    """

    label_column = "feature"
    value_column = "cosine"

    features: tuple[str, ...]
    cosines: Float[Tensor, "feature latent"]
    alive: Tensor
    threshold: float
    hook_name: str

    def _alive_abs(self) -> Tensor:
        return self.cosines.abs() * self.alive[None].to(self.cosines)

    def assignment(self) -> Tensor:
        """Each latent's planted feature (by largest |cos|), or -1 if it explains none.

        Dead latents explain none.

        Returns:
            The feature index of each latent, `[latent]`.

        Examples:
            >>> import torch
            >>> PlantedMatch(("a",), torch.tensor([[0.9, 0.5]]), torch.tensor([True, True]),
            ...              0.8, "site").assignment()
            tensor([ 0, -1])
        """
        size = self._alive_abs()
        best = size.argmax(0)
        return torch.where(size.max(0).values >= self.threshold, best, torch.full_like(best, -1))

    def best(self) -> tuple[list[int], list[float]]:
        """Per planted feature, its best explaining latent and that latent's (signed) cosine.

        Without one, the alive latent with the largest |cos| with it.

        Returns:
            The latents and their cosines.

        Examples:
            >>> import torch
            >>> PlantedMatch(("a",), torch.tensor([[0.9, -0.95]]), torch.tensor([True, True]),
            ...              0.8, "site").best()
            ([1], [-0.949999988079071])
        """
        size, owner = self._alive_abs(), self.assignment()
        latents = []
        for j in range(len(self.features)):
            mine = torch.where(owner == j, size[j], torch.full_like(size[j], -1.0))
            latents.append(int((mine if bool((owner == j).any()) else size[j]).argmax()))
        return latents, [float(self.cosines[j, i]) for j, i in enumerate(latents)]

    @property
    def matched(self) -> list[bool]:
        """Whether each planted feature is explained by an alive latent."""
        owner = self.assignment()
        return [bool((owner == j).any()) for j in range(len(self.features))]

    @property
    def n_matched(self) -> int:
        """How many planted features are matched."""
        return sum(self.matched)

    def explained_latents(self) -> list[int]:
        """The alive latents that explain some planted feature.

        Returns:
            Their indices, ascending.

        Examples:
            >>> import torch
            >>> PlantedMatch(("a",), torch.tensor([[0.9, 0.5]]), torch.tensor([True, True]),
            ...              0.8, "site").explained_latents()
            [0]
        """
        return (self.assignment() >= 0).nonzero().flatten().tolist()

    @property
    def n_alive(self) -> int:
        """How many latents fire on the activations given."""
        return int(self.alive.sum())

    @property
    def n_unexplained(self) -> int:
        """How many alive latents explain no planted feature."""
        return self.n_alive - len(self.explained_latents())

    def to_dataframe(self):
        """One row per planted feature: its best latent, that cosine, matched, how many explain it.

        Returns:
            A pandas DataFrame.
        """
        import pandas as pd

        latents, cosines = self.best()
        owner = self.assignment()
        return pd.DataFrame(
            {
                "feature": list(self.features),
                "latent": latents,
                "cosine": [round(c, 6) for c in cosines],
                "matched": self.matched,
                "n_latents": [int((owner == j).sum()) for j in range(len(self.features))],
            }
        )

    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """Bars of each planted feature's best |cos| with a decoder direction (`best`).

        Blue where the feature is matched, grey where not.

        Args:
            ax: Matplotlib axes to draw the static form on.
            backend: `"plotly"` or `"matplotlib"` (see `reward_lens_tl.plotting`).

        Returns:
            The figure (not shown).

        Examples:
            >>> import torch
            >>> match = PlantedMatch(("a", "b"), torch.tensor([[0.9, 0.1], [0.2, 0.5]]),
            ...                      torch.tensor([True, True]), 0.8, "site")
            >>> list(match.plot().layout.yaxis.ticktext)
            ['a (f0)', 'b (f1)']
        """
        latents, cosines = self.best()
        owner = self.assignment()
        labels = [
            f"{f} ({feature_label(i)})"
            if hit or int(owner[i]) < 0
            else f"{f} ({feature_label(i)}, explains {self.features[int(owner[i])]})"
            for f, i, hit in zip(self.features, latents, self.matched, strict=True)
        ]
        values = [abs(c) for c in cosines]
        colors = [BLUE if hit else GREY for hit in self.matched]
        fig = bar(
            labels,
            values,
            xaxis="best |cos| of a decoder direction with the planted direction",
            colors=colors,
            title=(
                f"planted features matched: {self.n_matched} of {len(self.features)} at "
                f"|cos| ≥ {self.threshold:g} · unexplained alive latents: {self.n_unexplained} "
                f"of {self.n_alive}"
            ),
        )
        return render(fig, backend, ax)


def planted_match(
    sae,
    planted_directions: Mapping[str, Tensor],
    threshold: float = 0.8,
    *,
    activations: Tensor | None = None,
) -> PlantedMatch:
    """Match an SAE's decoder directions to planted directions by |cosine| (`PlantedMatch`).

    Each alive latent explains the planted feature it is closest to, if its |cos| reaches
    `threshold`; matched features and unexplained latents follow.

    Args:
        sae: The SAE (an sae_lens SAE, or a `TrainedSAE`).
        planted_directions: One direction per planted feature, `[d_in]` each (e.g.
            `zoo_planted_directions`).
        threshold: The smallest |cos| that counts as a match.
        activations: Rows the SAE encodes to find its alive latents (`[rows, d_in]`; every
            latent counts as alive without them).

    Returns:
        The `PlantedMatch`.

    Raises:
        EmptyInputError: If there are no planted directions.
        InvalidArgumentError: If `threshold` is not in (0, 1], or a direction's width is not
            the SAE's.

    Examples:
        >>> import torch
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import decoder_directions, planted_match
        >>> from reward_lens_tl.sae.testing import random_topk_sae
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> sae = random_topk_sae(model, "ln_final.hook_normalized", d_sae=16, k=2)
        >>> planted = {"a": decoder_directions(sae)[3].detach() * 2, "b": torch.ones(64)}
        >>> match = planted_match(sae, planted)
        >>> match.matched, match.best()[0][0]  # "a" is latent 3's direction
        ([True, False], 3)
    """
    sae = sae.sae if isinstance(sae, TrainedSAE) else sae
    if not planted_directions:
        raise EmptyInputError("no planted directions to match")
    if not 0.0 < float(threshold) <= 1.0:
        raise InvalidArgumentError(f"threshold must be in (0, 1], got {threshold!r}")
    directions = decoder_directions(sae).detach().float().cpu()
    names = tuple(planted_directions)
    planted = []
    for name in names:
        v = torch.as_tensor(planted_directions[name]).detach().float().cpu().flatten()
        if v.shape[0] != directions.shape[1]:
            raise InvalidArgumentError(
                f"the planted direction {name!r} has width {v.shape[0]}, the SAE d_in "
                f"{directions.shape[1]}"
            )
        planted.append(v)
    cosines = F.cosine_similarity(torch.stack(planted)[:, None], directions[None], dim=-1)
    if activations is None:
        alive = torch.ones(directions.shape[0], dtype=torch.bool)
    else:
        with torch.no_grad():
            acts = activations.to(sae.W_dec.device, sae.W_dec.dtype)
            alive = (sae.encode(acts) > 0).any(0).cpu()
    return PlantedMatch(
        features=names,
        cosines=cosines,
        alive=alive,
        threshold=float(threshold),
        hook_name=sae_hook_name(sae),
    )


def zoo_planted_directions(
    model,
    task,
    *,
    hook: str | None = None,
    n: int = 64,
    seed: int = 0,
    features: Sequence[str] = ZOO_FEATURES,
    batch_size: int = 16,
) -> dict[str, Float[Tensor, " d"]]:
    """One direction per planted feature: the mean of `edited − base` over its contrast pairs.

    Read at `hook` at the reading token, the same rows a difference SAE is trained on
    (`difference_activations`); the same vector as `concept_vectors(model, pairs,
    at="reward")` at that site.

    Args:
        model: The zoo reward model.
        task: The zoo task (`load_task().task`).
        hook: The hook (default `ln_final.hook_normalized`).
        n: Contrast pairs per feature.
        seed: Their seed.
        features: The planted features.
        batch_size: Pairs per forward pass.

    Returns:
        The directions by feature, `[d]` each.

    Raises:
        InvalidArgumentError: If `n` is not positive.

    Examples:
        >>> import torch
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.readout import effective_head
        >>> from reward_lens_tl.sae import zoo_planted_directions
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> planted = zoo_planted_directions(model, load_task().task, n=16)
        >>> w = effective_head(model)[0][:, 0].detach()
        >>> {f: round(float(v @ w), 1) for f, v in planted.items()}  # each one's mean margin
        {'topic_match': 2.0, 'harmful': -3.0, 'length': 0.5, 'sycophancy': 2.4}
    """
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise InvalidArgumentError(f"n must be a positive int, got {n!r}")
    return {
        feature: difference_activations(
            model, task.contrast_pairs(feature, n, seed), hook=hook, batch_size=batch_size
        ).mean(0)
        for feature in features
    }
