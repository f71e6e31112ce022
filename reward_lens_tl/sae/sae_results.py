"""Result objects of the SAE analyses.

Frozen dataclasses with `to_dataframe()`, `plot()` and `top_k()`. `plot()` returns an
interactive plotly figure (hover shows each mark's label and exact value), or its static
matplotlib form with `plot(backend="matplotlib")` or `plot(ax=some_axes)`; it is never shown.

Features are labelled `f{index}`; values are kept as tensors with their labels, the
feature (or coefficient) axis first and the example axis second: `values [feature, example]`.

Examples:
    >>> import torch
    >>> attr = FeatureAttribution(  # three features, one example
    ...     values=torch.tensor([[0.5], [-2.0], [0.0]]),
    ...     activations=torch.tensor([[1.0], [2.0], [0.0]]),
    ...     rewards=torch.tensor([-1.0]), hook_name="blocks.1.hook_resid_post", method="direct",
    ...     error=torch.tensor([0.25]), decoder_bias=torch.tensor([0.125]),
    ...     head_bias=torch.tensor([0.125]))
    >>> attr.top_k(2), attr.completeness_error()
    ([('f1', -2.0), ('f0', 0.5)], 0.0)
    >>> fig = attr.plot(k=2)  # the two top features, then the three other terms
    >>> list(fig.layout.yaxis.ticktext), fig.data[0].x.tolist()
    (['f1', 'f0', 'error', 'decoder_bias', 'head_bias'], [-2.0, 0.5, 0.25, 0.125, 0.125])
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING, Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..errors import RewardLensError, UsageError
from ..plotting import BLUE, GREY, PLOT_DOC, SIGNED, Backend, bar, line, render, scatter
from ..results import (
    MarginResult,
    Result,
    TopK,
    axes,
    bar_chart,
    signed_color,
    tidy_frame,
    top_entries,
)
from ..signatures import pasted_docs

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "AtPCheck",
    "ConceptVectors",
    "FeatureAttribution",
    "FeatureContexts",
    "FeatureEffects",
    "GroundTruthReport",
    "PairFeatureAttribution",
    "SteeringCurve",
]


def feature_label(index: int) -> str:
    """The label of a feature.

    Args:
        index: The feature's index.

    Returns:
        The label `f{index}`.
    """
    return f"f{int(index)}"


@dataclass(frozen=True)
class FeatureAttribution(Result):
    """Each SAE latent's contribution to the reward, `values [feature, example]`.

    `method="direct"` (an SAE on the final residual): the exact direct effect
    `activation × decoder row · u` at the reward position, and
    `values.sum(0) + error + decoder_bias + head_bias == rewards`.
    `method="atp"` (any site): attribution patching, `Σ_pos ∂reward/∂a · a`, the linear
    estimate of `reward − reward(latent zeroed)`; there are no bias terms and no completeness.
    `activations` is the latent activation at the reward position (direct) or summed over the
    non-padding positions (atp); `[feature, example]` too.

    Attributes:
        values: Each feature's contribution, `[feature, example]`.
        activations: The latent activations, `[feature, example]`.
        rewards: The rewards, `[example]`.
        hook_name: The hook the SAE reads.
        method: `"direct"` or `"atp"`.
        error: The SAE error term's contribution (direct only).
        decoder_bias: The decoder bias's contribution (direct only).
        head_bias: The reward head's bias (direct only).

    Examples:
        >>> import torch
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import feature_attribution
        >>> from reward_lens_tl.sae.testing import random_topk_sae
        >>> from reward_lens_tl.testing import random_batch, tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> sae = random_topk_sae(model, "blocks.1.hook_resid_post", d_sae=32, k=4)
        >>> ids, mask = random_batch(2, [9, 6])
        >>> attr = feature_attribution(model, sae, ids, mask)
        >>> terms = attr.terms()
        >>> total = attr.values.sum(0) + terms["error"] + terms["decoder_bias"] + terms["head_bias"]
        >>> torch.allclose(total, attr.rewards, atol=1e-5)  # the terms sum to the reward
        True
        >>> attr.to_dataframe(k=2).round(3)
           example feature  contribution  activation
        0        0      f2        -0.626       1.155
        1        0      f6         0.000       0.000
        2        1      f2        -0.000       0.000
        3        1      f6         0.198       0.632
    """

    example_axes = axes(values=1, activations=1, rewards=0, error=0, decoder_bias=0, head_bias=0)

    values: Float[Tensor, "feature example"]
    activations: Float[Tensor, "feature example"]
    rewards: Float[Tensor, " example"]
    hook_name: str
    method: str
    error: Float[Tensor, " example"] | None = None
    decoder_bias: Float[Tensor, " example"] | None = None
    head_bias: Float[Tensor, " example"] | None = None

    def total(self) -> Float[Tensor, " example"]:
        """Σ features + error + decoder bias + head bias (direct attributions only).

        Returns:
            The total per example.

        Raises:
            RewardLensError: If this is not a direct attribution.
        """
        if self.method != "direct":
            raise RewardLensError(
                "attribution patching estimates effects; it has no exact decomposition: use "
                "feature_attribution on a final-residual SAE for one"
            )
        error, decoder_bias, head_bias = self.terms().values()
        return self.values.sum(0) + error + decoder_bias + head_bias

    def completeness_error(self) -> float:
        """Max |Σ terms − reward| (≤ 1e-4 in float32).

        Returns:
            The largest completeness error over examples.
        """
        return float((self.total() - self.rewards).abs().max())

    def terms(self) -> dict[str, Tensor]:
        """The non-feature terms of a direct attribution.

        Returns:
            The terms by name (empty for attribution patching).

        Raises:
            UsageError: If the attribution was built without its terms.
        """
        if self.method != "direct":
            return {}
        terms = {
            "error": self.error,
            "decoder_bias": self.decoder_bias,
            "head_bias": self.head_bias,
        }
        missing = [name for name, term in terms.items() if term is None]
        if missing:
            raise UsageError(f"this direct attribution was built without its {missing} terms")
        return {name: term for name, term in terms.items() if term is not None}

    def top_k(self, k: int = 10, example: int | None = None) -> TopK:
        """The top features by |value|.

        The `k` features with the largest |value| for one example, or the largest |mean
        value| over examples, shown with that (signed) value.

        Args:
            k: How many features.
            example: The example, or `None` for the mean over examples.

        Returns:
            The labelled top entries.
        """
        vals = self._per_feature(example)
        return top_entries(
            [feature_label(i) for i in self._top(k, example)],
            [float(vals[i]) for i in self._top(k, example)],
            k,
            "contribution",
        )

    def _per_feature(self, example: int | None) -> Float[Tensor, " feature"]:
        return self.values[:, example] if example is not None else self.values.mean(1)

    def _top(self, k: int, example: int | None) -> list[int]:
        return self._per_feature(example).abs().argsort(descending=True, stable=True)[:k].tolist()

    def top_features(self, k: int = 10, example: int | None = None) -> list[int]:
        """Indices of the `top_k` features.

        Args:
            k: How many features.
            example: The example, or `None` for the mean over examples.

        Returns:
            The feature indices, largest first.
        """
        return self._top(k, example)

    def __sub__(self, other: FeatureAttribution) -> FeatureAttribution:
        """Difference of two attributions (chosen − rejected = margin attribution).

        Args:
            other: The attribution to subtract.

        Returns:
            The difference.

        Raises:
            RewardLensError: If the sites or methods differ.
        """
        if self.method != other.method or self.hook_name != other.hook_name:
            raise RewardLensError("cannot subtract attributions of different sites or methods")

        def diff(a, b):
            return None if a is None or b is None else a - b

        return FeatureAttribution(
            values=self.values - other.values,
            activations=self.activations - other.activations,
            rewards=self.rewards - other.rewards,
            hook_name=self.hook_name,
            method=self.method,
            error=diff(self.error, other.error),
            decoder_bias=diff(self.decoder_bias, other.decoder_bias),
            head_bias=diff(self.head_bias, other.head_bias),
        )

    def to_dataframe(self, k: int | None = 20):
        """One row per (example, feature) for the top-`k` features (all with `k=None`).

        Args:
            k: How many features, or `None` for all.

        Returns:
            A pandas DataFrame.
        """
        import pandas as pd

        feats = range(self.values.shape[0]) if k is None else self.top_features(k)
        rows = [
            {
                "example": e,
                "feature": feature_label(f),
                "contribution": float(self.values[f, e]),
                "activation": float(self.activations[f, e]),
            }
            for e in range(self.values.shape[1])
            for f in feats
        ]
        return pd.DataFrame(rows)

    def plot(
        self,
        ax: Axes | None = None,
        k: int = 15,
        example: int | None = None,
        *,
        backend: Backend | None = None,
    ) -> Any:
        """Bars of the top-`k` features' contributions and, if direct, the other terms.

        Features are red where they lower the reward and blue where they raise it; the
        error, decoder-bias and head-bias terms of a direct attribution are grey, below them.
        Hover shows each bar's exact value.

        Args:
            ax: Matplotlib axes to draw the static form on.
            k: How many features.
            example: The example, or `None` for the mean over examples.
            backend: `"plotly"` or `"matplotlib"` (see `reward_lens_tl.plotting`).

        Returns:
            The figure (not shown).
        """
        top = list(self.top_k(k, example))
        colors = [signed_color(v) for _, v in top]
        if self.method == "direct":
            pick = (lambda t: t[example]) if example is not None else (lambda t: t.mean())
            terms = [(name, float(pick(t))) for name, t in self.terms().items()]
            top += terms
            colors += [GREY] * len(terms)
        what = "direct effect" if self.method == "direct" else "AtP estimate"
        which = f"example {example}" if example is not None else self._mean_of()
        fig = bar_chart(
            top,
            f"{what} on the reward (reward units)",
            colors=colors,
            title=f"SAE latents' {what} · {self.hook_name} · {which}",
        )
        return render(fig, backend, ax)

    def _mean_of(self) -> str:
        n = self.values.shape[1]
        return "1 example" if n == 1 else f"mean over {n} examples"


@dataclass(frozen=True)
class PairFeatureAttribution(MarginResult):
    """Feature attribution of chosen and rejected responses; `.margin` is their difference.

    Attributes:
        chosen: The chosen responses' attribution.
        rejected: The rejected responses' attribution.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import pair_feature_attribution
        >>> from reward_lens_tl.sae.testing import random_topk_sae
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> pairs = load_task().task.contrast_pairs("harmful", 4, seed=0)  # (edited, base)
        >>> sae = random_topk_sae(model, "blocks.2.hook_resid_post", d_sae=32, k=4)
        >>> attr = pair_feature_attribution(model, sae, pairs)
        >>> attr.chosen.rewards.round(decimals=2)  # the edited sides, with a harmful word
        tensor([  3.1500,   1.1100, -11.5300,   1.5200])
        >>> attr.rejected.rewards.round(decimals=2)  # the base sides
        tensor([ 6.2300,  4.1100, -8.6800,  4.4800])
        >>> attr.margin.rewards.round(decimals=2)  # chosen − rejected: the harmful word's cost
        tensor([-3.0800, -3.0000, -2.8500, -2.9700])
    """

    example_axes = axes(chosen=0, rejected=0)

    chosen: FeatureAttribution
    rejected: FeatureAttribution


@dataclass(frozen=True)
class FeatureEffects(Result):
    """Measured reward changes of an intervention per feature.

    `values [feature, example]`, e.g. `reward − reward(feature ablated)`.

    Attributes:
        features: The features intervened on.
        values: The reward changes, `[feature, example]`.
        intervention: The intervention's name.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import latent_ablation
        >>> from reward_lens_tl.sae.testing import random_topk_sae
        >>> from reward_lens_tl.testing import random_batch, tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> sae = random_topk_sae(model, "blocks.1.hook_resid_post", d_sae=32, k=4)
        >>> ids, mask = random_batch(2, [9, 6])
        >>> effects = latent_ablation(model, sae, ids, mask, [2, 6], positions="reward")
        >>> effects.labels, effects.intervention
        (('f2', 'f6'), 'reward − ablated')
        >>> effects.to_dataframe().round(3)
          feature  example  reward − ablated
        0      f2        0            -0.526
        1      f2        1             0.000
        2      f6        0             0.000
        3      f6        1             0.214
    """

    example_axes = axes(values=1)

    features: tuple[int, ...]
    values: Float[Tensor, "feature example"]
    intervention: str

    @property
    def labels(self) -> tuple[str, ...]:
        """The features' labels."""
        return tuple(feature_label(f) for f in self.features)

    def mean(self) -> Float[Tensor, " feature"]:
        """The mean effect of each feature over examples."""
        return self.values.mean(1)

    def top_k(self, k: int = 10) -> TopK:
        """Features with the largest |mean effect| over examples, shown with the mean.

        Args:
            k: How many features.

        Returns:
            The labelled top entries.
        """
        return top_entries(self.labels, self.values.mean(1).tolist(), k, self.intervention)

    def to_dataframe(self):
        """One row per (feature, example)."""
        return tidy_frame(self.values, self.labels, "feature", self.intervention)

    def plot(self, ax: Axes | None = None, k: int = 15, *, backend: Backend | None = None) -> Any:
        """Bars of the top-`k` features' mean effects (red: negative, blue: positive).

        Args:
            ax: Matplotlib axes to draw the static form on.
            k: How many features.
            backend: `"plotly"` or `"matplotlib"` (see `reward_lens_tl.plotting`).

        Returns:
            The figure (not shown).
        """
        n = self.values.shape[1]
        fig = bar_chart(
            self.top_k(k),
            f"{self.intervention} (reward units)",
            colors=SIGNED,
            title=f"Latent intervention: {self.intervention} · "
            + ("1 example" if n == 1 else f"mean over {n} examples"),
        )
        return render(fig, backend, ax)


