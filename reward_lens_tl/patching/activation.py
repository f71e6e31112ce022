"""Activation patching, batched: every patched variant of a chunk in one forward pass.

TransformerLens's `patching` module runs one full forward per cell. Here the cells of one
layer are stacked along the batch dimension and run together, and three things that cannot
change the reward are skipped, exactly (values agree with `transformer_lens.patching` to
float32 rounding, ~1e-7):

1. **Layers below the patch.** The target run's cached residual enters at the patched block
   (`start_at_layer`). `resid_pre` at layer `l` is written directly into that input,
   `resid_post` into the input of block `l + 1`; every other site is patched by a hook
   inside block `l`.
2. **Positions before the patch** (`reuse_prefix=True`). Causal attention means a patch at
   position `p` changes nothing at positions `< p`, so a chunk whose earliest patched
   position is `p0` only computes positions `p0 ..` and attends to the target run's cached
   keys and values for `0 .. p0 - 1` (TransformerLens's frozen key-value cache).
3. **Everything the reward head does not read.** Runs are cut after the reward-reading token,
   and the last block computes only that token's query, attention and MLP (its keys and
   values for the other positions are computed directly).

2 and 3 are switched off when `fwd_hooks` are given (a user hook may index absolute
positions) and for gated (ArmoRM-style) heads, whose gate reads a prompt position.

Memory: a chunk of `chunk_size` variants over `T` positions holds, per block, about
`chunk_size · T · (14·d_model + 4·d_mlp + 3·n_heads·T)` floats at its peak (TL keeps the
residual, normalised input, q/k/v and their rotated copies, z, the outputs, the MLP's hidden
activations, and the attention scores and pattern alive together), e.g. 16 variants × 128
tokens of a d_model=512, d_mlp=1376, 8-head model ≈ 0.13 GB in float32 (measured: 0.15 GB
of resident-set growth for the whole sweep); `chunk_memory_bytes` computes it.

The pipeline: `reward_lens_tl.patching.plan` resolves the request into plans (data only),
`reward_lens_tl.patching.runner` runs them on the model, and the result is a `PatchResult`.
With prefix reuse a chunk's cells should start at nearby positions (positions between a
chunk's first patch and a cell's own are recomputed for nothing), which is why the default
chunk is small (16 was fastest on CPU; on a GPU larger chunks pay off).

Writes that change nothing are dropped: where the source activation equals the target's
(e.g. positions before the first differing token of a clean/corrupted pair), a cell is the
target's reward exactly and costs no forward pass, and chunks start at the first real change.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.testing import tiny_reward_model, random_batch
    >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    >>> ids, _ = random_batch(2, [9, 7], low=6)   # left padded: row 1 starts with 2 pads
    >>> result = activation_patching(model, ids[0], ids[1], site="resid_pre")
    >>> result.axes, result.shape
    (('layer', 'pos'), (2, 7))
    >>> bool((result.values[0] - result.values[0, -1]).abs().max() < 2)   # a fraction per cell
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Unpack, overload

from ..signatures import checked_options, pasted_docs
from .alignment import PatchInput
from .grids import Site
from .patch_results import MultiSitePatchResult, PatchResult
from .plan import REQUEST_DOC, PatchOptions, make_plans
from .runner import PatchRunner

if TYPE_CHECKING:
    from ..model import HookedRewardModel

__all__ = ["activation_patching"]


@overload
def activation_patching(
    model: HookedRewardModel,
    clean: PatchInput,
    corrupted: PatchInput | None = ...,
    *,
    site: Site = ...,
    chunk_size: int | None = ...,
    reuse_prefix: bool = ...,
    **options: Unpack[PatchOptions],
) -> PatchResult: ...


@overload
def activation_patching(
    model: HookedRewardModel,
    clean: PatchInput,
    corrupted: PatchInput | None = ...,
    *,
    site: tuple[Site, ...] | list[Site],
    chunk_size: int | None = ...,
    reuse_prefix: bool = ...,
    **options: Unpack[PatchOptions],
) -> MultiSitePatchResult: ...


@checked_options(PatchOptions)
@pasted_docs(request=REQUEST_DOC)
def activation_patching(
    model: HookedRewardModel,
    clean: PatchInput,
    corrupted: PatchInput | None = None,
    *,
    site: Site | Sequence[Site] = "resid_pre",
    chunk_size: int | None = None,
    reuse_prefix: bool = True,
    **options: Unpack[PatchOptions],
) -> PatchResult | MultiSitePatchResult:
    """Patch every cell of a grid and score each patched run.

    One site gives a `PatchResult`; a sequence of sites, e.g.
    `site=("attn_out", "mlp_out")`, is swept over one shared clean and one shared corrupted
    run and gives a `MultiSitePatchResult` (one `PatchResult` per site;
    `by_position`/`heads` apply to the sites that have that axis). The request is `model`
    to `mean_over` below (the keys after `site` are `PatchOptions`), plus two settings of
    the sweep itself (`chunk_size`, `reuse_prefix`).

    Args:
        {request}
        chunk_size: the variants per forward pass (memory: `chunk_memory_bytes`); the
            default (`None`) takes up to 16 and at most `CHUNK_TOKENS` (2048)
            variant-positions on the CPU, i.e. fewer variants for longer runs, and up to 64 on
            CUDA within a quarter of the free GPU memory (`auto_chunk_limits`).
        reuse_prefix: start each chunk at its earliest patched position, attending to the
            target run's cached keys and values before it (exact; see the module docstring).

    Returns:
        A `PatchResult` for one site, a `MultiSitePatchResult` for a sequence of sites.

    Raises:
        PatchingError: if the request is invalid (an unknown site or mode, a missing
            corrupted run or `reference`, ...).
        AlignmentError: if the runs cannot be aligned as asked.
        UnknownKeywordError: for a keyword the function does not take (a `TypeError`).

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching import activation_patching
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> clean = model.encode("explain how to bake bread", "the oven and the flour")
        >>> corrupted = model.encode("explain how to bake bread", "the oven and the bomb")
        >>> result = activation_patching(model, clean, corrupted, site="resid_pre", layers=[0])
        >>> result.shape   # layer 0 × 16 aligned positions
        (1, 16)
        >>> [(label, round(v, 3)) for label, v in result.top_k(2)]   # only the swapped word
        [('L0 end-2', 1.0), ('L0 end-15', 0.0)]
    """
    plans = make_plans(model, clean, corrupted, site, options)
    results = PatchRunner(model, options).sweep(plans, chunk_size, reuse_prefix)
    if isinstance(site, str):
        return results[0]
    return MultiSitePatchResult({r.site: r for r in results})
