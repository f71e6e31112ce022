"""What a sweep patches, where the patched values come from, and how runs are scored.

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

A metric is any callable from the patched rewards `[variant]` to `[variant]` values (it is
called once per chunk of patched runs; for attribution patching it must be differentiable).

Examples:
    >>> import torch
    >>> restored = margin_fraction(target_reward=-1.0, source_reward=3.0)   # denoising
    >>> restored(torch.tensor([-1.0, 1.0, 3.0])).tolist()
    [0.0, 0.5, 1.0]
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import torch
from jaxtyping import Float
from torch import Tensor

from ..inputs import EncodedConversation, pad_batch
from ..padding import reading_position_known, real_columns
from ..readout import Objective, objective_index
from .alignment import (
    Alignment,
    AlignmentKind,
    PatchInput,
    Run,
    align,
    as_run,
    identity_alignment,
)
from .errors import PatchingError
from .grids import HEAD_SITES, Grid, Site, hook_name, make_grid

if TYPE_CHECKING:
    from ..model import HookedRewardModel

Mode = Literal["denoising", "noising", "mean", "zero"]
MODES: tuple[str, ...] = ("denoising", "noising", "mean", "zero")
MeanOver = Literal["token", "position"]
Metric = Callable[[Float[Tensor, " variant"]], Float[Tensor, " variant"]]
#: Sequences a mean ablation averages over: `[n, pos]` ids, `(ids, mask)` or a list of
#: id sequences / conversations.
Reference = Tensor | tuple[Tensor, Tensor] | Sequence[Sequence[int] | EncodedConversation]
#: TransformerLens forward hooks: `(hook name or name filter, hook function)` pairs.
FwdHooks = Sequence[tuple[str | Callable[[str], bool], Callable[..., Any]]]

#: The request's parameters as Google-style `Args:` entries, one per parameter, shared by the
#: patching entry points: `pasted_docs` pastes them at `{request}` in the `Args:` section of
#: `activation_patching`, `attribution_patching`, `atp_star` and `atp_agreement`.
REQUEST_DOC = """\
model: the `HookedRewardModel`.
clean: the clean run: token ids (1-D, or `[1, pos]`; a padded row, left or right, is
    stripped of its padding), a list of ids or an `EncodedConversation`. Or a whole
    `PatchRequest`, and then no other request parameter (they must stay at their defaults).
corrupted: the corrupted run, in the same forms as `clean` (`None` for the ablations
    `mode="mean"` and `"zero"`, which patch the clean run).
site: `resid_pre`, `resid_mid`, `resid_post`, `attn_out`, `mlp_out`, `z` (alias
    `heads`), `q`, `k` or `v` (`reward_lens_tl.patching.grids`).
mode: `denoising`, `noising`, `mean` (needs `reference`) or `zero` (default metrics and
    their signs: `reward_lens_tl.patching.plan`).
alignment: how clean and corrupted positions pair up, `end`, `prefix` or `exact`
    (`reward_lens_tl.patching.alignment`).
prefix_length: the shared prefix for `alignment="prefix"` (default: the conversations'
    `response_start`).
positions: keep only these positions of the *clean* run (e.g. a planted span; with
    `by_position=False` they are patched together as one cell).
by_position: one cell per aligned position (default for residual sites) or all aligned
    positions at once (default for components and heads).
layers: the layers of the grid (default: all).
heads: the heads of the grid (default: all).
metric: a callable on the patched rewards `[variant]` (default: the fraction of the
    margin moved for `denoising`/`noising`, the reward change for ablations).
objective: a head column (index or name) of a multi-objective model.
reference: what `mode="mean"` averages over (`[n, pos]` ids, `(ids, mask)` or a list of
    sequences).
mean_over: `"token"` (one mean over every real token) or `"position"` (per absolute
    position).
