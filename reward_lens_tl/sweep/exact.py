"""The exact path: every candidate's full conversation is scored from scratch.

The conversation is prompt + candidate + suffix ids, scored as full-sequence scoring would;
the reference the fast path must equal.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.zoo import zoo_path
    >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    >>> enc = model.encode("how bake bread", "soup")
    >>> scorer = ExactScorer(model, enc.prompt_ids())
    >>> round(float(scorer.score([enc.response_ids() + enc.suffix_ids()])[0]), 2)
    -2.3
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch
from jaxtyping import Float
from torch import Tensor

from ..errors import EmptyInputError
from ..inputs import pad_batch
from ..readout import Objective, objective_index

if TYPE_CHECKING:
    from ..model import HookedRewardModel

__all__ = [
    "ExactScorer",
]


@dataclass(frozen=True)
class ExactScorer:
    """Scores `prefix + continuation` with one full forward per batch.

    The batch is left padded, so each row scores exactly as alone.

    Args:
        model: the `HookedRewardModel`.
        prefix_ids: the prefix's token ids.
        objective: picks a head column (`None`: the scalar reward or the gated score).

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sweep import ExactScorer
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> enc = model.encode("how bake bread", "soup")
        >>> scorer = ExactScorer(model, enc.prompt_ids())
        >>> suffix = enc.suffix_ids()  # continuations: "soup" and "great question" + suffix
        >>> [round(r, 3) for r in scorer.score([(43,) + suffix, (34, 35) + suffix]).tolist()]
        [-2.3, -1.466]
        >>> round(model.score("how bake bread", "great question").item(), 3)
        -1.466
    """

    model: HookedRewardModel
    prefix_ids: tuple[int, ...]
    column: int | None
    #: The scoring path's name (`SweepResult.method`).
    method: ClassVar[str] = "exact"

    def __init__(
        self, model: HookedRewardModel, prefix_ids: Sequence[int], objective: Objective = None
    ):
        """Keep the model and the prefix, and resolve the objective's column."""
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "prefix_ids", tuple(int(i) for i in prefix_ids))
        object.__setattr__(self, "column", objective_index(model, objective))

    @torch.no_grad()
    def score(self, continuations: Sequence[Sequence[int]]) -> Float[Tensor, " batch"]:
        """Rewards of `prefix + continuation` for each continuation.

        Args:
            continuations: the continuations' token ids.

        Returns:
            One reward per continuation.

        Raises:
            EmptyInputError: no continuation.
        """
        if not continuations:
            raise EmptyInputError("no continuations to score")
        seqs = [self.prefix_ids + tuple(c) for c in continuations]
        ids, mask = pad_batch(seqs, self.model.pad_token_id)
        ids, mask = ids.to(self.model.cfg.device), mask.to(self.model.cfg.device)
        if self.column is None:  # gated score
            return self.model.pooled_rewards(ids, mask).float()
        return self.model.objective_rewards(ids, mask)[:, self.column].float()