@dataclass(frozen=True)
class AtPCheck(Result):
    """Attribution patching over latents against real latent ablation, for the top features.

    `estimate[feature, example]` is `Σ_pos ∂r/∂a · a`; `actual` is
    `reward − reward(latent zeroed at every position)`, with the SAE's error term kept.

    Attributes:
        features: The features checked.
        estimate: The attribution patching estimates, `[feature, example]`.
        actual: The ablation effects, `[feature, example]`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import atp_check
        >>> from reward_lens_tl.sae.testing import random_topk_sae
        >>> from reward_lens_tl.testing import random_batch, tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> sae = random_topk_sae(model, "blocks.0.hook_resid_post", d_sae=32, k=4)
        >>> ids, mask = random_batch(2, [9, 6])
        >>> check = atp_check(model, sae, ids, mask, k=3)
        >>> check.to_dataframe().round(3)
          feature  atp_mean  ablation_mean
        0      f6     0.128          0.134
        1      f5     0.103          0.115
        2     f20     0.083          0.089
        >>> {name: round(value, 3) for name, value in check.summary().items()}
        {'features': 3, 'pearson': 0.998, 'sign_agreement': 1.0, 'relative_error': 0.081}
    """

    label_column, value_column = "feature", "ablation_mean"
    example_axes = axes(estimate=1, actual=1)

    features: tuple[int, ...]
    estimate: Float[Tensor, "feature example"]
    actual: Float[Tensor, "feature example"]

    def pearson(self) -> float:
        """Correlation of estimate and actual over all (feature, example) cells."""
        a, b = self.estimate.flatten(), self.actual.flatten()
        a, b = a - a.mean(), b - b.mean()
        return float((a * b).sum() / (a.norm() * b.norm()).clamp_min(1e-12))

    def sign_agreement(self, min_effect: float = 1e-3) -> float:
        """Share of cells with |actual| ≥ `min_effect` whose signs agree.

        Args:
            min_effect: The smallest |actual| counted.

        Returns:
            The share (NaN if no cell counts).
        """
        keep = self.actual.abs() >= min_effect
        if not bool(keep.any()):
            return float("nan")
        return float((self.estimate[keep].sign() == self.actual[keep].sign()).float().mean())

    def relative_error(self) -> float:
        """‖estimate − actual‖ / ‖actual‖ over all cells."""
        return float((self.estimate - self.actual).norm() / self.actual.norm().clamp_min(1e-12))

    def summary(self) -> dict[str, float]:
        """The number of features, correlation, sign agreement and relative error."""
        return {
            "features": len(self.features),
            "pearson": self.pearson(),
            "sign_agreement": self.sign_agreement(),
            "relative_error": self.relative_error(),
        }

    def to_dataframe(self):
        """One row per feature: the mean estimate and the mean ablation effect."""
        import pandas as pd

        return pd.DataFrame(
            {
                "feature": [feature_label(f) for f in self.features],
                "atp_mean": self.estimate.mean(1).numpy(),
                "ablation_mean": self.actual.mean(1).numpy(),
            }
        )

    @pasted_docs(plot=PLOT_DOC)
    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """The estimates against the ablation effects, one point per (feature, example).

        The dashed line is estimate = actual; the title gives their correlation. Hover shows
        each point's feature, example and both values.

        {plot}
        """
        n = self.actual.shape[1]
        labels = [f"{feature_label(f)}, example {e}" for f in self.features for e in range(n)]
        fig = scatter(
            {"latent": (self.actual.flatten(), self.estimate.flatten())},
            xaxis="reward − reward(latent ablated)",
            yaxis="attribution patching estimate",
            title=f"Attribution patching vs latent ablation · r = {self.pearson():#.3g}",
            labels={"latent": labels},
            diagonal=True,
        )
        return render(fig, backend, ax)


