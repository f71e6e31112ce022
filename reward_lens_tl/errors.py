"""Every typed error reward-lens-tl raises, in one hierarchy and one module.

Every error says what went wrong and what to do about it. They subclass the builtin exception
a user would naturally catch (`ValueError`, `KeyError`, `NotImplementedError`) as well as
`RewardLensError`, so `except RewardLensError` catches everything this library raises on
purpose. Subpackages re-export the errors of their area (`reward_lens_tl.patching.AlignmentError`
is this module's `AlignmentError`); the `errors` modules of subpackages are those re-exports,
kept so existing imports go on working.

Examples:
    >>> from reward_lens_tl.errors import SequenceTooLongError, RewardLensError
    >>> issubclass(SequenceTooLongError, ValueError)
    True
    >>> issubclass(SequenceTooLongError, RewardLensError)
    True
    >>> from reward_lens_tl.patching import AlignmentError
    >>> AlignmentError.__module__
    'reward_lens_tl.errors'
"""

from __future__ import annotations


class RewardLensError(Exception):
    """Base class of every error reward-lens-tl raises deliberately."""


class UnsupportedArchitectureError(RewardLensError, NotImplementedError):
    """The checkpoint's architecture has no adapter (the message lists the supported ones)."""


class SequenceTooLongError(RewardLensError, ValueError):
    """A sequence is longer than the model's context window."""


class TokenOutOfVocabError(RewardLensError, ValueError):
    """Token ids outside `[0, d_vocab)`."""


class MissingPadTokenError(RewardLensError, ValueError):
    """A batch of several sequences was given but no pad token id is known."""


class RewardHeadError(RewardLensError, ValueError):
    """The reward head does not have the shape the adapter expects (e.g. `num_labels != 1`)."""


class NonFiniteWeightsError(RewardLensError, ValueError):
    """A parameter of the checkpoint holds NaN or infinite values."""


class UnknownHookError(RewardLensError, KeyError):
    """A hook name that does not exist on the model."""

    def __str__(self) -> str:  # KeyError would otherwise print the repr of the message
        """The message itself (not its repr, as `KeyError` would print)."""
        return str(self.args[0]) if self.args else ""


class ShapeMismatchError(RewardLensError, ValueError):
    """Tensors whose shapes do not agree (e.g. `attention_mask` vs `input_ids`)."""


class UnsafeCheckpointError(RewardLensError, ValueError):
    """A checkpoint would need pickle weights or remote code, which are refused by default."""


class MalformedRecordError(RewardLensError, ValueError):
    """A data record is missing a field or has the wrong type (the message names both)."""


class ConversionMismatchError(RewardLensError, RuntimeError):
    """The converted model disagrees with the HF model it was converted from."""


class CheckpointError(RewardLensError, ValueError):
    """A checkpoint file is missing, truncated or malformed (the message names the file)."""


class CheckpointWeightsError(CheckpointError):
    """The checkpoint's tensors do not match the model its config describes.

    Missing or unexpected tensors, or shapes that disagree (the message names them).
    """


class CheckpointNamesError(CheckpointWeightsError):
    """The checkpoint's tensor names are not the model's (missing or unexpected tensors)."""


class TokenizerLoadError(CheckpointError):
    """The checkpoint's tokenizer files cannot be read (corrupt or unsupported).

    Pass `tokenizer=` explicitly or fix the files.
    """


class TemplateError(RewardLensError, ValueError):
    """A conversation the tokenizer's chat template rejects, or a malformed prompt/message."""


class EmptyInputError(RewardLensError, ValueError):
    """Nothing to work on: an empty pair set, a sequence without tokens, an empty file."""


class DataFormatError(RewardLensError, ValueError):
    """A data file that cannot be read as the requested format.

    For example binary, a truncated archive or an unknown format name; the message names the file.
    """


class InvalidArgumentError(RewardLensError, ValueError):
    """An argument outside its valid range (an index past the end, a non-positive batch size).

    The message names the argument and the valid range.
    """


class MissingFileError(CheckpointError, FileNotFoundError):
    """A path that does not exist, or a checkpoint directory without `config.json`."""


class NotForRewardModelsError(RewardLensError, NotImplementedError):
    """A language-model idiom that has no meaning for a reward model.

    Generation, LM loss, vocabulary directions, text without a conversation; the message says what
    to use.
    """


class MissingAttentionMaskError(RewardLensError, ValueError):
    """Padding that cannot be told from real tokens without an `attention_mask`."""


class AmbiguousObjectiveError(RewardLensError, ValueError):
    """A multi-objective model's reward was asked for in a form that does not say which.

    The gated score (the default) has an input-dependent direction; name an objective instead.
    """


