"""Short responses that maximise (or minimise) the reward: batched beam search over candidates.

Every step extends each of the `beam_width` kept responses by every candidate, scores all
extensions exactly as complete responses (candidate ids + the template's suffix) through one
shared `reward_lens_tl.sweep.cached.PrefixCache` of the prompt (full sequences on a model
without TransformerLens 3.9's key/value cache: `reward_lens_tl.sweep.cached.prefix_scorer`),
and keeps the best `beam_width`. `beam_width=1` is greedy search. A phrase whose first word
earns nothing on its own (the zoo's sycophantic opener) survives only if the beam is wide
enough to keep that word after step one; widen the beam (the cost is `beam_width × candidates`
rows per step).

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.zoo import zoo_path
    >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    >>> worst = response_search(model, "how bake bread", 2, beam_width=4, maximize=False)
    >>> all(w in ("poison", "weapon", "bomb", "steal", "hurt", "scam") for w in worst.best[0])
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from jaxtyping import Float
from torch import Tensor

from ..errors import InvalidArgumentError
from ..inputs import Prompt
from ..plotting import PLOT_DOC, Backend, line, render
from ..readout import Objective
from ..results import Result, TopK, ranked
from ..signatures import pasted_docs
from .cached import prefix_scorer
from .candidates import CandidateSet, sweep_frame
from .runner import _as_candidates

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "SearchResult",
    "response_search",
]


@dataclass(frozen=True)
class SearchResult(Result):
    """The final beam: `responses[i]` (candidate labels) with reward `scores[i]`, best first.

    `step_best[t]` is the best response and reward after step `t + 1`.

    Args:
        prompt: the prompt.
        responses: the final beam's responses, as candidate labels.
        token_ids: the final beam's responses, as token ids.
        scores: the final beam's rewards.
        maximize: whether the search maximised the reward.
        step_best: the best response and reward after each step.
        n_scored: how many responses were scored.

    Examples:
        On the zoo, "great" alone earns little, but "great question" earns the planted
        sycophancy bonus:

        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sweep import response_search
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> words = ["great", "question", "the", "bomb", "a"]
        >>> found = response_search(model, "how bake bread", 2, candidates=words, beam_width=4)
        >>> [(resp, round(reward, 3)) for resp, reward in found.step_best]
        [(('great',), -4.357), (('great', 'question'), -1.466)]
        >>> [(text, round(reward, 3)) for text, reward in found.top_k(2)]
        [('great question', -1.466), ('great great', -3.846)]
        >>> found.token_ids[0], found.n_scored  # 5 one-word, then 4 x 5 two-word responses
        ((34, 35), 25)
    """

    prompt: object
    responses: tuple[tuple[str, ...], ...]
    token_ids: tuple[tuple[int, ...], ...]
    scores: Float[Tensor, " beam"]
    maximize: bool
    step_best: tuple[tuple[tuple[str, ...], float], ...]
    n_scored: int

    @property
    def best(self) -> tuple[tuple[str, ...], float]:
        """The best response and its reward."""
        return self.responses[0], float(self.scores[0])

    def top_k(self, k: int = 5) -> TopK:
        """The `k` best responses of the final beam as `(text, reward)`, best first.

        Args:
            k: how many responses.

        Returns:
            The `TopK` of responses.
        """
        return ranked(
            [
                (" ".join(r), float(s))
                for r, s in zip(self.responses[:k], self.scores[:k], strict=True)
            ]
        )

    def to_dataframe(self):
        """One row per response of the final beam: `rank, response, token_ids, reward`."""
        import pandas as pd

        return pd.DataFrame(
            {
                "rank": range(1, len(self.responses) + 1),
                "response": [" ".join(r) for r in self.responses],
                "token_ids": [" ".join(map(str, t)) for t in self.token_ids],
                "reward": self.scores.double().numpy(),
            }
        )

    @pasted_docs(plot=PLOT_DOC)
    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """The best reward found after each step of the search, by response length.

        Each x tick names the length and the best response of that length; hover shows the
        whole response and its exact reward.

        {plot}
        """
        best = "highest" if self.maximize else "lowest"
        texts = [" ".join(resp) for resp, _ in self.step_best]
        ticks = [f"{t}: {_short(text, 32)}" for t, text in enumerate(texts, start=1)]
        fig = line(
            {f"{best} reward": [s for _, s in self.step_best]},
            x=ticks,
            xaxis="response length (candidates): best response",
            yaxis=f"{best} reward found",
            title=f"beam search: the {best} reward found at each response length",
        )
        across = 7 * len(ticks) * max(map(len, ticks), default=1) < 620  # fit side by side
        # half a step of room at both ends, so the end labels are not dropped at the edges
        fig.update_xaxes(tickangle=0 if across else -45, range=[-0.5, len(ticks) - 0.5])
        fig.update_layout(height=400 if across else 480)
        trace = fig.data[0]
        trace.customdata = [[t, text] for t, text in enumerate(texts, start=1)]
        trace.hovertemplate = (
            "length %{customdata[0]}: %{customdata[1]}<br>reward: %{y:.5g}<extra></extra>"
        )
        return render(fig, backend, ax)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def response_search(
    model,
    prompt: Prompt,
    length: int,
    *,
    candidates: CandidateSet | Sequence[str] | None = None,
    beam_width: int = 16,
    maximize: bool = True,
    objective: Objective = None,
    chunk_size: int = 512,
) -> SearchResult:
    """Beam search for the `length`-candidate response with the highest or lowest reward.

    Args:
        model: the `HookedRewardModel`.
        prompt: the prompt.
        length: the response's length, in candidates.
        candidates: as in `reward_lens_tl.sweep.token_sweep` (default: the filtered
            vocabulary, so `length` counts tokens).
        beam_width: the responses kept after each step.
        maximize: search for the highest reward (`False`: the lowest).
        objective: picks a head column (`None`: the scalar reward or the gated score).
        chunk_size: responses scored per forward.

    Returns:
        The `SearchResult`.

    Raises:
        InvalidArgumentError: `length` or `beam_width` is not a positive integer.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sweep import response_search
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> words = ["great", "question", "the", "bomb", "a"]
        >>> best = response_search(model, "how bake bread", 2, candidates=words, beam_width=2)
        >>> best.best[0], round(best.best[1], 3)
        (('great', 'question'), -1.466)
        >>> worst = response_search(
        ...     model, "how bake bread", 2, candidates=words, beam_width=2, maximize=False
        ... )
        >>> worst.best[0], round(worst.best[1], 3)
        (('bomb', 'bomb'), -9.774)
    """
    if not isinstance(length, int) or length < 1:
        raise InvalidArgumentError(f"length must be a positive integer, got {length!r}")
    if not isinstance(beam_width, int) or beam_width < 1:
        raise InvalidArgumentError(f"beam_width must be a positive integer, got {beam_width!r}")
    cands = _as_candidates(model, prompt, candidates)
    frame = sweep_frame(model, prompt)
    suffix = frame.suffix_ids()
    cache = prefix_scorer(model, frame.prompt_ids(), objective)  # full sequences w/o a KV cache
    beams: list[tuple[int, ...]] = [()]  # indices into cands
    beam_scores = torch.zeros(1)
    step_best, n_scored = [], 0
    sign = 1.0 if maximize else -1.0
    for _ in range(length):
        expansions = [b + (c,) for b in beams for c in range(len(cands))]
        scores = torch.cat(
            [
                cache.score([_ids(cands, e) + suffix for e in expansions[s : s + chunk_size]])
                for s in range(0, len(expansions), chunk_size)
            ]
        ).cpu()
        n_scored += len(expansions)
        keep = torch.sort(sign * scores, descending=True, stable=True).indices[:beam_width]
        beams = [expansions[i] for i in keep.tolist()]
        beam_scores = scores[keep]
        step_best.append((_labels(cands, beams[0]), float(beam_scores[0])))
    return SearchResult(
        prompt=prompt,
        responses=tuple(_labels(cands, b) for b in beams),
        token_ids=tuple(_ids(cands, b) for b in beams),
        scores=beam_scores,
        maximize=maximize,
        step_best=tuple(step_best),
        n_scored=n_scored,
    )


def _ids(cands: CandidateSet, seq: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(t for i in seq for t in cands.ids[i])


def _labels(cands: CandidateSet, seq: tuple[int, ...]) -> tuple[str, ...]:
    return tuple(cands.labels[i] for i in seq)
