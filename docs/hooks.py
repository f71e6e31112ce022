"""mkdocs hooks: the pages generated from the repository, so the site cannot drift from it.

- ``coming-from-transformerlens.md``: its ``<!-- habits -->`` marker becomes
  :func:`reward_lens_tl.habits.markdown_table`, the table ``tests/test_habits.py`` checks row by
  row;
- ``<!-- figure: NAME -->`` in a page becomes the example ``docs/examples/NAME.py`` (its code,
  shown as it is) followed by what it produces, computed at build time on the shipped zoo
  models: the value of the file's last expression (a plotly figure, drawn interactively; a
  matplotlib figure, drawn as a PNG; a pandas frame, drawn as a table) and what it printed. The
  figures use one copy of plotly.js, ``plotly.offline.get_plotlyjs()`` written once into the
  site (``assets/javascripts/plotly.min.js``, listed in ``extra_javascript``): nothing is
  fetched from another host. Each example loads its zoo model itself, as a reader would (0.1 s
  a load, measured: the import of the package dominates and happens once per build, so no
  model cache), runs with one torch thread (SAE training is 15x slower on two), and its output
  is cached per process while the file is unchanged (``mkdocs serve``); the 13 examples add
  about 6 s to a build, after the package's import;
- math: ``$...$`` and ``$$...$$`` (pymdownx.arithmatex, generic mode) become MathML at build
  time with ``latex2mathml``, which browsers draw natively: no script, no font download;
- ``notebooks/``: every ``notebooks/*.ipynb`` of the repository, rendered by mkdocs-jupyter from
  its committed outputs (never re-run at build time), and an index page;
- ``api/``: one page per *public* module (the rule below), rendered by mkdocstrings from the
  docstrings; the sidebar groups them by package; the index lists every public name (each
  package's ``__all__``) with the page of the module that defines it;
- ``benchmarks.md``: ``benchmarks/RESULTS.md`` as it is;
- every page: a ``<script src>`` from another host (nbconvert's widget loader on a notebook
  with widget state) is dropped, so the site works offline.

**Which modules the API reference lists** (`internal_reason` says why one is left out). A module
of ``reward_lens_tl`` gets a page unless

1. a part of its dotted name starts with ``_`` (``_lazy``, ``data._records``);
2. it defines no public name of its own: no top-level ``def``, ``class`` or assignment without a
   leading underscore (only those in its ``__all__`` when it has one); a package counts as
   defining its ``__all__`` (its page is their index);
3. it is a module of a subpackage outside that package's ``__all__`` story: the package's
   ``__all__`` names nothing it defines, it declares no ``__all__`` of its own, and no guide
   imports from it (a guide: ``README.md``, the hand-written pages, ``docs/examples/*.py`` and
   ``notebooks/*.ipynb``). So ``adapters.gpt2``, ``pressure.validate`` or ``report.quality``
   (implementation behind a package's interface) are left out, while ``pressure.training``,
   which the guides import from, is kept. The top-level modules of ``reward_lens_tl`` are import
   paths of their own (``reward_lens_tl.lens``): its lazy ``__all__`` holds only the loaders, so
   rule 3 does not apply to them.

``tests/test_docs.py`` checks the rule both ways: no listed module is internal by it, and every
name of ``reward_lens_tl.__all__`` and of each subpackage's ``__all__`` has its entry on a page.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import html
import importlib
import io
import json
import re
import textwrap
from pathlib import Path

from mkdocs.structure.files import File

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
EXAMPLES = DOCS / "examples"
PACKAGE = "reward_lens_tl"
HABITS_MARKER = "<!-- habits -->"
FIGURE_MARKER = re.compile(r"^<!-- figure: ([\w-]+) -->$", re.M)
PLOTLY_JS = "assets/javascripts/plotly.min.js"


# -- which modules are public --------------------------------------------------------------------
def candidates() -> list[str]:
    """Every module and package of the package, by dotted name, sorted."""
    out = []
    for path in sorted((REPO / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.append(".".join(parts))
    return sorted(out)


def is_package(name: str) -> bool:
    return (REPO / Path(*name.split(".")) / "__init__.py").exists()


def source(name: str) -> str:
    path = REPO / Path(*name.split("."))
    return (path / "__init__.py" if path.is_dir() else path.with_suffix(".py")).read_text()


@functools.cache
def _parsed(name: str) -> tuple[str, frozenset[str], frozenset[str] | None]:
    """The first docstring line, the public names a module's own source binds at top level
    (``def``, ``class``, assignment), and its ``__all__`` (``None`` when it declares none)."""
    try:
        tree = ast.parse(source(name))
    except SyntaxError:  # a module being edited: judged by its name alone
        return "", frozenset({"?"}), None
    doc = (ast.get_docstring(tree) or "").strip()
    bound: set[str] = set()
    declared = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    bound.add(target.id)
                    if target.id == "__all__":
                        with contextlib.suppress(ValueError):
                            declared = frozenset(ast.literal_eval(node.value))
    public = {n for n in bound if not n.startswith("_")}
    if declared is not None:
        public &= declared
    return (doc.splitlines() or [""])[0], frozenset(public), declared


@functools.cache
def guide_imports() -> frozenset[str]:
    """The modules of the package that a guide imports from (see the module docstring)."""
    texts = [(REPO / "README.md").read_text()]
    texts += [p.read_text() for p in DOCS.rglob("*.md")]
    texts += [p.read_text() for p in EXAMPLES.glob("*.py")]
    texts += [p.read_text() for p in (REPO / "notebooks").glob("*.ipynb")]
    pattern = rf"\b(?:from|import)\s+({PACKAGE}(?:\.\w+)*)"
    return frozenset(m for text in texts for m in re.findall(pattern, text))


def internal_reason(name: str) -> str | None:
    """Why the API reference leaves module ``name`` out (the rule of the module docstring), or
    ``None`` for a public module."""
    parts = name.split(".")
    if any(p.startswith("_") for p in parts):
        return "rule 1: a private name"
    _, public, declared = _parsed(name)
    if is_package(name):
        return None
    if not public:
        return "rule 2: defines no public name of its own"
    parent = ".".join(parts[:-1])
    if parent == PACKAGE or declared is not None or name in guide_imports():
        return None
    _, _, parent_all = _parsed(parent)
    if not public & (parent_all or frozenset()):
        return f"rule 3: outside {parent}'s __all__, and no guide imports from it"
    return None


def modules() -> list[str]:
    """Every public module of the package (see the module docstring), by dotted name, sorted."""
    return [name for name in candidates() if internal_reason(name) is None]


def packages() -> list[str]:
    return [name for name in modules() if is_package(name)]


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


def defines(module: str, public: str) -> bool:
    """Whether ``module``'s own source defines ``public`` (a def, a class or an assignment)."""
    pattern = rf"^(def |class |async def )?{re.escape(public)}\b\s*(\(|:|=)"
    return re.search(pattern, source(module), flags=re.M) is not None


