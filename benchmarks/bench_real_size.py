"""Real reward-model shapes on a real machine: conversion memory, scoring and analyses.

Checkpoints (:mod:`real_size_shapes`): random weights in real models' shapes, written as
sharded bf16 safetensors (``model-0000i-of-0000n.safetensors`` + ``model.safetensors.index.json``,
save_pretrained's layout) with a word-level tokenizer, never holding the model: one shard
(``--shard-gib``, default 1) at a time, ≈ 1.4 GiB RSS for the 8B (2.7 GiB for the 27B slice,
whose embedding alone is 2.2 GiB). ``--shape 1b``: Llama-3.2-1B, 1.24 B parameters, 2.30 GiB;
``8b``: Llama-3.1-8B, 7.50 B, 13.98 GiB (≈ 2.5 min to write); ``27b``: Gemma-2-27B's width
with ``--layers`` layers (default 2), 2.31 B, 4.31 GiB. Default directories
``/tmp/rl_ckpt/llama1b``, ``llama8b``, ``gemma27b_2l`` (or ``--ckpt-dir`` with one
``--shape``), reused when their marker file matches (shape, seed, dtype, layers, config, shard
size, file sizes, config/index hashes). ``--smoke``: tiny models of the same families (2
layers, hidden 64, vocab 512; 64 KiB shards, so the index path is used) in a temporary
directory.

Modes (``--write``, ``--memory``, ``--score``, ``--analyses``, ``--precision`` combine, in
that order; with none of them, the original run). Each prints its markdown table, ready for
RESULTS.md.

- ``--precision`` (default shape ``8b``; give ``--layers`` so that float32 fits, e.g. 4):
  ours and HF, each in float32 and in bf16, each in its own process, score the ``--score``
  rows one at a time. Table ``| shape | rewards HF fp32 | |ours fp32 − HF fp32| | |HF bf16 −
  HF fp32| | |ours bf16 − HF fp32| | |ours bf16 − HF bf16| |``: the first difference is the
  conversion, the others bf16's rounding.

- *(none)*: the Llama-3.2-1B shape in a temporary directory (``--dtype``, default bf16),
  converted in this process with ``HookedRewardModel.from_pretrained(path, dtype=...)``; 1
  thread, ``--pairs`` short pairs (~15–25 tokens): seconds per pair of ``score_pairs``,
  ``pair_lens``, ``pair_attribution`` against HF's forward of the same batches, a
  ``resid_pre`` patching sweep, ``|ours − HF|``, peak RSS. Table
  ``| analysis | s/pair | ratio to HF forward |``.
- ``--flat``: memory flat in the number of pairs: 1 layer of the 1B width in float32, RSS
  above the start (sampled every 10 ms) while ``score_pairs`` / ``pair_attribution`` stream
  200 and 2,000 pairs from a generator. Table
  ``| analysis | pairs | s/pair | peak RSS above start (GiB) |``.
- ``--write``: only write (or reuse) the checkpoints of ``--shape`` (default all three).
  Table ``| shape | directory | parameters | size | seconds | reused |``.
- ``--memory`` (default shape ``1b``): every load in a FRESH process (this script with the
  hidden ``--child JOB``), interleaved ``hf_load, hf, ours, …`` (``--repeats`` rounds, default
  1; the minimum is reported); each child's peak RSS is its own ``ru_maxrss`` (KiB) from
  ``os.wait4`` in the parent; the 1-minute load average is read before each child. Jobs:
  ``hf_load`` = ``AutoModelForSequenceClassification.from_pretrained(path,
  dtype=torch.bfloat16, local_files_only=True)`` alone (the memory target's baseline); ``hf``
  = the same, then one read of every weight (chunked, so memory-mapped pages count and no float
  copy is made; the time target's baseline); ``ours`` = ``HookedRewardModel.from_pretrained(path,
  dtype=torch.bfloat16, device=--device)``, the library imported before the clock starts (as
  transformers is for HF); ``--no-processing`` adds ``tl_no_processing``
  (``HookedRewardModel.from_pretrained_no_processing``). Seconds: HF's load, HF's load + read,
  our conversion (every weight is read and processed by then). Table (one row per shape; with
  ``--no-processing`` a column ``TL no processing: peak RSS, s`` after ours)::

    | shape | parameters | bf16 checkpoint | HF load: peak RSS, s | HF load + read: peak RSS, s | ours: peak RSS, s | memory, ours / HF load | time, ours / HF load + read | bytes per parameter, ours (HF load) | load average |
    |---|---|---|---|---|---|---|---|---|---|
    | Llama-3.2-1B (16 layers) | 1.24 B | 2.30 GiB | <x> GiB, <t> s | <x> GiB, <t> s | <x> GiB, <t> s | **<r>×** | **<r>×** | <ours> (<hf>) | <min>–<max> |

  A child whose RSS passes ``--rss-limit-gib`` (default 90 % of MemAvailable at the start) is
  killed by a watchdog in the parent before the kernel's OOM killer acts; its cell reads
  ``> <limit> GiB, stopped`` and the ratio and bytes per parameter become lower bounds.
- ``--score`` (default shape ``8b``): a child converts with ours and scores one fixed pair
  (ids from ``--seed``: prompt 64 starting with bos, chosen 64, rejected 56; no tokenizer):
  ``model.rewards`` of the 1 × 128 chosen row and of both rows as a 2-row left-padded batch;
  that process ends, then a second child loads HF in bf16 and scores each row alone. The
  parent checks ``|ours − HF| <= atol + rtol · |HF|`` on all three (``--atol 2.5e-2``,
  tests/test_dtype.py's "bf16 vs HF"; ``--rtol 2e-2``) and exits 1 after printing if not.
  Table::

    | shape | ours: convert, score, peak RSS | HF: load, score, peak RSS | rewards ours / HF (chosen, rejected) | max \\|ours − HF\\| | relative | within atol + rtol·\\|r\\| |
    |---|---|---|---|---|---|---|
    | Llama-3.1-8B (32 layers) | <t> s, <t> s, <x> GiB | <t> s, <t> s, <x> GiB | <c>, <r> / <c>, <r> | <e> | <e> | yes |

- ``--analyses`` (default shape ``8b``; ``--device cpu`` or e.g. ``cuda``): ONE child converts,
  then runs each step once, timed, with its RSS sampled every 20 ms from ``/proc/self/statm``
  (peak above the post-conversion level, and absolute; on CUDA also
  ``torch.cuda.max_memory_allocated`` per step): ``model.rewards`` of one pair (2 rows × 128
  tokens: prompt 64 + response 64), ``direct_attribution`` of it (per head), ``reward_lens``
  of it, and ``activation_patching`` of ``resid_pre`` over 4 layers evenly spaced from 0 × the
  last 16 positions (chosen = clean, rejected = corrupted). Table (the GPU column only on
  CUDA)::

    | step (Llama-3.1-8B (32 layers), cpu, bfloat16, 1 thread) | seconds | peak RSS above post-conversion | peak RSS | peak GPU memory |
    |---|---|---|---|---|
    | conversion | <t> | - | <x> GiB | <x> GiB |
    | `model.rewards`, 1 pair = 2 × 128 tokens | <t> | <x> GiB | <x> GiB | <x> GiB |
    | `direct_attribution` (per head) of it | <t> | <x> GiB | <x> GiB | <x> GiB |
    | `reward_lens` of it | <t> | <x> GiB | <x> GiB | <x> GiB |
    | patching sweep, resid_pre, layers [0, 8, 16, 24] × 16 positions | <t> | <x> GiB | <x> GiB | <x> GiB |
    | whole process (parent's `ru_maxrss`) | | | <x> GiB |

  Memory flat in the number of pairs is ``--flat``'s question.

Children run ``torch.set_num_threads(1)`` (and ``OMP_NUM_THREADS=1``) unless ``--threads``.
``--json-out FILE`` writes every record (each child's, load averages, host) as JSON.

Commands, with durations expected on this 2-core CPU (one 128-token row through the 8B in bf16
takes ≈ 170 s on 1 thread in HF, ≈ 1.5× that in ours)::

    python benchmarks/bench_real_size.py --smoke --memory --score --analyses  # ≈ 1 min
    python benchmarks/bench_real_size.py --write                    # reuse: s; fresh: ≈ 4 min
    python benchmarks/bench_real_size.py --memory --shape 1b --repeats 2 --json-out m1b.json
    python benchmarks/bench_real_size.py --memory --shape 27b --json-out m27b.json
    python benchmarks/bench_real_size.py --memory --shape 8b --json-out m8b.json
    python benchmarks/bench_real_size.py --score --json-out s8b.json                # ≈ 20 min
    python benchmarks/bench_real_size.py --analyses --threads 2 --json-out a8b.json # ≈ 30 min
"""  # noqa: E501  (the tables above are exact RESULTS.md lines)

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import torch
import transformers

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))

