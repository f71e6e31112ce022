"""Activation patching scored against planted ground truth (the zoo's contrast pairs).

Each contrast pair differs in one planted feature (`edited` has it, `base` does not), plus
optional score-neutral filler swaps. `edited` is the clean run and `base` the corrupted one;
every number here is *denoising* (clean activations written into the corrupted run), so a
cell's value is the fraction of the feature's reward effect it restores.

Three questions, one function each, all in `causal_ground_truth`:

- `localization`: per layer, where does the effect sit? The *units* compared are the
  planted span (its positions patched together: a two-token phrase is conjunctive, so neither
  token alone restores anything) and every other position on its own. A feature computed from
  token identity sits on the planted tokens at the first layer; wherever the mechanism moves it,
  later layers show it at another position, and after the last layer only the reward-reading
  token can matter.
- `minimal_head_sets`: the smallest set of attention heads whose outputs (at every
  position) restore at least `threshold` of the effect, searched exhaustively over subsets
  of up to `max_size` candidate heads, per pair; how often the same set is found.
- `atp_recall`: do AtP and AtP* rank the same top cells as real patching?

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.zoo import load_task, zoo_path
    >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    >>> pairs = load_task().task.contrast_pairs("harmful", 4, seed=0, filler_swaps=2)
    >>> table = localization(model, pairs)
    >>> table.share("planted", "resid_pre 0")
    1.0
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Unpack

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from ..contrast import as_contrast_pairs, encode_contrast
from ..errors import InvalidArgumentError, PatchingError, UnknownNameError
from ..inputs import pad_batch
from ..plotting import PLOT_DOC, Backend, bar, imshow, render
from ..readout import Objective
from ..results import Result, TopK, top_entries
from ..signatures import checked_options, pasted_docs
from .activation import activation_patching
from .alignment import as_run
from .compare import Estimate, atp_agreement
from .grids import Site
from .metrics import margin_fraction
from .plan import PatchOptions, options_doc
from .runner import RewardReader, chunk_memory_bytes

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from ..model import HookedRewardModel

__all__ = [
    "CausalGroundTruth",
    "HeadSets",
    "Localization",
    "atp_recall",
    "causal_ground_truth",
    "localization",
    "minimal_head_sets",
]

UNIT_KINDS = ("planted", "reward", "neutral", "other")
#: Where `minimal_head_sets` patches head outputs.
HeadPositions = Literal["all", "planted", "reward"]


# -- where the effect sits ------------------------------------------------------------------
@dataclass(frozen=True)
class Localization(Result):
    """Per feature and site, where the effect sits.

    The share of pairs whose top unit is each kind, and the mean fraction of the effect
    restored by the planted span and by the reward-reading token.

    Attributes:
        rows: one dict per feature and site (`"resid_pre 0"` ... `"resid_post {last}"`),
            with `feature`, `site`, `pairs`, `top1_{kind}` (the share of pairs whose top
            unit is of that kind: `planted`, `reward`, `neutral`, `other`),
            `planted_restored` and `reward_restored`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching import localization
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> pairs = load_task().task.contrast_pairs("sycophancy", 2, seed=0, filler_swaps=2)
        >>> table = localization(model, pairs)
        >>> [row["site"] for row in table.rows]
        ['resid_pre 0', 'resid_pre 1', 'resid_pre 2', 'resid_post 2']
        >>> table.share("planted", "resid_pre 1"), table.first_site("reward", "sycophancy")
        (1.0, 'resid_pre 2')
        >>> [(label, round(v, 2)) for label, v in table.top_k(2)]
        [('sycophancy @ resid_pre 0', 1.0), ('sycophancy @ resid_pre 1', 0.99)]
    """

    rows: tuple[dict, ...]

    def to_dataframe(self):
        """One row per feature and site."""
        import pandas as pd

        return pd.DataFrame(list(self.rows))

    def top_k(self, k: int = 10) -> TopK:
        """(feature, site) rows with the largest mean fraction restored by the planted span.

        Args:
            k: how many rows to keep.

        Returns:
            The top `k` rows, labelled `"{feature} @ {site}"`.
        """
        return top_entries(
            [f"{r['feature']} @ {r['site']}" for r in self.rows],
            [r["planted_restored"] for r in self.rows],
            k,
            "planted_restored",
        )

    def share(self, kind: str, site: str, feature: str | None = None) -> float:
        """Share of pairs whose top-1 unit at `site` (e.g. `"resid_pre 0"`) is `kind`.

        Args:
            kind: `"planted"`, `"reward"`, `"neutral"` or `"other"`.
            site: the site row, e.g. `"resid_pre 0"` or `"resid_post 2"`.
            feature: the feature (needed when the table has several).

        Returns:
            The share, in `[0, 1]`.

        Raises:
            InvalidArgumentError: if `kind` is unknown, or the table has several features and
                `feature` is not given.
            UnknownNameError: if no row has that site and feature.
        """
        _check_kind(kind)
        features = sorted({r["feature"] for r in self.rows})
        if feature is None and len(features) > 1:
            raise InvalidArgumentError(f"this table has several features {features}: pass feature=")
        rows = [r for r in self.rows if r["site"] == site and feature in (None, r["feature"])]
        if not rows:
            raise UnknownNameError(f"no row for site {site!r} and feature {feature!r}")
        return rows[0][f"top1_{kind}"]

    def first_site(self, kind: str, feature: str, majority: float = 0.5) -> str | None:
        """The earliest site where more than `majority` of the pairs' top unit is `kind`.

        Args:
            kind: `"planted"`, `"reward"`, `"neutral"` or `"other"`.
            feature: the feature.
            majority: the share of pairs to exceed.

        Returns:
            The site, or `None` when no site has such a majority.

        Raises:
            InvalidArgumentError: if `kind` is unknown.
            UnknownNameError: if the table has no rows for `feature`.
        """
        _check_kind(kind)
        if feature not in {r["feature"] for r in self.rows}:
            raise UnknownNameError(f"no rows for feature {feature!r}")
        for r in self.rows:
            if r["feature"] == feature and r[f"top1_{kind}"] > majority:
                return r["site"]
        return None

    def plot(
        self, ax: Axes | None = None, kind: str = "planted", *, backend: Backend | None = None
    ) -> Any:
        """Heat map of the share of pairs whose top unit is `kind` (features × sites).

        The scale runs from 0 to 1, each cell carries its share, and hover shows it as a
        percent.

        Args:
            ax: Matplotlib axes to draw the static form on.
            kind: `"planted"`, `"reward"`, `"neutral"` or `"other"`.
            backend: `"plotly"` or `"matplotlib"` (see `reward_lens_tl.plotting`).

        Returns:
            The figure (not shown).
        """
        _check_kind(kind)
        df = self.to_dataframe().pivot(index="feature", columns="site", values=f"top1_{kind}")
        df = df[list(dict.fromkeys(r["site"] for r in self.rows))]
        fig = imshow(
            df.to_numpy(dtype=float),
            x=list(df.columns),
            y=list(df.index),
            xaxis="site",
            yaxis="feature",
            title=f"share of pairs whose top patched unit is the {kind} token(s)",
            value_name="share of pairs",
            midpoint=None,
            zmin=0,
            zmax=1,
            colorscale="Viridis",
            text=True,
        )
        fig.data[0].hovertemplate = fig.data[0].hovertemplate.replace("%{z:.5g}", "%{z:.1%}")
        return render(fig, backend, ax)


def _check_kind(kind: str) -> None:
    if kind not in UNIT_KINDS:
        raise InvalidArgumentError(f"kind={kind!r}: choose one of {UNIT_KINDS}")


def localization(
    model: HookedRewardModel, pairs: Sequence[Any], *, objective: Objective = None
) -> Localization:
    """Denoising `resid_pre` at every layer and `resid_post` of the last layer, per unit.

    Units are described in the module docstring; the pairs are contrast pairs of one or more
    features.

    Both sides of a pair must have the same length. An inserted word (the `length`
    feature) has no counterpart position in the corrupted run, and under an end alignment the
    positions before it pair *different* tokens, whose cells measure token swaps rather than
    the feature; use the reward lens, attribution or `compare_methods` for those pairs.

    Args:
        model: the `HookedRewardModel`.
        pairs: contrast pairs (`as_contrast_pairs` reads them).
        objective: a head column of a multi-objective model (default: its reward).

    Returns:
        The localisation table.

    Raises:
        PatchingError: if `pairs` is empty or a pair's sides have different lengths.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching import localization
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> pairs = load_task().task.contrast_pairs("harmful", 2, seed=0, filler_swaps=2)
        >>> frame = localization(model, pairs).to_dataframe()
        >>> frame[["site", "top1_planted", "top1_reward", "reward_restored"]].round(2)
                   site  top1_planted  top1_reward  reward_restored
        0   resid_pre 0           1.0          0.0             0.00
        1   resid_pre 1           1.0          0.0             0.40
        2   resid_pre 2           0.0          1.0             0.56
        3  resid_post 2           0.0          1.0             1.00
    """
    if not pairs:
        raise PatchingError("no pairs given")
    pairs = as_contrast_pairs(pairs)
    unequal = [p.feature for p in pairs if len(p.edited.ids) != len(p.base.ids)]
    if unequal:
        raise PatchingError(
            f"{len(unequal)} pair(s) ({sorted(set(unequal))}) have sides of different lengths: "
            "localization compares positions one to one, which an insertion does not allow "
            "(see the docstring); pass same-length contrast pairs"
        )
    last = model.cfg.n_layers - 1
    sites = [("resid_pre", layer) for layer in range(model.cfg.n_layers)]
    sites.append(("resid_post", last))
    per_feature: dict[str, list[dict]] = {}
    for pair in pairs:
        units = _pair_units(model, pair, sites, objective)
        per_feature.setdefault(pair.feature, []).append(units)
    rows = []
    for feature, found in per_feature.items():
        for site, layer in sites:
            key = f"{site} {layer}"
            tops = Counter(f[key]["top"] for f in found)
            rows.append(
                {
                    "feature": feature,
                    "site": key,
                    "pairs": len(found),
                    **{f"top1_{k}": tops[k] / len(found) for k in UNIT_KINDS},
                    "planted_restored": _mean(f[key]["planted"] for f in found),
                    "reward_restored": _mean(f[key]["reward"] for f in found),
                }
            )
    return Localization(tuple(rows))


def _pair_units(model, pair, sites, objective) -> dict[str, dict]:
    """Per site, the top unit's kind and the planted span's / reward token's restoration."""
    clean, corrupted = encode_contrast(pair)
    planted = list(pair.edited_positions)
    reward_pos = reading_position(model, pair.edited.ids)
    out = {}
    for site in dict.fromkeys(s for s, _ in sites):
        layers = [layer for s, layer in sites if s == site]
        kw = dict(site=site, alignment="exact", layers=layers, objective=objective)
        cells = activation_patching(model, clean, corrupted, by_position=True, **kw)
        span = activation_patching(
            model, clean, corrupted, by_position=False, positions=planted, **kw
        )
        src = cells.alignment.source.tolist()  # positions in the clean (edited) run
        for li, layer in enumerate(layers):
            values = zip(src, cells.values[li].tolist(), strict=True)
            units = {f"p{p}": v for p, v in values if p not in planted}
            units["planted"] = float(span.values[li])
            top = max(units, key=lambda u: abs(units[u]))
            kind = top if top == "planted" else _kind(int(top[1:]), reward_pos, pair)
            reward = units.get(f"p{reward_pos}", float("nan"))
            out[f"{site} {layer}"] = {"top": kind, "planted": units["planted"], "reward": reward}
    return out


