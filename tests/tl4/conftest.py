"""Set-up of the TransformerLens 4 tier (`make test-tl4`), which loads no other conftest.

`make test-tl4` runs `pytest tests/tl4 reward_lens_tl/bridge --confcutdir tests/tl4 -c /dev/null`
in `.venv-tl4`, so the root and `tests/` conftests (which import TransformerLens 3.9 and sae_lens)
are not loaded: what they set that these tests need (no network, one thread, a fixed seed) is
set here again. In the default environment every module here skips itself (`tl4_only`), and the
fixtures below are never built.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from tests.tl4.tl4_only import FAMILIES  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory):
    """family -> a directory holding the tiny reward model and its tokenizer (safetensors)."""
    from reward_lens_tl.testing import tiny_reward_model, tiny_tokenizer

    dirs = {}
    for family in FAMILIES:
        path = tmp_path_factory.mktemp(family)
        tiny_reward_model(family).save_pretrained(path, safe_serialization=True)
        tiny_tokenizer().save_pretrained(path)
        dirs[family] = path
    return dirs
