"""Score files: round trip and resume, malformed records named by file, record and field, output
paths that cannot be a file, one writer at a time and a torn record recomputed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.cli import main
from reward_lens_tl.data import PreferencePair
from reward_lens_tl.errors import (
    FileInUseError,
    InvalidArgumentError,
    MalformedRecordError,
)
from reward_lens_tl.evals import run
from reward_lens_tl.evals.run import score_items
from reward_lens_tl.evals.scores import ScoreRecord, ScoreWriter, read_scores
from reward_lens_tl.sweep import runner, token_sweep
from reward_lens_tl.zoo import zoo_path


def test_score_file_round_trip_and_resume(tmp_path):
    path = tmp_path / "s.jsonl"
    recs = [ScoreRecord("rewardmath", i, (1.0 * i,), (0.5, 2.0)) for i in range(3)]
    with ScoreWriter(path, "rewardmath") as out:
        out.write_all(recs[:2])
    with open(path, "a") as f:
        f.write('{"benchmark": "rewardmath", "id": 2, "cho')  # a crash mid-line
    with pytest.warns(UserWarning, match="torn last line"):
        writer = ScoreWriter(path, "rewardmath")
    assert sorted(writer.done) == [0, 1]
    with writer:
        writer.write(recs[2])
    assert list(read_scores(path)) == recs


def test_malformed_records_name_file_record_field(tmp_path):
    path = tmp_path / "bad.jsonl"
    good = ScoreRecord("rewardmath", 0, (1.0,), (0.5,)).to_json()
    lines = [good, {**good, "id": 1, "chosen": []}, {**good, "id": 2, "rejected": [1, "x"]},
             {**good, "id": 0}, {**good, "id": 3}]  # fmt: skip
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    with pytest.raises(MalformedRecordError) as err:
        read_scores(path)
    assert str(path) in str(err.value) and "record 1" in str(err.value)
    assert "'chosen'" in str(err.value) and "correct solution" in str(err.value)
    with pytest.warns(UserWarning, match="skipped 3"):
        kept = read_scores(path, skip_bad=True)
    assert kept.ids() == [0, 3]
    assert [(s.index, s.field) for s in kept.skipped] == [
        (1, "chosen"),
        (2, "rejected[1]"),
        (3, "id"),
    ]


PROMPT = "how bake bread"


WORDS = ["soup", "oven", "bread", "bomb"]


def pairs(n=4):
    return [
        PreferencePair(PROMPT, "soup oven", "bomb rain", subset="zoo", metadata={"id": i})
        for i in range(n)
    ]


@pytest.fixture
def no_model_work(monkeypatch):
    """Fail the test if the model is fingerprinted, loaded or swept (the path comes first)."""

    def boom(*args, **kwargs):
        raise AssertionError("the model was used before the output path was checked")

    monkeypatch.setattr(run, "model_fingerprint", boom)
    monkeypatch.setattr(runner, "sweep_frame", boom)
    monkeypatch.setattr(HookedRewardModel, "from_pretrained", boom)


def data_file(tmp_path):
    path = tmp_path / "pairs.jsonl"
    rows = [{"prompt": PROMPT, "chosen": "soup oven", "rejected": "bomb", "subset": "zoo",
             "id": i} for i in range(2)]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def bad_paths(tmp_path):
    """`(path, message fragment)`: a directory, a path under a regular file, one two deep."""
    notes = tmp_path / "notes.txt"
    notes.write_text("keep me\n")
    return [
        (tmp_path, "is a directory, not a file"),
        (notes / "scores.jsonl", "notes.txt is a regular file, not a folder"),
        (notes / "sub" / "scores.jsonl", "notes.txt is a regular file, not a folder"),
    ]


# ---- bad paths -------------------------------------------------------------------------------
def test_score_items_out_that_cannot_be_a_file(zoo_scalar, tmp_path, no_model_work):
    for path, fragment in bad_paths(tmp_path):
        with pytest.raises(InvalidArgumentError, match=fragment) as err:
            score_items(zoo_scalar, pairs(), out=path, progress=False)
        assert str(path) in str(err.value) and "score file (out=)" in str(err.value)
    assert (tmp_path / "notes.txt").read_text() == "keep me\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_score_writer_path_that_cannot_be_a_file(tmp_path):
    for path, fragment in bad_paths(tmp_path):
        with pytest.raises(InvalidArgumentError, match=fragment) as err:
            ScoreWriter(path, "rewardbench")
        assert str(path) in str(err.value)


def test_token_sweep_resume_that_cannot_be_a_file(zoo_scalar, tmp_path, no_model_work):
    for path, fragment in bad_paths(tmp_path):
        with pytest.raises(InvalidArgumentError, match=fragment) as err:
            token_sweep(zoo_scalar, PROMPT, WORDS, chunk_size=2, resume=path)
        assert str(path) in str(err.value) and "resume file (resume=)" in str(err.value)


def test_cli_eval_out_that_cannot_be_a_file(tmp_path, capsys, no_model_work):
    data = data_file(tmp_path)
    for path, fragment in bad_paths(tmp_path):
        argv = ["eval", "rewardbench", str(zoo_path("scalar")), str(data), "--out", str(path)]
        assert main([*argv, "--format", "json"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and fragment in err and "--out file" in err


def test_out_that_is_not_a_regular_file(zoo_scalar, tmp_path, no_model_work):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(InvalidArgumentError, match="not a regular file"):
        score_items(zoo_scalar, pairs(), out=fifo, progress=False)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_out_in_a_read_only_folder(zoo_scalar, tmp_path, no_model_work):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(InvalidArgumentError, match="no write permission"):
            score_items(zoo_scalar, pairs(), out=folder / "s.jsonl", progress=False)
    finally:
        folder.chmod(0o700)


# ---- two writers, and a writer killed mid-record -----------------------------------------------
HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
os.lseek(fd, 0, os.SEEK_END)
os.write(fd, b'{"benchmark": "rewardbench", "id": 2, "subset": "zo')  # killed mid-record
print("locked", flush=True)
sys.stdin.read()
"""