def reading_position(model, ids) -> int:
    """Where the model reads the reward of one sequence (its pooling rule)."""
    return as_run(model, list(ids)).pool


def _kind(pos: int, reward_pos: int, pair) -> str:
    if pos == reward_pos:
        return "reward"
    return "neutral" if pos in pair.neutral_positions else "other"


def _mean(values) -> float:
    values = list(values)
    return float(sum(values) / len(values))


def _nanmean(values) -> float:
    """Mean over the finite values (Spearman is `nan` for a constant grid)."""
    return float(torch.tensor(list(values), dtype=torch.float64).nanmean())


# -- the smallest set of heads -------------------------------------------------------------
@dataclass(frozen=True)
class HeadSets(Result):
    """Per pair, the smallest head set restoring `threshold` of the effect.

    It is `None` when no subset of up to `max_size` candidates does; every subset's
    restoration is kept too.

    Attributes:
        feature: the pairs' feature.
        threshold: the fraction of the effect a minimal set restores.
        heads: the candidate heads, `(layer, head)`.
        subsets: every subset searched, as indices into `heads`, by size.
        restored: the fraction of the effect each subset restores, `[pair, subset]`.
        at: which positions' head outputs were patched, `"all"`, `"planted"` or
            `"reward"`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching import minimal_head_sets
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> pairs = load_task().task.contrast_pairs("sycophancy", 2, seed=0, filler_swaps=2)
        >>> sets = minimal_head_sets(model, pairs, max_size=1)   # every single head
        >>> len(sets.subsets), sets.minimal
        (12, [('L1H3',), ('L1H3',)])
        >>> sets.labels(sets.shared_set()), sets.stability(n_boot=20)
        (('L1H3',), 1.0)
        >>> round(sets.summary()["shared_set_mean_restored"], 2)
        0.92
    """

    feature: str
    threshold: float
    heads: tuple[tuple[int, int], ...]  # candidate (layer, head)
    subsets: tuple[tuple[int, ...], ...]  # indices into heads
    restored: Float[Tensor, "pair subset"]
    at: str = "all"  # which positions' head outputs were patched

    @property
    def minimal(self) -> list[tuple[str, ...] | None]:
        """Per pair, the smallest restoring set (the best-restoring one among equal sizes)."""
        out: list[tuple[str, ...] | None] = []
        for row in self.restored:
            ok = [i for i in range(len(self.subsets)) if row[i] >= self.threshold]
            if not ok:
                out.append(None)
                continue
            size = min(len(self.subsets[i]) for i in ok)
            best = max((i for i in ok if len(self.subsets[i]) == size), key=lambda i: row[i])
            out.append(self.labels(best))
        return out

    def labels(self, subset: int) -> tuple[str, ...]:
        """The `L{layer}H{head}` labels of the heads of subset `subset`.

        Args:
            subset: the subset's index into `subsets`.

        Returns:
            The labels, in the order of `heads`.
        """
        return tuple(f"L{self.heads[h][0]}H{self.heads[h][1]}" for h in self.subsets[subset])

    def shared_set(self, coverage: float = 0.9, rows: Tensor | None = None) -> int | None:
        """Index of the smallest subset restoring `threshold` in a `coverage` share of pairs.

        Ties go to the larger share, then the larger mean.

        Args:
            coverage: the least share of pairs the subset must restore.
            rows: selects pairs (default: all).

        Returns:
            The subset's index, or `None` when no subset does.
        """
        restored = self.restored if rows is None else self.restored[rows]
        share = (restored >= self.threshold).float().mean(0)
        mean = restored.mean(0)
        ok = [i for i in range(len(self.subsets)) if share[i] >= coverage]
        if not ok:
            return None
        size = min(len(self.subsets[i]) for i in ok)
        same = [i for i in ok if len(self.subsets[i]) == size]
        return max(same, key=lambda i: (float(share[i]), float(mean[i])))

    def stability(self, coverage: float = 0.9, n_boot: int = 200, seed: int = 0) -> float:
        """Share of bootstrap resamples of the pairs whose `shared_set` is the same.

        Args:
            coverage: the `shared_set` coverage.
            n_boot: the bootstrap resamples.
            seed: the seed of the resampling.

        Returns:
            The share, in `[0, 1]` (`nan` when there is no shared set).
        """
        full = self.shared_set(coverage)
        if full is None:
            return float("nan")
        gen = torch.Generator().manual_seed(seed)
        n = self.restored.shape[0]
        same = sum(
            self.shared_set(coverage, torch.randint(n, (n,), generator=gen)) == full
            for _ in range(n_boot)
        )
        return same / n_boot

    def summary(self, coverage: float = 0.9) -> dict:
        """Per-pair minimal sets and the shared set.

        Per-pair minimal sets: their size distribution, the most common one and its share;
        the shared set (`shared_set`) with its share of pairs, mean restoration and bootstrap
        `stability`.

        Args:
            coverage: the `shared_set` coverage.

        Returns:
            A dict: `feature`, `at`, `pairs`, `per_pair_found`, `per_pair_sizes`,
            `per_pair_most_common`, `per_pair_most_common_share`, `shared_set`,
            `shared_set_share`, `shared_set_mean_restored`, `shared_set_stability`.
        """
        minimal = self.minimal
        found = [m for m in minimal if m is not None]
        common, count = Counter(found).most_common(1)[0] if found else (None, 0)
        sizes = Counter(len(m) if m else None for m in minimal)
        shared = self.shared_set(coverage)
        column = self.restored[:, shared].double() if shared is not None else None
        return {
            "feature": self.feature,
            "at": self.at,
            "pairs": len(minimal),
            "per_pair_found": len(found) / len(minimal),
            "per_pair_sizes": dict(sorted(sizes.items(), key=lambda kv: (kv[0] is None, kv[0]))),
            "per_pair_most_common": common,
            "per_pair_most_common_share": count / len(minimal),
            "shared_set": None if shared is None else self.labels(shared),
            "shared_set_share": (
                float("nan") if column is None else float((column >= self.threshold).float().mean())
            ),
            "shared_set_mean_restored": float("nan") if column is None else float(column.mean()),
            "shared_set_stability": self.stability(coverage),
        }

    def top_k(self, k: int = 5) -> TopK:
        """The minimal sets found most often, with the share of pairs they are minimal for.

        Args:
            k: how many sets to keep.

        Returns:
            The top `k` sets, labelled `"L1H3 L2H0"` (`"none"` for pairs without one).
        """
        counts = Counter(" ".join(m) if m else "none" for m in self.minimal)
        n = max(len(self.minimal), 1)
        return top_entries(list(counts), [c / n for c in counts.values()], k, "share of pairs")

    def to_dataframe(self):
        """One row per pair: its minimal set, the set's size and restoration."""
        import pandas as pd

        rows = []
        for i, m in enumerate(self.minimal):
            index = {self.labels(j): j for j in range(len(self.subsets))}
            value = float(self.restored[i, index[m]]) if m else float("nan")
            rows.append(
                {"pair": i, "minimal_set": m, "size": len(m) if m else None, "restored": value}
            )
        frame = pd.DataFrame(rows)
        frame["size"] = frame["size"].astype("Int64")  # pairs without a set: <NA>
        return frame

    @pasted_docs(plot=PLOT_DOC)
    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """Bars of how often each head set is the minimal one (the 8 most common).

        Hover shows the set and its exact number of pairs.

        {plot}
        """
        counts = Counter(" ".join(m) if m else "none" for m in self.minimal).most_common(8)
        fig = bar(
            [c for c, _ in counts],
            [n for _, n in counts],
            xaxis=f"pairs (of {len(self.minimal)})",
            yaxis="minimal head set",
            title=f"{self.feature}: smallest head set restoring ≥ {100 * self.threshold:.3g}%",
            value_name="pairs",
        )
        if max((n for _, n in counts), default=0) <= 10:  # whole-number ticks
            fig.update_xaxes(dtick=1)
        return render(fig, backend, ax)


