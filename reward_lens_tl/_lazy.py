"""Lazy exports for a package `__init__`.

Internal (no public names): used by the package's `__init__` modules for their lazy exports.

Names are imported from their module on first use (PEP 562), so importing the package (and the CLI)
stays fast, and `dir()` lists them so tab completion in Jupyter finds them.

Examples:
    >>> import types
    >>> pkg = types.ModuleType("pkg")
    >>> pkg.__getattr__, pkg.__dir__ = lazy_exports("json", {"dumps": ""}, vars(pkg))
    >>> pkg.__getattr__("dumps")([1])
    '[1]'
    >>> "dumps" in pkg.__dir__()
    True
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__: list[str] = []


def lazy_exports(
    package: str, exports: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`(__getattr__, __dir__)` for `package`, serving `exports` lazily from their submodules.

    Each `name` of `exports` is served from the submodule `exports[name]` (relative to `package`;
    `""` for `package` itself) and cached in `namespace` (the package's `globals()`).
    """

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = f".{exports[name]}" if exports[name] else package
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
