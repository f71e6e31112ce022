"""The report's two backends, and the note a section gets when its analysis needs TL 3.9.

`reward-lens report --backend tl3` (the default) loads the model as `HookedRewardModel` on
TransformerLens 3.9; `--backend bridge` boots it through TransformerLens 4's `TransformerBridge`
(`reward_lens_tl.bridge.BridgeRewardModel`, the second environment). The analyses are the same
code on both, and a section that loads models of its own (the zoo's second reward model, judge
and PRM) loads them on the report's backend (`load_reward_model`). A section whose analysis
needs TransformerLens 3.9 raises `BridgeUnsupportedError`: the SAE tools (sae_lens does not
import under TransformerLens 4), or an analysis that needs a capability the model declares
`False` (`reward_lens_tl.capabilities`). `build_report` then shows that section as one line,
`tl3_note`, and lists it in `report.json`'s `tl3_only`.

Examples:
    >>> from reward_lens_tl.errors import BridgeUnsupportedError
    >>> note = tl3_note("SAE features", BridgeUnsupportedError("sae_lens pins TL < 4"))
    >>> note.title, note.parts[0]["text"][:46]
    ('SAE features', 'Needs the TransformerLens 3.9 backend (--backe')
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..bridge.versions import (
    DEFAULT_INSTALL,
    is_bridge_line,
    require_bridge,
    transformer_lens_version,
)
from ..errors import BridgeUnsupportedError, InvalidArgumentError, TransformerLensVersionError
from .page import Section

__all__ = [
    "BACKENDS",
    "MODEL_TYPES",
    "check_backend",
    "environment_backend",
    "load_reward_model",
    "tl3_note",
]

#: `reward-lens report --backend`: TransformerLens 3.9's `HookedRewardModel`, or the bridge.
BACKENDS = ("tl3", "bridge")


def _installed(version: str | None) -> str:
    return transformer_lens_version() if version is None else version


def environment_backend(version: str | None = None) -> str:
    """The backend this environment's TransformerLens runs: `"bridge"` from 4 on, else `"tl3"`.

    Args:
        version: The TransformerLens version (`None`: the installed one).

    Returns:
        `"tl3"` or `"bridge"`.

    Examples:
        >>> environment_backend("3.9.0"), environment_backend("4.3.0")
        ('tl3', 'bridge')
    """
    return "bridge" if is_bridge_line(_installed(version)) else "tl3"


def check_backend(backend: str, version: str | None = None) -> None:
    """Refuse a backend that is unknown or whose TransformerLens this environment lacks.

    Args:
        backend: `"tl3"` or `"bridge"` (`BACKENDS`).
        version: The TransformerLens version (`None`: the installed one).

    Raises:
        InvalidArgumentError: An unknown backend.
        TransformerLensVersionError: The backend's TransformerLens is not installed (the
            message has the install command, or the backend to use instead).

    Examples:
        >>> check_backend("tl3", version="3.9.0"), check_backend("bridge", version="4.3.0")
        (None, None)
        >>> try:
        ...     check_backend("tl3", version="4.3.0")
        ... except TransformerLensVersionError as err:
        ...     print(str(err)[:72])
        the tl3 backend (HookedRewardModel) needs TransformerLens 3.9; this envi
    """
    if backend not in BACKENDS:
        raise InvalidArgumentError(
            f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}"
        )
    found = _installed(version)
    if backend == "bridge":
        require_bridge(found)
    elif is_bridge_line(found):
        raise TransformerLensVersionError(
            f"the tl3 backend (HookedRewardModel) needs TransformerLens 3.9; this environment has "
            f"{found}: use backend='bridge', or the default environment ({DEFAULT_INSTALL})"
        )


#: The classes `load_reward_model` loads each model type with: `(module, TL 3.9's, the bridge's)`.
MODEL_TYPES = {
    "reward": ("reward_lens_tl.model", "HookedRewardModel", "BridgeRewardModel"),
    "judge": ("reward_lens_tl.judges", "HookedJudge", "BridgeJudge"),
    "prm": ("reward_lens_tl.judges", "HookedPRM", "BridgePRM"),
}


def load_reward_model(
    path: str | os.PathLike, backend: str = "tl3", model_type: str = "reward", **options: Any
) -> Any:
    """The reward model (or judge, or PRM) at `path` on `backend` (`BACKENDS`).

    Args:
        path: The checkpoint directory.
        backend: `"tl3"` (`HookedRewardModel.from_pretrained`, ...) or `"bridge"`
            (`BridgeRewardModel.boot`, ...).
        model_type: `"reward"`, `"judge"` (`HookedJudge` / `BridgeJudge`) or `"prm"`
            (`HookedPRM` / `BridgePRM`), `MODEL_TYPES`.
        **options: The loader's keywords (a judge's `kind`, `template`, ...), the same on both.

    Returns:
        The model.

    Raises:
        InvalidArgumentError: An unknown backend or model type.
        TransformerLensVersionError: The backend's TransformerLens is not installed (the
            message has the install command).

    Examples:
        >>> from reward_lens_tl.zoo import zoo_path
        >>> load_reward_model(zoo_path("scalar")).cfg.n_layers
        3
        >>> load_reward_model(zoo_path("scalar"), "tl4")
        Traceback (most recent call last):
        ...
        reward_lens_tl.errors.InvalidArgumentError: unknown backend 'tl4'; choose one of tl3, bridge
    """
    import importlib

    check_backend(backend)
    if model_type not in MODEL_TYPES:
        raise InvalidArgumentError(
            f"unknown model_type {model_type!r}; choose one of {', '.join(MODEL_TYPES)}"
        )
    module, tl3, bridge = MODEL_TYPES[model_type]
    if backend == "bridge":
        return getattr(importlib.import_module("reward_lens_tl.bridge"), bridge).boot(
            Path(path), **options
        )
    return getattr(importlib.import_module(module), tl3).from_pretrained(Path(path), **options)


def tl3_note(title: str, err: BridgeUnsupportedError) -> Section:
    """The section `title` as one line: it needs the TransformerLens 3.9 backend, and why.

    Args:
        title: The section's title.
        err: The analysis's refusal (its message says why).

    Returns:
        The section (its text is escaped on the page, like every text).

    Examples:
        >>> note = tl3_note("SAE features", BridgeUnsupportedError("sae_lens pins TL < 4"))
        >>> note.parts[0]["text"]
        'Needs the TransformerLens 3.9 backend (--backend tl3, the default): sae_lens pins TL < 4'
    """
    return Section(title).text(
        f"Needs the TransformerLens 3.9 backend (--backend tl3, the default): {err}"
    )
