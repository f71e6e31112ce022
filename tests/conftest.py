"""Shared fixtures: the zoo models, each built once per test run.

The environment (no network, one thread, the seed) is set in the root ``conftest.py``, which
also serves the package's docstring examples.

``zoo_scalar``, ``zoo_multi`` (``HookedRewardModel``), ``zoo_implicit`` (the zoo's DPO policy
against its reference, an ``ImplicitRewardModel``) and ``zoo_task`` (the zoo's synthetic task)
are session-scoped: a test may run them, hook them (hooks, SAEs) and read them, but never
change them. After every test that used one, its hooks and SAEs are removed and its weights,
config, tokenizer settings and attention path are compared with what they were when it was
built; a test that changed any of them fails in teardown, naming the change. A test that needs
to change a model (perturb a weight, move it, fold it differently) loads its own copy with
``HookedRewardModel.from_pretrained(zoo_path(...))``.

``shared_file`` finds a public reference file under ``../shared/data`` (or
``$REWARD_LENS_SHARED_DATA``) and skips the test, naming the path, when it is absent.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
import torch

import reward_lens_tl
from reward_lens_tl.results import check_result_shapes
from reward_lens_tl.zoo import zoo_path

# --- result shape checks (issue 22, item 3) ---------------------------------------------------
# Every Result built during the test run has its fields checked against their annotations
# (jaxtyping shapes, with beartype): here, and in the subprocesses tests start (the CLI).
# REWARD_LENS_TL_CHECK_SHAPES=0 turns them off (e.g. to time the suite without them).
os.environ.setdefault("REWARD_LENS_TL_CHECK_SHAPES", "1")
check_result_shapes(os.environ["REWARD_LENS_TL_CHECK_SHAPES"] != "0")
# --- end of result shape checks ---------------------------------------------------------------

#: The repository (found from the package, so it holds wherever a test file lives).
REPO = Path(reward_lens_tl.__file__).resolve().parents[1]
#: Public reference data some tests read; absent on a plain clone.
SHARED_DATA = Path(os.environ.get("REWARD_LENS_SHARED_DATA", REPO.parent / "shared" / "data"))

#: The shared models: fixture name -> builder (called once per run, on first use).
ZOO_MODELS = {
    "zoo_scalar": lambda: _hooked("scalar"),
    "zoo_multi": lambda: _hooked("multi"),
    "zoo_implicit": lambda: _implicit(),
}
_built: dict[str, Shared] = {}


def _hooked(name: str):
    from reward_lens_tl import HookedRewardModel

    return HookedRewardModel.from_pretrained(zoo_path(name))


def _implicit():
    from reward_lens_tl.implicit import ImplicitRewardModel

    return ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))


def _parts(model) -> dict[str, torch.nn.Module]:
    """The TL models inside a shared model (an implicit reward model holds two)."""
    if hasattr(model, "policy"):
        return {"policy": model.policy, "reference": model.reference}
    return {"model": model}


def _settings(part: torch.nn.Module) -> tuple:
    """What a test could switch on a model without touching its weights."""
    tok = getattr(part, "tokenizer", None)
    sides = None if tok is None else (tok.padding_side, tok.truncation_side)
    attention = tuple(getattr(b.attn, "fast_attention", None) for b in part.blocks)
    return part.training, sides, attention


def _state(model) -> tuple:
    """Weights, config and settings of every part, plus an implicit model's own options."""
    parts = []
    for label, part in _parts(model).items():
        digest = hashlib.sha1()
        for key, tensor in part.state_dict().items():
            digest.update(key.encode())
            digest.update(tensor.detach().cpu().reshape(-1).view(torch.uint8).numpy().tobytes())
        parts.append((label, digest.hexdigest(), repr(part.cfg.to_dict()), _settings(part)))
    return (*parts, getattr(model, "beta", None), getattr(model, "include_suffix", None))


class Shared:
    """A shared model, its state when built, and what is needed to put it back."""

    def __init__(self, model):
        self.model = model
        self.state = _state(model)
        self.weights = {
            label: {key: t.detach().clone() for key, t in part.state_dict().items()}
            for label, part in _parts(model).items()
        }
        self.settings = {k: _settings(p) for k, p in _parts(model).items()}

    def restore(self) -> list[str]:
        """Remove hooks and SAEs (a test may add them); put back weights and settings a test
        must not change, and say which it changed."""
        changes = []
        for part in _parts(self.model).values():
            part.reset_hooks(including_permanent=True)
            if hasattr(part, "reset_saes"):
                part.reset_saes()
            left = _leftover_torch_hooks(part)
            if left:
                changes.append(f"left plain torch hooks on {left[:3]}")
                for module in part.modules():
                    module._forward_hooks.clear()
                    module._forward_pre_hooks.clear()
                    module._backward_hooks.clear()
        if _state(self.model) != self.state:
            changes.append("changed its weights, config, mode, tokenizer or attention settings")
            for label, part in _parts(self.model).items():
                part.load_state_dict(self.weights[label])
                training, sides, attention = self.settings[label]
                part.train(training)
                if sides is not None:
                    part.tokenizer.padding_side, part.tokenizer.truncation_side = sides
                for block, fast in zip(part.blocks, attention, strict=True):
                    block.attn.fast_attention = fast
            self.state = _state(self.model)  # a changed config cannot be put back: no cascade
        return changes


def _leftover_torch_hooks(part: torch.nn.Module) -> list[str]:
    return [
        name or "<model>"
        for name, module in part.named_modules()
        if module._forward_hooks or module._forward_pre_hooks or module._backward_hooks
    ]


def _shared(name: str):
    if name not in _built:
        _built[name] = Shared(ZOO_MODELS[name]())
    return _built[name].model


@pytest.fixture(scope="session")
def zoo_scalar():
    """The zoo's scalar reward model (``zoo_path("scalar")``), shared: do not change it."""
    return _shared("zoo_scalar")


@pytest.fixture(scope="session")
def zoo_multi():
    """The zoo's three-objective reward model (``zoo_path("multi")``), shared."""
    return _shared("zoo_multi")


@pytest.fixture(scope="session")
def zoo_implicit():
    """The zoo's DPO policy against its reference (an ``ImplicitRewardModel``), shared."""
    return _shared("zoo_implicit")


@pytest.fixture(scope="session")
def zoo_task():
    """The zoo's synthetic task (``load_task().task``): examples, contrast pairs, rules."""
    from reward_lens_tl.zoo import load_task

    return load_task().task


@pytest.fixture(scope="session")
def shared_file():
    """``shared_file("hh_rlhf/harmless_base_test.jsonl.gz")``: that file's path under the
    shared data folder, or the test is skipped with the path as the reason."""

    def find(relative: str) -> Path:
        path = SHARED_DATA / relative
        if not path.exists():
            pytest.skip(f"shared data not found at {path} (set REWARD_LENS_SHARED_DATA)")
        return path

    return find


@pytest.fixture(autouse=True)
def _shared_models_untouched(request):
    """After a test, reset the shared zoo models it used and fail if it changed one."""
    yield
    for name in ZOO_MODELS.keys() & set(request.fixturenames):
        if name in _built:
            changes = _built[name].restore()
            if changes:
                pytest.fail(
                    f"{request.node.nodeid} {' and '.join(changes)} of the shared {name!r} (put "
                    "back now); a test that changes a model loads its own copy"
                )