from real_size_shapes import (  # noqa: E402
    GIB,
    SHAPES,
    VOCAB,
    Checkpoint,
    ensure_checkpoint,
    llama_1b_config,
    write_checkpoint,
)

__all__ = ["SMOKE", "VOCAB", "llama_1b_config", "stream", "write_checkpoint"]

RESULT = "@@RESULT "  # a child's last stdout line: this prefix, then its JSON record
PATCH_POSITIONS = 16
PATCH_LAYERS = 4


# -- the original run and --flat ----------------------------------------------------------------
def rss_gib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / GIB


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


class RssSampler:
    """Peak RSS (GiB) above the level at entry, sampled every 10 ms in a thread."""

    def __enter__(self):
        gc.collect()
        self.base, self.peak, self._stop = rss_gib(), 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, rss_gib() - self.base)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_gib() - self.base)


def stream(n: int, seed: int = 1):
    """``n`` short pairs, generated one at a time (never a list)."""
    gen = torch.Generator().manual_seed(seed)

    def words(lo: int, hi: int) -> str:
        k = int(torch.randint(lo, hi, (1,), generator=gen))
        return " ".join(f"w{int(i)}" for i in torch.randint(6, VOCAB, (k,), generator=gen))

    for _ in range(n):
        yield SimpleNamespace(prompt=words(6, 10), chosen=words(4, 12), rejected=words(4, 12))


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def hf_time(hf, model, pairs: list, batch_size: int) -> float:
    """HF's forward on exactly the batches the analyses run."""
    from reward_lens_tl.pair_batches import pair_batches

    batches = list(pair_batches(model, pairs, batch_size))

    def run():
        with torch.no_grad():
            for ids, mask, _ in batches:
                hf(input_ids=ids, attention_mask=mask)

    return timed(run)


SMOKE = dict(hidden_size=128, intermediate_size=256, num_attention_heads=4, num_key_value_heads=2)


