"""A pairwise judge on preference pairs, in both orders.

RewardBench-style pairs `(prompt, chosen, rejected)` are shown to a pairwise judge as
`(A = chosen, B = rejected)` and as `(A = rejected, B = chosen)`; the first order is right
when `m(chosen, rejected) > 0`, the second when `m(rejected, chosen) < 0`. `accuracy`
averages the two orders (each pair counts once per order, as a judge evaluated on shuffled
orders does in expectation); `consistent_accuracy` counts a pair only when both orders are
right, and `position_bias` is the mean of `(m_AB + m_BA) / 2` (0 for an order-blind judge).
Pointwise and Likert judges score each response alone: use
`reward_lens_tl.scoring.score_pairs` like for any reward model.

Examples:
    >>> from reward_lens_tl.testing import tiny_causal_lm
    >>> from reward_lens_tl.data import PreferencePair
    >>> from reward_lens_tl.judges import HookedJudge
    >>> hf, tok = tiny_causal_lm("llama")
    >>> judge = HookedJudge.from_pretrained(
    ...     hf, kind="pairwise", tokenizer=tok, verdict=("w10", "w11"),
    ...     template="{prompt} w8 {response_a} w8 {response_b} w9")
    >>> res = judge_pairs(judge, [PreferencePair("w12", "w20 w21", "w30")])
    >>> res.margin_ab.shape, float(res.accuracy()) in (0.0, 0.5, 1.0)
    (torch.Size([1]), True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from jaxtyping import Float
from torch import Tensor

from ..errors import EmptyInputError, InvalidArgumentError
from ..results import Result, axes

if TYPE_CHECKING:  # either backend's judge (hooked_judges needs TransformerLens 3.9)
    from ..bridge.judges import BridgeJudge
    from .hooked_judges import HookedJudge

__all__ = ["PairwiseJudgeScores", "judge_pairs"]


@dataclass(frozen=True)
class PairwiseJudgeScores(Result):
    """A pairwise judge's margins on preference pairs, in both orders.

    Args:
        margin_ab: The margins with the chosen response shown first, `[pair]`.
        margin_ba: The margins with the rejected response shown first, `[pair]`.
        subsets: Each pair's subset (or `None`).

    Examples:
        The second pair is right with the chosen response first (`1.0 > 0`) but not with it
        second (`0.5` is not `< 0`):

        >>> import torch
        >>> from reward_lens_tl.judges import PairwiseJudgeScores
        >>> res = PairwiseJudgeScores(torch.tensor([2.0, 1.0]), torch.tensor([-1.0, 0.5]),
        ...                           ("easy", "hard"))
        >>> res.accuracy(), res.consistent_accuracy(), res.position_bias()
        (0.75, 0.5, 0.625)
        >>> res.to_dataframe()[["subset", "correct_ab", "correct_ba"]].values.tolist()
        [['easy', True, True], ['hard', True, False]]
    """

    example_axes = axes(margin_ab=0, margin_ba=0, subsets=0)
    value_column = "margin_ab"

    margin_ab: Float[Tensor, " pair"]
    margin_ba: Float[Tensor, " pair"]
    subsets: tuple[Any, ...]

    @property
    def correct_ab(self) -> Tensor:
        """Whether each pair is right with the chosen response shown first."""
        return self.margin_ab > 0

    @property
    def correct_ba(self) -> Tensor:
        """Whether each pair is right with the rejected response shown first."""
        return self.margin_ba < 0

    def accuracy(self) -> float:
        """Mean over both orders of each pair.

        Returns:
            The accuracy.
        """
        return float((self.correct_ab.float() + self.correct_ba.float()).mean() / 2)

    def consistent_accuracy(self) -> float:
        """Pairs right in both orders.

        Returns:
            The fraction of pairs right in both orders.
        """
        return float((self.correct_ab & self.correct_ba).float().mean())

    def position_bias(self) -> float:
        """Mean `(m_AB + m_BA) / 2`: positive when the first answer is favoured.

        Returns:
            The mean position bias.
        """
        return float(((self.margin_ab + self.margin_ba) / 2).mean())

    def to_dataframe(self):
        """One row per pair: its subset, both margins and whether each order is right.

        Returns:
            The data frame.
        """
        import pandas as pd

        return pd.DataFrame(
            {
                "pair": range(len(self.margin_ab)),
                "subset": list(self.subsets),
                "margin_ab": self.margin_ab.tolist(),
                "margin_ba": self.margin_ba.tolist(),
                "correct_ab": self.correct_ab.tolist(),
                "correct_ba": self.correct_ba.tolist(),
            }
        )


def judge_pairs(
    judge: HookedJudge | BridgeJudge, pairs: Sequence[Any], batch_size: int = 16
) -> PairwiseJudgeScores:
    """Score preference pairs with a pairwise judge in both orders (module docstring).

    Args:
        judge: A pairwise judge (`HookedJudge`, or `reward_lens_tl.bridge.BridgeJudge`).
        pairs: Objects with `prompt`, `chosen`, `rejected` (and optionally `subset`).
        batch_size: Items per forward.

    Returns:
        The margins in both orders.

    Raises:
        InvalidArgumentError: When `judge` is not a pairwise judge or `batch_size` is not a
            positive int.
        EmptyInputError: When there are no pairs.

    Examples:
        The zoo's judge prefers on-topic answers, with a planted bias towards the first one:

        >>> from reward_lens_tl.data import PreferencePair
        >>> from reward_lens_tl.judges import HookedJudge
        >>> from reward_lens_tl.zoo import zoo_path
        >>> from reward_lens_tl.zoo.judge import JUDGE_PAIRWISE_TEMPLATE
        >>> judge = HookedJudge.from_pretrained(
        ...     zoo_path("judge"), kind="pairwise", template=JUDGE_PAIRWISE_TEMPLATE)
        >>> pairs = [PreferencePair("how bake bread", "oven flour", "rain"),
        ...          PreferencePair("explain laptop", "screen code", "soup")]
        >>> res = judge_pairs(judge, pairs)
        >>> res.accuracy(), res.consistent_accuracy(), round(res.position_bias(), 2)
        (1.0, 1.0, 1.14)
    """
    if getattr(judge, "kind", None) != "pairwise":
        raise InvalidArgumentError(
            "judge_pairs needs a pairwise HookedJudge (kind='pairwise'; on TransformerLens 4 a "
            "pairwise BridgeJudge)"
        )
    pairs = list(pairs)
    if not pairs:
        raise EmptyInputError("judge_pairs got no pairs")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidArgumentError(f"batch_size must be a positive int, got {batch_size!r}")
    ab, ba = [], []
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start : start + batch_size]
        prompts = [p.prompt for p in chunk]
        chosen, rejected = [p.chosen for p in chunk], [p.rejected for p in chunk]
        ab.append(judge.rewards(judge.item_ids(prompts, chosen, rejected)).float().cpu())
        ba.append(judge.rewards(judge.item_ids(prompts, rejected, chosen)).float().cpu())
    subsets = tuple(getattr(p, "subset", None) for p in pairs)
    return PairwiseJudgeScores(torch.cat(ab), torch.cat(ba), subsets)
