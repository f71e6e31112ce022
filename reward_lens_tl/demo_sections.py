"""Deprecated: the demo's sections are the report's (`reward_lens_tl.report.zoo`).

They are in `reward-lens report` on the zoo. These aliases run them and return markdown lines.
"""

from __future__ import annotations

from pathlib import Path

from ._deprecation import warn_renamed


def save(fig, path: Path) -> None:
    """Deprecated: write a figure as PNG and close it.

    Args:
        fig: The matplotlib figure.
        path: Where to write it.
    """
    from .report.page import figure_png

    warn_renamed(f"{__name__}.save", "reward_lens_tl.report.page.figure_png")
    Path(path).write_bytes(figure_png(fig, dpi=120))


def markdown(frame) -> str:
    """Deprecated: a pandas frame as a markdown table.

    Args:
        frame: The pandas frame.

    Returns:
        The markdown table.
    """
    from .report.page import table_markdown

    warn_renamed(f"{__name__}.markdown", "reward_lens_tl.report.page.table_markdown")
    return table_markdown(frame)


def causal_section(model, task, pairs, out_dir: Path) -> list[str]:
    """Deprecated alias: the report's localization and observational-vs-causal sections.

    On `pairs`, as markdown lines (figures saved into `out_dir`).

    Args:
        model: The reward model.
        task: The zoo's task.
        pairs: The pairs.
        out_dir: Where the figures are written.

    Returns:
        The markdown lines.
    """
    from .report.legacy import markdown_lines, zoo_context
    from .report.zoo import localization_section, observational_section

    fns = [localization_section, observational_section]
    ctx = zoo_context(model, task, pairs)
    return markdown_lines(f"{__name__}.causal_section", fns, ctx, out_dir)


def sae_section(model, task, out_dir: Path) -> list[str]:
    """Deprecated alias: the report's SAE section on the zoo, as markdown lines.

    Args:
        model: The reward model.
        task: The zoo's task.
        out_dir: Where the figures are written.

    Returns:
        The markdown lines.
    """
    from .report.legacy import markdown_lines, zoo_context
    from .report.zoo import sae_section as section

    return markdown_lines(f"{__name__}.sae_section", [section], zoo_context(model, task), out_dir)


def html_section(model_dir, pairs, out_dir: Path) -> list[str]:
    """Deprecated alias: `reward-lens report` on `pairs` in `out_dir/html`.

    Args:
        model_dir: The reward model's directory.
        pairs: The pairs.
        out_dir: The folder holding `html/`.

    Returns:
        Markdown lines linking to it.
    """
    import json

    from .report import build_report

    warn_renamed(f"{__name__}.html_section", "reward_lens_tl.report.build_report")
    data = Path(out_dir) / "pairs.jsonl"
    rows = [{"prompt": p.prompt, "chosen": p.chosen, "rejected": p.rejected} for p in pairs]
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    numbers = build_report(model_dir, data, Path(out_dir) / "html", progress=False, n_patch=2)
    return [
        "## HTML report\n",
        f"[html/report.html](html/report.html): {', '.join(numbers['sections'])} "
        f"(accuracy {numbers['accuracy']:.0%}).\n",
    ]