def minimal_head_sets(
    model: HookedRewardModel,
    pairs: Sequence[Any],
    *,
    threshold: float = 0.9,
    max_size: int = 4,
    candidates: int | Sequence[tuple[int, int]] | None = None,
    at: HeadPositions = "all",
    objective: Objective = None,
    chunk_size: int | None = None,
    max_subsets: int = 20_000,
) -> HeadSets:
    """Patch every subset of up to `max_size` candidate heads and record the restoration.

    Each subset's heads (`hook_z`) are patched clean into corrupted in each of the contrast
    `pairs` of one feature, and the fraction of the effect restored is recorded; the smallest
    set restoring `threshold` of it is the pair's minimal set.

    The search grows as `C(len(candidates), max_size)`; more than `max_subsets` subsets is
    refused. Pairs must have equal lengths. Every subset is one full forward pass of the
    corrupted run, batched `chunk_size` at a time: an exhaustive search meant for small
    models or short candidate lists.

    Args:
        model: the `HookedRewardModel`.
        pairs: contrast pairs of one feature.
        threshold: the fraction of the effect a minimal set restores.
        max_size: the largest subset searched.
        candidates: `(layer, head)` pairs, or an integer `n` for the `n` heads with the
            largest mean single-head restoration over `pairs` (one extra pass over every
            head), or `None` for every head.
        at: the positions whose head outputs are patched: `"all"`, `"planted"` (the pair's
            changed positions: heads whose *query* sits on the planted tokens) or `"reward"`
            (the reward-reading token).
        objective: a head column of a multi-objective model.
        chunk_size: subsets per forward pass (default: as many as fit in about 1 GB, see
            `chunk_memory_bytes`).
        max_subsets: the most subsets searched.

    Returns:
        Every subset's restoration per pair, and the minimal sets.

    Raises:
        PatchingError: if `at` or `max_size` is invalid, or the pairs are not of one feature.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching import minimal_head_sets
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> pairs = load_task().task.contrast_pairs("sycophancy", 2, seed=0, filler_swaps=2)
        >>> sets = minimal_head_sets(model, pairs, candidates=3, max_size=2)
        >>> sets.heads   # the three heads that restore most on their own
        ((0, 3), (1, 3), (2, 2))
        >>> [sets.labels(i) for i in range(len(sets.subsets))][3:]
        [('L0H3', 'L1H3'), ('L0H3', 'L2H2'), ('L1H3', 'L2H2')]
        >>> sets.restored.round(decimals=2)[:, 3:]   # [pair, subset]
        tensor([[0.9300, 0.1200, 0.9900],
                [0.9300, 0.1200, 0.9600]])
        >>> sets.minimal   # L1H3 alone restores ≥ 0.9 of the effect in both pairs
        [('L1H3',), ('L1H3',)]
    """
    pairs = as_contrast_pairs(pairs)
    feature = _one_feature(pairs)
    if at not in HEAD_POSITIONS:
        raise PatchingError(f"at={at!r}: choose one of {HEAD_POSITIONS}")
    if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
        raise PatchingError(f"max_size must be a positive integer, not {max_size!r}")
    search = _Search(model, at, objective, chunk_size)
    heads = _candidate_heads(model, pairs, candidates, search)
    subsets = _subsets(len(heads), max_size, max_subsets)
    masks = _subset_masks(model, heads, subsets)
    restored = torch.stack([search.restoration(p, masks) for p in pairs])
    return HeadSets(feature, threshold, heads, subsets, restored, at)


