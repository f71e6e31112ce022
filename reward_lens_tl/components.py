"""Components of a direct attribution, with our labels and TransformerLens's.

A `Component` is what a contribution belongs to: the token embedding, the positional
embedding, one attention head, a whole attention layer, an MLP layer, or the summed output
biases. Result objects carry these next to their string labels, so no code has to parse a
label back into a layer and head. `label` is this package's compact name; `tl_label` is
the name TransformerLens's `ActivationCache.decompose_resid` / `stack_head_results` use,
so a TL user's frames line up:

| component | `label` | `tl_label` |
| --- | --- | --- |
| embedding | `embed` | `embed` |
| positional | `pos_embed` | `pos_embed` |
| head | `L3H2` | `L3H2` |
| attention | `attn3` | `3_attn_out` |
| MLP | `mlp3` | `3_mlp_out` |
| biases | `bias` | `bias` |

Examples:
    >>> Component("head", 3, 2).label, Component("mlp", 3).tl_label
    ('L3H2', '3_mlp_out')
    >>> Component("head", 1, 0).hook_name
    'blocks.1.attn.hook_z'
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import InvalidArgumentError

__all__ = [
    "Component",
]

KINDS = ("embed", "pos_embed", "head", "attn", "mlp", "bias", "attn_bias", "mlp_bias")


@dataclass(frozen=True)
class Component:
    """One attribution component: `kind` (see `KINDS`), `layer` and `head`.

    Args:
        kind: One of `KINDS`.
        layer: The layer (`None` for embeddings and biases).
        head: The head (attention heads only).

    Examples:
        >>> Component("head", 1, 3).label, Component("mlp", 0).label, Component("embed").label
        ('L1H3', 'mlp0', 'embed')
    """

    kind: str
    layer: int | None = None
    head: int | None = None

    def __post_init__(self) -> None:
        """Refuse an unknown kind."""
        if self.kind not in KINDS:
            raise InvalidArgumentError(f"unknown component kind {self.kind!r}; one of {KINDS}")

    @property
    def label(self) -> str:
        """This package's compact label for the component."""
        return {
            "embed": "embed",
            "pos_embed": "pos_embed",
            "head": f"L{self.layer}H{self.head}",
            "attn": f"attn{self.layer}",
            "mlp": f"mlp{self.layer}",
            "bias": "bias",
            "attn_bias": f"attn{self.layer}.bias",
            "mlp_bias": f"mlp{self.layer}.bias",
        }[self.kind]

    @property
    def tl_label(self) -> str:
        """TransformerLens's label for the same component."""
        return {
            "attn": f"{self.layer}_attn_out",
            "mlp": f"{self.layer}_mlp_out",
            "attn_bias": f"{self.layer}_attn_bias",
            "mlp_bias": f"{self.layer}_mlp_bias",
        }.get(self.kind, self.label)

    @property
    def hook_name(self) -> str | None:
        """The hook whose activation this component is read from (`None` for biases)."""
        return {
            "embed": "hook_embed",
            "pos_embed": "hook_pos_embed",
            "head": f"blocks.{self.layer}.attn.hook_z",
            "attn": f"blocks.{self.layer}.hook_attn_out",
            "mlp": f"blocks.{self.layer}.hook_mlp_out",
        }.get(self.kind)

    def __str__(self) -> str:
        """The component's label."""
        return self.label
