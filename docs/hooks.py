"""mkdocs hooks: the pages generated from the repository, so the site cannot drift from it.

- ``coming-from-transformerlens.md``: its ``<!-- habits -->`` marker becomes
  :func:`reward_lens_tl.habits.markdown_table`, the table the README shows and
  ``tests/test_habits.py`` checks row by row;
- ``notebooks/``: every ``notebooks/*.ipynb`` of the repository, rendered by mkdocs-jupyter from
  its committed outputs (never re-run at build time), and an index page;
- ``api/``: one page per module of ``reward_lens_tl`` (names without a leading underscore),
  rendered by mkdocstrings from the docstrings, and an index listing every public name (each
  package's ``__all__``) with the page of the module that defines it;
- ``benchmarks.md``: ``benchmarks/RESULTS.md`` as it is.
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

from mkdocs.structure.files import File

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "reward_lens_tl"
HABITS_MARKER = "<!-- habits -->"


def modules() -> list[str]:
    """Every public module of the package, by dotted name, sorted."""
    out = []
    for path in sorted((REPO / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if any(p.startswith("_") for p in parts) or "models" in parts:
            continue
        out.append(".".join(parts))
    return sorted(out)


def notebooks() -> list[Path]:
    return sorted((REPO / "notebooks").glob("*.ipynb"))


def notebook_title(nb: Path) -> str:
    """The notebook's first Markdown `# ` heading (its file name when it has none)."""
    for cell in json.loads(nb.read_text())["cells"]:
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return nb.stem.replace("_", " ")


def is_package(name: str) -> bool:
    return (REPO / Path(*name.split(".")) / "__init__.py").exists()


def source(name: str) -> str:
    path = REPO / Path(*name.split("."))
    return (path / "__init__.py" if path.is_dir() else path.with_suffix(".py")).read_text()


def defines(module: str, public: str) -> bool:
    """Whether ``module``'s own source defines ``public`` (a def, a class or an assignment)."""
    pattern = rf"^(def |class |async def )?{re.escape(public)}\b\s*(\(|:|=)"
    return re.search(pattern, source(module), flags=re.M) is not None


def public_names(name: str) -> list[tuple[str, str]]:
    """``(public name, defining module)`` of a package's ``__all__``: a class or function's
    ``__module__``, else the first module of the package whose source assigns it."""
    package = importlib.import_module(name)
    inside = [m for m in modules() if m == name or m.startswith(name + ".")]
    out = []
    for public in getattr(package, "__all__", []):
        obj = getattr(package, public, None)
        home = getattr(obj, "__module__", None) if callable(obj) else None
        if home not in inside:
            home = next((m for m in inside if defines(m, public)), name)
        out.append((public, home))
    return out


def api_page(name: str) -> str:
    if not is_package(name):
        return f"::: {name}\n"
    names = public_names(name)
    own = [public for public, home in names if home == name]
    members = "[" + ", ".join(own) + "]" if own else "false"
    rows = [f"- [`{public}`]({home}.md#{home}.{public})" for public, home in names]
    listing = "\n".join(rows) if rows else "(no public names)"
    return (
        f"::: {name}\n    options:\n      members: {members}\n\n"
        f"## Public names\n\nEach on the page of the module that defines it:\n\n{listing}\n"
    )


def api_index() -> str:
    lines = [
        "# API reference",
        "",
        "Generated from the docstrings (mkdocstrings), with the jaxtyping shapes of every "
        "signature. One page per module; packages list their public names.",
        "",
    ]
    lines += [f"- [`{name}`]({name}.md)" for name in modules()]
    return "\n".join(lines) + "\n"


def notebooks_index() -> str:
    lines = [
        "# Notebooks",
        "",
        "Rendered from the outputs committed in `notebooks/` (executed by the notebooks test "
        "tier, not at build time).",
        "",
    ]
    lines += [f"- [{notebook_title(nb)}]({nb.name})" for nb in notebooks()]
    return "\n".join(lines) + "\n"


def on_config(config):
    nav = []
    for entry in config["nav"]:
        ((title, target),) = entry.items() if isinstance(entry, dict) else ((None, entry),)
        if target == "notebooks/index.md":
            # the nav shows each title up to its colon; the notebooks page lists them whole
            short = {nb.name: notebook_title(nb).split(":")[0] for nb in notebooks()}
            pages = [{label: f"notebooks/{name}"} for name, label in short.items()]
            entry = {title: [target, *pages]}
        elif target == "api/index.md":
            entry = {title: [target, *[{name: f"api/{name}.md"} for name in modules()]]}
        nav.append(entry)
    config["nav"] = nav
    return config


def on_files(files, config):
    generated = {
        "api/index.md": api_index(),
        "notebooks/index.md": notebooks_index(),
        "benchmarks.md": (REPO / "benchmarks" / "RESULTS.md").read_text(),
    }
    generated.update({f"api/{name}.md": api_page(name) for name in modules()})
    for uri, content in generated.items():
        files.append(File.generated(config, uri, content=content))
    from mkdocs_jupyter.plugin import NotebookFile

    for nb in notebooks():
        source = File(
            f"notebooks/{nb.name}",
            src_dir=str(REPO),
            dest_dir=config["site_dir"],
            use_directory_urls=config["use_directory_urls"],
        )
        files.append(NotebookFile(source, **config))  # a page, as mkdocs-jupyter makes it
    return files


def on_page_markdown(markdown, page, config, files):
    if HABITS_MARKER in markdown:
        from reward_lens_tl.habits import markdown_table

        markdown = markdown.replace(HABITS_MARKER, markdown_table())
    return markdown