def _one_feature(pairs) -> str:
    if not pairs:
        raise PatchingError("no pairs given")
    features = {p.feature for p in pairs}
    if len(features) != 1:
        raise PatchingError(f"pass pairs of one feature; got {sorted(features)}")
    return features.pop()


def _candidate_heads(model, pairs, candidates, search: _Search):
    cfg = model.cfg
    every = tuple(itertools.product(range(cfg.n_layers), range(cfg.n_heads)))
    if candidates is None:
        return every
    if isinstance(candidates, bool):
        raise PatchingError("candidates must be a number of heads or (layer, head) pairs")
    if isinstance(candidates, int):
        if not 0 < candidates <= len(every):
            raise PatchingError(f"candidates={candidates}: pick 1..{len(every)} heads")
        singles = _subset_masks(model, every, tuple((i,) for i in range(len(every))))
        mean = torch.stack([search.restoration(p, singles) for p in pairs]).mean(0)
        top = mean.argsort(descending=True, stable=True)[:candidates].sort().values
        return tuple(every[i] for i in top.tolist())
    heads = tuple(tuple(h) for h in candidates)
    integral = all(
        len(h) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in h)
        for h in heads
    )
    if not integral or not heads or len(set(heads)) != len(heads) or set(heads) - set(every):
        raise PatchingError(
            f"candidates must be distinct (layer, head) pairs of this {cfg.n_layers}-layer, "
            f"{cfg.n_heads}-head model; got {list(candidates)!r}"
        )
    return heads