fwd_hooks: your own interventions, `[(hook name or filter, fn), ...]`, active in every
    forward pass and removed afterwards, even when something raises."""


def margin_fraction(target_reward: float, source_reward: float) -> Metric:
    """The metric `(r - target) / (source - target)`, the default for denoising and noising.

    0 = unchanged, 1 = moved all the way to the source run's reward.

    Args:
        target_reward: the reward of the run being patched.
        source_reward: the reward of the run the patched values come from.

    Returns:
        The metric, a function of the patched rewards `[variant]`.

    Raises:
        PatchingError: if the two rewards are equal (the fraction is undefined).

    Examples:
        >>> import torch
        >>> from reward_lens_tl.patching import margin_fraction
        >>> destroyed = margin_fraction(target_reward=2.0, source_reward=-2.0)   # noising
        >>> destroyed(torch.tensor([1.0, 0.0, -2.0, -3.0])).tolist()   # 1.25: overshoots
        [0.25, 0.5, 1.0, 1.25]
    """
    gap = source_reward - target_reward
    if abs(gap) < 1e-6:
        raise PatchingError(
            f"the clean and corrupted rewards are equal ({target_reward:.6g}), so the fraction "
            "of the margin restored is undefined; pass metric=reward_change(...) or your own"
        )
    return lambda r: (r - target_reward) / gap


def reward_change(baseline: float) -> Metric:
    """`r - baseline` (the default for mean and zero ablation, baseline = clean reward).

    Args:
        baseline: the reward subtracted, the clean run's reward for an ablation.

    Returns:
        The metric, a function of the patched rewards `[variant]`: negative where the patch
        lowered the reward.

    Examples:
        >>> import torch
        >>> from reward_lens_tl.patching import reward_change
        >>> change = reward_change(baseline=1.5)
        >>> change(torch.tensor([1.5, 0.5, 2.0])).tolist()
        [0.0, -1.0, 0.5]
    """
    return lambda r: r - baseline


@dataclass(frozen=True)
class PatchPlan:
    """A resolved request: runs, aligned positions and grid."""

    mode: str
    site: str
    target: Run
    source: Run | None
    alignment: Alignment
    grid: Grid
    objective: Objective = None

    def hook(self, layer: int) -> str:
        """The hook name of the plan's site at `layer`."""
        return hook_name(self.site, layer)

    def is_ablation(self) -> bool:
        """Whether the mode is an ablation (`mean` or `zero`)."""
        return self.mode in ("mean", "zero")

    def source_run(self) -> Run:
        """The run the patched values come from (ablations have none)."""
        if self.source is None:
            raise PatchingError(f"mode={self.mode!r} has no source run")
        return self.source

    def position_tokens(self, model: HookedRewardModel) -> tuple[str, ...]:
        """The token at each aligned position, for figures.

        `"a"` where both runs read `a`, `"a→b"` where the patched run reads `a` and the run
        patched in reads `b`; empty when the model has no tokenizer.

        Args:
            model: The model whose tokenizer decodes the ids.

        Returns:
            One label per aligned position.
        """
        tokenizer = getattr(model, "tokenizer", None)
        if tokenizer is None:
            return ()

        def text(ids: Tensor, positions: Tensor) -> list[str]:
            return [tokenizer.decode([int(ids[int(p)])]) for p in positions]

        target = text(self.target.ids, self.alignment.target)
        if self.source is None:
            return tuple(target)
        source = text(self.source.ids, self.alignment.source)
        return tuple(a if a == b else f"{a}→{b}" for a, b in zip(target, source, strict=True))


