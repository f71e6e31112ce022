"""The documentation site (docs tier): it builds strictly, its API reference lists the public
modules only (the rule of ``docs/hooks.py``) and every public name of the package, every
capability page shows its example's output made at build time and renders its formulas as
MathML, every page opens in headless Chromium without a console error, a broken internal link or
an image that does not decode, the figure pages render at desktop and phone widths without
overflowing, search finds the reward-lens page, and every ``python`` example of the hand-written
pages runs (``coming-from-transformerlens.md``'s side-by-side snippets included).

Set ``DOCS_SCREENSHOTS=DIR`` to keep the browser check's screenshots in ``DIR``."""

from __future__ import annotations

import functools
import http.server
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urljoin, urlparse

import pytest

pytestmark = pytest.mark.docs

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def all_packages() -> list[str]:
    """Every package of reward_lens_tl on disk (none private), whatever the hooks list."""
    root = REPO / "reward_lens_tl"
    return sorted(
        ".".join(p.parent.relative_to(REPO).parts)
        for p in root.rglob("__init__.py")
        if not any(part.startswith("_") for part in p.parent.relative_to(REPO).parts)
    )


def test_every_public_name_is_in_the_api_reference(site):
    """Every name of ``reward_lens_tl.__all__`` and of each subpackage's ``__all__`` has its
    entry on a page of the reference."""
    import importlib

    h = hooks()
    missing = []
    assert "reward_lens_tl" in all_packages() and len(all_packages()) > 10
    for package in all_packages():
        exported = list(importlib.import_module(package).__all__)
        assert exported, package
        page = (site / "api" / package / "index.html").read_text()
        homes = dict(h.public_names(package))
        assert set(homes) == set(exported), package
        for name, home in homes.items():
            target = (site / "api" / home / "index.html").read_text()
            if f'id="{home}.{name}"' not in target and f'id="{package}.{name}"' not in page:
                missing.append(f"{package}.{name}")
    assert missing == []


def test_api_reference_lists_public_modules_only(site):
    """No module of the reference is internal by the rule of hooks.py's docstring; the named
    internals are out of the pages and the sidebar; every package is in."""
    h = hooks()
    listed = h.modules()
    assert set(all_packages()) <= set(listed)
    for module in listed:
        assert h.internal_reason(module) is None, module
        assert not any(part.startswith("_") for part in module.split(".")), module
        assert not (module.endswith(".errors") and module != "reward_lens_tl.errors"), module
    internals = ["reward_lens_tl._lazy", "reward_lens_tl.adapters.gpt2"]
    pages = {p.name for p in (site / "api").iterdir() if p.is_dir()}
    assert pages == set(listed)
    index = (site / "api" / "index.html").read_text()
    for module in internals:
        assert h.internal_reason(module) is not None, module
        assert module not in pages and f"{module}/" not in index, module
    # the sidebar groups the modules by package: one section per package
    nav = re.findall(
        r'<label class="md-nav__link"[^>]*>\s*<span class="md-ellipsis">\s*([\w.]+)', index
    )
    assert set(all_packages()) <= set(nav), nav


def test_habits_table_is_the_tested_one(site):
    """The reference section of the guide is the catalogue tests/test_habits.py checks row by
    row: one table row per habit, each idiom in it."""
    import html

    from reward_lens_tl.habits import HABITS

    page = html.unescape((site / "coming-from-transformerlens" / "index.html").read_text())
    table = page.partition('id="the-habits-table"')[2]
    assert table.count("<tr>") == len(HABITS) + 1  # the header row, then one per habit
    text = re.sub(r"<[^>]+>|\s", "", table)
    missing = [h.key for h in HABITS if re.sub(r"`|\s", "", h.idiom) not in text]
    assert missing == []


CAPABILITIES = sorted((DOCS / "capabilities").glob("*.md"))


