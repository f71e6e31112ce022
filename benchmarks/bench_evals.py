"""The evaluation harness against plain pooled-reward forwards of the same sequences.

Model: the 6-layer d512 Llama-style reward model of bench_forward.py with a word-level tokenizer.
Scoring: RewardMATH-style problems (1 correct + 9 wrong responses of 30–90 words) through
``score_items`` (writing its score file), against ``model.rewards`` on the same pre-encoded
sequences in batches of the same size; and the pairwise route (``score_pairs`` on the 9 pairs of
each problem) for comparison. Explanations: RewardBench-style pairs that the model fails, through
``failures().explain(model)`` (attribution with source positions + lens, plus the default
reference sample of successes), against plain forwards of the failures' own sequences.
Targets (issue 13): scoring ≤ 1.1 forward-equivalents per sequence, explanations ≤ 1.5 per
failure. Usage: python benchmarks/bench_evals.py [--threads N] [--problems N] [--pairs N]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from bench_forward import build  # noqa: E402
from timing import interleaved_min  # noqa: E402

from reward_lens_tl import HookedRewardModel  # noqa: E402
from reward_lens_tl.data import PreferencePair, RankedItem  # noqa: E402
from reward_lens_tl.evals.run import score_items  # noqa: E402
from reward_lens_tl.inputs import pad_batch  # noqa: E402
from reward_lens_tl.scoring import score_pairs  # noqa: E402
from reward_lens_tl.testing import tiny_tokenizer  # noqa: E402


def words(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(f"w{rng.randrange(6, 2000)}" for _ in range(rng.randint(lo, hi)))


def plain_forwards(model, texts, batch_size: int):
    encoded = [model.encode(p, r).ids for p, r in texts]

    def run():
        with torch.no_grad():
            for s in range(0, len(encoded), batch_size):
                ids, mask = pad_batch(encoded[s : s + batch_size], model.pad_token_id)
                model.rewards(ids, mask)

    return run


def main(argv=None) -> str:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--problems", type=int, default=16)
    parser.add_argument("--pairs", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    hf, _ = build()
    model = HookedRewardModel.from_pretrained(hf, tiny_tokenizer(2000))
    rng = random.Random(0)
    problems = [
        RankedItem(
            words(rng, 10, 20),
            words(rng, 30, 90),
            tuple(words(rng, 30, 90) for _ in range(9)),
            id=i,
        )
        for i in range(args.problems)
    ]
    texts = [(p.prompt, r) for p in problems for r in (p.correct, *p.wrong)]
    tmp = Path(tempfile.mkdtemp())

    def harness():
        score_items(model, problems, out=tmp / "s.jsonl", resume=False, progress=False)

    def pairwise():
        score_pairs(model, [q for p in problems for q in p.pairs()], batch_size=8)

    best = interleaved_min(
        {"plain": plain_forwards(model, texts, 16), "score_items": harness, "pairwise": pairwise},
        repeats=args.repeats,
    )
    lines = [
        "## Evaluation harness (issue 13) — `bench_evals.py`",
        "",
        f"6L d512 model, {args.threads} thread(s). Scoring {args.problems} RewardMATH-style "
        f"problems ({len(texts)} sequences of 30–90 words, batches of 16 sequences):",
        "",
        "| variant | min time (s) | forward-equivalents per sequence |",
        "|---|---|---|",
    ]
    for name in ("plain", "score_items", "pairwise"):
        lines.append(f"| {name} | {best[name]:.2f} | {best[name] / best['plain']:.3f} |")

    # explanations: pairs whose rejected response the model prefers
    pairs = [PreferencePair(words(rng, 10, 20), words(rng, 30, 90), words(rng, 30, 90))
             for _ in range(args.pairs)]  # fmt: skip
    result = score_items(model, pairs, progress=False)
    failures = result.failures()
    failed_texts = [(q.prompt, t) for q in failures.pairs() for t in (q.chosen, q.rejected)]
    explain_best = interleaved_min(
        {
            "plain": plain_forwards(model, failed_texts, 16),
            "explain": lambda: failures.explain(model),
            "explain (no reference)": lambda: failures.explain(model, reference=None),
        },
        repeats=args.repeats,
    )
    lines += [
        "",
        f"Explaining {len(failures)} failures of {len(pairs)} random pairs (chunks of 8 pairs; "
        "default reference = a quarter as many successes):",
        "",
        "| variant | min time (s) | forward-equivalents per failure |",
        "|---|---|---|",
    ]
    for name, t in explain_best.items():
        lines.append(f"| {name} | {t:.2f} | {t / explain_best['plain']:.3f} |")
    text = "\n".join(lines)
    print(text)
    return text


if __name__ == "__main__":
    main()
