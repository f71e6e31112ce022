"""The real-size benchmark's code path on a narrow 2-layer model (slow tier): a checkpoint
written as safetensors with a Llama-3.2-1B-style config, converted in bf16, every analysis."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_bench_real_size_smoke():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    bench = str(ROOT / "benchmarks" / "bench_real_size.py")
    done = subprocess.run(
        [sys.executable, bench, "--smoke", "--pairs", "4"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    err = float(re.search(r"\|ours − HF\| = (\S+)", done.stdout).group(1))
    assert err <= 2.5e-2  # bf16 against HF in bf16 (tests/test_dtype.py's threshold)
    for name in ("score_pairs", "pair_lens", "pair_attribution", "patching sweep"):
        assert name in done.stdout
