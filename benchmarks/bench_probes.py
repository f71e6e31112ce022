"""The probe suite's cost against plain pooled-reward forwards of the same sequences.

Model: the 6-layer d512 Llama-style reward model of bench_forward.py; N random conversations of
64–128 tokens (response = second half), 4 token-id probes. ``run_probes(..., inside=True)``
(outside view + reward lens + exact attribution of every delta + bootstrap CIs) is timed against
``model.rewards`` on exactly the sequences it forwards (originals once, each perturbed once),
batched alike. Target (issue 11): ≤ 2.5 forward-equivalents per example per probe.
Usage: python benchmarks/bench_probes.py [--threads N] [--examples N]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from bench_forward import build  # noqa: E402

from reward_lens_tl.inputs import EncodedConversation, pad_batch  # noqa: E402
from reward_lens_tl.probes import Probe, run_probes  # noqa: E402
from reward_lens_tl.probes.runner import apply_probe, as_items  # noqa: E402


def conversations(n: int, seed: int = 0) -> list[EncodedConversation]:
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        k = int(torch.randint(64, 121, (1,), generator=gen))
        ids = tuple(torch.randint(3, 2000, (k,), generator=gen).tolist())
        out.append(EncodedConversation(ids, k // 2, k))
    return out


def probes() -> list[Probe]:
    def swap_last(conv):
        return conv.with_response(conv.response[:-1] + ((conv.response[-1] + 1) % 2000,))

    return [
        Probe.insert([11, 12, 13, 14], at="response_end", name="pad"),
        Probe.insert([21, 22], at="response_start", name="opener"),
        Probe("swap_last", swap_last, kind="invariance"),
        Probe.insert([31], at="response_end", name="one_token"),
    ]


def main(argv=None) -> str:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--examples", type=int, default=32)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    _, model = build()
    examples, ps = conversations(args.examples), probes()
    items = as_items(model, examples)
    edited = [
        apply_probe(model, p, it, random.Random(f"0:{p.name}:{i}"))
        for p in ps
        for i, it in enumerate(items)
    ]
    sequences = [it.enc for it in items] + edited

    def plain():
        with torch.no_grad():
            for start in range(0, len(sequences), 32):
                ids, mask = pad_batch(sequences[start : start + 32], model.pad_token_id)
                model.rewards(ids, mask)

    def timed(fn):
        t0 = time.perf_counter()
        out = fn()
        return time.perf_counter() - t0, out

    plain()  # warm-up
    t_plain, _ = timed(plain)
    t_inside, report = timed(lambda: run_probes(model, examples, ps, inside=True))
    t_outside, _ = timed(lambda: run_probes(model, examples, ps, inside=False))
    t_plain2, _ = timed(plain)
    base = min(t_plain, t_plain2) / len(sequences)  # seconds per plain forward of a sequence
    per = args.examples * len(ps)
    errors = max(c.completeness_error() for c in report.cascade.probes)
    text = "\n".join(
        [
            f"## Probe suite over {args.examples} examples × {len(ps)} probes (6L d512, 64–124 "
            f"tokens, {args.threads} thread(s))",
            "",
            "| run | time (s) | sequences forwarded | forward-equivalents per example per probe |",
            "|---|---|---|---|",
            f"| plain `model.rewards` of the same sequences (min of 2) | "
            f"{base * len(sequences):.2f} | {len(sequences)} | {len(sequences) / per:.2f} |",
            f"| `run_probes(inside=True)` | {t_inside:.2f} | {report.n_forward} | "
            f"{t_inside / base / per:.2f} |",
            f"| `run_probes(inside=False)` | {t_outside:.2f} | {report.n_forward} | "
            f"{t_outside / base / per:.2f} |",
            "",
            f"max completeness error of the delta attributions: {errors:.1e}",
            "",
        ]
    )
    print(text)
    return text


if __name__ == "__main__":
    main()
