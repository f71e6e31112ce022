"""Deprecated: the benchmark section is the report's
(:func:`reward_lens_tl.report.sections.failures_section` on the zoo), in ``reward-lens report``."""

from __future__ import annotations

from pathlib import Path


def benchmark_section(model, task, out_dir: Path) -> list[str]:
    """Deprecated alias: the report's failures section on the zoo (the zoo's benchmark scored by
    both zoo reward models, this model's failures explained), as markdown lines (figures saved
    into ``out_dir``)."""
    from reward_lens_tl.report.legacy import markdown_lines, zoo_context
    from reward_lens_tl.report.sections import failures_section

    old = f"{__name__}.benchmark_section"
    return markdown_lines(old, [failures_section], zoo_context(model, task), out_dir)