@dataclass(frozen=True)
class SteeringCurve(Result):
    """Rewards `[coefficient, example]` when `coefficient × direction` is added.

    Attributes:
        label: The direction's name.
        coefficients: The steering coefficients.
        rewards: The rewards, `[coefficient, example]`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import feature_steering
        >>> from reward_lens_tl.sae.testing import random_topk_sae
        >>> from reward_lens_tl.testing import random_batch, tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> sae = random_topk_sae(model, "blocks.1.hook_resid_post", d_sae=32, k=4)
        >>> ids, mask = random_batch(2, [9, 6])
        >>> curve = feature_steering(model, sae, ids, mask, feature=2, coefficients=[-1, 0, 1])
        >>> curve.label, round(curve.slope(), 3)
        ('f2 @ blocks.1.hook_resid_post', -0.415)
        >>> curve.to_dataframe().round(3)
           coefficient  mean_reward  std_reward
        0         -1.0        0.766       0.179
        1          0.0        0.421       0.378
        2          1.0       -0.063       0.300
    """

    example_axes = axes(rewards=1)

    label: str
    coefficients: Float[Tensor, " coefficient"]
    rewards: Float[Tensor, "coefficient example"]

    def mean(self) -> Float[Tensor, " coefficient"]:
        """The mean reward at each coefficient."""
        return self.rewards.mean(1)

    def slope(self) -> float:
        """Least-squares slope of the mean reward against the coefficient."""
        c = self.coefficients - self.coefficients.mean()
        m = self.mean() - self.mean().mean()
        return float((c * m).sum() / (c * c).sum().clamp_min(1e-12))

    def top_k(self, k: int = 5) -> TopK:
        """Coefficients with the largest |mean reward change| from the unsteered reward.

        The unsteered reward is that at coefficient 0, or the smallest |coefficient|.

        Args:
            k: How many coefficients.

        Returns:
            The labelled top entries.
        """
        base = self.mean()[self.coefficients.abs().argmin()]
        labels = [f"{float(c):+g}" for c in self.coefficients]
        return top_entries(labels, (self.mean() - base).tolist(), k, "mean reward change")

    def to_dataframe(self):
        """One row per coefficient: the mean and standard deviation of the reward."""
        import pandas as pd

        return pd.DataFrame(
            {
                "coefficient": self.coefficients.numpy(),
                "mean_reward": self.mean().numpy(),
                "std_reward": self.rewards.std(1).numpy() if self.rewards.shape[1] > 1 else 0.0,
            }
        )

    @pasted_docs(plot=PLOT_DOC)
    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """The mean reward against the steering coefficient, ± one standard deviation.

        The band is the standard deviation over examples (none for one example); the title
        gives the least-squares slope.

        {plot}
        """
        mean, n = self.mean(), self.rewards.shape[1]
        bands = None
        if n > 1:
            std = self.rewards.std(1)
            bands = {self.label: (mean - std, mean + std)}
        fig = line(
            {self.label: mean},
            x=self.coefficients.tolist(),
            xaxis="steering coefficient",
            yaxis="reward" if n == 1 else f"mean reward ± 1 std ({n} examples)",
            title=f"Steering {self.label} · slope {self.slope():#.3g} reward per unit",
            bands=bands,
        )
        return render(fig, backend, ax)


