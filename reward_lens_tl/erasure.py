"""Concept erasure with a certificate: LEACE at one site, its effect on margins, a fresh probe.

`fit_eraser` fits a LEACE eraser (`concept_erasure.LeaceFitter`, Belrose et al. 2023) for a
concept from labelled activations at one hook and position: contrast pairs (base labelled 0,
edited 1) or conversations with labels. `ConceptEraser.fwd_hooks` applies it as a forward hook
(compose it with `model.hooks(...)` / `model.run_with_hooks`); `concept_erasure` reports each
contrast pair's margin before and after, grouped by the pairs' feature, with bootstrap
intervals, and a certificate: a fresh logistic-regression probe's held-out accuracy on the site's
activations before and after erasure. `random_eraser` is the oracle-free control (an orthogonal
projection off a random subspace of the same rank); `concept_presence` is the probe accuracy
per site, before any erasure (where a concept is first linearly present).

**LEACE.** For activations `x` with covariance `Σ_xx` and labels `z` with cross-covariance
`Σ_xz`, LEACE is the affine map `r(x) = x − W⁺ P_{WΣ_xz} W (x − E[x])` (`W = Σ_xx^{-1/2}`
the whitening, `P` the orthogonal projection onto the column space of `WΣ_xz`): the smallest
change (in the Mahalanobis norm) after which `Cov(r(x), z) = 0`, so that no linear classifier
of `r(x)` beats a constant on the fitting data. Its rank is that of `Σ_xz` (1 for one label
column). Erasure is applied at the named positions only: the reward-reading token of each
row (`position="reward"`, `model.pool_positions`), every response token (`"response"`),
or one index `p` into each row's unpadded tokens (negative from the end).

**Positions in a padded batch.** Positions are found from the attention mask, so a left- or
right-padded batch erases the same tokens and gives the same numbers.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.erasure import concept_erasure, fit_eraser
    >>> from reward_lens_tl.zoo import load_task, zoo_path
    >>> model, task = HookedRewardModel.from_pretrained(zoo_path("scalar")), load_task().task
    >>> def harmful(examples):  # 1 where the response holds a harmful word
    ...     return [int(bool(e.feature_positions["harmful"])) for e in examples]
    >>> fit, heldout = task.examples(1000, seed=3), task.examples(400, seed=11)
    >>> eraser = fit_eraser(model, fit, harmful(fit), hook="blocks.2.hook_resid_mid",
    ...                     concept="harmful")
    >>> pairs = [*task.contrast_pairs("harmful", 20, seed=1),
    ...          *task.contrast_pairs("topic_match", 20, seed=1)]
    >>> result = concept_erasure(model, eraser, pairs, heldout=heldout,
    ...                          heldout_labels=harmful(heldout))
    >>> frame = result.summary().set_index("feature")
    >>> round(frame.loc["harmful", "before"]), bool(abs(frame.loc["topic_match", "change"]) < 0.1)
    (-3, True)
    >>> bool(abs(frame.loc["harmful", "after"]) < 0.5), result.probe_before > 0.95
    (True, True)
    >>> abs(result.probe_after - result.chance) < 0.05  # a fresh probe: at chance after erasure
    True
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from .contrast import as_conversation, is_pair, pair_sides
from .errors import (
    AmbiguousObjectiveError,
    ArgumentTypeError,
    EmptyInputError,
    InvalidArgumentError,
    MissingAttentionMaskError,
    ShapeMismatchError,
    UsageError,
)
from .inputs import EncodedConversation, pad_batch
from .padding import PaddingSide, ReadingPositionWarning
from .plotting import PALETTE, Backend, bar, line, render
from .results import Result, axes, top_entries
from .stats import N_BOOT, bootstrap_ci

if TYPE_CHECKING:
    from concept_erasure import LeaceEraser
    from matplotlib.axes import Axes

__all__ = [
    "ConceptEraser",
    "ConceptPresence",
    "ErasureResult",
    "concept_erasure",
    "concept_presence",
    "fit_eraser",
    "probe_accuracy",
    "random_eraser",
]

#: Where an eraser acts: the reading token, every response token, or one index per row.
Position = Literal["reward", "response"] | int


# ---- the eraser --------------------------------------------------------------------------------
@dataclass(frozen=True)
class ConceptEraser:
    """A fitted eraser at one hook and position, applied as a forward hook.

    Attributes:
        hook: The hook point whose activation is erased (`[batch, pos, d]`).
        position: `"reward"` (each row's reading token), `"response"` (every response token)
            or an index into each row's unpadded tokens.
        eraser: The `concept_erasure.LeaceEraser` (`x ↦ x − (x − bias) R^T L^T`).
        rank: The rank of the change (`I − P`): how many directions it removes.
        concept: The concept's name.
        kind: `"leace"` (fitted) or `"random"` (`random_eraser`'s control).
        n_fit: How many activation vectors it was fitted on (0 for a random eraser).

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.erasure import random_eraser
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> eraser = random_eraser(model, hook="blocks.1.hook_resid_pre", rank=2)
        >>> eraser.rank, eraser.kind, eraser.eraser.P.shape
        (2, 'random', torch.Size([64, 64]))
    """

    hook: str
    position: Position
    eraser: LeaceEraser
    rank: int
    concept: str = "concept"
    kind: Literal["leace", "random"] = "leace"
    n_fit: int = 0

    def erase(self, x: Float[Tensor, "*rows d"]) -> Float[Tensor, "*rows d"]:
        """The erased activations `eraser(x)`, in `x`'s dtype and on its device.

        Args:
            x: Activations at the eraser's site, the last axis the hook's width.

        Returns:
            The erased activations, the same shape.

        Examples:
            >>> import torch
            >>> from reward_lens_tl import HookedRewardModel
            >>> from reward_lens_tl.erasure import random_eraser
            >>> from reward_lens_tl.zoo import zoo_path
            >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
            >>> eraser = random_eraser(model, hook="blocks.0.hook_resid_post")
            >>> x = torch.randn(3, 64)
            >>> torch.allclose(eraser.erase(eraser.erase(x)), eraser.erase(x), atol=1e-5)
            True
        """
        e = self.eraser
        left = e.proj_left.to(x.device, x.dtype)
        right = e.proj_right.to(x.device, x.dtype)
        delta = x if e.bias is None else x - e.bias.to(x.device, x.dtype)
        return x - (delta @ right.mH) @ left.mH

    def where(
        self,
        model,
        input_ids: Int[Tensor, "batch pos"],
        attention_mask: Int[Tensor, "batch pos"] | None = None,
        *,
        response_mask: Bool[Tensor, "batch pos"] | None = None,
    ) -> Bool[Tensor, "batch pos"]:
        """The positions of a batch the eraser acts on.

        Args:
            model: The `HookedRewardModel` the batch is for.
            input_ids: Token ids, `[batch, pos]` (left or right padded).
            attention_mask: Ones on real tokens (default: inferred from the padding).
            response_mask: For `position="response"`: ones on each row's response tokens.

        Returns:
            A boolean mask, `[batch, pos]`.

        Raises:
            UsageError: `position="response"` without a `response_mask`.
            InvalidArgumentError: An index position outside a row.

        Examples:
            >>> import torch
            >>> from reward_lens_tl import HookedRewardModel
            >>> from reward_lens_tl.erasure import random_eraser
            >>> from reward_lens_tl.zoo import zoo_path
            >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
            >>> eraser = random_eraser(model, hook="blocks.0.hook_resid_post")
            >>> ids = torch.tensor([[1, 5, 6, 2], [1, 0, 7, 2]])
            >>> eraser.where(model, ids, torch.tensor([[1, 1, 1, 1], [1, 0, 1, 1]])).long()
            tensor([[0, 0, 0, 1],
                    [0, 0, 0, 1]])
        """
        mask = _mask(model, input_ids, attention_mask)
        return _site_mask(model, self.position, input_ids, mask, response_mask)

    def fwd_hooks(
        self,
        model,
        input_ids: Int[Tensor, "batch pos"],
        attention_mask: Int[Tensor, "batch pos"] | None = None,
        *,
        response_mask: Bool[Tensor, "batch pos"] | None = None,
    ) -> list[tuple[str, Callable]]:
        """`[(hook, fn)]` erasing the concept for this batch, for `model.hooks` / `run_with_hooks`.

        The positions are this batch's (`where`); use the hooks with this batch only.

        Args:
            model: The `HookedRewardModel` the batch is for.
            input_ids: Token ids, `[batch, pos]` (left or right padded).
            attention_mask: Ones on real tokens (default: inferred from the padding).
            response_mask: For `position="response"`: ones on each row's response tokens.

        Returns:
            One `(hook name, hook function)` pair.

        Examples:
            >>> from reward_lens_tl import HookedRewardModel
            >>> from reward_lens_tl.erasure import random_eraser
            >>> from reward_lens_tl.inputs import pad_batch
            >>> from reward_lens_tl.zoo import load_task, zoo_path
            >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
            >>> eraser = random_eraser(model, hook="blocks.2.hook_resid_pre", seed=1)
            >>> ids, mask = pad_batch([e.input_ids for e in load_task().task.examples(3, 0)], 0)
            >>> with model.hooks(eraser.fwd_hooks(model, ids, mask)):
            ...     erased = model.rewards(ids, mask)
            >>> erased.shape, bool((erased - model.rewards(ids, mask)).abs().max() < 1.0)
            (torch.Size([3]), True)
        """
        model.check_hook_names([self.hook])
        where = self.where(model, input_ids, attention_mask, response_mask=response_mask)

        def erase(act: Tensor, hook: Any) -> Tensor:
            if act.shape[:2] != where.shape:
                raise ShapeMismatchError(
                    f"the eraser's positions are for a [{where.shape[0]}, {where.shape[1]}] "
                    f"batch but {self.hook} holds {tuple(act.shape)}: build fwd_hooks for the "
                    "batch you run"
                )
            out = act.clone()
            out[where.to(act.device)] = self.erase(act[where.to(act.device)])
            return out

        return [(self.hook, erase)]

    def rewards(
        self,
        model,
        conversations: Sequence[Any],
        *,
        objective: int | None = None,
        batch_size: int = 32,
        padding_side: PaddingSide = "left",
    ) -> Float[Tensor, " batch"]:
        """The rewards of `conversations` with the concept erased.

        Args:
            model: The `HookedRewardModel`.
            conversations: `EncodedConversation`s, zoo `Example`s or `(prompt, response)` text.
            objective: Read this objective's head output (default: `model.rewards`).
            batch_size: Conversations per forward.
            padding_side: `"left"` or `"right"` (the rewards are the same).

        Returns:
            One reward per conversation.

        Examples:
            >>> from reward_lens_tl import HookedRewardModel
            >>> from reward_lens_tl.erasure import random_eraser
            >>> from reward_lens_tl.zoo import load_task, zoo_path
            >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
            >>> eraser = random_eraser(model, hook="blocks.1.hook_resid_pre")
            >>> eraser.rewards(model, load_task().task.examples(4, 0)).shape
            torch.Size([4])
        """
        convs = [as_conversation(model, c) for c in conversations]
        return _rewards(model, convs, self, objective, batch_size, padding_side)


def fit_eraser(
    model,
    examples: Sequence[Any],
    labels: Sequence[float] | Tensor | None = None,
    *,
    hook: str,
    position: Position = "reward",
    concept: str | None = None,
    batch_size: int = 32,
    padding_side: PaddingSide = "left",
) -> ConceptEraser:
    """Fit a LEACE eraser for a concept at `hook` and `position` (`concept_erasure.LeaceFitter`).

    The activations at the site are read from a forward of every conversation; each labelled
    activation vector is one row of LEACE's fit (with `position="response"`, every response
    token carries its conversation's label). Labels are numbers: two classes, or a count or
    score (LEACE then removes every linear correlation with it: a rank-1 eraser either way).

    Args:
        model: The `HookedRewardModel`.
        examples: Pairs with `labels=None` (`contrast.pair_sides`: a `ContrastPair` or zoo
            `ExamplePair`, base 0 and edited 1; a `PreferencePair` or a `(chosen, rejected)`
            tuple, rejected 0 and chosen 1), or conversations with `labels`
            (`EncodedConversation`, zoo `Example`, `(prompt, response)` text).
        labels: One number per conversation (two classes, or a count); `None` for pairs.
        hook: The hook point to erase at (an activation `[batch, pos, d]`).
        position: `"reward"` (each row's reading token, `model.pool_positions`),
            `"response"` (every response token) or an index into each unpadded row.
        concept: The concept's name (default: the pairs' feature, else `"concept"`).
        batch_size: Conversations per forward.
        padding_side: `"left"` or `"right"` (the eraser is the same).

    Returns:
        The `ConceptEraser`.

    Raises:
        UnknownHookError: `hook` is not a hook point of the model.
        ShapeMismatchError: `labels` not one per conversation.
        InvalidArgumentError: One label value only, labels given with pairs, a position
            outside a row, or a hook whose activation is not `[batch, pos, d]`.
        EmptyInputError: No examples.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.erasure import fit_eraser
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model, task = HookedRewardModel.from_pretrained(zoo_path("scalar")), load_task().task
        >>> examples = task.examples(300, seed=0)
        >>> counts = [len(e.feature_positions["harmful"]) for e in examples]  # harmful words
        >>> eraser = fit_eraser(model, examples, counts, hook="blocks.2.hook_resid_pre")
        >>> eraser.rank, eraser.n_fit, eraser.position
        (1, 300, 'reward')
    """
    model.check_hook_names([hook])
    _check_position(position)
    convs, z, name, _ = _labelled(model, examples, labels)
    x, owner = _site_activations(model, convs, hook, position, batch_size, padding_side)
    z_rows = z[owner]
    if z_rows.unique().numel() < 2:
        raise InvalidArgumentError(
            "every activation has the same label: LEACE needs two classes (or varying counts); "
            "pass examples with and without the concept"
        )
    from concept_erasure import LeaceEraser, LeaceFitter

    fitter = LeaceFitter.fit(x.double(), z_rows.double()[:, None])
    fitted = fitter.eraser
    eraser = LeaceEraser(
        fitted.proj_left.float(),
        fitted.proj_right.float(),
        None if fitted.bias is None else fitted.bias.float(),
    )
    change = fitted.proj_left @ fitted.proj_right
    rank = int(torch.linalg.matrix_rank(change, atol=1e-6).item())
    return ConceptEraser(
        hook, position, eraser, rank, concept or name or "concept", "leace", int(x.shape[0])
    )


def random_eraser(
    model,
    *,
    hook: str,
    rank: int = 1,
    seed: int = 0,
    position: Position = "reward",
) -> ConceptEraser:
    """An oracle-free control: the orthogonal projection off a random `rank`-dim subspace.

    `x ↦ x − Q Qᵀ x` with `Q` the orthonormalised Gaussian `[d, rank]` drawn from `seed`
    (no bias, no labels). Erasing the same rank as a fitted eraser at random says how much of
    an effect any rank-`k` edit at that site would have.

    Args:
        model: The `HookedRewardModel`.
        hook: The hook point (an activation `[batch, pos, d]`).
        rank: How many random directions to remove.
        seed: The seed of the directions.
        position: Where it acts, as for `fit_eraser`.

    Returns:
        The `ConceptEraser` (`kind="random"`).

    Raises:
        UnknownHookError: `hook` is not a hook point of the model.
        InvalidArgumentError: `rank` outside `[1, d]`, or a hook whose activation is not
            `[batch, pos, d]`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.erasure import random_eraser
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> eraser = random_eraser(model, hook="blocks.1.hook_resid_pre", rank=3, seed=4)
        >>> P = eraser.eraser.P
        >>> round(float(torch.trace(torch.eye(64) - P))), bool(torch.allclose(P @ P, P, atol=1e-5))
        (3, True)
    """
    model.check_hook_names([hook])
    _check_position(position)
    d = _width(model, hook)
    if not isinstance(rank, int) or not 1 <= rank <= d:
        raise InvalidArgumentError(f"rank must be an integer in [1, {d}], got {rank!r}")
    from concept_erasure import LeaceEraser

    gen = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(d, rank, generator=gen, dtype=torch.float64))
    device = next(model.parameters()).device
    q = q.float().to(device)
    eraser = LeaceEraser(q, q.T.contiguous(), None)
    return ConceptEraser(hook, position, eraser, rank, f"random rank {rank}", "random", 0)


# ---- the probe ---------------------------------------------------------------------------------
def probe_accuracy(
    train_x: Float[Tensor, "n d"],
    train_y: Sequence[int] | Tensor,
    test_x: Float[Tensor, "m d"],
    test_y: Sequence[int] | Tensor,
    *,
    l2: float = 1e-3,
    max_iter: int = 200,
) -> float:
    """Held-out accuracy of a fresh L2-regularised logistic-regression probe.

    The features are standardised with the training split's mean and standard deviation; the
    probe (weights from zero) minimises the mean cross-entropy plus `l2 · |w|²` by L-BFGS in
    float64, and predicts class 1 where its logit is positive.

    Args:
        train_x: The training activations.
        train_y: Their 0/1 labels.
        test_x: The held-out activations.
        test_y: Their 0/1 labels.
        l2: The weight penalty.
        max_iter: L-BFGS iterations.

    Returns:
        The share of held-out rows classified correctly.

    Raises:
        InvalidArgumentError: Labels other than 0/1, or one class only in the training split.
        ShapeMismatchError: Labels not one per row.

    Examples:
        >>> import torch
        >>> gen = torch.Generator().manual_seed(0)
        >>> y = torch.arange(200) % 2
        >>> x = torch.randn(200, 8, generator=gen) + 2.0 * y[:, None]
        >>> probe_accuracy(x[:100], y[:100], x[100:], y[100:]) > 0.95
        True
    """
    ytr, yte = _binary(train_y, len(train_x)), _binary(test_y, len(test_x))
    if ytr.unique().numel() < 2:
        raise InvalidArgumentError("the probe's training split holds one class only")
    a, b = train_x.detach().double().cpu(), test_x.detach().double().cpu()
    mu, sd = a.mean(0), a.std(0).clamp_min(1e-8)
    a, b = (a - mu) / sd, (b - mu) / sd
    w = torch.zeros(a.shape[1] + 1, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w], lr=1.0, max_iter=max_iter, line_search_fn="strong_wolfe")
    target = ytr.double()

    def closure() -> Tensor:
        opt.zero_grad()
        logits = a @ w[:-1] + w[-1]
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, target)
        loss = loss + l2 * w[:-1].square().sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    with torch.no_grad():
        predicted = (b @ w[:-1] + w[-1]) > 0
    return float((predicted.long() == yte).double().mean())


# ---- the analysis ------------------------------------------------------------------------------
@dataclass(frozen=True)
class ErasureResult(Result):
    """Each contrast pair's margin before and after erasure, and the probe certificate.

    Attributes:
        features: Each pair's feature.
        margin_before: Each pair's margin `r(edited) − r(base)` without erasure.
        margin_after: The same with the eraser applied to both sides.
        hook: The eraser's hook point.
        position: The eraser's position.
        concept: The erased concept's name.
        kind: `"leace"` or `"random"`.
        rank: The eraser's rank.
        probe_before: A fresh probe's held-out accuracy at the site before erasure (NaN: no
            held-out examples).
        probe_after: The same after erasure.
        chance: The held-out majority-class share (what a constant predictor scores).
        n_heldout: Held-out conversations the probe was fitted and scored on (both splits).
        n_boot: Bootstrap resamples of the intervals.
        seed: The bootstrap's (and the probe split's) seed.

    Examples:
        >>> import torch
        >>> result = ErasureResult(("harmful", "harmful", "length"),
        ...     torch.tensor([-3.0, -3.1, 0.5]), torch.tensor([0.1, -0.1, 0.5]),
        ...     "blocks.2.hook_resid_pre", "reward", "harmful", "leace", 1,
        ...     probe_before=1.0, probe_after=0.5, chance=0.5, n_heldout=40, n_boot=200)
        >>> result.summary()[["feature", "n", "before", "after"]].round(2).values.tolist()
        [['harmful', 2, -3.05, 0.0], ['length', 1, 0.5, 0.5]]
        >>> [(label, round(value, 2)) for label, value in result.top_k(1)]
        [('harmful #0', 3.1)]
    """

    example_axes = axes(features=0, margin_before=0, margin_after=0)
    label_column = "label"
    value_column = "change"
    title = "concept erasure"

    features: tuple[str, ...]
    margin_before: Float[Tensor, " pair"]
    margin_after: Float[Tensor, " pair"]
    hook: str
    position: Position
    concept: str
    kind: str
    rank: int
    probe_before: float = math.nan
    probe_after: float = math.nan
    chance: float = math.nan
    n_heldout: int = 0
    n_boot: int = N_BOOT
    seed: int = 0

    @property
    def change(self) -> Float[Tensor, " pair"]:
        """`margin_after − margin_before`, per pair."""
        return self.margin_after - self.margin_before

    @property
    def feature_names(self) -> list[str]:
        """The pairs' features, in order of first appearance."""
        return list(dict.fromkeys(self.features))

    def to_dataframe(self):
        """One row per pair: label, feature, margin before, after and the change.

        Returns:
            A pandas `DataFrame`.
        """
        return pd.DataFrame(
            {
                "label": [f"{f} #{i}" for i, f in enumerate(self.features)],
                "feature": list(self.features),
                "margin_before": self.margin_before.tolist(),
                "margin_after": self.margin_after.tolist(),
                "change": self.change.tolist(),
            }
        )

    def summary(self):
        """Per feature: pairs, mean margin before and after, mean change, 95% bootstrap CIs.

        Each interval is `stats.bootstrap_ci` of the mean over that feature's pairs (the change
        resampled by pair, so it is the paired interval).

        Returns:
            A pandas `DataFrame`, one row per feature.
        """
        rows = []
        features = np.array(self.features)
        for i, feature in enumerate(self.feature_names):
            rows_of = features == feature
            row: dict[str, Any] = {"feature": feature, "n": int(rows_of.sum())}
            for name, values in (
                ("before", self.margin_before),
                ("after", self.margin_after),
                ("change", self.change),
            ):
                ci = bootstrap_ci(values.numpy()[rows_of], n_boot=self.n_boot, seed=self.seed + i)
                row[name], row[f"{name}_low"], row[f"{name}_high"] = ci
            rows.append(row)
        return pd.DataFrame(rows)

    def top_k(self, k: int = 10):
        """The `k` pairs whose margin erasure changed most.

        Args:
            k: How many pairs.

        Returns:
            `(label, change)` pairs as a `TopK`.
        """
        frame = self.to_dataframe()
        return top_entries(frame["label"].tolist(), frame["change"].tolist(), k, "change")

    @property
    def certificate(self) -> dict[str, float]:
        """The probe's held-out accuracy before and after erasure, and chance."""
        return {"before": self.probe_before, "after": self.probe_after, "chance": self.chance}

    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """Mean margin per feature before and after erasure, with 95% bootstrap intervals.

        The title carries the certificate (probe accuracy before → after, and chance).

        Args:
            ax: Matplotlib axes to draw the static form on.
            backend: `"plotly"` or `"matplotlib"` (see `reward_lens_tl.plotting`).

        Returns:
            The figure.
        """
        frame = self.summary()
        names = frame["feature"].tolist()
        x = np.arange(len(names), dtype=float)
        width = 0.38
        title = f"erasing {self.concept} at {self.hook} ({self.position})"
        if not math.isnan(self.probe_before):
            title += (
                f"; probe accuracy {self.probe_before:.2f} → {self.probe_after:.2f} "
                f"(chance {self.chance:.2f})"
            )
        fig = None
        for i, side in enumerate(("before", "after")):
            mean = frame[side].to_numpy()
            one = bar(
                names,
                mean,
                xaxis="pairs' feature",
                yaxis="mean margin (edited − base)",
                title=title,
                colors=PALETTE[i],
                error=(mean - frame[f"{side}_low"].to_numpy(), frame[f"{side}_high"] - mean),
                horizontal=False,
                width=min(1200, max(760, 160 + 90 * len(names))),
            )
            trace = one.data[0]
            trace.update(
                x=x + (i - 0.5) * width,
                width=width,
                name=f"{side} erasure",
                showlegend=True,
                customdata=np.stack(
                    [
                        np.array(names, dtype=object),
                        frame[f"{side}_low"].to_numpy(),
                        frame[f"{side}_high"].to_numpy(),
                    ],
                    1,
                ),
                hovertemplate=f"{side} erasure<br>%{{customdata[0]}}<br>mean margin: %{{y:.4g}} "
                "(95% CI %{customdata[1]:.4g} to %{customdata[2]:.4g})<extra></extra>",
            )
            if fig is None:
                fig = one
            else:
                fig.add_trace(trace)
        assert fig is not None
        fig.update_layout(showlegend=True, barmode="overlay")
        return render(fig, backend, ax)