def public_names(name: str) -> list[tuple[str, str]]:
    """``(public name, page)`` of a package's ``__all__``: the listed module that defines it (a
    class or function's ``__module__``, else the first listed module of the package whose source
    assigns it), else the package's own page."""
    package = importlib.import_module(name)
    listed = modules()
    inside = [m for m in listed if m == name or m.startswith(name + ".")]
    out = []
    for public in getattr(package, "__all__", []):
        obj = getattr(package, public, None)
        home = getattr(obj, "__module__", None) if callable(obj) else None
        if home not in listed:
            home = next((m for m in inside if m != name and defines(m, public)), name)
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
    inner = [m for m in modules() if m.rpartition(".")[0] == name]
    sub = "\n".join(f"- [`{m}`]({m}.md)" for m in inner) or "(none)"
    return (
        f"::: {name}\n    options:\n      members: {members}\n\n"
        f"## Public names\n\nEach on the page of the module that defines it:\n\n{listing}\n\n"
        f"## Modules\n\n{sub}\n"
    )


def api_index() -> str:
    lines = [
        "# API reference",
        "",
        "Generated from the docstrings (mkdocstrings), with the jaxtyping shapes of every "
        "signature. One page per public module, grouped by package; each package's page lists "
        "its public names (its `__all__`). Implementation modules behind a package's interface "
        "have no page; every error is on "
        "[`reward_lens_tl.errors`](reward_lens_tl.errors.md).",
        "",
    ]
    for package in packages():
        lines += ["", f"## `{package}`", "", f"- [`{package}`]({package}.md): {summary(package)}"]
        lines += [
            f"- [`{m}`]({m}.md): {summary(m)}"
            for m in modules()
            if m.rpartition(".")[0] == package and not is_package(m)
        ]
    return "\n".join(lines) + "\n"


def summary(name: str) -> str:
    """The first line of a module's docstring (what the index says of it)."""
    return _parsed(name)[0] or "(no docstring)"


def api_nav() -> list:
    """The sidebar's API section: the index, then one collapsible section per package."""
    nav: list = ["api/index.md"]
    for package in packages():
        pages: list = [{"overview": f"api/{package}.md"}]
        pages += [
            {m.rpartition(".")[2]: f"api/{m}.md"}
            for m in modules()
            if m.rpartition(".")[0] == package and not is_package(m)
        ]
        nav.append({package: pages})
    return nav


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


# -- figures: examples run at build time ---------------------------------------------------------
def run_example(path: Path) -> tuple[object, str]:
    """Run an example file as a notebook cell does: the value of its last expression (``None``
    when it ends with a statement) and what it printed."""
    import matplotlib
    import torch

    matplotlib.use("Agg")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the zoo models are tiny: one thread is fastest (SAE training 15x)
    try:
        return _run(path)
    finally:
        torch.set_num_threads(threads)


def _run(path: Path) -> tuple[object, str]:
    tree = ast.parse(path.read_text(), str(path))
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    namespace: dict = {"__name__": "__example__"}
    printed = io.StringIO()
    value = None
    with contextlib.redirect_stdout(printed):
        exec(compile(tree, str(path), "exec"), namespace)  # noqa: S102
        if last is not None:
            value = eval(compile(ast.Expression(last.value), str(path), "eval"), namespace)  # noqa: S307
    return value, printed.getvalue()


