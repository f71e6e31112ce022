"""Typed errors of the token-sweep package (each also a builtin ``ValueError``)."""

from __future__ import annotations

from ..errors import DataFormatError, TokenOutOfVocabError
from ..provenance import ProvenanceMismatchError, ResumableFileError


class UnknownCandidateError(TokenOutOfVocabError):
    """A candidate word (or token id) that the model's vocabulary does not have; the message
    names the candidates."""


class ScoreFileError(DataFormatError):
    """A score CSV without the candidate column, with too few model columns, with a column
    that is not numeric or not finite, or with a repeated candidate (the message names the
    file, the column and the row)."""


class ResumeMismatchError(ProvenanceMismatchError):
    """A resume file written by a different sweep (another model, prompt, candidate set,
    objective, method or chunk size); the message names what differs, the file's value and
    this run's. Delete it or pass another path."""


class ResumeFileError(ResumableFileError):
    """A resume file's chunk that cannot be used (a non-finite score, too few or too many
    scores, a start that is not one of the sweep's chunks); the message names file and line."""
