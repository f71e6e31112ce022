"""The README's Python snippets run as written (in order, one namespace)."""

import re
from pathlib import Path

import matplotlib
import torch

matplotlib.use("Agg")

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_snippets_run():
    import matplotlib.pyplot as plt

    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102
    reward = namespace["model"].rewards(namespace["ids"])
    assert reward.shape == (1,) and torch.isfinite(reward).all()
    plt.close("all")
