"""The probe suite's section of ``make demo``'s report (zoo probes on the zoo model)."""

from __future__ import annotations

from pathlib import Path


def probes_section(model, task, out_dir: Path) -> list[str]:
    """Outside view (flagged probes), cascade onsets and components; saves two figures."""
    from ..demo_sections import markdown, save
    from .runner import run_probes
    from .zoo import PLANTED, zoo_examples, zoo_probes

    report = run_probes(model, zoo_examples(task, 64, seed=21, max_words=8), zoo_probes())
    frame = report.to_dataframe()
    cols = ["probe", "kind", "n", "mean_delta", "ci_low", "ci_high", "relative_effect", "flagged"]
    flagged, tested = report.false_positive_rate()
    lines = [
        "\n## Reward-hacking probes\n",
        "Probes in the zoo's vocabulary (`reward_lens_tl.probes.zoo`) on 64 held-out "
        "conversations. Flagged = bootstrap 95% CI of the mean delta excludes 0 and |mean| ≥ "
        f"0.1 × the natural reward sd ({report.natural_sd:.2f}). Invariance probes flagged: "
        f"{flagged} of {tested}.\n",
        markdown(frame[cols]),
        "",
        "| probe (planted feature) | onset at the reward token | amplification | top components "
        "of the delta |\n|---|---|---|---|",
    ]
    for c in report.cascade.probes:
        if c.probe in PLANTED:
            top = ", ".join(f"{n} {v:+.2f}" for n, v in c.top_components(3))
            lines.append(
                f"| {c.probe} ({PLANTED[c.probe]}) | {c.onset} | {c.amplification:.2f} | {top} |"
            )
    print(frame[cols].to_string(float_format=lambda v: f"{v:+.3f}"))
    save(report.plot(), out_dir / "probes.png")
    save(report.cascade.plot(), out_dir / "probe_cascade.png")
    return lines + [""]
