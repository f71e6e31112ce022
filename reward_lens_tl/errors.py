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


class CheckpointError(RewardLensError, ValueError):
    """A checkpoint file is missing, truncated or malformed (the message names the file)."""


class CheckpointWeightsError(CheckpointError):
    """The checkpoint's tensors do not match the model its config describes: missing or
    unexpected tensors, or shapes that disagree (the message names them)."""


class TokenizerLoadError(CheckpointError):
    """The checkpoint's tokenizer files cannot be read (corrupt or unsupported); pass
    ``tokenizer=`` explicitly or fix the files."""


class TemplateError(RewardLensError, ValueError):
    """A conversation the tokenizer's chat template rejects, or a malformed prompt/message."""


class EmptyInputError(RewardLensError, ValueError):
    """Nothing to work on: an empty pair set, a sequence without tokens, an empty file."""


class DataFormatError(RewardLensError, ValueError):
    """A data file that cannot be read as the requested format (binary, truncated archive,
    unknown format name); the message names the file."""


class InvalidArgumentError(RewardLensError, ValueError):
    """An argument outside its valid range (an index past the end, a non-positive batch size);
    the message names the argument and the valid range."""


class MissingFileError(CheckpointError, FileNotFoundError):
    """A path that does not exist, or a checkpoint directory without ``config.json``."""


class NotForRewardModelsError(RewardLensError, NotImplementedError):
    """A language-model idiom (generation, LM loss, vocabulary directions, text without a
    conversation) that has no meaning for a reward model; the message says what to use."""


class MissingAttentionMaskError(RewardLensError, ValueError):
    """Padding that cannot be told from real tokens without an ``attention_mask``."""


class AmbiguousObjectiveError(RewardLensError, ValueError):
    """A multi-objective model's reward was asked for in a form that does not say which: the
    gated score (the default) has an input-dependent direction; name an objective instead."""


class UnknownNameError(RewardLensError, KeyError):
    """A name (probe, site, feature, figure, zoo model) that a result or registry does not
    hold; the message lists the ones it does."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ArgumentTypeError(RewardLensError, TypeError):
    """An argument of the wrong kind (the message says which kinds are accepted)."""


class UsageError(RewardLensError, RuntimeError):
    """An object used in a way it does not support (e.g. a writer outside its ``with``
    block, or after it was closed); the message says how to use it."""
