"""Deprecated: the probe suite's section is the report's
(:func:`reward_lens_tl.report.sections.probes_section`), in ``reward-lens report`` on the zoo."""

from __future__ import annotations

from pathlib import Path


def probes_section(model, task, out_dir: Path) -> list[str]:
    """Deprecated alias: the report's probe section on the zoo (the zoo's probes and their
    cascade), as markdown lines (figures saved into ``out_dir``)."""
    from ..report.legacy import markdown_lines, zoo_context
    from ..report.sections import probes_section as section

    old = f"{__name__}.probes_section"
    return markdown_lines(old, [section], zoo_context(model, task), out_dir)