def concept_erasure(
    model,
    eraser: ConceptEraser,
    pairs: Sequence[Any],
    *,
    heldout: Sequence[Any] | None = None,
    heldout_labels: Sequence[float] | Tensor | None = None,
    objective: int | None = None,
    n_boot: int = N_BOOT,
    seed: int = 0,
    batch_size: int = 32,
    padding_side: PaddingSide = "left",
) -> ErasureResult:
    """Each pair's margin before and after erasure, with the probe certificate.

    Margins are `r(edited) − r(base)` (`r(chosen) − r(rejected)` for preference pairs), the
    eraser applied to both sides. The certificate: a
    fresh logistic-regression probe (`probe_accuracy`) is fitted on half of the held-out
    conversations (split by pair, seeded) and scored on the other half, once on the site's
    activations and once on the same activations erased (`eraser.erase`, what the hook feeds
    forward). LEACE promises that no linear probe beats chance *on the data it was fitted on*;
    on held-out data the probe's accuracy after erasure is the measured certificate.

    Args:
        model: The `HookedRewardModel`.
        eraser: The eraser (`fit_eraser`, `random_eraser`).
        pairs: Pairs (`contrast.pair_sides`): contrast pairs (margin edited − base, grouped by
            their feature), `PreferencePair`s (chosen − rejected, grouped by subset) or
            `(chosen, rejected)` tuples of conversations.
        heldout: Held-out examples for the certificate: pairs (as in `fit_eraser`) or
            conversations with `heldout_labels` (two classes); `None`: no certificate.
        heldout_labels: One 0/1 label per held-out conversation; `None` for pairs.
        objective: Read this objective's head output (default: `model.rewards`).
        n_boot: Bootstrap resamples of the intervals.
        seed: The seed of the intervals and of the probe's split.
        batch_size: Conversations per forward.
        padding_side: `"left"` or `"right"` (the numbers are the same).

    Returns:
        The `ErasureResult`.

    Raises:
        EmptyInputError: No pairs.
        InvalidArgumentError: Held-out labels of more than two classes, or too few held-out
            conversations to split.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.erasure import concept_erasure, random_eraser
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model, task = HookedRewardModel.from_pretrained(zoo_path("scalar")), load_task().task
        >>> eraser = random_eraser(model, hook="blocks.2.hook_resid_pre")
        >>> result = concept_erasure(model, eraser, task.contrast_pairs("harmful", 10, seed=1))
        >>> bool(result.change.abs().mean() < 0.5), math.isnan(result.probe_before)
        (True, True)
    """
    sides = [pair_sides(model, p) for p in pairs]
    if not sides:
        raise EmptyInputError("concept_erasure needs at least one pair")
    convs = [c for first, second, _ in sides for c in (first, second)]
    before = _rewards(model, convs, None, objective, batch_size, padding_side)
    after = _rewards(model, convs, eraser, objective, batch_size, padding_side)
    probe = (math.nan, math.nan, math.nan, 0)
    if heldout is not None:
        probe = _certificate(model, eraser, heldout, heldout_labels, seed, batch_size, padding_side)
    return ErasureResult(
        tuple(group for _, _, group in sides),
        (before[0::2] - before[1::2]).float().cpu(),
        (after[0::2] - after[1::2]).float().cpu(),
        eraser.hook,
        eraser.position,
        eraser.concept,
        eraser.kind,
        eraser.rank,
        *probe,
        n_boot=n_boot,
        seed=seed,
    )


