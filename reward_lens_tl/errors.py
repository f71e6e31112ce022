"""Typed errors raised by reward-lens-tl.

Every error says what went wrong and what to do about it. They subclass the builtin exception
a user would naturally catch (``ValueError``, ``KeyError``, ``NotImplementedError``) as well as
:class:`RewardLensError`, so ``except RewardLensError`` catches everything this library raises on
purpose.

>>> from reward_lens_tl.errors import SequenceTooLongError, RewardLensError
>>> issubclass(SequenceTooLongError, ValueError)
True
>>> issubclass(SequenceTooLongError, RewardLensError)
True
"""

from __future__ import annotations


class RewardLensError(Exception):
    """Base class of every error reward-lens-tl raises deliberately."""


class UnsupportedArchitectureError(RewardLensError, NotImplementedError):
    """The checkpoint's architecture has no adapter (the message lists the supported ones)."""


class SequenceTooLongError(RewardLensError, ValueError):
    """A sequence is longer than the model's context window."""


class TokenOutOfVocabError(RewardLensError, ValueError):
    """Token ids outside ``[0, d_vocab)``."""


class MissingPadTokenError(RewardLensError, ValueError):
    """A batch of several sequences was given but no pad token id is known."""


class RewardHeadError(RewardLensError, ValueError):
    """The reward head does not have the shape the adapter expects (e.g. ``num_labels != 1``)."""


class NonFiniteWeightsError(RewardLensError, ValueError):
    """A parameter of the checkpoint holds NaN or infinite values."""


class UnknownHookError(RewardLensError, KeyError):
    """A hook name that does not exist on the model."""

    def __str__(self) -> str:  # KeyError would otherwise print the repr of the message
        return str(self.args[0]) if self.args else ""


class ShapeMismatchError(RewardLensError, ValueError):
    """Tensors whose shapes do not agree (e.g. ``attention_mask`` vs ``input_ids``)."""


class UnsafeCheckpointError(RewardLensError, ValueError):
    """A checkpoint would need pickle weights or remote code, which are refused by default."""


class MalformedRecordError(RewardLensError, ValueError):
    """A data record is missing a field or has the wrong type (the message names both)."""


class ConversionMismatchError(RewardLensError, RuntimeError):
    """The converted model disagrees with the HF model it was converted from."""