def frame_markdown(frame, digits: int = 4) -> str:
    """A pandas frame as a Markdown table (numbers to ``digits`` significant figures)."""

    def cell(v) -> str:
        text = f"{v:.{digits}g}" if isinstance(v, float) else str(v)
        return html.escape(text).replace("|", "\\|").replace("\n", " ")

    head = "| " + " | ".join(cell(c) for c in frame.columns) + " |"
    rule = "|" + "---|" * len(frame.columns)
    rows = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([head, rule, *rows])


def plotly_html(fig, name: str) -> str:
    """An interactive figure that fills the page's width (its own height kept)."""
    from reward_lens_tl.plotting import figure_html

    fig = type(fig)(fig)  # a copy: the example's figure is left as it was
    if (fig.layout.width or 0) > 800 and fig.layout.annotations:
        # panels side by side, drawn narrower than designed: wrap their titles so that
        # neighbours do not overlap
        lines = 1
        for note in fig.layout.annotations:
            wrapped = textwrap.wrap(note.text or "", 30)
            if len(wrapped) > 1:
                note.text = "<br>".join(wrapped)
                lines = max(lines, len(wrapped))
        fig.update_layout(margin_t=(fig.layout.margin.t or 40) + 14 * (lines - 1))
    fig.update_layout(width=None, autosize=True)
    body = "\n".join(line for line in figure_html(fig).splitlines() if line.strip())
    return f'<div class="rl-figure" data-example="{name}">{body}</div>'


def matplotlib_html(fig, name: str) -> str:
    import base64

    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    data = base64.b64encode(buffer.getvalue()).decode()
    return (
        f'<div class="rl-figure rl-static" data-example="{name}">'
        f'<img alt="the figure of docs/examples/{name}.py" src="data:image/png;base64,{data}">'
        "</div>"
    )


@functools.cache
def _example_markdown(name: str, mtime: float) -> str:
    path = EXAMPLES / f"{name}.py"
    value, printed = run_example(path)
    code = path.read_text().strip()
    parts = [f'```python title="docs/examples/{name}.py"\n{code}\n```', ""]
    if printed.strip():
        parts += ["```text\n" + printed.rstrip() + "\n```", ""]
    if hasattr(value, "to_plotly_json"):
        parts.append(plotly_html(value, name))
    elif hasattr(value, "savefig"):
        parts.append(matplotlib_html(value, name))
    elif hasattr(value, "to_dataframe") or hasattr(value, "itertuples"):
        frame = value.to_dataframe() if hasattr(value, "to_dataframe") else value
        parts.append(frame_markdown(frame))
    elif value is not None:
        parts.append("```text\n" + repr(value) + "\n```")
    return "\n".join(parts) + "\n"


def example_markdown(name: str) -> str:
    """The Markdown that replaces ``<!-- figure: NAME -->``: the code, then its output (cached
    per build process while the file is unchanged, for ``mkdocs serve``)."""
    path = EXAMPLES / f"{name}.py"
    if not path.is_file():
        raise FileNotFoundError(f"<!-- figure: {name} -->: no example {path}")
    return _example_markdown(name, path.stat().st_mtime)


# -- math ----------------------------------------------------------------------------------------
MATH = re.compile(
    r'<(span|div) class="arithmatex">\s*(\\\(|\\\[)(.*?)(\\\)|\\\])\s*</\1>', flags=re.S
)


def mathml(page_html: str) -> str:
    """Every arithmatex span (inline) or div (display) of a page as MathML."""
    from latex2mathml.converter import convert

    def one(match: re.Match) -> str:
        display = "block" if match.group(1) == "div" else "inline"
        tex = html.unescape(match.group(3)).strip()
        return convert(tex, display=display)

    return MATH.sub(one, page_html)


# -- mkdocs events -------------------------------------------------------------------------------
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
            entry = {title: api_nav()}
        nav.append(entry)
    config["nav"] = nav
    return config


def on_files(files, config):
    import plotly.offline

    generated = {
        "api/index.md": api_index(),
        "notebooks/index.md": notebooks_index(),
        "benchmarks.md": (REPO / "benchmarks" / "RESULTS.md").read_text(),
        PLOTLY_JS: plotly.offline.get_plotlyjs(),
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
    return FIGURE_MARKER.sub(lambda m: example_markdown(m.group(1)), markdown)


def on_page_content(page_html, page, config, files):
    return mathml(page_html) if "arithmatex" in page_html else page_html


#: A script fetched from another host: a ``<script src>``, or the loader nbconvert writes for a
#: notebook with widget state (a progress bar), which appends one from unpkg.com.
EXTERNAL_SCRIPT = re.compile(
    r'<script\b[^>]*\ssrc="(?:https?:)?//[^"]*"[^>]*>\s*</script>'
    r"|<script>(?:(?!</script>).)*?function addWidgetsRenderer\(\).*?</script>",
    flags=re.S,
)


def on_post_page(output, page, config):
    """The site fetches nothing from another host: scripts from elsewhere are dropped (a
    notebook's widgets then show their text form)."""
    return EXTERNAL_SCRIPT.sub("", output)
