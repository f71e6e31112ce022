"""Batched activation patching and attribution patching against ``transformer_lens.patching``.

Model: Llama-style sequence classifier, 6 layers, d_model 512, 8 heads (the one of
``bench_forward.py``), one clean/corrupted pair of ``--tokens`` tokens, float32, CPU.
Sweeps: resid_pre layer × position, heads (all positions) and heads × position; AtP and AtP*
over the resid_pre grid. Values are compared with TL's on the same cells.

TL runs one full forward per cell, so its cost per cell is constant; for the large grids it is
timed on every ``--tl-stride``-th position (all layers, all heads) and extrapolated to the
whole grid (``--tl-stride 1`` times the whole grid). Peak memory is the growth of the
resident set while one run of a variant lasts (sampled every millisecond, after handing freed
heap back to the OS); for TL's extrapolated sweeps it is the peak of the timed subset, which
equals that of the whole sweep (one forward at a time).

Targets (issue 5): sweeps ≥ 4× faster than TL at equal values; AtP of the whole grid ≤ 4
forward-equivalents. Usage:
python benchmarks/bench_patching.py [--threads 1 2] [--tokens 128] [--repeats 3] [--no-memory]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import itertools
import os
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")  # TL's sweep prints a progress bar per cell

import pandas as pd  # noqa: E402
import torch  # noqa: E402
from transformer_lens import patching as tlp  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from bench_forward import build  # noqa: E402
from timing import interleaved_min  # noqa: E402

from reward_lens_tl.patching import (  # noqa: E402
    activation_patching,
    attribution_patching,
    chunk_memory_bytes,
)
from reward_lens_tl.testing import random_batch  # noqa: E402


def inputs(tokens: int):
    ids, _ = random_batch(2, [tokens, tokens], vocab=2000, low=3, seed=1)
    return ids[0], ids[1]


def tl_metric(logits):
    return logits[0, -1, 0]


def tl_subset(model, clean, corrupted, site: str, stride: int):
    """TL's sweep over every ``stride``-th position: values, cells timed, cells in the grid."""
    n_layers, n_pos, n_heads = model.cfg.n_layers, clean.shape[0], model.cfg.n_heads
    positions = range(0, n_pos, stride)
    if site == "resid_pre":
        index = pd.DataFrame(itertools.product(range(n_layers), positions), columns=["l", "p"])
        setter, act, full = tlp.layer_pos_patch_setter, "resid_pre", n_layers * n_pos
    else:
        cols = ["l", "p", "h"]
        index = pd.DataFrame(
            itertools.product(range(n_layers), positions, range(n_heads)), columns=cols
        )
        setter, act, full = tlp.layer_pos_head_vector_patch_setter, "z", n_layers * n_pos * n_heads
    _, cache = model.run_with_cache(clean[None])

    def run():
        return tlp.generic_activation_patch(
            model, corrupted[None], cache, tl_metric, setter, act, index_df=index
        )

    return run, index, full


def ours(model, clean, corrupted, site, by_position, chunk_size, reuse=True):
    return lambda: activation_patching(
        model,
        clean,
        corrupted,
        site=site,
        by_position=by_position,
        alignment="exact",
        metric=lambda r: r,
        chunk_size=chunk_size,
        reuse_prefix=reuse,
    )


def variants(model, clean, corrupted, args):
    """name -> (function, chunk size, cells in the grid, extrapolation factor to the grid)."""
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    out = {}
    tl_resid, idx_resid, full_resid = tl_subset(
        model, clean, corrupted, "resid_pre", args.tl_stride
    )
    out["TL resid_pre (layer×pos)"] = (tl_resid, "-", full_resid, full_resid / len(idx_resid))
    for c in args.chunks:
        fn = ours(model, clean, corrupted, "resid_pre", True, c)
        out[f"ours resid_pre, chunk {c}"] = (fn, c, full_resid, 1.0)
    fn = ours(model, clean, corrupted, "resid_pre", True, args.chunks[0], reuse=False)
    out[f"ours resid_pre, chunk {args.chunks[0]}, no prefix reuse"] = (
        fn,
        args.chunks[0],
        full_resid,
        1.0,
    )
    _, clean_cache = model.run_with_cache(clean[None])
    out["TL heads (layer×head, all pos)"] = (
        lambda: tlp.get_act_patch_attn_head_out_all_pos(
            model, corrupted[None], clean_cache, tl_metric
        ),
        "-",
        n_layers * n_heads,
        1.0,
    )
    out["ours heads (layer×head, all pos)"] = (
        ours(model, clean, corrupted, "z", False, n_heads),
        n_heads,
        n_layers * n_heads,
        1.0,
    )
    tl_hp, idx_hp, full_hp = tl_subset(model, clean, corrupted, "z", args.tl_stride * 4)
    out["TL heads × pos"] = (tl_hp, "-", full_hp, full_hp / len(idx_hp))
    out["ours heads × pos"] = (ours(model, clean, corrupted, "z", True, 16), 16, full_hp, 1.0)
    return out, {"resid": idx_resid, "heads_pos": idx_hp}, clean_cache


