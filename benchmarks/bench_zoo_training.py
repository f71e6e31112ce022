"""Wall-clock time to train the zoo on this machine (training runs on 2 threads).

Usage::

    python benchmarks/bench_zoo_training.py            # scalar model, then the whole zoo
    python benchmarks/bench_zoo_training.py --only scalar

Each model is written to a temporary directory; the script prints one line per measurement and
a JSON summary (wall-clock seconds, steps, and whether the weights hash equals the shipped one).
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
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        written = train_zoo(tmp, seed=0, which=which)
        seconds = time.perf_counter() - start
    return {
        "which": list(which),
        "seconds": round(seconds, 1),
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
    load = os.getloadavg()
    print(json.dumps({"threads": TRAIN_THREADS, "load_avg_1_5_15": load, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