class UnknownNameError(RewardLensError, KeyError):
    """A name (probe, site, feature, figure, zoo model) that a result or registry does not hold.

    The message lists the ones it does.
    """

    def __str__(self) -> str:  # KeyError would quote the message
        """The message itself (not quoted, as `KeyError` would print it)."""
        return str(self.args[0]) if self.args else ""


class ArgumentTypeError(RewardLensError, TypeError):
    """An argument of the wrong kind (the message says which kinds are accepted)."""


class UnknownKeywordError(InvalidArgumentError, ArgumentTypeError):
    """A keyword argument a function does not take (a typo, an option of another function).

    The message names the closest ones. Both a `TypeError` (as Python raises for an unknown keyword)
    and a `ValueError` (what earlier versions raised).
    """


class UsageError(RewardLensError, RuntimeError):
    """An object used in a way it does not support.

    For example a writer outside its `with` block, or after it was closed; the message says how to
    use it.
    """


# --------------------------------------------------------------------------------------------
# the model's forward pass


class TokenIdsTypeError(ShapeMismatchError, TypeError):
    """Token ids given as something other than an integer tensor.

    Text, a Python list, a float or bool tensor; the message says how to build them. Also a
    `TypeError`.
    """


class NonFiniteActivationError(RewardLensError, ValueError):
    """A reward is NaN or infinite.

    The message names the first hook point whose output at the reading token is not finite (e.g. a
    float16 overflow in an MLP) and what to do.
    """


# --------------------------------------------------------------------------------------------
# data records


class FieldError(MalformedRecordError):
    """One field failed validation. `field` names it; loaders add the file and record."""

    def __init__(self, field: str, reason: str) -> None:
        """Record the failing field and why.

        Args:
            field: Name of the field.
            reason: What is wrong with it.
        """
        super().__init__(f"field {field!r}: {reason}")
        self.field = field
        self.reason = reason


# --------------------------------------------------------------------------------------------
# resumable files and computed numbers (provenance)


class ProvenanceMismatchError(RewardLensError, ValueError):
    """A resumable file written by another producer (model, inputs or arguments) than this run.

    The message names what differs, the file's value and this run's.
    """


class FileInUseError(RewardLensError, RuntimeError):
    """Another process is writing the same resumable file; wait for it or use another path."""


class ResumableFileError(DataFormatError):
    """A resumable file whose content cannot be resumed.

    A non-finite value, a record of the wrong size, a broken header; the message names the file and
    the line.
    """


class NonFiniteResultError(RewardLensError, ValueError):
    """A computed score is NaN or infinite; it is never written to a file or returned."""


# --------------------------------------------------------------------------------------------
# patching


class AlignmentError(RewardLensError, ValueError):
    """Clean and corrupted positions cannot be aligned as requested.

    For example `"exact"` with two lengths, or `"prefix"` without a known prefix length.
    """


class PatchingError(RewardLensError, ValueError):
    """A patching request that cannot be carried out as given.

    Unknown site or mode, a metric returning the wrong shape, an undefined restored fraction, ...
    """


class UnsupportedModelError(RewardLensError, NotImplementedError):
    """A model feature a patching method does not handle.

    The message says which, and what still works.
    """


# --------------------------------------------------------------------------------------------
# sparse autoencoders


class SAEHookError(UnknownHookError):
    """An SAE's hook name does not exist on the model (sae_lens would only log a warning)."""


class SAESiteError(RewardLensError, ValueError):
    """An SAE is used where its site or shape does not fit the analysis.

    For example a direct feature attribution for an SAE that does not read the final residual
    stream.
    """


class UnsupportedSAEError(RewardLensError, NotImplementedError):
    """An sae_lens SAE that is not linear in its latents or not on its hook, where that matters.

    Its decoder is not linear in its latents (run-time activation normalisation) or it writes to a
    different hook (transcoders), where linearity is needed.
    """


class EmptyActivationsError(RewardLensError, ValueError):
    """No (non-padding) activations were produced from the input given."""


# --------------------------------------------------------------------------------------------
# probes


class ProbeError(RewardLensError, ValueError):
    """A probe or a probe run that is set up wrongly (bad `at=`, duplicate names, ...)."""


class TooFewExamplesError(ProbeError):
    """Fewer examples than a statistic needs to mean anything.

    No infinite effect sizes, no correlations of ±1 from two points: the message says how many there
    are and are needed.
    """


