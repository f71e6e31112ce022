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
import inspect
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


def is_package(name: str) -> bool:
    return (REPO / Path(*name.split(".")) / "__init__.py").exists()


def public_names(name: str) -> list[tuple[str, str]]:
    """``(public name, defining module)`` of a package's ``__all__``."""
    module = importlib.import_module(name)
    out = []
    for public in getattr(module, "__all__", []):
        obj = getattr(module, public, None)
        home = getattr(obj, "__module__", None) if obj is not None else None
        if not (inspect.isclass(obj) or inspect.isfunction(obj)) or home not in modules():
            home = name
        out.append((public, home))
    return out


def api_page(name: str) -> str:
    if is_package(name):
        rows = [f"- [`{public}`]({home}.md#{home}.{public})" for public, home in public_names(name)]
        listing = "\n".join(rows) if rows else "(no public names of its own)"
        return (
            f"::: {name}\n    options:\n      members: false\n\n"
            f"## Public names\n\nDefined in the module pages linked:\n\n{listing}\n"
        )
    return f"::: {name}\n"


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
    lines += [f"- [{nb.stem.replace('_', ' ')}]({nb.name})" for nb in notebooks()]
    return "\n".join(lines) + "\n"


def on_config(config):
    nav = []
    for entry in config["nav"]:
        ((title, target),) = entry.items() if isinstance(entry, dict) else ((None, entry),)
        if target == "notebooks/index.md":
            entry = {title: [target, *[f"notebooks/{nb.name}" for nb in notebooks()]]}
        elif target == "api/index.md":
            entry = {title: [target, *[f"api/{name}.md" for name in modules()]]}
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