@dataclass(frozen=True)
class Context:
    """One activating token and the window of token ids around it.

    Attributes:
        feature: The feature.
        activation: Its activation at the token.
        example: The sequence's index.
        position: The token's position.
        window: The token ids around it.
        window_start: The position of the window's first token.
    """

    feature: int
    activation: float
    example: int
    position: int
    window: tuple[int, ...]
    window_start: int

    def text(self, tokenizer=None) -> str:
        """The window as text, the activating token in `[[ ]]`.

        Args:
            tokenizer: The tokenizer, or `None` to show token ids.

        Returns:
            The text.
        """
        toks = [_token_str(t, tokenizer) for t in self.window]
        i = self.position - self.window_start
        toks[i] = f"[[{toks[i]}]]"
        return " ".join(toks)


def _token_str(token_id: int, tokenizer) -> str:
    if tokenizer is None:
        return str(token_id)
    return tokenizer.convert_ids_to_tokens(int(token_id))


@dataclass(frozen=True)
class FeatureContexts(Result):
    """The top activating contexts of some features over a set of sequences.

    Attributes:
        contexts: One tuple of contexts per feature, best first.
        features: The features.
        frequency: Each feature's share of non-padding tokens where it is active.
        tokenizer: The tokenizer used to show the contexts, if any.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import max_activating_contexts
        >>> from reward_lens_tl.sae.testing import random_topk_sae
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> sae = random_topk_sae(model, "blocks.0.hook_resid_post", d_sae=32, k=4)
        >>> seqs = [[5, 6, 7, 8, 9, 10], [11, 12, 13], [14, 15, 16, 17]]
        >>> ctx = max_activating_contexts(model, sae, seqs, features=[16], k=2, window=(2, 1))
        >>> ctx.to_dataframe().round(3)  # the context shows the token ids: no tokenizer
          feature  rank  activation  example  position       context
        0     f16     0       0.965        2         0     [[14]] 15
        1     f16     1       0.684        1         2  11 12 [[13]]
    """

    no_example_axis = "its rows are features, each ranking contexts from every sequence searched"

    contexts: tuple[tuple[Context, ...], ...]  # one tuple per feature, best first
    features: tuple[int, ...]
    frequency: Float[Tensor, " feature"]  # share of non-padding tokens where it is active
    tokenizer: object = None

    def __getitem__(self, feature: int) -> tuple[Context, ...]:
        """The contexts of one feature."""
        return self.contexts[self.features.index(feature)]

    def top_k(self, k: int = 5) -> TopK:
        """Features by their strongest activation in the contexts searched.

        Args:
            k: How many features.

        Returns:
            The labelled top entries.
        """
        return top_entries(
            [feature_label(f) for f in self.features],
            [c[0].activation if c else 0.0 for c in self.contexts],
            k,
            "max activation",
        )

    def to_dataframe(self):
        """One row per (feature, context)."""
        import pandas as pd

        rows = [
            {
                "feature": feature_label(c.feature),
                "rank": rank,
                "activation": c.activation,
                "example": c.example,
                "position": c.position,
                "context": c.text(self.tokenizer),
            }
            for ctxs in self.contexts
            for rank, c in enumerate(ctxs)
        ]
        columns = ["feature", "rank", "activation", "example", "position", "context"]
        return pd.DataFrame(rows, columns=columns)

    @pasted_docs(plot=PLOT_DOC)
    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """Bars of each feature's strongest activation in the contexts searched.

        Hover shows the feature's exact top activation, its firing frequency and its top
        context (the activating token in `[[ ]]`).

        {plot}
        """
        labels = [feature_label(f) for f in self.features]
        fig = bar(
            labels,
            [c[0].activation if c else 0.0 for c in self.contexts],
            xaxis="max activation",
            title=f"Top activation of {len(labels)} SAE latents",
            colors=BLUE,
        )
        fig.data[0].customdata = [
            f"{label} (active on {100 * float(freq):.3g}% of tokens)<br>"
            + (_context(ctxs[0], self.tokenizer) if ctxs else "never active")
            for label, freq, ctxs in zip(labels, self.frequency, self.contexts, strict=True)
        ]
        return render(fig, backend, ax)


