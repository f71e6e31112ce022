"""Run every benchmark in this folder and print their markdown tables (for RESULTS.md).

`bench_peers.py` is left out: `make bench` runs it first, with `--write --loading`."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

if __name__ == "__main__":
    for path in sorted(HERE.glob("bench_*.py")):
        if path.stem == "bench_peers":
            continue
        module = importlib.import_module(path.stem)
        print(f"\n<!-- {path.name} -->")
        module.main([])
