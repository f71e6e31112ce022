"""A griffe extension for the API reference: the package's docstrings hold doctest examples
(``>>>`` lines and their output), which Markdown would read as text (and output such as
``['soup']`` as a link). Each run of doctest lines becomes a fenced ``pycon`` block.

Entry points whose options are declared once, as ``**options: Unpack[SomeOptions]`` (a
``TypedDict``), get those options spelled out as keyword-only parameters, as a type checker
reads them; griffe reads the source and would otherwise see only ``**options``."""

from __future__ import annotations

import inspect
import re
import typing
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


def unpacked_options(func: Any) -> list[griffe.Parameter] | None:
    """The keyword-only parameters of a function's ``**options: Unpack[TypedDict]``, or None."""
    last = func.parameters[-1] if len(func.parameters) else None
    if last is None or last.kind is not griffe.ParameterKind.var_keyword:
        return None
    documented = func.docstring.value if func.docstring else ""
    if func.parent is not None and func.name == "__init__" and func.parent.docstring:
        documented += func.parent.docstring.value
    if f"**{last.name}:" in documented:  # documented as one `**name` entry: keep it one
        return None
    if "Unpack[" not in str(last.annotation):
        return runtime_keywords(func)
    found = re.fullmatch(r"Unpack\[(\w+)\]", str(last.annotation))
    runtime = inspect.unwrap(griffe.dynamic_import(func.path))
    options = getattr(inspect.getmodule(runtime), found.group(1), None) if found else None
    if options is None or not typing.is_typeddict(options):
        return None
    return [  # the annotations as written (a TypedDict keeps them as forward references)
        griffe.Parameter(
            name,
            annotation=getattr(annotation, "__forward_arg__", None) or str(annotation),
            kind=griffe.ParameterKind.keyword_only,
        )
        for name, annotation in options.__annotations__.items()
        if name not in func.parameters
    ]


def runtime_keywords(func: Any) -> list[griffe.Parameter] | None:
    """The keyword-only parameters of the imported function's `__signature__`, where it spells
    out what the source takes as `**options` (`loading.loading_entry_point` sets one)."""
    runtime = griffe.dynamic_import(func.path)
    try:
        signature = inspect.signature(runtime)
    except (TypeError, ValueError):
        return None
    kinds = [p.kind for p in signature.parameters.values()]
    if inspect.Parameter.VAR_KEYWORD in kinds:
        return None
    return [
        griffe.Parameter(
            p.name,
            annotation=p.annotation if isinstance(p.annotation, str) else None,
            kind=griffe.ParameterKind.keyword_only,
            default=None if p.default is inspect.Parameter.empty else repr(p.default),
        )
        for p in signature.parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in func.parameters
    ]


def spell_out_options(func: Any) -> None:
    """Replace ``**options: Unpack[...]`` by the ``TypedDict``'s keys, keyword-only."""
    spelled = unpacked_options(func)
    if spelled is None:
        return
    del func.parameters[-1]
    for parameter in spelled:
        func.parameters[parameter.name] = parameter


class DoctestFences(griffe.Extension):
    def on_function_instance(self, *, func: Any, **kwargs: Any) -> None:
        for overload in func.overloads or ():
            spell_out_options(overload)
        spell_out_options(func)

    def on_object(self, *, obj: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            filled = pasted(obj)
            if filled is not None:
                obj.docstring.value = filled
            obj.docstring.value = fence_doctests(obj.docstring.value)
