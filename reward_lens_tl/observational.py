"""Observational tools scored against planted ground truth (the zoo's contrast pairs).

For each planted feature, contrast pairs differ in that feature only (`edited` has it,
`base` does not). The margin `r(edited) − r(base)` is decomposed by direct attribution;
this module reports where the attribution puts it (components, and for aligned pairs, which
source positions the heads read it from, per layer), how early the reward lens sees it, and
whether the components carrying most of the margin are the ones whose ablation changes it.

Mind the caveat: a lookup computed in early layers is moved to the reward-reading token, so a
last-layer head's source position need not be the planted token (it is often the final token).

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.zoo import load_task, zoo_path
    >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    >>> report = observational_ground_truth(model, load_task().task, features=("harmful",), n=8)
    >>> report.findings[0].completeness_error < 1e-4
    True
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .attribution import direct_attribution, pair_attribution
from .components import Component
from .contrast import as_contrast_pairs, encode_contrast
from .errors import EmptyInputError, InvalidArgumentError, UsageError
from .inputs import pad_batch
from .lens import pair_lens
from .padding import token_columns
from .results import Result
from .stats import spearman

__all__ = [
    "observational_ground_truth",
]


@dataclass(frozen=True)
class FeatureFindings:
    """Attribution, lens and ablation findings for one feature."""

    feature: str
    n_pairs: int
    mean_margin: float
    mean_rule_delta: float
    completeness_error: float
    top_components: tuple[tuple[str, float], ...]  # (label, mean margin contribution)
    planted_source_share: tuple[float, ...] | None  # per layer: |Δ| from planted positions
    reward_token_source_share: tuple[float, ...] | None  # per layer: |Δ| from the final token
    crystallization: tuple[tuple[str | None, int], ...]  # site reaching 50% of margin: counts
    ablation_spearman: float  # |attribution| vs |ablation effect| over components
    top_component_ablation_rank: int  # rank (1 = largest) of the top-DLA component's ablation
    top3_ablation_effect: float  # mean margin change, zero-ablating the top-3 DLA components
    bottom3_ablation_effect: float  # the same for the 3 components with the least attribution

    def row(self) -> dict:
        """The findings as one table row."""
        return {
            "feature": self.feature,
            "pairs": self.n_pairs,
            "mean_margin": self.mean_margin,
            "mean_rule_delta": self.mean_rule_delta,
            "completeness_error": self.completeness_error,
            "top_components": ", ".join(f"{c} {v:+.2f}" for c, v in self.top_components),
            "planted_source_share": _fmt(self.planted_source_share),
            "reward_token_source_share": _fmt(self.reward_token_source_share),
            "lens_50%_site": ", ".join(f"{s}×{n}" for s, n in self.crystallization),
            "ablation_spearman": self.ablation_spearman,
            "top_component_ablation_rank": self.top_component_ablation_rank,
            "top3_ablation_effect": self.top3_ablation_effect,
            "bottom3_ablation_effect": self.bottom3_ablation_effect,
        }


def _fmt(values):
    return "n/a (unaligned)" if values is None else " / ".join(f"{v:.2f}" for v in values)


@dataclass(frozen=True)
class ObservationalReport(Result):
    """Findings per feature of `observational_ground_truth`."""

    label_column, value_column = "feature", "mean_margin"

    findings: tuple[FeatureFindings, ...]

    def to_dataframe(self):
        """One row per feature."""
        import pandas as pd

        return pd.DataFrame([f.row() for f in self.findings])

    def __getitem__(self, feature: str) -> FeatureFindings:
        """Findings of `feature`."""
        return next(f for f in self.findings if f.feature == feature)


def observational_ground_truth(
    model,
    task=None,
    *,
    pairs=None,
    features: Sequence[str] = ("topic_match", "harmful", "sycophancy", "length"),
    n: int = 50,
    seed: int = 0,
    batch_size: int = 32,
) -> ObservationalReport:
    """Attribution, lens and ablation findings per feature.

    They are computed on the zoo `task`'s contrast pairs (`n` per feature) or on your own `pairs`
    (`ContrastPair`s, grouped by their `feature`).

    Args:
        model: The reward model.
        task: The zoo task whose contrast pairs are used (when `pairs` is not given).
        pairs: Your own `ContrastPair`s instead of the task's.
        features: The features to study.
        n: Contrast pairs per feature (from `task`).
        seed: The seed of the task's pairs.
        batch_size: Pairs per forward.

    Returns:
        One `FeatureFindings` per feature.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> report = observational_ground_truth(model, load_task().task, features=("harmful",), n=8)
        >>> found = report.findings[0]
        >>> found.feature, found.n_pairs, round(found.mean_margin, 2), found.top_components[0][0]
        ('harmful', 8, -3.02, 'L2H3')
    """
    if pairs is not None:
        grouped: dict[str, list] = {}
        for pair in as_contrast_pairs(pairs):
            grouped.setdefault(pair.feature, []).append(pair)
    elif task is not None:
        grouped = {f: as_contrast_pairs(task.contrast_pairs(f, n, seed)) for f in features}
    else:
        raise InvalidArgumentError("pass a zoo task or pairs=[ContrastPair, ...]")
    if not grouped:
        raise EmptyInputError("no contrast pairs given")
    findings = [_feature_findings(model, f, ps, batch_size) for f, ps in grouped.items()]
    return ObservationalReport(tuple(findings))


def _feature_findings(model, feature: str, pairs, batch_size: int) -> FeatureFindings:
    encoded = [encode_contrast(p) for p in pairs]
    margin = pair_attribution(model, encoded, batch_size=batch_size).margin
    components = [
        i for i, c in enumerate(margin.components) if c.kind not in ("embed", "pos_embed", "bias")
    ]
    mean = margin.values.mean(1)
    order = sorted(components, key=lambda i: -abs(float(mean[i])))
    lens = pair_lens(model, encoded, batch_size=batch_size)
    aligned = all(len(p.edited.ids) == len(p.base.ids) for p in pairs)
    planted, final = _source_shares(model, pairs) if aligned else (None, None)
    parts = [margin.components[i] for i in components]
    effects = _ablation_effects(model, encoded, [[c] for c in parts])
    top3 = [margin.components[i] for i in order[:3]]
    bottom3 = [margin.components[i] for i in order[-3:]]
    joint = _ablation_effects(model, encoded, [top3, bottom3])
    dla = [abs(float(mean[i])) for i in components]
    rho = spearman(dla, [abs(e) for e in effects])
    top = order[0]
    ranks = sorted(range(len(components)), key=lambda j: -abs(effects[j]))
    return FeatureFindings(
        feature=feature,
        n_pairs=len(pairs),
        mean_margin=float(margin.rewards.mean()),
        mean_rule_delta=_mean_rule_delta(pairs),
        completeness_error=margin.completeness_error(),
        top_components=tuple((margin.labels[i], float(mean[i])) for i in order[:3]),
        planted_source_share=planted,
        reward_token_source_share=final,
        crystallization=tuple(Counter(lens.crystallization(0.5)).most_common()),
        ablation_spearman=rho,
        top_component_ablation_rank=1 + ranks.index(components.index(top)),
        top3_ablation_effect=joint[0],
        bottom3_ablation_effect=joint[1],
    )


def _mean_rule_delta(pairs) -> float:
    deltas = [p.rule_delta for p in pairs]
    return float("nan") if None in deltas else float(sum(deltas) / len(deltas))


def _source_shares(model, pairs) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per layer.

    Share of Σ|Δ source contribution| (edited − base, over heads) that comes from the planted
    positions, and from the reward-reading (final) token. Pairs must be aligned (same length), so
    source positions correspond.
    """
    n = len(pairs)
    ids, mask = pad_batch(
        [p.edited.ids for p in pairs] + [p.base.ids for p in pairs], model.pad_token_id
    )
    sources = direct_attribution(model, ids, mask, sources=True).sources  # [L, H, 2n, src]
    if sources is None:  # sources=True always fills them
        raise UsageError("direct_attribution(sources=True) returned no source attributions")
    reward_positions = model.pool_positions(ids[:n], mask[:n]).tolist()
    delta = (sources[:, :, :n] - sources[:, :, n:]).abs().sum(1)  # [layer, pair, src]
    planted = torch.zeros(model.cfg.n_layers)
    final = torch.zeros(model.cfg.n_layers)
    for i, p in enumerate(pairs):
        cols = token_columns(len(p.edited.ids), ids.shape[1])  # both sides have this length
        planted += delta[:, i, cols[list(p.edited_positions)]].sum(-1)
        final += delta[:, i, reward_positions[i]]
    total = delta.sum((1, 2))
    return tuple((planted / total).tolist()), tuple((final / total).tolist())


def _ablation_effects(model, encoded, groups: Sequence[Sequence[Component]]) -> list[float]:
    """Mean change of the margin when each group of components is zero-ablated together.

    Groups are heads `L{l}H{h}` or MLPs `mlp{l}`.
    """
    ids, mask = pad_batch(
        [e.ids for e, _ in encoded] + [b.ids for _, b in encoded], model.pad_token_id
    )
    n = len(encoded)
    with torch.no_grad():
        base = model.pooled_rewards(ids, mask)
        base_margin = base[:n] - base[n:]
        effects = []
        for group in groups:
            hooks = [_zero_hook(component) for component in group]
            r = model.run_with_hooks(
                ids, return_type="reward", attention_mask=mask, fwd_hooks=hooks
            )
            effects.append(float(((r[:n] - r[n:]) - base_margin).mean()))
    return effects


def _zero_hook(component: Component):
    """A hook zeroing one head's output (at `hook_z`) or a whole MLP / attention layer."""
    if component.kind != "head":
        return component.hook_name, lambda act, hook: torch.zeros_like(act)
    head = component.head

    def zero_head(z, hook):
        z = z.clone()
        z[:, :, head] = 0.0
        return z

    return component.hook_name, zero_head
