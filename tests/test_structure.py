"""The package's shape (issue 38): rules a reader relies on, checked on the source.

- no `exec`/`eval` calls and no deprecation shims (a 0.1 package keeps no aliases);
- no `# type: ignore[override]`: subclasses keep their bases' signatures (judges and PRMs add
  keyword-only options; TransformerLens's call forms are overloads that refuse with typed errors);
- every module states its public names in `__all__` (an internal module has an empty one);
- imports inside the package are relative (one import style);
- no two modules of the package share the names a reader would confuse
  (`results.py`, `model.py`, `pairs.py`, `stats.py` exist once each).

The import cycles are checked by tests/evals/test_init.py; the route of `model` through
patching by `tools/param_walk.py` (CONTRIBUTING.md, "Patching").
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import reward_lens_tl

PACKAGE = Path(reward_lens_tl.__file__).parent
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _name(path: Path) -> str:
    return str(path.relative_to(PACKAGE))


def _calls(tree: ast.AST, names: set[str]) -> list[int]:
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names
    ]


def test_no_exec_eval_or_deprecation_shims():
    found = {}
    for path in MODULES:
        source = path.read_text()
        lines = _calls(ast.parse(source), {"exec", "eval"})
        if lines or "FutureWarning" in source:
            found[_name(path)] = lines or "FutureWarning"
    assert found == {}
    assert not (PACKAGE / "_deprecation.py").exists()


def test_no_override_ignores():
    found = [_name(p) for p in MODULES if "type: ignore[override" in p.read_text()]
    assert found == []


def test_every_module_states_its_public_names():
    missing = []
    for path in MODULES:
        tree = ast.parse(path.read_text())
        names = {
            t.id
            for node in tree.body
            if isinstance(node, ast.Assign | ast.AnnAssign)
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(t, ast.Name)
        }
        if "__all__" not in names:
            missing.append(_name(path))
    assert missing == []


def test_imports_inside_the_package_are_relative():
    absolute = []
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                module = node.module or ""
                if module == "reward_lens_tl" or module.startswith("reward_lens_tl."):
                    absolute.append(f"{_name(path)}:{node.lineno}")
            elif isinstance(node, ast.Import):
                absolute += [
                    f"{_name(path)}:{node.lineno}"
                    for alias in node.names
                    if alias.name.split(".")[0] == "reward_lens_tl"
                ]
    assert absolute == []


def test_module_names_say_what_they_hold():
    names = Counter(p.name for p in MODULES)
    repeated = {n: c for n, c in names.items() if c > 1 and n in CONFUSABLE}
    assert repeated == {}


CONFUSABLE = {"results.py", "model.py", "pairs.py", "stats.py", "checkpoint_info.py", "errors.py"}
