"""Direct attribution over 100 pairs against plain pooled-reward forwards of the same batches.

Model: the 6-layer d512 Llama-style reward model of bench_forward.py; 100 random pairs of
64–128 tokens, chunks of 8 pairs (16 sequences). Target (issue 4): ≤ 1.5 forward-equivalents
per pair. Usage: python benchmarks/bench_attribution.py [--threads N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from bench_forward import build  # noqa: E402

from reward_lens_tl.attribution import pair_attribution  # noqa: E402
from reward_lens_tl.inputs import EncodedConversation  # noqa: E402
from reward_lens_tl.lens import pair_lens  # noqa: E402
from reward_lens_tl.pair_batches import pair_batches  # noqa: E402


def random_pairs(n: int, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        lengths = torch.randint(64, 129, (2,), generator=gen).tolist()
        out.append(
            tuple(
                EncodedConversation(
                    tuple(torch.randint(3, 2000, (k,), generator=gen).tolist()), k // 2
                )
                for k in lengths
            )
        )
    return out


def main(argv=None) -> str:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--pairs", type=int, default=100)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    _, model = build()
    pairs = random_pairs(args.pairs)

    def plain():
        with torch.no_grad():
            for ids, mask, _ in pair_batches(model, pairs, 8):
                model.rewards(ids, mask)

    def timed(fn):
        t0 = time.perf_counter()
        result = fn()
        return time.perf_counter() - t0, result

    plain()  # warm-up
    t_plain, _ = timed(plain)
    t_attr, attr = timed(lambda: pair_attribution(model, pairs, batch_size=8))
    t_heads_off, _ = timed(lambda: pair_attribution(model, pairs, batch_size=8, heads=False))
    t_lens, _ = timed(lambda: pair_lens(model, pairs, batch_size=8))
    t_plain2, _ = timed(plain)
    base = min(t_plain, t_plain2)
    margin = attr.margin
    text = "\n".join(
        [
            f"## Direct attribution over {args.pairs} pairs (6L d512, 64–128 tokens, chunks of 8 "
            f"pairs, {args.threads} thread(s))",
            "",
            "| analysis | time (s) | forward-equivalents per pair |",
            "|---|---|---|",
            f"| plain pooled forward (baseline, min of 2) | {base:.2f} | 1.00 |",
            f"| pair_attribution (heads + MLPs) | {t_attr:.2f} | {t_attr / base:.2f} |",
            f"| pair_attribution (heads=False) | {t_heads_off:.2f} | {t_heads_off / base:.2f} |",
            f"| pair_lens | {t_lens:.2f} | {t_lens / base:.2f} |",
            "",
            f"completeness error of the margin attribution: {margin.completeness_error():.1e}",
            "",
        ]
    )
    print(text)
    return text


if __name__ == "__main__":
    main()
