"""The demo report's section on implicit rewards and cross-model comparison.

:func:`implicit_section` compares the demo's reward model with the zoo DPO policy's implicit
reward: which planted features each rewards and by how much (the headline figure), and how far
they agree on held-out preference pairs.
"""

from __future__ import annotations

import random
from pathlib import Path


def implicit_section(model, task, out_dir: Path) -> list[str]:
    """Feature effects (rule, explicit RM, implicit RM) and a comparison summary; markdown."""
    from ..demo_sections import markdown, save
    from ..implicit import ImplicitRewardModel
    from ..zoo import zoo_path
    from .compare import compare_models
    from .features import feature_effects

    irm = ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))
    models = {"explicit": model, "implicit": irm}
    effects = feature_effects(models, task, n=40, seed=0, n_boot=500)
    fig = effects.plot()
    fig.axes[0].set_title("what each reward pays per planted feature (matched to the rule)")
    save(fig, out_dir / "implicit_feature_effects.png")
    table = effects.compare("explicit", "implicit")
    table = table[["feature", "effect_explicit", "effect_implicit", "ratio", "flagged"]]
    rng = random.Random(99)
    pairs = []
    while len(pairs) < 48:
        a, b = task.response_pair(rng, max_words=10)
        if a.score != b.score:
            pairs.append((a, b) if a.score > b.score else (b, a))
    comparison = compare_models(models, pairs, n_boot=500)
    row = comparison.agreement().iloc[0]
    depth = comparison.crystallization().set_index("model")["depth"]
    print("\n" + table.to_string(float_format=lambda v: f"{v:+.2f}"))
    return [
        "\n## Implicit reward of the DPO policy vs the explicit reward model\n",
        f"Implicit reward β·Σ log π/π_ref (β = {irm.beta}) of the zoo policy against this model, "
        "on 40 contrast pairs per planted feature; the implicit effects are put on the "
        "explicit model's scale by the median ratio over features (flagged: the paired 95% CI "
        "of the difference excludes 0 and it is ≥ 25% of the larger effect):\n",
        markdown(table),
        "\n![feature effects](implicit_feature_effects.png)\n",
        f"On {len(pairs)} held-out rule-labelled pairs the two agree on "
        f"{row['pairwise_agreement']:.0%} (95% CI {row['pairwise_agreement_low']:.0%}–"
        f"{row['pairwise_agreement_high']:.0%}) of pairs; margin Spearman "
        f"{row['margin_spearman']:+.2f}. The lens margin reaches half its final value at "
        f"relative depth {depth['explicit']:.2f} (explicit) and {depth['implicit']:.2f} "
        "(implicit policy).\n",
    ]
