"""The notebooks run top to bottom (so they cannot rot)."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.notebook_figures import cells_without_figures

# Minutes of kernel time: the notebooks tier (`make test-notebooks`; `.ci/run` runs it with the
# other tiers after `make test`).
pytestmark = pytest.mark.notebooks

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    errors = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors
    assert not cells_without_figures(nb), f"cells that draw nothing: {cells_without_figures(nb)}"
    if path.stem.startswith("00_porting"):
        text = "".join(
            o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
        )
        changed = int(text.split("changed lines: ")[1].split()[0])
        print(f"{path.name}: {changed} lines changed from the TransformerLens original")
        assert changed <= 12
