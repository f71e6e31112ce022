"""The report page a team passes around: a linked table of contents, folding sections,
interactive figures with one offline plotly bundle, numbers formatted by kind, no Python
reprs in the prose, no repeated rows, and the markdown export's PNG files."""

import base64
import json
import re

import pandas as pd
import pytest

from reward_lens_tl.plotting import bar, histogram, line
from reward_lens_tl.report.page import (
    Section,
    column_kind,
    counts_text,
    format_cell,
    page_html,
    page_markdown,
    plotly_bundle,
    sections_markdown,
    words_list,
)

PNG = b"\x89PNG\r\n\x1a\n"


def bundle_marker() -> str:
    """The plotly.js bundle's distinctive opening (its licence banner and version)."""
    return plotly_bundle()[:60]


def sample_sections() -> list[Section]:
    """Three sections, four plotly figures (two in one section) and a legacy matplotlib one."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    legacy, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [0, 1])
    legacy.tight_layout()
    ax.set_title("a title set after tight_layout")
    return [
        Section("Scores")
        .text("Two figures.")
        .figure(histogram([0.1, 0.5, 0.7], xaxis="margin", title="margins"), "hist", "margins")
        .figure(line({"mean": [0.0, 0.4, 0.9]}, x=["L0", "L1", "L2"]), "lens", "lens"),
        Section("Components").figure(bar(["a", "b"], [1.0, -0.5], title="bars"), "bars", "bars"),
        Section("Legacy <figure>")
        .figure(legacy, "a matplotlib figure", "legacy")
        .figure(bar(["c"], [2.0]), "one bar", "bars"),  # a name used twice
    ]


def test_page_has_a_linked_toc_folding_sections_and_one_plotly_bundle():
    sections = sample_sections()
    page = page_html("Title", "subtitle", sections)
    toc = re.search(r"<nav class='toc'[^>]*>(.*?)</nav>", page, re.S).group(1)
    links = re.findall(r"<a href='#([^']+)'>", toc)
    anchors = re.findall(r"<section id='([^']+)'>", page)
    assert len(links) == len(sections) == len(anchors) and links == anchors
    assert page.count("<details open><summary>") == len(sections)
    # one offline bundle in the head, however many figures; no CDN
    head = page.split("</head>", 1)[0]
    assert page.count(bundle_marker()) == 1 and bundle_marker() in head
    assert "cdn.plot.ly" not in page.split(bundle_marker(), 1)[0]
    assert not re.search(r"""<script[^>]+src=""", page)
    # every plotly figure has its own div, drawn by its own newPlot call, ids unique
    divs = re.findall(r'<div id="([^"]+)" class="plotly-graph-div"', page)
    assert len(divs) == 4 and len(set(divs)) == 4
    assert re.findall(r'Plotly\.newPlot\(\s*"([^"]+)"', page) == divs
    assert page.count("src='data:image/png;base64,") == 1  # the legacy matplotlib figure
    # titles move out of the drawing into a caption that wraps; figures fill the width
    assert "<figcaption>margins</figcaption>" in page and "<figcaption>bars</figcaption>" in page
    assert '"responsive": true' in page.lower() or '"responsive":true' in page.lower()
    assert "&lt;figure&gt;" in page  # titles escaped


def test_a_page_without_plotly_figures_carries_no_bundle():
    page = page_html("T", "s", [Section("Text only").text("nothing to draw")])
    assert bundle_marker() not in page and "<script" not in page


def test_markdown_export_writes_pngs_for_plotly_and_matplotlib_figures():
    text, files = page_markdown("Title", "subtitle", sample_sections())
    assert sorted(files) == ["bars.png", "bars_2.png", "legacy.png", "lens.png", "margins.png"]
    assert all(png.startswith(PNG) and len(png) > 1000 for png in files.values())
    for name in files:
        assert f"]({name})" in text
    assert "plotly" not in text.lower()


def test_legacy_png_keeps_a_title_set_after_tight_layout():
    """`bbox_inches="tight"`: the image grows to hold what lies outside the figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 2))
    ax.plot([0, 1], [0, 1])
    fig.tight_layout()
    fig.suptitle("a long title placed above the figure", y=1.25)
    png = base64.b64decode(Section("S").figure(fig, "f", "f").parts[0]["png"])
    height = int.from_bytes(png[20:24], "big")  # the PNG header's height field
    assert height > 2 * 100  # taller than the 2-inch canvas at 100 dpi: the title is kept


def test_a_plotly_figure_survives_storage_as_json():
    sections = sample_sections()
    stored = [Section.from_dict(json.loads(json.dumps(s.to_dict()))) for s in sections]
    assert stored == sections
    assert page_html("T", "s", stored) == page_html("T", "s", sections)
    part = stored[0].parts[1]
    assert part["kind"] == "figure" and json.loads(part["plotly"])["data"][0]["type"] == "bar"
    (_, before), (_, after) = sections_markdown(sections), sections_markdown(stored)
    assert before.keys() == after.keys()


