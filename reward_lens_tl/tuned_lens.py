"""A tuned reward lens: per-layer affine translators fitted to predict the final reward.

In the spirit of tuned-lens (Belrose et al., 2023), each site `l` gets a translator
`T_l(x) = x + A_l x + b_l` applied to the normalised residual before the reward head. Because
the head is linear with one output per objective, only `A_lᵀ w` and `b_l · w` affect the
prediction, so the translator is exactly a vector `δ_l` and an offset `c_l`:

`tuned_l(x) = lens_l(x) + norm(x) · δ_l + c_l`

where `lens_l` is the plain reward lens (recomputed final norm). `δ_l, c_l` are fitted in
closed form by ridge regression of the final reward's residual `r − lens_l` on `norm(x)`
(deterministic, no learning rate), on a training split of the examples; the report gives the
held-out error per site and how early the reward becomes linearly readable.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.testing import tiny_reward_model, random_batch
    >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    >>> batches = [random_batch(16, seq_len=10, seed=s) for s in range(4)]
    >>> tuned = TunedRewardLens.fit(model, batches)
    >>> tuned.report.labels[-1], tuned.report.heldout_mse[-1] < 1e-8
    ('final', True)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import torch
from jaxtyping import Float, Int
from torch import Tensor

from .errors import InvalidArgumentError
from .lens import SITE_AXIS, Resolution, RewardLensResult, lens_sites
from .pair_batches import pair_batches
from .plotting import PLOT_DOC, Backend, line, render
from .readout import Objective, gather_positions, run_readout
from .results import Result
from .signatures import pasted_docs

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from .model import HookedRewardModel

__all__ = [
    "TunedRewardLens",
]


@dataclass(frozen=True)
class TunedLensReport(Result):
    """Held-out fit of a tuned reward lens, per site."""

    label_column, value_column = "site", "heldout_r2"

    labels: tuple[str, ...]
    heldout_mse: tuple[float, ...]
    heldout_r2: tuple[float, ...]
    lens_heldout_mse: tuple[float, ...]
    n_train: int
    n_heldout: int

    def readable_site(self, r2: float = 0.9) -> str | None:
        """First site whose held-out R² reaches `r2` (where the reward is linearly readable)."""
        for label, value in zip(self.labels, self.heldout_r2, strict=True):
            if value >= r2:
                return label
        return None

    def to_dataframe(self):
        """One row per site: held-out MSE and R², and the plain lens's MSE."""
        import pandas as pd

        return pd.DataFrame(
            {
                "site": self.labels,
                "heldout_mse": self.heldout_mse,
                "heldout_r2": self.heldout_r2,
                "plain_lens_heldout_mse": self.lens_heldout_mse,
            }
        )

    @pasted_docs(plot=PLOT_DOC)
    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """Held-out MSE per site (log scale), tuned against plain lens.

        Hover shows the lens, the site and the exact MSE.

        {plot}
        """
        fig = line(
            {"tuned lens": list(self.heldout_mse), "plain lens": list(self.lens_heldout_mse)},
            x=list(self.labels),
            xaxis=SITE_AXIS,
            yaxis="held-out MSE vs the final reward",
            title=f"tuned vs plain lens: held-out MSE ({self.n_train} train, "
            f"{self.n_heldout} held-out examples)",
            log_y=True,
        )
        fig.update_yaxes(exponentformat="power")  # 10⁻⁶, not 1µ
        return render(fig, backend, ax)


@dataclass(frozen=True)
class _Features:
    normed: Float[Tensor, "site example d_model"]
    lens: Float[Tensor, "site example"]
    target: Float[Tensor, " example"]


def _batches(model, data: list, batch_size: int) -> Iterable[tuple[Tensor, Tensor | None]]:
    """Accept `(ids, mask)` batches, or pairs (prompt/chosen/rejected or encoded tuples)."""
    if data and isinstance(data[0], tuple) and isinstance(data[0][0], Tensor):
        yield from data
        return
    for ids, mask, _ in pair_batches(model, data, batch_size):
        yield ids, mask


