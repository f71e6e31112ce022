"""Wall-clock time to train the zoo on this machine (training runs on 2 threads).

Usage::

    python benchmarks/bench_zoo_training.py            # scalar model, then the whole zoo
    python benchmarks/bench_zoo_training.py --only scalar

Each model is written to a temporary directory; the script prints one line per measurement and
a JSON summary: wall-clock and process CPU seconds, the 1-minute load average before and after
(other processes on a shared machine slow training down), steps, and whether the weights hash
equals the shipped one.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from reward_lens_tl.zoo import load_metadata, train_zoo  # noqa: E402
from reward_lens_tl.zoo.loop import TRAIN_THREADS  # noqa: E402


def timed_train(which: tuple[str, ...]) -> dict:
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        start, cpu_start = time.perf_counter(), time.process_time()
        written = train_zoo(tmp, seed=0, which=which)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    return {
        "which": list(which),
        "seconds": round(seconds, 1),
        "cpu_seconds": round(cpu, 1),
        "load_avg_1min_before_after": [load_before, os.getloadavg()[0]],
        "steps": {name: meta["steps"] for name, meta in written.items()},
        "matches_shipped": {
            name: meta["weights_sha256"] == load_metadata(name)["weights_sha256"]
            for name, meta in written.items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("scalar", "zoo"), default=None)
    args = parser.parse_args()
    runs = []
    if args.only in (None, "scalar"):
        runs.append(timed_train(("scalar",)))
    if args.only in (None, "zoo"):
        runs.append(timed_train(("scalar", "multi", "policy")))
    for run in runs:
        print(f"train {'+'.join(run['which'])}: {run['seconds']:.1f} s  steps={run['steps']}")
    print(json.dumps({"threads": TRAIN_THREADS, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
