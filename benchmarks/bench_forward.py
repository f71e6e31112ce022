"""Pooled-reward forward and residual caching of the converted model against HF's forward.

Model: Llama-style sequence classifier, 6 layers, d_model 512, 8 heads, batch 8 × 128 tokens,
float32, CPU. Targets (issue 2): forward ≤ 1.15× HF; run_with_cache(resid names) ≤ 1.3× HF.
Usage: python benchmarks/bench_forward.py [--threads N] [--repeats R]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import transformers

sys.path.insert(0, str(Path(__file__).parent))
from timing import interleaved_min, report  # noqa: E402

from reward_lens_tl import HookedRewardModel  # noqa: E402
from reward_lens_tl.testing import perturb_, random_batch  # noqa: E402


def build(n_ctx: int = 512, tokenizer=None):
    """``(hf, converted)``: the benchmark's 6L d512 Llama-style classifier (random weights)."""
    cfg = transformers.LlamaConfig(
        vocab_size=2000,
        hidden_size=512,
        intermediate_size=1376,
        num_hidden_layers=6,
        num_attention_heads=8,
        num_key_value_heads=8,
        max_position_embeddings=n_ctx,
        pad_token_id=0,
        num_labels=1,
    )
    torch.manual_seed(0)
    hf = perturb_(transformers.LlamaForSequenceClassification(cfg), scale=0.01).eval()
    return hf, HookedRewardModel.from_pretrained(hf, tokenizer)


def main(argv=None) -> str:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    hf, model = build()
    ids, mask = random_batch(8, [128, 120, 128, 100, 128, 90, 128, 128], vocab=2000, seed=0)
    resid_names = lambda name: name.endswith("hook_resid_post")  # noqa: E731
    positions = (mask.cumsum(-1) - 1).clamp(min=0)  # left padded: HF needs the positions
    with torch.no_grad():
        err = float(
            (
                model.rewards(ids, mask)
                - hf(input_ids=ids, attention_mask=mask, position_ids=positions).logits[:, 0]
            )
            .abs()
            .max()
        )
        best = interleaved_min(
            {
                "HF forward": lambda: hf(
                    input_ids=ids, attention_mask=mask, position_ids=positions
                ),
                "HookedRewardModel.rewards": lambda: model.rewards(ids, mask),
                "run_with_cache(resid_post)": lambda: model.run_with_cache(
                    ids, attention_mask=mask, return_type="reward", names_filter=resid_names
                ),
            },
            repeats=args.repeats,
        )
    text = (
        report(
            f"Pooled-reward forward (6L d512, batch 8 × 128, fp32, {args.threads} thread(s))",
            best,
            "HF forward",
        )
        + f"\n\nmax |TL − HF| on this batch: {err:.2e}\n"
    )
    print(text)
    return text


if __name__ == "__main__":
    main()
