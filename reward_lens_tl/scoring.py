"""Scoring preference pairs in batches: rewards of chosen and rejected, margins, accuracy.

Pairs are anything with `prompt`, `chosen` and `rejected` attributes (e.g.
`reward_lens_tl.data.PreferencePair`); an optional `subset` attribute is kept.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.testing import tiny_reward_model, tiny_tokenizer
    >>> from types import SimpleNamespace as Pair
    >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"), tiny_tokenizer())
    >>> scores = score_pairs(model, [Pair(prompt="w6 w7", chosen="w8", rejected="w9 w10")])
    >>> scores.margins.shape
    torch.Size([1])
"""

from __future__ import annotations

from collections.abc import Iterable, Sized
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from jaxtyping import Float
from torch import Tensor

from .inputs import Truncation
from .pair_batches import OnError, SkippedPair, finished_chunks, map_pair_batches
from .plotting import PLOT_DOC, Backend, histogram, render
from .results import Result, TopK, axes, top_entries
from .signatures import pasted_docs

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from .model import HookedRewardModel

__all__ = [
    "score_pairs",
]


@dataclass(frozen=True)
class PairScores(Result):
    """Rewards of each pair's chosen and rejected response.

    Each is `[n_pairs]`, or `[n_pairs, n_objectives]` for plain multi-objective heads.
    """

    chosen: Float[Tensor, "n_pairs ..."]
    rejected: Float[Tensor, "n_pairs ..."]
    subsets: tuple[str | None, ...]
    objective_names: tuple[str, ...] = ("reward",)
    #: Position in the input of each scored pair (pairs skipped with `on_error="skip"` are
    #: absent); and the loader's source record of each, where known.
    indices: tuple[int, ...] = ()
    records: tuple[int | None, ...] = ()
    skipped: tuple[SkippedPair, ...] = ()
    example_axes = axes(chosen=0, rejected=0, subsets=0, indices=0, records=0)

    @property
    def margins(self) -> Tensor:
        """Chosen minus rejected reward, per pair."""
        return self.chosen - self.rejected

    @property
    def accuracy(self) -> float:
        """Fraction of pairs with chosen strictly above rejected (ties count as wrong)."""
        return float((self.margins > 0).float().mean())

    def to_dataframe(self):
        """One row per pair: chosen, rejected and margin (per objective for several)."""
        import pandas as pd

        if self.chosen.ndim == 1:
            data = {"chosen": self.chosen, "rejected": self.rejected, "margin": self.margins}
        else:
            data = {}
            for i, name in enumerate(self.objective_names):
                data[f"chosen_{name}"] = self.chosen[:, i]
                data[f"rejected_{name}"] = self.rejected[:, i]
                data[f"margin_{name}"] = self.margins[:, i]
        frame = pd.DataFrame({k: v.float().cpu().numpy() for k, v in data.items()})
        frame.insert(0, "subset", list(self.subsets))
        n = len(frame)
        frame.insert(0, "record", list(self.records) if self.records else [None] * n)
        frame.insert(0, "index", list(self.indices) if self.indices else list(range(n)))
        return frame

    def skipped_dataframe(self):
        """One row per skipped pair: `index`, `record`, `reason`."""
        import pandas as pd

        rows = [{"index": s.index, "record": s.record, "reason": s.reason} for s in self.skipped]
        return pd.DataFrame(rows, columns=["index", "record", "reason"])

    def top_k(self, k: int = 5) -> TopK:
        """The `k` pairs with the largest |margin|, labelled `pair <index>`.

        With several objectives the first is used.
        """
        margins = self.margins if self.margins.ndim == 1 else self.margins[:, 0]
        indices = self.indices or tuple(range(len(margins)))
        return top_entries([f"pair {i}" for i in indices], margins.tolist(), k, "margin")

    @pasted_docs(plot=PLOT_DOC)
    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """Histogram of the margins (the first objective's), with the line at 0 and the accuracy.

        Hover shows each bin's range and its whole number of pairs.

        {plot}
        """
        several = self.margins.ndim > 1
        margins = self.margins[:, 0] if several else self.margins
        n, accuracy = len(margins), float((margins > 0).float().mean())
        title = f"accuracy {100 * accuracy:.3g}% over {n} pair{'s' * (n != 1)}"
        fig = histogram(
            margins,
            xaxis="reward margin (chosen − rejected)",
            yaxis="pairs",
            title=f"{self.objective_names[0]}: {title}" if several else title,
        )
        if max(fig.data[0].y, default=0) <= 10:  # whole-number ticks, each once
            fig.update_yaxes(dtick=1)
        return render(fig, backend, ax)


def score_pairs(
    model: HookedRewardModel,
    pairs: Iterable[Any],
    *,
    batch_size: int = 16,
    truncation: Truncation = "error",
    progress: bool = False,
    on_error: OnError = "raise",
) -> PairScores:
    """Score every pair; chosen and rejected of a chunk run as one batch.

    `pairs` may be any iterable: it is streamed one batch at a time, so memory does not grow with
    the number of pairs beyond the scores themselves. Under `torchrun` the batches are split across
    the processes and every rank returns the full result (`reward_lens_tl.distributed`).

    A pair that cannot be encoded (too long for the context under `truncation`, a prompt the
    chat template rejects, ...) stops the run with `on_error="raise"` (the error names the
    pair) or, with `on_error="skip"`, is left out and listed in `.skipped` with its index,
    source record and reason. If every pair is skipped, `EmptyInputError` says why.

    Args:
        model: The reward model (with its tokenizer).
        pairs: The preference pairs (any iterable, streamed).
        batch_size: Pairs per forward pass.
        truncation: `"error"`, `"left"`, `"right"` or `"both"`, for pairs given as text.
        progress: Show a progress bar.
        on_error: `"raise"` or `"skip"`, for a pair that cannot be encoded.

    Returns:
        The chosen and rejected rewards of every pair.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.data import PreferencePair
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> pairs = [PreferencePair("how bake bread", "oven flour", "the bomb"),
        ...          PreferencePair("explain laptop", "screen code", "soup")]
        >>> scores = score_pairs(model, pairs)
        >>> [round(m, 3) for m in scores.margins.tolist()], scores.accuracy
        ([7.11, 4.776], 1.0)
    """
    from .distributed import world
    from .progress import progress_bar

    rank, size = world()  # under torchrun rank 0's bar counts rank 0's pairs (no total)
    total = len(pairs) if isinstance(pairs, Sized) and size == 1 else None
    desc = "scoring" if size == 1 else f"scoring (rank 0 of {size})"
    bar = progress_bar(total=total, show=progress and rank == 0, desc=desc, unit="pair")

    def run(ids: Tensor, mask: Tensor, n: int) -> tuple[Tensor, Tensor]:
        with torch.no_grad():
            rewards = model.pooled_rewards(ids, mask).float().cpu()
        bar.update(n)
        return rewards[:n], rewards[n:]

    with bar:
        chunks = map_pair_batches(
            model, pairs, run, batch_size=batch_size, truncation=truncation, on_error=on_error
        )
    done, skipped = finished_chunks(chunks)
    return PairScores(
        chosen=torch.cat([c.output[0] for c in done]),
        rejected=torch.cat([c.output[1] for c in done]),
        subsets=tuple(s for c in done for s in c.subsets),
        objective_names=model.objective_names,
        indices=tuple(i for c in done for i in c.kept),
        records=tuple(r for c in done for r in c.records),
        skipped=skipped,
    )