def check_equal(model, clean, corrupted, clean_cache, stride: int) -> dict[str, float]:
    """max |ours − TL| on the cells TL is timed on."""
    with torch.no_grad():
        resid = ours(model, clean, corrupted, "resid_pre", True, 32)()
        heads = ours(model, clean, corrupted, "z", False, 8)()
        heads_pos = ours(model, clean, corrupted, "z", True, 16)()
        r_run, r_idx, _ = tl_subset(model, clean, corrupted, "resid_pre", stride)
        h_run, h_idx, _ = tl_subset(model, clean, corrupted, "z", stride * 4)
        tl_r, tl_h = r_run(), h_run()
        tl_heads = tlp.get_act_patch_attn_head_out_all_pos(
            model, corrupted[None], clean_cache, tl_metric
        )
    return {
        "resid_pre": float((resid.values[r_idx.l.to_list(), r_idx.p.to_list()] - tl_r).abs().max()),
        "heads all pos": float((heads.values - tl_heads).abs().max()),
        "heads × pos": float(
            (heads_pos.values[h_idx.l.to_list(), h_idx.p.to_list(), h_idx.h.to_list()] - tl_h)
            .abs()
            .max()
        ),
    }


def atp_costs(model, clean, corrupted, repeats):
    """Seconds of one plain forward, of AtP / AtP* over the resid_pre grid and the head grid."""
    fns = {
        "plain forward (1 sequence)": lambda: model.rewards(clean[None]),
        "AtP resid_pre grid": lambda: attribution_patching(
            model, clean, corrupted, alignment="exact", metric=lambda r: r
        ),
        "AtP heads × pos grid": lambda: attribution_patching(
            model,
            clean,
            corrupted,
            site="z",
            by_position=True,
            alignment="exact",
            metric=lambda r: r,
        ),
        "AtP+QK fix resid_pre grid": lambda: attribution_patching(
            model, clean, corrupted, alignment="exact", metric=lambda r: r, qk_fix=True
        ),
        "AtP* (QK fix + GradDrop) resid_pre grid": lambda: attribution_patching(
            model,
            clean,
            corrupted,
            alignment="exact",
            metric=lambda r: r,
            qk_fix=True,
            graddrop=True,
        ),
    }
    with torch.no_grad():
        fwd = interleaved_min({k: fns[k] for k in list(fns)[:1]}, repeats=repeats)
    best = interleaved_min({k: v for k, v in fns.items() if k not in fwd}, repeats=repeats)
    return {**fwd, **best}


# -- memory ------------------------------------------------------------------------------------
def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakRSS:
    """Peak growth of the resident set while the block runs, sampled every millisecond,
    after returning freed heap to the OS (``malloc_trim``) so earlier runs do not hide it."""

    def __enter__(self):
        gc.collect()
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except OSError:
            pass
        self.base = self.peak = rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def _poll(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_bytes())
            time.sleep(0.001)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())

    @property
    def mb(self) -> float:
        return (self.peak - self.base) / 2**20


def peak_mb(fn, grad: bool = False) -> float:
    with torch.set_grad_enabled(grad), PeakRSS() as peak:
        fn()
    return peak.mb


