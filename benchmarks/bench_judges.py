"""Judges and PRMs: one forward per verdict, one forward for every step of a solution.

Counts the forward passes (a hook on ``hook_embed``) of ``judge.score`` and
``prm.step_rewards``, then times, interleaved on 1 thread (``--repeats`` rounds, median):

- ``prm.step_rewards(prompt, steps)`` (one forward over the whole solution) against the loop a
  PRM wrapper without positions does: one forward per step over the solution's prefix up to that
  step's tag (same scores; checked);
- ``judge.score(prompt, response)`` against HF's own ``model(ids).logits`` of the same ids.

Models: a Llama causal LM of ``--layers`` layers and width ``--d-model`` (random weights), the
test tokenizer; a solution of ``--steps`` steps of ``--step-tokens`` words. Prints a markdown
table for RESULTS.md.

    python benchmarks/bench_judges.py --steps 12
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
import transformers

from reward_lens_tl.judges import HookedJudge, HookedPRM
from reward_lens_tl.testing import perturb_, tiny_tokenizer


def build(d_model: int, layers: int):
    config = transformers.LlamaConfig(
        vocab_size=97, hidden_size=d_model, intermediate_size=4 * d_model,
        num_hidden_layers=layers, num_attention_heads=8, num_key_value_heads=4,
        max_position_embeddings=2048, pad_token_id=0, bos_token_id=1, eos_token_id=2,
    )  # fmt: skip
    torch.manual_seed(0)
    return perturb_(transformers.LlamaForCausalLM(config)).eval(), tiny_tokenizer()


def count_forwards(model, fn) -> int:
    calls = []
    handle = model.hook_embed.register_forward_hook(lambda *a: calls.append(1))
    try:
        fn()
    finally:
        handle.remove()
    return len(calls)


def per_step_loop(prm: HookedPRM, prompt: str, steps: list[str]) -> torch.Tensor:
    """One forward per step: the prefix up to each step's tag, read at its last token."""
    out = []
    for k in range(1, len(steps) + 1):
        enc = prm.encode_steps(prompt, steps[:k])
        out.append(prm.rewards(enc.ids, enc.attention_mask)[0, -1])
    return torch.stack(out)


def timed(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--step-tokens", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    hf, tok = build(args.d_model, args.layers)
    prm = HookedPRM.from_pretrained(hf, tokenizer=tok, step_tag="w40", labels=("w41", "w42"))
    judge = HookedJudge.from_pretrained(
        hf, tokenizer=tok, verdict=("w10", "w11"), template="{prompt} w8 {response} w9"
    )
    gen = torch.Generator().manual_seed(0)
    words = [
        f"w{int(i)}" for i in torch.randint(50, 96, (args.steps * args.step_tokens,), generator=gen)
    ]
    steps = [
        " ".join(words[i : i + args.step_tokens]) for i in range(0, len(words), args.step_tokens)
    ]
    prompt, response = "w12 w13 w14", " ".join(words[:40])
    n_prm = count_forwards(prm, lambda: prm.step_rewards(prompt, steps))
    n_judge = count_forwards(judge, lambda: judge.score(prompt, response))
    once, loop = prm.step_rewards(prompt, steps), per_step_loop(prm, prompt, steps)
    diff = float((once - loop).abs().max())
    ids = judge.item_ids(prompt, response)
    rounds = []
    for _ in range(args.repeats):  # interleaved
        rounds.append((
            timed(lambda: prm.step_rewards(prompt, steps), 1),
            timed(lambda: per_step_loop(prm, prompt, steps), 1),
            timed(lambda: judge.score(prompt, response), 1),
            timed(lambda: hf(input_ids=ids).logits, 1),
        ))  # fmt: skip
    t_once, t_loop, t_judge, t_hf = (statistics.median(r[i] for r in rounds) for i in range(4))
    n_tokens = prm.encode_steps(prompt, steps).ids.shape[1]
    load = os.getloadavg()[0]
    print(f"load average {load:.2f}; Llama d_model {args.d_model}, {args.layers} layers, "
          f"{args.steps} steps, {n_tokens} tokens; 1 thread, median of {args.repeats}")  # fmt: skip
    print("| what | forwards | seconds | ratio |")
    print("|---|---|---|---|")
    print(f"| `prm.step_rewards` (all steps) | {n_prm} | {t_once:.4f} | 1.00 |")
    print(f"| one forward per step (prefix loop) | {args.steps} | {t_loop:.4f} | "
          f"{t_loop / t_once:.2f} |")  # fmt: skip
    print(f"| `judge.score` | {n_judge} | {t_judge:.4f} | {t_judge / t_hf:.2f} × HF forward |")
    print(f"| HF `model(ids).logits` (same ids) | 1 | {t_hf:.4f} | 1.00 |")
    print(f"max |one forward − per-step loop| = {diff:.2e}")


if __name__ == "__main__":
    main()
