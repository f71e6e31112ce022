"""Renamed public names: the old name keeps working, warns once and points at the new one.

A module that renamed a public name serves the old one from a module `__getattr__`
(PEP 562), so `from module import OldName` and `module.OldName` both still work:

Examples:
    >>> import warnings
    >>> getattr_ = deprecated_names("my_module", {"old_sum": "builtins.sum"})
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     getattr_("old_sum")([1, 2]), getattr_("old_sum")([3])
    (3, 3)
    >>> [str(w.message) for w in caught]  # once, however often the old name is used
    ['my_module.old_sum is deprecated; use builtins.sum (same behaviour)']
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

_WARNED: set[str] = set()


def warn_renamed(old: str, new: str, note: str = "same behaviour", stacklevel: int = 3) -> None:
    """One `FutureWarning` per process for the deprecated name `old`."""
    if old in _WARNED:
        return
    _WARNED.add(old)
    warnings.warn(f"{old} is deprecated; use {new} ({note})", FutureWarning, stacklevel=stacklevel)


def old_first_parameter(owner: str, name: str, ax: Any, kind: type, value: Any) -> tuple[Any, Any]:
    """`(ax, value)` for a `plot(ax=None, name=value)` whose first parameter used to be `name`.

    A `kind` value given by position in the `ax` slot is read as `name` (with one `FutureWarning`
    saying to pass it by keyword) and `ax` becomes `None`.

    Examples:
        >>> old_first_parameter("Demo", "k", None, int, 12)
        (None, 12)
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     old_first_parameter("Demo", "k", 5, int, 12)
        (None, 5)
        >>> str(caught[0].message)
        'Demo.plot(k) by position is deprecated; use Demo.plot(k=...) (the first parameter is
        now ax)'
    """
    if not isinstance(ax, kind) or isinstance(ax, bool):
        return ax, value
    warn_renamed(
        f"{owner}.plot({name}) by position",
        f"{owner}.plot({name}=...)",
        "the first parameter is now ax",
        stacklevel=4,
    )
    return None, ax


def _resolve(target: str) -> Any:
    module, _, name = target.rpartition(".")
    return getattr(importlib.import_module(module), name)


def deprecated_names(module: str, renamed: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` serving each old name of `renamed` as its new object.

    `renamed` maps `{old: "pkg.mod.new"}`; each old name warns with `warn_renamed`; other names
    raise `AttributeError`.
    """

    def __getattr__(name: str) -> Any:
        if name not in renamed:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warn_renamed(f"{module}.{name}", renamed[name])
        return _resolve(renamed[name])

    return __getattr__