def real_size(n_pairs: int, dtype: torch.dtype, batch_size: int = 4, smoke: bool = False) -> None:
    from reward_lens_tl import HookedRewardModel
    from reward_lens_tl.attribution import pair_attribution
    from reward_lens_tl.lens import pair_lens
    from reward_lens_tl.pair_batches import pair_batches
    from reward_lens_tl.patching.activation import activation_patching
    from reward_lens_tl.scoring import score_pairs

    config = llama_1b_config(2, **SMOKE, head_dim=32) if smoke else llama_1b_config()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        t = time.perf_counter()
        gib = write_checkpoint(config, path, dtype)
        print(
            f"checkpoint: {gib:.2f} GiB of {dtype} safetensors in {time.perf_counter() - t:.0f} s"
        )
        gc.collect()
        before = rss_gib()
        t = time.perf_counter()
        model = HookedRewardModel.from_pretrained(path, dtype=dtype)
        gc.collect()
        print(
            f"conversion: {time.perf_counter() - t:.0f} s; peak RSS {peak_rss_gib():.1f} GiB, "
            f"RSS after {rss_gib():.1f} GiB (before {before:.1f})"
        )
        hf = transformers.LlamaForSequenceClassification.from_pretrained(
            path, dtype=dtype, use_safetensors=True, trust_remote_code=False
        ).eval()
    pairs = list(stream(n_pairs))
    score_pairs(model, pairs[:1], batch_size=1)  # warm-up
    base = min(hf_time(hf, model, pairs, batch_size) for _ in range(2))
    check = score_pairs(model, pairs[:2], batch_size=2)
    with torch.no_grad():
        ids, mask, _ = next(pair_batches(model, pairs[:2], 2))
        ref = hf(input_ids=ids, attention_mask=mask).logits[:, 0].float()
    err = float((torch.cat([check.chosen, check.rejected]) - ref).abs().max())
    print(
        f"HF forward: {base / n_pairs:.2f} s/pair; |ours − HF| = {err:.2e} ({dtype}; "
        f"rewards up to {float(ref.abs().max()):.2f})"
    )
    rows = {
        "score_pairs": lambda: score_pairs(model, pairs, batch_size=batch_size),
        "pair_lens": lambda: pair_lens(model, pairs, batch_size=batch_size),
        "pair_attribution": lambda: pair_attribution(model, pairs, batch_size=batch_size),
    }
    print("| analysis | s/pair | ratio to HF forward |\n|---|---|---|")
    for name, fn in rows.items():
        t = min(timed(fn) for _ in range(2))
        print(f"| `{name}` | {t / n_pairs:.3f} | {t / base:.2f}× |", flush=True)
    enc = model.encode(pairs[0].prompt, pairs[0].chosen)
    bad = model.encode(pairs[0].prompt, pairs[0].rejected)
    layers = list(range(0, model.cfg.n_layers, 4))
    with torch.no_grad():
        one = min(timed(lambda: hf(input_ids=torch.tensor([enc.ids]))) for _ in range(2))
    patch = {}
    t = timed(
        lambda: patch.setdefault(
            "r", activation_patching(model, enc, bad, site="resid_pre", layers=layers)
        )
    )
    cells = patch["r"].values.numel()
    print(
        f"| patching sweep (resid_pre, layers {layers}, {cells} cells, {len(enc)} tokens) | "
        f"{t:.1f} s total | {t / (cells * one):.2f} HF forwards per cell |"
    )
    print(f"peak RSS of the whole run: {peak_rss_gib():.1f} GiB")


def flatness(sizes=(200, 2000), batch_size: int = 8, smoke: bool = False) -> None:
    from reward_lens_tl import HookedRewardModel
    from reward_lens_tl.attribution import pair_attribution
    from reward_lens_tl.scoring import score_pairs

    config = llama_1b_config(1, **SMOKE, head_dim=32) if smoke else llama_1b_config(1)
    with tempfile.TemporaryDirectory() as tmp:
        write_checkpoint(config, Path(tmp), torch.float32)
        model = HookedRewardModel.from_pretrained(tmp)
    score_pairs(model, stream(8), batch_size=batch_size)  # warm-up
    print("| analysis | pairs | s/pair | peak RSS above start (GiB) |\n|---|---|---|---|")
    for name, fn in {"score_pairs": score_pairs, "pair_attribution": pair_attribution}.items():
        for n in sizes:
            with RssSampler() as rss:
                t = timed(lambda: fn(model, stream(n), batch_size=batch_size))  # noqa: B023
            print(f"| `{name}` | {n} | {t / n:.3f} | {rss.peak:.3f} |", flush=True)


# -- inputs shared by the children ----------------------------------------------------------------
def pair_ids(vocab: int, seed: int, prompt: int = 64, chosen: int = 64, rejected: int = 64):
    """A fixed pair as token ids: ``(prompt + chosen, prompt + rejected)``; the prompt starts
    with bos (1), every other id is a word (6 … vocab - 1)."""
    gen = torch.Generator().manual_seed(seed)

    def words(n: int) -> list[int]:
        return torch.randint(6, vocab, (n,), generator=gen).tolist()

    head = [1, *words(prompt - 1)]
    return head + words(chosen), head + words(rejected)


