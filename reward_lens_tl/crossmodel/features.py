"""Which planted features each reward model rewards, and by how much: per-feature contrast pairs.

For every feature, `n` contrast pairs (two conversations differing in exactly that feature;
`reward_lens_tl.zoo.ConversationTask.contrast_pairs`) are scored by every model; a model's
*effect* of a feature is its mean margin `r(edited) − r(base)`. Rewards of different models
live on different scales (an implicit reward is β times a log-ratio), so effects come in three
units:

- `"matched"` (default): model `b` is put on model `a`'s scale by the **median** over
  features of `effect_a / effect_b` (features where both effects are non-zero and agree in
  sign). A feature one model weights differently from the rest then stands out, and one ablated
  feature cannot move the scale (a standard deviation would shrink with it); in tables and plots
  every model is matched to the hidden rule (or to the first model without the rule);
- `"std"`: each model's reward standard deviation over all contrast conversations;
- `"raw"`: reward units.

The hidden rule is included as the model `"rule"` (its score of each conversation), so every
effect can be read against what was planted: matched to the rule, an effect is in the rule's
units (topic_match +2, harmful −3, length +0.5, sycophancy +2.5).

`PlantedFeatureEffects.compare` flags a feature when two models' effects differ: the paired
bootstrap CI of the difference excludes 0 **and** the difference is at least `rel_threshold`
of the larger |effect| (the matching factor is held fixed in the bootstrap).

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.zoo import load_task, zoo_path
    >>> scalar = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    >>> fx = feature_effects({"scalar": scalar}, load_task().task, n=20, n_boot=100)
    >>> fx.to_dataframe().query("model == 'scalar'")["sign_agreement"].tolist()
    [1.0, 1.0, 1.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..contrast import encode_contrast
from ..errors import InvalidArgumentError, UnknownModelError
from ..plotting import PALETTE, Backend, bar, render
from ..results import Result, ranked
from ..stats import Interval, bootstrap_ci
from .sources import as_source, check_shared_tokenizer

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "PlantedFeatureEffects",
    "Units",
    "feature_effects",
]

Units = Literal["matched", "std", "raw"]


@dataclass(frozen=True)
class PlantedFeatureEffects(Result):
    """Per model and planted feature, the margins on that feature's contrast pairs.

    This is what `feature_effects` returns (`reward_lens_tl.sae.FeatureEffects` is the effects
    of SAE features).

    Args:
        margins: `margins[model][feature]` `[n]` (raw reward units).
        scales: `scales[model]` the model's reward std over all contrast conversations.
        features: the features, in order.
        n_boot: bootstrap resamples of every CI.
        seed: the bootstrap's seed.

    Examples:
        >>> import numpy as np
        >>> from reward_lens_tl.crossmodel import PlantedFeatureEffects
        >>> noise = np.array([0.0, 0.1, -0.1, 0.0])
        >>> a = {"f": 2 + noise, "g": -1 + noise, "h": 1 + noise}  # 4 pairs' margins per feature
        >>> b = {"f": 1 + noise, "g": -0.5 + noise, "h": 0 + noise}
        >>> fx = PlantedFeatureEffects({"a": a, "b": b}, scales={"a": 1.0, "b": 0.5},
        ...                            features=("f", "g", "h"), n_boot=200)
        >>> fx.factor("a", "b")  # b is a at half the scale (median ratio), but it ignores "h"
        2.0
        >>> fx.compare("a", "b")[["feature", "effect_a", "effect_b", "flagged"]].round(3)
          feature  effect_a  effect_b  flagged
        0       f       2.0       2.0    False
        1       g      -1.0      -1.0    False
        2       h       1.0       0.0     True
        >>> fx.flagged("a", "b")
        ['h']
    """

    margins: dict[str, dict[str, np.ndarray]]
    scales: dict[str, float]
    features: tuple[str, ...]
    n_boot: int = 1000
    seed: int = 0

    @property
    def models(self) -> tuple[str, ...]:
        """The models' names."""
        return tuple(self.margins)

    @property
    def anchor(self) -> str:
        """The model others are matched to in tables and plots: the rule, else the first."""
        return "rule" if "rule" in self.margins else self.models[0]

    def _ci(self, values: np.ndarray) -> Interval:
        """The mean of `values` with this result's seeded bootstrap CI."""
        return bootstrap_ci(values, n_boot=self.n_boot, seed=self.seed)

    def factor(self, a: str, b: str) -> float:
        """Median over features of `effect_a / effect_b` (same-sign, non-zero effects).

        Args:
            a: the model whose scale is kept.
            b: the model put on `a`'s scale.

        Returns:
            The factor that puts `b` on `a`'s scale (1.0 when no feature qualifies).
        """
        ratios = []
        for f in self.features:
            ea, eb = float(self._raw(a, f).mean()), float(self._raw(b, f).mean())
            if ea != 0 and eb != 0 and np.sign(ea) == np.sign(eb):
                ratios.append(ea / eb)
        return float(np.median(ratios)) if ratios else 1.0

    def _raw(self, model: str, feature: str) -> np.ndarray:
        if model not in self.margins:
            raise UnknownModelError(f"unknown model {model!r}; have {self.models}")
        return self.margins[model][feature]

    def _values(
        self, model: str, feature: str, units: Units, anchor: str | None = None
    ) -> np.ndarray:
        m = self._raw(model, feature)
        if units not in ("matched", "std", "raw"):
            raise InvalidArgumentError(f"units must be 'matched', 'std' or 'raw', got {units!r}")
        if units == "std":
            return m / self.scales[model]
        if units == "matched":
            return m * self.factor(anchor or self.anchor, model)
        return m

    def to_dataframe(self, units: Units = "matched"):
        """One row per (model, feature).

        Columns: mean raw margin, effect in `units` with a bootstrap CI, and the share of pairs
        moved in the planted direction (`sign_agreement`).

        Args:
            units: `"matched"`, `"std"` or `"raw"` (see the module docstring).

        Returns:
            A `pandas.DataFrame`.
        """
        import pandas as pd

        rows = []
        for model in self.models:
            for feature in self.features:
                v = self._values(model, feature, units)
                est, lo, hi = self._ci(v)
                rule = np.sign(self.margins["rule"][feature]) if "rule" in self.margins else None
                agree = float((np.sign(v) == rule).mean()) if rule is not None else float("nan")
                rows.append(
                    {
                        "model": model,
                        "feature": feature,
                        "mean_margin": float(self.margins[model][feature].mean()),
                        "effect": est,
                        "ci_low": lo,
                        "ci_high": hi,
                        "sign_agreement": agree,
                    }
                )
        return pd.DataFrame(rows)

    def compare(self, a: str, b: str, *, units: Units = "matched", rel_threshold: float = 0.25):
        """Per feature: effects of `a` and `b`, their difference and whether it is flagged.

        Columns: the effects (`b` on `a`'s scale when matched), `difference = b − a` with a
        paired bootstrap CI, `ratio = b / a` and `flagged` (see the module docstring).

        Args:
            a: the first model's name.
            b: the second model's name.
            units: `"matched"`, `"std"` or `"raw"`.
            rel_threshold: the smallest flagged difference, relative to the larger |effect|.

        Returns:
            A `pandas.DataFrame`, one row per feature.
        """
        import pandas as pd

        rows = []
        for feature in self.features:
            va = self._values(a, feature, "raw" if units == "matched" else units)
            vb = self._values(b, feature, units, anchor=a)
            diff = vb - va
            est, lo, hi = self._ci(diff)
            ea, eb = float(va.mean()), float(vb.mean())
            big = max(abs(ea), abs(eb))
            excludes_zero = lo > 0 or hi < 0
            rows.append(
                {
                    "feature": feature,
                    f"effect_{a}": ea,
                    f"effect_{b}": eb,
                    "difference": est,
                    "ci_low": lo,
                    "ci_high": hi,
                    "ratio": eb / ea if ea != 0 else float("nan"),
                    "flagged": bool(excludes_zero and abs(est) >= rel_threshold * big),
                }
            )
        return pd.DataFrame(rows)

    def flagged(self, a: str, b: str, **kwargs) -> list[str]:
        """Features whose effect differs between `a` and `b`.

        Args:
            a: the first model's name.
            b: the second model's name.
            **kwargs: passed to `compare`.

        Returns:
            The flagged features.
        """
        frame = self.compare(a, b, **kwargs)
        return frame.loc[frame["flagged"], "feature"].tolist()

    def top_k(self, k: int = 5, units: Units = "matched"):
        """Features with the largest spread of effect across models.

        Args:
            k: how many features.
            units: `"matched"`, `"std"` or `"raw"`.

        Returns:
            `[(feature, spread)]`, largest first.
        """
        spread = []
        for f in self.features:
            effects = [float(self._values(m, f, units).mean()) for m in self.models]
            spread.append((f, max(effects) - min(effects)))
        return ranked(sorted(spread, key=lambda t: -t[1])[:k], "spread")

    def plot(
        self, ax: Axes | None = None, units: Units = "matched", *, backend: Backend | None = None
    ) -> Any:
        """Grouped bars: each model's effect per feature with its 95% CI.

        This is the headline figure of notebook 07. Hover shows the model, the feature, the
        exact effect and its CI.

        Args:
            ax: Matplotlib axes to draw the static form on.
            units: `"matched"`, `"std"` or `"raw"`.
            backend: `"plotly"` or `"matplotlib"` (see `reward_lens_tl.plotting`).

        Returns:
            The figure (not shown).
        """
        frame = self.to_dataframe(units)
        ylabel = {
            "matched": f"effect (matched to {self.anchor})",
            "std": "effect (reward stds)",
            "raw": "mean margin (reward units)",
        }[units]
        width = 0.8 / len(self.models)
        x = np.arange(len(self.features))
        panels = []
        for i, model in enumerate(self.models):
            sub = frame[frame["model"] == model].set_index("feature").loc[list(self.features)]
            effect = sub["effect"].to_numpy()
            one = bar(
                self.features,
                effect,
                xaxis="planted feature",
                yaxis=ylabel,
                title="what each model pays per planted feature (bars: 95% CI)",
                colors=PALETTE[i % len(PALETTE)],
                error=(effect - sub["ci_low"].to_numpy(), sub["ci_high"].to_numpy() - effect),
                horizontal=False,
                width=min(1400, max(520, 160 + 36 * len(self.features) * len(self.models))),
            )
            trace = one.data[0]
            trace.update(
                x=x + (i - (len(self.models) - 1) / 2) * width,
                width=width,
                name=model,
                showlegend=True,
                customdata=np.stack(
                    [np.array(self.features, dtype=object), sub["ci_low"], sub["ci_high"]], 1
                ),
                hovertemplate=f"{model}<br>%{{customdata[0]}}<br>effect: %{{y:.5g}} "
                "(95% CI %{customdata[1]:.4g} to %{customdata[2]:.4g})<extra></extra>",
            )
            panels.append(one)
        fig = panels[0]
        for other in panels[1:]:
            fig.add_trace(other.data[0])
        fig.update_xaxes(tickangle=0 if len(self.features) <= 8 else -90)
        fig.update_layout(showlegend=True, barmode="overlay")
        return render(fig, backend, ax)


