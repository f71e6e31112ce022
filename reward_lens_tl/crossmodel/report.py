"""Deprecated: the implicit-reward section is the report's.

It is `reward_lens_tl.report.zoo.implicit_section`, in `reward-lens report` on the zoo.
"""

from __future__ import annotations

from pathlib import Path


def implicit_section(model, task, out_dir: Path) -> list[str]:
    """Deprecated alias: the report's implicit-reward section on the zoo, as markdown lines.

    Args:
        model: the implicit reward model.
        task: the zoo task.
        out_dir: the folder the figures are saved into.

    Returns:
        The markdown lines.
    """
    from ..report.legacy import markdown_lines, zoo_context
    from ..report.zoo import implicit_section as section

    old = f"{__name__}.implicit_section"
    return markdown_lines(old, [section], zoo_context(model, task), out_dir)