class ProbeFunctionError(ProbeError):
    """A probe's edit function failed (a bug in the probe, not a reason to skip an example).

    The message names the probe, the example and the original error (chained as the cause).
    """

    @classmethod
    def wrap(cls, probe_name: str, example: int | None, err: BaseException) -> ProbeFunctionError:
        """The error for `err` raised by a probe's edit function.

        Args:
            probe_name: Name of the probe.
            example: Index of the example, or `None`.
            err: The original error (chain it as the cause).

        Returns:
            The error, naming the probe, the example and `err`.
        """
        at = "" if example is None else f" on example {example}"
        return cls(
            f"probe {probe_name!r} failed{at}: {type(err).__name__}: {err}. Fix its edit "
            "function: return conv.with_response(ids) / conv.with_prompt(ids), and raise "
            "ProbeSkip('why') for an example it does not apply to"
        )


class ProbeSkip(Exception):  # noqa: N818 - a control-flow signal, not an error the user sees
    """Raised inside a probe's edit function: this probe does not apply to this example.

    The reason is recorded per example in the report (`report.skipped`); the run goes on.
    """

    def __init__(self, reason: str):
        """Record why the probe does not apply.

        Args:
            reason: Why the probe does not apply to this example.
        """
        super().__init__(reason)
        self.reason = reason


class ProbeNotApplicableError(ProbeError):
    """A probe does not apply to one example (`probes.runner.apply_probe`).

    Its edit raised `ProbeSkip`, changed nothing, or left the context or the vocabulary, or the
    library refused the edited text (`refusal` keeps that error). `reason` is the line
    `report.skipped` lists; `run_probes` records it and goes on.

    Examples:
        >>> err = ProbeNotApplicableError("the edit changes nothing (same token ids)")
        >>> err.reason, err.refusal is None, isinstance(err, RewardLensError)
        ('the edit changes nothing (same token ids)', True, True)
    """

    def __init__(self, reason: str, refusal: RewardLensError | None = None):
        """Record why the probe does not apply.

        Args:
            reason: The line `report.skipped` lists.
            refusal: The library's error refusing the edited text, if that is the reason.
        """
        super().__init__(reason)
        self.reason = reason
        self.refusal = refusal


# --------------------------------------------------------------------------------------------
# token sweeps


class UnknownCandidateError(TokenOutOfVocabError):
    """A candidate word (or token id) that the model's vocabulary does not have.

    The message names the candidates.
    """


class ScoreFileError(DataFormatError):
    """A score CSV that cannot be read as one.

    A score CSV without the candidate column, with too few model columns, with a column that is not
    numeric or not finite, or with a repeated candidate (the message names the file, the column and
    the row).
    """


class ResumeMismatchError(ProvenanceMismatchError):
    """A resume file written by a different sweep.

    Another model, prompt, candidate set, objective, method or chunk size; the message names what
    differs, the file's value and this run's. Delete it or pass another path.
    """


class ResumeFileError(ResumableFileError):
    """A resume file's chunk that cannot be used.

    A non-finite score, too few or too many scores, a start that is not one of the sweep's chunks;
    the message names file and line.
    """


# --------------------------------------------------------------------------------------------
# implicit reward models


class VocabularyMismatchError(RewardLensError, ValueError):
    """Policy and reference do not share one tokenizer and vocabulary.

    Their log-probs of the same token ids are then not log-probs of the same text and their ratio is
    meaningless.
    """


class EmptyResponseMaskError(RewardLensError, ValueError):
    """A response mask selects no token of some row (an implicit reward would silently be 0)."""


class NonlinearUnembedError(RewardLensError, ValueError):
    """The policy's logits go through a non-linearity after the unembed (a logit soft-cap).

    The taken token's logit then has no exact linear split into components.
    """


# --------------------------------------------------------------------------------------------
# cross-model comparison


class BackboneMismatchError(RewardLensError, ValueError):
    """Component attributions of two models were compared, but their backbones differ.

    Depth, width, heads or component labels differ, so no component of one corresponds to one of the
    other.
    """


class UnknownModelError(RewardLensError, KeyError):
    """A model name that is not part of the comparison."""

    def __str__(self) -> str:
        """The message itself (not its repr, as `KeyError` would print)."""
        return str(self.args[0]) if self.args else ""


class PreEncodedPairsError(VocabularyMismatchError):
    """Pre-encoded pairs (token ids) given to models whose tokenizers differ.

    The same ids are different text for each model. Pass the pairs as text (prompt/chosen/rejected).
    """


# --------------------------------------------------------------------------------------------
# evaluations


class ScoreMismatchError(RewardLensError, ValueError):
    """A score file and a data file (or a resumed run) disagree.

    Unknown or duplicate item ids, another benchmark, or a different number of responses; the
    message names file, record and field.
    """