@dataclass(frozen=True)
class PatchRequest:
    """What to patch: the runs, the site and grid, the mode, the metric.

    One object describes a sweep for `activation_patching` and its first-order estimate
    `attribution_patching` alike (their keyword forms build one of these, with the same
    fields as keyword arguments).

    Attributes:
        clean: the clean run: token ids (1-D, or `[1, pos]`; a padded row, left or right, is
            stripped of its padding), a list of ids or an `EncodedConversation`.
        corrupted: the corrupted run, in the same forms as `clean` (`None` for the ablations
            `mode="mean"` and `"zero"`, which patch the clean run).
        site: `resid_pre`, `resid_mid`, `resid_post`, `attn_out`, `mlp_out`, `z` (alias
            `heads`), `q`, `k` or `v` (`reward_lens_tl.patching.grids`); a sequence of
            sites for `activation_patching`'s multi-site sweep.
        mode: `denoising`, `noising`, `mean` (needs `reference`) or `zero` (default metrics
            and their signs: `reward_lens_tl.patching.plan`).
        alignment: how clean and corrupted positions pair up, `end`, `prefix` or `exact`
            (`reward_lens_tl.patching.alignment`).
        prefix_length: the shared prefix for `alignment="prefix"` (default: the
            conversations' `response_start`).
        positions: keep only these positions of the *clean* run (e.g. a planted span; with
            `by_position=False` they are patched together as one cell).
        by_position: one cell per aligned position (default for residual sites) or all
            aligned positions at once (default for components and heads).
        layers: the layers of the grid (default: all).
        heads: the heads of the grid (default: all).
        metric: a callable on the patched rewards `[variant]` (default: the fraction of the
            margin moved for `denoising`/`noising`, the reward change for ablations).
        objective: a head column (index or name) of a multi-objective model.
        reference: what `mode="mean"` averages over (`[n, pos]` ids, `(ids, mask)` or a list
            of sequences).
        mean_over: `"token"` (one mean over every real token) or `"position"` (per absolute
            position).
        fwd_hooks: your own interventions, `[(hook name or filter, fn), ...]`, active in
            every forward pass and removed afterwards, even when something raises.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching import (
        ...     PatchRequest, activation_patching, attribution_patching)
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> clean = model.encode("explain how to bake bread", "the oven and the flour")
        >>> corrupted = model.encode("explain how to bake bread", "the oven and the bomb")
        >>> request = PatchRequest(clean, corrupted, site="z", alignment="exact", layers=[0])
        >>> activation_patching(model, request).shape, attribution_patching(model, request).shape
        ((1, 4), (1, 4))
        >>> request.replace(site="attn_out").site, request.site   # a changed copy
        ('attn_out', 'z')
    """

    clean: PatchInput
    corrupted: PatchInput | None = None
    site: Site | Sequence[Site] = "resid_pre"
    mode: Mode = "denoising"
    alignment: AlignmentKind = "end"
    prefix_length: int | None = None
    positions: Sequence[int] | None = None
    by_position: bool | None = None
    layers: Sequence[int] | None = None
    heads: Sequence[int] | None = None
    metric: Metric | None = None
    objective: Objective = None
    reference: Reference | None = None
    mean_over: MeanOver = "token"
    fwd_hooks: FwdHooks = ()

    def replace(self, **changes: Any) -> PatchRequest:
        """A copy with some fields changed (e.g. another `site`).

        Args:
            **changes: the fields to change and their new values.

        Returns:
            The changed copy.

        Raises:
            TypeError: if a field is unknown (`dataclasses.replace`).
        """
        return dataclasses.replace(self, **changes)

    @classmethod
    def of(cls, clean: Any, corrupted: Any = None, **fields: Any) -> PatchRequest:
        """`clean` itself when it is a request, else a request from the keyword form.

        When `clean` is a request no other field may be given.

        Args:
            clean: the clean run, or a whole `PatchRequest`.
            corrupted: the corrupted run.
            **fields: the other fields of the request.

        Returns:
            The request.

        Raises:
            PatchingError: if a keyword is unknown, or fields accompany a request.
        """
        if isinstance(clean, PatchRequest):
            if corrupted is not None or fields:
                raise PatchingError(
                    "pass either a PatchRequest or the keyword form, not both (use "
                    "request.replace(...) to change fields)"
                )
            return clean
        unknown = sorted(set(fields) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            known = [f.name for f in dataclasses.fields(cls)][2:]
            raise PatchingError(f"unknown patching argument(s) {unknown}; known: {known}")
        return cls(clean, corrupted, **fields)


def request_from(arguments: Mapping[str, Any]) -> PatchRequest:
    """The request an entry point's parameters describe.

    `clean` itself when it is a `PatchRequest` (every other field must then be at its
    default: a request and the keyword form together are a `PatchingError`), else
    `PatchRequest(clean, corrupted, **fields)`.

    Args:
        arguments: the entry point's `locals()`, holding `clean`, `corrupted` and every
            `PatchRequest` field.

    Returns:
        The request.
    """
    clean, corrupted = arguments["clean"], arguments["corrupted"]
    fields = {name: arguments[name] for name in _REQUEST_DEFAULTS if name != "corrupted"}
    if not isinstance(clean, PatchRequest):
        return PatchRequest(clean, corrupted, **fields)
    given = sorted(name for name, value in fields.items() if not _is_default(name, value))
    if corrupted is not None or given:
        raise PatchingError(
            f"pass either a PatchRequest or the keyword form, not both (also given: "
            f"{given or ['corrupted']}); use request.replace(...) to change fields"
        )
    return clean


def _is_default(name: str, value: Any) -> bool:
    default = _REQUEST_DEFAULTS[name]
    if value is default:
        return True
    plain = (str, bool, int, tuple)
    return type(value) is type(default) and isinstance(value, plain) and value == default


_REQUEST_DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in dataclasses.fields(PatchRequest) if f.name not in ("clean",)
}


