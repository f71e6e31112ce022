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


@dataclass(frozen=True)
class RetokenizationReport:
    """The candidates a decode → re-encode round trip would change.

    Args:
        n: the number of candidates checked.
        changed: `(label, ids scored, ids a round trip would score)` of each changed one.
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
    """
    frame = sweep_frame(model, prompt)
    prefix, suffix = frame.prompt_ids(), frame.suffix_ids()
    tok = model.tokenizer
    changed = []
    for label, ids in zip(candidates.labels, candidates.ids, strict=True):
        text = tok.decode(list(ids))
        try:
            trip = model.encode_conversation(prompt, text).ids
        except Exception:  # a text the template cannot take counts as changed
            trip = ()
        if trip != prefix + ids + suffix:
            changed.append((label, ids, tuple(trip)))
    return RetokenizationReport(n=len(candidates), changed=tuple(changed))