def _context(context: Context, tokenizer) -> str:
    """A context's text for hover: escaped (hover reads HTML), at most 80 characters."""
    text = context.text(tokenizer)
    return escape(text if len(text) <= 80 else text[:79] + "…", quote=False)


@dataclass(frozen=True)
class ConceptVectors(Result):
    """Difference-of-means directions, one per site (`labels`), `directions [site, d]`.

    Attributes:
        name: The concept's name.
        labels: The sites.
        directions: The directions, `[site, d_model]`.
        n_positive: The number of positive examples.
        n_negative: The number of negative examples.
        separation: How cleanly each direction separates the two sets.
        reward_cosine: Each direction's cosine with the reward read-out's direction.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import concept_vectors
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> cv = concept_vectors(model, load_task().task.contrast_pairs("harmful", 8, seed=0))
        >>> cv.directions.shape, cv.n_positive, cv.n_negative  # [site, d_model]
        (torch.Size([4, 64]), 8, 8)
        >>> cv.to_dataframe()[["site", "separation", "cosine_with_reward"]].round(2)
                               site  separation  cosine_with_reward
        0   blocks.0.hook_resid_pre        0.00                0.00
        1  blocks.0.hook_resid_post        1.07               -0.77
        2  blocks.1.hook_resid_post        0.86               -0.79
        3  blocks.2.hook_resid_post        0.75               -0.92
    """

    no_example_axis = "its directions are means over every example of both sets"

    name: str
    labels: tuple[str, ...]
    directions: Float[Tensor, "site d_model"]
    n_positive: int
    n_negative: int
    #: projection onto the unit direction: mean over positives − mean over negatives, in
    #: pooled standard deviations (how cleanly the direction separates the two sets)
    separation: Float[Tensor, " site"]
    #: cosine with the reward read-out's effective direction (from `readout`)
    reward_cosine: Float[Tensor, " site"]

    def __getitem__(self, label: str) -> Tensor:
        """The direction at one site."""
        return self.directions[self.labels.index(label)]

    def top_k(self, k: int = 5) -> TopK:
        """Sites whose concept vector is most aligned (|cosine|) with the reward direction.

        Args:
            k: How many sites.

        Returns:
            The labelled top entries.
        """
        return top_entries(self.labels, self.reward_cosine.tolist(), k, "cosine with w_r")

    def to_dataframe(self):
        """One row per site: norm, separation and cosine with the reward direction."""
        import pandas as pd

        return pd.DataFrame(
            {
                "concept": self.name,
                "site": self.labels,
                "norm": self.directions.norm(dim=-1).numpy(),
                "separation": self.separation.numpy(),
                "cosine_with_reward": self.reward_cosine.numpy(),
            }
        )

    @pasted_docs(plot=PLOT_DOC)
    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """Each site's cosine between the concept vector and the reward direction.

        {plot}
        """
        fig = line(
            {"cos(v, w_r)": self.reward_cosine},
            x=[short_site(label) for label in self.labels],
            xaxis="site",
            yaxis="cosine with the reward direction",
            title=f"Concept “{self.name}” vs the reward direction, per site",
            zero_line=True,
            height=460,
        )
        fig.data[0].customdata = list(self.labels)  # hover: the full hook names
        return render(fig, backend, ax)


