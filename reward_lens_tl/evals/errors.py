"""Typed errors of the evaluation harness (all are :class:`~reward_lens_tl.errors.RewardLensError`).

Malformed score records raise the shared :class:`~reward_lens_tl.errors.MalformedRecordError`
(naming file, record and field); the errors here cover what a single record cannot show.
"""

from __future__ import annotations

from reward_lens_tl.errors import RewardLensError
from reward_lens_tl.provenance import ProvenanceMismatchError


class ScoreMismatchError(RewardLensError, ValueError):
    """A score file and a data file (or a resumed run) disagree: unknown or duplicate item ids,
    another benchmark, or a different number of responses; the message names file, record and
    field."""


class UnknownBenchmarkError(RewardLensError, ValueError):
    """A benchmark name the harness does not know (the message lists the known ones)."""


class ScoreProducerMismatchError(ScoreMismatchError, ProvenanceMismatchError):
    """A score file being resumed was written by another model (weights, config, tokenizer) or
    with other result-changing arguments (truncation, objective), or one of its records scored
    an item whose texts have changed since; the message names both producers."""
