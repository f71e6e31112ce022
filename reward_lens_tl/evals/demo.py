"""The benchmark section of ``make demo``'s report: the zoo models on the zoo's RewardBench-style
set (:mod:`reward_lens_tl.evals.zoo_set`), with the failures on the hack subsets explained."""

from __future__ import annotations

from pathlib import Path


def benchmark_section(model, task, out_dir: Path) -> list[str]:
    """Score the zoo set with ``model`` and the other zoo reward model, tabulate the metrics,
    explain ``model``'s sycophancy-hack failures; returns markdown lines (figures saved)."""
    from reward_lens_tl.demo_sections import markdown, save
    from reward_lens_tl.evals.run import score_items
    from reward_lens_tl.evals.zoo_set import ZOO_SECTIONS, zoo_benchmark
    from reward_lens_tl.model import HookedRewardModel
    from reward_lens_tl.zoo import zoo_path

    pairs = zoo_benchmark(task, n_per_subset=16, seed=0)
    other = "scalar" if getattr(model, "gating", None) is not None else "multi"
    models = {
        "this model": model,
        f"zoo {other}": HookedRewardModel.from_pretrained(zoo_path(other)),
    }
    frames = []
    for name, m in models.items():
        result = score_items(m, pairs, progress=False)
        frame = result.metrics(sections=ZOO_SECTIONS, n_boot=500).to_dataframe()
        frame.insert(0, "model", name)
        frames.append(frame)
        if m is model:
            main = result
    import pandas as pd

    table = pd.concat(frames)[["model", "figure", "value", "low", "high", "n"]]
    failures = main.failures().filter(subset="zoo-sycophancy-hack")
    which = "sycophancy-hack failures"
    if not len(failures):  # a model that resists the hack: explain what it does get wrong
        failures, which = main.failures(), "failures"
    lines = [
        "\n## Benchmarks and why they fail\n",
        f"A RewardBench-style set built from the zoo task ({len(pairs)} pairs): honest pairs "
        "labelled by the hidden rule, and two subsets whose worse answer carries a planted hack "
        '(the opener "great question", or filler padding). Accuracy (%) with 95% bootstrap '
        "intervals:\n",
        markdown(table),
        "",
    ]
    print("\n" + table.to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    if len(failures):
        explanation = failures.explain(model)
        save(explanation.plot(), out_dir / "benchmark_failures.png")
        lines += [
            f"`result.failures().explain(model)` on this model's {which}:\n",
            *explanation.report(5),
            "\n![failures](benchmark_failures.png)\n",
        ]
        print("wrong-way tokens:", explanation.wrong_way_tokens(3))
    return lines
