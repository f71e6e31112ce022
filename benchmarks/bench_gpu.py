"""GPU figures: parity, forward cost, patching sweeps and a real-size model on one CUDA device.

Every timed call is bracketed by ``torch.cuda.synchronize()``; each method is called (at least)
once as warm-up, then the methods run in interleaved rounds and each is reported relative to
its baseline *in the same round* (median over rounds, spread = min–max of those ratios).

1. ``parity``: max |converted − HF| pooled reward on CUDA for every family of
   ``reward_lens_tl.testing.tiny_reward_model`` (a right-padded batch of 12 / 9 / 5 / 16 tokens;
   the HF model on CUDA in the same dtype, and in float32), float32 (TF32 off), bf16, fp16.
2. ``forward``: the 6L d512 Llama-style classifier of ``bench_forward.py`` (``build``), batch 2
   (``--batch``: rows of ``T`` and ``3T/4`` tokens, right padded) at 128 / 1,024 / 4,096
   tokens, fp32 and bf16:
   ``model.rewards``, ``run_with_cache`` (every ``hook_resid_post``) and TL's explicit-pattern
   attention (``set_fast_attention(False)``) against HF's own forward (SDPA)
   (``bench_long_context.methods``).
3. ``patching``: the resid_pre layer × position sweep of one clean/corrupted pair (fp32) at 128
   and 512 tokens: ours (automatic chunks, and one large chunk) against
   ``transformer_lens.patching.get_act_patch_resid_pre`` (one forward per cell) over the whole
   grid, or above ``--tl-full-cells`` cells TL's same sweep on every ``--tl-stride``-th position
   with its time extrapolated to the grid; max |ours − TL| over the cells TL ran
   (``bench_patching.inputs/ours/tl_metric/tl_subset``).
4. ``real``: a Llama-3.2-1B-shaped random bf16 checkpoint (``bench_real_size``): conversion
   time with ``device="cuda"``, time per pair of ``score_pairs``, ``pair_lens``,
   ``pair_attribution`` against HF's forward of the same batches (bf16, SDPA), a patching sweep
   in HF forwards per cell, peak GPU memory (``torch.cuda.max_memory_allocated``), and
   |ours − HF| in bf16.

Usage: python benchmarks/bench_gpu.py [--out FILE] [--sections parity forward patching real]
[--repeats 20] [--smoke]   (``--smoke``: tiny sizes; runs on the CPU when there is no GPU)
"""

from __future__ import annotations

import argparse
import copy
import datetime
import gc
import os
import statistics
import sys
import tempfile
import time
import traceback
from importlib.metadata import version
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")  # TL's sweep and HF's loader print progress bars

import torch  # noqa: E402
import transformers  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from bench_forward import build  # noqa: E402
from bench_long_context import methods  # noqa: E402
from bench_patching import inputs, ours, tl_metric, tl_subset  # noqa: E402
from bench_real_size import SMOKE, VOCAB, llama_1b_config, stream, write_checkpoint  # noqa: E402
from transformer_lens import patching as tlp  # noqa: E402

from reward_lens_tl import HookedRewardModel  # noqa: E402
from reward_lens_tl.attribution import pair_attribution  # noqa: E402
from reward_lens_tl.lens import pair_lens  # noqa: E402
from reward_lens_tl.pair_batches import pair_batches  # noqa: E402
from reward_lens_tl.patching.activation import activation_patching  # noqa: E402
from reward_lens_tl.scoring import score_pairs  # noqa: E402
from reward_lens_tl.testing import random_batch, tiny_reward_model  # noqa: E402

FAMILIES = ["llama", "mistral", "qwen2", "gemma2", "gpt2", "qwen3", "armorm"]
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
GIB = 2**30


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def timed(fn, device) -> float:
    sync(device)
    t0 = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - t0


