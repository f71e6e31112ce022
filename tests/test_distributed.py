"""Pair-set analyses under torchrun (2 gloo processes on 127.0.0.1) equal a 1-process run
exactly, on every rank; batches are strided over ranks; errors reach every rank."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from reward_lens_tl.distributed import gather_results, shard, world
from reward_lens_tl.errors import EmptyInputError
from reward_lens_tl.scoring import score_pairs

ROOT = Path(__file__).resolve().parents[1]
WORKER = Path(__file__).with_name("distributed_worker.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(n: int, out: Path, *extra: str) -> None:
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={n}"]
    cmd += ["--nnodes=1", "--master_addr=127.0.0.1", f"--master_port={free_port()}"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [*cmd, str(WORKER), str(out), *extra], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]


def test_shard_is_strided_by_batch():
    items = list(range(10))
    got = {r: list(shard(items, 3, rank=r, world_size=2)) for r in range(2)}
    assert got[0] == [(0, [0, 1, 2]), (2, [6, 7, 8])]
    assert got[1] == [(1, [3, 4, 5]), (3, [9])]
    assert list(shard(items, 3, rank=5, world_size=6)) == []  # more ranks than batches


def test_one_process_is_a_plain_run():
    assert world() == (0, 1)
    assert gather_results([(1, "b"), (0, "a")]) == [(1, "b"), (0, "a")]  # no collective
    with pytest.raises(KeyError):
        gather_results([], (0, KeyError("x")))


def test_empty_stream_is_refused():
    from tests import distributed_worker as w

    with pytest.raises(EmptyInputError, match="empty"):
        score_pairs(w.model(), iter([]))


@pytest.mark.torchrun
def test_two_gloo_processes_equal_one(tmp_path):
    from tests import distributed_worker as w

    torchrun(2, tmp_path / "out.pt")
    expected = w.analyses(w.model())
    assert expected["skipped"][0].startswith(f"pair {w.TOO_LONG} (record {100 + w.TOO_LONG})")
    assert expected["error"][0] == "SequenceTooLongError"
    for rank in range(2):
        got = torch.load(tmp_path / f"out.pt.{rank}", weights_only=False)
        assert got.pop("world") == 2
        assert got.keys() == expected.keys()
        for key, value in expected.items():
            if isinstance(value, torch.Tensor):
                assert torch.equal(got[key], value), key  # bit for bit, same order
            else:
                assert got[key] == value, key


@pytest.mark.torchrun
def test_eval_scoring_and_report_under_torchrun(tmp_path, zoo_task):
    """``score_items`` (score files written by rank 0 only) and ``build_report`` under two
    processes write the same files as one process and return the same results on every rank."""
    import json

    from tests import distributed_worker as w

    task, rng, rows = zoo_task, __import__("random").Random(0), []
    while len(rows) < 8:
        a, b = task.response_pair(rng, max_words=6)
        if a.score != b.score:
            good, bad = (a, b) if a.score > b.score else (b, a)
            rows.append(
                {
                    "prompt": " ".join(good.prompt),
                    "chosen": " ".join(good.response),
                    "rejected": " ".join(bad.response),
                }
            )
    pairs_file = tmp_path / "pairs.jsonl"
    pairs_file.write_text("\n".join(json.dumps(r) for r in rows))
    many, one = tmp_path / "many", tmp_path / "one"
    torchrun(2, tmp_path / "out.pt", "report", str(pairs_file), str(many))
    expected = w.files(w.model(), str(pairs_file), one)
    for rank in range(2):
        got = torch.load(tmp_path / f"out.pt.{rank}", weights_only=False)
        assert got.pop("world") == 2
        assert got == expected
    for name in ("pairs.jsonl", "ranked.jsonl", "report/report.json", "report/report.html"):
        assert (many / name).read_text() == (one / name).read_text(), name
    assert sorted(p.name for p in (many / "report").iterdir()) == ["report.html", "report.json"]
    assert expected["report"]["n_scored"] == 8 and len(expected["ranked_scores"]) == 10


@pytest.mark.torchrun
def test_cli_score_under_torchrun(tmp_path):
    """``torchrun -m reward_lens_tl.cli score`` writes the same CSV as one process, once."""
    import json

    from reward_lens_tl.zoo import zoo_path

    words = ["great question soup oven", "bomb rain", "laptop screen code", "soup", "oven"]
    records = [
        {"prompt": "how bake bread", "chosen": words[i % 5], "rejected": words[(i + 2) % 5]}
        for i in range(9)
    ]
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records))
    base = ["-m", "reward_lens_tl.cli", "score", str(zoo_path("scalar")), str(path)]
    base += ["--batch-size", "2", "--csv"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--nnodes=1"]
    cmd += ["--master_addr=127.0.0.1", f"--master_port={free_port()}"]
    many = subprocess.run([*cmd, *base, str(tmp_path / "many.csv")], env=env, timeout=300)
    one = subprocess.run([sys.executable, *base, str(tmp_path / "one.csv")], env=env, timeout=300)
    assert many.returncode == 0 and one.returncode == 0
    assert (tmp_path / "many.csv").read_text() == (tmp_path / "one.csv").read_text()


def test_map_in_rounds_yields_per_round_and_reraises():
    from reward_lens_tl.distributed import map_in_rounds, map_items

    assert list(map_in_rounds([1, 2], lambda x: 10 * x)) == [[(0, 10)], [(1, 20)]]
    assert map_items([], str) == []
    with pytest.raises(ZeroDivisionError):
        map_items([1, 0], lambda x: 1 / x)