def main(argv=None) -> str:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tl-stride", type=int, default=8)
    parser.add_argument("--chunks", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument(
        "--resid-only",
        action="store_true",
        help="only the resid_pre layer x position sweep (ours, first --chunks value; 0 = the "
        "default automatic chunking) vs TL's",
    )
    args = parser.parse_args(argv)
    _, model = build(n_ctx=max(512, args.tokens))
    clean, corrupted = inputs(args.tokens)
    if args.resid_only:
        return resid_only(model, clean, corrupted, args)
    texts = []
    for threads in args.threads:
        torch.set_num_threads(threads)
        with torch.no_grad():
            fns, _, clean_cache = variants(model, clean, corrupted, args)
            errors = check_equal(model, clean, corrupted, clean_cache, args.tl_stride)
            best = interleaved_min({k: v[0] for k, v in fns.items()}, repeats=args.repeats)
        costs = atp_costs(model, clean, corrupted, args.repeats)
        memory = {}
        if not args.no_memory and threads == args.threads[0]:
            memory = {name: peak_mb(v[0]) for name, v in fns.items()}
            atp = lambda: attribution_patching(model, clean, corrupted, alignment="exact")  # noqa: E731
            memory["AtP"] = peak_mb(atp, grad=True)
        texts.append(table(model, fns, best, errors, costs, args, threads, memory))
        print(texts[-1], flush=True)
    return "\n\n".join(texts)


def resid_only(model, clean, corrupted, args) -> str:
    """The resid_pre layer × position sweep alone (issue 16: the lead at long context)."""
    torch.set_num_threads(args.threads[0])
    lines = [
        f"## resid_pre layer × position ({args.tokens} tokens, chunk {args.chunks[0] or 'auto'}, "
        f"{args.threads[0]} thread(s), load average {os.getloadavg()[0]:.1f})",
        "",
        f"| round | TL (extrapolated ×{args.tl_stride}) s | ours s | ours vs TL |",
        "|---|---|---|---|",
    ]
    with torch.no_grad():
        tl_run, idx, full = tl_subset(model, clean, corrupted, "resid_pre", args.tl_stride)
        run = ours(model, clean, corrupted, "resid_pre", True, args.chunks[0] or None)
        mine = run()
        tl_values = tl_run()
        err = float((mine.values[idx.l.to_list(), idx.p.to_list()] - tl_values).abs().max())
        for k in range(args.repeats):
            t0 = time.perf_counter()
            tl_run()
            t_tl = (time.perf_counter() - t0) * full / len(idx)
            t0 = time.perf_counter()
            run()
            t_ours = time.perf_counter() - t0
            lines.append(f"| {k} | {t_tl:.1f} | {t_ours:.1f} | **{t_tl / t_ours:.2f}×** |")
    lines.append(f"\nmax |ours − TL| on the timed cells: {err:.1e}")
    text = "\n".join(lines)
    print(text, flush=True)
    return text


def table(model, fns, best, errors, costs, args, threads, memory: dict) -> str:
    lines = [
        f"## Patching sweeps (6L d512 Llama RM, {args.tokens} tokens, fp32, {threads} thread(s))",
        "",
        "| variant | chunk | cells | time for the grid (s) | ratio vs TL | peak RSS growth (MB) |",
        "|---|---|---|---|---|---|",
    ]
    baseline = None
    for name, (_, chunk, cells, factor) in fns.items():
        t = best[name] * factor
        if name.startswith("TL"):
            baseline = t
        ratio = "1.00× (baseline)" if name.startswith("TL") else f"{baseline / t:.2f}× faster"
        note = f" (extrapolated ×{factor:.0f})" if factor != 1 else ""
        mem = f"{memory[name]:.0f}" if name in memory else "-"
        lines.append(f"| {name}{note} | {chunk} | {cells} | {t:.2f} | {ratio} | {mem} |")
    est = chunk_memory_bytes(model, args.tokens, 16) / 2**20
    lines += [
        "",
        "max |ours − TL| on the timed cells: "
        + ", ".join(f"{k} {v:.1e}" for k, v in errors.items()),
        f"(estimated peak of one chunk of 16 variants × {args.tokens} tokens: {est:.0f} MB)",
        "",
        "| attribution patching | time (ms) | forward-equivalents |",
        "|---|---|---|",
    ]
    fwd = costs["plain forward (1 sequence)"]
    for name, t in costs.items():
        lines.append(f"| {name} | {t * 1e3:.1f} | {t / fwd:.2f} |")
    if "AtP" in memory:
        lines.append(f"\nAtP (resid_pre grid) peak RSS growth: {memory['AtP']:.0f} MB")
    return "\n".join(lines)


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"\n(total {time.perf_counter() - t0:.0f} s)", file=sys.stderr)
