"""pytest set-up shared by the tests (``tests/``) and the package's docstring examples.

``make test`` collects both: ``testpaths = ["tests", "reward_lens_tl"]`` with
``--doctest-modules`` (``pyproject.toml``), so every ``>>>`` example in the package runs. This
file sits at the root so that what both need holds for both: no network, one thread, a fixed
seed. Fixtures for tests (the shared zoo models) are in ``tests/conftest.py``.

Every module of ``reward_lens_tl`` imports with the package's own dependencies (torch's
``torch.distributed`` included; the browser test's Playwright is imported by that test only),
so no module is left out of doctest collection but the TransformerBridge backend's, whose
examples need TransformerLens 4 and run in ``make test-tl4``; a module that could not be
imported is listed in ``collect_ignore`` below with the reason.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

# Test models are tiny: one thread is fastest, and robust when the machine is shared
# (several processes each spinning 2 OpenMP threads on 2 cores were measured 25x slower).
torch.set_num_threads(1)


def _transformer_lens_4() -> bool:
    """Whether this environment has TransformerLens 4 (the bridge backend's, `make test-tl4`)."""
    from reward_lens_tl.bridge.versions import transformer_lens_version

    return int(transformer_lens_version().split(".")[0]) >= 4


#: Paths (relative to this file) that doctest collection must not import, with the reason.
collect_ignore: list[str] = []
if not _transformer_lens_4():
    # The TransformerBridge backend needs TransformerLens 4: its examples run in `make test-tl4`
    # (`--doctest-modules reward_lens_tl/bridge` in .venv-tl4); `versions.py` and `families.py`,
    # which import neither line, run here too.
    collect_ignore += [
        "reward_lens_tl/bridge/__init__.py",
        "reward_lens_tl/bridge/boot.py",
        "reward_lens_tl/bridge/gated.py",
        "reward_lens_tl/bridge/implicit.py",
        "reward_lens_tl/bridge/judges.py",
        "reward_lens_tl/bridge/post_norms.py",
        "reward_lens_tl/bridge/residual.py",
        "reward_lens_tl/bridge/reward_model.py",
        "reward_lens_tl/bridge/tl_surface.py",
        "reward_lens_tl/bridge/windows.py",
        "reward_lens_tl/bridge/verdict_boot.py",
    ]

#: Docstring examples (pytest's doctest item names) that train or generate for longer than the
#: fast tier affords: they run in the slow tier (`make test-other-tiers`, CI) instead.
SLOW_DOCTESTS: dict[str, str] = {
    "reward_lens_tl.pressure.training.train_reward_model": "TRL's RewardTrainer, 2 steps",
    "reward_lens_tl.pressure.training.optimise_policy": "TRL's GRPOTrainer, 1 step",
    "reward_lens_tl.sae.zoo_features.zoo_ground_truth": "trains a zoo SAE at full size (~10 s)",
}


def pytest_collection_modifyitems(config, items):
    """Move the examples in `SLOW_DOCTESTS` to the slow tier."""
    for item in items:
        if isinstance(item, pytest.DoctestItem) and item.name in SLOW_DOCTESTS:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _seed():
    """Every test and every docstring example starts from the same random state."""
    torch.manual_seed(0)
