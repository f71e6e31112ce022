"""Implicit rewards and the cross-model comparison: cost in forwards, memory in chunks.

1. Cost: ``ImplicitRewardModel.pair_rewards`` over N zoo pairs against the baseline of one plain
   policy forward plus one plain reference forward of the same padded chunks (the floor: two
   forwards per chunk). Implicit attribution and the implicit lens are reported in the same
   units. Interleaved repeats, min of N, ratios.
2. Memory: in a fresh process per (N, task), after loading the models, building the N pairs
   and a warm-up on one chunk, the peak RSS above that start (sampled every 2 ms in a thread)
   while scoring N pairs and while running ``compare_models`` (scalar RM vs implicit RM), for
   N = 200 and 2,000 with the same chunk size: flat when memory is bounded by the chunk, not N.

Usage: python benchmarks/bench_implicit.py [--threads N] [--pairs N]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from timing import interleaved_min, report  # noqa: E402

from reward_lens_tl import HookedRewardModel  # noqa: E402
from reward_lens_tl.crossmodel import compare_models  # noqa: E402
from reward_lens_tl.implicit import (  # noqa: E402
    ImplicitRewardModel,
    pair_implicit_attribution,
    pair_implicit_lens,
)
from reward_lens_tl.implicit.batches import pair_chunks  # noqa: E402
from reward_lens_tl.pair_batches import encode_pairs  # noqa: E402
from reward_lens_tl.zoo import load_task, zoo_path  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 2**20


def peak_rss_above_start(fn) -> float:
    """Peak RSS (MB) above the RSS at the start while ``fn`` runs."""
    start, peak, done = rss_mb(), [0.0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_mb())
            time.sleep(0.002)

    thread = threading.Thread(target=sample)
    thread.start()
    try:
        fn()
    finally:
        done.set()
        thread.join()
    return max(peak[0], rss_mb()) - start


def zoo_pairs(n: int, seed: int = 0):
    task, rng = load_task().task, random.Random(seed)
    return [task.response_pair(rng) for _ in range(n)]


def rss_child(n: int, task: str, bs: int) -> float:
    """Run in a fresh process: peak RSS (MB) above the warmed-up start for ``task`` on n pairs."""
    torch.set_num_threads(1)
    irm = ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))
    scalar = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    many = zoo_pairs(n, seed=n)
    models = {"scalar": scalar, "implicit": irm}
    if task == "score":
        irm.pair_rewards(many[:bs], bs)
        return peak_rss_above_start(lambda: irm.pair_rewards(many, bs))
    compare_models(models, many[:bs], batch_size=bs, n_boot=10)
    return peak_rss_above_start(lambda: compare_models(models, many, batch_size=bs, n_boot=10))


def rss_in_child(n: int, task: str, bs: int) -> float:
    out = subprocess.run(
        [sys.executable, __file__, "--rss-child", str(n), task, "--batch-size", str(bs)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    return float(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> str:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--pairs", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--rss-child", nargs=2, metavar=("N", "TASK"), help="internal")
    args = parser.parse_args(argv)
    if args.rss_child:
        print(rss_child(int(args.rss_child[0]), args.rss_child[1], args.batch_size))
        return ""
    torch.set_num_threads(args.threads)
    irm = ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))
    pairs = zoo_pairs(args.pairs)
    encoded = encode_pairs(irm, pairs)[0]
    bs = args.batch_size

    def two_forwards():
        with torch.no_grad():
            for encs, _ in pair_chunks(irm, encoded, bs):
                ids, attention, _ = irm.batch(encs)
                irm.policy(ids, attention_mask=attention)
                irm.reference(ids, attention_mask=attention)

    best = interleaved_min(
        {
            "policy + reference forwards (floor)": two_forwards,
            "implicit rewards": lambda: irm.pair_rewards(encoded, bs),
            "implicit attribution (heads)": lambda: pair_implicit_attribution(
                irm, encoded, batch_size=bs
            ),
            "implicit lens": lambda: pair_implicit_lens(irm, encoded, batch_size=bs),
        },
        repeats=5,
    )
    lines = [
        report(
            f"Implicit rewards, {args.pairs} zoo pairs, chunks of {bs} pairs, "
            f"{args.threads} thread(s)",
            best,
            "policy + reference forwards (floor)",
        ),
        "",
        "| pairs | peak RSS above start, implicit rewards (MB) | peak RSS above start, "
        "compare_models scalar vs implicit (MB) |",
        "|---|---|---|",
    ]
    for n in (200, 2000):
        score, compare = rss_in_child(n, "score", bs), rss_in_child(n, "compare", bs)
        lines.append(f"| {n} | {score:.1f} | {compare:.1f} |")
    text = "\n".join(lines)
    print(text)
    return text


if __name__ == "__main__":
    main()
