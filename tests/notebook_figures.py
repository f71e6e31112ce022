"""Which notebook cells draw, and whether they show what they draw (shared by the notebook
tests: the committed outputs in the fast tier, a fresh execution in the notebooks tier)."""

from __future__ import annotations

import re

#: A code cell draws when it calls a result's `plot`/`plot_*`, a plotting helper, or `.show()`.
DRAWS = re.compile(r"\.plot\w*\(|\bimshow\(|\bside_by_side\(|\bpx\.\w+\(|\.show\(\)|plt\.")
#: What a shown figure leaves in a cell's outputs: plotly's mimetype or a static image.
FIGURE_MIME = ("application/vnd.plotly.v1+json", "image/png", "image/svg+xml")


def cells_without_figures(nb) -> list[int]:
    """Indices of the code cells that draw but whose outputs hold no figure."""
    missing = []
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code" or not DRAWS.search("".join(cell["source"])):
            continue
        mimes = {m for out in cell.get("outputs", []) for m in out.get("data", {})}
        if not mimes.intersection(FIGURE_MIME):
            missing.append(index)
    return missing


def figure_cells(nb) -> list[int]:
    """Indices of the code cells that draw."""
    return [
        i
        for i, cell in enumerate(nb["cells"])
        if cell["cell_type"] == "code" and DRAWS.search("".join(cell["source"]))
    ]
