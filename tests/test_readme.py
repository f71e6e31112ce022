"""The README: its Python snippets run as written (in order, one namespace), it reads top-down
(what it is, quick start, one figure, what you can do, install and test commands, links), its
figure is committed and shown, and its long reference material lives in the docs it links to."""

import re
import warnings
from pathlib import Path

import matplotlib
import torch

matplotlib.use("Agg")

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
FIGURE = "docs/assets/patching_grid.png"


def headings() -> list[str]:
    text = re.sub(r"```.*?```", "", README.read_text(), flags=re.S)
    return re.findall(r"^## (.+)$", text, flags=re.M)


def test_readme_snippets_run(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    from reward_lens_tl.inputs import UnknownTokenWarning, _warned_unknown

    monkeypatch.chdir(tmp_path)  # the snippets write their figure into the working directory
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 2
    namespace: dict = {}
    _warned_unknown.clear()
    with warnings.catch_warnings():
        # every word of the README's examples must be known to the shipped model
        warnings.simplefilter("error", UnknownTokenWarning)
        for block in blocks:
            exec(compile(block, str(README), "exec"), namespace)  # noqa: S102
    model, ids = namespace["model"], namespace["ids"]
    assert model.tokenizer.unk_token_id not in ids[0].tolist()
    reward = model.rewards(ids)
    assert reward.shape == (1,) and torch.isfinite(reward).all()
    assert float(reward[0]) > 3.0  # topic match + sycophantic opener: a high reward
    # the snippet that saves the figure the README shows draws the same grid
    drawn = (tmp_path / "patching_grid.png").read_bytes()
    assert drawn.startswith(b"\x89PNG")
    plt.close("all")


def test_readme_leads_with_the_quick_start_and_its_figure():
    text = README.read_text()
    order = headings()
    assert order[0] == "Quick start", order
    assert order.index("What you can do") < order.index("Install, test, build the docs")
    assert order[-1] == "Links"
    quick = text.partition("## Quick start")[2].partition("\n## ")[0]
    # the two set-up commands, the first analysis and the figure, all in the quick start
    assert "make demo" in quick and "make test" in quick and "```python" in quick
    assert f"]({FIGURE})" in quick
    png = (REPO / FIGURE).read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    image = matplotlib.image.imread(REPO / FIGURE)  # decodes
    assert image.shape[0] > 200 and image.shape[1] > 200


def test_the_two_commands_are_true():
    """`make demo` runs the main job (the report) on the embedded zoo, `make test` the tests."""
    makefile = (REPO / "Makefile").read_text()
    demo = re.search(r"^demo:.*\n((?:\t.*\n)+)", makefile, flags=re.M)
    test = re.search(r"^test:.*\n((?:\t.*\n)+)", makefile, flags=re.M)
    assert demo and "reward-lens report" in demo.group(1)
    assert test and "pytest" in test.group(1)


def test_long_reference_material_is_in_the_docs():
    text = README.read_text()
    # the habits table is on the docs page the README links to (tests/test_docs.py checks it
    # is rendered there from reward_lens_tl.habits, the catalogue tests/test_habits.py checks)
    assert "](docs/coming-from-transformerlens.md)" in text
    assert "| TL idiom |" not in text and "<!-- habits" not in text
    tables = re.findall(r"^\|.*\|$", text, flags=re.M)
    assert len(tables) <= 12, "long tables belong on the docs pages"
    assert len(text) < 15_000
    # every capability page is linked
    for page in sorted((REPO / "docs" / "capabilities").glob("*.md")):
        assert f"](docs/capabilities/{page.name})" in text, page.name


def test_readme_links_resolve():
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        assert (REPO / target).exists(), target