def left_padded(rows: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows left-padded to one length: ``(ids, attention_mask)``."""
    width = max(len(r) for r in rows)
    ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    return ids, mask


def checkpoint_vocab_pad(path: Path) -> tuple[int, int]:
    config = json.loads((path / "config.json").read_text())
    return config["vocab_size"], config.get("pad_token_id") or 0


def patch_layers(n_layers: int) -> list[int]:
    """``PATCH_LAYERS`` layers evenly spaced from 0 (fewer when the model has fewer)."""
    return sorted({i * n_layers // PATCH_LAYERS for i in range(PATCH_LAYERS)})


# -- children -------------------------------------------------------------------------------------
class RssPeak:
    """Absolute peak RSS (GiB), sampled every ``interval`` s from /proc/self/statm in a thread."""

    def __init__(self, interval: float = 0.02):
        self.interval = interval

    def __enter__(self):
        self.peak, self._stop = rss_gib(), threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, rss_gib())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_gib())


def sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def gpu_peak_gib(device: str) -> float | None:
    if torch.device(device).type != "cuda":
        return None
    return torch.cuda.max_memory_allocated() / GIB


def reset_gpu_peak(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.reset_peak_memory_stats()


def read_every_weight(model: torch.nn.Module) -> float:
    """Touch every parameter once, a chunk at a time (no float copy of a whole tensor), so
    memory-mapped pages are resident and count in the peak."""
    total = 0.0
    with torch.no_grad():
        for p in model.parameters():
            for chunk in p.detach().reshape(-1).split(1 << 22):
                total += float(chunk.float().sum())
    return total


def convert_ours(args, no_processing: bool = False):
    from reward_lens_tl import HookedRewardModel

    load = (
        HookedRewardModel.from_pretrained_no_processing
        if no_processing
        else HookedRewardModel.from_pretrained
    )
    return load(args.ckpt_dir, dtype=torch.bfloat16, device=args.device)


def load_hf(args):
    path = args.ckpt_dir
    extra = {}
    if json.loads((path / "config.json").read_text()).get("model_type") == "gemma2":
        extra["attn_implementation"] = "eager"  # HF's advice for Gemma-2's soft-capping
    return transformers.AutoModelForSequenceClassification.from_pretrained(
        path, dtype=torch.bfloat16, local_files_only=True, **extra
    ).eval()


def job_hf_load(args) -> dict:
    t0 = time.perf_counter()
    load_hf(args)
    return {"seconds": time.perf_counter() - t0}


def job_hf(args) -> dict:
    t0 = time.perf_counter()
    model = load_hf(args)
    load_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    read_every_weight(model)
    read_s = time.perf_counter() - t1
    return {"seconds": load_s + read_s, "load_s": load_s, "read_s": read_s}


def job_ours(args, no_processing: bool = False) -> dict:
    from reward_lens_tl import HookedRewardModel  # noqa: F401  (before the clock, as HF's)

    reset_gpu_peak(args.device)
    t0 = time.perf_counter()
    model = convert_ours(args, no_processing)
    sync(args.device)
    load_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    read_every_weight(model)
    read_s = time.perf_counter() - t1
    return {
        "seconds": load_s,
        "load_s": load_s,
        "read_s": read_s,
        "gpu_peak_gib": gpu_peak_gib(args.device),
    }


def job_precision(args, ours: bool, dtype: torch.dtype) -> dict:
    """Rewards of the fixed chosen and rejected rows, one row at a time, by ours or HF in
    ``dtype`` (``--precision``: where bf16's rounding alone moves the reward)."""
    chosen, rejected, _ = score_rows(args)
    if ours:
        from reward_lens_tl import HookedRewardModel

        model = HookedRewardModel.from_pretrained(args.ckpt_dir, dtype=dtype, device=args.device)
    else:
        model = transformers.AutoModelForSequenceClassification.from_pretrained(
            args.ckpt_dir, dtype=dtype, local_files_only=True
        ).eval()
    with torch.no_grad():
        rows = [torch.tensor([row], device=args.device) for row in (chosen, rejected)]
        if ours:
            rewards = [float(model.rewards(r)[0]) for r in rows]
        else:
            rewards = [float(model(input_ids=r).logits[0, 0]) for r in rows]
    return {"rows": rewards}


PRECISION_JOBS = {
    "precision_ours_fp32": (True, torch.float32),
    "precision_ours_bf16": (True, torch.bfloat16),
    "precision_hf_fp32": (False, torch.float32),
    "precision_hf_bf16": (False, torch.bfloat16),
}


def precision_mode(args, found: dict[str, Checkpoint]) -> tuple[list[str], dict]:
    """Each of ours / HF in float32 / bf16 in its own process; the differences that matter:
    ours vs HF in float32 (the conversion), each bf16 vs HF float32 (the rounding)."""
    lines = [
        "| shape | rewards HF fp32 (chosen, rejected) | \\|ours fp32 − HF fp32\\| | "
        "\\|HF bf16 − HF fp32\\| | \\|ours bf16 − HF fp32\\| | \\|ours bf16 − HF bf16\\| |",
        "|---|---|---|---|---|---|",
    ]
    data = {}
    for shape, ckpt in found.items():
        print(f"precision, {shape}:", flush=True)
        got = {
            job: torch.tensor(finished(run_child(job, ckpt.path, args))["rows"])
            for job in PRECISION_JOBS
        }
        ref = got["precision_hf_fp32"]
        gap = partial(precision_gap, got)
        lines.append(
            f"| {title(ckpt)} | {ref[0]:.4f}, {ref[1]:.4f} | {gap('precision_ours_fp32'):.2e} | "
            f"{gap('precision_hf_bf16'):.2e} | {gap('precision_ours_bf16'):.2e} | "
            f"{gap('precision_ours_bf16', 'precision_hf_bf16'):.2e} |"
        )
        data[shape] = {job: v.tolist() for job, v in got.items()}
    return lines, data


def precision_gap(got: dict, a: str, b: str = "precision_hf_fp32") -> float:
    return float((got[a] - got[b]).abs().max())


def score_rows(args) -> tuple[list[int], list[int], int]:
    vocab, pad = checkpoint_vocab_pad(args.ckpt_dir)
    chosen, rejected = pair_ids(vocab, args.seed, 64, 64, 56)
    return chosen, rejected, pad


def job_score_ours(args) -> dict:
    chosen, rejected, pad = score_rows(args)
    t0 = time.perf_counter()
    model = convert_ours(args)
    sync(args.device)
    convert_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    single = model.rewards(torch.tensor([chosen], device=args.device))
    ids, mask = left_padded([chosen, rejected], pad)
    batch = model.rewards(ids.to(args.device), mask.to(args.device))
    sync(args.device)
    return {
        "convert_s": convert_s,
        "score_s": time.perf_counter() - t1,
        "single": single.float().cpu().tolist(),
        "batch": batch.float().cpu().tolist(),
    }


def job_score_hf(args) -> dict:
    chosen, rejected, _ = score_rows(args)
    t0 = time.perf_counter()
    model = load_hf(args).to(args.device)
    load_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    rewards = []
    with torch.no_grad():
        for row in (chosen, rejected):
            out = model(input_ids=torch.tensor([row], device=args.device)).logits
            rewards.append(float(out[0, 0]))
    return {"load_s": load_s, "score_s": time.perf_counter() - t1, "rows": rewards}


def measured(device: str, base: float, fn) -> dict:
    """Run ``fn`` once: seconds, peak RSS (absolute and above ``base``), peak GPU memory."""
    gc.collect()
    reset_gpu_peak(device)
    with RssPeak() as rss:
        t0 = time.perf_counter()
        fn()
        sync(device)
        seconds = time.perf_counter() - t0
    return {
        "seconds": seconds,
        "peak_rss_gib": rss.peak,
        "peak_above_gib": rss.peak - base,
        "gpu_peak_gib": gpu_peak_gib(device),
    }


def job_analyses(args) -> dict:
    from reward_lens_tl.attribution import direct_attribution
    from reward_lens_tl.lens import reward_lens
    from reward_lens_tl.patching.activation import activation_patching

    vocab, _ = checkpoint_vocab_pad(args.ckpt_dir)
    chosen, rejected = pair_ids(vocab, args.seed, 64, 64, 64)
    dev = args.device
    reset_gpu_peak(dev)
    with RssPeak() as rss:
        t0 = time.perf_counter()
        model = convert_ours(args)
        sync(dev)
        convert_s = time.perf_counter() - t0
    gc.collect()
    base = rss_gib()
    steps = {
        "conversion": {
            "seconds": convert_s,
            "peak_rss_gib": rss.peak,
            "peak_above_gib": None,
            "gpu_peak_gib": gpu_peak_gib(dev),
            "rss_after_gib": base,
        }
    }
    ids = torch.tensor([chosen, rejected], device=dev)
    layers = patch_layers(model.cfg.n_layers)
    positions = list(range(len(chosen) - PATCH_POSITIONS, len(chosen)))
    runs = {
        "rewards": lambda: model.rewards(ids),
        "direct_attribution": lambda: direct_attribution(model, ids),
        "reward_lens": lambda: reward_lens(model, ids),
        "patching": lambda: activation_patching(
            model, ids[0], ids[1], site="resid_pre", layers=layers, positions=positions
        ),
    }
    for name, fn in runs.items():
        steps[name] = measured(dev, base, fn)
    return {
        "steps": steps,
        "tokens": len(chosen),
        "patch_layers": layers,
        "patch_positions": len(positions),
        "n_layers": model.cfg.n_layers,
    }


JOBS = {
    "hf_load": job_hf_load,
    "hf": job_hf,
    "ours": job_ours,
    "tl_no_processing": lambda args: job_ours(args, no_processing=True),
    **{job: partial(job_precision, ours=o, dtype=d) for job, (o, d) in PRECISION_JOBS.items()},
    "score_ours": job_score_ours,
    "score_hf": job_score_hf,
    "analyses": job_analyses,
}


def child_main(args) -> None:
    """Run one job in this fresh process and print its record as the last stdout line."""
    torch.set_num_threads(args.threads or 1)
    args.ckpt_dir = Path(args.ckpt_dir)
    record = {"job": args.child, "rss_imports_gib": rss_gib()}
    t0 = time.perf_counter()
    record.update(JOBS[args.child](args))
    record["job_wall_s"] = time.perf_counter() - t0
    record["self_peak_rss_gib"] = peak_rss_gib()
    print(RESULT + json.dumps(record), flush=True)


# -- the parent -----------------------------------------------------------------------------------
def child_rss_gib(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / GIB


def mem_available_gib() -> float:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 2**20
    return float("inf")


class Watchdog:
    """Kills the child (SIGKILL, by its pid) when its RSS passes ``limit`` GiB, so that a
    conversion too big for the machine is stopped before the kernel's OOM killer picks a
    process (perhaps another one); polled every 50 ms."""

    def __init__(self, proc: subprocess.Popen, limit: float):
        self.proc, self.limit, self.over = proc, limit, None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(0.05):
            try:
                rss = child_rss_gib(self.proc.pid)
            except (OSError, IndexError):  # exited (a zombie has no pages)
                return
            if rss > self.limit:
                self.over = rss
                self.proc.kill()  # not yet reaped (we wait4 for it), so the pid is still its
                return

    def stop(self):
        self._stop.set()
        self._thread.join()


def run_child(job: str, path: Path, args) -> dict:
    """``job`` in a fresh process; its own peak RSS from ``os.wait4``, load average before.
    A child stopped by the watchdog gives ``{"stopped_above_gib": limit, ...}``."""
    threads = args.threads or 1
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", job]
    argv += ["--ckpt-dir", str(path), "--device", args.device, "--seed", str(args.seed)]
    argv += ["--threads", str(threads)]
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(threads),
        "TQDM_DISABLE": "1",
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(HERE.parent), os.environ.get("PYTHONPATH")) if p
        ),
    }
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
    watchdog = Watchdog(proc, args.rss_limit_gib)
    out = proc.stdout.read()
    proc.stdout.close()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)  # already reaped: Popen must not wait
    watchdog.stop()
    wall = time.perf_counter() - t0
    common = dict(
        peak_rss_gib=usage.ru_maxrss / 2**20, process_wall_s=wall, loadavg_1min=load, path=str(path)
    )
    if watchdog.over is not None:
        print(
            f"  {job}: STOPPED at {watchdog.over:.2f} GiB RSS (--rss-limit-gib "
            f"{args.rss_limit_gib:.2f}) after {wall:.0f} s",
            flush=True,
        )
        return {"job": job, "stopped_above_gib": args.rss_limit_gib, **common}
    lines = [line for line in out.splitlines() if line.startswith(RESULT)]
    if proc.returncode != 0 or not lines:
        sys.stdout.write(out)
        raise SystemExit(f"child {job!r} on {path} failed (exit status {proc.returncode})")
    record = json.loads(lines[-1].removeprefix(RESULT))
    record.update(common)
    print(
        f"  {job}: peak RSS {record['peak_rss_gib']:.2f} GiB, {wall:.1f} s in all "
        f"(load average {load:.2f})",
        flush=True,
    )
    return record


