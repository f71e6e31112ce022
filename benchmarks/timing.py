"""Timing helpers for benchmarks: interleaved repeats, min of N, ratios against a baseline run
in the same process (absolute times on a shared 2-core machine are not comparable)."""

from __future__ import annotations

import time
from collections.abc import Callable


def interleaved_min(fns: dict[str, Callable[[], object]], repeats: int = 7, warmup: int = 1):
    """Run each function ``warmup`` times, then ``repeats`` rounds interleaved; min seconds."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    best = {name: float("inf") for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def report(title: str, best: dict[str, float], baseline: str) -> str:
    lines = [
        f"## {title}",
        "",
        "| variant | min time (ms) | ratio vs " + baseline + " |",
        "|---|---|---|",
    ]
    for name, t in best.items():
        lines.append(f"| {name} | {t * 1e3:.1f} | {t / best[baseline]:.3f}× |")
    return "\n".join(lines)


def interleaved_median(fns: dict[str, Callable[[], object]], repeats: int = 5, warmup: int = 1):
    """Like ``interleaved_min``, but the median of the rounds (and the samples, for a spread)."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - t0)
    median = {name: sorted(s)[len(s) // 2] for name, s in samples.items()}
    return median, samples
