"""The result of a token sweep: every candidate's reward, ranked, with a way back to its ids.

A `SweepResult` keeps the shared prompt and suffix ids, so any candidate can be handed to
the lens, attribution or patching functions as an
`reward_lens_tl.inputs.EncodedConversation` (`SweepResult.encoded`) or as a
left-padded batch (`SweepResult.batch`; position `-1` is then every row's last token,
as everywhere in the library).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..errors import InvalidArgumentError
from ..inputs import EncodedConversation, pad_batch
from ..plotting import SIGNED, Backend, bar, histogram, render, shown_token, side_by_side
from ..results import Result, TopK, ranked
from .candidates import CandidateSet

__all__ = ["SweepResult", "candidate_index"]

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def candidate_index(labels: Sequence[str], candidate: int | str, where: str) -> int:
    """The position of `candidate` (a label, or an index, negative ones included) in `labels`.

    Args:
        labels: The candidates' labels, in order.
        candidate: A label or an index.
        where: What holds the candidates, for the error message (`"this sweep"`).

    Returns:
        The non-negative index.

    Raises:
        InvalidArgumentError: No candidate has that label, or the index is out of range.

    Examples:
        >>> from reward_lens_tl.sweep.sweep_result import candidate_index
        >>> candidate_index(("soup", "oven", "bomb"), "oven", "this sweep")
        1
        >>> candidate_index(("soup", "oven", "bomb"), -1, "this sweep")
        2
    """
    n = len(labels)
    if isinstance(candidate, str):
        if candidate not in labels:
            shown = f"{list(labels)[:10]}{' ...' if n > 10 else ''}"
            raise InvalidArgumentError(
                f"no candidate labelled {candidate!r} in {where}; labels: {shown}"
            )
        return list(labels).index(candidate)
    if not -n <= candidate < n:
        raise InvalidArgumentError(f"candidate index {candidate} out of range for {n} in {where}")
    return int(candidate) % n


@dataclass(frozen=True)
class SweepResult(Result):
    """`scores[i]` is the reward of the response `candidates.ids[i]` to `prompt`.

    Args:
        prompt: the prompt.
        prefix_ids: the shared prompt ids.
        suffix_ids: the shared suffix ids.
        candidates: the candidates.
        scores: the candidates' rewards.
        objective: the head column that was read (`None`: the scalar reward or an ArmoRM
            gated score).
        method: `"cached"` or `"exact"`.

    Raises:
        InvalidArgumentError: not one score per candidate.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sweep import token_sweep
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> result = token_sweep(model, "how bake bread", ["soup", "great question", "bomb"])
        >>> [(label, round(reward, 3)) for label, reward in result.top_k(3)]
        [('great question', -1.466), ('soup', -2.3), ('bomb', -7.193)]
        >>> result.rank("bomb"), round(result.mean, 3)
        (3, -3.653)

        Each candidate's conversation is prompt ids + candidate ids + suffix ids:

        >>> enc = result.encoded("great question")
        >>> enc.response_ids(), enc.ids == result.prefix_ids + (34, 35) + result.suffix_ids
        ((34, 35), True)
        >>> result.to_dataframe()[["rank", "candidate", "n_tokens"]]
           rank       candidate  n_tokens
        0     1  great question         2
        1     2            soup         1
        2     3            bomb         1
    """

    no_example_axis = (
        "its rows are candidate responses to one prompt (select them with top/bottom or candidates)"
    )

    prompt: Any
    prefix_ids: tuple[int, ...]
    suffix_ids: tuple[int, ...]
    candidates: CandidateSet
    scores: Float[Tensor, " candidate"]
    objective: int | None
    method: str

    def __post_init__(self) -> None:
        """Check that there is one score per candidate."""
        if self.scores.shape != (len(self.candidates),):
            raise InvalidArgumentError(
                f"{tuple(self.scores.shape)} scores for {len(self.candidates)} ids"
            )

    def __len__(self) -> int:
        """The number of candidates."""
        return len(self.candidates)

    @property
    def labels(self) -> tuple[str, ...]:
        """The candidates' labels."""
        return self.candidates.labels

    @property
    def mean(self) -> float:
        """The mean reward over the candidates."""
        return float(self.scores.double().mean())

    def order(self, descending: bool = True) -> Int[Tensor, " candidate"]:
        """Candidate indices sorted by reward (ties keep candidate order).

        Args:
            descending: highest reward first.

        Returns:
            The indices.
        """
        return torch.sort(self.scores, descending=descending, stable=True).indices

    def index(self, label: str) -> int:
        """Index of the candidate labelled `label`.

        Args:
            label: the candidate's label.

        Returns:
            The index.

        Raises:
            InvalidArgumentError: no candidate has that label.
        """
        return candidate_index(self.candidates.labels, label, "this sweep")

    def rank(self, label: str) -> int:
        """1-based rank of a candidate (1 = highest reward).

        Args:
            label: the candidate's label.

        Returns:
            The rank.
        """
        return int((self.order() == self.index(label)).nonzero()[0, 0]) + 1

    def top_k(self, k: int = 10) -> TopK:
        """The `k` highest-reward candidates, `[(label, reward)]`, best first.

        They are sorted by the reward shown: for a sweep, "top" means optimal.

        Args:
            k: how many candidates.

        Returns:
            The `TopK` of candidates.
        """
        return ranked([(self.labels[i], float(self.scores[i])) for i in self.order()[:k]])

    def bottom_k(self, k: int = 10) -> TopK:
        """The `k` lowest-reward candidates, `[(label, reward)]`, worst first.

        Args:
            k: how many candidates.

        Returns:
            The `TopK` of candidates.
        """
        return ranked([(self.labels[i], float(self.scores[i])) for i in self.order(False)[:k]])

    def encoded(self, candidate: int | str) -> EncodedConversation:
        """The conversation whose response is this candidate (index or label).

        Args:
            candidate: the candidate's index or label.

        Returns:
            The `EncodedConversation`.

        Raises:
            InvalidArgumentError: an unknown label or an index out of range.
        """
        ids = self.candidates.ids[candidate_index(self.candidates.labels, candidate, "this sweep")]
        start = len(self.prefix_ids)
        return EncodedConversation(
            ids=self.prefix_ids + ids + self.suffix_ids,
            response_start=start,
            response_end=start + len(ids),
        )

    def batch(
        self, candidates: Sequence[int | str], pad_token_id: int | None
    ) -> tuple[Int[Tensor, "batch pos"], Int[Tensor, "batch pos"]]:
        """Left-padded `(input_ids, attention_mask)` of several candidates' conversations.

        The batch is made by `reward_lens_tl.inputs.pad_batch`.

        Args:
            candidates: the candidates' indices or labels.
            pad_token_id: the padding id.

        Returns:
            The ids and the attention mask.
        """
        return pad_batch([self.encoded(c) for c in candidates], pad_token_id)

    def to_dataframe(self):
        """One row per candidate, ranked: `rank, candidate, token_ids, n_tokens, reward`."""
        import pandas as pd

        order = self.order().tolist()
        return pd.DataFrame(
            {
                "rank": range(1, len(order) + 1),
                "candidate": [self.labels[i] for i in order],
                "token_ids": [" ".join(map(str, self.candidates.ids[i])) for i in order],
                "n_tokens": [len(self.candidates.ids[i]) for i in order],
                "reward": self.scores[order].double().numpy(),
            }
        )

    def plot(self, ax: Axes | None = None, k: int = 10, *, backend: Backend | None = None) -> Any:
        """Histogram of every candidate's reward beside the top and bottom `k` candidates.

        The left panel counts candidates per reward bin (the dashed line is the sweep's
        mean); the right one draws the best `k` (blue, at the top) and the worst `k` (red)
        as their reward minus the sweep's mean. Hover shows each bin's range and count, each
        candidate's full label, reward and distance from the mean.

        Args:
            ax: Not supported: the figure has two panels (`reward_lens_tl.plotting.render`
                refuses axes for it).
            k: How many candidates on each side.
            backend: `"plotly"` or `"matplotlib"` (see `reward_lens_tl.plotting`).

        Returns:
            The figure (not shown).
        """
        mean, n = self.mean, len(self)
        hist = histogram(
            self.scores,
            xaxis="reward",
            yaxis="candidates",
            title=f"reward of {n} candidates (dashed: mean {mean:.3g})",
            bins=min(60, max(10, n // 10)),
            zero_line=False,
        )
        hist.add_vline(x=mean, line=dict(color="black", width=1, dash="dash"))
        rows = list(dict.fromkeys(self.top_k(k) + self.bottom_k(k)[::-1]))  # best at the top
        bars = bar(
            [shown_token(label) for label, _ in rows],
            [v - mean for _, v in rows],
            xaxis="reward − sweep mean",
            title=f"top and bottom {k} candidates",
            colors=SIGNED,
        )
        bars.data[0].customdata = [[label, v] for label, v in rows]
        bars.data[0].hovertemplate = (
            "%{customdata[0]}<br>reward: %{customdata[1]:.5g}<br>reward − sweep mean: "
            "%{x:.5g}<extra></extra>"
        )
        fig = side_by_side([hist, bars], title="token sweep: the reward of every candidate")
        return render(fig, backend, ax)
