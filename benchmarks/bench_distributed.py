"""Pair-set throughput under torchrun: 2 processes × 1 thread against 1 process × 1 thread.

Model: the Llama-style 6L d512 sequence classifier of ``bench_forward.py`` (random weights,
built identically in every process, with a word-level tokenizer). Work: ``score_pairs`` and
``pair_attribution`` on the same pairs (prompt 40-60 words, responses 20-60 words; batches of
4 pairs). The timed span runs from a barrier before the call to the gathered result on every
rank (gather included; imports and model building excluded). 1-process and 2-process launches
alternate; the load average is logged before each, and the 2-process margins must equal the
1-process ones bit for bit. Target (issue 17): ≥ 1.6× the 1-process throughput on this
2-core machine.

Usage: python benchmarks/bench_distributed.py [--rounds R] [--pairs N]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))


def build_model():
    from bench_forward import build

    from reward_lens_tl.testing import tiny_tokenizer

    return build(tokenizer=tiny_tokenizer(vocab_size=2000))[1]


def pairs(n: int) -> list[SimpleNamespace]:
    gen = torch.Generator().manual_seed(1)

    def words(lo: int, hi: int) -> str:
        k = int(torch.randint(lo, hi, (1,), generator=gen))
        return " ".join(f"w{int(i)}" for i in torch.randint(6, 2000, (k,), generator=gen))

    return [
        SimpleNamespace(prompt=words(40, 60), chosen=words(20, 60), rejected=words(20, 60))
        for _ in range(n)
    ]


def worker(out: str, n_pairs: int) -> None:
    import torch.distributed as dist

    from reward_lens_tl.attribution import pair_attribution
    from reward_lens_tl.distributed import is_main_process, world
    from reward_lens_tl.scoring import score_pairs

    torch.set_num_threads(1)
    model, data = build_model(), pairs(n_pairs)
    _, size = world()
    score_pairs(model, data[:4], batch_size=4)  # warm-up (one batch per rank at most)
    times = {}
    for name, fn in {
        "score_pairs": lambda: score_pairs(model, data, batch_size=4).margins,
        "pair_attribution": lambda: pair_attribution(model, data, batch_size=4).margin.values,
    }.items():
        if size > 1:
            dist.barrier()
        t0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        times[name] = time.perf_counter() - t0
        times[f"{name} cpu"] = time.process_time() - c0  # this rank's own CPU seconds
        torch.save(result, f"{out}.{name}.pt") if is_main_process() else None
    if is_main_process():
        Path(out).write_text(json.dumps(times))


def launch(n_proc: int, out: str, n_pairs: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    me = [str(Path(__file__).resolve()), "--worker", out, "--pairs", str(n_pairs)]
    if n_proc == 1:
        cmd = [sys.executable, *me]
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={n_proc}"]
        cmd += ["--nnodes=1", "--master_addr=127.0.0.1", f"--master_port={port}", *me]
    subprocess.run(cmd, env=env, check=True, timeout=1800)
    return json.loads(Path(out).read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=64)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker, args.pairs)
    best = {1: {}, 2: {}}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for n_proc in (1, 2):
                load = os.getloadavg()[0]
                out = f"{tmp}/r{r}p{n_proc}"
                times = launch(n_proc, out, args.pairs)
                print(f"round {r} procs {n_proc} load {load:.2f} " + json.dumps(times), flush=True)
                for k, t in times.items():
                    best[n_proc][k] = min(best[n_proc].get(k, float("inf")), t)
            for name in (k for k in times if not k.endswith("cpu")):
                one = torch.load(f"{tmp}/r{r}p1.{name}.pt")
                two = torch.load(f"{tmp}/r{r}p2.{name}.pt")
                assert torch.equal(one, two), f"{name}: 2 processes differ from 1"
    print(f"\n{args.pairs} pairs, min over {args.rounds} rounds")
    print("| analysis | 1 proc (s) | 2 procs (s) | throughput ratio |\n|---|---|---|---|")
    for name, t1 in best[1].items():
        t2 = best[2][name]
        print(f"| `{name}` | {t1:.2f} | {t2:.2f} | **{t1 / t2:.2f}×** |")
    print("(rows ending in 'cpu': rank 0's CPU seconds; their ratio is the speed-up the split")
    print(" would give on two idle cores, the wall-clock ratio what the shared machine gave)")


if __name__ == "__main__":
    main()