@pytest.mark.parametrize("path", CAPABILITIES, ids=[p.stem for p in CAPABILITIES])
def test_capability_page_shows_its_example_output(site, path):
    """The page's ``<!-- figure: NAME -->`` became the example's code and what it made at build
    time: an interactive figure (its data inline, plotly.js from the site itself) or a table."""
    names = re.findall(r"^<!-- figure: ([\w-]+) -->$", path.read_text(), flags=re.M)
    assert names, f"{path.name} shows no example output"
    page = (site / "capabilities" / path.stem / "index.html").read_text()
    assert "<!-- figure:" not in page
    for name in names:
        assert f"docs/examples/{name}.py" in page  # the code, titled with its file
        shown = page.partition(f"docs/examples/{name}.py")[2]
        drawn = "Plotly.newPlot" in shown or 'class="rl-figure rl-static"' in shown
        figure = f'data-example="{name}"' in shown and drawn
        assert figure or "<table>" in shown.partition("<h2")[0], name
    assert "cdn.plot.ly" not in page and "cdn.jsdelivr" not in page
    assert "assets/javascripts/plotly.min.js" in page
    plotly_js = site / "assets" / "javascripts" / "plotly.min.js"
    assert plotly_js.stat().st_size > 1_000_000


def visible_text(page: str) -> str:
    """A built page's article text, without code, scripts and MathML."""
    article = page.partition('<article class="md-content__inner')[2].partition("</article>")[0]
    for tag in ("pre", "code", "script", "math", "style"):
        article = re.sub(rf"<{tag}\b.*?</{tag}>", "", article, flags=re.S)
    return re.sub(r"<[^>]+>", "", article)


@pytest.mark.parametrize("path", CAPABILITIES, ids=[p.stem for p in CAPABILITIES])
def test_formulas_are_mathml(site, path):
    """``$...$`` of the page became MathML at build time: no TeX or dollar sign left in the
    text, no math script or font fetched."""
    source = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    formulas = re.findall(r"\$\$.+?\$\$|\$[^$\n]+?\$", source, flags=re.S)
    page = (site / "capabilities" / path.stem / "index.html").read_text()
    assert page.count("<math ") >= len(formulas)
    assert 'class="arithmatex"' not in page
    text = visible_text(page)
    assert "$" not in text and "\\frac" not in text and "\\text" not in text
    assert "mathjax" not in page.lower() and "katex" not in page.lower()


def test_shared_parameter_texts_are_pasted_in(site):
    """The loaders' and patching functions' parameters are documented entry by entry (the text
    `pasted_docs` fills in at import time), not shown as a `{options}` placeholder."""
    for module, function, parameter in [
        ("reward_lens_tl.model", "load_reward_model", "model_or_path"),
        ("reward_lens_tl.loading", "convert_hf_model", "use_safetensors"),
        ("reward_lens_tl.patching.activation", "activation_patching", "fwd_hooks"),
        ("reward_lens_tl.patching.atp", "atp_star", "mean_over"),
    ]:
        page = (site / "api" / module / "index.html").read_text()
        assert not re.search(r"<p>\s*\{(options|request|verify|unknown)\}\s*</p>", page), module
        section = page.partition(f'id="{module}.{function}"')[2]
        assert f"<code>{parameter}</code>" in section.partition("<h2 id=")[0], function


@pytest.fixture(scope="module")
def server(site):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()


def pages(site: Path) -> list[str]:
    return sorted(
        str(p.parent.relative_to(site)).replace("\\", "/") + "/"
        for p in site.rglob("index.html")
        if "search" not in p.parts
    )


def exists(site: Path, url: str, base: str) -> bool:
    path = urlparse(url).path.removeprefix(urlparse(base).path)
    target = site / path
    return target.is_file() or (target / "index.html").is_file()


def test_every_page_renders_in_chromium(site, server):
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if CHROMIUM is None:
        pytest.skip("no chromium browser installed (apt-get install chromium; see CONTRIBUTING)")
    problems: list[str] = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        current = {"url": ""}
        page.on(
            "console",
            lambda m: problems.append(f"{current['url']}: {m.text}") if m.type == "error" else None,
        )
        page.on("pageerror", lambda e: problems.append(f"{current['url']}: {e}"))
        for rel in pages(site):
            url = urljoin(server, "" if rel == "./" else rel)
            current["url"] = url
            page.goto(url, wait_until="load")
            images = page.evaluate(
                "Array.from(document.images)"
                ".map(i => [i.currentSrc, i.complete && i.naturalWidth > 0])"
            )
            problems += [f"{url}: image {src} does not decode" for src, ok in images if not ok]
            links = page.evaluate(
                "Array.from(document.querySelectorAll('a[href]')).map(a => a.href)"
            )
            for link in links:
                if link.startswith(server) and not exists(site, link.split("#")[0], server):
                    problems.append(f"{url}: broken link {link}")
        page.goto(server)
        page.fill("input.md-search__input", "reward lens")
        page.wait_for_selector(".md-search-result__item", timeout=20_000)
        hits = page.evaluate(
            "Array.from(document.querySelectorAll('.md-search-result__link')).map(a => a.href)"
        )
        browser.close()
    assert problems == []
    assert any("capabilities/lens/" in h for h in hits), hits