# ---- where a concept is present ----------------------------------------------------------------
@dataclass(frozen=True)
class ConceptPresence(Result):
    """A fresh probe's held-out accuracy for a concept at each site (before any erasure).

    Attributes:
        sites: The hook points, in the order probed.
        accuracy: The probe's held-out accuracy at each.
        chance: The held-out majority-class share.
        position: Where the activations were read.
        n: Held-out conversations (both splits).

    Examples:
        >>> import torch
        >>> presence = ConceptPresence(("a", "b"), torch.tensor([0.5, 1.0]), 0.5, "reward", 40)
        >>> presence.first_present(0.9)
        'b'
    """

    no_example_axis = "it is one accuracy per site, an aggregate over conversations"
    label_column = "site"
    value_column = "accuracy"
    title = "where the concept is linearly present"

    sites: tuple[str, ...]
    accuracy: Float[Tensor, " site"]
    chance: float
    position: Position
    n: int

    def to_dataframe(self):
        """One row per site: the site and the probe's accuracy.

        Returns:
            A pandas `DataFrame`.
        """
        return pd.DataFrame({"site": list(self.sites), "accuracy": self.accuracy.tolist()})

    def first_present(self, threshold: float = 0.9) -> str | None:
        """The first site where the probe's accuracy reaches `threshold` (`None`: none).

        Args:
            threshold: The accuracy that counts as present.

        Returns:
            The hook name, or `None`.
        """
        for site, acc in zip(self.sites, self.accuracy.tolist(), strict=True):
            if acc >= threshold:
                return site
        return None

    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """Probe accuracy per site, chance as a dashed line.

        Args:
            ax: Matplotlib axes to draw the static form on.
            backend: `"plotly"` or `"matplotlib"` (see `reward_lens_tl.plotting`).

        Returns:
            The figure.
        """
        fig = line(
            {"probe accuracy": self.accuracy.numpy()},
            x=list(self.sites),
            xaxis="site",
            yaxis="held-out probe accuracy",
            title=f"where the concept is linearly present ({self.position})",
        )
        fig.add_hline(y=self.chance, line=dict(color="gray", dash="dash", width=1))
        fig.update_yaxes(range=[0.0, 1.05])
        return render(fig, backend, ax)


