"""The ``reward-lens`` command line.

``reward-lens demo`` runs the main job on the shipped zoo model; ``reward-lens score`` scores a
pair file with a local checkpoint; ``reward-lens info`` describes a checkpoint's conversion;
``reward-lens zoo train`` regenerates the model zoo; ``reward-lens eval`` computes benchmark metrics
from a score file or a model (:mod:`reward_lens_tl.evals.cli`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .evals.cli import add_eval_parser

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _demo(args) -> int:
    import torch

    from .demo import run_demo

    torch.set_num_threads(1)  # the zoo model is tiny: one thread is fastest (and robust)
    run_demo(model_dir=args.model, out_dir=Path(args.out))
    return 0


def _score(args) -> int:
    from .data import load_pairs
    from .model import HookedRewardModel
    from .scoring import score_pairs

    model = HookedRewardModel.from_pretrained(args.model)
    pairs = load_pairs(args.pairs, format=args.format, limit=args.limit, skip_bad=args.skip_bad)
    scores = score_pairs(
        model, pairs, batch_size=args.batch_size, truncation=args.truncation, progress=True
    )
    frame = scores.to_dataframe()
    if args.csv:
        frame.to_csv(args.csv, index=False)
    print(frame.describe().to_string())
    print(f"\naccuracy (chosen > rejected): {scores.accuracy:.4f} over {len(frame)} pairs")
    return 0


def _info(args) -> int:
    from .model import HookedRewardModel

    model = HookedRewardModel.from_pretrained(args.model)
    cfg = model.cfg
    print(f"adapter:        {model.adapter.describe()}")
    print(
        f"layers × d:     {cfg.n_layers} × {cfg.d_model} ({cfg.n_heads} heads, d_head "
        f"{cfg.d_head}, kv heads {cfg.n_key_value_heads or cfg.n_heads})"
    )
    print(f"context:        {cfg.n_ctx}   vocabulary: {cfg.d_vocab}")
    print(f"objectives:     {', '.join(model.objective_names)}")
    print(f"pad token id:   {model.pad_token_id}")
    print(f"tokenizer:      {'yes' if model.tokenizer is not None else 'none'}")
    return 0


def _zoo_train(args) -> int:
    from .zoo import train_zoo

    result = train_zoo(Path(args.out), seed=args.seed, which=tuple(args.which), fast=args.fast)
    for name, meta in result.items():
        print(f"{name}: {meta}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="reward-lens", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="run the main job on the shipped zoo model")
    demo.add_argument("--model", default=None, help="local checkpoint (default: zoo scalar)")
    demo.add_argument("--out", default="reports/demo", help="output directory")
    demo.set_defaults(func=_demo)

    score = sub.add_parser("score", help="score a preference-pair file with a local checkpoint")
    score.add_argument("model")
    score.add_argument("pairs")
    score.add_argument("--format", default=None)
    score.add_argument("--limit", type=int, default=None)
    score.add_argument("--batch-size", type=int, default=16)
    score.add_argument("--truncation", choices=["error", "left", "right"], default="error")
    score.add_argument("--skip-bad", action="store_true")
    score.add_argument("--csv", default=None)
    score.set_defaults(func=_score)

    info = sub.add_parser("info", help="describe how a checkpoint converts")
    info.add_argument("model")
    info.set_defaults(func=_info)

    add_eval_parser(sub)

    zoo = sub.add_parser("zoo", help="the planted-mechanism model zoo")
    zoo_sub = zoo.add_subparsers(dest="zoo_command", required=True)
    train = zoo_sub.add_parser("train", help="regenerate the zoo models")
    train.add_argument("--out", default="zoo_models")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--which", nargs="+", default=["scalar", "multi", "policy"])
    train.add_argument("--fast", action="store_true", help="tiny-step config (for smoke tests)")
    train.set_defaults(func=_zoo_train)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
