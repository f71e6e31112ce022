"""Deprecated: the main job is `reward-lens report` on the zoo (`make demo`).

It is built by `reward_lens_tl.report.build_report` with no pair file.
"""

from __future__ import annotations

from pathlib import Path

from ._deprecation import warn_renamed


def run_demo(model_dir: str | Path | None = None, out_dir: Path = Path("reports/demo")) -> dict:
    """Deprecated alias of `build_report(model_dir, None, out_dir)`.

    The zoo report (`report.html`, `report.md` with its PNG figures, `report.json`) in
    `out_dir`.

    Args:
        model_dir: The reward model's directory (default the zoo's scalar model).
        out_dir: Where the report is written.

    Returns:
        The accuracy and the folder.
    """
    from .report import build_report

    warn_renamed(
        f"{__name__}.run_demo",
        "reward_lens_tl.report.build_report(model_dir, None, out_dir)",
        note="the same report, as `reward-lens report`",
    )
    numbers = build_report(model_dir, None, out_dir, markdown=True)
    return {"accuracy": numbers["accuracy"], "out_dir": str(out_dir)}