def make_plan(model: HookedRewardModel, request: PatchRequest) -> PatchPlan:
    """Resolve a request against a model: runs, alignment and grid (checked)."""
    r = request
    clean, corrupted, mode = r.clean, r.corrupted, r.mode
    alignment, prefix_length, positions = r.alignment, r.prefix_length, r.positions
    site, by_position, layers, heads, objective = (
        r.site,
        r.by_position,
        r.layers,
        r.heads,
        r.objective,
    )
    if mode not in MODES:
        raise PatchingError(f"unknown mode {mode!r}; choose one of {MODES}")
    if not isinstance(site, str):
        raise PatchingError(
            f"one site per sweep here, not {site!r} (activation_patching sweeps several sites "
            "over shared runs; attribution_patching takes one)"
        )
    if model.cfg.positional_embedding_type == "shortformer":
        raise PatchingError("shortformer positional embeddings are not supported by patching")
    objective_index(model, objective)  # validates (multi-objective heads need objective=)
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
        aligned = align(target, source, alignment, prefix_length)
    if positions is not None:
        aligned = restrict_alignment(
            aligned,
            positions,
            clean_side="target" if source is None or mode == "noising" else "source",
        )
    grid = make_grid(
        model,
        site,
        len(aligned),
        by_position=by_position,
        layers=layers,
        heads=heads,
        position_labels=aligned.labels(),
    )
    return PatchPlan(mode, grid.site, target, source, aligned, grid, objective)


def restrict_alignment(aligned: Alignment, positions: Sequence[int], clean_side: str) -> Alignment:
    """Keep the aligned pairs whose position in the clean run is in `positions`.

    Their labels stay those of the full alignment, e.g. `end-4`.
    """
    if isinstance(positions, (int, str, Tensor)) or not isinstance(positions, Sequence):
        if not (isinstance(positions, Tensor) and positions.ndim == 1):
            raise PatchingError(
                f"positions must be a list of clean-run positions, not {positions!r}"
            )
        positions = positions.tolist()
    if not all(isinstance(p, numbers.Integral) and not isinstance(p, bool) for p in positions):
        raise PatchingError(f"positions must be integers; got {list(positions)!r}")
    clean = getattr(aligned, clean_side).tolist()
    wanted = sorted({int(p) for p in positions})
    missing = [p for p in wanted if p not in clean]
    if not wanted or missing:
        raise PatchingError(
            f"positions={list(positions)!r}: {missing or 'none given'} are not aligned positions "
            f"of the clean run (aligned: {clean[0]}..{clean[-1]}). Pass clean-run positions "
            "covered by the alignment"
        )
    keep = [p in wanted for p in clean]
    names = tuple(label for label, k in zip(aligned.labels(), keep, strict=True) if k)
    mask = torch.tensor(keep, device=aligned.target.device)
    return Alignment(aligned.kind, aligned.target[mask], aligned.source[mask], names)


