"""Patching sites and the grids of cells swept over them.

A *site* is a family of TransformerLens hook points, one per layer:

| site       | hook                         | activation            | grid axes
| ---------- | ---------------------------- | --------------------- | -----------------------------
| resid_pre  | `blocks.{l}.hook_resid_pre`  | `[pos, d_model]`      | layer × pos (× all positions)
| resid_mid  | `blocks.{l}.hook_resid_mid`  | `[pos, d_model]`      | layer × pos
| resid_post | `blocks.{l}.hook_resid_post` | `[pos, d_model]`      | layer × pos
| attn_out   | `blocks.{l}.hook_attn_out`   | `[pos, d_model]`      | layer (× pos)
| mlp_out    | `blocks.{l}.hook_mlp_out`    | `[pos, d_model]`      | layer (× pos)
| z          | `blocks.{l}.attn.hook_z`     | `[pos, head, d_head]` | layer (× pos) × head
| q, k, v    | `blocks.{l}.attn.hook_q` …   | `[pos, head, d_head]` | layer (× pos) × head

(`k` and `v` have `n_key_value_heads` heads in grouped-query models.) A *cell* patches
one layer at one aligned position (`by_position=True`) or at every aligned position at once,
and for head sites one head. Cells are enumerated in C order of the grid's shape, so a flat
tensor of per-cell values reshapes to the grid.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.testing import tiny_reward_model
    >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    >>> grid = make_grid(model.cfg, "z", n_aligned=5, by_position=True)
    >>> grid.axes, grid.shape, grid.cell_labels()[:2]
    (('layer', 'pos', 'head'), (2, 5, 4), ('L0H0 0', 'L0H1 0'))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import torch
from jaxtyping import Int
from torch import Tensor

from ..errors import PatchingError
from ..indices import check_indices

if TYPE_CHECKING:
    from transformer_lens import HookedTransformerConfig

__all__ = ["Grid", "Site", "make_grid"]

SITE_HOOKS: dict[str, str] = {
    "resid_pre": "hook_resid_pre",
    "resid_mid": "hook_resid_mid",
    "resid_post": "hook_resid_post",
    "attn_out": "hook_attn_out",
    "mlp_out": "hook_mlp_out",
    "z": "attn.hook_z",
    "q": "attn.hook_q",
    "k": "attn.hook_k",
    "v": "attn.hook_v",
}
SITE_ALIASES = {"heads": "z", "head": "z", "attn_head": "z"}
#: A site name (or an alias of `z`), as the patching entry points take it.
Site = Literal[
    "resid_pre",
    "resid_mid",
    "resid_post",
    "attn_out",
    "mlp_out",
    "z",
    "q",
    "k",
    "v",
    "heads",
    "head",
    "attn_head",
]
HEAD_SITES = frozenset({"z", "q", "k", "v"})
RESID_SITES = frozenset({"resid_pre", "resid_mid", "resid_post"})


def canonical_site(site: str) -> str:
    """The site's canonical name (aliases such as `heads` resolved).

    Raises:
        PatchingError: if the site is unknown.
    """
    site = SITE_ALIASES.get(site, site)
    if site not in SITE_HOOKS:
        raise PatchingError(
            f"unknown patching site {site!r}; choose one of {sorted(SITE_HOOKS)} (or 'heads' "
            "for 'z')"
        )
    return site


def hook_name(site: str, layer: int) -> str:
    """The TransformerLens hook name of `site` at `layer`."""
    return f"blocks.{layer}.{SITE_HOOKS[site]}"


def site_heads(cfg: HookedTransformerConfig, site: str) -> int:
    """Number of heads of a head site (key/value heads for `k`/`v` in GQA models)."""
    ungrouped = getattr(cfg, "ungroup_grouped_query_attention", False)
    n_kv = getattr(cfg, "n_key_value_heads", None)
    if site in ("k", "v") and n_kv and not ungrouped:
        return int(n_kv)
    return int(cfg.n_heads)


@dataclass(frozen=True)
class Grid:
    """The cells of one sweep. `n_aligned` is the number of aligned positions.

    Built by `make_grid`, which checks the layers and heads against the model.

    Attributes:
        site: the canonical site name (`z` for its aliases).
        layers: the patched layers, ascending as given.
        by_position: one cell per aligned position (`True`) or one per layer (and head)
            patching every aligned position at once.
        heads: the patched heads of a head site (`z`, `q`, `k`, `v`), else `None`.
        n_aligned: the number of aligned positions.
        position_labels: one label per aligned position (`"end-2"`, `"p5"`); empty for the
            plain indices `"0"`, `"1"`, ...

    Examples:
        >>> from reward_lens_tl.patching import Grid
        >>> grid = Grid("z", layers=(0, 1), by_position=True, heads=(0, 1), n_aligned=2)
        >>> grid.axes, grid.shape, grid.cells_per_layer
        (('layer', 'pos', 'head'), (2, 2, 2), 4)
        >>> grid.cell_labels()[:4]   # C order: layer, then position, then head
        ('L0H0 0', 'L0H1 0', 'L0H0 1', 'L0H1 1')
    """

    site: str
    layers: tuple[int, ...]
    by_position: bool
    heads: tuple[int, ...] | None
    n_aligned: int
    position_labels: tuple[str, ...] = ()

    @property
    def axes(self) -> tuple[str, ...]:
        """The grid's axis names: `layer`, then `pos` and `head` where it has them."""
        axes = ("layer",) + (("pos",) if self.by_position else ())
        return axes + (("head",) if self.heads is not None else ())

    @property
    def shape(self) -> tuple[int, ...]:
        """The grid's shape, one size per axis."""
        shape = (len(self.layers),) + ((self.n_aligned,) if self.by_position else ())
        return shape + ((len(self.heads),) if self.heads is not None else ())

    @property
    def cells_per_layer(self) -> int:
        """The number of cells of one layer."""
        n = self.n_aligned if self.by_position else 1
        return n * (len(self.heads) if self.heads is not None else 1)

    def layer_cells(self, device=None) -> tuple[Int[Tensor, " cell"], Int[Tensor, " cell"]]:
        """`(j, head)` of each cell of one layer, in grid order.

        `j = -1` means every aligned position and `head = -1` no head axis.

        Args:
            device: the device of the two tensors (default: the CPU).

        Returns:
            The aligned index and the head of each cell, each `[cells_per_layer]`.

        Examples:
            >>> from reward_lens_tl.patching import Grid
            >>> Grid("z", (0, 1), by_position=True, heads=(0, 1), n_aligned=2).layer_cells()
            (tensor([0, 0, 1, 1]), tensor([0, 1, 0, 1]))
            >>> Grid("attn_out", (0, 1), by_position=False, heads=None, n_aligned=2).layer_cells()
            (tensor([-1]), tensor([-1]))
        """
        n_pos = self.n_aligned if self.by_position else 1
        n_head = len(self.heads) if self.heads is not None else 1
        j = torch.arange(n_pos, device=device).repeat_interleave(n_head)
        if not self.by_position:
            j = torch.full_like(j, -1)
        if self.heads is None:
            head = torch.full_like(j, -1)
        else:
            head = torch.as_tensor(self.heads, device=device).repeat(n_pos)
        return j, head

    def cell_labels(self) -> tuple[str, ...]:
        """One label per cell, grid order: `"L3"`, `"L3 end-2"`, `"L3H1"`, `"L3H1 p5"`."""
        pos_labels = self.position_labels or tuple(str(j) for j in range(self.n_aligned))
        pos = pos_labels if self.by_position else ("",)
        heads = self.heads if self.heads is not None else (None,)
        labels = []
        for layer in self.layers:
            for p in pos:
                for h in heads:
                    name = f"L{layer}" + (f"H{h}" if h is not None else "")
                    labels.append(f"{name} {p}".strip())
        return tuple(labels)