def short_site(hook_name: str) -> str:
    """A hook name as a short axis label: `blocks.3.hook_resid_post` → `L3 resid_post`.

    Args:
        hook_name: The hook's name.

    Returns:
        The label.

    Examples:
        >>> short_site("blocks.3.hook_resid_post"), short_site("hook_embed")
        ('L3 resid_post', 'embed')
    """
    return re.sub(r"^blocks\.(\d+)\.", r"L\1 ", hook_name).replace("hook_", "")


@dataclass(frozen=True)
class GroundTruthRow:
    """One planted feature: the latent that matches it (see `zoo_features`).

    Attributes:
        feature: The planted feature.
        hook_name: The hook the SAE reads.
        d_sae: The SAE's width.
        metric: The correlation used to select latents.
        latent: The matching latent.
        correlation: Its correlation under `metric`.
        token_correlation: Its per-token correlation with the indicator.
        sequence_correlation: Its per-sequence correlation with the contribution.
        reward_token_correlation: Its correlation, at the reward token, with the contribution.
        effect: Mean reward − reward(latent ablated), where the latent is active.
        planted_sign: The planted feature's sign.
        sign_ok: Whether the effect has the planted sign and is large enough.
        best_latent: The best-correlated latent regardless of its effect.
        best_correlation: Its correlation.
        best_effect: Its effect.
    """

    feature: str
    hook_name: str
    d_sae: int
    metric: str  # the correlation used to select latents: "sequence", "token" or "reward_token"
    latent: int  # among latents correlating ≥ 0.8, the largest effect of the planted sign
    # (else the best-correlated latent)
    correlation: float  # its correlation under ``metric``
    token_correlation: float  # its per-token correlation with the indicator
    sequence_correlation: float  # its per-sequence correlation with the contribution
    reward_token_correlation: float  # its correlation, at the reward token, with the contribution
    effect: float  # mean reward − reward(latent ablated), where the latent is active
    planted_sign: int
    sign_ok: bool  # sign(effect) == planted sign and |effect| ≥ the report's min_effect
    best_latent: int  # the best-correlated latent regardless of its effect
    best_correlation: float
    best_effect: float

    @property
    def passed(self) -> bool:
        """Whether the latent correlates ≥ 0.8 and has the planted sign."""
        return self.correlation >= 0.8 and self.sign_ok