class UnknownBenchmarkError(RewardLensError, ValueError):
    """A benchmark name the harness does not know (the message lists the known ones)."""


class ScoreProducerMismatchError(ScoreMismatchError, ProvenanceMismatchError):
    """A score file being resumed was written by another producer.

    Another model (weights, config, tokenizer) or other result-changing arguments (truncation,
    objective), or one of its records scored an item whose texts have changed since; the message
    names both producers.
    """


# --------------------------------------------------------------------------------------------
# the HTML report


class ReportError(RewardLensError, ValueError):
    """A report that cannot be written as asked (unwritable folder, a resume with other arguments).

    Nothing half-written is left under the final name.
    """


# --------------------------------------------------------------------------------------------
# result objects: row operations and field checks (reward_lens_tl.results)


class NoExampleAxisError(UsageError):
    """`take`/`concat` on a result whose numbers are not per example.

    For example an aggregate, such as a per-feature report; the message says why.
    """


class ResultMismatchError(InvalidArgumentError):
    """Results that cannot be joined.

    A field shared by all examples differs between the parts (other component labels, another hook),
    or per-example arrays whose other axes disagree.
    """


class ResultFieldError(ShapeMismatchError):
    """A result built with a field of the wrong type or shape.

    Checked when shape checks are on: `reward_lens_tl.results.check_result_shapes`.
    """


# --------------------------------------------------------------------------------------------
# hub ids (reward_lens_tl.hub)


class HubResolutionError(CheckpointError):
    """A hub id (`org/name`) that cannot be resolved to a snapshot on this machine.

    The message names the repo id (and revision) and says what to do.
    """


class HubNotCachedError(HubResolutionError, MissingFileError):
    """A hub id whose snapshot is not in the local cache and cannot be fetched now.

    Offline (`HF_HUB_OFFLINE=1` or `local_files_only=True`), or the hub is unreachable; the message
    gives the `hf download` command that fetches it and where the cache is.
    """


class HubRepoNotFoundError(HubResolutionError, MissingFileError):
    """No model repository of that id on the hub, or a private one this token cannot see.

    The message says to check the spelling or log in (and that no local directory has that name).
    """


class HubGatedRepoError(HubRepoNotFoundError):
    """A gated hub repository whose terms this account has not accepted (or no token was sent).

    The message gives the page to accept them and how to pass a token.
    """


class HubRevisionNotFoundError(HubResolutionError):
    """A `revision` (branch, tag or commit) that the repository does not have.

    Or, offline, that the cache does not hold; the message names it and the cached ones.
    """


class HubIncompleteSnapshotError(HubResolutionError):
    """A cached snapshot that lacks files a checkpoint needs: an interrupted download.

    Missing `config.json`, the weights, or a shard its index names; the message says how to complete
    it.
    """


# -- judges and process reward models ------------------------------------------------------------
class VerdictTokenError(InvalidArgumentError):
    """A judge's verdict (or a PRM's label) is not one token of the tokenizer, or two are equal.

    The message names the argument, how the string tokenizes, and a variant that is one token (e.g.
    with a leading space) when there is one; token ids are accepted too.
    """


class JudgeTemplateError(TemplateError):
    """A judge or PRM prompt template with a missing or unknown placeholder.

    It lacks a required placeholder (`{response}`, ...), has an unknown one, or does not render.
    """


class StepSeparatorError(InvalidArgumentError):
    """A PRM solution's step tags do not give one position per step.

    A step without its tag, a tag inside a step's text, or a tag the tokenizer merges with its
    neighbours.
    """


class StepScoresMismatchError(ScoreMismatchError):
    """Per-step scores whose number does not match the solution's steps.

    Scores of a PRM score file or a call; the message names the record.
    """


# -- optimisation pressure: best-of-n, the training monitor, onset detection ---------------------
class PressureError(RewardLensError, ValueError):
    """Bad input to `reward_lens_tl.pressure`.

    A ladder, a monitor or an onset detector that cannot be built as asked; the message says what to
    pass instead.
    """


class ProbeSetTooLongError(PressureError, SequenceTooLongError):
    """A monitor's probe example that does not fit the reward model's context (`n_ctx`).

    Or whose probe edits do not; the message names the example and its length.
    """


class UnsupportedTrainerModelError(PressureError, UnsupportedArchitectureError):
    """The trainer's model cannot be monitored.

    It is not a reward model this library converts (for a reward-model run) or not a causal LM with
    logits (for a policy run).
    """


class MonitorFailedError(PressureError, RuntimeError):
    """A monitor measurement failed during training.

    Raised only with `on_error="raise"` (by default the callback logs it, records it in
    `callback.errors` and training goes on).
    """
