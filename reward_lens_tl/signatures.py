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
from collections.abc import Callable, Sequence
from functools import partial
from typing import ParamSpec, TypeVar

from .errors import UnknownKeywordError

__all__ = ["checked_keywords", "pasted_docs", "unknown_parameter"]

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
        kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        params = inspect.signature(fn).parameters
        names = tuple(n for n, p in params.items() if p.kind in kinds and n not in ("self", "cls"))
        accepted = frozenset(names)
        error = unknown or partial(unknown_parameter, fn.__qualname__)

        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            for name in kwargs:
                if name not in accepted:
                    raise error(name, names)
            return fn(*args, **kwargs)

        return wrapper

    return decorate


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
