"""The evals package's exports resolve lazily; the whole package has no import cycle."""

from __future__ import annotations

import pytest

from reward_lens_tl.evals import eval_result, run


def _module_name(path, root):
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree, module_level_only: bool):
    """Import statements of a module: those run on import (module level, outside ``if
    TYPE_CHECKING:``), or every one (function-level imports included)."""
    import ast

    if not module_level_only:
        yield from (n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom))
        return
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
            todo += node.body + node.orelse
        elif isinstance(node, ast.Try):
            todo += node.body + node.orelse + node.finalbody


def import_graph(module_level_only: bool = True) -> dict[str, set[str]]:
    """``{module: modules of the package it imports}`` parsed with ``ast`` (relative and
    absolute imports; ``from pkg import name`` counts ``pkg.name`` when that is a module)."""
    import ast
    from pathlib import Path

    import reward_lens_tl

    root = Path(reward_lens_tl.__file__).parent
    paths = {_module_name(p, root): p for p in root.rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in _imports(ast.parse(path.read_text(encoding="utf-8")), module_level_only):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name in paths}
                continue
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.add(target if target in paths else base)
        graph[name] = {m for m in found if m in paths and m != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (``[a, b, …, a]``), or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(node):
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_the_package_has_no_import_cycle():
    """No module-level import cycle in the package; in ``evals`` none even counting the
    imports inside functions (the explain ↔ results ↔ run cycle used to hide there)."""
    graph = import_graph()
    assert {"reward_lens_tl.evals.explain", "reward_lens_tl.evals.comparisons"} <= set(graph)
    assert "reward_lens_tl.evals.comparisons" in graph["reward_lens_tl.evals.explain"]
    assert find_cycle(graph) is None
    everything = import_graph(module_level_only=False)
    evals = {
        name: {m for m in targets if m.startswith("reward_lens_tl.evals.")}
        for name, targets in everything.items()
        if name.startswith("reward_lens_tl.evals.")
    }
    assert "reward_lens_tl.evals.explain" in evals["reward_lens_tl.evals.eval_result"]
    assert find_cycle(evals) is None
    zoo = {  # train → evaluate → judge/prm → train used to close through function-level imports
        name: {m for m in targets if m.startswith("reward_lens_tl.zoo.")}
        for name, targets in everything.items()
        if name.startswith("reward_lens_tl.zoo.")
    }
    assert "reward_lens_tl.zoo.loop" in zoo["reward_lens_tl.zoo.judge"]
    assert find_cycle(zoo) is None


def test_evals_exports_resolve_lazily():
    """Every name of ``evals.__all__`` resolves (to the object its module defines), the list
    has no repeats, ``dir()`` shows them, and importing the package imports no torch."""
    import subprocess
    import sys

    from reward_lens_tl import evals

    assert len(evals.__all__) == len(set(evals.__all__)) >= 25
    for name in evals.__all__:
        value = getattr(evals, name)
        where = evals._EXPORTS.get(name)  # the errors are reward_lens_tl.errors', imported at once
        module = sys.modules[f"reward_lens_tl.evals.{where}" if where else "reward_lens_tl.errors"]
        assert value is getattr(module, name), name
    assert set(evals.__all__) <= set(dir(evals))
    assert evals.Failures is eval_result.Failures and evals.score_items is run.score_items
    with pytest.raises(AttributeError):
        evals.no_such_name  # noqa: B018
    code = "import sys, reward_lens_tl.evals; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
