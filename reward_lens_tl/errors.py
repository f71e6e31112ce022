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

__all__ = [
    "AlignmentError",
    "AmbiguousObjectiveError",
    "ArgumentTypeError",
    "BackboneMismatchError",
    "BridgeUnsupportedError",
    "CheckpointError",
    "CheckpointNamesError",
    "CheckpointWeightsError",
    "ConversionMismatchError",
    "DataFormatError",
    "EmptyActivationsError",
    "EmptyInputError",
    "EmptyResponseMaskError",
    "FieldError",
    "FileInUseError",
    "HubGatedRepoError",
    "HubIncompleteSnapshotError",
    "HubNotCachedError",
    "HubRepoNotFoundError",
    "HubResolutionError",
    "HubRevisionNotFoundError",
    "InvalidArgumentError",
    "JudgeTemplateError",
    "MalformedRecordError",
    "MemoryEstimateError",
    "MissingAttentionMaskError",
    "MissingFileError",
    "MissingPadTokenError",
    "MonitorFailedError",
    "NoExampleAxisError",
    "NonFiniteActivationError",
    "NonFiniteResultError",
    "NonFiniteWeightsError",
    "NonlinearUnembedError",
    "NotForRewardModelsError",
    "PatchingError",
    "PreEncodedPairsError",
    "PressureError",
    "ProbeError",
    "ProbeFunctionError",
    "ProbeNotApplicableError",
    "ProbeSetTooLongError",
    "ProbeSkip",
    "ProvenanceMismatchError",
    "ReportError",
    "ResultFieldError",
    "ResultMismatchError",
    "ResumableFileError",
    "ResumeFileError",
    "ResumeMismatchError",
    "RewardHeadError",
    "RewardLensError",
    "SAEHookError",
    "SAESiteError",
    "ScoreFileError",
    "ScoreMismatchError",
    "ScoreProducerMismatchError",
    "SequenceTooLongError",
    "ShapeMismatchError",
    "StepScoresMismatchError",
    "StepSeparatorError",
    "TemplateError",
    "TokenIdsTypeError",
    "TokenOutOfVocabError",
    "TokenizerLoadError",
    "TooFewExamplesError",
    "TransformerLensVersionError",
    "UnknownBenchmarkError",
    "UnknownCandidateError",
    "UnknownHookError",
    "UnknownKeywordError",
    "UnknownModelError",
    "UnknownNameError",
    "UnsafeCheckpointError",
    "UnsupportedArchitectureError",
    "UnsupportedModelError",
    "UnsupportedSAEError",
    "UnsupportedTrainerModelError",
    "UsageError",
    "VerdictTokenError",
    "VocabularyMismatchError",
]


