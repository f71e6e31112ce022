"""Sections of the demo report beyond scoring, lens and attribution: patching and SAEs.

Each function runs its analyses on the zoo model, saves figures into ``out_dir``, prints the
headline numbers and returns markdown lines for ``report.md``.
"""

from __future__ import annotations

from pathlib import Path


def save(fig, path: Path) -> None:
    """Write a figure as PNG and close it (a report run opens many)."""
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=120)
    plt.close(fig)


def markdown(frame) -> str:
    """A pandas frame as a markdown table (floats signed, 3 decimals)."""
    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "|" + "---|" * len(frame.columns)
    rows = [
        "| " + " | ".join(f"{v:+.3f}" if isinstance(v, float) else str(v) for v in row) + " |"
        for row in frame.itertuples(index=False)
    ]
    return "\n".join([header, rule, *rows])


def causal_section(model, task, pairs, out_dir: Path) -> list[str]:
    """Activation patching: one heat map, the localization table, observational vs causal."""
    from .contrast import encode_contrast
    from .patching import activation_patching, compare_methods, localization

    lines = ["## Activation patching\n"]
    pair = task.contrast_pairs("topic_match", 1, seed=7, filler_swaps=2)[0]
    clean, corrupted = encode_contrast(pair)
    result = activation_patching(model, clean, corrupted, site="resid_pre", alignment="exact")
    fig = result.plot()
    tokens = pair.edited.tokens[: result.shape[-1]]
    fig.axes[0].set_xticks(range(len(tokens)), tokens, rotation=90)
    fig.axes[0].set_title("fraction of the topic_match effect restored (denoising resid_pre)")
    fig.tight_layout()
    save(fig, out_dir / "patching_resid_topic_match.png")
    lines.append(
        f"Denoising `resid_pre` on one topic_match pair (planted word at position "
        f"{pair.changed_positions[0]}, reward read at {pair.edited.reward_position}): "
        "![heat map](patching_resid_topic_match.png)\n"
    )
    contrast = [
        p
        for f in ("topic_match", "harmful", "sycophancy")
        for p in task.contrast_pairs(f, 16, seed=7, filler_swaps=2)
    ]
    table = localization(model, contrast)
    df = table.to_dataframe()[
        ["feature", "site", "top1_planted", "top1_reward", "planted_restored", "reward_restored"]
    ]
    lines += [
        "Where each feature's effect sits (16 contrast pairs each; share of pairs whose top "
        "patched unit is the planted span / the reward-reading token, and the mean fraction "
        "each restores):\n",
        markdown(df),
        "",
    ]
    save(table.plot("planted"), out_dir / "localization.png")
    print("\n" + df.to_string(float_format=lambda v: f"{v:.2f}"))
    comparison = compare_methods(model, pairs, components="heads", n_resamples=500)
    summary = comparison.summary()
    save(comparison.plot(), out_dir / "observational_vs_causal.png")
    lines += [
        "\n## Observational vs causal\n",
        f"Per pair, Spearman between methods over {len(comparison.labels[0])} components "
        f"(heads and MLPs), mean over {len(pairs)} pairs with 95% bootstrap intervals:\n",
        markdown(summary),
        "\n![scatter](observational_vs_causal.png)\n",
    ]
    print("\n" + summary.to_string(float_format=lambda v: f"{v:+.2f}"))
    return lines


