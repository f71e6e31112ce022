"""Typed errors of the token-sweep package (each also a builtin ``ValueError``)."""

from __future__ import annotations

from ..errors import DataFormatError, RewardLensError, TokenOutOfVocabError


class UnknownCandidateError(TokenOutOfVocabError):
    """A candidate word (or token id) that the model's vocabulary does not have; the message
    names the candidates."""


class ScoreFileError(DataFormatError):
    """A score CSV without the candidate column, with too few model columns, or with a column
    that is not numeric (the message names the file and the column)."""


class ResumeMismatchError(RewardLensError, ValueError):
    """A resume file written by a different sweep (another prompt, candidate set, objective or
    method); delete it or pass another path."""