def finished(record: dict) -> dict:
    """``record`` of a child that finished; a stopped one ends the run (score, analyses)."""
    if "stopped_above_gib" in record:
        raise SystemExit(
            f"{record['job']} passed --rss-limit-gib {record['stopped_above_gib']:.2f} and was "
            "stopped; nothing to report"
        )
    return record


def checkpoints(args, shapes: list[str], root: Path | None, seen: set) -> dict[str, Checkpoint]:
    """The checkpoints of ``shapes`` (written or reused; one already met in this run must be
    reused: the writer is idempotent)."""
    if args.ckpt_dir is not None and len(shapes) > 1:
        raise SystemExit("--ckpt-dir names one checkpoint: give one --shape with it")
    found = {}
    for shape in shapes:
        path = args.ckpt_dir
        if path is None and root is not None:
            path = root / SHAPES[shape].default_dir(args.layers, args.smoke).name
        found[shape] = ensure_checkpoint(
            shape,
            path,
            layers=args.layers,
            seed=args.seed,
            tiny=args.smoke,
            shard_bytes=args.shard_bytes,
        )
        done = found[shape]
        if shape in seen and not done.reused:
            raise SystemExit(f"the {shape} checkpoint was written twice: the marker did not match")
        seen.add(shape)
        how = "reused" if done.reused else f"written in {done.seconds:.0f} s"
        print(f"checkpoint {shape}: {done.path} ({size(done.gib)}, {how})", flush=True)
    return found


