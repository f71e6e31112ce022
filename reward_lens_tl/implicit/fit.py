"""Which features of the policy's activations explain its implicit reward.

This is the seed study's method, and it shows how that differs from an explicit reward model.

1. `policy_features`: features of each response from the policy's activations at one hook
   — the raw residual, or SAE latents (sae_lens `SAE.encode`) — pooled over the positions that
   predict response tokens (`pooling="sum"` by default: the implicit reward is a sum over those
   positions, so a per-position linear read-out sums to a linear function of the summed
   features), or read at the last token (`"last"`, where an explicit RM reads);
2. `fit_reward`: a ridge regression (closed form, features standardised on the training
   split) from features to a reward, scored on held-out *pairs* (chosen and rejected of a pair
   always fall in the same split): R², Spearman (`reward_lens_tl.stats.spearman`) and
   pairwise agreement; the features ranked by their standardised weight;
3. `divergence`: the same features fitted to two rewards (implicit and explicit), weights
   side by side in each reward's own standard deviations: which features one reward weights and
   the other does not. `implicit_feature_fit` runs all three.

Examples:
    >>> import torch
    >>> x = torch.randn(200, 3); y = 2 * x[:, 0] - x[:, 2]
    >>> fit = fit_reward(FeatureMatrix(x, ("a", "b", "c"), torch.arange(200) // 2), y, alpha=1e-3)
    >>> [name for name, _ in fit.top_k(2)], fit.r2 > 0.99
    (['a', 'c'], True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..errors import InvalidArgumentError, ShapeMismatchError
from ..plotting import PALETTE, SIGNED, Backend, bar, render
from ..results import Result, TopK, top_entries
from ..stats import spearman
from .batches import pair_chunks, predicting_mask

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "FeatureDivergence",
    "FeatureFitComparison",
    "FeatureMatrix",
    "RewardFit",
    "divergence",
    "explicit_pair_rewards",
    "fit_reward",
    "implicit_feature_fit",
    "policy_activations",
    "policy_features",
]

Pooling = Literal["sum", "mean", "last"]


@dataclass(frozen=True)
class FeatureMatrix:
    """Features `values [example, feature]` with their names and each example's pair index.

    Rows `2i` and `2i + 1` are pair `i`'s chosen and rejected.

    Args:
        values: The features, `[example, feature]`.
        names: One name per feature.
        groups: Each example's pair index.
        hook_name: The hook the features were read at.

    Raises:
        ShapeMismatchError: When `values`, `names` and `groups` do not match.

    Examples:
        >>> import torch
        >>> from reward_lens_tl.errors import ShapeMismatchError
        >>> from reward_lens_tl.implicit import FeatureMatrix
        >>> features = FeatureMatrix(torch.ones(6, 2), ("a", "b"), torch.arange(6) // 2)
        >>> features.groups.tolist()  # rows 2i, 2i + 1: pair i's chosen and rejected
        [0, 0, 1, 1, 2, 2]
        >>> try:
        ...     FeatureMatrix(torch.ones(6, 2), ("a",), torch.arange(6) // 2)
        ... except ShapeMismatchError as e:
        ...     print(e)
        features (6, 2) do not match 1 names
    """

    values: Float[Tensor, "example feature"]
    names: tuple[str, ...]
    groups: Int[Tensor, " example"]
    hook_name: str = ""

    def __post_init__(self):
        """Check that the shapes match."""
        if self.values.ndim != 2 or self.values.shape[1] != len(self.names):
            raise ShapeMismatchError(
                f"features {tuple(self.values.shape)} do not match {len(self.names)} names"
            )
        if self.groups.shape[0] != self.values.shape[0]:
            raise ShapeMismatchError(
                f"{self.groups.shape[0]} group labels for {self.values.shape[0]} examples"
            )


def _pool(acts: Tensor, ids: Tensor, attention: Tensor, resp: Tensor, pooling: Pooling) -> Tensor:
    if pooling == "last":  # each row's last real token (the last column when left padded)
        columns = torch.arange(attention.shape[-1], device=attention.device)
        last = (columns * (attention != 0)).argmax(-1)
        return acts[torch.arange(acts.shape[0]), last.to(acts.device)]
    predicting = predicting_mask(resp, acts.dtype)
    pooled = (acts * predicting[..., None]).sum(1)
    return pooled / predicting.sum(1, keepdim=True) if pooling == "mean" else pooled


def policy_features(
    model,
    pairs: Sequence,
    hook_name: str,
    *,
    sae=None,
    pooling: Pooling = "sum",
    batch_size: int = 16,
) -> FeatureMatrix:
    """Features of every pair's chosen and rejected response from the policy at `hook_name`.

    They are SAE latents when `sae` is given; its hook must be `hook_name`.

    Args:
        model: The implicit reward model (its policy is read).
        pairs: The preference pairs.
        hook_name: The hook to read.
        sae: An sae_lens SAE whose latents are the features, or `None` for the raw activations.
        pooling: `"sum"` or `"mean"` over the positions that predict response tokens, or
            `"last"` (the last token).
        batch_size: Pairs per forward.

    Returns:
        The features, rows interleaved `chosen_i, rejected_i`.

    Raises:
        InvalidArgumentError: When `pooling` is unknown or the SAE reads another hook.

    Examples:
        >>> from reward_lens_tl.implicit import ImplicitRewardModel, policy_features
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> irm = ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))
        >>> pairs = load_task().task.contrast_pairs("harmful", 2, seed=0)
        >>> summed = policy_features(irm, pairs, "blocks.1.hook_resid_post")
        >>> tuple(summed.values.shape), summed.names[:2], summed.groups.tolist()
        ((4, 64), ('d0', 'd1'), [0, 0, 1, 1])
        >>> mean = policy_features(irm, pairs, "blocks.1.hook_resid_post", pooling="mean")
        >>> (summed.values / mean.values)[:, 0].round().tolist()  # × the response's tokens
        [12.0, 12.0, 11.0, 11.0]
        >>> [len(p.edited.input_ids) - p.edited.response_start for p in pairs]
        [12, 11]
    """
    if pooling not in ("sum", "mean", "last"):
        raise InvalidArgumentError(f"pooling must be 'sum', 'mean' or 'last', got {pooling!r}")
    if sae is not None and sae.cfg.metadata.hook_name != hook_name:
        raise InvalidArgumentError(
            f"the SAE reads {sae.cfg.metadata.hook_name!r}, not {hook_name!r}"
        )
    policy = model.policy
    rows: list[Tensor] = []
    for encs, n in pair_chunks(model, pairs, batch_size):
        ids, attention, resp = model.batch(encs)
        model.check_inputs(ids, resp, attention)
        with torch.no_grad():
            _, cache = policy.run_with_cache(
                ids, attention_mask=attention, names_filter=[hook_name]
            )
            acts = cache[hook_name]
            if sae is not None:
                acts = sae.encode(acts.to(sae.W_enc.dtype))
            pooled = _pool(acts.float(), ids, attention, resp, pooling).cpu()
        # interleave: chosen_i, rejected_i
        rows.append(torch.stack([pooled[:n], pooled[n:]], 1).reshape(2 * n, -1))
    values = torch.cat(rows)
    prefix = "latent" if sae is not None else "d"
    names = tuple(f"{prefix}{i}" for i in range(values.shape[1]))
    groups = torch.arange(values.shape[0]) // 2
    return FeatureMatrix(values, names, groups, hook_name)


def policy_activations(
    model, pairs: Sequence, hook_name: str, *, batch_size: int = 16
) -> Float[Tensor, "token d"]:
    """The policy's activations at `hook_name` on every non-padding token of the pairs.

    They cover both conversations of every pair, `[tokens, d]` (e.g. to train an SAE with
    `reward_lens_tl.sae.train_topk_sae`).

    Args:
        model: The implicit reward model (its policy is read).
        pairs: The preference pairs.
        hook_name: The hook to read.
        batch_size: Pairs per forward.

    Returns:
        The activations, `[tokens, d]`.

    Examples:
        >>> from reward_lens_tl.implicit import ImplicitRewardModel, policy_activations
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> irm = ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))
        >>> pairs = load_task().task.contrast_pairs("harmful", 2, seed=0)
        >>> acts = policy_activations(irm, pairs, "blocks.1.hook_resid_post")
        >>> tuple(acts.shape)  # every token of every conversation, padding left out
        (78, 64)
        >>> sum(len(p.edited.input_ids) + len(p.base.input_ids) for p in pairs)
        78
    """
    out = []
    for encs, _ in pair_chunks(model, pairs, batch_size):
        ids, attention, _ = model.batch(encs)
        with torch.no_grad():
            _, cache = model.policy.run_with_cache(
                ids, attention_mask=attention, names_filter=[hook_name]
            )
        out.append(cache[hook_name][attention.bool()].float().cpu())
    return torch.cat(out)


@dataclass(frozen=True)
class RewardFit(Result):
    """A ridge fit of one reward on features, with held-out quality numbers.

    `weights` are per standardised feature (reward units per feature std); `relative` is
    the same divided by the reward's std (comparable across rewards of different scales).

    Args:
        names: One name per feature.
        weights: The weight of each standardised feature.
        intercept: The fit's intercept.
        target_std: The reward's standard deviation on the training split.
        r2: The held-out R².
        spearman: The held-out Spearman correlation.
        pairwise_agreement: The held-out share of pairs ordered alike.
        n_train: Training examples.
        n_test: Held-out examples.
        alpha: The ridge penalty.
        target_name: The reward's name.

    Examples:
        >>> import torch
        >>> from reward_lens_tl.implicit import FeatureMatrix, fit_reward
        >>> x = torch.randn(200, 3, generator=torch.Generator().manual_seed(0))
        >>> features = FeatureMatrix(x, ("a", "b", "c"), torch.arange(200) // 2)
        >>> small = fit_reward(features, 3 * x[:, 0] - x[:, 2], alpha=1e-3)
        >>> large = fit_reward(features, 10 * (3 * x[:, 0] - x[:, 2]) + 5, alpha=1e-3)
        >>> [(name, round(w, 2)) for name, w in large.top_k(2)]  # reward units per feature std
        [('a', 30.38), ('c', -10.84)]
        >>> [round(float(w), 3) for w in (small.relative[0], large.relative[0])]  # scale-free
        [0.961, 0.961]
        >>> bool(torch.allclose(small.relative, large.relative, atol=1e-4))
        True
        >>> summary = large.summary()  # held out: 20 of the 100 pairs
        >>> round(summary["r2"], 6), summary["pairwise_agreement"], summary["n_test"]
        (1.0, 1.0, 40)
    """

    names: tuple[str, ...]
    weights: Float[Tensor, " feature"]
    intercept: float
    target_std: float
    r2: float
    spearman: float
    pairwise_agreement: float
    n_train: int
    n_test: int
    alpha: float
    target_name: str = "reward"

    @property
    def relative(self) -> Float[Tensor, " feature"]:
        """The weights divided by the reward's standard deviation."""
        return self.weights / max(self.target_std, 1e-12)

    def top_k(self, k: int = 10) -> TopK:
        """Features with the largest |standardised weight| (signed).

        Args:
            k: How many features.

        Returns:
            The features and their weights.
        """
        return top_entries(self.names, self.weights.tolist(), k, "weight")

    def summary(self) -> dict:
        """The held-out quality numbers.

        Returns:
            The numbers, by name.
        """
        return {
            "target": self.target_name,
            "r2": self.r2,
            "spearman": self.spearman,
            "pairwise_agreement": self.pairwise_agreement,
            "n_train": self.n_train,
            "n_test": self.n_test,
            "alpha": self.alpha,
        }

    def to_dataframe(self):
        """The weights as a table, by |weight|.

        Returns:
            A `pandas.DataFrame` with `feature`, `weight` and `relative`.
        """
        import pandas as pd

        frame = pd.DataFrame(
            {"feature": self.names, "weight": self.weights.numpy(), "relative": self.relative}
        )
        return frame.reindex(frame["weight"].abs().sort_values(ascending=False).index)

    def plot(self, ax: Axes | None = None, k: int = 15, *, backend: Backend | None = None) -> Any:
        """Bars of the `k` largest weights (red: negative, blue: positive).

        Args:
            ax: Matplotlib axes to draw the static form on.
            k: How many features.
            backend: `"plotly"` or `"matplotlib"` (see `reward_lens_tl.plotting`).

        Returns:
            The figure (not shown).
        """
        top = self.top_k(k)
        fig = bar(
            [name for name, _ in top],
            [weight for _, weight in top],
            xaxis=f"weight per feature std ({self.target_name} units)",
            title=f"Ridge fit of {self.target_name} · held-out R² {self.r2:#.3g}",
            colors=SIGNED,
        )
        return render(fig, backend, ax)


def _split(groups: Tensor, test_fraction: float, seed: int) -> tuple[Tensor, Tensor]:
    unique = groups.unique()
    gen = torch.Generator().manual_seed(seed)
    perm = unique[torch.randperm(len(unique), generator=gen)]
    n_test = max(1, int(round(test_fraction * len(unique))))
    if n_test >= len(unique):
        raise InvalidArgumentError(
            f"{len(unique)} groups cannot be split with test_fraction={test_fraction}; "
            "give more pairs"
        )
    test = torch.isin(groups, perm[:n_test])
    return ~test, test


def ridge(x: Tensor, y: Tensor, alpha: float) -> Tensor:
    """Closed-form ridge weights for centred `x [n, d]` and `y [n]` (dual form if d > n).

    Args:
        x: The centred features, `[n, d]`.
        y: The centred target, `[n]`.
        alpha: The ridge penalty.

    Returns:
        The weights, `[d]`.
    """
    x, y = x.double(), y.double()
    n, d = x.shape
    if d <= n:
        return torch.linalg.solve(x.T @ x + alpha * torch.eye(d, dtype=x.dtype), x.T @ y)
    return x.T @ torch.linalg.solve(x @ x.T + alpha * torch.eye(n, dtype=x.dtype), y)


def pair_agreement(pred: Tensor, target: Tensor, groups: Tensor) -> float:
    """Share of pairs (two rows with one group label; target not tied) ordered alike.

    Args:
        pred: The predicted rewards.
        target: The target rewards.
        groups: Each row's pair index.

    Returns:
        The share, or NaN without an untied pair.
    """
    hits, total = 0, 0
    for g in groups.unique():
        rows = (groups == g).nonzero().flatten()
        if len(rows) != 2:
            continue
        dt = target[rows[0]] - target[rows[1]]
        if dt == 0:
            continue
        total += 1
        hits += int(torch.sign(pred[rows[0]] - pred[rows[1]]) == torch.sign(dt))
    return hits / total if total else float("nan")


def fit_reward(
    features: FeatureMatrix,
    target: Float[Tensor, " example"],
    *,
    alpha: float = 1.0,
    test_fraction: float = 0.2,
    seed: int = 0,
    target_name: str = "reward",
) -> RewardFit:
    """Ridge fit of `target` on `features` (module docstring); held-out metrics.

    Args:
        features: The features.
        target: The reward of each example.
        alpha: The ridge penalty.
        test_fraction: The share of pairs held out.
        seed: The seed of the split.
        target_name: The reward's name.

    Returns:
        The fit.

    Raises:
        ShapeMismatchError: When `target` and `features` have different numbers of rows.
        InvalidArgumentError: When `alpha` is not positive or the pairs cannot be split.

    Examples:
        >>> import torch
        >>> from reward_lens_tl.implicit import FeatureMatrix, fit_reward
        >>> x = torch.randn(200, 3, generator=torch.Generator().manual_seed(0))
        >>> features = FeatureMatrix(x, ("a", "b", "c"), torch.arange(200) // 2)  # 100 pairs
        >>> fit = fit_reward(features, 3 * x[:, 0] - x[:, 2], alpha=1e-3, target_name="planted")
        >>> [(name, round(w, 2)) for name, w in fit.top_k(2)]  # the planted weights, × std
        [('a', 3.04), ('c', -1.08)]
        >>> abs(float(fit.weights[1])) < 1e-3  # "b" plays no part
        True
        >>> round(fit.r2, 4), fit.pairwise_agreement, fit.n_train, fit.n_test  # 20 pairs held out
        (1.0, 1.0, 160, 40)
    """
    target = torch.as_tensor(target).float().reshape(-1)
    if target.shape[0] != features.values.shape[0]:
        raise ShapeMismatchError(
            f"{target.shape[0]} targets for {features.values.shape[0]} feature rows"
        )
    if not alpha > 0:
        raise InvalidArgumentError(f"alpha must be > 0, got {alpha}")
    train, test = _split(features.groups, test_fraction, seed)
    x = features.values.double()
    mean, std = x[train].mean(0), x[train].std(0)
    std = torch.where(std > 1e-8, std, torch.ones_like(std))
    z = (x - mean) / std
    z[:, x[train].std(0) <= 1e-8] = 0.0  # constant features carry nothing
    y_mean = target[train].double().mean()
    w = ridge(z[train], target[train].double() - y_mean, alpha)
    pred = (z @ w + y_mean).float()
    yt, pt = target[test], pred[test]
    ss_res = float(((yt - pt) ** 2).sum())
    ss_tot = float(((yt - yt.mean()) ** 2).sum())
    return RewardFit(
        names=features.names,
        weights=w.float(),
        intercept=float(y_mean),
        target_std=float(target[train].std()),
        r2=1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan"),
        spearman=spearman(yt, pt),
        pairwise_agreement=pair_agreement(pt, yt, features.groups[test]),
        n_train=int(train.sum()),
        n_test=int(test.sum()),
        alpha=alpha,
        target_name=target_name,
    )


@dataclass(frozen=True)
class FeatureDivergence(Result):
    """Weights of two fits on the same features, in each reward's own std (`relative`).

    A feature is `"<a> only"` when its |weight| is at least `strong` × the largest |weight|
    of fit `a` and below `weak` × the largest of fit `b` (and vice versa); `"both"` when
    strong in both; `"opposite"` when strong in both with opposite signs.

    Args:
        names: One name per feature.
        weight_a: Fit `a`'s relative weights.
        weight_b: Fit `b`'s relative weights.
        name_a: Fit `a`'s reward name.
        name_b: Fit `b`'s reward name.
        verdict: Each feature's verdict.

    Examples:
        >>> import torch
        >>> from reward_lens_tl.implicit import FeatureMatrix, divergence, fit_reward
        >>> x = torch.randn(400, 4, generator=torch.Generator().manual_seed(0))
        >>> features = FeatureMatrix(x, ("a", "b", "c", "d"), torch.arange(400) // 2)
        >>> fit_a = fit_reward(features, 3 * x[:, 0] + x[:, 1], alpha=1e-3, target_name="A")
        >>> fit_b = fit_reward(features, 3 * x[:, 0] - 2 * x[:, 2], alpha=1e-3, target_name="B")
        >>> table = divergence(fit_a, fit_b)
        >>> [(name, round(d, 2)) for name, d in table.top_k(3)]  # in each reward's own std
        [('c', 0.58), ('b', 0.34), ('a', 0.1)]
        >>> table.verdict
        ('both', 'A only', 'B only', '')
    """

    names: tuple[str, ...]
    weight_a: Float[Tensor, " feature"]
    weight_b: Float[Tensor, " feature"]
    name_a: str
    name_b: str
    verdict: tuple[str, ...]

    @property
    def difference(self) -> Float[Tensor, " feature"]:
        """`weight_a − weight_b`."""
        return self.weight_a - self.weight_b

    def top_k(self, k: int = 10) -> TopK:
        """Features with the largest |weight_a − weight_b| (signed difference).

        Args:
            k: How many features.

        Returns:
            The features and their weight differences.
        """
        return top_entries(self.names, self.difference.tolist(), k, "weight difference")

    def to_dataframe(self):
        """Both weights, their difference and the verdict as a table, by |difference|.

        Returns:
            A `pandas.DataFrame`.
        """
        import pandas as pd

        frame = pd.DataFrame(
            {
                "feature": self.names,
                self.name_a: self.weight_a.numpy(),
                self.name_b: self.weight_b.numpy(),
                "difference": self.difference.numpy(),
                "verdict": self.verdict,
            }
        )
        return frame.reindex(frame["difference"].abs().sort_values(ascending=False).index)

    def plot(self, ax: Axes | None = None, k: int = 12, *, backend: Backend | None = None) -> Any:
        """Both fits' weights, side by side, for the `k` features that differ most.

        Each feature has a bar per fit (`name_a` above `name_b`), in each reward's own std;
        hover shows the exact weight and the feature's verdict.

        Args:
            ax: Matplotlib axes to draw the static form on.
            k: How many features.
            backend: `"plotly"` or `"matplotlib"` (see `reward_lens_tl.plotting`).

        Returns:
            The figure (not shown).
        """
        idx = self.difference.abs().argsort(descending=True, stable=True)[:k].tolist()
        names = [self.names[i] for i in idx]
        fig = bar(
            names,
            self.weight_a[idx],
            xaxis="weight per feature std, in each reward's std",
            title=f"Fits of {self.name_a} and {self.name_b}: the {len(idx)} most different "
            "features",
            colors=PALETTE[0],
            height=int(min(1400, max(300, 130 + 40 * len(idx)))),
        )
        hover = [
            f"{name} ({self.verdict[i]})" if self.verdict[i] else name
            for name, i in zip(names, idx, strict=True)
        ]
        # two bars per feature: fit a's just above the feature's tick, fit b's just below
        fig.data[0].update(
            y=[p - 0.2 for p in range(len(idx))],
            width=0.4,
            name=self.name_a,
            customdata=hover,
            hovertemplate=f"%{{customdata}}<br>{self.name_a}: %{{x:.5g}}<extra></extra>",
        )
        fig.add_bar(
            x=self.weight_b[idx].tolist(),
            y=[p + 0.2 for p in range(len(idx))],
            width=0.4,
            orientation="h",
            name=self.name_b,
            marker=dict(color=PALETTE[1]),
            customdata=hover,
            hovertemplate=f"%{{customdata}}<br>{self.name_b}: %{{x:.5g}}<extra></extra>",
        )
        fig.update_layout(barmode="overlay", showlegend=True)
        return render(fig, backend, ax)


def divergence(
    fit_a: RewardFit, fit_b: RewardFit, *, strong: float = 0.3, weak: float = 0.1
) -> FeatureDivergence:
    """Compare two fits on the same features (see `FeatureDivergence`).

    Args:
        fit_a: The first fit.
        fit_b: The second fit.
        strong: The share of a fit's largest |weight| from which a weight counts as strong.
        weak: The share of a fit's largest |weight| below which a weight counts as weak.

    Returns:
        The divergence.

    Raises:
        ShapeMismatchError: When the fits use different features.

    Examples:
        >>> import torch
        >>> from reward_lens_tl.implicit import FeatureMatrix, divergence, fit_reward
        >>> x = torch.randn(400, 4, generator=torch.Generator().manual_seed(0))
        >>> features = FeatureMatrix(x, ("a", "b", "c", "d"), torch.arange(400) // 2)
        >>> fit_a = fit_reward(features, 3 * x[:, 0] + x[:, 1], alpha=1e-3, target_name="A")
        >>> fit_b = fit_reward(features, 3 * x[:, 0] - 2 * x[:, 2], alpha=1e-3, target_name="B")
        >>> dict(zip(features.names, divergence(fit_a, fit_b).verdict))
        {'a': 'both', 'b': 'A only', 'c': 'B only', 'd': ''}
    """
    if fit_a.names != fit_b.names:
        raise ShapeMismatchError("the two fits use different features; fit both on one matrix")
    a, b = fit_a.relative, fit_b.relative
    sa, sb = a.abs() / a.abs().max().clamp_min(1e-12), b.abs() / b.abs().max().clamp_min(1e-12)
    verdict = []
    for i in range(len(a)):
        if sa[i] >= strong and sb[i] >= strong:
            verdict.append("opposite" if a[i] * b[i] < 0 else "both")
        elif sa[i] >= strong and sb[i] < weak:
            verdict.append(f"{fit_a.target_name} only")
        elif sb[i] >= strong and sa[i] < weak:
            verdict.append(f"{fit_b.target_name} only")
        else:
            verdict.append("")
    return FeatureDivergence(
        fit_a.names, a, b, fit_a.target_name, fit_b.target_name, tuple(verdict)
    )


def explicit_pair_rewards(
    explicit, pairs: Sequence, batch_size: int = 16, objective=None
) -> Float[Tensor, " example"]:
    """An explicit reward model's rewards, interleaved `chosen_i, rejected_i`.

    The rows match `policy_features`'s rows.

    Args:
        explicit: The explicit reward model.
        pairs: The preference pairs.
        batch_size: Pairs per forward.
        objective: One objective of a multi-head reward model, or `None` for the pooled reward.

    Returns:
        The rewards.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.pressure.training import zoo_feature_pairs
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> pairs = zoo_feature_pairs(2)["harmful"]  # chosen without the harmful word
        >>> [round(r, 3) for r in explicit_pair_rewards(model, pairs).tolist()]
        [-2.988, -5.908, -5.414, -7.831]
    """
    from ..readout import objective_index

    col = objective_index(explicit, objective) if objective is not None else None
    out = []
    for encs, n in pair_chunks(explicit, pairs, batch_size):
        from ..inputs import pad_batch

        ids, mask = pad_batch(encs, explicit.pad_token_id)
        ids, mask = ids.to(explicit.cfg.device), mask.to(explicit.cfg.device)
        with torch.no_grad():
            r = explicit.objective_rewards(ids, mask)[:, col] if col is not None else None
            r = explicit.pooled_rewards(ids, mask) if r is None else r
        r = r.float().cpu()
        out.append(torch.stack([r[:n], r[n:]], 1).reshape(-1))
    return torch.cat(out)


@dataclass(frozen=True)
class FeatureFitComparison:
    """`implicit_feature_fit`'s result: both fits and their divergence.

    Args:
        features: The features both fits read.
        implicit: The fit of the implicit reward.
        explicit: The fit of the explicit reward.
        divergence: The two fits compared.

    Examples:
        >>> import torch
        >>> from reward_lens_tl.implicit import (
        ...     FeatureFitComparison, FeatureMatrix, divergence, fit_reward)
        >>> x = torch.randn(400, 3, generator=torch.Generator().manual_seed(0))
        >>> features = FeatureMatrix(x, ("a", "b", "c"), torch.arange(400) // 2)
        >>> implicit = fit_reward(features, x[:, 0], alpha=1e-3, target_name="implicit")
        >>> explicit = fit_reward(features, x[:, 1], alpha=1e-3, target_name="explicit")
        >>> compared = divergence(implicit, explicit)
        >>> both = FeatureFitComparison(features, implicit, explicit, compared)
        >>> both.summary()[["target", "r2", "n_test"]].round(3)
             target   r2  n_test
        0  implicit  1.0      80
        1  explicit  1.0      80
        >>> both.divergence.verdict
        ('implicit only', 'explicit only', '')
    """

    features: FeatureMatrix
    implicit: RewardFit
    explicit: RewardFit
    divergence: FeatureDivergence

    def summary(self):
        """Both fits' held-out numbers.

        Returns:
            A `pandas.DataFrame` with one row per fit.
        """
        import pandas as pd

        return pd.DataFrame([self.implicit.summary(), self.explicit.summary()])


def implicit_feature_fit(
    model,
    explicit,
    pairs: Sequence,
    hook_name: str,
    *,
    sae=None,
    pooling: Pooling = "sum",
    alpha: float = 1.0,
    test_fraction: float = 0.2,
    seed: int = 0,
    batch_size: int = 16,
    features: FeatureMatrix | None = None,
) -> FeatureFitComparison:
    """Fit the policy's features to the implicit reward and to `explicit`'s reward; compare.

    The features are read at `hook_name` (or given as `features`), on the same pairs for both
    rewards.

    Args:
        model: The implicit reward model.
        explicit: The explicit reward model.
        pairs: The preference pairs.
        hook_name: The hook to read.
        sae: An sae_lens SAE whose latents are the features, or `None`.
        pooling: `"sum"`, `"mean"` or `"last"` (see `policy_features`).
        alpha: The ridge penalty.
        test_fraction: The share of pairs held out.
        seed: The seed of the split.
        batch_size: Pairs per forward.
        features: Features to fit instead of reading them.

    Returns:
        Both fits and their divergence.

    Examples:
        >>> import random
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.implicit import ImplicitRewardModel, implicit_feature_fit
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> irm = ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))
        >>> scalar = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> task = load_task().task
        >>> pairs = [task.response_pair(random.Random(i)) for i in range(20)]
        >>> hook = "blocks.1.hook_resid_post"
        >>> result = implicit_feature_fit(irm, scalar, pairs, hook, alpha=10.0)
        >>> tuple(result.features.values.shape)  # 40 responses, the policy's d_model
        (40, 64)
        >>> # residuals summed over the response explain the implicit reward (a sum over the same
        >>> # positions) far better than the explicit one (which reads the last token)
        >>> result.summary()[["target", "r2", "pairwise_agreement", "n_test"]].round(3)
             target     r2  pairwise_agreement  n_test
        0  implicit  0.882                 1.0       8
        1  explicit -0.013                 1.0       8
    """
    feats = features or policy_features(
        model, pairs, hook_name, sae=sae, pooling=pooling, batch_size=batch_size
    )
    chosen, rejected = model.pair_rewards(pairs, batch_size)
    implicit_target = torch.stack([chosen, rejected], 1).reshape(-1)
    explicit_target = explicit_pair_rewards(explicit, pairs, batch_size)
    fit_i = fit_reward(
        feats,
        implicit_target,
        target_name="implicit",
        alpha=alpha,
        test_fraction=test_fraction,
        seed=seed,
    )
    fit_e = fit_reward(
        feats,
        explicit_target,
        target_name="explicit",
        alpha=alpha,
        test_fraction=test_fraction,
        seed=seed,
    )
    return FeatureFitComparison(feats, fit_i, fit_e, divergence(fit_i, fit_e))