def sae_section(model, task, out_dir: Path) -> list[str]:
    """A TopK SAE on the zoo model: reconstruction, planted-feature latents, exact feature
    attribution of the harmful margin at the final residual, concept vectors."""
    import pandas as pd

    from . import sae as S

    lines = ["\n## SAE features\n"]
    report, saes = S.zoo_ground_truth(model, task)
    site = S.ZOO_PLAN["harmful"][0]
    trained = saes[site]
    sae = trained.sae
    ids, mask = next(S.model_batches(model, task.examples(64, seed=5), batch_size=64))
    splice = S.splice_report(model, sae, ids, mask).summary()
    lines.append(
        f"TopK SAE at `{sae.cfg.metadata.hook_name}` ({sae.cfg.d_sae} latents, trained "
        f"offline with sae_lens in {trained.seconds:.0f} s, "
        f"{trained.samples_per_second:,.0f} activations/s): "
        f"FVU {splice['fvu']:.3f}, L0 {splice['l0']:.1f}. Spliced with its error term the reward "
        f"moves by at most {splice['max_error_with_error_term']:.1e}; without it by "
        f"{splice['mean_abs_reconstruction_error']:.3f} on average (reward std "
        f"{splice['reward_std']:.2f}).\n"
    )
    cols = ["feature", "hook_name", "metric", "latent", "correlation", "effect", "passed"]
    table = report.to_dataframe()[cols]
    lines += [
        "Latents carrying the planted features, each read where patching puts it (one SAE per "
        "site; correlation with the feature over held-out conversations, summed over the "
        "conversation or at the reward-reading token; effect = mean reward change when the "
        "latent is ablated):\n",
        markdown(table),
        "\n![ground truth](sae_ground_truth.png)\n",
    ]
    save(report.plot(), out_dir / "sae_ground_truth.png")
    print("\n" + table.to_string(float_format=lambda v: f"{v:+.3f}"))
    final = f"blocks.{model.cfg.n_layers - 1}.hook_resid_post"
    lines += _final_residual_attribution(model, task, saes[final].sae, out_dir)
    rows = []
    gated = getattr(model, "gating", None) is not None
    objective = model.objective_names[0] if gated else None  # a gated score has no one w_r
    for feature in ("topic_match", "harmful", "sycophancy", "length"):
        pairs = task.contrast_pairs(feature, 60, seed=4)
        vectors = S.concept_vectors(model, pairs, at="reward", objective=objective)
        cosines = dict(zip(vectors.labels, vectors.reward_cosine.tolist(), strict=True))
        rows.append({"feature": feature, **cosines})
    frame = pd.DataFrame(rows)
    lines += [
        "\nConcept vectors (difference of means at the reward-reading token, 60 contrast pairs): "
        "cosine with the reward direction `w_r`"
        + (f" of objective `{objective}`" if objective else "")
        + " per site:\n",
        markdown(frame),
        "",
    ]
    return lines


def _final_residual_attribution(model, task, sae, out_dir: Path) -> list[str]:
    from . import sae as S

    pairs = task.contrast_pairs("harmful", 40, seed=3)
    attribution = S.pair_feature_attribution(model, sae, pairs)
    margin = attribution.margin
    fig = margin.plot(k=10)
    fig.axes[0].set_title("harmful margin by final-residual SAE latent")
    save(fig, out_dir / "sae_margin_harmful.png")
    error = max(attribution.chosen.completeness_error(), attribution.rejected.completeness_error())
    top = ", ".join(f"{label} {value:+.2f}" for label, value in margin.top_k(3))
    terms = ", ".join(f"{k} {float(v.mean()):+.3f}" for k, v in margin.terms().items())
    print(f"\nharmful margin by final-residual latents: {top} (completeness {error:.1e})")
    return [
        f"Exact feature attribution of the harmful margin ({len(pairs)} contrast pairs) to a "
        f"final-residual SAE: top latents {top}; explicit terms {terms}; latents + terms − reward "
        f"= {error:.1e}.\n",
        "![feature attribution](sae_margin_harmful.png)\n",
    ]


def html_section(model_dir, pairs, out_dir: Path) -> list[str]:
    """The same pairs as an HTML page (``reward-lens report``): scores, lens, components,
    patching grids and coloured token views, in ``out_dir/html/report.html``."""
    import json

    from .report import build_report

    data = out_dir / "pairs.jsonl"
    rows = [{"prompt": p.prompt, "chosen": p.chosen, "rejected": p.rejected} for p in pairs]
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    numbers = build_report(model_dir, data, out_dir / "html", progress=False, n_patch=2)
    print(f"HTML report: {out_dir / 'html' / 'report.html'} ({len(numbers['sections'])} sections)")
    return [
        "## HTML report\n",
        f"[html/report.html](html/report.html): {', '.join(numbers['sections'])} "
        f"(accuracy {numbers['accuracy']:.0%}, the same as above).\n",
    ]