def count(n: int) -> str:
    return f"{n / 1e9:.2f} B" if n >= 1e8 else f"{n / 1e6:.3f} M"


def size(gib: float) -> str:
    return f"{gib:.2f} GiB" if gib >= 0.1 else f"{gib * 1024:.2f} MiB"


def title(ckpt: Checkpoint) -> str:
    config = json.loads((ckpt.path / "config.json").read_text())
    return f"{SHAPES[ckpt.shape].title} ({config['num_hidden_layers']} layers)"


def write_mode(found: dict[str, Checkpoint]) -> list[str]:
    lines = [
        "| shape | directory | parameters | size | seconds | reused |",
        "|---|---|---|---|---|---|",
    ]
    for ckpt in found.values():
        lines.append(
            f"| {title(ckpt)} | `{ckpt.path}` | {count(ckpt.n_params)} | {size(ckpt.gib)} | "
            f"{ckpt.seconds:.0f} | {'yes' if ckpt.reused else 'no'} |"
        )
    return lines


def best_of(runs: list[dict]) -> dict:
    """The minimum peak and seconds over a job's finished runs; when every run was stopped,
    the limit it passed (``stopped``: a lower bound)."""
    done = [r for r in runs if "stopped_above_gib" not in r]
    if not done:
        return {"peak_rss_gib": runs[0]["stopped_above_gib"], "seconds": None, "stopped": True}
    return {
        "peak_rss_gib": min(r["peak_rss_gib"] for r in done),
        "seconds": min(r["seconds"] for r in done),
        "stopped": False,
    }


