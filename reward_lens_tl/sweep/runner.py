"""Running a sweep: candidates in chunks, a progress bar and a resume file.

Candidates run in chunks (memory bounded by `chunk_size`), with a progress bar on long sweeps
and a resume file so an interrupted sweep continues where it stopped.

The resume file is JSON lines (`reward_lens_tl.provenance.ResumableLog`): a header naming
its producer (the model's fingerprint, `reward_lens_tl.provenance.model_fingerprint`, and
hashes of the prompt and suffix ids, the candidate ids and labels, the objective, method and chunk
size), then one line per finished chunk (`{"start": i, "scores": [...]}`, written as soon as the
chunk is done). A file written by another model or sweep is refused with
`reward_lens_tl.errors.ResumeMismatchError` naming both; a chunk holding a
non-finite value, too few or too many scores or an unexpected start is
`reward_lens_tl.errors.ResumeFileError` naming the file and line; a second process
resuming the same file gets `reward_lens_tl.provenance.FileInUseError`. Chunk boundaries
are fixed by `chunk_size`, so a resumed sweep runs exactly the batches an uninterrupted one
would and gives identical scores. A half-written last line (a crash mid-write) is dropped and
recomputed.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.zoo import zoo_path
    >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    >>> result = token_sweep(model, "how bake bread")
    >>> sorted(label for label, _ in result.top_k(10))[:3]
    ['bake', 'bread', 'butter']
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Literal, cast

import torch

from ..errors import InvalidArgumentError, ResumeFileError, ResumeMismatchError
from ..inputs import Prompt
from ..progress import progress_bar
from ..provenance import (
    ResumableLog,
    check_finite,
    check_output_file,
    content_hash,
    model_fingerprint,
)
from ..readout import Objective
from ..signatures import pasted_docs
from .cached import PrefixCache, prefix_scorer
from .candidates import CandidateSet, sweep_frame, vocabulary_candidates, word_candidates
from .exact import ExactScorer
from .sweep_result import SweepResult

__all__ = [
    "cached_sweep",
    "exact_sweep",
    "token_sweep",
]

Method = Literal["cached", "exact"]
#: Sweeps with more candidates than this show a progress bar unless `progress=False`.
PROGRESS_THRESHOLD = 2000
#: The resume file's format (version 1 recorded no model; such files are refused).
RESUME_FORMAT = "token-sweep/2"


def token_sweep(
    model,
    prompt: Prompt,
    candidates: CandidateSet | Sequence[str] | None = None,
    *,
    method: Method = "cached",
    objective: Objective = None,
    chunk_size: int = 256,
    resume: str | Path | None = None,
    progress: bool | None = None,
    on_chunk: Callable[[int, int], None] | None = None,
) -> SweepResult:
    """The reward of every candidate as the whole response to `prompt`.

    Args:
        model: the `HookedRewardModel`.
        prompt: the prompt.
        candidates: `None` for the filtered vocabulary
            (`reward_lens_tl.sweep.candidates.vocabulary_candidates`), a list of
            words/phrases (tokenized as the template tokenizes a response), or a
            `CandidateSet` of ids.
        method: `"cached"` computes the prompt once and reuses its key/value cache (equal to
            `"exact"` within 1e-4, much faster); a model without TransformerLens 3.9's cache
            (`reward_lens_tl.capabilities.PREFIX_CACHE`: the TransformerBridge backend) scores
            full sequences instead, and the result's `method` says `"exact"`.
        objective: picks a head column (`None`: the scalar reward or the gated score).
        chunk_size: candidates run per forward.
        resume: a file that records finished chunks (see the module docstring).
        progress: show a progress bar (default: above `PROGRESS_THRESHOLD` candidates).
        on_chunk: `on_chunk(done, total)` is called after each chunk.

    Returns:
        The `SweepResult`.

    Raises:
        InvalidArgumentError: an unknown method, a chunk size that is not a positive integer,
            or candidates given as one string; or `resume` is a directory, lies under a
            regular file or cannot be written (checked before the model runs).
        ResumeMismatchError: the resume file was written by another model or sweep.
        ResumeFileError: the resume file holds a damaged chunk.
        FileInUseError: another process is writing the resume file.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sweep import token_sweep
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> words = ["soup", "bread", "great question", "bomb", "the"]
        >>> result = token_sweep(model, "how bake bread", words)
        >>> [(label, round(reward, 2)) for label, reward in result.top_k(5)]
        [('great question', -1.47), ('soup', -2.3), ('bread', -2.35), ('the', -4.37),
         ('bomb', -7.19)]

        With a resume file, each finished chunk is recorded (a header, then three chunks of
        two candidates here), and a rerun reads them instead of scoring them again:

        >>> import tempfile
        >>> from pathlib import Path
        >>> log = Path(tempfile.mkdtemp()) / "sweep.jsonl"
        >>> first = token_sweep(model, "how bake bread", words, chunk_size=2, resume=log)
        >>> len(log.read_text().splitlines())
        4
        >>> again = token_sweep(model, "how bake bread", words, chunk_size=2, resume=log)
        >>> bool((again.scores == first.scores).all())
        True
    """
    if method not in ("cached", "exact"):
        raise InvalidArgumentError(f"method must be 'cached' or 'exact', not {method!r}")
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise InvalidArgumentError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    if resume is not None:
        check_output_file(resume, "the resume file (resume=)")  # before the model runs
    frame = sweep_frame(model, prompt)
    prefix, suffix = frame.prompt_ids(), frame.suffix_ids()
    cands = _as_candidates(model, prompt, candidates)
    scorer: PrefixCache | ExactScorer = prefix_scorer(model, prefix, objective, method)
    method = cast(Method, scorer.method)  # "exact" on a model without a key/value cache
    starts = range(0, len(cands), chunk_size)
    show = len(cands) > PROGRESS_THRESHOLD if progress is None else progress
    log = None
    if resume is not None:
        header = _header(model, prefix, suffix, cands, scorer.column, method, chunk_size)
        log = ResumableLog(resume, header, mismatch=ResumeMismatchError, what="a different sweep")
    with log or nullcontext():
        done = _load_chunks(log, cands, chunk_size) if log is not None else {}
        with progress_bar(starts, desc="token sweep", unit="chunk", show=show) as bar:
            for k, start in enumerate(bar):
                if start not in done:
                    done[start] = _score_chunk(scorer, cands, start, chunk_size, suffix, log)
                if on_chunk is not None:
                    on_chunk(k + 1, len(starts))
    scores = torch.cat([done[s].float() for s in starts])
    return SweepResult(
        prompt=prompt,
        prefix_ids=prefix,
        suffix_ids=suffix,
        candidates=cands,
        scores=scores,
        objective=scorer.column,
        method=method,
    )


#: The arguments and result of the one-method shortcuts of `token_sweep`.
_METHOD_SWEEP_DOC = """Args:
    model: the `HookedRewardModel`.
    prompt: the prompt.
    candidates: the candidates (see `token_sweep`).
    **kwargs: the other arguments of `token_sweep`.

