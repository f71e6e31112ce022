"""``reward-lens report``: the page's numbers are the API's, text is escaped, runs resume,
and the page loads cleanly in a real browser."""

import html
import json
import random
import re
import shutil
from pathlib import Path

import pytest

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.report import ReportError, Section, build, build_report
from reward_lens_tl.zoo import load_task, zoo_path

EVIL = "<script>alert(1)</script>"
HOSTILE = "nul\x00here \u202eevil\u202c bell\x07"  # NUL, a right-to-left override, a bell


@pytest.fixture(scope="module")
def pair_file(tmp_path_factory):
    task = load_task().task
    rng = random.Random(0)
    rows = []
    while len(rows) < 16:
        a, b = task.response_pair(rng, max_words=8)
        if a.score != b.score:
            chosen, rejected = (a, b) if a.score > b.score else (b, a)
            rows.append(
                {
                    "prompt": " ".join(chosen.prompt),
                    "chosen": " ".join(chosen.response),
                    "rejected": " ".join(rejected.response),
                }
            )
    rows[0]["prompt"] = EVIL + " " + HOSTILE + " " + rows[0]["prompt"]
    rows[0]["chosen"] = "great question " + rows[0]["chosen"]  # a large margin: shown first
    for row in rows[1:4]:  # the planted hack on the rejected side: failures to explain
        row["rejected"] = "great question " + row["rejected"]
    path = tmp_path_factory.mktemp("data") / "pairs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