def memory_mode(args, found: dict[str, Checkpoint]) -> tuple[list[str], dict]:
    jobs = ["hf_load", "hf", "ours"] + (["tl_no_processing"] if args.no_processing else [])
    header = (
        "| shape | parameters | bf16 checkpoint | HF load: peak RSS, s | "
        "HF load + read: peak RSS, s | ours: peak RSS, s |"
    )
    rule = "|---|---|---|---|---|---|"
    if args.no_processing:
        header += " TL no processing: peak RSS, s |"
        rule += "---|"
    header += (
        " memory, ours / HF load | time, ours / HF load + read | bytes per parameter, ours "
        "(HF load) | load average |"
    )
    rule += "---|---|---|---|"
    lines, data = [header, rule], {}
    for shape, ckpt in found.items():
        print(f"memory, {shape}:", flush=True)
        runs = [run_child(job, ckpt.path, args) for _ in range(args.repeats) for job in jobs]
        best = {job: best_of([r for r in runs if r["job"] == job]) for job in jobs}
        loads = [r["loadavg_1min"] for r in runs]
        n = ckpt.n_params
        ratio = best["ours"]["peak_rss_gib"] / best["hf_load"]["peak_rss_gib"]
        stopped = best["ours"]["stopped"] or best["hf"]["stopped"]
        time_ratio = None if stopped else best["ours"]["seconds"] / best["hf"]["seconds"]
        per_param = {j: best[j]["peak_rss_gib"] * GIB / n for j in jobs}
        more = {j: "> " if best[j]["stopped"] else "" for j in jobs}
        cells = [
            f"{more[j]}{best[j]['peak_rss_gib']:.2f} GiB, "
            + ("stopped" if best[j]["stopped"] else f"{best[j]['seconds']:.1f} s")
            for j in jobs
        ]
        lines.append(
            f"| {title(ckpt)} | {count(n)} | {size(ckpt.gib)} | "
            + "".join(f"{c} | " for c in cells)
            + ("n/a" if best["hf_load"]["stopped"] else f"**{more['ours']}{ratio:.2f}×**")
            + " | "
            + ("n/a" if time_ratio is None else f"**{time_ratio:.2f}×**")
            + f" | {more['ours']}"
            f"{per_param['ours']:.1f} ({per_param['hf_load']:.1f}) | "
            f"{min(loads):.1f}–{max(loads):.1f} |"
        )
        data[shape] = {
            "n_params": n,
            "checkpoint_gib": ckpt.gib,
            "runs": runs,
            "best": best,
            "ratio_ours_hf": ratio,
            "time_ratio_ours_hf_load_read": time_ratio,
            "bytes_per_param": per_param,
        }
    return lines, data


def score_mode(args, found: dict[str, Checkpoint]) -> tuple[list[str], dict, bool]:
    lines = [
        "| shape | ours: convert, score, peak RSS | HF: load, score, peak RSS | "
        "rewards ours / HF (chosen, rejected) | max \\|ours − HF\\| | relative | "
        "within atol + rtol·\\|r\\| |",
        "|---|---|---|---|---|---|---|",
    ]
    data, ok_all = {}, True
    for shape, ckpt in found.items():
        print(f"score, {shape}:", flush=True)
        ours = finished(run_child("score_ours", ckpt.path, args))  # the process ends: freed
        hf = finished(run_child("score_hf", ckpt.path, args))
        ref = torch.tensor(hf["rows"])
        got = torch.tensor([ours["single"][0], *ours["batch"]])
        want = torch.stack([ref[0], ref[0], ref[1]])
        diff = (got - want).abs()
        tol = args.atol + args.rtol * want.abs()
        ok = bool((diff <= tol).all())
        ok_all &= ok
        err, rel = float(diff.max()), float((diff / want.abs().clamp_min(1e-6)).max())
        lines.append(
            f"| {title(ckpt)} | {ours['convert_s']:.0f} s, {ours['score_s']:.1f} s, "
            f"{ours['peak_rss_gib']:.2f} GiB | {hf['load_s']:.0f} s, {hf['score_s']:.1f} s, "
            f"{hf['peak_rss_gib']:.2f} GiB | {ours['batch'][0]:.4f}, {ours['batch'][1]:.4f} / "
            f"{hf['rows'][0]:.4f}, {hf['rows'][1]:.4f} | {err:.2e} | {rel:.2e} | "
            f"{'yes' if ok else '**no**'} |"
        )
        data[shape] = {
            "ours": ours,
            "hf": hf,
            "max_abs_err": err,
            "max_rel_err": rel,
            "atol": args.atol,
            "rtol": args.rtol,
            "ok": ok,
        }
    return lines, data, ok_all


STEP_TITLES = {
    "conversion": "conversion",
    "rewards": "`model.rewards`, 1 pair = 2 × {tokens} tokens",
    "direct_attribution": "`direct_attribution` (per head) of it",
    "reward_lens": "`reward_lens` of it",
    "patching": "patching sweep, resid_pre, layers {layers} × {positions} positions",
}


