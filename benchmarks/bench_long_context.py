"""Long-context forward cost against HF's own (SDPA) forward, at 128 / 1,024 / 4,096 tokens.

Model: 6-layer d512 Llama-style sequence classifier (8 heads, d_head 64, MLP 1376), random
weights, built locally, converted with ``n_ctx=4096``; float32, CPU, 1 thread. Batch 2 per
length ``T``: one row of ``T`` tokens and one of ``3T/4`` (left padded, as the library pads, with
``attention_mask``; HF gets the matching ``position_ids``). Methods, interleaved round by round:

- ``HF forward``: ``LlamaForSequenceClassification`` with ``attn_implementation="sdpa"``;
- ``model.rewards``: the pooled reward (the SDPA attention path);
- ``run_with_cache``: ``return_type="reward"`` with ``names_filter`` = every layer's
  ``hook_resid_post``;
- ``TL attention path`` (``--tl-path``, up to 1,024 tokens): ``model.rewards`` with
  ``set_fast_attention(False)``, TransformerLens's explicit-pattern attention, for reference.

Reports each method's time relative to HF's in the same round: the median over rounds and
the spread (min–max). Target (issue 16): ≤ 1.2× HF at every length.
Usage: python benchmarks/bench_long_context.py [--lengths 128 1024 4096] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.testing import random_batch, tiny_reward_model

VOCAB = 2000


def build(n_ctx: int = 4096):
    hf = tiny_reward_model(
        "llama",
        hidden_size=512,
        num_hidden_layers=6,
        num_attention_heads=8,
        num_key_value_heads=8,
        head_dim=64,
        intermediate_size=1376,
        max_position_embeddings=n_ctx,
        vocab_size=VOCAB,
        attn_implementation="sdpa",
    )
    hf.config._attn_implementation = "sdpa"
    return hf, HookedRewardModel.from_pretrained(hf, n_ctx=n_ctx)


def methods(hf, model, ids, mask, tl_path: bool):
    resid = lambda name: name.endswith("hook_resid_post")  # noqa: E731
    positions = (mask.cumsum(-1) - 1).clamp(min=0)  # HF does not derive them from the mask

    def tl_rewards():
        model.set_fast_attention(False)
        try:
            return model.rewards(ids, mask)
        finally:
            model.set_fast_attention(True)

    fns = {
        "HF forward": lambda: hf(input_ids=ids, attention_mask=mask, position_ids=positions),
        "model.rewards": lambda: model.rewards(ids, mask),
        "run_with_cache (resid_post)": lambda: model.run_with_cache(
            ids, attention_mask=mask, return_type="reward", names_filter=resid
        ),
    }
    if tl_path:
        fns["TL attention path (rewards)"] = tl_rewards
    return fns


def time_rounds(fns, repeats: int) -> dict[str, list[float]]:
    """Seconds per round for each method (one warm-up call each, then interleaved rounds)."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


def summarise(length: int, times: dict[str, list[float]], err: float) -> list[str]:
    base = times["HF forward"]
    rows = []
    for name, ts in times.items():
        ratios = [t / b for t, b in zip(ts, base, strict=True)]
        rows.append(
            f"| {length} | {name} | {statistics.median(ts) * 1e3:.0f} | "
            f"**{statistics.median(ratios):.2f}×** | {min(ratios):.2f}–{max(ratios):.2f} | "
            f"{err:.1e} |"
        )
    return rows


def main(argv=None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 1024, 4096])
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds per length")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument(
        "--tl-path", type=int, default=1024, help="also time TL's path up to this length"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    hf, model = build(max(4096, *args.lengths))
    lines = [
        f"6L d512 Llama-style, batch 2 (T and 3T/4 tokens, left padded), fp32, "
        f"{args.threads} thread(s), {args.repeats} interleaved rounds, load average before: "
        f"{os.getloadavg()[0]:.1f}",
        "",
        "| tokens | method | median (ms) | ratio vs HF (median) | spread | rel. error vs HF |",
        "|---|---|---|---|---|---|",
    ]
    for length in args.lengths:
        ids, mask = random_batch(2, [length, 3 * length // 4], vocab=VOCAB, seed=length)
        with torch.no_grad():
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            ref = hf(input_ids=ids, attention_mask=mask, position_ids=positions).logits[:, 0]
            err = float((model.rewards(ids, mask) - ref).abs().max() / ref.abs().max())
            times = time_rounds(methods(hf, model, ids, mask, length <= args.tl_path), args.repeats)
        lines += summarise(length, times, err)
        print("\n".join(lines[-len(times) :]), flush=True)
    lines.append(f"\nload average after: {os.getloadavg()[0]:.1f}")
    text = "\n".join(lines)
    print(text)
    return text


if __name__ == "__main__":
    main()
