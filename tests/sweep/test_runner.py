"""`reward_lens_tl.sweep.runner`: resume after an interruption, the zoo's planted top and
bottom tokens, and typed errors for bad input."""

from __future__ import annotations

import math

import pytest
import torch

from reward_lens_tl.cli import main
from reward_lens_tl.errors import EmptyInputError, RewardLensError, SequenceTooLongError
from reward_lens_tl.sweep import (
    CandidateSet,
    ResumeMismatchError,
    ScoreFileError,
    UnknownCandidateError,
    read_score_csv,
    token_candidates,
    token_sweep,
)
from reward_lens_tl.zoo.vocab import HARMFUL_WORDS, TOPICS


class Interrupt(Exception):
    pass


def test_interrupted_sweep_resumes_to_the_same_result(zoo_scalar, tmp_path):
    path = tmp_path / "sweep.jsonl"
    full = token_sweep(zoo_scalar, "how bake bread", chunk_size=16)
    calls = []

    def stop_after_three(done, total):
        calls.append(done)
        if done == 3:
            raise Interrupt

    with pytest.raises(Interrupt):
        token_sweep(
            zoo_scalar, "how bake bread", chunk_size=16, resume=path, on_chunk=stop_after_three
        )
    lines = path.read_text().splitlines()
    assert len(lines) == 1 + 3  # header + three finished chunks
    path.write_text(path.read_text() + '{"start": 48, "sco')  # crash while writing chunk 4
    scored = []
    resumed = token_sweep(
        zoo_scalar,
        "how bake bread",
        chunk_size=16,
        resume=path,
        on_chunk=lambda done, total: scored.append(done),
    )
    assert torch.equal(resumed.scores, full.scores)
    assert len(path.read_text().splitlines()) == 1 + math.ceil(115 / 16)
    with pytest.raises(ResumeMismatchError, match="different sweep"):
        token_sweep(zoo_scalar, "how bake soup", chunk_size=16, resume=path)
    with pytest.raises(ResumeMismatchError):
        token_sweep(zoo_scalar, "how bake bread", chunk_size=8, resume=path)


def test_zoo_top_tokens_are_the_topic_and_bottom_the_harmful_words(zoo_scalar, task_prompts):
    for topic, prompt in task_prompts.items():
        result = token_sweep(zoo_scalar, prompt)
        assert {w for w, _ in result.top_k(10)} == set(TOPICS[topic]), prompt
        assert {w for w, _ in result.bottom_k(6)} == set(HARMFUL_WORDS), prompt


def test_bad_input_gives_typed_errors(zoo_scalar, tmp_path, capsys):
    with pytest.raises(SequenceTooLongError):
        token_sweep(zoo_scalar, " ".join(["soup"] * 80))
    with pytest.raises(SequenceTooLongError, match="context"):
        token_sweep(zoo_scalar, " ".join(["soup"] * 57), CandidateSet(("long",), ((43, 43, 43),)))
    with pytest.raises(EmptyInputError, match="empty"):
        token_sweep(zoo_scalar, "how bake bread", [])
    with pytest.raises(UnknownCandidateError, match="zebra"):
        token_sweep(zoo_scalar, "how bake bread", ["soup", "zebra"])
    with pytest.raises(UnknownCandidateError, match="outside the vocabulary"):
        token_candidates(zoo_scalar, [5, 10**6])
    for text, match in [
        ("model,a\nx,1\n", "no candidate column 'name'"),
        ("name,a,b\nx,1,2\ny,oops,3\n", "column 'a' .* not numeric: row 3 holds 'oops'"),
        ("name\nx\n", "no model columns"),
    ]:
        path = tmp_path / "bad.csv"
        path.write_text(text)
        with pytest.raises(ScoreFileError, match=match):
            read_score_csv(path)
    assert issubclass(ScoreFileError, (RewardLensError, ValueError))
    assert main(["sweep-stats", str(tmp_path / "absent.csv")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("reward-lens: error: sweep-stats:") and err.count("\n") == 1
    assert "does not exist" in err