def make_grid(
    cfg: HookedTransformerConfig,
    site: str,
    n_aligned: int,
    *,
    by_position: bool | None = None,
    layers: Sequence[int] | None = None,
    heads: Sequence[int] | None = None,
    position_labels: Sequence[str] = (),
) -> Grid:
    """A `Grid` of a site over the aligned positions.

    `by_position=None` means per position for residual sites and over all aligned positions
    at once for components and heads.

    Args:
        cfg: the model's configuration (its layers and heads bound the grid).
        site: the site name (`reward_lens_tl.patching.grids`), or an alias of `z`.
        n_aligned: the number of aligned positions.
        by_position: one cell per aligned position, or all of them at once (default: per
            position for residual sites only).
        layers: the layers (negative ones count from the end; default: all).
        heads: the heads of a head site (default: all; `k`/`v` have the key-value heads
            of a grouped-query model).
        position_labels: one label per aligned position (default: their indices).

    Returns:
        The grid.

    Raises:
        PatchingError: if the site is unknown, `heads` is given for a site without heads, or
            there are no aligned positions.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching import make_grid
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))  # 3 layers, GQA 4/2
        >>> make_grid(model.cfg, "k", n_aligned=5).shape   # key heads, all positions at once
        (3, 2)
        >>> grid = make_grid(model.cfg, "resid_pre", 2, layers=[0, -1], position_labels=("a", "b"))
        >>> grid.shape, grid.cell_labels()
        ((2, 2), ('L0 a', 'L0 b', 'L2 a', 'L2 b'))
    """
    site = canonical_site(site)
    n_layers = cfg.n_layers
    n_heads = site_heads(cfg, site) if site in HEAD_SITES else 0
    layers = (
        tuple(range(n_layers))
        if layers is None
        else check_indices(layers, n_layers, "layer", negative=True)
    )
    if by_position is None:
        by_position = site in RESID_SITES
    if site in HEAD_SITES:
        heads = (
            tuple(range(n_heads))
            if heads is None
            else check_indices(heads, n_heads, f"{site} head")
        )
    elif heads is not None:
        raise PatchingError(f"heads= only applies to head sites {sorted(HEAD_SITES)}")
    if n_aligned < 1:
        raise PatchingError("no aligned positions to patch")
    return Grid(site, layers, bool(by_position), heads, n_aligned, tuple(position_labels))
