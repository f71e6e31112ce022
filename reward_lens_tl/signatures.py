"""Signature helpers: shared docstring text and typed errors for unknown keywords.

Several entry points take the same parameters (the conversion options; the patching fields).
`pasted_docs` documents them from one text; `checked_keywords` turns Python's bare `TypeError`
for a mistyped keyword into an `UnknownKeywordError` that names the closest parameter.

Examples:
    >>> @checked_keywords()
    ... def f(x, *, site="z"):
    ...     return site
    >>> f(1, site="k")
    'k'
"""

from __future__ import annotations

import difflib
import functools
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, ParamSpec, TypeVar

from .errors import UnknownKeywordError

__all__ = ["checked_keywords", "checked_options", "pasted_docs", "spelled_out", "unknown_parameter"]

P = ParamSpec("P")
R = TypeVar("R")


def pasted_docs(**blocks: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorator pasting shared text into a docstring.

    Each `{name}` becomes `blocks[name]`, indented as the placeholder is. Several entry points
    that take the same parameters document them from one text.

    Args:
        **blocks: Placeholder name → the text pasted there.

    Returns:
        The decorator (it returns the function itself, its `__doc__` filled in).

    Examples:
        >>> shared = "- ``x``: a number;"
        >>> @pasted_docs(params=shared)
        ... def f(x):
        ...     '''Add one.
        ...
        ...     {params}
        ...     '''
        >>> f.__doc__.splitlines()[-2].strip()
        '- ``x``: a number;'
    """

    def paste(fn: Callable[P, R]) -> Callable[P, R]:
        doc = fn.__doc__ or ""
        for name, text in blocks.items():
            placeholder = "{" + name + "}"
            found = re.search(r"\n( *)" + re.escape(placeholder), doc)
            indent = found.group(1) if found else ""
            doc = doc.replace(placeholder, text.replace("\n", "\n" + indent))
        fn.__doc__ = doc
        return fn

    return paste


def checked_keywords(
    unknown: Callable[[str, Sequence[str]], Exception] | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a function so that a keyword it does not take raises a typed error.

    The error is `unknown(name, parameters)` (default: an `UnknownKeywordError`, a `TypeError`,
    naming the closest parameter) instead of Python's bare `TypeError`. The signature seen by
    `inspect` and by type checkers is the function's own.

    Args:
        unknown: Builds the error for a keyword the function does not take.

    Returns:
        The decorator.

    Examples:
        >>> @checked_keywords()
        ... def f(x, *, site="z"):
        ...     return site
        >>> try:
        ...     f(1, sites="k")
        ... except TypeError as err:
        ...     print(type(err).__name__, "|", err)
        UnknownKeywordError | f() got an unknown keyword 'sites'. Did you mean 'site'? ...
    """

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        return _checking(fn, _keywords(fn), unknown)

    return decorate


def checked_options(options: type) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """`checked_keywords` for a function taking `**options: Unpack[Options]`.

    Its keywords are its named parameters and the keys of the `TypedDict` `options`; any
    other keyword raises an `UnknownKeywordError` naming the closest one.

    Args:
        options: The `TypedDict` class that declares the `**options` keys.

    Returns:
        The decorator.

    Examples:
        >>> from typing import TypedDict, Unpack
        >>> class Options(TypedDict, total=False):
        ...     layers: list[int]
        >>> @checked_options(Options)
        ... def f(x, *, site="z", **options: Unpack[Options]):
        ...     return site, options
        >>> f(1, layers=[0])
        ('z', {'layers': [0]})
        >>> try:
        ...     f(1, layer=[0])
        ... except TypeError as err:
        ...     print(type(err).__name__, "|", err)
        UnknownKeywordError | f() got an unknown keyword 'layer'. Did you mean 'layers'? ...
    """

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        return _checking(fn, _keywords(fn) + tuple(options.__annotations__), None)

    return decorate


def _keywords(fn: Callable[..., object]) -> tuple[str, ...]:
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    params = inspect.signature(fn).parameters
    return tuple(n for n, p in params.items() if p.kind in kinds and n not in ("self", "cls"))


def _checking(
    fn: Callable[P, R],
    names: tuple[str, ...],
    unknown: Callable[[str, Sequence[str]], Exception] | None,
) -> Callable[P, R]:
    accepted = frozenset(names)
    error = unknown or partial(unknown_parameter, fn.__qualname__)

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        for name in kwargs:
            if name not in accepted:
                raise error(name, names)
        return fn(*args, **kwargs)

    return wrapper


def unknown_parameter(function: str, name: str, names: Sequence[str]) -> UnknownKeywordError:
    """The error for a keyword that `function` does not take, with the closest ones named.

    Args:
        function: The function's name.
        name: The keyword given.
        names: The function's parameters.

    Returns:
        The error (not raised).

    Examples:
        >>> print(unknown_parameter("f", "sites", ["site", "layers"]))
        f() got an unknown keyword 'sites'. Did you mean 'site'? Parameters: site, layers.
    """
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return UnknownKeywordError(
        f"{function}() got an unknown keyword {name!r}.{hint} Parameters: {', '.join(names)}."
    )


def spelled_out(
    defaults: Mapping[str, Any], annotations: Mapping[str, Any]
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorator showing a function's `**options` as one keyword-only parameter per option.

    For a function taking `**options: Unpack[SomeTypedDict]`: `inspect.signature`, `help()` and
    `checked_keywords` (apply it outside this one) then see each option with its default and
    type, as if it were spelled out in the `def`. Positional parameters and `*args` are dropped
    from the shown signature except the named ones before them.

    Args:
        defaults: Option name → default, in the order shown.
        annotations: Option name → annotation (the TypedDict's `__annotations__`).

    Returns:
        The decorator (it returns the function itself, with `__signature__` set).

    Examples:
        >>> @spelled_out({"site": "z", "layers": None}, {"site": "str"})
        ... def f(x, **options):
        ...     return options
        >>> import inspect
        >>> str(inspect.signature(f))
        "(x, *, site: 'str' = 'z', layers=None)"
    """

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(fn)
        kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        named = [p for p in signature.parameters.values() if p.kind in kinds]
        shown = [
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=default,
                annotation=annotations.get(name, inspect.Parameter.empty),
            )
            for name, default in defaults.items()
        ]
        target: Any = fn  # a function object takes the attribute `inspect.signature` reads
        target.__signature__ = signature.replace(parameters=[*named, *shown])
        return fn

    return decorate
