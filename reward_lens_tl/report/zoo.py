"""The report's sections that only the zoo's ground truth allows.

These run with `reward-lens report` with no pair file, which `make demo` runs.

The zoo's task knows the hidden rule and where each planted feature sits, so on the zoo the
report adds: the lens and attribution of each planted feature's contrast pairs; where patching
localizes each feature; observational against causal component rankings; SAE latents carrying
the features; the zoo DPO policy's implicit reward against the model. Each function is a report
section (`fn(ctx) -> Section | None`, registered by `reward_lens_tl.report.sections`)
and returns `None` (no section) when the report does not run on the zoo (no `ctx["task"]`).
Numbers go to `ctx["numbers"]` (and so to `report.json`).

Examples:
    >>> from reward_lens_tl.zoo import load_task
    >>> pairs = zoo_pairs(load_task().task, n=2)
    >>> len(pairs), pairs[0].metadata["rule_margin"] > 0, planted_features_section({}) is None
    (2, True, True)
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import pandas as pd

from ..data import PairSet, PreferencePair
from ..signatures import pasted_docs

if TYPE_CHECKING:
    from ..patching.compare import Method
from .page import Section, format_cell, titled, zoo_only

__all__ = [
    "zoo_pairs",
]

#: The zoo's planted features, in the order the report shows them.
FEATURES = ("topic_match", "harmful", "sycophancy", "length")
#: The methods `observational_section` compares without TransformerLens 3.9's attention.
QK_FREE_METHODS: tuple[Method, ...] = ("direct", "atp", "patching")


#: The arguments of `rule_ordered` and `zoo_pairs`.
_PAIR_ARGS = """Args:
    task: The zoo's task.
    n: How many pairs.
    seed: The random seed.
    max_words: The longest response, in words."""


@pasted_docs(pair_args=_PAIR_ARGS)
def rule_ordered(task, n: int, seed: int, max_words: int) -> list[tuple]:
    """`n` pairs of zoo examples (one prompt, two responses) ordered by the hidden rule.

    Each pair is `(higher rule score, lower)`; pairs the rule scores equally are drawn again.

    {pair_args}

    Returns:
        The ordered pairs of examples.
    """
    rng = random.Random(seed)
    pairs: list[tuple] = []
    while len(pairs) < n:
        a, b = task.response_pair(rng, max_words=max_words)
        if a.score != b.score:
            pairs.append((a, b) if a.score > b.score else (b, a))
    return pairs


@pasted_docs(pair_args=_PAIR_ARGS)
def zoo_pairs(task, n: int = 8, seed: int = 1234, max_words: int = 8) -> PairSet:
    """`n` preference pairs labelled by the zoo's hidden rule (`rule_ordered`).

    The rule's margin is in `metadata["rule_margin"]`.

    {pair_args}

    Returns:
        The pair set.

    Examples:
        >>> from reward_lens_tl.report import zoo_pairs
        >>> from reward_lens_tl.zoo import load_task
        >>> pairs = zoo_pairs(load_task().task, n=3, seed=0)
        >>> pairs[0].prompt, pairs[0].chosen, pairs[0].rejected
        ('explain we flight airport also', 'tourist you soup beach scam here', 'here this hotel')
        >>> [pair.metadata["rule_margin"] for pair in pairs], pairs.source
        ([0.5, 7.0, 3.0], 'zoo')
    """
    pairs = [
        PreferencePair(
            " ".join(chosen.prompt),
            " ".join(chosen.response),
            " ".join(rejected.response),
            subset="zoo",
            metadata={"rule_margin": chosen.score - rejected.score},
        )
        for chosen, rejected in rule_ordered(task, n, seed, max_words)
    ]
    return PairSet(tuple(pairs), source="zoo")


def _signed(value: float) -> str:
    return format_cell(float(value), "signed")


def _kept_pairs(ctx) -> list:
    return [ctx["pairs"][i] for i in ctx["kept"]]


@zoo_only
def planted_features_section(ctx) -> Section:
    """Lens and direct attribution of the margin of 24 contrast pairs per planted feature.

    {zoo_section}
    """
    from ..attribution import pair_attribution
    from ..contrast import encode_contrast
    from ..lens import pair_lens

    model, task = ctx["model"], ctx["task"]
    section = Section("Planted features")
    section.text(
        "Reward lens and direct attribution of the margin on 24 contrast pairs per planted "
        "feature (the two sides differ in that feature only): the first lens site reaching half "
        "the final margin (most common over pairs), the top components (mean over pairs) and "
        "the completeness error Σparts − margin."
    )
    rows, figures = [], []
    for feature in FEATURES:
        encoded = [encode_contrast(p) for p in task.contrast_pairs(feature, 24, seed=7)]
        lens = pair_lens(model, encoded)
        margin = pair_attribution(model, encoded).margin
        sites = [str(s) for s in lens.crystallization(0.5)]
        rows.append(
            {
                "feature": feature,
                "mean margin": float(margin.rewards.mean()),
                "lens: first site at 50%": max(sorted(set(sites)), key=sites.count),
                "top components (mean)": ", ".join(
                    f"{c} {format_cell(v, 'signed')}" for c, v in margin.top_k(3)
                ),
                "Σparts − margin": margin.completeness_error(),
            }
        )
        for name, fig in (("lens", lens.plot()), ("attribution", margin.plot(k=12))):
            titled(fig, f"{name} of the margin: planted feature '{feature}'")
            figures.append((fig, f"{name} of the {feature} margin", f"{name}_{feature}"))
    section.table(pd.DataFrame(rows))
    for fig, alt, name in figures:
        section.figure(fig, alt, name=name)
    ctx["numbers"]["planted_features"] = rows
    return section


@zoo_only
def localization_section(ctx) -> Section:
    """Denoising `resid_pre` on one topic_match pair, and where each feature's effect sits.

    Where each feature's effect sits: `reward_lens_tl.patching.localization`, 16 contrast pairs
    per feature.

    {zoo_section}
    """
    from ..contrast import encode_contrast
    from ..patching import activation_patching, localization

    model, task = ctx["model"], ctx["task"]
    section = Section("Where the planted features sit")
    pair = task.contrast_pairs("topic_match", 1, seed=7, filler_swaps=2)[0]
    clean, corrupted = encode_contrast(pair)
    result = activation_patching(model, clean, corrupted, site="resid_pre", alignment="exact")
    fig = result.plot()
    if not hasattr(fig, "to_plotly_json"):  # a matplotlib figure: the tokens as its ticks
        tokens = pair.edited.tokens[: result.shape[-1]]
        fig.axes[0].set_xticks(range(len(tokens)), tokens, rotation=90)
    titled(fig, "fraction of the topic_match effect restored (denoising resid_pre)")
    section.text(
        "Denoising resid_pre on one topic_match pair (planted word at position "
        f"{pair.edited_positions[0]}, reward read at {pair.edited.reward_position}):"
    )
    section.figure(fig, "activation patching heat map", name="patching_resid_topic_match")
    contrast = [
        p
        for f in ("topic_match", "harmful", "sycophancy")
        for p in task.contrast_pairs(f, 16, seed=7, filler_swaps=2)
    ]
    table = localization(model, contrast)
    cols = ["feature", "site", "top1_planted", "top1_reward", "planted_restored", "reward_restored"]
    frame = table.to_dataframe()[cols]
    section.text(
        "Where each feature's effect sits (16 contrast pairs each; share of pairs whose top "
        "patched unit is the planted span / the reward-reading token, and the mean fraction "
        "each restores):"
    )
    section.table(frame, max_rows=len(frame))
    section.figure(
        table.plot(kind="planted"), "localization of the planted features", "localization"
    )
    ctx["numbers"]["localization"] = frame.to_dict("records")
    return section


@zoo_only
def observational_section(ctx) -> Section:
    """Direct attribution, attribution patching and activation patching ranking the same components.

    On the zoo's pairs (`reward_lens_tl.patching.compare_methods`). Without TransformerLens
    3.9's attention components (`capabilities.TL_ATTENTION`: the bridge) AtP* (its QK fix) is
    left out, with a line saying so.

    {zoo_section}
    """
    from ..capabilities import TL_ATTENTION, supports
    from ..patching import compare_methods
    from ..patching.compare import METHODS

    pairs = _kept_pairs(ctx)
    methods = METHODS if supports(ctx["model"], TL_ATTENTION) else QK_FREE_METHODS
    comparison = compare_methods(
        ctx["model"], pairs, components="heads", n_resamples=500, methods=methods
    )
    summary = comparison.summary()
    section = Section("Observational vs causal")
    section.text(
        f"Per pair, Spearman between methods over {len(comparison.labels[0])} components (heads "
        f"and MLPs), mean over {len(pairs)} pairs with 95% bootstrap intervals:"
    )
    section.table(summary)
    if methods != METHODS:
        left_out = ", ".join(m for m in METHODS if m not in methods)
        section.text(
            f"Not compared: {left_out} needs the TransformerLens 3.9 backend (--backend tl3, the "
            "default): its QK fix recomputes attention with TransformerLens 3.9's attention "
            "components, which this backend does not have."
        )
    section.figure(comparison.plot(), "observational vs causal", "observational_vs_causal")
    ctx["numbers"]["observational_vs_causal"] = summary.to_dict("records")
    return section


@zoo_only
def sae_section(ctx) -> Section:
    """A TopK SAE per site: reconstruction, the latents carrying the planted features, and more.

    Also exact feature attribution of the harmful margin at the final residual, and concept
    vectors.

    {zoo_section}
    """
    from .. import sae as S

    model, task = ctx["model"], ctx["task"]
    report, saes = S.zoo_ground_truth(model, task)
    trained = saes[S.ZOO_PLAN["harmful"][0]]
    sae = trained.sae
    ids, mask = next(S.model_batches(model, task.examples(64, seed=5), batch_size=64))
    splice = S.splice_report(model, sae, ids, mask).summary()
    section = Section("SAE features")
    section.text(
        f"TopK SAE at {sae.cfg.metadata.hook_name} ({sae.cfg.d_sae} latents, trained offline with "
        f"sae_lens in {trained.seconds:.0f} s, {trained.samples_per_second:,.0f} activations/s): "
        f"FVU {splice['fvu']:.3f}, L0 {splice['l0']:.1f}. Spliced with its error term the reward "
        f"moves by at most {splice['max_error_with_error_term']:.1e}; without it by "
        f"{splice['mean_abs_reconstruction_error']:.3f} on average (reward std "
        f"{splice['reward_std']:.2f})."
    )
    cols = ["feature", "hook_name", "metric", "latent", "correlation", "effect", "passed"]
    table = report.to_dataframe()[cols]
    section.text(
        "Latents carrying the planted features, each read where patching puts it (one SAE per "
        "site; correlation with the feature over held-out conversations, summed over the "
        "conversation or at the reward-reading token; effect = mean reward change when the "
        "latent is ablated):"
    )
    section.table(table)
    section.figure(report.plot(), "SAE latents of the planted features", "sae_ground_truth")
    final = saes[f"blocks.{model.cfg.n_layers - 1}.hook_resid_post"].sae
    attribution = _final_residual_attribution(model, task, final, section)
    concepts = _concept_vectors(model, task, section)
    ctx["numbers"]["sae"] = {
        "splice": splice,
        "ground_truth": table.to_dict("records"),
        "harmful_margin_attribution": attribution,
        "concept_cosines": concepts,
    }
    return section


def _final_residual_attribution(model, task, sae, section: Section) -> dict:
    from .. import sae as S

    pairs = task.contrast_pairs("harmful", 40, seed=3)
    attribution = S.pair_feature_attribution(model, sae, pairs)
    margin = attribution.margin
    fig = titled(margin.plot(k=10), "harmful margin by final-residual SAE latent")
    error = max(attribution.chosen.completeness_error(), attribution.rejected.completeness_error())
    top = margin.top_k(3)
    terms = {k: float(v.mean()) for k, v in margin.terms().items()}
    section.text(
        f"Exact feature attribution of the harmful margin ({len(pairs)} contrast pairs) to a "
        f"final-residual SAE: top latents {', '.join(f'{n} {_signed(v)}' for n, v in top)}; "
        f"explicit terms {', '.join(f'{k} {_signed(v)}' for k, v in terms.items())}; "
        f"latents + terms − reward = {format_cell(error)}."
    )
    section.figure(fig, "harmful margin by SAE latent", "sae_margin_harmful")
    return {"top": list(top), "terms": terms, "completeness_error": error}


def _concept_vectors(model, task, section: Section) -> list[dict]:
    from .. import sae as S

    gated = getattr(model, "gating", None) is not None
    objective = model.objective_names[0] if gated else None  # a gated score has no one w_r
    rows = []
    for feature in FEATURES:
        pairs = task.contrast_pairs(feature, 60, seed=4)
        vectors = S.concept_vectors(model, pairs, at="reward", objective=objective)
        cosines = dict(zip(vectors.labels, vectors.reward_cosine.tolist(), strict=True))
        rows.append({"feature": feature, **cosines})
    section.text(
        "Concept vectors (difference of means at the reward-reading token, 60 contrast pairs): "
        "cosine with the reward direction w_r"
        + (f" of objective `{objective}`" if objective else "")
        + " per site:"
    )
    section.table(pd.DataFrame(rows))
    return rows


@zoo_only
def implicit_section(ctx) -> Section:
    """The zoo DPO policy's implicit reward against the model.

    What each pays per planted feature, and how far they agree on held-out rule-labelled pairs.

    {zoo_section}
    """
    from ..crossmodel.compare import compare_models
    from ..crossmodel.features import feature_effects
    from ..implicit import ImplicitRewardModel
    from ..zoo import zoo_path

    task = ctx["task"]
    irm = ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))
    models = {"explicit": ctx["model"], "implicit": irm}
    effects = feature_effects(models, task, n=40, seed=0, n_boot=500)
    fig = titled(effects.plot(), "what each reward pays per planted feature (matched to the rule)")
    table = effects.compare("explicit", "implicit")
    table = table[["feature", "effect_explicit", "effect_implicit", "ratio", "flagged"]]
    pairs = rule_ordered(task, 48, seed=99, max_words=10)
    comparison = compare_models(models, pairs, n_boot=500)
    row = comparison.agreement().iloc[0]
    depth = comparison.crystallization().set_index("model")["depth"]
    section = Section("Implicit reward of the DPO policy vs the explicit reward model")
    section.text(
        f"Implicit reward β·Σ log π/π_ref (β = {irm.beta}) of the zoo policy against this model, "
        "on 40 contrast pairs per planted feature; the implicit effects are put on the "
        "explicit model's scale by the median ratio over features (flagged: the paired 95% CI "
        "of the difference excludes 0 and it is ≥ 25% of the larger effect):"
    )
    section.table(table)
    section.figure(fig, "feature effects of both rewards", "implicit_feature_effects")
    section.text(
        f"On {len(pairs)} held-out rule-labelled pairs the two agree on "
        f"{format_cell(float(row['pairwise_agreement']), 'share')} (95% CI "
        f"{format_cell(float(row['pairwise_agreement_low']), 'share')}–"
        f"{format_cell(float(row['pairwise_agreement_high']), 'share')}) of pairs; margin "
        f"Spearman {format_cell(float(row['margin_spearman']))}. The lens margin reaches half "
        f"its final value at relative depth {format_cell(float(depth['explicit']))} (explicit) "
        f"and {format_cell(float(depth['implicit']))} (implicit policy)."
    )
    ctx["numbers"]["implicit"] = {
        "beta": irm.beta,
        "feature_effects": table.to_dict("records"),
        "pairwise_agreement": float(row["pairwise_agreement"]),
        "margin_spearman": float(row["margin_spearman"]),
        "depth": {k: float(v) for k, v in depth.items()},
    }
    return section
