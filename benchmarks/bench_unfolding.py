"""The reward as the response unfolds: one cached pass against one forward and the naive way.

`reward_unfolding` scores every prefix `prompt + response[:t] + closing tokens` (t = 0..T) from
one cached pass over the conversation plus one batch of closing tokens. Variants, timed as
interleaved medians in one process (1 thread):

- `forward`: `model.rewards` of the whole conversation (the unit);
- `unfolding`: `reward_unfolding(..., attribution=False)`;
- `unfolding + attribution`: `reward_unfolding(...)` (adds `token_attribution`'s cached forward);
- `naive`: every prefix scored as a full sequence in one padded batch (`method="naive"`; timed
  once on the Llama model, where it takes about a minute).

Models: the zoo scalar RM (3 layers, d64; closing tokens `<|end|> <eos>`) at response lengths 4,
12 and 48 words after a 7-word prompt, and a random Llama-shaped RM (8 layers, d512,
`bench_peers.py`'s) at 256 tokens (a 32-token prompt, 224 response tokens, EOS closing). Target
(issue 40): within 2× one forward. The work is `R + S·(T + 1)` token-layers against `R + S`
(`R` the prompt and response, `S` the closing tokens), so with `S = 2` and a long response the
pass is near 3 forwards of matrix products, with `S = 1` near 2.
Usage: python benchmarks/bench_unfolding.py [--repeats R] [--quick]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from bench_peers import build as build_llama  # noqa: E402
from timing import interleaved_median  # noqa: E402

from reward_lens_tl import HookedRewardModel  # noqa: E402
from reward_lens_tl.inputs import EncodedConversation  # noqa: E402
from reward_lens_tl.unfolding import reward_unfolding  # noqa: E402
from reward_lens_tl.zoo import zoo_path  # noqa: E402

FILLER = ("the", "oven", "flour", "very", "some", "bread", "soup", "and")


def zoo_case(model, words: int) -> EncodedConversation:
    response = " ".join(FILLER[i % len(FILLER)] for i in range(words))
    return model.encode("explain how to bake bread in a warm oven", response)


def llama_case(length: int = 256, prompt: int = 32) -> EncodedConversation:
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(10, 32000, (length - 1,), generator=gen).tolist()
    return EncodedConversation(ids=(*ids, 2), response_start=prompt, response_end=length - 1)


def time_case(
    model, enc: EncodedConversation, repeats: int, batch_size: int, naive_repeats: int
) -> dict[str, float]:
    ids = torch.tensor([enc.ids])
    curve = reward_unfolding(model, enc, attribution=False, batch_size=batch_size)
    naive = reward_unfolding(model, enc, attribution=False, method="naive", batch_size=10**6)
    error = float((curve.prefix_rewards - naive.prefix_rewards).abs().max())
    if not error <= 1e-3:
        raise SystemExit(f"cached and naive curves differ by {error:.2e}")
    slow = {
        "naive": lambda: reward_unfolding(
            model, enc, attribution=False, method="naive", batch_size=10**6
        )
    }
    naive_time, _ = interleaved_median(slow, repeats=naive_repeats, warmup=0)
    fns = {
        "forward": lambda: model.rewards(ids),
        "unfolding": lambda: reward_unfolding(model, enc, attribution=False, batch_size=batch_size),
        "unfolding + attribution": lambda: reward_unfolding(model, enc, batch_size=batch_size),
    }
    median, _ = interleaved_median(fns, repeats=repeats)
    return {**median, **naive_time, "error": error}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="the zoo cases only")
    parser.add_argument("--batch-size", type=int, default=256, help="prefixes per batch")
    args = parser.parse_args()
    torch.set_num_threads(1)
    lines = [
        "| model | tokens (prompt+response+closing) | forward | unfolding | "
        "+ attribution | naive | unfolding / forward | + attribution / forward | "
        "naive / unfolding | max |cached − naive| |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    cases: list[tuple[str, HookedRewardModel, EncodedConversation, int]] = []
    zoo = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    for words in (4, 12, 48):
        cases.append(("zoo scalar", zoo, zoo_case(zoo, words), args.repeats))
    if not args.quick:
        _, llama = build_llama()
        cases.append(("Llama 8L d512", llama, llama_case(), 1))  # naive: ~1 min a run
    for name, model, enc, naive_repeats in cases:
        t = time_case(model, enc, args.repeats, args.batch_size, naive_repeats)
        p, e = enc.response_start, enc.suffix_start(model.eos_token_id)
        shape = f"{p}+{e - p}+{len(enc) - e}"
        lines.append(
            f"| {name} | {shape} | {t['forward'] * 1e3:.2f} ms | {t['unfolding'] * 1e3:.2f} ms | "
            f"{t['unfolding + attribution'] * 1e3:.2f} ms | {t['naive'] * 1e3:.2f} ms | "
            f"{t['unfolding'] / t['forward']:.2f}× | "
            f"{t['unfolding + attribution'] / t['forward']:.2f}× | "
            f"{t['naive'] / t['unfolding']:.2f}× | {t['error']:.1e} |"
        )
        print(lines[-1], flush=True)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print("\n".join(lines) + f"\n\nbatch_size {args.batch_size}; load average {load}")


if __name__ == "__main__":
    main()