@pytest.fixture(scope="module")
def report(pair_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    numbers = build_report(zoo_path("scalar"), pair_file, out, progress=False, markdown=True)
    return out, numbers


def test_numbers_equal_the_api(report, pair_file):
    from reward_lens_tl.attribution import attribute_pairs
    from reward_lens_tl.data import load_pairs
    from reward_lens_tl.lens import pair_lens
    from reward_lens_tl.scoring import score_pairs

    out, numbers = report
    model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    pairs = load_pairs(pair_file)
    scores = score_pairs(model, pairs, truncation="left")
    assert numbers["accuracy"] == pytest.approx(scores.accuracy) and scores.accuracy < 1.0
    assert numbers["chosen"] == pytest.approx(scores.chosen.tolist(), abs=1e-5)
    top = attribute_pairs(model, pairs).margin.top_k(12)
    assert [label for label, _ in numbers["top_components"]] == [label for label, _ in top]
    lens = pair_lens(model, pairs)
    assert numbers["lens_mean_margin"][-1] == pytest.approx(float(scores.margins.mean()), abs=1e-4)
    assert numbers["lens_mean_margin"] == pytest.approx(lens.margins.mean(1).tolist(), abs=1e-5)
    assert json.loads((out / "report.json").read_text())["accuracy"] == numbers["accuracy"]
    assert numbers["sections"][:5] == [
        "Scores",
        "Reward lens",
        "Top components",
        "Patching the largest-margin pairs",
        "Token views",
    ]
    assert len(numbers["patching"]) == 3 and numbers["token_views"][0]["which"] == "most preferred"
    from reward_lens_tl.sweep import token_sweep

    sweep = token_sweep(model, numbers["sweep"]["prompt"], progress=False)
    assert [label for label, _ in numbers["sweep"]["top"]] == [c for c, _ in sweep.top_k(8)]
    assert "Token sweep" in numbers["sections"]
    failed = int((scores.margins <= 0).sum())
    assert failed >= 1 and numbers["failures"]["n"] == failed
    assert "Failures explained" in numbers["sections"]
    from reward_lens_tl.probes import builtin_probes, run_probes

    probes = run_probes(model, list(pairs), builtin_probes(), seed=0)
    assert numbers["probes"]["flagged"] == probes.flagged() and numbers["probes"]["n_pairs"] == 16


def test_page_is_self_contained_and_escaped(report):
    out, _ = report
    page = (out / "report.html").read_text()
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "http://" not in page and "https://" not in page  # nothing to fetch
    assert page.count("data:image/png;base64,") >= 3
    assert not (out / ".work").exists() and not list(out.glob("*.tmp"))


def md_tables(text: str) -> list[list[list[str]]]:
    """Every table of a markdown text: rows of cells, unescaped, separator rows left out."""
    tables, rows = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
            if not all(set(c) <= {"-"} for c in cells):
                rows.append([html.unescape(c.strip().replace("\\|", "|")) for c in cells])
        elif rows:
            tables, rows = [*tables, rows], []
    return tables


def html_tables(page: str) -> list[list[list[str]]]:
    """Every section table of a report page (not the grids of the patching views)."""
    return [
        [
            [
                html.unescape(c.removeprefix("<bdi>").removesuffix("</bdi>"))
                for c in re.findall(r"<t[hd]>(.*?)</t[hd]>", row)
            ]
            for row in re.findall(r"<tr>(.*?)</tr>", table)
        ]
        for table in re.findall(r"<table><thead>(.*?)</table>", page)
    ]


def md_paragraphs(text: str) -> list[str]:
    """The text paragraphs of a markdown report (not headings, tables or figures)."""
    blocks = [b.strip() for b in text.split("\n\n")]
    return [html.unescape(b) for b in blocks if b and not b.startswith(("#", "|", "!["))]


def html_paragraphs(page: str) -> list[str]:
    return [html.unescape(p) for p in re.findall(r"<p class='note'[^>]*>(.*?)</p>", page, re.S)]


def test_control_characters_are_never_written_raw(report):
    """NUL bytes and bidirectional controls of user text: dropped or shown as markers; user
    text in table cells is isolated (`<bdi>`) so it cannot reorder its neighbours."""
    out, _ = report
    for name in ("report.html", "report.md"):
        content = (out / name).read_text()
        assert "\x00" not in content and "\x07" not in content, name
        assert not any(ch in content for ch in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067"), name
    page = (out / "report.html").read_text()
    assert "<td><bdi>" in page and "dir='auto'" in page
    section = Section("T").text(HOSTILE).table(__import__("pandas").DataFrame({"x": [HOSTILE]}))
    for text in (section.html(), section.markdown()):
        assert "nulhere ⟨U+202E⟩evil⟨U+202C⟩ bell" in text and "\x00" not in text


def test_markdown_is_the_page_in_markdown_escaped_and_without_local_paths(report, pair_file):
    out, numbers = report
    page, text = (out / "report.html").read_text(), (out / "report.md").read_text()
    assert "<script" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert md_tables(text) == html_tables(page) and len(md_tables(text)) >= 6
    notes = html_paragraphs(page)
    assert [p for p in md_paragraphs(text) if p in notes] == notes
    for name in re.findall(r"!\[[^]]*\]\(([^)]+)\)", text):
        assert (out / name).stat().st_size > 1000 and "/" not in name
    assert f"| {numbers['top_components'][0][0]} | {numbers['top_components'][0][1]:+.3f} |" in text
    local = {str(out), str(pair_file.parent), str(Path.cwd()), str(Path.home())}
    for path in (out / "report.html", out / "report.md", out / "report.json"):
        content = path.read_text()
        assert not [root for root in local if root in content], path


def test_a_section_renders_the_same_cells_both_ways_and_survives_storage():
    import pandas as pd

    frame = pd.DataFrame({"name": [EVIL, "a|b"], "value": [0.12345, -2e-7], "n": [3, 4]})
    section = Section("T").text(f"see {EVIL}").table(frame)
    stored = Section.from_dict(json.loads(json.dumps(section.to_dict())))
    assert stored.html() == section.html() and stored.markdown() == section.markdown()
    expected = [["name", "value", "n"], [EVIL, "+0.123", "3"], ["a|b", "-2e-07", "4"]]
    assert md_tables(section.markdown()) == [expected] == html_tables(section.html())
    assert "<script" not in section.markdown() + section.html()


def test_interrupted_run_resumes_to_the_same_report(pair_file, report, tmp_path, monkeypatch):
    _, full = report
    out = tmp_path / "r"

    def boom(ctx):
        raise RuntimeError("interrupted")

    steps = list(build.STEPS)
    monkeypatch.setattr(build, "STEPS", [*steps[:3], ("patching", boom), *steps[4:]])
    with pytest.raises(RuntimeError, match="interrupted"):
        build_report(zoo_path("scalar"), pair_file, out, progress=False)
    assert not (out / "report.html").exists()  # never a half-written report
    assert (out / ".work" / "scores.json").exists()
    with pytest.raises(ReportError, match="other arguments"):
        build_report(zoo_path("scalar"), pair_file, out, progress=False, resume=True, limit=5)
    monkeypatch.setattr(build, "STEPS", steps)
    resumed = build_report(zoo_path("scalar"), pair_file, out, progress=False, resume=True)
    for key in ("accuracy", "chosen", "top_components", "lens_mean_margin", "patching"):
        assert resumed[key] == full[key], key
    with pytest.raises(ReportError, match="nothing to resume"):
        build_report(zoo_path("scalar"), pair_file, out, progress=False, resume=True)


def test_unwritable_output_is_a_clear_error(pair_file, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ReportError, match="cannot write"):
        build_report(zoo_path("scalar"), pair_file, blocker / "out", progress=False)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.browser
def test_page_in_a_real_browser(report, tmp_path):
    playwright = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (see CONTRIBUTING)"
    )
    if CHROMIUM is None:
        pytest.skip("no chromium browser installed (apt-get install chromium; see CONTRIBUTING)")
    import matplotlib.image as mpimg

    out, _ = report
    shot = tmp_path / "page.png"
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        problems = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.goto((out / "report.html").resolve().as_uri())
        widths = page.evaluate("Array.from(document.images).map(i => i.naturalWidth)")
        text = page.inner_text("body")
        sections = page.evaluate("document.querySelectorAll('section').length")
        page.screenshot(path=str(shot), full_page=True)
        browser.close()
    assert problems == []
    assert len(widths) >= 3 and all(w > 0 for w in widths)
    assert sections >= 5 and EVIL in text  # shown as text, not run
    pixels = mpimg.imread(shot)
    assert pixels.std() > 0.05 and Path(shot).stat().st_size > 20_000


def test_report_on_pairs_that_need_truncation(tmp_path):
    """Real data has prompts longer than the context: the failures are explained with the
    report's truncation and the sweep takes the most common prompt that fits."""
    task, rng, rows = load_task().task, random.Random(1), []
    long_prompt = None
    while len(rows) < 12:
        a, b = task.response_pair(rng, max_words=5)
        if a.score == b.score:
            continue
        good, bad = (a, b) if a.score > b.score else (b, a)
        prompt = " ".join(good.prompt)
        if long_prompt is None:
            long_prompt = " ".join([prompt] * 20)  # > 64 tokens: fits only truncated
        row = {"prompt": prompt, "chosen": " ".join(good.response)}
        row["rejected"] = " ".join(bad.response)
        if len(rows) < 5:  # the most common prompt; the planted hack makes these failures
            row |= {"prompt": long_prompt, "rejected": "great question " + row["rejected"]}
        rows.append(row)
    path = tmp_path / "long.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    numbers = build_report(zoo_path("scalar"), path, tmp_path / "out", progress=False)
    assert numbers["n_scored"] == 12 and numbers["n_skipped"] == 0
    assert numbers["failures"]["n"] >= 1
    assert numbers["sweep"]["prompt"] != long_prompt
    assert "Token sweep" in numbers["sections"] and "Failures explained" in numbers["sections"]
