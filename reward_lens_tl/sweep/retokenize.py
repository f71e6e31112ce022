"""How many candidates a decode → re-encode pipeline would silently change.

The published sweep decoded each token to text and re-tokenized the whole conversation; this
counts, for a candidate set, how often `model.encode(prompt, tokenizer.decode(ids))` differs
from the ids the sweep scores (`prompt ids + ids + suffix ids`).

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.zoo import zoo_path
    >>> from reward_lens_tl.sweep import vocabulary_candidates
    >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    >>> retokenization_changes(model, "how bake bread", vocabulary_candidates(model)).n_changed
    0
"""

from __future__ import annotations

from dataclasses import dataclass

from ..inputs import Prompt
from .candidates import CandidateSet, sweep_frame

__all__ = [
    "RetokenizationReport",
    "retokenization_changes",
]


@dataclass(frozen=True)
class RetokenizationReport:
    """The candidates a decode → re-encode round trip would change.

    Args:
        n: the number of candidates checked.
        changed: `(label, ids scored, ids a round trip would score)` of each changed one.

    Examples:
        A report on three candidates, one of which (the token "w6 w7", id 90) a round trip
        would re-encode as two tokens (6 and 7) inside the conversation:

        >>> from reward_lens_tl.sweep import CandidateSet, RetokenizationReport
        >>> cands = CandidateSet(("w5", "w6 w7", "w8"), ((5,), (90,), (8,)))
        >>> changed = (("w6 w7", (90,), (1, 4, 6, 7, 2)),)  # label, its ids, the round trip's
        >>> report = RetokenizationReport(n=3, changed=changed)
        >>> report.n_changed, round(report.share_changed, 3)
        (1, 0.333)
        >>> report.round_trip_indices(cands)
        [0, 2]
    """

    n: int
    changed: tuple[tuple[str, tuple[int, ...], tuple[int, ...]], ...]

    @property
    def n_changed(self) -> int:
        """The number of changed candidates."""
        return len(self.changed)

    @property
    def share_changed(self) -> float:
        """The share of changed candidates (0 when none was checked)."""
        return self.n_changed / self.n if self.n else 0.0

    def round_trip_indices(self, candidates: CandidateSet) -> list[int]:
        """Indices of the candidates that survive the round trip unchanged.

        Args:
            candidates: the candidate set that was checked.

        Returns:
            The indices.
        """
        bad = {label for label, _, _ in self.changed}
        return [i for i, label in enumerate(candidates.labels) if label not in bad]


def retokenization_changes(model, prompt: Prompt, candidates: CandidateSet) -> RetokenizationReport:
    """Compare the sweep's ids with a decode → re-encode round trip for every candidate.

    Args:
        model: the `HookedRewardModel` (with a tokenizer).
        prompt: the prompt.
        candidates: the candidates.

    Returns:
        The `RetokenizationReport`.

    Examples:
        The zoo's tokenizer is word-level, so no word changes:

        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sweep import retokenization_changes, word_candidates
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> cands = word_candidates(model, "how bake bread", ["soup", "great question", "bomb"])
        >>> report = retokenization_changes(model, "how bake bread", cands)
        >>> report.n, report.n_changed, report.round_trip_indices(cands)
        (3, 0, [0, 1, 2])
    """
    frame = sweep_frame(model, prompt)
    prefix, suffix = frame.prompt_ids(), frame.suffix_ids()
    tok = model.tokenizer
    changed = []
    for label, ids in zip(candidates.labels, candidates.ids, strict=True):
        text = tok.decode(list(ids))
        try:
            trip = model.encode(prompt, text).ids
        except Exception:  # a text the template cannot take counts as changed
            trip = ()
        if trip != prefix + ids + suffix:
            changed.append((label, ids, tuple(trip)))
    return RetokenizationReport(n=len(candidates), changed=tuple(changed))