class RewardReader:
    """Reads the reward a sweep scores from a forward pass.

    The reward is the model's reward, or one objective's head output; `hooks` captures
    `hook_reward` for objective columns.

    Args:
        model: the `HookedRewardModel`.
        objective: a head column (index or name), or `None` for the model's reward.
    """

    def __init__(self, model, objective: Objective = None):
        """Resolve the objective's column."""
        self.column = None if objective is None else objective_index(model, objective)
        self._pooled: Tensor | None = None

    def hooks(self) -> list:
        """The hooks a forward pass needs for `read` (none for the model's reward)."""
        if self.column is None:
            return []

        def grab(act, hook):
            self._pooled = act

        return [("hook_reward", grab)]

    def read(self, out: Tensor) -> Float[Tensor, " variant"]:
        """The scored rewards `[variant]` of the forward pass that returned `out`.

        Raises:
            PatchingError: if no forward pass fired `hook_reward` before.
        """
        if self.column is None:
            return out
        if self._pooled is None:
            raise PatchingError("the reward was read before a forward pass fired hook_reward")
        return self._pooled[:, self.column]


def check_metric_output(values, n: int) -> Float[Tensor, " variant"]:
    """A metric's output as a tensor `[n]`.

    Raises:
        PatchingError: if the metric did not return one value per patched run.
    """
    if not isinstance(values, Tensor):
        values = torch.as_tensor(values)
    if values.ndim == 0 and n == 1:
        values = values.reshape(1)
    if tuple(values.shape) != (n,):
        raise PatchingError(
            f"the metric must return one value per patched run, shape ({n},); got "
            f"{tuple(values.shape)}. Metrics are applied to a [variant] tensor of rewards"
        )
    return values


# -- where patched values come from --------------------------------------------------------
def gather_aligned(act: Tensor, positions: Tensor) -> Tensor:
    """`act[0, positions]` for a batch-1 activation `[1, pos, ...]`."""
    return act[0, positions.to(act.device)]


def reference_batch(model, reference) -> tuple[Tensor, Tensor]:
    """Ids and mask of a reference set.

    The set is given as a `[n, pos]` tensor (padded with the model's pad id, on the left or the
    right; tokens after each row's reading position do not count), an `(ids, mask)` tuple, or a list
    of id sequences / conversations (left padded).
    """
    if isinstance(reference, tuple) and len(reference) == 2 and isinstance(reference[0], Tensor):
        return reference[0], reference[1]
    if isinstance(reference, Tensor):
        ids = model.check_tokens(reference)
        leading = model.infer_attention_mask(ids)  # left padding, if any
        pool = model.pool_positions(ids, leading)
        mask = (torch.arange(ids.shape[1], device=ids.device)[None] <= pool[:, None]).long()
        return ids, mask if leading is None else mask * leading.to(mask)
    seqs = [list(r.ids) if isinstance(r, EncodedConversation) else list(r) for r in reference]
    return pad_batch(seqs, model.pad_token_id)


def first_token_columns(mask: Tensor) -> tuple[Tensor, Tensor]:
    """`(columns, keep)`, each `[batch, pos]`.

    `columns[b, p]` is the column of row `b`'s `p`-th real token (any padding layout:
    `reward_lens_tl.padding.real_columns`) and `keep` says whether that token exists.
    """
    return real_columns(mask)