def rounds(fns: dict, repeats: int, device, warmup: int = 1) -> dict[str, list[float]]:
    """Seconds per round for each method: ``warmup`` calls each, then interleaved rounds."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            times[name].append(timed(fn, device))
    return times


def ratio_cells(times: list[float], base: list[float]) -> str:
    """``median ratio | spread`` of ``times`` over the same rounds of ``base``."""
    r = [t / b for t, b in zip(times, base, strict=True)]
    return f"**{statistics.median(r):.2f}×** | {min(r):.2f}–{max(r):.2f}"


def peak_gib(device) -> float:
    return torch.cuda.max_memory_allocated() / GIB if torch.device(device).type == "cuda" else 0.0


def reset_peak(device) -> float:
    """Start a new peak; returns the GiB allocated now."""
    if torch.device(device).type != "cuda":
        return 0.0
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    return torch.cuda.memory_allocated() / GIB


# -- 1. parity ---------------------------------------------------------------------------------
def parity(args) -> list[str]:
    lines = [
        "### Parity on the GPU: max |ours − HF| pooled reward, tiny models",
        "",
        "Right-padded batch of 4 (12 / 9 / 5 / 16 tokens), converted with "
        f"`device={args.device!r}`, HF on the same device (SDPA); float32 with TF32 off.",
        "",
        "| family | fp32 vs HF fp32 | bf16 vs HF bf16 | bf16 vs HF fp32 | fp16 vs HF fp16 "
        "| fp16 vs HF fp32 |",
        "|---|---|---|---|---|---|",
    ]
    # right padded: compared with plain HF, which counts positions from column 0 (GPT-2)
    ids, mask = random_batch(4, [12, 9, 5, 16], seed=1, low=6, padding_side="right")
    ids[:, 3:5] = torch.tensor([3, 4])  # the tiny ArmoRM's gating pattern (harmless elsewhere)
    ids, mask = ids.to(args.device), mask.to(args.device)

    def hf_reward(family, dtype):
        hf = tiny_reward_model(family).to(args.device, dtype)
        with torch.no_grad():
            out = hf(input_ids=ids, attention_mask=mask)
        return (out.score if family == "armorm" else out.logits[:, 0]).float()

    for family in args.families:
        ref32 = hf_reward(family, torch.float32)
        cells = []
        for name, dtype in DTYPES.items():
            model = HookedRewardModel.from_pretrained(
                tiny_reward_model(family), dtype=dtype, device=args.device
            )
            with torch.no_grad():
                r = model.rewards(ids, mask).float()
            if name != "fp32":
                cells.append(f"{float((r - hf_reward(family, dtype)).abs().max()):.1e}")
            cells.append(f"{float((r - ref32).abs().max()):.1e}")
        lines.append(f"| {family} | " + " | ".join(cells) + " |")
    return lines


# -- 2. forward --------------------------------------------------------------------------------
def forward(args) -> list[str]:
    n_ctx = args.n_ctx or max(args.lengths)
    hf, model = build(n_ctx=n_ctx)
    hf.config._attn_implementation = "sdpa"
    hf.to(args.device)
    model.to(args.device)
    models = {"fp32": (hf, model)}
    if "bf16" in args.forward_dtypes:
        low = HookedRewardModel.from_pretrained(hf, dtype=torch.bfloat16, device=args.device)
        models["bf16"] = (copy.deepcopy(hf).to(torch.bfloat16), low)
    lines = [
        f"### Pooled-reward forward vs HF (SDPA) — 6L d512 Llama-style, batch {args.batch} "
        "(rows of T and 3T/4 tokens, right padded)",
        "",
        f"{args.repeats} interleaved rounds after a warm-up; converted with n_ctx {n_ctx}; HF "
        f"attention: `{hf.config._attn_implementation}`.",
        "",
        "| dtype | tokens | method | median (ms) | ratio vs HF (median) | spread "
        "| max \\|ours − HF\\| (rel.) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in args.forward_dtypes:
        hf_m, ours_m = models[name]
        for length in args.lengths:
            rows = [length, 3 * length // 4] * (args.batch // 2)
            ids, mask = random_batch(
                len(rows), rows, vocab=2000, seed=length, padding_side="right"
            )  # plain HF below counts positions from column 0
            ids, mask = ids.to(args.device), mask.to(args.device)
            with torch.no_grad():
                ref = hf_m(input_ids=ids, attention_mask=mask).logits[:, 0].float()
                diff = (ours_m.rewards(ids, mask).float() - ref).abs().max()
                err = f"{float(diff):.1e} ({float(diff / ref.abs().max()):.1e})"
                times = rounds(methods(hf_m, ours_m, ids, mask, True), args.repeats, args.device)
            base = times["HF forward"]
            for method, ts in times.items():
                lines.append(
                    f"| {name} | {length} | {method} | {statistics.median(ts) * 1e3:.2f} | "
                    f"{ratio_cells(ts, base)} | {err if method == 'model.rewards' else ''} |"
                )
    return lines


# -- 3. patching -------------------------------------------------------------------------------
def patching(args) -> list[str]:
    _, model = build(n_ctx=max(args.patch_tokens))
    model.to(args.device)
    lines = [
        "### Activation patching: resid_pre layer × position, ours vs "
        "`transformer_lens.patching` (6L d512, fp32)",
        "",
        f"One clean/corrupted pair. TL runs one forward per cell: "
        f"`get_act_patch_resid_pre` over the whole grid up to {args.tl_full_cells} cells, above "
        f"that TL's same sweep (`generic_activation_patch` with `layer_pos_patch_setter`) on "
        f"every {args.tl_stride}th position, its time extrapolated to the grid "
        f"(`bench_patching.tl_subset`). {args.patch_repeats} interleaved rounds after a first "
        "run of each (which is also the value check, on the cells TL ran).",
        "",
        "| tokens | cells | method | median for the grid (s) | TL time / ours (median) "
        "| spread | max \\|ours − TL\\| |",
        "|---|---|---|---|---|---|---|",
    ]
    for tokens in args.patch_tokens:
        clean, corrupted = inputs(tokens)
        cells = model.cfg.n_layers * tokens
        with torch.no_grad():
            if cells <= args.tl_full_cells:
                _, clean_cache = model.run_with_cache(clean[None])
                tl_name, factor, layer, pos = "TL get_act_patch_resid_pre", 1.0, slice(None), ...
                tl_run = lambda c=corrupted, cache=clean_cache: (  # noqa: E731
                    tlp.get_act_patch_resid_pre(model, c[None], cache, tl_metric)
                )
            else:
                tl_run, idx, _ = tl_subset(model, clean, corrupted, "resid_pre", args.tl_stride)
                tl_name = f"TL sweep, every {args.tl_stride}th position (extrapolated)"
                factor, layer, pos = cells / len(idx), idx.l.to_list(), idx.p.to_list()
            fns = {
                tl_name: tl_run,
                "ours, automatic chunks": ours(model, clean, corrupted, "resid_pre", True, None),
                f"ours, chunk {args.big_chunk}": ours(
                    model, clean, corrupted, "resid_pre", True, args.big_chunk
                ),
            }
            values = {name: fn() for name, fn in fns.items()}  # warm-up and value check
            tl = values.pop(tl_name).float().cpu()
            errs = {n: float((v.values[layer, pos] - tl).abs().max()) for n, v in values.items()}
            times = rounds(fns, args.patch_repeats, args.device, warmup=0)
        times[tl_name] = [t * factor for t in times[tl_name]]
        for name, ts in times.items():
            if name == tl_name:  # the speed-up is TL's time over ours, round by round
                speed, err = "1.00× (baseline) | -", "-"
            else:
                speed, err = ratio_cells(times[tl_name], ts), f"{errs[name]:.1e}"
            lines.append(
                f"| {tokens} | {cells} | {name} | {statistics.median(ts):.2f} | {speed} | {err} |"
            )
    return lines


# -- 4. real size ------------------------------------------------------------------------------
def real(args) -> list[str]:
    dev, dtype = args.device, torch.bfloat16
    config = llama_1b_config(2, **SMOKE, head_dim=32) if args.smoke else llama_1b_config()
    lines = ["### Llama-3.2-1B-shaped random checkpoint (bf16) on the GPU", ""]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        t = time.perf_counter()
        size = write_checkpoint(config, path, dtype)
        written = time.perf_counter() - t
        gc.collect()
        reset_peak(dev)
        t = time.perf_counter()
        model = HookedRewardModel.from_pretrained(path, dtype=dtype, device=dev)
        sync(dev)
        conversion, conversion_peak = time.perf_counter() - t, peak_gib(dev)
        resident = torch.cuda.memory_allocated() / GIB if dev == "cuda" else 0.0
        hf = transformers.LlamaForSequenceClassification.from_pretrained(
            path, dtype=dtype, use_safetensors=True, trust_remote_code=False
        )
        hf = hf.to(dev).eval()
    pairs = list(stream(args.pairs))
    batches = list(pair_batches(model, pairs, args.batch_size))  # already on the device

    def hf_forward():
        with torch.no_grad():
            for ids, mask, _ in batches:
                hf(input_ids=ids, attention_mask=mask)

    fns = {
        "HF forward (same batches)": hf_forward,
        "`score_pairs`": lambda: score_pairs(model, pairs, batch_size=args.batch_size),
        "`pair_lens`": lambda: pair_lens(model, pairs, batch_size=args.batch_size),
        "`pair_attribution`": lambda: pair_attribution(model, pairs, batch_size=args.batch_size),
    }
    peaks = {}
    for name, fn in fns.items():  # warm-up, and each method's peak GPU memory
        start = reset_peak(dev)
        fn()
        sync(dev)
        peaks[name] = f"{peak_gib(dev):.2f} (+{peak_gib(dev) - start:.2f})"
    times = rounds(fns, args.real_repeats, dev, warmup=0)
    ids, mask, n = batches[0]
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask).logits[:, 0].float()
    check = score_pairs(model, pairs[:n], batch_size=args.batch_size)
    err = float((torch.cat([check.chosen, check.rejected]).to(ref.device) - ref).abs().max())

    enc = model.encode(pairs[0].prompt, pairs[0].chosen)
    bad = model.encode(pairs[0].prompt, pairs[0].rejected)
    one_ids = torch.tensor([enc.ids], device=dev)
    with torch.no_grad():
        one = statistics.median(timed(lambda: hf(input_ids=one_ids), dev) for _ in range(10))
    sweeps = {}
    for layers in (list(range(0, model.cfg.n_layers, 4)), list(range(model.cfg.n_layers))):
        sweep = lambda layers=layers: activation_patching(  # noqa: E731
            model, enc, bad, site="resid_pre", layers=layers
        )
        result = sweep()  # warm-up
        start = reset_peak(dev)
        t = statistics.median(timed(sweep, dev) for _ in range(3))
        peak = f"{peak_gib(dev):.2f} (+{peak_gib(dev) - start:.2f})"
        sweeps[tuple(layers)] = (t, tuple(result.values.shape), peak)

    shape = (
        f"hidden {config.hidden_size}, {config.num_hidden_layers} layers, "
        f"{config.num_attention_heads} heads / {config.num_key_value_heads} kv heads, "
        f"intermediate {config.intermediate_size}, vocab {VOCAB}, llama3 rope"
    )
    lines += [
        f"{shape}; random weights written as bf16 safetensors ({size:.2f} GiB, {written:.0f} s) "
        f"with a word-level tokenizer. {args.pairs} pairs of short sequences (≈ 15–25 tokens), "
        f"batches of {args.batch_size} pairs; HF = `LlamaForSequenceClassification` in bf16 "
        f"(attention `{hf.config._attn_implementation}`) on exactly the same batches; "
        f"{args.real_repeats} interleaved rounds after a warm-up.",
        "",
        "| step | time | ratio vs HF forward (median) | spread "
        "| peak GPU memory, GiB (+ above the start) |",
        "|---|---|---|---|---|",
        f"| conversion: `from_pretrained(path, dtype=torch.bfloat16, device={dev!r})` | "
        f"{conversion:.1f} s | - | - | {conversion_peak:.2f} ({resident:.2f} resident after; "
        "the HF model is then loaded beside it for the baselines) |",
    ]
    base = times["HF forward (same batches)"]
    for name, ts in times.items():
        per_pair = statistics.median(ts) / args.pairs * 1e3
        ratio = "1.00× (baseline) | -" if name.startswith("HF") else ratio_cells(ts, base)
        lines.append(f"| {name} | {per_pair:.2f} ms/pair | {ratio} | {peaks[name]} |")
    for layers, (t, shape, peak) in sweeps.items():
        cells = shape[0] * shape[1]
        lines.append(
            f"| patching sweep: resid_pre, layers {list(layers) if len(layers) < 8 else 'all'} × "
            f"{shape[1]} positions = {cells} cells ({len(enc)} tokens) | {t:.2f} s | "
            f"{t / (cells * one):.2f} HF forwards per cell (HF: {one * 1e3:.1f} ms) | - "
            f"| {peak} |"
        )
    lines += [
        "",
        f"max |ours − HF| pooled reward, both bf16, first batch ({2 * n} sequences): "
        f"{err:.1e} (rewards up to {float(ref.abs().max()):.2f}).",
    ]
    return lines


SECTIONS = {"parity": parity, "forward": forward, "patching": patching, "real": real}


def header(args) -> list[str]:
    dev = torch.device(args.device)
    name = torch.cuda.get_device_name() if dev.type == "cuda" else "CPU (no GPU)"
    versions = ", ".join(
        f"{pkg} {version(pkg)}" for pkg in ("torch", "transformers", "transformer-lens")
    )
    return [
        f"Device: {name}; {versions}; CUDA {torch.version.cuda}; "
        f"TF32 matmul {'on' if torch.backends.cuda.matmul.allow_tf32 else 'off'}; "
        f"{datetime.date.today().isoformat()}.",
        "",
    ]


def main(argv=None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="also write the markdown to this file")
    parser.add_argument("--sections", nargs="+", choices=list(SECTIONS), default=list(SECTIONS))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--repeats", type=int, default=20, help="rounds of the forward section")
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 1024, 4096])
    parser.add_argument("--forward-dtypes", nargs="+", default=["fp32", "bf16"])
    parser.add_argument("--batch", type=int, default=2, help="forward batch (T, 3T/4, T, ...)")
    parser.add_argument("--n-ctx", type=int, help="the forward model's context (default: T max)")
    parser.add_argument("--patch-tokens", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--patch-repeats", type=int, default=3)
    parser.add_argument("--tl-full-cells", type=int, default=1000, help="TL's whole grid up to")
    parser.add_argument("--tl-stride", type=int, default=8, help="TL's positions above that")
    parser.add_argument("--big-chunk", type=int, default=64)
    parser.add_argument("--pairs", type=int, default=64, help="pairs of the real-size section")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--real-repeats", type=int, default=3)
    parser.add_argument("--families", nargs="+", default=FAMILIES)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (a quick check)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.repeats, args.lengths, args.patch_tokens, args.patch_repeats = 2, [32, 64], [16, 24], 1
        args.pairs, args.batch_size, args.real_repeats = 4, 2, 1
        args.families, args.big_chunk, args.tl_full_cells = ["llama", "armorm"], 8, 100
    if torch.device(args.device).type == "cpu":
        torch.set_num_threads(1)
    torch.backends.cuda.matmul.allow_tf32 = False
    lines = header(args)
    print("\n".join(lines), flush=True)
    for name in args.sections:
        t0 = time.perf_counter()
        try:
            part = SECTIONS[name](args)
        except Exception:  # report and go on with the other sections
            part = [f"### {name}: FAILED", "", "```", traceback.format_exc().rstrip(), "```"]
        part += ["", f"({name}: {time.perf_counter() - t0:.0f} s)", ""]
        lines += part
        print("\n".join(part), flush=True)
        if args.out:
            args.out.write_text("\n".join(lines))
        gc.collect()
        if torch.device(args.device).type == "cuda":
            torch.cuda.empty_cache()
    return "\n".join(lines)


if __name__ == "__main__":
    main()
