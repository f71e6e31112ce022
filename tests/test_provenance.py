"""Resumable files that know who wrote them (issue 23, item 1): model fingerprints, resume files
and score files refusing another producer, non-finite or damaged records, a second writer, and
torn last lines; score CSVs with non-finite cells or repeated candidates."""

from __future__ import annotations

import fcntl
import json
import math
import os
import shutil
import subprocess
import sys
import warnings

import pytest
import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.cli import main
from reward_lens_tl.data import PreferencePair
from reward_lens_tl.errors import (
    ResumeFileError,
    ResumeMismatchError,
    RewardLensError,
    ScoreMismatchError,
    ScoreProducerMismatchError,
)
from reward_lens_tl.evals.run import score_items
from reward_lens_tl.evals.scores import ScoreRecord, ScoreWriter, read_scores
from reward_lens_tl.provenance import (
    FileInUseError,
    ProvenanceMismatchError,
    ResumableFileError,
    model_fingerprint,
)
from reward_lens_tl.sweep import ScoreFileError, read_score_csv, score_file_stats, token_sweep
from reward_lens_tl.zoo import zoo_path

PROMPT = "how bake bread"
WORDS = ["soup", "oven", "bread", "bomb", "rain", "the", "great", "question", "laptop", "hurt"]


@pytest.fixture(scope="module")
def perturbed_dir(tmp_path_factory):
    """A copy of the zoo's scalar checkpoint, same config and tokenizer, one weight perturbed."""
    from safetensors.torch import load_file, save_file

    folder = tmp_path_factory.mktemp("zoo") / "scalar"
    shutil.copytree(zoo_path("scalar"), folder)
    tensors = load_file(folder / "model.safetensors")
    name = next(k for k in sorted(tensors) if "layers.0." in k and tensors[k].ndim == 2)
    noise = torch.randn(tensors[name].shape, generator=torch.Generator().manual_seed(0))
    tensors[name] = tensors[name] + 0.05 * noise
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


@pytest.fixture(scope="module")
def perturbed(perturbed_dir):
    return HookedRewardModel.from_pretrained(perturbed_dir)


def pairs(n=4, chosen="soup oven"):
    return [PreferencePair(PROMPT, chosen, "bomb rain", subset="zoo") for _ in range(n)]


def ids_pairs(n=4):
    return [
        PreferencePair(PROMPT, "soup oven", "bomb rain", subset="zoo", metadata={"id": i})
        for i in range(n)
    ]


# ---- fingerprints ---------------------------------------------------------------------------
def test_fingerprint_tells_a_perturbed_copy_apart(zoo_scalar, perturbed):
    a, b = model_fingerprint(zoo_scalar), model_fingerprint(perturbed)
    again = model_fingerprint(HookedRewardModel.from_pretrained(zoo_path("scalar")))
    assert a == again  # deterministic across loads
    assert a["weights"] != b["weights"]
    assert {k: v for k, v in a.items() if k != "weights"} == {
        k: v for k, v in b.items() if k != "weights"
    }  # same name, config, tokenizer, dtype: only the weights tell them apart
    assert a["name"] == "scalar" and "/" not in a["name"]  # no local path
    bf16 = HookedRewardModel.from_pretrained(zoo_path("scalar"), dtype=torch.bfloat16)
    half = model_fingerprint(bf16)
    assert half["dtype"] == "bfloat16" and half["weights"] != a["weights"]


# ---- sweep resume files ---------------------------------------------------------------------
def test_sweep_resume_by_another_model_is_refused(zoo_scalar, perturbed, tmp_path):
    path = tmp_path / "sweep.jsonl"
    mine = token_sweep(zoo_scalar, PROMPT, WORDS, chunk_size=4, resume=path)
    theirs = token_sweep(perturbed, PROMPT, WORDS, chunk_size=4)
    assert not torch.allclose(mine.scores, theirs.scores, atol=1e-3)  # the mix-up would show
    with pytest.raises(ResumeMismatchError) as err:
        token_sweep(perturbed, PROMPT, WORDS, chunk_size=4, resume=path)
    message = str(err.value)
    assert str(path) in message and "model.weights" in message
    assert model_fingerprint(zoo_scalar)["weights"] in message
    assert model_fingerprint(perturbed)["weights"] in message
    assert isinstance(err.value, ProvenanceMismatchError)
    again = token_sweep(zoo_scalar, PROMPT, WORDS, chunk_size=4, resume=path)
    assert torch.equal(again.scores, mine.scores)  # its own model resumes it


def test_sweep_resume_file_from_an_older_version_is_refused(zoo_scalar, tmp_path):
    path = tmp_path / "old.jsonl"
    scores = [1.0] * 4
    path.write_text(
        json.dumps({"fingerprint": "0" * 64, "format": "token-sweep/1"})
        + "\n"
        + json.dumps({"start": 0, "scores": scores})
        + "\n"
    )
    with pytest.raises(ResumeMismatchError, match="does not record what produced it"):
        token_sweep(zoo_scalar, PROMPT, WORDS, chunk_size=4, resume=path)


