"""The main job (``reward-lens demo``): score, lens, attribute and patch the zoo reward model.

Loads the scalar zoo model from its local checkpoint directory through the same path a user's
checkpoint takes, scores held-out preference pairs labelled by the hidden rule, runs the reward
lens and direct attribution on contrast pairs of each planted feature, then activation
patching: a layer × position heat map, where each feature's effect sits per layer, and the
observational-vs-causal comparison over the preference pairs, and SAE features (which latents
carry the planted features, exact feature attribution of a margin, concept vectors). Writes
``report.md`` and PNG plots to the output directory and prints the main numbers.
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
    from .contrast import encode_contrast
    from .crossmodel.report import implicit_section
    from .demo_sections import causal_section, html_section, markdown, sae_section, save
    from .evals.demo import benchmark_section
    from .lens import pair_lens
    from .model import HookedRewardModel
    from .probes.demo import probes_section
    from .scoring import score_pairs
    from .zoo import load_task, zoo_path

    out_dir.mkdir(parents=True, exist_ok=True)
    model_dir = Path(model_dir) if model_dir else zoo_path("scalar")
    model = HookedRewardModel.from_pretrained(model_dir)
    task = load_task().task
    lines = [
        f"# reward-lens demo\n\nmodel: `{Path(model_dir).name}` ({model.adapter.describe()}, "
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
        markdown(table),
        "",
        f"Agreement with the hidden rule: {scores.accuracy:.0%} of {len(pairs)} pairs.\n",
    ]
    save(scores.plot(), out_dir / "margins.png")

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
            save(fig, out_dir / f"{name}_{feature}.png")
    lines += causal_section(model, task, pairs, out_dir)
    lines += sae_section(model, task, out_dir)
    lines += probes_section(model, task, out_dir)
    lines += benchmark_section(model, task, out_dir)
    lines += implicit_section(model, task, out_dir)
    lines += html_section(model_dir, pairs, out_dir)
    (out_dir / "report.md").write_text("\n".join(lines) + "\n")
    print(f"\nreport written to {out_dir / 'report.md'}")
    return {"accuracy": scores.accuracy, "out_dir": str(out_dir)}
