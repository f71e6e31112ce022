"""The committed notebooks show what they compute: every cell that draws carries its figure
(plotly's interactive output or an image), and a sentence under it says what to see."""

import json
from pathlib import Path

import pytest

from tests.notebook_figures import cells_without_figures, figure_cells

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_drawing_cell_shows_its_figure(path):
    nb = json.loads(path.read_text())
    assert not cells_without_figures(nb), f"{path.name}: cells {cells_without_figures(nb)}"
    source = "".join("".join(c["source"]) for c in nb["cells"])
    assert 'matplotlib.use("Agg")' not in source, "the Agg backend draws nothing in Jupyter"


@pytest.mark.parametrize("path", NOTEBOOKS[1:], ids=[p.stem for p in NOTEBOOKS[1:]])
def test_a_sentence_under_every_figure(path):
    nb = json.loads(path.read_text())
    cells = nb["cells"]
    for index in figure_cells(nb):
        after = cells[index + 1] if index + 1 < len(cells) else None
        assert after is not None and after["cell_type"] == "markdown", (path.name, index)
        assert "In the figure" in "".join(after["source"]), (path.name, index)


def test_the_rule_finds_a_cell_without_its_figure():
    nb = {
        "cells": [
            {"cell_type": "code", "source": ["result.plot().show()"], "outputs": []},
            {"cell_type": "code", "source": ["x = 1"], "outputs": []},
            {
                "cell_type": "code",
                "source": ["result.plot().show()"],
                "outputs": [{"data": {"application/vnd.plotly.v1+json": {}}}],
            },
        ]
    }
    assert cells_without_figures(nb) == [0] and figure_cells(nb) == [0, 2]
