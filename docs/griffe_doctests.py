"""A griffe extension for the API reference: the package's docstrings hold doctest examples
(``>>>`` lines and their output), which Markdown would read as text (and output such as
``['soup']`` as a link). Each run of doctest lines becomes a fenced ``pycon`` block."""

from __future__ import annotations

import inspect
import re
from typing import Any

import griffe

#: A line that is only a `{name}` placeholder: shared text `pasted_docs` fills in at import time.
PLACEHOLDER = re.compile(r"^\s*\{\w+\}\s*$", re.M)


def pasted(obj: Any) -> str | None:
    """The imported object's docstring, where the source's holds `pasted_docs` placeholders.

    griffe reads the source, which still has `{options}` / `{request}`; the docstring a user
    sees (`help`, `inspect.getdoc`) has them filled in, and that is the one the reference shows.
    """
    if obj.docstring is None or not PLACEHOLDER.search(obj.docstring.value):
        return None
    runtime = griffe.dynamic_import(obj.path)
    return inspect.getdoc(runtime)


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
            filled = pasted(obj)
            if filled is not None:
                obj.docstring.value = filled
            obj.docstring.value = fence_doctests(obj.docstring.value)
