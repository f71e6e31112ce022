"""Index arguments (layers, heads, objectives, latents, positions) checked, never wrapped.

Internal (no public names): used by `reward_lens_tl.lens`, `.attribution` and the other analyses.

A layer index past the end must not silently become another layer (`layers=[5]` on a 3-layer
model is not layer 2), and `1.7` or `True` is not an index. Layers follow Python's rule for
negative indices (`-1` is the last layer); heads, latents and objectives do not take negative
indices, because there a negative number is more likely a mistake than a wish.

Examples:
    >>> check_index(2, 4, "head")
    2
    >>> try:
    ...     check_index(4, 4, "head")
    ... except InvalidArgumentError as err:
    ...     print(err)
    head 4 out of range [0, 4)
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable

from .errors import InvalidArgumentError

__all__: list[str] = []


def _as_int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if getattr(value, "ndim", None) == 0 and not getattr(value, "is_floating_point", bool)():
            return int(value)  # a 0-d integer tensor or numpy scalar
        raise InvalidArgumentError(f"{name} must be an integer, got {value!r}")
    return int(value)


def check_index(value, size: int, name: str, *, negative: bool = False) -> int:
    """`value` as an index into `size` items; negative ones count from the end only when `negative`.

    Out of range or not an integer: `InvalidArgumentError`.
    """
    index = _as_int(value, name)
    low = -size if negative else 0
    if not low <= index < size:
        raise InvalidArgumentError(f"{name} {index} out of range [{low}, {size})")
    return index % size if negative else index


def check_indices(values: Iterable, size: int, name: str, *, negative: bool = False) -> tuple:
    """`check_index` for each of `values` (a single int is refused: pass a list)."""
    if isinstance(values, (int, str, float)) or not isinstance(values, Iterable):
        raise InvalidArgumentError(f"{name}s must be a list of integers, got {values!r}")
    return tuple(check_index(v, size, name, negative=negative) for v in values)


def check_layer(model, layer) -> int:
    """Normalise a (possibly negative) layer index; a clear error when out of range."""
    return check_index(layer, model.cfg.n_layers, "layer", negative=True)