class RewardLensError(Exception):
    """Base class of every error reward-lens-tl raises deliberately.

    Examples:
        >>> from reward_lens_tl.errors import RewardLensError
        >>> issubclass(RewardLensError, Exception)
        True
    """


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
    """One field failed validation. `field` names it; loaders add the file and record.

    Args:
        field: Name of the field.
        reason: What is wrong with it.

    Examples:
        >>> from reward_lens_tl.data import PreferencePair
        >>> from reward_lens_tl.errors import FieldError, MalformedRecordError
        >>> try:
        ...     PreferencePair("how bake bread", 1.0, "bomb")  # a response must be text
        ... except FieldError as err:
        ...     print(err.field, "|", err.reason, "|", isinstance(err, MalformedRecordError))
        chosen | must be a str, got float | True
    """

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

    Examples:
        >>> import pathlib, tempfile
        >>> from reward_lens_tl.errors import ProvenanceMismatchError
        >>> from reward_lens_tl.provenance import ResumableLog
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "run.jsonl"
        >>> with ResumableLog(path, {"format": "demo/1", "producer": {"seed": 0}}) as log:
        ...     log.append([{"score": 1.5}])
        >>> try:  # resuming the file with another seed
        ...     with ResumableLog(path, {"format": "demo/1", "producer": {"seed": 1}}):
        ...         pass
        ... except ProvenanceMismatchError as err:
        ...     print(str(err).split("; ")[1])
        seed: the file says 0, this run is 1
    """


class FileInUseError(RewardLensError, RuntimeError):
    """Another process is writing the same resumable file; wait for it or use another path.

    Examples:
        >>> import pathlib, tempfile
        >>> from reward_lens_tl.errors import FileInUseError
        >>> from reward_lens_tl.provenance import ResumableLog
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "run.jsonl"
        >>> header = {"format": "demo/1", "producer": {}}
        >>> with ResumableLog(path, header) as log:  # this writer holds the file's lock
        ...     try:
        ...         with ResumableLog(path, header):  # a second writer (another process, say)
        ...             pass
        ...     except FileInUseError as err:
        ...         print("is being written by another process" in str(err))
        True
    """


class ResumableFileError(DataFormatError):
    r"""A resumable file whose content cannot be resumed.

    A non-finite value, a record of the wrong size, a broken header; the message names the file and
    the line.

    Examples:
        >>> import pathlib, tempfile
        >>> from reward_lens_tl.errors import ResumableFileError
        >>> from reward_lens_tl.provenance import ResumableLog
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "run.jsonl"
        >>> header = {"format": "demo/1", "producer": {}}
        >>> with ResumableLog(path, header) as log:
        ...     log.append([{"score": 1.5}])
        >>> with open(path, "a") as f:  # a record added by hand, holding NaN
        ...     _ = f.write('{"score": NaN}\n')
        >>> try:
        ...     with ResumableLog(path, header):
        ...         pass
        ... except ResumableFileError as err:
        ...     print(str(err).split("; ")[0].split(", ", 1)[1])
        line 3: not a valid record (holds NaN, not a finite number)
    """


class NonFiniteResultError(RewardLensError, ValueError):
    """A computed score is NaN or infinite; it is never written to a file or returned.

    Examples:
        >>> from reward_lens_tl.errors import NonFiniteResultError
        >>> from reward_lens_tl.provenance import check_finite
        >>> try:
        ...     check_finite([0.5, float("inf")], "rewards of batch 2")
        ... except NonFiniteResultError as err:
        ...     print(str(err).split(";")[0])
        rewards of batch 2: value 1 is inf
    """


# --------------------------------------------------------------------------------------------
# patching


class AlignmentError(RewardLensError, ValueError):
    """Clean and corrupted positions cannot be aligned as requested.

    For example `"exact"` with two lengths, or `"prefix"` without a known prefix length.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.errors import AlignmentError
        >>> from reward_lens_tl.patching import align, as_run
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> clean, corrupted = as_run(model, [1, 5, 6, 7, 8]), as_run(model, [1, 9, 7])
        >>> try:
        ...     align(clean, corrupted, "exact")  # position by position, but 5 vs 3 tokens
        ... except AlignmentError as err:
        ...     print(str(err).split(";")[0])
        alignment='exact' needs equal lengths
        >>> align(clean, corrupted, "end").labels()  # aligned at the reading token instead
        ('end-2', 'end-1', 'end-0')
    """


class PatchingError(RewardLensError, ValueError):
    """A patching request that cannot be carried out as given.

    Unknown site or mode, a metric returning the wrong shape, an undefined restored fraction, ...

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.errors import PatchingError
        >>> from reward_lens_tl.patching import activation_patching
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> try:
        ...     activation_patching(model, [1, 5, 6, 7, 8])  # no corrupted run to patch from
        ... except PatchingError as err:
        ...     print(err)
        mode='denoising' needs a corrupted input
    """


class UnsupportedModelError(RewardLensError, NotImplementedError):
    """A model feature a patching method does not handle.

    The message says which, and what still works.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.errors import UnsupportedModelError
        >>> from reward_lens_tl.patching import atp_star
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> model.set_use_split_qkv_input(True)  # TL's separate q/k/v inputs
        >>> try:
        ...     atp_star(model, [1, 5, 6, 7, 2], [1, 5, 9, 7, 2])
        ... except UnsupportedModelError as err:
        ...     print(str(err).split("; ")[1])
        use qk_fix=False (plain AtP, GradDrop still works)
    """


# --------------------------------------------------------------------------------------------
# sparse autoencoders


class SAEHookError(UnknownHookError):
    """An SAE's hook name does not exist on the model (sae_lens would only log a warning).

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.errors import SAEHookError, UnknownHookError
        >>> from reward_lens_tl.sae.testing import random_topk_sae
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))  # 2 layers
        >>> try:
        ...     random_topk_sae(model, "blocks.5.hook_resid_post")
        ... except SAEHookError as err:
        ...     print(str(err).split(";")[0], isinstance(err, UnknownHookError))
        unknown hook name(s) ['blocks.5.hook_resid_post'] True
    """


class SAESiteError(RewardLensError, ValueError):
    """An SAE is used where its site or shape does not fit the analysis.

    For example a direct feature attribution for an SAE that does not read the final residual
    stream.

    Examples:
        >>> import torch
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.errors import SAESiteError
        >>> from reward_lens_tl.sae import feature_attribution
        >>> from reward_lens_tl.sae.testing import random_topk_sae
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))  # 2 layers
        >>> sae = random_topk_sae(model, "blocks.0.hook_resid_post", d_sae=16, k=2)
        >>> try:
        ...     feature_attribution(model, sae, torch.tensor([[1, 5, 6, 2]]))
        ... except SAESiteError as err:
        ...     print(str(err).split(" 'blocks")[0])
        direct feature attribution needs an SAE on the final residual
    """


class UnsupportedSAEError(RewardLensError, NotImplementedError):
    """An sae_lens SAE that is not linear in its latents or not on its hook, where that matters.

    Its decoder is not linear in its latents (run-time activation normalisation) or it writes to a
    different hook (transcoders), where linearity is needed.

    Examples:
        >>> from sae_lens import TopKSAE, TopKSAEConfig
        >>> from sae_lens.saes.sae import SAEMetadata
        >>> from reward_lens_tl.errors import UnsupportedSAEError
        >>> from reward_lens_tl.sae import decoder_directions
        >>> cfg = TopKSAEConfig(d_in=64, d_sae=16, k=2, normalize_activations="layer_norm",
        ...                     metadata=SAEMetadata(hook_name="blocks.1.hook_resid_post"))
        >>> try:
        ...     decoder_directions(TopKSAE(cfg))
        ... except UnsupportedSAEError as err:
        ...     print(str(err).split(";")[0])
        this SAE normalises activations at run time ('layer_norm'), so its decoder is not linear
        in the latents
    """


class EmptyActivationsError(RewardLensError, ValueError):
    """No (non-padding) activations were produced from the input given.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.errors import EmptyActivationsError
        >>> from reward_lens_tl.sae import collect_activations
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> try:
        ...     collect_activations(model, "blocks.0.hook_resid_post", [])  # no sequences
        ... except EmptyActivationsError as err:
        ...     print(err)
        no activations at blocks.0.hook_resid_post: the source was empty
    """


# --------------------------------------------------------------------------------------------
# probes


class ProbeError(RewardLensError, ValueError):
    """A probe or a probe run that is set up wrongly (bad `at=`, duplicate names, ...).

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.errors import ProbeError
        >>> from reward_lens_tl.probes import Probe, run_probes
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> twice = [Probe.insert("great", name="opener"), Probe.insert("please", name="opener")]
        >>> try:
        ...     run_probes(model, [("how bake bread", "the oven")], twice)
        ... except ProbeError as err:
        ...     print(err)
        probe names must be unique; repeated: ['opener']
    """


class TooFewExamplesError(ProbeError):
    """Fewer examples than a statistic needs to mean anything.

    No infinite effect sizes, no correlations of ±1 from two points: the message says how many there
    are and are needed.

    Examples:
        >>> from reward_lens_tl.errors import ProbeError, TooFewExamplesError
        >>> from reward_lens_tl.probes import summarize_deltas
        >>> try:
        ...     summarize_deltas([0.1, 0.2, 0.3], natural_sd=1.0)  # three reward deltas
        ... except TooFewExamplesError as err:
        ...     print(str(err).split(";")[0], isinstance(err, ProbeError))
        probe deltas: 3 values, fewer than the 10 needed for a meaningful estimate True
    """


class ProbeFunctionError(ProbeError):
    """A probe's edit function failed (a bug in the probe, not a reason to skip an example).

    The message names the probe, the example and the original error (chained as the cause).

    Examples:
        >>> import random
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.errors import ProbeFunctionError
        >>> from reward_lens_tl.probes import Probe
        >>> from reward_lens_tl.probes.runner import apply_probe, as_items
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> item = as_items(model, [("how bake bread", "the oven")])[0]
        >>> broken = Probe("broken", lambda conv: conv.response[10])  # a bug: an index error
        >>> try:
        ...     apply_probe(model, broken, item, random.Random(0), index=0)
        ... except ProbeFunctionError as err:
        ...     print(str(err).split(". ")[0], "|", type(err.__cause__).__name__)
        probe 'broken' failed on example 0: IndexError: tuple index out of range | IndexError
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

    Args:
        reason: Why the probe does not apply to this example.

    Examples:
        An edit that applies only to responses that mention the oven:

        >>> import random
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.errors import ProbeNotApplicableError, ProbeSkip
        >>> from reward_lens_tl.probes import Probe
        >>> from reward_lens_tl.probes.runner import apply_probe, as_items
        >>> from reward_lens_tl.zoo import zoo_path
        >>> def repeat_oven(conv):
        ...     if "oven" not in conv.response_text:
        ...         raise ProbeSkip("the response does not mention the oven")
        ...     return conv.with_response(conv.response * 2)
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> item = as_items(model, [("tell a song", "the melody")])[0]
        >>> try:  # run_probes lists this reason in report.skipped and goes on
        ...     apply_probe(model, Probe("repeat_oven", repeat_oven), item, random.Random(0))
        ... except ProbeNotApplicableError as err:
        ...     print(err.reason)
        the response does not mention the oven
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

    Args:
        reason: The line `report.skipped` lists.
        refusal: The library's error refusing the edited text, if that is the reason.

    Examples:
        >>> from reward_lens_tl.errors import ProbeNotApplicableError, RewardLensError
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

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sweep import token_sweep
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))  # a 122-word vocabulary
        >>> token_sweep(model, "how bake bread", ["soup", "xylophone"])
        Traceback (most recent call last):
        ...
        reward_lens_tl.errors.UnknownCandidateError: 1 candidate(s) are not in the vocabulary ...
    """


class ScoreFileError(DataFormatError):
    r"""A score CSV that cannot be read as one.

    A score CSV without the candidate column, with too few model columns, with a column that is not
    numeric or not finite, or with a repeated candidate (the message names the file, the column and
    the row).

    Examples:
        >>> import io
        >>> from reward_lens_tl.errors import ScoreFileError
        >>> from reward_lens_tl.sweep import read_score_csv
        >>> csv = "word,m1,m2\nsoup,1.5,2.0\nbomb,-3.0,-1.0\n"
        >>> try:
        ...     read_score_csv(io.StringIO(csv))  # expects the candidates in a column `name`
        ... except ScoreFileError as err:
        ...     print(str(err).split(";")[0])
        <stream> has no candidate column 'name' (columns: ['word', 'm1', 'm2'])
        >>> read_score_csv(io.StringIO(csv), candidate_column="word").index.tolist()
        ['soup', 'bomb']
    """


class ResumeMismatchError(ProvenanceMismatchError):
    """A resume file written by a different sweep.

    Another model, prompt, candidate set, objective, method or chunk size; the message names what
    differs, the file's value and this run's. Delete it or pass another path.

    Examples:
        >>> import pathlib, tempfile
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.errors import ResumeMismatchError
        >>> from reward_lens_tl.sweep import token_sweep
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "sweep.jsonl"
        >>> words = ["soup", "bomb", "oven"]
        >>> _ = token_sweep(model, "how bake bread", words, chunk_size=2, resume=path)
        >>> try:
        ...     token_sweep(model, "how bake bread", words, chunk_size=3, resume=path)
        ... except ResumeMismatchError as err:
        ...     print(str(err).split("; ")[1])
        sweep.chunk_size: the file says 2, this run is 3
    """


class ResumeFileError(ResumableFileError):
    r"""A resume file's chunk that cannot be used.

    A non-finite score, too few or too many scores, a start that is not one of the sweep's chunks;
    the message names file and line.

    Examples:
        >>> import pathlib, tempfile
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.errors import ResumeFileError
        >>> from reward_lens_tl.sweep import token_sweep
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "sweep.jsonl"
        >>> words = ["soup", "bomb", "oven"]
        >>> _ = token_sweep(model, "how bake bread", words, chunk_size=2, resume=path)
        >>> with open(path, "a") as f:  # chunks start at 0 and 2: a record that is neither
        ...     _ = f.write('{"start": 7, "scores": [0.0]}\n')
        >>> try:
        ...     token_sweep(model, "how bake bread", words, chunk_size=2, resume=path)
        ... except ResumeFileError as err:
        ...     print(str(err).split(", ", 1)[1])
        line 4: chunk start 7 is not one of this sweep's chunks
    """


# --------------------------------------------------------------------------------------------
# implicit reward models


class VocabularyMismatchError(RewardLensError, ValueError):
    """Policy and reference do not share one tokenizer and vocabulary.

    Their log-probs of the same token ids are then not log-probs of the same text and their ratio is
    meaningless.

    Examples:
        >>> from reward_lens_tl.errors import VocabularyMismatchError
        >>> from reward_lens_tl.implicit import ImplicitRewardModel
        >>> from reward_lens_tl.zoo import zoo_path
        >>> try:  # the judge is not the policy's reference: another vocabulary
        ...     ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("judge"))
        ... except VocabularyMismatchError as err:
        ...     print(str(err).split(":")[0])
        policy has d_vocab=122 but reference has d_vocab=128
    """


class EmptyResponseMaskError(RewardLensError, ValueError):
    """A response mask selects no token of some row (an implicit reward would silently be 0).

    Examples:
        >>> import torch
        >>> from reward_lens_tl.errors import EmptyResponseMaskError
        >>> from reward_lens_tl.implicit import ImplicitRewardModel
        >>> from reward_lens_tl.zoo import zoo_path
        >>> irm = ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))
        >>> ids, attention, response = irm.batch([irm.encode("how bake bread", "great soup")])
        >>> try:
        ...     irm.log_ratios(ids, torch.zeros_like(response), attention)
        ... except EmptyResponseMaskError as err:
        ...     print(str(err).split(":")[0])
        the response mask selects no token in rows [0]
    """


class NonlinearUnembedError(RewardLensError, ValueError):
    """The policy's logits go through a non-linearity after the unembed (a logit soft-cap).

    The taken token's logit then has no exact linear split into components.

    Examples:
        >>> from reward_lens_tl.errors import NonlinearUnembedError
        >>> from reward_lens_tl.implicit import ImplicitRewardModel, load_causal_lm
        >>> from reward_lens_tl.implicit import implicit_attribution
        >>> from reward_lens_tl.inputs import EncodedConversation
        >>> from reward_lens_tl.testing import tiny_causal_lm
        >>> policy = load_causal_lm(tiny_causal_lm("gemma2", 0)[0])  # Gemma-2 soft-caps logits
        >>> reference = load_causal_lm(tiny_causal_lm("gemma2", 1)[0])
        >>> irm = ImplicitRewardModel(policy, reference, beta=0.1)
        >>> ids, attention, response = irm.batch([EncodedConversation(tuple(range(3, 12)), 4)])
        >>> try:
        ...     implicit_attribution(irm, ids, response, attention)
        ... except NonlinearUnembedError as err:
        ...     print(str(err).split(",")[0])
        this policy soft-caps its logits (output_logits_soft_cap > 0)
    """


# --------------------------------------------------------------------------------------------
# cross-model comparison


class BackboneMismatchError(RewardLensError, ValueError):
    """Component attributions of two models were compared, but their backbones differ.

    Depth, width, heads or component labels differ, so no component of one corresponds to one of the
    other.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.crossmodel import compare_models
        >>> from reward_lens_tl.errors import BackboneMismatchError
        >>> from reward_lens_tl.inputs import EncodedConversation
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> two = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> one = HookedRewardModel.from_pretrained(tiny_reward_model("llama", num_hidden_layers=1))
        >>> pair = (EncodedConversation((1, 5, 6, 7, 2), 2), EncodedConversation((1, 5, 8, 2), 2))
        >>> cmp = compare_models({"two": two, "one": one}, [pair], n_boot=10)
        >>> try:
        ...     cmp.attribution_rank_correlation("two", "one")
        ... except BackboneMismatchError as err:
        ...     print(str(err).split(" (")[0])
        'two' and 'one' have different backbones
    """


class UnknownModelError(RewardLensError, KeyError):
    """A model name that is not part of the comparison.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.crossmodel import compare_models
        >>> from reward_lens_tl.errors import UnknownModelError
        >>> from reward_lens_tl.inputs import EncodedConversation
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> pair = (EncodedConversation((1, 5, 6, 7, 2), 2), EncodedConversation((1, 5, 8, 2), 2))
        >>> cmp = compare_models({"a": model, "b": model}, [pair], n_boot=10)
        >>> try:
        ...     cmp.run("c")
        ... except UnknownModelError as err:
        ...     print(err, isinstance(err, KeyError))
        unknown model 'c'; this comparison has ('a', 'b') True
    """

    def __str__(self) -> str:
        """The message itself (not its repr, as `KeyError` would print)."""
        return str(self.args[0]) if self.args else ""


class PreEncodedPairsError(VocabularyMismatchError):
    """Pre-encoded pairs (token ids) given to models whose tokenizers differ.

    The same ids are different text for each model. Pass the pairs as text (prompt/chosen/rejected).

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.crossmodel import compare_models
        >>> from reward_lens_tl.errors import PreEncodedPairsError
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> zoo = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> tiny = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> pairs = load_task().task.contrast_pairs("harmful", 2, seed=0)  # the zoo's token ids
        >>> try:
        ...     compare_models({"zoo": zoo, "tiny": tiny}, pairs)
        ... except PreEncodedPairsError as err:
        ...     print(str(err).split(" (")[0])
        pairs [0, 1] are token ids, but the models' tokenizers differ
    """


# --------------------------------------------------------------------------------------------
# evaluations


class ScoreMismatchError(RewardLensError, ValueError):
    """A score file and a data file (or a resumed run) disagree.

    Unknown or duplicate item ids, another benchmark, or a different number of responses; the
    message names file, record and field.

    Examples:
        >>> from reward_lens_tl.data import PreferencePair
        >>> from reward_lens_tl.errors import ScoreMismatchError
        >>> from reward_lens_tl.evals import ScoreRecord, ScoreSet, align_scores
        >>> items = [PreferencePair("how bake bread", "oven", "bomb", subset="s")]  # id s/0
        >>> scores = ScoreSet([ScoreRecord("rewardbench", "s/7", (1.0,), (0.0,), subset="s")],
        ...                   source="scores.jsonl")
        >>> try:
        ...     align_scores(scores, items)
        ... except ScoreMismatchError as err:
        ...     print(str(err).split(";")[0])
        scores.jsonl: record 0 (id='s/7'), field 'id': no data item has this id
    """


class UnknownBenchmarkError(RewardLensError, ValueError):
    """A benchmark name the harness does not know (the message lists the known ones).

    Examples:
        >>> from reward_lens_tl.errors import UnknownBenchmarkError
        >>> from reward_lens_tl.evals import check_benchmark
        >>> try:
        ...     check_benchmark("mmlu")
        ... except UnknownBenchmarkError as err:
        ...     print(err)
        unknown benchmark 'mmlu'; known benchmarks: rewardbench, rewardbench2, rewardmath, rmbench
    """


class ScoreProducerMismatchError(ScoreMismatchError, ProvenanceMismatchError):
    """A score file being resumed was written by another producer.

    Another model (weights, config, tokenizer) or other result-changing arguments (truncation,
    objective), or one of its records scored an item whose texts have changed since; the message
    names both producers.

    Examples:
        >>> import pathlib, tempfile
        >>> from reward_lens_tl.errors import ProvenanceMismatchError, ScoreProducerMismatchError
        >>> from reward_lens_tl.evals import ScoreRecord, ScoreWriter
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "scores.jsonl"
        >>> with ScoreWriter(path, "rewardbench", producer={"model": {"name": "rm-v1"}}) as out:
        ...     out.write(ScoreRecord("rewardbench", "a/0", (1.0,), (0.5,), subset="a"))
        >>> try:  # resuming the file with another model's scores
        ...     ScoreWriter(path, "rewardbench", producer={"model": {"name": "rm-v2"}})
        ... except ScoreProducerMismatchError as err:
        ...     print(str(err).split("; ")[1], isinstance(err, ProvenanceMismatchError))
        model.name: the file says 'rm-v1', this run is 'rm-v2' True
    """


# --------------------------------------------------------------------------------------------
# the HTML report


class ReportError(RewardLensError, ValueError):
    """A report that cannot be written as asked (unwritable folder, a resume with other arguments).

    Nothing half-written is left under the final name.

    Examples:
        >>> import tempfile
        >>> from reward_lens_tl.errors import ReportError
        >>> from reward_lens_tl.report import build_report
        >>> build_report(out_dir=tempfile.mkdtemp(), resume=True)  # nothing started there yet
        Traceback (most recent call last):
        ...
        reward_lens_tl.errors.ReportError: nothing to resume in ... run without --resume
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
    r"""Per-step scores whose number does not match the solution's steps.

    Scores of a PRM score file or a call; the message names the record.

    Examples:
        >>> from reward_lens_tl.data import RankedItem
        >>> from reward_lens_tl.errors import StepScoresMismatchError
        >>> from reward_lens_tl.evals import ScoreSet, StepScoreRecord, align_scores
        >>> steps = (("a", "b"), ("c",))  # the correct solution's two steps, the other's one
        >>> item = RankedItem("1+1?", "a\nb", ("c",), id=0, metadata={"steps": steps})
        >>> record = StepScoreRecord(
        ...     "rewardmath", 0, chosen_steps=((0.9,),), rejected_steps=((0.2,),)
        ... )
        >>> try:  # one step score for the correct solution's two steps
        ...     align_scores(ScoreSet([record], source="prm.jsonl"), [item])
        ... except StepScoresMismatchError as err:
        ...     print(str(err).split(";")[0])
        prm.jsonl: record 0 (id=0), solution 0 (0: the correct one): 1 step scores but the
        solution has 2 steps
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


class MemoryEstimateError(RewardLensError, MemoryError):
    """A forward (or a cache) whose estimated memory exceeds what the device has free.

    Raised before anything is allocated (`reward_lens_tl.memory.check_fits`); the message names
    the estimate, the memory available and the fix (smaller batches, `names_filter`,
    `pos_slice`).

    Examples:
        >>> import torch
        >>> from unittest import mock
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.errors import MemoryEstimateError
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> ids = torch.ones(300_000, 64, dtype=torch.long)   # never allocated past the ids
        >>> with mock.patch("reward_lens_tl.memory.available_bytes", return_value=8 * 2**30):
        ...     try:
        ...         model.rewards(ids)
        ...     except MemoryEstimateError as err:
        ...         print(str(err)[:55])
        forward of a 300000 × 64 batch needs at least 54.9 GiB
    """


# -- the TransformerBridge backend (TransformerLens 4; reward_lens_tl.bridge) --------------------
class TransformerLensVersionError(RewardLensError, ImportError):
    """The installed TransformerLens is not the line this part of the package runs on.

    `reward_lens_tl.bridge` needs TransformerLens 4 (the second environment,
    `requirements-tl4.txt`); `HookedRewardModel` and the SAE tools need TransformerLens 3.9 with
    sae_lens (the default install). The message names the version found and the install command.
    """


class BridgeUnsupportedError(RewardLensError, NotImplementedError):
    """Something the TransformerLens 3.9 backend does that the TransformerBridge backend cannot.

    The message says why (e.g. sae_lens does not import under TransformerLens 4, so SAEs cannot
    be spliced) and which environment does it.
    """


def _caught_as(cls: type[BaseException]) -> None:
    """Give an error class without an example one: the classes an `except` may name to catch it.

    Every error of this module is caught by its bases (`RewardLensError` and the built-in
    exception Python code would raise there); the example is written from `cls.__bases__` so
    that the hierarchy is stated once, here, and cannot drift from the class line.
    """
    doc = cls.__doc__ or ""
    if "\nExamples:\n" in doc:
        return
    bases = [b for b in cls.__bases__ if b is not Exception]
    ours = sorted({cls.__name__, *(b.__name__ for b in bases if b.__module__ == __name__)})
    lines = [f">>> from reward_lens_tl.errors import {', '.join(ours)}"]
    for base in bases:
        lines += [f">>> issubclass({cls.__name__}, {base.__name__})", "True"]
    caught = " or ".join(f"`{b.__name__}`" for b in bases)
    cls.__doc__ = doc.rstrip() + "\n\n    Examples:\n        Caught as " + caught + ":\n\n"
    cls.__doc__ += "".join(f"        {line}\n" for line in lines) + "    "


for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type) and issubclass(_obj, BaseException) and _obj.__module__ == __name__:
        _caught_as(_obj)
