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
from reward_lens_tl.report.page import format_cell
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
    from reward_lens_tl.attribution import pair_attribution
    from reward_lens_tl.data import load_pairs
    from reward_lens_tl.lens import pair_lens
    from reward_lens_tl.scoring import score_pairs

    out, numbers = report
    model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    pairs = load_pairs(pair_file)
    scores = score_pairs(model, pairs, truncation="left")
    assert numbers["accuracy"] == pytest.approx(scores.accuracy) and scores.accuracy < 1.0
    assert numbers["chosen"] == pytest.approx(scores.chosen.tolist(), abs=1e-5)
    top = pair_attribution(model, pairs).margin.top_k(12)
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
    """The only scripts are the inlined plotly.js bundle, one drawing call per figure and the
    title-fitting helper; user text never becomes a script; nothing is fetched."""
    from reward_lens_tl.report.page import plotly_bundle

    out, _ = report
    page = (out / "report.html").read_text()
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    figures = page.count('class="plotly-graph-div"')
    assert figures >= 3 and page.count("Plotly.newPlot(") == figures
    assert page.count(plotly_bundle()[:60]) == 1  # one offline bundle, however many figures
    rest = page.replace(plotly_bundle(), "")
    assert rest.count("window.PLOTLYENV=window.PLOTLYENV") == figures  # a script per figure
    assert not re.search(r"<(script|img|link|iframe)[^>]+(src|href)=['\"]?(https?:)?//", rest)
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
                for c in re.findall(r"<t[hd](?: class='[^']*')?>(.*?)</t[hd]>", row)
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
    label, value = numbers["top_components"][0]
    assert f"| {label} | {format_cell(value, 'signed')} |" in text
    local = {str(out), str(pair_file.parent), str(Path.cwd()), str(Path.home())}
    for path in (out / "report.html", out / "report.md", out / "report.json"):
        content = path.read_text()
        assert not [root for root in local if root in content], path


def test_prose_has_no_python_reprs_and_numbers_read_by_kind(report):
    """Counts as words (not `{'1_pre': 5, ...}`), lists as phrases, shares in percent."""
    out, numbers = report
    page, text = (out / "report.html").read_text(), (out / "report.md").read_text()
    prose = html_paragraphs(page) + md_paragraphs(text)
    assert [p for p in prose if re.search(r"\{'|\{\"|\['|\[\(|Counter\(|\bdict\(", p)] == []
    lens = next(p for p in prose if "First site reaching half the final margin" in p)
    assert re.search(r"counted over pairs: \w+: \d+ pairs?[,.]", lens)
    accuracy = next(p for p in prose if p.startswith("Accuracy (chosen > rejected)"))
    assert accuracy.startswith(
        f"Accuracy (chosen > rejected): {format_cell(numbers['accuracy'], 'share')} over 16 pairs"
    )
    assert re.fullmatch(r"\d+(\.\d)?%", format_cell(numbers["accuracy"], "share"))


def test_small_pair_sets_get_one_margin_table_not_two_that_overlap(report):
    """16 pairs and 8 rows a table: "largest" and "smallest" would be the same pairs twice;
    one table of every pair, largest margin first, stands for both."""
    out, _ = report
    text = (out / "report.md").read_text()
    scores = text.split("\n## Scores\n", 1)[1].split("\n## ", 1)[0]
    assert "Largest margins:" not in scores and "Smallest margins" not in scores
    assert "Every pair (16), largest margin first" in scores
    (table,) = md_tables(scores)
    head, rows = table[0], table[1:]
    pairs = [row[head.index("index")] for row in rows]
    margins = [float(row[head.index("margin")]) for row in rows]
    assert len(pairs) == len(set(pairs)) == 16 and margins == sorted(margins, reverse=True)


def test_a_section_renders_the_same_cells_both_ways_and_survives_storage():
    import pandas as pd

    frame = pd.DataFrame({"name": [EVIL, "a|b"], "value": [0.12345, -2e-7], "n": [3, 4]})
    section = Section("T").text(f"see {EVIL}").table(frame)
    stored = Section.from_dict(json.loads(json.dumps(section.to_dict())))
    assert stored.html() == section.html() and stored.markdown() == section.markdown()
    expected = [["name", "value", "n"], [EVIL, "0.123", "3"], ["a|b", "-2e-07", "4"]]
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