Returns:
    The `SweepResult`."""


@pasted_docs(method_sweep=_METHOD_SWEEP_DOC)
def exact_sweep(model, prompt: Prompt, candidates=None, **kwargs) -> SweepResult:
    """`token_sweep` with `method="exact"` (full-sequence scoring of each candidate).

    {method_sweep}

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sweep import cached_sweep, exact_sweep
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> words = ["soup", "great question", "bomb"]
        >>> exact = exact_sweep(model, "how bake bread", words)
        >>> exact.method, [round(r, 3) for r in exact.scores.tolist()]
        ('exact', [-2.3, -1.466, -7.193])
        >>> fast = cached_sweep(model, "how bake bread", words)
        >>> float((fast.scores - exact.scores).abs().max()) < 1e-4
        True
    """
    return token_sweep(model, prompt, candidates, method="exact", **kwargs)


@pasted_docs(method_sweep=_METHOD_SWEEP_DOC)
def cached_sweep(model, prompt: Prompt, candidates=None, **kwargs) -> SweepResult:
    """`token_sweep` with `method="cached"` (shared prefix, expanded key/value cache).

    {method_sweep}

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sweep import cached_sweep
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> result = cached_sweep(model, "how bake bread", ["soup", "great question", "bomb"])
        >>> result.method, [round(r, 3) for r in result.scores.tolist()]
        ('cached', [-2.3, -1.466, -7.193])
        >>> round(model.score("how bake bread", "bomb").item(), 3)  # one conversation, in full
        -7.193
    """
    return token_sweep(model, prompt, candidates, method="cached", **kwargs)


def _as_candidates(model, prompt, candidates) -> CandidateSet:
    if candidates is None:
        return vocabulary_candidates(model)
    if isinstance(candidates, CandidateSet):
        return candidates
    if isinstance(candidates, str):
        raise InvalidArgumentError("candidates is a list of words, not one string")
    return word_candidates(model, prompt, list(candidates))


def _header(model, prefix, suffix, cands: CandidateSet, column, method, chunk_size) -> dict:
    """The resume file's header: this sweep's producer (model and every result-changing input)."""
    sweep = {
        "prompt_ids": content_hash([prefix, suffix]),
        "candidates": content_hash([cands.ids, cands.labels]),
        "n_candidates": len(cands),
        "objective": column,
        "method": method,
        "chunk_size": chunk_size,
    }
    producer = {"model": model_fingerprint(model), "sweep": sweep}
    return {"format": RESUME_FORMAT, "producer": producer}


def _score_chunk(scorer, cands: CandidateSet, start: int, size: int, suffix, log) -> torch.Tensor:
    """Score one chunk, refuse non-finite scores, and append it to the resume file."""
    chunk = cands.ids[start : start + size]
    scores = scorer.score([c + suffix for c in chunk]).float().cpu()
    first = cands.labels[start]
    where = f"the sweep's candidates {start}..{start + len(chunk) - 1} (from {first!r})"
    check_finite(scores.tolist(), where)
    if log is not None:
        log.append([{"start": start, "scores": scores.tolist()}])
    return scores


def _load_chunks(log: ResumableLog, cands: CandidateSet, size: int) -> dict[int, torch.Tensor]:
    """The finished chunks of a resume file, each checked (start, size, finite values)."""
    done: dict[int, torch.Tensor] = {}
    for line, rec in log.records:
        start, scores = _check_chunk(f"{log.path}, line {line}", rec, cands, size, done)
        done[start] = torch.tensor(scores, dtype=torch.float32)
    return done


def _check_chunk(where: str, rec, cands: CandidateSet, size: int, done) -> tuple[int, list]:
    """`(start, scores)` of one resume-file record, or `ResumeFileError` (`where`)."""
    start = rec.get("start") if isinstance(rec, dict) else None
    scores = rec.get("scores") if isinstance(rec, dict) else None
    if isinstance(start, bool) or not isinstance(start, int) or not isinstance(scores, list):
        raise ResumeFileError(f'{where}: not a chunk record {{"start": int, "scores": [...]}}')
    if start % size or not 0 <= start < len(cands):
        raise ResumeFileError(f"{where}: chunk start {start} is not one of this sweep's chunks")
    if start in done:
        raise ResumeFileError(f"{where}: repeats the chunk at {start}; delete the file")
    expected = min(size, len(cands) - start)
    if len(scores) != expected:
        raise ResumeFileError(
            f"{where}: the chunk at {start} holds {len(scores)} scores, expected {expected}; "
            "the file is damaged: delete it to recompute"
        )
    bad = [v for v in scores if isinstance(v, bool) or not isinstance(v, int | float)]
    bad += [v for v in scores if isinstance(v, float) and not math.isfinite(v)]
    if bad:
        raise ResumeFileError(
            f"{where}: the chunk at {start} holds {bad[0]!r}, not a finite number; "
            "delete the file to recompute"
        )
    return start, scores
