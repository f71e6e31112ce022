"""Typed errors of the implicit-reward package (each also a builtin ``ValueError``)."""

from __future__ import annotations

from ..errors import RewardLensError


class VocabularyMismatchError(RewardLensError, ValueError):
    """Policy and reference do not share one tokenizer and vocabulary, so their log-probs of the
    same token ids are not log-probs of the same text and their ratio is meaningless."""


class EmptyResponseMaskError(RewardLensError, ValueError):
    """A response mask selects no token of some row (an implicit reward would silently be 0)."""


class NonlinearUnembedError(RewardLensError, ValueError):
    """The policy's logits go through a non-linearity after the unembed (a logit soft-cap), so
    the taken token's logit has no exact linear split into components."""
