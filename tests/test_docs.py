"""The documentation site (docs tier): it builds strictly, every public name of the package is
in its API reference, every page opens in headless Chromium without a console error, a broken
internal link or an image that does not decode, search finds the reward-lens page, and every
``python`` example of the hand-written pages runs."""

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


def test_every_public_name_is_in_the_api_reference(site):
    h = hooks()
    missing = []
    for module in h.modules():
        page = (site / "api" / module / "index.html").read_text()
        if not h.is_package(module):
            continue
        for name, home in h.public_names(module):
            target = (site / "api" / home / "index.html").read_text()
            if f'id="{home}.{name}"' not in target and f'id="{module}.{name}"' not in page:
                missing.append(f"{module}.{name}")
    assert missing == []


def test_habits_table_is_the_tested_one(site):
    from reward_lens_tl.habits import HABITS

    page = (site / "coming-from-transformerlens" / "index.html").read_text()
    assert page.count("<tr>") >= len(HABITS)


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
