"""The example of the docs page "TransformerLens 3.9 or 4.3" (`docs/backends.md`) runs on TL 4.3.

Its code blocks are fenced as `py`, not `python`, so the default tier's docs check (which runs
every `python` block of every page under TL 3.9) leaves them to this tier.
"""

import re
from pathlib import Path

import torch

from tests.tl4.tl4_only import skip_unless_tl4

skip_unless_tl4()

PAGE = Path(__file__).resolve().parents[2] / "docs" / "backends.md"


def test_the_backends_page_example_runs_and_its_comment_holds():
    blocks = re.findall(r"```py\n(.*?)```", PAGE.read_text(), flags=re.S)
    assert len(blocks) == 1
    namespace: dict = {}
    exec(compile(blocks[0], str(PAGE), "exec"), namespace)  # noqa: S102
    model, clean = namespace["model"], namespace["clean"]
    reward = model.rewards(torch.tensor([clean.ids]))
    torch.testing.assert_close(namespace["lens"].values[-1], reward, atol=1e-5, rtol=0)
    assert namespace["patched"].shape == (model.cfg.n_layers, len(clean.ids))
