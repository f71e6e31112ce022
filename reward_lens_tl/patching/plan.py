"""The plan of a sweep (data only): what is patched and where the patched values come from.

Modes (`target` is the run being patched, `source` where the values come from):

| mode      | target    | values                 | default metric (`r` = patched reward)         |
| --------- | --------- | ---------------------- | --------------------------------------------- |
| denoising | corrupted | clean activations      | `(r - r_corrupted) / (r_clean - r_corrupted)` |
| noising   | clean     | corrupted activations  | `(r - r_clean) / (r_corrupted - r_clean)`     |
| mean      | clean     | means over `reference` | `r - r_clean`                                 |
| zero      | clean     | zeros                  | `r - r_clean`                                 |

Signs: in both patching modes the default metric is the fraction of the way from the target's
reward to the source's reward that the patch alone moves the reward: 0 = no effect, 1 = the
patched run scores like the source. So denoising gives the *fraction of the margin restored*
(sufficiency) and noising the *fraction destroyed* (necessity); both are positive for a cell
that carries the difference. Ablations report the reward change, negative when the ablated
activation was raising the reward.

Mean ablation (`mean_over`): `"token"` averages the activation over every real token of
every `reference` sequence (position-agnostic: one vector per layer, also at position 0 where
many models keep a large attention-sink activation); `"position"` averages per absolute
position over the reference sequences long enough to have it, and needs them to cover every
patched position.

The request is given as keywords, `PatchOptions` (declared once, shared by every entry
point); `make_plans` resolves it against a model's config and tokens into `PatchPlan`s (runs,
alignment, grid). Nothing here runs the model: `reward_lens_tl.patching.runner` does, and
`reward_lens_tl.patching.metrics` scores the patched runs.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.zoo import zoo_path
    >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    >>> clean = model.encode("explain how to bake bread", "the oven and the flour")
    >>> corrupted = model.encode("explain how to bake bread", "the oven and the bomb")
    >>> [plan] = make_plans(model, clean, corrupted, "z", {"alignment": "exact", "layers": [0]})
    >>> plan.mode, plan.grid.shape, len(plan.alignment)
    ('denoising', (1, 4), 16)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from torch import Tensor

from ..errors import PatchingError
from ..inputs import EncodedConversation
from ..readout import Objective
from .alignment import (
    Alignment,
    AlignmentKind,
    PatchInput,
    Run,
    align,
    as_run,
    identity_alignment,
    position_tokens,
    restrict_alignment,
)
from .grids import HEAD_SITES, Grid, Site, canonical_site, hook_name, make_grid, site_heads
from .metrics import Metric

if TYPE_CHECKING:
    from ..model import HookedRewardModel

__all__ = [
    "DEFAULT_OPTIONS",
    "MODES",
    "REQUEST_DOC",
    "FwdHooks",
    "MeanOver",
    "Mode",
    "PatchOptions",
    "PatchPlan",
    "Reference",
    "RunOptions",
    "make_plan",
    "make_plans",
    "options_doc",
    "resolve_options",
]

Mode = Literal["denoising", "noising", "mean", "zero"]
MODES: tuple[str, ...] = ("denoising", "noising", "mean", "zero")
MeanOver = Literal["token", "position"]
#: Sequences a mean ablation averages over: `[n, pos]` ids, `(ids, mask)` or a list of
#: id sequences / conversations.
Reference = Tensor | tuple[Tensor, Tensor] | Sequence[Sequence[int] | EncodedConversation]
#: TransformerLens forward hooks: `(hook name or name filter, hook function)` pairs.
FwdHooks = Sequence[tuple[str | Callable[[str], bool], Callable[..., Any]]]


class RunOptions(TypedDict, total=False):
    """How the two runs pair up and what runs beside them: the options every entry point takes.

    `compare_methods` takes these; the sweeps take all of `PatchOptions`. Each key is
    documented in `OPTION_DOCS` (pasted into the entry points' `Args:`).

    Attributes:
        alignment: how clean and corrupted positions pair up.
        fwd_hooks: your own interventions, active in every forward pass.

    Examples:
        >>> options: RunOptions = {"alignment": "exact"}
        >>> sorted(RunOptions.__annotations__)
        ['alignment', 'fwd_hooks']
    """

    alignment: AlignmentKind
    fwd_hooks: FwdHooks


class PatchOptions(RunOptions, total=False):
    """The request of a sweep, as keywords: `**options: Unpack[PatchOptions]`.

    `activation_patching`, `attribution_patching`, `atp_star`, `atp_agreement` and
    `atp_recall` take these keywords (every one optional: `DEFAULT_OPTIONS`); each is
    documented in `OPTION_DOCS`, pasted into the entry points' `Args:`.

    Attributes:
        alignment: how clean and corrupted positions pair up.
        fwd_hooks: your own interventions, active in every forward pass.
        mode: `denoising`, `noising`, `mean` or `zero`.
        prefix_length: the shared prefix for `alignment="prefix"`.
        positions: keep only these positions of the clean run.
        by_position: one cell per aligned position, or all at once.
        layers: the layers of the grid.
        heads: the heads of the grid.
        metric: a callable on the patched rewards `[variant]`.
        objective: a head column of a multi-objective model.
        reference: what `mode="mean"` averages over.
        mean_over: `"token"` or `"position"`.

    Examples:
        >>> options: PatchOptions = {"mode": "noising", "layers": [0]}
        >>> resolve_options(options)["mode"], resolve_options(options)["alignment"]
        ('noising', 'end')
    """

    mode: Mode
    prefix_length: int | None
    positions: Sequence[int] | None
    by_position: bool | None
    layers: Sequence[int] | None
    heads: Sequence[int] | None
    metric: Metric | None
    objective: Objective
    reference: Reference | None
    mean_over: MeanOver


#: The value of every option not given.
DEFAULT_OPTIONS: PatchOptions = {
    "alignment": "end",
    "fwd_hooks": (),
    "mode": "denoising",
    "prefix_length": None,
    "positions": None,
    "by_position": None,
    "layers": None,
    "heads": None,
    "metric": None,
    "objective": None,
    "reference": None,
    "mean_over": "token",
}

#: One Google-style `Args:` entry per request parameter (continuation lines indented).
OPTION_DOCS: dict[str, str] = {
    "model": "the `HookedRewardModel`.",
    "clean": """the clean run: token ids (1-D, or `[1, pos]`; a padded row, left or right, is
    stripped of its padding), a list of ids or an `EncodedConversation`.""",
    "corrupted": """the corrupted run, in the same forms as `clean` (`None` for the ablations
    `mode="mean"` and `"zero"`, which patch the clean run).""",
    "site": """`resid_pre`, `resid_mid`, `resid_post`, `attn_out`, `mlp_out`, `z` (alias
    `heads`), `q`, `k` or `v` (`reward_lens_tl.patching.grids`).""",
    "alignment": """how clean and corrupted positions pair up, `end`, `prefix` or `exact`
    (`reward_lens_tl.patching.alignment`).""",
    "fwd_hooks": """your own interventions, `[(hook name or filter, fn), ...]`, active in every
    forward pass and removed afterwards, even when something raises.""",
    "mode": """`denoising`, `noising`, `mean` (needs `reference`) or `zero` (default metrics and
    their signs: `reward_lens_tl.patching.plan`).""",
    "prefix_length": """the shared prefix for `alignment="prefix"` (default: the conversations'
    `response_start`).""",
    "positions": """keep only these positions of the *clean* run (e.g. a planted span; with
    `by_position=False` they are patched together as one cell).""",
    "by_position": """one cell per aligned position (default for residual sites) or all aligned
    positions at once (default for components and heads).""",
    "layers": "the layers of the grid (default: all).",
    "heads": "the heads of the grid (default: all).",
    "metric": """a callable on the patched rewards `[variant]` (default: the fraction of the
    margin moved for `denoising`/`noising`, the reward change for ablations).""",
    "objective": "a head column (index or name) of a multi-objective model.",
    "reference": """what `mode="mean"` averages over (`[n, pos]` ids, `(ids, mask)` or a list of
    sequences).""",
    "mean_over": """`"token"` (one mean over every real token) or `"position"` (per absolute
    position).""",
}


def options_doc(*names: str) -> str:
    """The `Args:` entries of `names`, from `OPTION_DOCS`, for `pasted_docs`.

    Args:
        *names: the parameters, in the order documented.

    Returns:
        One entry per name, `name: text`, continuation lines indented by four spaces.

    Examples:
        >>> print(options_doc("layers", "heads"))
        layers: the layers of the grid (default: all).
        heads: the heads of the grid (default: all).
    """
    return "\n".join(f"{name}: {OPTION_DOCS[name]}" for name in names)


#: The request's parameters as `Args:` entries, pasted at `{request}` by `pasted_docs` in
#: `activation_patching`, `attribution_patching`, `atp_star` and `atp_agreement`.
REQUEST_DOC = options_doc("model", "clean", "corrupted", "site", *PatchOptions.__annotations__)


def resolve_options(options: PatchOptions) -> PatchOptions:
    """Every option, the given ones over `DEFAULT_OPTIONS`.

    Args:
        options: the options given.

    Returns:
        A new dict holding every key of `PatchOptions`.

    Examples:
        >>> resolve_options({"layers": [1]})["layers"], resolve_options({})["mean_over"]
        ([1], 'token')
    """
    resolved = DEFAULT_OPTIONS.copy()
    resolved.update(options)
    return resolved


@dataclass(frozen=True)
class PatchPlan:
    """A resolved request of one site: runs, aligned positions and grid.

    Built by `make_plans` from a model's config and tokens; no forward pass.

    Attributes:
        mode: the patching mode.
        site: the canonical site.
        target: the run being patched.
        source: the run the patched values come from (`None` for ablations).
        alignment: the aligned positions of `target` and `source`.
        grid: the cells of the sweep.
        position_tokens: per aligned position, its token (`"a→b"` where the runs differ).
        hook_names: per grid layer, the hook name of the site.
        value_shape: the shape of the site's activation at one position (`[d_model]` or
            `[heads, d_head]`).

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> clean = model.encode("explain how to bake bread", "the oven and the flour")
        >>> corrupted = model.encode("explain how to bake bread", "the oven and the bomb")
        >>> plan = make_plan(model, clean, corrupted, "mlp_out", {"alignment": "exact"})
        >>> plan.hook(1), plan.is_ablation(), plan.position_tokens[-3]
        ('blocks.1.hook_mlp_out', False, 'bomb→flour')
    """

    mode: str
    site: str
    target: Run
    source: Run | None
    alignment: Alignment
    grid: Grid
    position_tokens: tuple[str, ...] = ()
    hook_names: tuple[str, ...] = ()
    value_shape: tuple[int, ...] = ()

    def hook(self, layer: int) -> str:
        """The hook name of the plan's site at `layer`.

        Args:
            layer: the layer.

        Returns:
            The TransformerLens hook name.
        """
        return hook_name(self.site, layer)

    def is_ablation(self) -> bool:
        """Whether the mode is an ablation (`mean` or `zero`).

        Returns:
            `True` for `mean` and `zero`.
        """
        return self.mode in ("mean", "zero")

    def source_run(self) -> Run:
        """The run the patched values come from.

        Returns:
            The source run.

        Raises:
            PatchingError: for an ablation (it has none).
        """
        if self.source is None:
            raise PatchingError(f"mode={self.mode!r} has no source run")
        return self.source


def make_plan(
    model: HookedRewardModel,
    clean: PatchInput,
    corrupted: PatchInput | None,
    site: Site,
    options: PatchOptions,
) -> PatchPlan:
    """The plan of one site (see `make_plans`).

    Args:
        model: the `HookedRewardModel` (its config and tokenizer; nothing is run).
        clean: the clean run.
        corrupted: the corrupted run (`None` for ablations).
        site: one site.
        options: the request's options.

    Returns:
        The plan.

    Raises:
        PatchingError: if `site` is not one site name, or the request is invalid.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.testing import tiny_reward_model, random_batch
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> ids, _ = random_batch(1, [6], low=6)
        >>> make_plan(model, ids[0], None, "mlp_out", {"mode": "zero"}).grid.shape
        (2,)
    """
    if not isinstance(site, str):
        raise PatchingError(
            f"one site per sweep here, not {site!r} (activation_patching sweeps several sites "
            "over shared runs; attribution_patching takes one)"
        )
    return make_plans(model, clean, corrupted, site, options)[0]


def make_plans(
    model: HookedRewardModel,
    clean: PatchInput,
    corrupted: PatchInput | None,
    site: Site | Sequence[Site],
    options: PatchOptions,
) -> list[PatchPlan]:
    """Resolve a request against a model: runs and alignment (shared), one grid per site.

    `heads` applies to the sites that have heads when several sites are swept.

    Args:
        model: the `HookedRewardModel` (its config and tokenizer; nothing is run).
        clean: the clean run.
        corrupted: the corrupted run (`None` for ablations).
        site: a site, or a sequence of distinct sites.
        options: the request's options.

    Returns:
        One plan per site.

    Raises:
        PatchingError: if the request is invalid (an unknown site or mode, a missing or
            extra corrupted run, positions outside the alignment, ...).
        AlignmentError: if the runs cannot be aligned as asked.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.testing import tiny_reward_model, random_batch
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> ids, _ = random_batch(2, [6, 6], low=6)
        >>> plans = make_plans(model, ids[0], ids[1], ("z", "mlp_out"), {"heads": [1]})
        >>> [(p.site, p.grid.shape) for p in plans]
        [('z', (2, 1)), ('mlp_out', (2,))]
    """
    sites = [site] if isinstance(site, str) else list(site)
    if not sites or not all(isinstance(s, str) for s in sites):
        raise PatchingError(f"site must be a site name or a sequence of them, not {site!r}")
    if len({canonical_site(s) for s in sites}) != len(sites):
        raise PatchingError(f"site={site!r} names a site twice")
    o = resolve_options(options)
    mode = o["mode"]
    if mode not in MODES:
        raise PatchingError(f"unknown mode {mode!r}; choose one of {MODES}")
    cfg = model.cfg
    if cfg.positional_embedding_type == "shortformer":
        raise PatchingError("shortformer positional embeddings are not supported by patching")
    target, source, aligned = aligned_runs(model, clean, corrupted, o)
    labels = position_tokens(model, target, source, aligned)
    plans = []
    for s in map(canonical_site, sites):
        heads = o["heads"] if s in HEAD_SITES or len(sites) == 1 else None
        shape = (site_heads(cfg, s), cfg.d_head) if s in HEAD_SITES else (cfg.d_model,)
        grid = make_grid(
            cfg,
            s,
            len(aligned),
            by_position=o["by_position"],
            layers=o["layers"],
            heads=heads,
            position_labels=aligned.labels(),
        )
        hooks = tuple(hook_name(grid.site, layer) for layer in grid.layers)
        plans.append(
            PatchPlan(mode, grid.site, target, source, aligned, grid, labels, hooks, shape)
        )
    return plans


def aligned_runs(
    model: HookedRewardModel,
    clean: PatchInput,
    corrupted: PatchInput | None,
    options: PatchOptions,
) -> tuple[Run, Run | None, Alignment]:
    """The target run, the source run (`None` for ablations) and their aligned positions.

    Args:
        model: the `HookedRewardModel` (its tokens: padding and reading positions).
        clean: the clean run.
        corrupted: the corrupted run.
        options: the resolved options (`mode`, `alignment`, `prefix_length`, `positions`).

    Returns:
        `(target, source, alignment)`.

    Raises:
        PatchingError: if the corrupted run is missing or extra for the mode, or the positions
            are not aligned ones.
    """
    mode = options["mode"]
    clean_run = as_run(model, clean)
    if mode in ("mean", "zero"):
        if corrupted is not None:
            raise PatchingError(
                f"mode={mode!r} ablates the clean run and takes no corrupted input; for a "
                "clean/corrupted comparison use mode='denoising' or 'noising'"
            )
        target, source = clean_run, None
        aligned = identity_alignment(target)
    else:
        if corrupted is None:
            raise PatchingError(f"mode={mode!r} needs a corrupted input")
        corrupted_run = as_run(model, corrupted)
        target, source = (
            (corrupted_run, clean_run) if mode == "denoising" else (clean_run, corrupted_run)
        )
        aligned = align(target, source, options["alignment"], options["prefix_length"])
    positions = options["positions"]
    if positions is not None:
        clean_side = "target" if source is None or mode == "noising" else "source"
        aligned = restrict_alignment(aligned, positions, clean_side)
    return target, source, aligned
