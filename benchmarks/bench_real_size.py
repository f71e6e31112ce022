"""A real checkpoint's shape at full width on CPU: convert, score, lens, attribution, patching.

The model has Llama-3.2-1B's configuration (hidden 2048, 16 layers, 32 heads, 8 kv heads,
intermediate 8192, vocab 128256, llama3 rope scaling) with random weights generated locally:
the tensor names and shapes come from transformers' ``LlamaForSequenceClassification`` built on
the meta device, the values from ``torch.randn``; they are saved to a temporary directory as
safetensors (with a word-level tokenizer) and loaded through the normal path
(``HookedRewardModel.from_pretrained(path)``: safetensors checks, HF load, fold in float32,
cast). ``--dtype bfloat16`` (default) keeps conversion's peak memory near 13 GB on this shared
24 GB machine; float32 would need ~16 GB (HF model + float32 copy + converted model).

Measured (1 thread, short sequences of ~15-25 tokens): seconds per pair of ``score_pairs``,
``pair_lens``, ``attribute_pairs`` and a patching sweep, each against HF's forward of the same
batches in the same dtype (ratio), peak RSS during conversion and RSS afterwards.

Memory flatness (``--flat``): the same width with 1 layer (2,000 pairs through 16 layers does
not finish in reasonable time on this machine), float32: the RSS above the level before the
run, sampled every 10 ms, while scoring and attributing a *streamed* set (a generator) of 200
and of 2,000 pairs. Flat = the 2,000-pair peak is about the 200-pair peak.

Usage: python benchmarks/bench_real_size.py [--pairs 8] [--dtype bfloat16] [--flat] [--smoke]
"""

from __future__ import annotations

import argparse
import gc
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import torch
import transformers

sys.path.insert(0, str(Path(__file__).parent))

from reward_lens_tl import HookedRewardModel  # noqa: E402
from reward_lens_tl.attribution import attribute_pairs  # noqa: E402
from reward_lens_tl.lens import pair_lens  # noqa: E402
from reward_lens_tl.pairs import pair_batches  # noqa: E402
from reward_lens_tl.patching.activation import activation_patching  # noqa: E402
from reward_lens_tl.scoring import score_pairs  # noqa: E402
from reward_lens_tl.testing import tiny_tokenizer  # noqa: E402

VOCAB = 128256
GIB = 2**30


def llama_1b_config(n_layers: int = 16, **overrides) -> transformers.LlamaConfig:
    """Llama-3.2-1B's configuration (``overrides`` shrink it for a smoke run)."""
    width = dict(
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=n_layers,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=64,
    )
    return transformers.LlamaConfig(
        vocab_size=VOCAB,
        **{**width, **overrides},
        max_position_embeddings=131072,
        rope_theta=500000.0,
        rope_scaling=dict(
            rope_type="llama3",
            factor=32.0,
            low_freq_factor=1.0,
            high_freq_factor=4.0,
            original_max_position_embeddings=8192,
        ),
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        num_labels=1,
    )


def write_checkpoint(config, path: Path, dtype: torch.dtype) -> float:
    """Random weights of ``config``'s classifier saved as safetensors; returns GiB written."""
    from safetensors.torch import save_file

    with torch.device("meta"):
        shapes = {
            k: v.shape
            for k, v in transformers.LlamaForSequenceClassification(config).state_dict().items()
        }
    gen = torch.Generator().manual_seed(0)
    tensors = {}
    for name, shape in shapes.items():
        if "norm" in name:
            t = 1.0 + 0.1 * torch.randn(shape, generator=gen)
        else:
            t = 0.02 * torch.randn(shape, generator=gen)
        tensors[name] = t.to(dtype)
    config.torch_dtype = str(dtype).removeprefix("torch.")
    config.architectures = ["LlamaForSequenceClassification"]
    config.save_pretrained(path)
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    tiny_tokenizer(vocab_size=VOCAB).save_pretrained(path)
    return sum(t.numel() * t.element_size() for t in tensors.values()) / GIB


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
    batches = list(pair_batches(model, pairs, batch_size))

    def run():
        with torch.no_grad():
            for ids, mask, _ in batches:
                hf(input_ids=ids, attention_mask=mask)

    return timed(run)


SMOKE = dict(hidden_size=128, intermediate_size=256, num_attention_heads=4, num_key_value_heads=2)


def real_size(n_pairs: int, dtype: torch.dtype, batch_size: int = 4, smoke: bool = False) -> None:
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
        "attribute_pairs": lambda: attribute_pairs(model, pairs, batch_size=batch_size),
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
    config = llama_1b_config(1, **SMOKE, head_dim=32) if smoke else llama_1b_config(1)
    with tempfile.TemporaryDirectory() as tmp:
        write_checkpoint(config, Path(tmp), torch.float32)
        model = HookedRewardModel.from_pretrained(tmp)
    score_pairs(model, stream(8), batch_size=batch_size)  # warm-up
    print("| analysis | pairs | s/pair | peak RSS above start (GiB) |\n|---|---|---|---|")
    for name, fn in {"score_pairs": score_pairs, "attribute_pairs": attribute_pairs}.items():
        for n in sizes:
            with RssSampler() as rss:
                t = timed(lambda: fn(model, stream(n), batch_size=batch_size))  # noqa: B023
            print(f"| `{name}` | {n} | {t / n:.3f} | {rss.peak:.3f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=8, help="pairs per timed analysis")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--flat", action="store_true", help="only the memory-flatness run")
    parser.add_argument("--smoke", action="store_true", help="a narrow 2-layer model (quick)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.flat:
        return flatness((20, 60) if args.smoke else (200, 2000), smoke=args.smoke)
    real_size(args.pairs, getattr(torch, args.dtype), smoke=args.smoke)


if __name__ == "__main__":
    main()