@torch.no_grad()
def collect_features(
    model, data, *, objective: Objective = None, resolution="layer", batch_size: int = 16
) -> tuple[_Features, tuple[str, ...]]:
    """Normalised residual at the reward position for every site, over all examples.

    It comes with the plain lens value and the final reward; chosen and rejected responses both
    count.
    """
    sites = lens_sites(model, resolution)
    normed, lens, target = [], [], []
    for ids, mask in _batches(model, list(data), batch_size):
        run = run_readout(model, ids, mask, [name for _, name in sites], objective=objective)
        xs = torch.stack([gather_positions(run.cache[name], run.positions) for _, name in sites])
        if run.read.centred:
            xs = xs - xs.mean(-1, keepdim=True)
        n = xs / (xs.pow(2).mean(-1, keepdim=True) + model.cfg.eps).sqrt()
        normed.append(n.float().cpu())
        lens.append(((n * run.read.direction).sum(-1) + run.read.bias).float().cpu())
        target.append(run.target.float().cpu())
    feats = _Features(torch.cat(normed, 1), torch.cat(lens, 1), torch.cat(target))
    return feats, tuple(label for label, _ in sites)


ALPHAS = (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0)


def _ridge_path(x: Tensor, y: Tensor, alphas: Sequence[float]) -> list[tuple[Tensor, Tensor]]:
    """Ridge solutions `(delta, offset)` for every `alpha`, intercept unpenalised.

    `alpha` is relative to the mean feature variance; one eigendecomposition serves all alphas.
    """
    x64, y64 = x.double(), y.double()
    xm, ym = x64.mean(0), y64.mean()
    xc = x64 - xm
    evals, evecs = torch.linalg.eigh(xc.T @ xc)
    proj = evecs.T @ (xc.T @ (y64 - ym))
    scale = evals.clamp_min(0).mean().clamp_min(1e-12)
    out = []
    for alpha in alphas:
        delta = evecs @ (proj / (evals.clamp_min(0) + alpha * scale))
        out.append((delta.float(), (ym - xm @ delta).float()))
    return out


