"""Deprecated: the benchmark section is the report's.

It is `reward_lens_tl.report.sections.failures_section` on the zoo, in `reward-lens report`.
"""

from __future__ import annotations

from pathlib import Path


def benchmark_section(model, task, out_dir: Path) -> list[str]:
    """Deprecated alias: the report's failures section on the zoo, as markdown lines.

    The zoo's benchmark is scored by both zoo reward models, and this model's failures are
    explained.

    Args:
        model: the reward model whose failures are explained.
        task: the zoo task.
        out_dir: the folder the figures are saved into.

    Returns:
        The markdown lines.
    """
    from reward_lens_tl.report.legacy import markdown_lines, zoo_context
    from reward_lens_tl.report.sections import failures_section

    old = f"{__name__}.benchmark_section"
    return markdown_lines(old, [failures_section], zoo_context(model, task), out_dir)