def feature_effects(
    models: Mapping[str, Any] | Sequence[Any],
    task,
    *,
    features: Sequence[str] | None = None,
    n: int = 40,
    seed: int = 0,
    n_boot: int = 1000,
    batch_size: int = 32,
    include_rule: bool = True,
) -> PlantedFeatureEffects:
    """Score `n` contrast pairs per feature with every model (module docstring).

    Args:
        models: `{name: model or source}` or a list of models / sources.
        task: a zoo `reward_lens_tl.zoo.ConversationTask` (`load_task().task`).
        features: the features (default: every planted feature).
        n: contrast pairs per feature.
        seed: the seed of the pairs and of the bootstrap.
        n_boot: bootstrap resamples of every CI.
        batch_size: conversations per forward.
        include_rule: include the hidden rule as the model `"rule"`.

    Returns:
        The effects.

    Raises:
        InvalidArgumentError: an unknown feature, or a model named `"rule"` beside the rule.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.crossmodel import feature_effects
        >>> from reward_lens_tl.implicit import ImplicitRewardModel
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> scalar = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> irm = ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))
        >>> models = {"scalar": scalar, "implicit": irm}
        >>> fx = feature_effects(models, load_task().task, n=8, n_boot=100)
        >>> fx.models, fx.features
        (('rule', 'scalar', 'implicit'), ('topic_match', 'harmful', 'length', 'sycophancy'))
        >>> effects = fx.to_dataframe().pivot(index="feature", columns="model", values="effect")
        >>> effects[["rule", "scalar", "implicit"]].round(2)  # matched to the rule's units
        model        rule  scalar  implicit
        feature
        harmful      -3.0   -3.02     -4.31
        length        0.5    0.53     -0.25
        sycophancy    2.5    2.46      2.50
        topic_match   2.0    1.99      0.60
        >>> fx.flagged("scalar", "implicit")  # what the DPO policy weights differently
        ['topic_match', 'length']
    """
    from ..zoo import FEATURES

    features = tuple(features or FEATURES)
    unknown = [f for f in features if f not in FEATURES]
    if unknown:
        raise InvalidArgumentError(f"unknown features {unknown}; the zoo plants {FEATURES}")
    items = list(models.items()) if isinstance(models, Mapping) else [(None, m) for m in models]
    sources = [as_source(m, name) for name, m in items]
    if include_rule and any(s.name == "rule" for s in sources):
        raise InvalidArgumentError("the name 'rule' is reserved for the hidden rule")
    pairs = {f: task.contrast_pairs(f, n, seed) for f in features}
    # the zoo's contrast pairs are token ids: models with another tokenizer would read other words
    check_shared_tokenizer(sources, [next(iter(pairs.values()))[0]])
    encoded = {f: [encode_contrast(p) for p in ps] for f, ps in pairs.items()}
    margins: dict[str, dict[str, np.ndarray]] = {}
    scales: dict[str, float] = {}
    if include_rule:
        margins["rule"] = {f: np.array([p.rule_delta for p in ps]) for f, ps in pairs.items()}
        scores = [x.score for ps in pairs.values() for p in ps for x in (p.edited, p.base)]
        scales["rule"] = float(np.std(scores, ddof=1))
    for source in sources:
        flat = [e for f in features for pair in encoded[f] for e in pair]  # edited, base, ...
        rewards = source.rewards(flat, batch_size).double().numpy()
        scales[source.name] = float(rewards.std(ddof=1))
        per = rewards.reshape(len(features), n, 2)
        margins[source.name] = {f: per[i, :, 0] - per[i, :, 1] for i, f in enumerate(features)}
    return PlantedFeatureEffects(margins, scales, features, n_boot, seed)
