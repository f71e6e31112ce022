"""Which TransformerLens line is installed, and the typed refusals that follow from it.

TransformerLens 3.9 (with sae_lens) is the default backend, `HookedRewardModel`; TransformerLens
4 is the `TransformerBridge` backend (`reward_lens_tl.bridge`). This module imports neither, so
it works in both environments.

Examples:
    >>> from reward_lens_tl.bridge.versions import transformer_lens_version
    >>> transformer_lens_version().split(".")[0] in ("3", "4")
    True
"""

from __future__ import annotations

from importlib import metadata

from ..errors import BridgeUnsupportedError, TransformerLensVersionError

__all__ = [
    "is_bridge_line",
    "TL4_INSTALL",
    "require_bridge",
    "require_sae_lens",
    "transformer_lens_version",
]

#: How to install the TransformerLens 4 environment (from a clone of the repository).
TL4_INSTALL = (
    "python -m venv .venv-tl4 && .venv-tl4/bin/pip install torch==2.13.0 && "
    ".venv-tl4/bin/pip install -r requirements-tl4.txt && .venv-tl4/bin/pip install --no-deps "
    "-e . (what `make test-tl4` does)"
)
#: How to install the default environment (TransformerLens 3.9 and sae_lens).
DEFAULT_INSTALL = "pip install reward-lens-tl (TransformerLens 3.9 and sae_lens; `make test`)"


def transformer_lens_version() -> str:
    """The installed TransformerLens's version, read from its package metadata (not imported).

    Returns:
        The version string (e.g. `"4.3.0"`).

    Raises:
        TransformerLensVersionError: TransformerLens is not installed.

    Examples:
        >>> transformer_lens_version()[0] in "34"
        True
    """
    try:
        return metadata.version("transformer-lens")
    except metadata.PackageNotFoundError as err:
        raise TransformerLensVersionError(
            f"TransformerLens is not installed. Install the default environment ({DEFAULT_INSTALL})"
            f" or the TransformerLens 4 one ({TL4_INSTALL})"
        ) from err


def _major(version: str) -> int:
    head = version.split(".")[0]
    return int(head) if head.isdigit() else 0


def is_bridge_line(version: str | None = None) -> bool:
    """Whether TransformerLens is 4 or later (the bridge backend's line).

    The one test of the TransformerLens line (the report's backend, the implicit reward's
    loader and the judges' refusals ask it).

    Args:
        version: The version to read (`None`: the installed one).

    Returns:
        `True` from TransformerLens 4 on.

    Examples:
        >>> is_bridge_line("4.3.0"), is_bridge_line("3.9.0"), is_bridge_line("dev")
        (True, False, False)
    """
    return _major(transformer_lens_version() if version is None else version) >= 4


def require_bridge(version: str | None = None) -> None:
    """Refuse, with the install command, unless TransformerLens 4 or later is installed.

    Args:
        version: The TransformerLens version to check (`None`: the installed one).

    Raises:
        TransformerLensVersionError: An older TransformerLens (the bridge backend needs 4).

    Examples:
        >>> from reward_lens_tl.errors import TransformerLensVersionError
        >>> require_bridge("4.3.0")
        >>> try:
        ...     require_bridge("3.9.0")
        ... except TransformerLensVersionError as err:
        ...     print(str(err).split(" (")[0])
        the TransformerBridge backend needs TransformerLens 4; this environment has 3.9.0
    """
    found = transformer_lens_version() if version is None else version
    if _major(found) < 4:
        raise TransformerLensVersionError(
            f"the TransformerBridge backend needs TransformerLens 4; this environment has "
            f"{found} (the default backend, HookedRewardModel, runs on it). Install the "
            f"TransformerLens 4 environment beside it: {TL4_INSTALL}"
        )


def require_sae_lens(version: str | None = None) -> None:
    """Refuse SAE splicing under TransformerLens 4, where sae_lens does not import.

    sae_lens 6.54 pins TransformerLens < 4 and its import fails under 4.3, so the SAE tools
    (`reward_lens_tl.sae`) run in the default environment only. `reward_lens_tl.sae` calls this
    on import.

    Args:
        version: The TransformerLens version to check (`None`: the installed one).

    Raises:
        BridgeUnsupportedError: TransformerLens 4 or later is installed.

    Examples:
        >>> from reward_lens_tl.errors import BridgeUnsupportedError
        >>> require_sae_lens("3.9.0")
        >>> try:
        ...     require_sae_lens("4.3.0")
        ... except BridgeUnsupportedError as err:
        ...     print(str(err)[:70])
        SAE splicing needs sae_lens, which pins TransformerLens < 4 and does n
    """
    found = transformer_lens_version() if version is None else version
    if _major(found) >= 4:
        raise BridgeUnsupportedError(
            "SAE splicing needs sae_lens, which pins TransformerLens < 4 and does not import "
            f"under TransformerLens {found}; use the default environment ({DEFAULT_INSTALL}) for "
            "reward_lens_tl.sae, and the TransformerBridge backend for the rest"
        )