def _choose_alpha(x: Tensor, y: Tensor, alphas: Sequence[float], folds: int = 5) -> float:
    """The alpha with the lowest k-fold cross-validated MSE on the training split."""
    n = x.shape[0]
    if n < 2 * folds:
        return alphas[len(alphas) // 2]
    fold_of = torch.arange(n) % folds
    errors = torch.zeros(len(alphas), dtype=torch.float64)
    for k in range(folds):
        tr, te = fold_of != k, fold_of == k
        for i, (delta, offset) in enumerate(_ridge_path(x[tr], y[tr], alphas)):
            errors[i] += (x[te] @ delta + offset - y[te]).double().pow(2).sum()
    return float(alphas[int(errors.argmin())])


class TunedRewardLens:
    """Per-site translators `(δ_l, c_l)`; call it like `reward_lens.reward_lens`.

    Args:
        deltas: Per-site direction translators `δ_l`.
        offsets: Per-site offsets `c_l`.
        labels: Site labels.
        objective: The objective the lens reads.
        resolution: Resolution of the sites.
        report: The fit's held-out report.

    Examples:
        >>> import tempfile
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.pressure.training import zoo_feature_pairs
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> lens = TunedRewardLens.fit(model, zoo_feature_pairs(10)["harmful"])
        >>> lens.labels, lens.report.n_train, lens.report.n_heldout, lens.report.readable_site()
        (('0_pre', '1_pre', '2_pre', 'final'), 16, 4, '2_pre')
        >>> ids = model.to_tokens([("how bake bread", "oven flour")])
        >>> round(float(lens(model, ids).values[-1, 0]), 3)  # the last site is the reward
        0.245
        >>> folder = tempfile.mkdtemp()
        >>> lens.save(folder)
        >>> TunedRewardLens.load(folder).labels == lens.labels
        True
    """

    def __init__(
        self,
        deltas,
        offsets,
        labels,
        *,
        objective=None,
        resolution="layer",
        report: TunedLensReport | None = None,
    ):
        """Build the lens from its translators (the class's Args)."""
        self.deltas: Float[Tensor, "site d_model"] = deltas
        self.offsets: Float[Tensor, " site"] = offsets
        self.labels = tuple(labels)
        self.objective = objective
        self.resolution = resolution
        self.report = report

    @classmethod
    def fit(
        cls,
        model: HookedRewardModel,
        data,
        *,
        objective: Objective = None,
        resolution: Resolution = "layer",
        alpha: float | Literal["auto"] = 1e-2,
        heldout_fraction: float = 0.2,
        seed: int = 0,
        batch_size: int = 16,
    ) -> TunedRewardLens:
        """Fit on `data` (pairs, or `(ids, mask)` batches) read by `model`.

        `objective`: a head column of a multi-objective model; `resolution`: the lens
        sites, `"layer"` (each block's input and the final residual) or `"sublayer"`
        (also between each block's attention and MLP); `alpha`: the ridge
        penalty (`"auto"`: chosen on the training part); `heldout_fraction` of the
        examples, drawn with `seed`, is held out for the report; `batch_size`: sequences
        per forward pass.

        Args:
            model: The reward model.
            data: Preference pairs, or `(ids, mask)` batches.
            objective: A head column of a multi-objective model.
            resolution: `"layer"` or `"sublayer"`.
            alpha: The ridge penalty, or `"auto"`.
            heldout_fraction: The share of the examples held out for the report.
            seed: The seed of the held-out draw.
            batch_size: Sequences per forward pass.

        Returns:
            The fitted lens.
        """
        feats, labels = collect_features(
            model, data, objective=objective, resolution=resolution, batch_size=batch_size
        )
        n = feats.target.shape[0]
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
        n_test = max(1, int(round(heldout_fraction * n)))
        test, train = order[:n_test], order[n_test:]
        deltas, offsets, mse, r2, lens_mse = [], [], [], [], []
        var = float(feats.target[test].var(unbiased=False).clamp_min(1e-12))
        for s in range(len(labels)):
            resid = feats.target - feats.lens[s]
            x, y = feats.normed[s, train], resid[train]
            a = _choose_alpha(x, y, ALPHAS) if alpha == "auto" else float(alpha)
            ((delta, offset),) = _ridge_path(x, y, [a])
            pred = feats.lens[s, test] + feats.normed[s, test] @ delta + offset
            err = float((pred - feats.target[test]).pow(2).mean())
            deltas.append(delta)
            offsets.append(offset)
            mse.append(err)
            r2.append(1.0 - err / var)
            lens_mse.append(float((feats.lens[s, test] - feats.target[test]).pow(2).mean()))
        report = TunedLensReport(
            labels, tuple(mse), tuple(r2), tuple(lens_mse), n_train=len(train), n_heldout=n_test
        )
        return cls(
            torch.stack(deltas),
            torch.stack(offsets),
            labels,
            objective=objective,
            resolution=resolution,
            report=report,
        )

    @torch.no_grad()
    def __call__(
        self,
        model: HookedRewardModel,
        input_ids: Int[Tensor, "batch pos"],
        attention_mask: Int[Tensor, "batch pos"] | None = None,
    ) -> RewardLensResult:
        """The tuned lens of `input_ids` read by `model`, the model it was fitted on.

        `attention_mask` is as for the model.
        """
        feats, labels = collect_features(
            model,
            [(input_ids, attention_mask)],
            objective=self.objective,
            resolution=self.resolution,
        )
        if labels != self.labels:
            raise InvalidArgumentError(
                f"this lens was fitted on sites {self.labels}, model has {labels}"
            )
        values = feats.lens + (feats.normed * self.deltas[:, None]).sum(-1) + self.offsets[:, None]
        return RewardLensResult(values=values, labels=labels, rewards=feats.target, norm="tuned")

    def save(self, path: str | Path) -> None:
        """`translators.safetensors` + `tuned_lens.json` in directory `path`.

        Args:
            path: The folder to write (created if needed).
        """
        from safetensors.torch import save_file

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        save_file(
            {"deltas": self.deltas.contiguous(), "offsets": self.offsets.contiguous()},
            str(path / "translators.safetensors"),
        )
        meta = {
            "labels": list(self.labels),
            "objective": self.objective,
            "resolution": self.resolution,
            "report": None if self.report is None else self.report.__dict__,
        }
        (path / "tuned_lens.json").write_text(json.dumps(meta, indent=1))

    @classmethod
    def load(cls, path: str | Path) -> TunedRewardLens:
        """A lens saved with `save`.

        Args:
            path: The folder it was saved in.

        Returns:
            The lens.
        """
        from safetensors.torch import load_file

        path = Path(path)
        tensors = load_file(str(path / "translators.safetensors"))
        meta = json.loads((path / "tuned_lens.json").read_text())
        report = None
        if meta.get("report"):
            rep = meta["report"]
            fields: dict[str, Any] = {
                k: tuple(v) if isinstance(v, list) else v for k, v in rep.items()
            }
            report = TunedLensReport(**fields)
        return cls(
            tensors["deltas"],
            tensors["offsets"],
            meta["labels"],
            objective=meta["objective"],
            resolution=meta["resolution"],
            report=report,
        )