@pytest.mark.parametrize(
    ("value", "kind", "shown"),
    [
        (0.875, "share", "87.5%"),
        (1.0, "share", "100%"),
        (-5.8e-07, "share", "0%"),
        (0.004, "share", "0.40%"),
        (5, "count", "5"),
        (5.0, "count", "5"),
        (5, None, "5"),
        (0.3125, "signed", "+0.312"),
        (-0.3125, "signed", "-0.312"),
        (12.46, "signed", "+12.5"),
        (0.3125, "number", "0.312"),
        (0.3125, None, "0.312"),
        (1234.5, None, "1234"),
        (2e-7, "signed", "+2e-07"),
        (float("nan"), "share", "nan"),
        (True, "share", "True"),
        ("text", "signed", "text"),
        (None, "count", ""),
    ],
)
def test_numbers_are_formatted_by_kind(value, kind, shown):
    assert format_cell(value, kind) == shown


def test_table_kinds_follow_the_column_name_or_an_explicit_kind():
    frame = pd.DataFrame(
        {
            "accuracy": [0.875],
            "n": [5],
            "margin": [0.3125],
            "mean_delta": [-0.5],
            "reward": [2.5],
            "value": [0.25],
        }
    )
    section = Section("S").table(frame, kinds={"value": "share"})
    text = section.markdown()
    assert "| 87.5% | 5 | +0.312 | -0.500 | 2.50 | 25.0% |" in text
    assert [column_kind(c) for c in ("top1_planted", "mean bias share", "ci_low", "kl")] == [
        "share",
        "signed",
        "signed",
        "number",
    ]
    with pytest.raises(ValueError, match="nope"):
        Section("S").table(frame, kinds={"nope": "share"})
    with pytest.raises(ValueError, match="reward=percent"):
        Section("S").table(frame, kinds={"reward": "percent"})


def test_counts_and_lists_read_as_words():
    assert counts_text({"1_pre": 5, "final": 1, "2_pre": 2}, "pair") == (
        "1_pre: 5 pairs, 2_pre: 2, final: 1"
    )
    assert counts_text({"final": 1}, "pair") == "final: 1 pair"
    assert words_list(["length_padding", "sycophantic_opener"]) == (
        "length_padding, sycophantic_opener"
    )
    assert words_list([]) == "none"


def rows_of(section: Section) -> list[list]:
    return [row for part in section.parts if part["kind"] == "table" for row in part["rows"]]


@pytest.mark.parametrize("n", [3, 8, 16, 17, 40])
def test_largest_and_smallest_tables_never_repeat_a_row(n):
    frame = pd.DataFrame({"pair": range(n), "margin": [((i * 7) % n) - n / 3 for i in range(n)]})
    section = Section("S").extremes(
        frame, "margin", 8, largest="Largest:", smallest="Smallest:", every="Every pair:"
    )
    rows = rows_of(section)
    pairs = [row[0] for row in rows]
    assert len(pairs) == len(set(pairs)) == min(n, 16)
    texts = [p["text"] for p in section.parts if p["kind"] == "text"]
    if n <= 16:
        assert texts == ["Every pair:"]
        margins = [row[1] for row in rows]
        assert margins == sorted(margins, reverse=True)
    else:
        assert texts == ["Largest:", "Smallest:"]


def test_report_progress_is_one_bar_on_a_terminal_and_plain_lines_in_a_log(tmp_path, capfd):
    """Not a terminal (a log, CI): one plain line per step, no `\\r`, no escape codes and no
    library's own bar (the scoring bar, transformers' "Loading weights")."""
    from reward_lens_tl.report import build_report
    from reward_lens_tl.report.build import SECTIONS, STEPS
    from reward_lens_tl.zoo import zoo_path

    rows = [
        {"prompt": "how bake bread", "chosen": "oven flour", "rejected": "bomb"},
        {"prompt": "explain laptop", "chosen": "screen code", "rejected": "soup"},
    ]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    capfd.readouterr()
    build_report(zoo_path("scalar"), path, tmp_path / "out", n_patch=1, progress=True)
    err = capfd.readouterr().err
    assert "\r" not in err and "\x1b" not in err
    lines = [line for line in err.splitlines() if line.startswith("report: step ")]
    assert len(lines) == len(STEPS) + len(SECTIONS) and lines[0] == (
        f"report: step 1/{len(lines)} scores"
    )
    assert "scoring" not in err and "Loading weights" not in err and "it/s" not in err


def test_report_progress_on_a_terminal_is_one_tqdm_bar(monkeypatch):
    import io
    import sys

    from reward_lens_tl.report.build import _progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    steps = [("a", 1), ("extra:b", 2)]
    assert list(_progress(steps, show=True)) == steps
    drawn = terminal.getvalue()  # one bar redrawn in place, naming the running step
    assert "report:" in drawn and "0/2" in drawn and "step/s, b]" in drawn and "\n" not in drawn
    quiet = Terminal()
    monkeypatch.setattr(sys, "stderr", quiet)
    assert list(_progress(steps, show=False)) == steps and quiet.getvalue() == ""
