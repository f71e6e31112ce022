"""SAE training throughput and the cost of feature attribution against a plain forward.

1. Training: sae_lens ``TopKTrainingSAE`` + ``SAETrainer`` through ``train_topk_sae`` on
   random activations, activations per second, for a zoo-sized SAE (d_in 64, 256 latents,
   k 8; ``--steps`` steps) and a larger one (d_in 512, 4096 latents, k 32; a fifth of them).
2. Attribution: the 6-layer d512 Llama-style model of bench_forward.py, random pairs of
   64–128 tokens in chunks of 8 pairs, a 4096-latent TopK SAE. Per pair, against plain
   pooled-reward forwards of the same batches: direct feature attribution on the final
   residual (one spliced forward with cache), attribution patching over the latents of a
   middle-layer SAE (one forward + one backward), and the spliced forward alone.

Usage: python benchmarks/bench_sae.py [--threads N] [--pairs P] [--steps S]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from bench_attribution import random_pairs  # noqa: E402
from bench_forward import build  # noqa: E402

from reward_lens_tl.pair_batches import pair_batches  # noqa: E402
from reward_lens_tl.sae import (  # noqa: E402
    pair_feature_attribution,
    spliced,
    train_topk_sae,
)
from reward_lens_tl.sae.testing import random_topk_sae  # noqa: E402


def training_rows(steps: int) -> list[str]:
    rows = []
    for d_in, d_sae, k, batch, n in ((64, 256, 8, 256, steps), (512, 4096, 32, 1024, steps // 5)):
        acts = torch.randn(max(8 * batch, 8192), d_in)
        train_topk_sae(acts, "x", d_sae=d_sae, k=k, steps=3, batch_size=batch)  # warm-up
        trained = train_topk_sae(acts, "x", d_sae=d_sae, k=k, steps=n, batch_size=batch)
        rows.append(
            f"| d_in {d_in}, {d_sae} latents, k {k}, batch {batch} | {trained.steps} | "
            f"{trained.seconds:.2f} | {trained.samples_per_second:,.0f} |"
        )
    return rows


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def attribution_rows(n_pairs: int) -> tuple[list[str], float]:
    _, model = build()
    last = model.cfg.n_layers - 1
    final_sae = random_topk_sae(model, f"blocks.{last}.hook_resid_post", d_sae=4096, k=32)
    mid_sae = random_topk_sae(model, f"blocks.{last // 2}.hook_resid_post", d_sae=4096, k=32)
    pairs = random_pairs(n_pairs)

    def plain():
        with torch.no_grad():
            for ids, mask, _ in pair_batches(model, pairs, 8):
                model.rewards(ids, mask)

    def spliced_forward():
        with torch.no_grad(), spliced(model, final_sae):
            for ids, mask, _ in pair_batches(model, pairs, 8):
                model.rewards(ids, mask)

    plain()  # warm-up
    base = min(timed(plain), timed(plain))
    cells = {
        "SAE spliced in (error term), forward only": timed(spliced_forward),
        "direct feature attribution (final residual)": timed(
            lambda: pair_feature_attribution(model, final_sae, pairs, batch_size=8)
        ),
        f"attribution patching over latents (blocks.{last // 2})": timed(
            lambda: pair_feature_attribution(model, mid_sae, pairs, batch_size=8)
        ),
    }
    base = min(base, timed(plain))
    margin = pair_feature_attribution(model, final_sae, pairs[:8], batch_size=8).margin
    rows = [f"| plain pooled forward (baseline) | {1e3 * base / n_pairs:.1f} | 1.00 |"]
    rows += [f"| {name} | {1e3 * t / n_pairs:.1f} | {t / base:.2f} |" for name, t in cells.items()]
    return rows, margin.completeness_error()


def main(argv=None) -> str:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--pairs", type=int, default=32)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    train = training_rows(args.steps)
    attr, completeness = attribution_rows(args.pairs)
    text = "\n".join(
        [
            f"## SAE training throughput (sae_lens SAETrainer, {args.threads} thread(s))",
            "",
            "| SAE | steps | time (s) | activations / s |",
            "|---|---|---|---|",
            *train,
            "",
            f"## Feature attribution per pair ({args.pairs} pairs, 6L d512, 64–128 tokens, "
            f"chunks of 8 pairs, 4096-latent TopK SAE, {args.threads} thread(s))",
            "",
            "| analysis | ms per pair | forward-equivalents |",
            "|---|---|---|",
            *attr,
            "",
            f"completeness error of the final-residual margin attribution: {completeness:.1e}",
            "",
        ]
    )
    print(text)
    return text


if __name__ == "__main__":
    main()
