"""Docstrings as the reference (issue 27, item 3).

Every public function and class of the package (a name in some module's `__all__`) documents
each of its parameters in a Google-style `Args:` (or, for a class's fields, `Attributes:`)
entry and carries a runnable `>>>` example under `Examples:`; the public methods of those
classes document their parameters the same way. The examples themselves run as doctests in the
fast tier (`--doctest-modules`, `pyproject.toml`); ruff's pydocstyle rules check the sections'
form (`make lint`). Parametrized by the defining module, so `-k patching` checks one package.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
import re
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest

import reward_lens_tl

#: an entry of an `Args:` / `Attributes:` section: `name:`, `name (type):`, `*args:`
ENTRY = r"^\s+\**{name}( \([^)]*\))?:"


@cache
def public_objects() -> dict[str, dict[str, object]]:
    """Defining module -> qualified name -> object, for every function and class in an `__all__`."""
    names = ["reward_lens_tl"] + [
        m.name for m in pkgutil.walk_packages(reward_lens_tl.__path__, "reward_lens_tl.")
    ]
    found: dict[str, dict[str, object]] = defaultdict(dict)
    for name in names:
        module = importlib.import_module(name)
        for public in getattr(module, "__all__", ()):
            obj = getattr(module, public, None)
            if inspect.isfunction(obj) or inspect.isclass(obj):
                found[obj.__module__][obj.__qualname__] = obj
    return dict(found)


def parameters(obj) -> list[str]:
    """The named parameters a caller passes (no `self`, no inherited exception constructor)."""
    if inspect.isclass(obj) and issubclass(obj, BaseException):
        if not inspect.isfunction(obj.__init__):
            return []
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    return [
        n
        for n, p in signature.parameters.items()
        if n not in ("self", "cls") and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


def undocumented(obj) -> list[str]:
    doc = inspect.getdoc(obj) or ""
    return [n for n in parameters(obj) if not re.search(ENTRY.format(name=re.escape(n)), doc, re.M)]


def public_methods(cls) -> dict[str, object]:
    """The class's own public methods (properties have no parameters to document)."""
    methods = {}
    for name, attr in vars(cls).items():
        function = getattr(attr, "__func__", attr)
        if not name.startswith("_") and inspect.isfunction(function):
            if function.__module__ == cls.__module__:
                methods[name] = function
    return methods


MODULES = sorted(public_objects())


@pytest.mark.parametrize("module", MODULES)
def test_public_names_have_a_runnable_example(module):
    missing = []
    for qualname, obj in public_objects()[module].items():
        doc = inspect.getdoc(obj) or ""
        section = doc.partition("\nExamples:\n")[2]
        if ">>>" not in section:
            missing.append(qualname)
    assert missing == [], f"{module}: no `>>>` example under `Examples:` in {missing}"


@pytest.mark.parametrize("module", MODULES)
def test_parameters_are_documented(module):
    missing = {}
    for qualname, obj in public_objects()[module].items():
        if gaps := undocumented(obj):
            missing[qualname] = gaps
        if inspect.isclass(obj):
            for name, method in public_methods(obj).items():
                if gaps := undocumented(method):
                    missing[f"{qualname}.{name}"] = gaps
    assert missing == {}, f"{module}: parameters without an `Args:` entry: {missing}"


def test_the_checks_see_the_package():
    """The walk finds the package's public API (a broken walk would pass everything above)."""
    objects = public_objects()
    assert "reward_lens_tl.model" in objects
    assert "HookedRewardModel" in objects["reward_lens_tl.model"]
    assert sum(map(len, objects.values())) > 300
    assert undocumented(lambda x, y: None) == ["x", "y"]


def module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a child of a module that is not a package
        return False


def test_slow_doctests_name_real_examples():
    """Every example the root conftest moves to the slow tier exists (no stale entry)."""
    root = Path(__file__).resolve().parents[1] / "conftest.py"
    spec = importlib.util.spec_from_file_location("root_conftest", root)
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    for name in conftest.SLOW_DOCTESTS:
        parts = name.split(".")
        # the longest importable prefix is the module, the rest the object's qualified name
        cut = 1
        while cut < len(parts) and module_exists(".".join(parts[: cut + 1])):
            cut += 1
        obj = importlib.import_module(".".join(parts[:cut]))
        for part in parts[cut:]:
            obj = getattr(obj, part)
        assert ">>>" in (inspect.getdoc(obj) or ""), name