def analyses_mode(args, found: dict[str, Checkpoint]) -> tuple[list[str], dict]:
    lines, data = [], {}
    gpu = torch.device(args.device).type == "cuda"
    threads = args.threads or 1
    for shape, ckpt in found.items():
        print(f"analyses, {shape}:", flush=True)
        rec = finished(run_child("analyses", ckpt.path, args))
        head = (
            f"| step ({title(ckpt)}, {args.device}, bfloat16, {threads} thread"
            f"{'s' if threads > 1 else ''}) | seconds | peak RSS above post-conversion | peak RSS |"
        )
        lines += [head + (" peak GPU memory |" if gpu else ""), "|---|---|---|---|" + "---|" * gpu]
        info = dict(
            tokens=rec["tokens"], layers=rec["patch_layers"], positions=rec["patch_positions"]
        )
        for name, step in rec["steps"].items():
            above = "-" if step["peak_above_gib"] is None else f"{step['peak_above_gib']:.3f} GiB"
            row = (
                f"| {STEP_TITLES[name].format(**info)} | {step['seconds']:.2f} | {above} | "
                f"{step['peak_rss_gib']:.2f} GiB |"
            )
            if gpu:
                row += f" {step['gpu_peak_gib']:.2f} GiB |"
            lines.append(row)
        lines.append(
            f"| whole process (parent's `ru_maxrss`) | | | {rec['peak_rss_gib']:.2f} GiB |"
        )
        data[shape] = rec
    return lines, data


def host() -> dict:
    return {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cpus": os.cpu_count(),
        "mem_total_gib": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB,
    }


def measure(args) -> None:
    """``--write``, ``--memory``, ``--score``, ``--analyses``: checkpoints, then children."""
    modes = {
        "write": args.write,
        "memory": args.memory,
        "score": args.score,
        "analyses": args.analyses,
        "precision": args.precision,
    }
    defaults = {
        "write": ["1b", "8b", "27b"],
        "memory": ["1b"],
        "score": ["8b"],
        "analyses": ["8b"],
        "precision": ["8b"],
    }
    tmp = (
        tempfile.TemporaryDirectory(prefix="rl_smoke_")
        if args.smoke and not args.ckpt_dir
        else None
    )
    root = Path(tmp.name) if tmp else None
    report, ok = {"host": host(), "args": {k: str(v) for k, v in vars(args).items()}}, True
    tables, seen = [], set()
    try:
        for mode, on in modes.items():
            if not on:
                continue
            found = checkpoints(args, args.shape or defaults[mode], root, seen)
            if mode == "write":
                lines, report["write"] = (
                    write_mode(found),
                    {k: str(v.path) for k, v in found.items()},
                )
            elif mode == "memory":
                lines, report["memory"] = memory_mode(args, found)
            elif mode == "score":
                lines, report["score"], ok = score_mode(args, found)
            elif mode == "precision":
                lines, report["precision"] = precision_mode(args, found)
            else:
                lines, report["analyses"] = analyses_mode(args, found)
            tables.append((mode, lines))
    finally:
        if tmp is not None:
            tmp.cleanup()
    for mode, lines in tables:
        print(f"\n{mode}:\n" + "\n".join(lines))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n")
        print(f"\nwrote {args.json_out}")
    if not ok:
        raise SystemExit("ours and HF disagree beyond atol + rtol·|reward| (see the score table)")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--pairs", type=int, default=8, help="pairs per timed analysis (the original run)")
    add("--dtype", default="bfloat16", choices=["bfloat16", "float32"], help="original run")
    add("--flat", action="store_true", help="only the memory-flatness run")
    add("--smoke", action="store_true", help="tiny models (every mode in seconds)")
    add("--write", action="store_true", help="write (or reuse) the checkpoints only")
    add("--memory", action="store_true", help="peak RSS of HF's load and ours, fresh processes")
    add("--score", action="store_true", help="ours and HF score one pair, fresh processes")
    add("--analyses", action="store_true", help="seconds and RSS of the analyses, one process")
    add(
        "--precision",
        action="store_true",
        help="ours / HF in float32 / bf16, one process each (use --layers: fp32 must fit)",
    )
    add("--shape", action="append", choices=sorted(SHAPES), help="repeat for several")
    add("--layers", type=int, default=None, help="layers of the shape (27b: default 2)")
    add("--ckpt-dir", type=Path, default=None, help="default /tmp/rl_ckpt/<shape>")
    add("--seed", type=int, default=0, help="weights' and token ids' seed")
    add("--shard-gib", type=float, default=None, help="shard size (default 1; smoke 64 KiB)")
    add("--repeats", type=int, default=1, help="--memory: rounds of hf, ours (minimum kept)")
    add("--threads", type=int, default=None, help="torch threads in the children (default 1)")
    add("--device", default="cpu", help="ours' device (and HF's for --score)")
    add("--no-processing", action="store_true", help="--memory: add tl_no_processing")
    add("--atol", type=float, default=2.5e-2, help="--score: absolute tolerance")
    add("--rtol", type=float, default=2e-2, help="--score: tolerance relative to |reward|")
    add(
        "--rss-limit-gib",
        type=float,
        default=None,
        help="stop a child whose RSS passes this (default 90%% of MemAvailable at the start)",
    )
    add("--json-out", type=Path, default=None, help="write every measurement here")
    add("--child", choices=sorted(JOBS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rss_limit_gib is None:
        args.rss_limit_gib = 0.9 * mem_available_gib()
    if args.shard_gib is not None:
        args.shard_bytes = int(args.shard_gib * GIB)
    else:
        args.shard_bytes = 2**16 if args.smoke else GIB
    return args


def main() -> None:
    args = parse_args()
    if args.child:
        return child_main(args)
    torch.set_num_threads(1)
    if args.write or args.memory or args.score or args.analyses or args.precision:
        return measure(args)
    if args.flat:
        return flatness((20, 60) if args.smoke else (200, 2000), smoke=args.smoke)
    real_size(args.pairs, getattr(torch, args.dtype), smoke=args.smoke)


if __name__ == "__main__":
    main()