def _interrupted_sweep(zoo_scalar, path, chunks=2):
    class Stop(Exception):
        pass

    def stop(done, total):
        if done == chunks:
            raise Stop

    with pytest.raises(Stop):
        token_sweep(zoo_scalar, PROMPT, WORDS, chunk_size=4, resume=path, on_chunk=stop)
    return path.read_text().splitlines()


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda rec: {**rec, "scores": [float("nan")] + rec["scores"][1:]}, "NaN"),
        (lambda rec: {**rec, "scores": rec["scores"][:-1]}, "holds 3 scores, expected 4"),
        (lambda rec: {**rec, "start": 2}, "not one of this sweep's chunks"),
        (lambda rec: {**rec, "scores": ["x", 1, 2, 3]}, "not a finite number"),
    ],
)
def test_damaged_sweep_chunk_is_a_typed_error_naming_file_and_line(
    zoo_scalar, tmp_path, edit, match
):
    path = tmp_path / "sweep.jsonl"
    lines = _interrupted_sweep(zoo_scalar, path)
    assert len(lines) == 3  # header + two chunks
    lines[2] = json.dumps(edit(json.loads(lines[2])))
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ResumableFileError, match=match) as err:
        token_sweep(zoo_scalar, PROMPT, WORDS, chunk_size=4, resume=path)
    assert f"{path}, line 3" in str(err.value)
    assert isinstance(err.value, RewardLensError)
    if match != "NaN":  # NaN is refused while parsing the line, the rest by the sweep's check
        assert isinstance(err.value, ResumeFileError)


def test_non_finite_sweep_scores_are_never_written(zoo_scalar, tmp_path):
    path = tmp_path / "sweep.jsonl"
    nan_hook = ("blocks.0.hook_resid_post", lambda act, hook: act * float("nan"))
    with zoo_scalar.hooks(fwd_hooks=[nan_hook]), pytest.raises(RewardLensError):
        token_sweep(zoo_scalar, PROMPT, WORDS, chunk_size=4, resume=path, method="exact")
    assert not path.exists()  # nothing was written, not even a header
    result = token_sweep(zoo_scalar, PROMPT, WORDS, chunk_size=4, resume=path)
    assert torch.isfinite(result.scores).all() and len(result) == len(WORDS)


def test_sweep_resume_file_in_use_is_refused(zoo_scalar, tmp_path):
    path = tmp_path / "sweep.jsonl"
    _interrupted_sweep(zoo_scalar, path, chunks=1)
    before = path.read_bytes()
    with open(path, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another writer holds it
        with pytest.raises(FileInUseError, match="another process"):
            token_sweep(zoo_scalar, PROMPT, WORDS, chunk_size=4, resume=path)
    assert path.read_bytes() == before
    full = token_sweep(zoo_scalar, PROMPT, WORDS, chunk_size=4, resume=path)
    assert len(full) == len(WORDS)
    with pytest.raises(ResumeMismatchError):  # the lock is released after an error too
        token_sweep(zoo_scalar, PROMPT, WORDS, chunk_size=5, resume=path)
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)


# ---- score files (evals) --------------------------------------------------------------------
def test_score_file_by_another_model_is_refused(zoo_scalar, perturbed, tmp_path):
    out = tmp_path / "scores.jsonl"
    first = score_items(zoo_scalar, ids_pairs(), out=out, progress=False)
    with pytest.raises(ScoreProducerMismatchError) as err:
        score_items(perturbed, ids_pairs(), out=out, progress=False)
    message = str(err.value)
    assert model_fingerprint(zoo_scalar)["weights"] in message
    assert model_fingerprint(perturbed)["weights"] in message
    assert isinstance(err.value, ScoreMismatchError)
    header = json.loads(out.read_text().splitlines()[0])
    assert header["producer"]["model"] == model_fingerprint(zoo_scalar)
    assert read_scores(out).producer == header["producer"]
    fresh = score_items(perturbed, ids_pairs(), out=out, resume=False, progress=False)
    assert fresh.scores[0].chosen != first.scores[0].chosen


