"""Deprecated: the probe suite's section is the report's.

It is `reward_lens_tl.report.sections.probes_section`, in `reward-lens report` on the zoo.
"""

from __future__ import annotations

from pathlib import Path


def probes_section(model, task, out_dir: Path) -> list[str]:
    """Deprecated alias: the report's probe section on the zoo, as markdown lines.

    The section shows the zoo's probes and their cascade.

    Args:
        model: the zoo model.
        task: the zoo task.
        out_dir: where the figures are saved.

    Returns:
        The markdown lines.
    """
    from ..report.legacy import markdown_lines, zoo_context
    from ..report.sections import probes_section as section

    old = f"{__name__}.probes_section"
    return markdown_lines(old, [section], zoo_context(model, task), out_dir)