FIGURE_PAGES = ["capabilities/lens/", "capabilities/patching/", "capabilities/attribution/"]
WIDTHS = [1280, 390]  # a laptop and a phone

#: What the browser measures on a page: overflow, plotly figures drawn, MathML, raw TeX left.
MEASURE = r"""() => {
  const article = document.querySelector('article');
  const clone = article.cloneNode(true);
  clone.querySelectorAll('pre, code, script, math, style').forEach(e => e.remove());
  const plots = Array.from(document.querySelectorAll('.rl-figure .js-plotly-plot'));
  return {
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
    figures: document.querySelectorAll('.rl-figure').length,
    drawn: plots.filter(p => p.querySelector('svg.main-svg') && p.offsetWidth > 0).length,
    widest: Math.max(0, ...plots.map(p => p.getBoundingClientRect().right)),
    maths: document.querySelectorAll('article math').length,
    mathHeights: Array.from(document.querySelectorAll('article math'))
      .map(m => m.getBoundingClientRect().height),
    dollars: (clone.textContent.match(/\$/g) || []).length,
    tex: /\\(frac|text|sum|operatorname)/.test(clone.textContent),
  };
}"""


def test_figure_pages_at_desktop_and_phone_widths(site, server, tmp_path):
    """The lens, patching and attribution pages at 1280 and 390 px: no console error, nothing
    wider than the window, every plotly figure drawn (an svg inside ``.js-plotly-plot``) and
    within the page, formulas drawn as MathML with no TeX or dollar sign left; screenshots in
    ``$DOCS_SCREENSHOTS`` (else a temporary folder)."""
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if CHROMIUM is None:
        pytest.skip("no chromium browser installed (apt-get install chromium; see CONTRIBUTING)")
    shots = Path(os.environ.get("DOCS_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        current = {"url": ""}
        for width in WIDTHS:
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.on(
                "console",
                lambda m: (
                    problems.append(f"{current['url']}: {m.text}") if m.type == "error" else None
                ),
            )
            page.on("pageerror", lambda e: problems.append(f"{current['url']}: {e}"))
            for rel in FIGURE_PAGES:
                url = current["url"] = f"{urljoin(server, rel)} at {width}px"
                page.goto(urljoin(server, rel), wait_until="load")
                page.wait_for_function(
                    "Array.from(document.querySelectorAll('.rl-figure'))"
                    ".every(f => f.querySelector('.js-plotly-plot svg.main-svg'))",
                    timeout=20_000,
                )
                seen = page.evaluate(MEASURE)
                name = rel.strip("/").replace("/", "_")
                page.screenshot(path=str(shots / f"{name}_{width}.png"), full_page=True)
                if seen["scrollWidth"] > seen["innerWidth"]:
                    problems.append(f"{url}: the page is {seen['scrollWidth']} px wide")
                if seen["figures"] < 1 or seen["drawn"] != seen["figures"]:
                    problems.append(f"{url}: {seen['drawn']} of {seen['figures']} figures drawn")
                if seen["widest"] > seen["innerWidth"]:
                    problems.append(f"{url}: a figure reaches {seen['widest']} px")
                if seen["maths"] < 1 or min(seen["mathHeights"]) <= 0:
                    problems.append(f"{url}: formulas not drawn as MathML")
                if seen["dollars"] or seen["tex"]:
                    problems.append(f"{url}: raw TeX left in the text")
            page.close()
        browser.close()
    assert problems == []


HAND_WRITTEN = sorted([*DOCS.glob("*.md"), *(DOCS / "capabilities").glob("*.md")])


@pytest.mark.parametrize("path", HAND_WRITTEN, ids=[p.stem for p in HAND_WRITTEN])
def test_page_examples_run(path, tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(path), "exec"), namespace)  # noqa: S102
    import matplotlib.pyplot as plt

    plt.close("all")
