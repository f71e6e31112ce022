"""Token sweep: the KV-cached fast path against full-sequence scoring of the same candidates.

Model: random Llama-style reward model built from a config (6 layers, d_model 512, 8 heads,
d_mlp 1376, vocabulary 8,192), word-level tokenizer with a chat template; the prompt is 60 words
(63 prompt tokens with the template), the suffix one token (EOS). Both variants score the same
candidates in chunks of 64 through ``token_sweep`` (``method="exact"``: prompt + candidate +
suffix ids, one full forward per chunk; ``method="cached"``: the prompt once, its key/value
cache expanded over each chunk). Target (issue 12): ≥ 10× faster, values equal within 1e-4.
Usage: python benchmarks/bench_sweep.py [--threads N] [--repeats R] [--candidates N]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from timing import interleaved_min, report  # noqa: E402

from reward_lens_tl import HookedRewardModel  # noqa: E402
from reward_lens_tl.sweep import token_candidates, token_sweep  # noqa: E402
from reward_lens_tl.testing import tiny_reward_model, tiny_tokenizer  # noqa: E402

VOCAB = 8192
PROMPT = " ".join(f"w{100 + 37 * i % 8000}" for i in range(60))


def build() -> HookedRewardModel:
    hf = tiny_reward_model(
        "llama",
        vocab_size=VOCAB,
        hidden_size=512,
        intermediate_size=1376,
        num_hidden_layers=6,
        num_attention_heads=8,
        num_key_value_heads=8,
        head_dim=64,
        max_position_embeddings=256,
    )
    return HookedRewardModel.from_pretrained(hf, tokenizer=tiny_tokenizer(VOCAB))


def main(argv=None) -> str:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--candidates", type=int, default=128)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    model = build()
    cands = token_candidates(model, range(6, 6 + args.candidates))
    prefix_len = len(model.encode(PROMPT, "w7").prompt_ids())

    def sweep(method):
        return token_sweep(model, PROMPT, cands, method=method, chunk_size=64, progress=False)

    err = float((sweep("cached").scores - sweep("exact").scores).abs().max())
    best = interleaved_min(
        {
            "full-sequence scoring (exact)": lambda: sweep("exact"),
            "KV-cached": lambda: sweep("cached"),
        },
        repeats=args.repeats,
    )
    ratio = best["full-sequence scoring (exact)"] / best["KV-cached"]
    text = (
        report(
            f"Token sweep ({args.candidates} candidates, prompt {prefix_len} tokens, 6L d512, "
            f"vocab {VOCAB}, chunks of 64, fp32, {args.threads} thread(s), min of "
            f"{args.repeats} interleaved repeats)",
            best,
            "full-sequence scoring (exact)",
        )
        + f"\n\nspeed-up of the cached path: **{ratio:.1f}×**; max |cached − exact| = {err:.1e}\n"
    )
    print(text)
    return text


if __name__ == "__main__":
    main()
