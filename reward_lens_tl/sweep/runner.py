"""Running a sweep: candidates in chunks (memory bounded by ``chunk_size``), a progress bar on
long sweeps, and a resume file so an interrupted sweep continues where it stopped.

The resume file is JSON lines: a header with a fingerprint of the sweep (prompt and suffix ids,
candidate ids, objective, method, chunk size), then one line per finished chunk
(``{"start": i, "scores": [...]}``, flushed as soon as the chunk is done). Chunk boundaries are
fixed by ``chunk_size``, so a resumed sweep runs exactly the batches an uninterrupted one would
and gives identical scores. A half-written last line (a crash mid-write) is ignored.

>>> from reward_lens_tl import HookedRewardModel
>>> from reward_lens_tl.zoo import zoo_path
>>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
>>> result = token_sweep(model, "how bake bread")
>>> sorted(label for label, _ in result.top_k(10))[:3]
['bake', 'bread', 'butter']
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import torch

from ..errors import InvalidArgumentError
from ..inputs import Prompt
from ..readout import Objective
from .cached import PrefixCache
from .candidates import CandidateSet, sweep_frame, vocabulary_candidates, word_candidates
from .errors import ResumeMismatchError
from .exact import ExactScorer
from .results import SweepResult

Method = Literal["cached", "exact"]
#: Sweeps with more candidates than this show a progress bar unless ``progress=False``.
PROGRESS_THRESHOLD = 2000


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
    """The reward of every candidate as the whole response to ``prompt``.

    ``candidates``: ``None`` for the filtered vocabulary
    (:func:`~reward_lens_tl.sweep.candidates.vocabulary_candidates`), a list of words/phrases
    (tokenized as the template tokenizes a response), or a :class:`CandidateSet` of ids.
    ``method="cached"`` computes the prompt once and reuses its key/value cache (equal to
    ``"exact"`` within 1e-4, much faster); ``chunk_size`` candidates run per forward;
    ``resume`` is a file that records finished chunks (see the module docstring);
    ``on_chunk(done, total)`` is called after each chunk.
    """
    if method not in ("cached", "exact"):
        raise InvalidArgumentError(f"method must be 'cached' or 'exact', not {method!r}")
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise InvalidArgumentError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    frame = sweep_frame(model, prompt)
    prefix, suffix = frame.prompt_ids(), frame.suffix_ids()
    cands = _as_candidates(model, prompt, candidates)
    if method == "cached":
        scorer = PrefixCache.build(model, prefix, objective)
    else:
        scorer = ExactScorer(model, prefix, objective)
    fingerprint = _fingerprint(prefix, suffix, cands, scorer.column, method, chunk_size)
    done = _load_resume(resume, fingerprint) if resume is not None else {}
    starts = range(0, len(cands), chunk_size)
    show = len(cands) > PROGRESS_THRESHOLD if progress is None else progress
    writer = _open_resume(resume, fingerprint, fresh=not done) if resume is not None else None
    try:
        for k, start in enumerate(_progress(starts, show)):
            if start not in done:
                chunk = cands.ids[start : start + chunk_size]
                scores = scorer.score([c + suffix for c in chunk]).cpu()
                done[start] = scores
                if writer is not None:
                    writer.write(json.dumps({"start": start, "scores": scores.tolist()}) + "\n")
                    writer.flush()
            if on_chunk is not None:
                on_chunk(k + 1, len(starts))
    finally:
        if writer is not None:
            writer.close()
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


def exact_sweep(model, prompt: Prompt, candidates=None, **kwargs) -> SweepResult:
    """:func:`token_sweep` with ``method="exact"`` (full-sequence scoring of each candidate)."""
    return token_sweep(model, prompt, candidates, method="exact", **kwargs)


def cached_sweep(model, prompt: Prompt, candidates=None, **kwargs) -> SweepResult:
    """:func:`token_sweep` with ``method="cached"`` (shared prefix, expanded key/value cache)."""
    return token_sweep(model, prompt, candidates, method="cached", **kwargs)


def _as_candidates(model, prompt, candidates) -> CandidateSet:
    if candidates is None:
        return vocabulary_candidates(model)
    if isinstance(candidates, CandidateSet):
        return candidates
    if isinstance(candidates, str):
        raise InvalidArgumentError("candidates is a list of words, not one string")
    return word_candidates(model, prompt, list(candidates))


def _progress(items, show: bool):
    if not show:
        return items
    from tqdm import tqdm

    return tqdm(items, desc="token sweep", unit="chunk")


def _fingerprint(prefix, suffix, cands: CandidateSet, column, method, chunk_size) -> str:
    blob = json.dumps([prefix, suffix, cands.ids, column, method, chunk_size])
    return hashlib.sha256(blob.encode()).hexdigest()


def _load_resume(path: str | Path, fingerprint: str) -> dict[int, torch.Tensor]:
    path = Path(path)
    if not path.exists():
        return {}
    lines = path.read_text().splitlines()
    if not lines:
        return {}
    try:
        header = json.loads(lines[0])
    except json.JSONDecodeError:
        header = {}
    if header.get("fingerprint") != fingerprint:
        raise ResumeMismatchError(
            f"{path} was written by a different sweep (prompt, candidates, objective, method or "
            "chunk_size differ); delete it or pass another resume path"
        )
    done: dict[int, torch.Tensor] = {}
    for line in lines[1:]:
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            break  # a half-written last chunk: it is recomputed
        done[int(rec["start"])] = torch.tensor(rec["scores"], dtype=torch.float32)
    return done


def _open_resume(path: str | Path, fingerprint: str, fresh: bool):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if fresh:
        handle = path.open("w")
        handle.write(json.dumps({"fingerprint": fingerprint, "format": "token-sweep/1"}) + "\n")
        handle.flush()
        return handle
    _drop_partial_line(path)
    return path.open("a")


def _drop_partial_line(path: Path) -> None:
    text = path.read_text()
    if text and not text.endswith("\n"):
        path.write_text(text[: text.rfind("\n") + 1])
