"""The demo's former section functions, kept as deprecated aliases of the report's sections.

`make demo` used to write its own markdown report from functions of several modules
(`demo_sections`, `evals.demo`, `probes.demo`, `crossmodel.report`); it is now
`reward-lens report` on the zoo, and those functions run the report's sections on the zoo
(`zoo_context`) and return their markdown lines, figures saved into `out_dir`, after a
`FutureWarning` (once per name).

Examples:
    >>> import warnings
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.zoo import load_task, zoo_path
    >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    >>> ctx = zoo_context(model, load_task().task)
    >>> len(ctx["pairs"]), list(ctx["kept"]) == list(range(8))
    (8, True)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from .._deprecation import warn_renamed
from .page import Section, sections_markdown

NEW = "`reward-lens report` / reward_lens_tl.report.build_report (the zoo report)"


def zoo_context(model, task, pairs: Sequence | None = None) -> dict:
    """What the report's sections read on the zoo: the model, the task and the pairs (all kept).

    Args:
        model: The reward model.
        task: The zoo's task.
        pairs: The pairs (default `reward_lens_tl.report.zoo.zoo_pairs`).

    Returns:
        The context.
    """
    from .zoo import zoo_pairs

    pairs = list(zoo_pairs(task) if pairs is None else pairs)
    return {
        "model": model,
        "task": task,
        "pairs": pairs,
        "kept": range(len(pairs)),
        "truncation": "error",
        "numbers": {},
    }


def markdown_lines(
    old: str, fns: Sequence[Callable[[dict], Section | None]], ctx: dict, out_dir
) -> list[str]:
    """Warn that `old` is deprecated, run the sections `fns` on `ctx` and return their markdown.

    Their figures are written into `out_dir`.

    Args:
        old: The deprecated function's name.
        fns: The section functions.
        ctx: The report's context.
        out_dir: Where the figures are written.

    Returns:
        The sections' markdown lines.
    """
    warn_renamed(old, NEW, note="the same sections, in report.md and report.html", stacklevel=4)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    sections = [s for s in (fn(ctx) for fn in fns) if s is not None]
    text, files = sections_markdown(sections)
    for name, png in files.items():
        (out / name).write_bytes(png)
    return ["", *text.splitlines(), ""]