def concept_presence(
    model,
    examples: Sequence[Any],
    labels: Sequence[float] | Tensor | None = None,
    *,
    hooks: Sequence[str] | None = None,
    position: Position = "reward",
    seed: int = 0,
    batch_size: int = 32,
    padding_side: PaddingSide = "left",
) -> ConceptPresence:
    """A fresh probe's held-out accuracy for a concept at each site (no erasure).

    The conversations are split in half (by pair, seeded); the probe (`probe_accuracy`) is
    fitted on one half at each site and scored on the other.

    Args:
        model: The `HookedRewardModel`.
        examples: Contrast pairs (`ContrastPair`, zoo `ExamplePair`; with `labels=None` the base
            side is labelled 0 and the edited side 1), or conversations (`EncodedConversation`,
            zoo `Example`) with `labels`.
        labels: One 0/1 label per conversation; `None` for pairs.
        hooks: The sites (default: every `hook_resid_pre`, then the last `hook_resid_post`).
        position: Where to read, as for `fit_eraser`.
        seed: The seed of the split.
        batch_size: Conversations per forward.
        padding_side: `"left"` or `"right"`.

    Returns:
        The `ConceptPresence`.

    Raises:
        UnknownHookError: A hook that is not a hook point of the model.
        InvalidArgumentError: Labels of more than two classes, or too few conversations.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.erasure import concept_presence
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model, task = HookedRewardModel.from_pretrained(zoo_path("scalar")), load_task().task
        >>> examples = task.examples(300, seed=0)
        >>> harmful = [int(bool(e.feature_positions["harmful"])) for e in examples]
        >>> presence = concept_presence(model, examples, harmful)
        >>> presence.first_present(0.95), round(float(presence.accuracy[0]), 2)  # chance 0.68
        ('blocks.1.hook_resid_pre', 0.68)
    """
    n_layers = model.cfg.n_layers
    sites = (
        list(hooks)
        if hooks is not None
        else [
            *(f"blocks.{i}.hook_resid_pre" for i in range(n_layers)),
            f"blocks.{n_layers - 1}.hook_resid_post",
        ]
    )
    model.check_hook_names(sites)
    _check_position(position)
    convs, z, groups = _probe_data(model, examples, labels)
    train, test = _split(groups, seed)
    accuracy = []
    for site in sites:
        x, owner = _site_activations(model, convs, site, position, batch_size, padding_side)
        accuracy.append(_split_accuracy(x, z[owner], owner, train, test))
    chance = _chance(z, test)
    return ConceptPresence(tuple(sites), torch.tensor(accuracy), chance, position, len(convs))