def gather_columns(act: Tensor, columns: Tensor) -> Tensor:
    """`act[b, columns[b, p]]` for `act` `[batch, pos, ...]`."""
    index = columns.to(act.device).reshape(*columns.shape, *([1] * (act.ndim - 2)))
    return act.gather(1, index.expand(*columns.shape, *act.shape[2:]))


def reference_means(
    model,
    reference,
    names: Sequence[str],
    mean_over: str,
    fwd_hooks: Sequence = (),
    batch_size: int = 16,
) -> dict[str, Tensor]:
    """Masked means of the hooked activations over a reference set.

    `[...]` per name for `mean_over="token"`, `[pos, ...]` for `"position"` (`nan` where no sequence
    reaches; positions counted from each sequence's first real token, whatever the padding).
    """
    if mean_over not in ("token", "position"):
        raise PatchingError(f"mean_over must be 'token' or 'position', not {mean_over!r}")
    ids, mask = reference_batch(model, reference)
    sums: dict[str, Tensor] = {}
    count = torch.zeros(ids.shape[1])
    with torch.no_grad(), model.hooks(fwd_hooks=list(fwd_hooks)), reading_position_known():
        for start in range(0, ids.shape[0], batch_size):
            chunk_ids = ids[start : start + batch_size].to(model.cfg.device)
            chunk_mask = mask[start : start + batch_size].to(model.cfg.device)
            _, cache = model.run_with_cache(
                chunk_ids, attention_mask=chunk_mask, return_type=None, names_filter=list(names)
            )
            keep, columns = chunk_mask, None
            if mean_over == "position":  # position p = each sequence's p-th token
                columns, keep = first_token_columns(chunk_mask)
            for name in names:
                act = cache[name] if columns is None else gather_columns(cache[name], columns)
                w = keep.to(act.device, torch.float32)
                weights = w.reshape(*w.shape, *([1] * (act.ndim - 2)))
                sums[name] = sums.get(name, 0) + (act * weights).sum(0)
            count += keep.sum(0).float().cpu()
    if mean_over == "token":
        return {n: s.sum(0) / count.sum() for n, s in sums.items()}
    denom = count.to(next(iter(sums.values())).device)
    return {n: s / denom.reshape(-1, *([1] * (s.ndim - 1))) for n, s in sums.items()}


def ablation_values(
    model,
    plan: PatchPlan,
    reference,
    mean_over: str,
    fwd_hooks: Sequence = (),
) -> dict[int, Tensor]:
    """Per grid layer, the `[n_aligned, ...]` values an ablation writes."""
    names = [plan.hook(layer) for layer in plan.grid.layers]
    shapes = activation_shapes(model, plan.site)
    n = len(plan.alignment)
    if plan.mode == "zero":
        z = torch.zeros(n, *shapes, device=model.cfg.device, dtype=model.cfg.dtype)
        return {layer: z for layer in plan.grid.layers}
    if reference is None:
        raise PatchingError("mode='mean' needs reference= (a set of sequences to average over)")
    means = reference_means(model, reference, names, mean_over, fwd_hooks)
    out = {}
    for layer, name in zip(plan.grid.layers, names, strict=True):
        m = means[name]
        if mean_over == "token":
            out[layer] = m.expand(n, *m.shape)
            continue
        pos = plan.alignment.target.to(m.device)
        if int(pos.max()) >= m.shape[0] or bool(torch.isnan(m[pos]).any()):
            raise PatchingError(
                f"mean_over='position' needs reference sequences covering every patched "
                f"position (up to {int(pos.max())}); the reference reaches {m.shape[0] - 1} or "
                "has gaps. Use longer references or mean_over='token'"
            )
        out[layer] = m[pos]
    return out


def activation_shapes(model, site: str) -> tuple[int, ...]:
    """Per-position shape of a site's activation (`[d_model]` or `[heads, d_head]`)."""
    from .grids import site_heads

    if site in HEAD_SITES:
        return (site_heads(model, site), model.cfg.d_head)
    return (model.cfg.d_model,)