def test_cli_eval_out_by_another_model_is_refused(perturbed_dir, tmp_path, capsys):
    data = tmp_path / "pairs.jsonl"
    rows = [{"prompt": PROMPT, "chosen": "soup oven", "rejected": "great question the",
             "subset": "zoo", "id": i} for i in range(3)]  # fmt: skip
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "s.jsonl"
    opts = ["--out", str(out), "--format", "json"]
    assert main(["eval", "rewardbench", str(zoo_path("scalar")), str(data), *opts]) == 0
    capsys.readouterr()
    assert main(["eval", "rewardbench", str(perturbed_dir), str(data), *opts]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "another model" in err and "model.weights" in err
    assert len(read_scores(out)) == 3  # the file is left as it was


def test_score_file_resume_checks_arguments_and_item_texts(zoo_scalar, tmp_path):
    out = tmp_path / "scores.jsonl"
    score_items(zoo_scalar, ids_pairs(), out=out, progress=False)
    with pytest.raises(ScoreProducerMismatchError, match="args.truncation"):
        score_items(zoo_scalar, ids_pairs(), out=out, truncation="left", progress=False)
    changed = ids_pairs()
    changed[2] = PreferencePair(PROMPT, "soup", "bomb rain", subset="zoo", metadata={"id": 2})
    with pytest.raises(ScoreProducerMismatchError, match="id 2.*changed"):
        score_items(zoo_scalar, changed, out=out, progress=False)


def test_score_file_without_header_is_not_resumed(zoo_scalar, tmp_path):
    out = tmp_path / "scores.jsonl"
    record = ScoreRecord("rewardbench", 0, (9.0,), (-9.0,), subset="zoo")
    out.write_text(json.dumps(record.to_json()) + "\n")
    assert len(read_scores(out)) == 1  # still readable
    with pytest.raises(ScoreProducerMismatchError, match="does not record what produced it"):
        score_items(zoo_scalar, ids_pairs(), out=out, progress=False)


def test_non_finite_score_record_names_file_and_line(zoo_scalar, tmp_path):
    out = tmp_path / "scores.jsonl"
    score_items(zoo_scalar, ids_pairs(), out=out, progress=False)
    lines = out.read_text().splitlines()
    record = json.loads(lines[2])
    lines[2] = json.dumps({**record, "rejected": [float("nan")]})
    out.write_text("\n".join(lines) + "\n")
    with pytest.raises(ResumableFileError, match=rf"{out.name}, line 3: .*NaN"):
        score_items(zoo_scalar, ids_pairs(), out=out, progress=False)
    with pytest.raises(RewardLensError, match=r"record 1 .*'rejected\[0\]': must be finite"):
        read_scores(out)


def test_score_file_in_use_by_another_process(zoo_scalar, tmp_path):
    out = tmp_path / "scores.jsonl"
    score_items(zoo_scalar, ids_pairs(2), out=out, progress=False)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys\n"
         f"fd = os.open({str(out)!r}, os.O_RDWR)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('locked', flush=True)\nsys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(FileInUseError, match="another process"):
            score_items(zoo_scalar, ids_pairs(4), out=out, progress=False)
    finally:
        holder.communicate("")
    assert len(read_scores(out)) == 2  # untouched
    writer = ScoreWriter(out, "rewardbench", producer=None, resume=False)
    try:  # a second writer in this process is refused as well
        with pytest.raises(FileInUseError):
            ScoreWriter(out, "rewardbench")
    finally:
        writer.close()


def test_torn_last_line_is_ignored_by_readers_and_recomputed(zoo_scalar, tmp_path):
    out = tmp_path / "scores.jsonl"
    full = score_items(zoo_scalar, ids_pairs(), out=out, progress=False)
    data = out.read_bytes()
    cut = data.rfind(b"\n", 0, len(data) - 1) + 1
    out.write_bytes(data[: cut + 20])  # the writer was killed in the middle of the last record
    with pytest.warns(UserWarning, match="torn last line"):
        partial = read_scores(out)
    assert partial.ids() == [0, 1, 2]
    with pytest.warns(UserWarning, match="torn last line"):
        resumed = score_items(zoo_scalar, ids_pairs(), out=out, progress=False)
    torch.testing.assert_close(  # the last item alone: its batch is smaller, ~1e-7 apart
        torch.tensor([r.chosen for r in resumed.scores]),
        torch.tensor([r.chosen for r in full.scores]),
        rtol=0,
        atol=1e-5,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_scores(out).ids() == [0, 1, 2, 3]
    assert out.read_bytes().count(b"\n") == 1 + 4  # header + one record per id


def test_non_finite_rewards_are_never_written(zoo_scalar, tmp_path):
    out = tmp_path / "scores.jsonl"
    nan_hook = ("blocks.0.hook_resid_post", lambda act, hook: act * float("nan"))
    with zoo_scalar.hooks(fwd_hooks=[nan_hook]), pytest.raises(RewardLensError):
        score_items(zoo_scalar, ids_pairs(), out=out, progress=False)
    assert not out.exists()


# ---- score CSVs (sweep-stats) ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("name,a,b\nx,1,2\ny,inf,3\nz,2,1\n", r"row 3, column 'a'.* holds inf"),
        ("name,a,b\nx,1,2\ny,3,-1e999\n", r"row 3, column 'b'.* holds -inf"),
        ("name,a,b\nx,1,2\ny,3,1\nx,2,2\n", r"more than once .*'x': \[2, 4\]"),
    ],
)
def test_score_csv_refuses_non_finite_cells_and_repeated_candidates(tmp_path, text, match):
    path = tmp_path / "scores.csv"
    path.write_text(text)
    with pytest.raises(ScoreFileError, match=match):
        read_score_csv(path)
    with pytest.raises(ScoreFileError):
        score_file_stats(path)
    path.write_text("name,a,b\nx,1,2\ny,,3\nz,3,1\nw,4,5\n")  # an empty cell stays missing
    stats = score_file_stats(path)
    assert stats["n_shared"] == {"a | b": 3}
    assert stats["summary"]["a"]["n"] == 3 and math.isfinite(stats["summary"]["a"]["mean"])