def _subsets(n: int, max_size: int, max_subsets: int) -> tuple[tuple[int, ...], ...]:
    count = sum(math.comb(n, k) for k in range(1, max_size + 1))
    if count > max_subsets:
        raise PatchingError(
            f"{count:,} subsets of up to {max_size} of {n} heads exceed max_subsets="
            f"{max_subsets:,}: pass candidates=<n> (the n heads with the largest single-head "
            "effects), a shorter candidates list, or a smaller max_size"
        )
    return tuple(s for k in range(1, max_size + 1) for s in itertools.combinations(range(n), k))


def _subset_masks(model, heads, subsets) -> Bool[Tensor, "subset layer head"]:
    masks = torch.zeros(len(subsets), model.cfg.n_layers, model.cfg.n_heads, dtype=torch.bool)
    for i, s in enumerate(subsets):
        for h in s:
            masks[i, heads[h][0], heads[h][1]] = True
    return masks


HEAD_POSITIONS = ("all", "planted", "reward")
MEMORY_BUDGET = 1 << 30  # bytes per chunk of head-set variants when chunk_size is None


class _Search:
    """Runs the corrupted side of a pair with subsets of heads patched from the clean side."""

    def __init__(self, model, at: str, objective, chunk_size: int | None):
        self.model, self.at, self.objective, self.chunk_size = model, at, objective, chunk_size

    def restoration(
        self, pair, masks: Bool[Tensor, "subset layer head"]
    ) -> Float[Tensor, " subset"]:
        """Fraction of the pair's effect restored by each subset."""
        model = self.model
        clean, corrupted = pair.edited.ids, pair.base.ids
        if len(clean) != len(corrupted):
            raise PatchingError(
                "head-set search pairs positions one to one, so both sides need equal lengths; "
                f"this {pair.feature!r} pair has {len(clean)} and {len(corrupted)} tokens"
            )
        ids, mask = pad_batch([clean, corrupted], model.pad_token_id)
        names = [f"blocks.{layer}.attn.hook_z" for layer in range(model.cfg.n_layers)]
        where = self.positions(pair, len(clean))
        reader = RewardReader(model, self.objective)
        chunk = self.chunk_size or max(
            1, min(256, MEMORY_BUDGET // chunk_memory_bytes(model, len(clean), 1))
        )
        with torch.no_grad(), model.hooks(fwd_hooks=reader.hooks()):
            rewards, cache = model.run_with_cache(
                ids, attention_mask=mask, return_type="reward", names_filter=names
            )
            r_clean, r_corrupt = (float(r) for r in reader.read(rewards))
            restored = margin_fraction(r_corrupt, r_clean)
            out = []
            for part in masks.split(chunk):
                hooks = [
                    (name, _write_heads(cache[name][0], part[:, layer], where))
                    for layer, name in enumerate(names)
                ]
                r = model.run_with_hooks(
                    ids[1:].expand(len(part), -1),
                    attention_mask=mask[1:].expand(len(part), -1),
                    return_type="reward",
                    fwd_hooks=hooks,
                )
                out.append(restored(reader.read(r)))
        return torch.cat(out).float().cpu()

    def positions(self, pair, n: int) -> Bool[Tensor, " pos"]:
        where = torch.zeros(n, dtype=torch.bool)
        if self.at == "all":
            where[:] = True
        elif self.at == "planted":
            where[list(pair.edited_positions)] = True
        else:
            where[reading_position(self.model, pair.edited.ids)] = True
        return where


def _write_heads(
    clean_z: Float[Tensor, "pos head d_head"],
    which: Bool[Tensor, "variant head"],
    where: Bool[Tensor, " pos"],
):
    def hook(z, hook):
        w = (which[:, None, :] & where[None, :, None]).to(z.device)[..., None]
        return torch.where(w, clean_z[None].to(z.dtype), z)

    return hook


# -- attribution patching's top cells ------------------------------------------------------
@checked_options(PatchOptions)
@pasted_docs(options=options_doc(*PatchOptions.__annotations__))
def atp_recall(
    model: HookedRewardModel,
    pairs: Sequence[Any],
    *,
    sites: Sequence[Site] = ("resid_pre", "z"),
    k: int = 3,
    methods: Sequence[Estimate] = ("atp", "atp*"),
    chunk_size: int = 16,
    **options: Unpack[PatchOptions],
) -> list[dict]:
    """Mean top-`k` recall and Spearman of AtP / AtP* against activation patching, per site.

    `resid_pre` is compared by layer × position; heads by layer × head over all positions.
    The options (`alignment`, default `"exact"` here, to `mean_over`) are the request of
    `atp_agreement` for every pair.

    Args:
        model: the `HookedRewardModel`.
        pairs: contrast pairs of one feature (`edited` is the clean run, aligned `exact`).
        sites: the sites compared.
        k: the top-`k` recall's `k` (as for `atp_agreement`).
        methods: the estimates compared (as for `atp_agreement`).
        chunk_size: activation patching's variants per forward pass.
        {options}

    Returns:
        One row per site and method.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching import atp_recall
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> pairs = load_task().task.contrast_pairs("sycophancy", 2, seed=0, filler_swaps=2)
        >>> rows = atp_recall(model, pairs, sites=["z"], k=1, methods=["atp"])
        >>> [(r["site"], r["method"], r["top_k_recall"], round(r["spearman"], 2)) for r in rows]
        [('z', 'atp', 1.0, 0.86)]
    """
    pairs = as_contrast_pairs(pairs)
    feature = _one_feature(pairs)
    request: PatchOptions = {"alignment": "exact", **options}
    rows = []
    for site in sites:
        per_method: dict[str, list] = {m: [] for m in methods}
        for pair in pairs:
            clean, corrupted = encode_contrast(pair)
            report = atp_agreement(
                model,
                clean,
                corrupted,
                site=site,
                k=k,
                methods=methods,
                chunk_size=chunk_size,
                **request,
            )
            for row in report.rows:
                per_method[row.estimate].append(row)
        for method, found in per_method.items():
            rows.append(
                {
                    "feature": feature,
                    "site": site,
                    "method": method,
                    "pairs": len(found),
                    "k": k,
                    "top_k_recall": _nanmean(r.top_k_recall for r in found),
                    "spearman": _nanmean(r.spearman for r in found),
                }
            )
    return rows


# -- everything at once ----------------------------------------------------------------------
SWAP_FEATURES = ("topic_match", "harmful", "sycophancy")


@dataclass(frozen=True)
class CausalGroundTruth(Result):
    """`causal_ground_truth`'s answers.

    `head_sets` patches heads at every position (it
    cannot miss a mechanism, wherever the query sits); `head_sets_at_edit` only at the edited
    positions (heads whose query is the edited token), which is `None` when not requested.

    Attributes:
        localization: where the effect sits, per feature and site.
        head_sets: the head-set search patching heads at every position.
        atp: the `atp_recall` rows of every feature.
        head_sets_at_edit: the search patching heads at the edited positions only, or `None`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching import (
        ...     CausalGroundTruth, atp_recall, localization, minimal_head_sets)
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> pairs = load_task().task.contrast_pairs("sycophancy", 2, seed=0, filler_swaps=2)
        >>> found = CausalGroundTruth(   # what causal_ground_truth assembles
        ...     localization(model, pairs),
        ...     minimal_head_sets(model, pairs, max_size=1),
        ...     atp=tuple(atp_recall(model, pairs, sites=["z"], k=1, methods=["atp"])),
        ... )
        >>> found.head_sets.minimal, found.head_sets_at_edit
        ([('L1H3',), ('L1H3',)], None)
        >>> [(label, round(v, 2)) for label, v in found.top_k(1)]
        [('sycophancy @ resid_pre 0', 1.0)]
        >>> found.atp_dataframe()[["site", "method", "top_k_recall"]]
          site method  top_k_recall
        0    z    atp           1.0
    """

    localization: Localization
    head_sets: HeadSets
    atp: tuple[dict, ...]
    head_sets_at_edit: HeadSets | None = None

    def to_dataframe(self):
        """The localization table (one row per feature and site)."""
        return self.localization.to_dataframe()

    def top_k(self, k: int = 10) -> TopK:
        """The localisation's top `k` entries (`Localization.top_k`).

        Args:
            k: how many entries to keep.

        Returns:
            The top `k` (feature, site) rows by the planted span's restoration.
        """
        return self.localization.top_k(k)

    def atp_dataframe(self):
        """The AtP recall rows as a data frame."""
        import pandas as pd

        return pd.DataFrame(list(self.atp))

    @pasted_docs(plot=PLOT_DOC)
    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """Where the effect sits: the share of pairs whose top unit is the planted span.

        This is `Localization.plot(kind="planted")` of `localization`.

        {plot}
        """
        return self.localization.plot(ax=ax, kind="planted", backend=backend)


def causal_ground_truth(
    model: HookedRewardModel,
    task: Any = None,
    *,
    pairs: Sequence[Any] | None = None,
    features: Sequence[str] = SWAP_FEATURES,
    head_feature: str = "topic_match",
    head_positions: Literal["all", "planted"] | Sequence[Literal["all", "planted"]] = (
        "all",
        "planted",
    ),
    n: int = 50,
    seed: int = 0,
    filler_swaps: int = 2,
    k: int = 3,
    objective: Objective = None,
) -> CausalGroundTruth:
    """Localization and AtP recall for `features`, and the head-set search for `head_feature`.

    The contrast pairs are the zoo `task`'s (`n` per feature, with `filler_swaps`
    score-neutral swaps, so not every differing token matters), or your own `pairs`.

    Args:
        model: the `HookedRewardModel`.
        task: the zoo task whose pairs are drawn.
        pairs: your own `ContrastPair`s (`features` and `head_feature` then default to the
            features they name).
        features: the features localised and checked with AtP.
        head_feature: the feature of the head-set search.
        head_positions: where heads are patched in the search, `"all"` (cannot miss a
            mechanism: a prompt-side lookup whose query is not the edited token is found
            too), `"planted"` (only heads whose query is the edited token) or both (the
            default; the first is `head_sets`, the second `head_sets_at_edit`).
        n: the task's pairs per feature.
        seed: draws the task's pairs.
        filler_swaps: score-neutral swaps per pair.
        k: AtP recall's top-`k`.
        objective: a head column of a multi-objective `model`.

    Returns:
        The localisation, the head sets and the AtP recall.

    Raises:
        PatchingError: if `head_positions` is invalid.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching import causal_ground_truth
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> found = causal_ground_truth(
        ...     model, load_task().task, features=["sycophancy"], head_feature="sycophancy",
        ...     n=1, head_positions="all")
        >>> found.localization.first_site("reward", "sycophancy"), found.head_sets.minimal
        ('resid_pre 2', [('L1H3',)])
        >>> [(row["site"], row["method"]) for row in found.atp]
        [('resid_pre', 'atp'), ('resid_pre', 'atp*'), ('z', 'atp'), ('z', 'atp*')]
    """
    by_feature = _pairs_by_feature(task, pairs, features, head_feature, n, seed, filler_swaps)
    if pairs is not None:
        features = [f for f in by_feature if f == features or f in features] or list(by_feature)
        if head_feature not in by_feature:
            head_feature = features[0]
    wanted = (head_positions,) if isinstance(head_positions, str) else tuple(head_positions)
    if not wanted or any(w not in ("all", "planted") for w in wanted):
        raise PatchingError(f"head_positions={head_positions!r}: use 'all', 'planted' or both")
    table = localization(model, [p for f in features for p in by_feature[f]], objective=objective)
    searches = {
        at: minimal_head_sets(model, by_feature[head_feature], at=at, objective=objective)
        for at in wanted
    }
    atp = tuple(
        row for f in features for row in atp_recall(model, by_feature[f], k=k, objective=objective)
    )
    main = searches.get("all", searches[wanted[0]])
    at_edit = searches.get("planted") if "all" in searches else None
    return CausalGroundTruth(table, main, atp, at_edit)


def _pairs_by_feature(task, pairs, features, head_feature, n, seed, filler_swaps):
    if pairs is not None:
        grouped: dict[str, list] = {}
        for pair in as_contrast_pairs(pairs):
            grouped.setdefault(pair.feature, []).append(pair)
        if not grouped:
            raise PatchingError("no pairs given")
        return grouped
    if task is None:
        raise PatchingError("pass a zoo task or pairs=[ContrastPair, ...]")
    wanted = list(dict.fromkeys([*features, head_feature]))
    return {f: task.contrast_pairs(f, n, seed, filler_swaps=filler_swaps) for f in wanted}