# ---- internals ---------------------------------------------------------------------------------
def _check_position(position: Any) -> None:
    if isinstance(position, bool) or not (
        position in ("reward", "response") or isinstance(position, int)
    ):
        raise InvalidArgumentError(
            f"position must be 'reward', 'response' or an integer index, got {position!r}"
        )


def _labelled(
    model, examples, labels
) -> tuple[list[EncodedConversation], Tensor, str | None, bool]:
    """Conversations, one label each, the pairs' group (if all share one), whether paired.

    Without labels the examples are pairs (`contrast.pair_sides`): the side that should score
    higher (edited, chosen) is labelled 1, the other 0. With labels they are conversations
    (`contrast.as_conversation`: encodings, zoo examples, `(prompt, response)` text).
    """
    examples = list(examples)
    if not examples:
        raise EmptyInputError("no examples: pass pairs, or conversations with labels")
    if labels is None:
        if not all(is_pair(e) for e in examples):
            raise InvalidArgumentError(
                "without labels, examples must be pairs (contrast pairs: base 0, edited 1; "
                "preference pairs: rejected 0, chosen 1); pass labels= for conversations"
            )
        sides = [pair_sides(model, e) for e in examples]
        convs = [c for first, second, _ in sides for c in (second, first)]
        z = torch.tensor([0.0, 1.0] * len(sides))
        names = {group for _, _, group in sides}
        return convs, z, names.pop() if len(names) == 1 else None, True
    if any(is_pair(e) for e in examples):
        raise InvalidArgumentError(
            "labels were given with pairs: pairs are labelled already (the second side 0, the "
            "first 1); leave labels out, or pass conversations"
        )
    try:
        z = torch.as_tensor(labels, dtype=torch.float64).reshape(-1)
    except (TypeError, ValueError) as err:
        raise ArgumentTypeError(f"labels must be numbers, one per example: {err}") from err
    if z.numel() != len(examples):
        raise ShapeMismatchError(
            f"{z.numel()} labels for {len(examples)} examples: pass one label per example"
        )
    if not bool(torch.isfinite(z).all()):
        raise InvalidArgumentError("labels must be finite numbers")
    return [as_conversation(model, e) for e in examples], z, None, False