@dataclass(frozen=True)
class GroundTruthReport(Result):
    """Per planted feature, the SAE latent that tracks it best and its reward effect.

    Attributes:
        rows: One row per planted feature.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import planted_feature_report, train_zoo_sae
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model, task = HookedRewardModel.from_pretrained(zoo_path("scalar")), load_task().task
        >>> trained = train_zoo_sae(
        ...     model, task, n_examples=50, d_sae=32, k=4, steps=50, batch_size=64
        ... )
        >>> report = planted_feature_report(
        ...     model, trained.sae, task, features=["harmful", "topic_match"], n=50, candidates=2
        ... )
        >>> [(feature, round(corr, 2)) for feature, corr in report.top_k()]
        [('harmful', 1.0), ('topic_match', 0.93)]
        >>> report["harmful"].latent, report.to_dataframe()["passed"].tolist()
        (15, [True, True])
    """

    no_example_axis = "its rows are planted features, each measured over every example"

    rows: tuple[GroundTruthRow, ...]

    def __getitem__(self, feature: str) -> GroundTruthRow:
        """The row of one planted feature."""
        return next(r for r in self.rows if r.feature == feature)

    def to_dataframe(self):
        """One row per planted feature."""
        import pandas as pd

        return pd.DataFrame([{**r.__dict__, "passed": r.passed} for r in self.rows])

    def top_k(self, k: int = 4) -> TopK:
        """Planted features by the correlation of their best latent.

        Args:
            k: How many features.

        Returns:
            The labelled top entries.
        """
        return top_entries(
            [r.feature for r in self.rows], [r.correlation for r in self.rows], k, "correlation"
        )

    @pasted_docs(plot=PLOT_DOC)
    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """Bars of each planted feature's latent correlation; the dashed line is the 0.8 bar.

        Each bar is labelled `feature → latent`; blue bars passed (correlation ≥ 0.8 and the
        planted sign), grey ones did not. Hover shows the exact correlation and the effect.

        {plot}
        """
        passed = sum(r.passed for r in self.rows)
        fig = bar(
            [f"{r.feature} → {feature_label(r.latent)}" for r in self.rows],
            [r.correlation for r in self.rows],
            xaxis="correlation of the matching latent",
            title=f"Planted features: {passed} of {len(self.rows)} passed (grey: failed)",
            colors=[BLUE if r.passed else GREY for r in self.rows],
        )
        fig.data[0].customdata = [
            f"{r.feature} → {feature_label(r.latent)} ({r.metric} correlation; effect "
            f"{r.effect:.4g}, {'passed' if r.passed else 'failed'})"
            for r in self.rows
        ]
        fig.add_vline(x=0.8, line=dict(color="black", width=1, dash="dash"))
        return render(fig, backend, ax)


def as_index_tensor(values: Sequence[int] | Tensor) -> Int[Tensor, " n"]:
    """Indices as a flat long tensor.

    Args:
        values: The indices.

    Returns:
        A 1-D `torch.long` tensor.
    """
    return torch.as_tensor(values, dtype=torch.long).reshape(-1)