def test_second_writer_is_refused_then_a_torn_record_is_recomputed(zoo_scalar, tmp_path, capsys):
    out = tmp_path / "scores.jsonl"
    full = score_items(zoo_scalar, pairs(), progress=False)
    score_items(zoo_scalar, pairs(2), out=out, progress=False)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(out)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        held = out.read_bytes()
        with pytest.raises(FileInUseError, match="being written by another process") as err:
            with pytest.MonkeyPatch.context() as mp:  # refused before the model is hashed
                mp.setattr(run, "model_fingerprint", lambda model: pytest.fail("hashed"))
                score_items(zoo_scalar, pairs(), out=out, progress=False)
        assert str(out) in str(err.value)
        with pytest.MonkeyPatch.context() as mp:  # and by the CLI before the model loads
            mp.setattr(HookedRewardModel, "from_pretrained", lambda *a, **k: pytest.fail("load"))
            argv = ["eval", "rewardbench", str(zoo_path("scalar")), str(data_file(tmp_path))]
            assert main([*argv, "--out", str(out), "--format", "json"]) == 2
        assert "being written by another process" in capsys.readouterr().err
        with pytest.raises(FileInUseError):  # a second writer in this process as well
            ScoreWriter(out, "rewardbench")
        assert out.read_bytes() == held  # nobody else touched it
    finally:
        holder.send_signal(signal.SIGKILL)  # the writer dies, its record half-written
        holder.communicate()
    with pytest.warns(UserWarning, match="torn last line"):
        resumed = score_items(zoo_scalar, pairs(), out=out, progress=False)
    assert [r.id for r in resumed.scores] == [0, 1, 2, 3]
    assert resumed.scores[2].chosen == pytest.approx(full.scores[2].chosen, abs=1e-5)
    assert read_scores(out).ids() == [0, 1, 2, 3]
    lines = out.read_text().splitlines()
    assert len(lines) == 5 and all(json.loads(line) for line in lines)