def _probe_data(model, examples, labels) -> tuple[list[EncodedConversation], Tensor, Tensor]:
    """Conversations, 0/1 labels and the split groups (a pair's two sides share one)."""
    convs, z, _, paired = _labelled(model, examples, labels)
    values = z.unique()
    if values.numel() != 2:
        raise InvalidArgumentError(
            f"the probe needs exactly two classes, got the label values {values.tolist()[:8]}"
        )
    z = (z == values[1]).long()
    groups = torch.arange(len(convs)) // 2 if paired else torch.arange(len(convs))
    if int(groups.max()) + 1 < 4:
        raise InvalidArgumentError(
            "the probe needs at least 4 held-out pairs or conversations (two per split)"
        )
    return convs, z, groups


def _split(groups: Tensor, seed: int) -> tuple[Tensor, Tensor]:
    """Boolean masks of the probe's training and test conversations (half the groups each)."""
    n = int(groups.max()) + 1
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    in_train = torch.zeros(n, dtype=torch.bool)
    in_train[order[: n // 2]] = True
    return in_train[groups], ~in_train[groups]


def _split_accuracy(x: Tensor, y: Tensor, owner: Tensor, train: Tensor, test: Tensor) -> float:
    tr, te = train[owner], test[owner]
    return probe_accuracy(x[tr], y[tr], x[te], y[te])


def _binary(labels: Sequence[int] | Tensor, n: int) -> Tensor:
    y = torch.as_tensor(labels).reshape(-1).cpu()
    if y.numel() != n:
        raise ShapeMismatchError(f"{y.numel()} labels for {n} rows: pass one label per row")
    if not bool(((y == 0) | (y == 1)).all()):
        raise InvalidArgumentError("probe labels must be 0 or 1")
    return y.long()


def _chance(z: Tensor, test: Tensor) -> float:
    share = float(z[test].double().mean())
    return max(share, 1 - share)


def _certificate(model, eraser, heldout, labels, seed, batch_size, padding_side):
    convs, z, groups = _probe_data(model, heldout, labels)
    train, test = _split(groups, seed)
    x, owner = _site_activations(
        model, convs, eraser.hook, eraser.position, batch_size, padding_side
    )
    y = z[owner]
    before = _split_accuracy(x, y, owner, train, test)
    after = _split_accuracy(eraser.erase(x), y, owner, train, test)
    return before, after, _chance(z, test), len(convs)


def _mask(model, ids: Tensor, attention_mask: Tensor | None) -> Tensor:
    if attention_mask is not None:
        if attention_mask.shape != ids.shape:
            raise ShapeMismatchError(
                f"attention_mask {tuple(attention_mask.shape)} for ids {tuple(ids.shape)}"
            )
        return attention_mask.to(ids.device).long()
    mask = None
    with contextlib.suppress(MissingAttentionMaskError):
        mask = model.infer_attention_mask(ids)
    return torch.ones_like(ids) if mask is None else mask.long()


def _site_mask(model, position, ids, mask, response_mask) -> Tensor:
    """`[batch, pos]` booleans: where `position` falls in each row of a padded batch."""
    _check_position(position)
    where = torch.zeros(ids.shape, dtype=torch.bool, device=ids.device)
    rows = torch.arange(ids.shape[0], device=ids.device)
    if position == "reward":
        where[rows, model.pool_positions(ids, mask)] = True
        return where
    if position == "response":
        if response_mask is None:
            raise UsageError(
                "position='response' needs response_mask ([batch, pos], ones on each row's "
                "response tokens); ConceptEraser.rewards and concept_erasure build it"
            )
        if response_mask.shape != ids.shape:
            raise ShapeMismatchError(
                f"response_mask {tuple(response_mask.shape)} for ids {tuple(ids.shape)}"
            )
        return response_mask.to(ids.device).bool() & mask.bool()
    for b in range(ids.shape[0]):
        real = mask[b].nonzero().flatten()
        if not -len(real) <= position < len(real):
            raise InvalidArgumentError(
                f"position {position} is outside row {b}, which has {len(real)} real tokens "
                f"(an index into each unpadded row, negative from its end)"
            )
        where[b, real[position]] = True
    return where


def _response_mask(model, convs: Sequence[EncodedConversation], mask: Tensor) -> Tensor:
    """Each row's response tokens in a padded batch (padding-aware)."""
    where = torch.zeros(mask.shape, dtype=torch.bool, device=mask.device)
    eos = getattr(getattr(model, "tokenizer", None), "eos_token_id", None)
    for b, conv in enumerate(convs):
        real = mask[b].nonzero().flatten()
        span = real[conv.response_start : conv.suffix_start(eos)]
        if not len(span):
            raise InvalidArgumentError(
                f"conversation {b} has no response tokens to erase at (position='response')"
            )
        where[b, span] = True
    return where


def _batches(model, convs, batch_size: int, padding_side: PaddingSide):
    """`(start, conversations, ids, mask)` per batch, on the model's device."""
    if not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidArgumentError(f"batch_size must be a positive integer, got {batch_size!r}")
    device = next(model.parameters()).device
    for start in range(0, len(convs), batch_size):
        chunk = convs[start : start + batch_size]
        ids, mask = pad_batch(chunk, model.pad_token_id, padding_side)
        ids, mask = ids.to(device), mask.to(device)
        yield start, chunk, ids, mask


def _site_activations(model, convs, hook, position, batch_size, padding_side):
    """`(x [rows, d], owner [rows])`: the activations at the site and whose they are."""
    xs, owners = [], []
    store: dict[str, Tensor] = {}

    def grab(act: Tensor, hook: Any) -> None:
        store["act"] = act.detach()

    for start, chunk, ids, mask in _batches(model, convs, batch_size, padding_side):
        response = _response_mask(model, chunk, mask) if position == "response" else None
        where = _site_mask(model, position, ids, mask, response)

        with torch.no_grad(), warnings.catch_warnings():
            # positions are read from the mask: a right-padded batch is read where it should be
            warnings.simplefilter("ignore", ReadingPositionWarning)
            model.run_with_hooks(
                ids, return_type=None, attention_mask=mask, fwd_hooks=[(hook, grab)]
            )
        act = store["act"]
        if act.ndim != 3 or act.shape[:2] != ids.shape:
            raise InvalidArgumentError(
                f"{hook} holds {tuple(act.shape)}, not [batch, pos, d]: erase at a residual, "
                "attention-output or MLP-output hook (for per-head hooks use hook_result / "
                "hook_attn_out)"
            )
        rows, cols = where.nonzero(as_tuple=True)
        xs.append(act[rows, cols].float().cpu())
        owners.append(rows.cpu() + start)
    return torch.cat(xs), torch.cat(owners)


def _width(model, hook: str) -> int:
    """The width of `hook`'s activation (one short forward)."""
    token = 1 if model.pad_token_id == 0 else 0
    ids = torch.full((1, 2), token, device=next(model.parameters()).device)
    store: dict[str, Tensor] = {}

    def grab(act: Tensor, hook: Any) -> None:
        store["act"] = act

    with torch.no_grad():
        model.run_with_hooks(ids, return_type=None, fwd_hooks=[(hook, grab)])
    act = store["act"]
    if act.ndim != 3:
        raise InvalidArgumentError(
            f"{hook} holds {tuple(act.shape)}, not [batch, pos, d]: erase at a residual, "
            "attention-output or MLP-output hook"
        )
    return int(act.shape[-1])


def _read(model, ids: Tensor, mask: Tensor, objective: int | None) -> Tensor:
    if objective is not None:
        out = model.objective_rewards(ids, mask)
        if not -out.shape[1] <= objective < out.shape[1]:
            raise InvalidArgumentError(
                f"objective {objective} outside the head's {out.shape[1]} objectives"
            )
        return out[:, objective]
    out = model.rewards(ids, mask)
    if out.ndim == 2:
        if out.shape[1] != 1:
            raise AmbiguousObjectiveError(
                f"the model has {out.shape[1]} objectives: pass objective= to say which"
            )
        out = out[:, 0]
    return out


def _rewards(model, convs, eraser, objective, batch_size, padding_side) -> Tensor:
    """Rewards of `convs`, with `eraser` applied (or not)."""
    out = []
    for _, chunk, ids, mask in _batches(model, convs, batch_size, padding_side):
        hooks: list = []
        if eraser is not None:
            response = _response_mask(model, chunk, mask) if eraser.position == "response" else None
            hooks = eraser.fwd_hooks(model, ids, mask, response_mask=response)
        with torch.no_grad(), model.hooks(hooks):
            out.append(_read(model, ids, mask, objective).detach().float().cpu())
    return torch.cat(out)
