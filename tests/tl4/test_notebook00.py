"""Notebook 00 (porting a TransformerLens notebook) on TL 4.3's bridge.

The notebook's code cells run here as written, but for the loading cell's imports and model
class (`BridgeRewardModel.boot` in place of `HookedRewardModel.from_pretrained`; TL 4's
`utilities` in place of the removed `utils`; no sae_lens) and the sae_lens cell, which needs
TL 3.9. The notebook's own checks cell asserts the numbers: the lens ends at the reward, the
parts add up to it, padding changes nothing, `[:, -1]` is every row's reward, and TL's patching
grid equals the package's `activation_patching` on the end-aligned positions.
"""

import json
from pathlib import Path

from tests.tl4.tl4_only import skip_unless_tl4

skip_unless_tl4()

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "00_porting_from_logit_lens.ipynb"

#: The loading cell's lines that change on the bridge: (TL 3.9 line, TL 4.3 line).
ON_THE_BRIDGE = [
    (
        "from transformer_lens import HookedTransformer, patching, utils",
        "from transformer_lens import patching\nfrom transformer_lens import utilities as utils",
    ),
    ("from sae_lens import SAE\n", ""),
    ("from reward_lens_tl.sae.zoo_features import train_zoo_sae", "# (sae_lens: TL 3.9 only)"),
    (
        "from reward_lens_tl import HookedRewardModel, zoo",
        "from reward_lens_tl import zoo\nfrom reward_lens_tl.bridge import BridgeRewardModel",
    ),
    ("HookedRewardModel.from_pretrained(", "BridgeRewardModel.boot("),
]


def _code_cells() -> list[str]:
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


def test_notebook_00_runs_on_the_bridge_but_for_its_sae_lens_cell():
    cells = _code_cells()
    namespace: dict = {"In": cells}  # the line-count cell reads IPython's `In`
    ran, skipped = 0, []
    for source in cells:
        if "train_zoo_sae(" in source and "import" not in source:
            skipped.append(source.splitlines()[1])
            continue
        if "HookedRewardModel.from_pretrained(" in source:
            for old, new in ON_THE_BRIDGE:
                assert old in source, old  # the notebook still has the line this test rewrites
                source = source.replace(old, new)
        exec(compile(source, str(NOTEBOOK), "exec"), namespace)
        ran += 1
    assert len(skipped) == 1 and ran == len(cells) - 1
    assert type(namespace["model"]).__name__ == "BridgeRewardModel"
    rewards = namespace["reward"].tolist()
    assert rewards[0] > 4.0 and rewards[1] < -5.0  # chosen / rejected, as on TL 3.9 (5.30, -6.70)
