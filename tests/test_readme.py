"""The README's Python snippets run as written (in order, one namespace)."""

import re
import warnings
from pathlib import Path

import matplotlib
import torch

matplotlib.use("Agg")

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_snippets_run():
    import matplotlib.pyplot as plt

    from reward_lens_tl.inputs import UnknownTokenWarning, _warned_unknown

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
    plt.close("all")
