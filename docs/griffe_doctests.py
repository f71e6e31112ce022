"""A griffe extension for the API reference: the package's docstrings hold doctest examples
(``>>>`` lines and their output), which Markdown would read as text (and output such as
``['soup']`` as a link). Each run of doctest lines becomes a fenced ``pycon`` block."""

from __future__ import annotations

from typing import Any

import griffe


def fence_doctests(text: str) -> str:
    """Wrap every doctest (a ``>>>`` line, its ``...`` continuations and its output, up to a
    blank line) in a fenced code block."""
    out: list[str] = []
    block: list[str] = []
    indent = ""
    for line in [*text.splitlines(), ""]:
        stripped = line.lstrip()
        if block:
            if stripped:
                block.append(line[len(indent) :] if line.startswith(indent) else stripped)
                continue
            out += [f"{indent}```pycon", *[f"{indent}{b}" for b in block], f"{indent}```"]
            block = []
        if stripped.startswith(">>>"):
            indent = line[: len(line) - len(stripped)]
            block = [stripped]
            continue
        out.append(line)
    return "\n".join(out[:-1] if out and out[-1] == "" and not text.endswith("\n") else out)


class DoctestFences(griffe.Extension):
    def on_object(self, *, obj: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(obj.docstring.value)