#: What the browser checks read off a report page at one width.
PAGE_FACTS = """() => {
  const plots = Array.from(document.querySelectorAll('.plotly-graph-div'));
  const out = t => {
    const box = t.closest('.plot').getBoundingClientRect(), r = t.getBoundingClientRect();
    return r.width > 0 && (r.right > box.right + 1 || r.left < box.left - 1);
  };
  return {
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
    sections: document.querySelectorAll('section > details[open]').length,
    tocLinks: Array.from(document.querySelectorAll('nav.toc a')).map(a => a.hash.slice(1)),
    anchors: Array.from(document.querySelectorAll('section')).map(s => s.id),
    figures: plots.map(d => {
      const r = d.getBoundingClientRect();
      return [d.id, r.width > 100 && r.height > 100 && d.offsetParent !== null
              && d.querySelector('svg.main-svg') !== null];
    }),
    images: Array.from(document.images).map(i => [i.alt, i.complete && i.naturalWidth > 0]),
    cutTexts: Array.from(document.querySelectorAll('.plot svg text')).filter(out)
      .map(t => t.textContent.slice(0, 60)),
    text: document.body.innerText,
  };
}"""


def browse(path: Path, widths=(1280, 390), shots: Path | None = None) -> dict[int, dict]:
    """The page's facts (`PAGE_FACTS`) at each width, with its console errors and the
    requests it made; full-page screenshots into `shots`."""
    playwright = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (see CONTRIBUTING)"
    )
    if CHROMIUM is None:
        pytest.skip("no chromium browser installed (apt-get install chromium; see CONTRIBUTING)")
    found = {}
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        for width in widths:
            page = browser.new_page(viewport={"width": width, "height": 900})
            problems: list[str] = []
            requests: list[str] = []
            page.on(
                "console",
                lambda m, seen=problems: seen.append(m.text) if m.type == "error" else None,
            )
            page.on("pageerror", lambda e, seen=problems: seen.append(str(e)))
            page.on("request", lambda r, seen=requests: seen.append(r.url))
            page.goto(path.resolve().as_uri(), wait_until="load")
            page.wait_for_timeout(500)  # plotly draws after load
            facts = page.evaluate(PAGE_FACTS)
            if shots is not None:
                page.screenshot(path=str(shots / f"page_{width}.png"), full_page=True)
            facts["problems"] = problems
            facts["requests"] = [u for u in requests if not u.startswith(("file:", "data:"))]
            found[width] = facts
            page.close()
        browser.close()
    return found


def assert_reads_well(facts: dict, width: int) -> None:
    """No errors, nothing fetched, no sideways scrolling of the page, every figure drawn and
    visible with no text cut off, and the table of contents linking every section."""
    assert facts["problems"] == [], width
    assert facts["requests"] == [], width
    assert facts["scrollWidth"] <= facts["innerWidth"], width
    assert facts["figures"] and all(ok for _, ok in facts["figures"]), facts["figures"]
    assert all(ok for _, ok in facts["images"]), facts["images"]
    assert facts["cutTexts"] == [], (width, facts["cutTexts"])
    assert facts["tocLinks"] == facts["anchors"] and facts["sections"] == len(facts["anchors"])


@pytest.mark.browser
def test_page_in_a_real_browser(report, tmp_path):
    import matplotlib.image as mpimg

    out, numbers = report
    found = browse(out / "report.html", shots=tmp_path)
    for width, facts in found.items():
        assert_reads_well(facts, width)
        assert EVIL in facts["text"]  # shown as text, not run
    assert len(found[1280]["figures"]) >= 3
    assert found[1280]["sections"] == len(numbers["sections"]) + 1  # and the data-quality note
    pixels = mpimg.imread(tmp_path / "page_1280.png")
    assert pixels.std() > 0.05 and (tmp_path / "page_1280.png").stat().st_size > 20_000


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory):
    """`make demo`: the report on the zoo, with its every section and figure."""
    out = tmp_path_factory.mktemp("demo")
    numbers = build_report(None, None, out, progress=False, markdown=True)
    return out, numbers


@pytest.mark.browser
def test_demo_report_reads_well_on_a_laptop_and_a_phone(demo_report, tmp_path):
    """The zoo report at 1280 px and at a phone's 390 px: no console errors, no sideways
    scrolling of the page (tables and wide figures scroll in their own boxes), every figure
    drawn and visible, no title or axis title cut off."""
    out, numbers = demo_report
    found = browse(out / "report.html", shots=tmp_path)
    for width, facts in found.items():
        assert_reads_well(facts, width)
        assert len(facts["figures"]) >= 20
    assert len(found[390]["tocLinks"]) == len(numbers["sections"]) + 1


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
