"""The main job (``reward-lens demo``): score, lens, attribute and patch the zoo reward model.

Loads the scalar zoo model from its local checkpoint directory through the same path a user's
checkpoint takes, scores held-out preference pairs labelled by the hidden rule, runs the reward
lens and direct attribution on contrast pairs of each planted feature, then activation
patching: a layer × position heat map, where each feature's effect sits per layer, and the
observational-vs-causal comparison over the preference pairs. Writes ``report.md`` and PNG
plots to the output directory and prints the main numbers.
"""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")


def run_demo(model_dir: str | Path | None = None, out_dir: Path = Path("reports/demo")) -> dict:
    import torch

    with torch.no_grad():
        return _run_demo(model_dir, Path(out_dir))


def _run_demo(model_dir, out_dir: Path) -> dict:
    from .attribution import attribute_pairs
    from .ground_truth import encode_contrast
    from .lens import pair_lens
    from .model import HookedRewardModel
    from .scoring import score_pairs
    from .zoo import load_task, zoo_path

    out_dir.mkdir(parents=True, exist_ok=True)
    model_dir = Path(model_dir) if model_dir else zoo_path("scalar")
    model = HookedRewardModel.from_pretrained(model_dir)
    task = load_task().task
    lines = [
        f"# reward-lens demo\n\nmodel: `{model_dir}` ({model.adapter.describe()}, "
        f"{model.cfg.n_layers} layers, d_model {model.cfg.d_model})\n"
    ]
    print(lines[0])

    # 1. preference pairs labelled by the hidden rule
    rng = random.Random(1234)
    pairs = []
    while len(pairs) < 8:
        a, b = task.response_pair(rng, max_words=8)
        if a.score != b.score:
            chosen, rejected = (a, b) if a.score > b.score else (b, a)
            pairs.append(
                SimpleNamespace(
                    prompt=" ".join(chosen.prompt),
                    chosen=" ".join(chosen.response),
                    rejected=" ".join(rejected.response),
                    subset="zoo",
                    rule_margin=chosen.score - rejected.score,
                )
            )
    scores = score_pairs(model, pairs)
    frame = scores.to_dataframe()
    frame.insert(1, "prompt", [p.prompt for p in pairs])
    frame["rule_margin"] = [p.rule_margin for p in pairs]
    table = frame[["prompt", "chosen", "rejected", "margin", "rule_margin"]]
    print(table.to_string(float_format=lambda v: f"{v:+.3f}"))
    print(f"\nagreement with the hidden rule: {scores.accuracy:.0%} of {len(pairs)} pairs\n")
    lines += [
        "## Rewards and margins\n",
        _markdown(table),
        "",
        f"Agreement with the hidden rule: {scores.accuracy:.0%} of {len(pairs)} pairs.\n",
    ]
    scores.plot().savefig(out_dir / "margins.png", dpi=120)

    # 2. reward lens and direct attribution on contrast pairs per planted feature
    lines.append("## Reward lens and direct attribution on planted features\n")
    lines.append(
        "| feature | mean margin | lens: first site at 50% | top components (mean) | "
        "Σparts − margin |\n|---|---|---|---|---|"
    )
    for feature in ("topic_match", "harmful", "sycophancy", "length"):
        encoded = [encode_contrast(p) for p in task.contrast_pairs(feature, 24, seed=7)]
        lens = pair_lens(model, encoded)
        margin = attribute_pairs(model, encoded).margin
        sites = lens.crystallization(0.5)
        common = max(set(sites), key=sites.count)
        top = ", ".join(f"{c} {v:+.2f}" for c, v in margin.top_k(3))
        lines.append(
            f"| {feature} | {float(margin.rewards.mean()):+.3f} | {common} | {top} | "
            f"{margin.completeness_error():.1e} |"
        )
        print(
            f"{feature:12s} margin {float(margin.rewards.mean()):+.3f}  lens@50%: {common:7s}"
            f"  top: {top}"
        )
        for name, fig in (("lens", lens.plot()), ("attribution", margin.plot(k=12))):
            fig.axes[0].set_title(f"{name} of the margin: planted feature '{feature}'")
            fig.savefig(out_dir / f"{name}_{feature}.png", dpi=120)
    lines += _causal_section(model, task, pairs, out_dir)
    (out_dir / "report.md").write_text("\n".join(lines) + "\n")
    print(f"\nreport written to {out_dir / 'report.md'}")
    return {"accuracy": scores.accuracy, "out_dir": str(out_dir)}


def _causal_section(model, task, pairs, out_dir: Path) -> list[str]:
    """Activation patching: one heat map, the localization table, observational vs causal."""
    from .ground_truth import encode_contrast
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
    fig.savefig(out_dir / "patching_resid_topic_match.png", dpi=120)
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
        _markdown(df),
        "",
    ]
    table.plot("planted").savefig(out_dir / "localization.png", dpi=120)
    print("\n" + df.to_string(float_format=lambda v: f"{v:.2f}"))
    comparison = compare_methods(model, pairs, components="heads", n_resamples=500)
    summary = comparison.summary()
    comparison.plot().savefig(out_dir / "observational_vs_causal.png", dpi=120)
    lines += [
        "\n## Observational vs causal\n",
        f"Per pair, Spearman between methods over {len(comparison.labels[0])} components "
        f"(heads and MLPs), mean over {len(pairs)} pairs with 95% bootstrap intervals:\n",
        _markdown(summary),
        "\n![scatter](observational_vs_causal.png)\n",
    ]
    print("\n" + summary.to_string(float_format=lambda v: f"{v:+.2f}"))
    return lines


def _markdown(frame) -> str:
    header = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "---|" * len(frame.columns)
    rows = [
        "| " + " | ".join(f"{v:+.3f}" if isinstance(v, float) else str(v) for v in row) + " |"
        for row in frame.itertuples(index=False)
    ]
    return "\n".join([header, rule, *rows])
