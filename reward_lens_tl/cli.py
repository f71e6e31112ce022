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
    from .distributed import is_main_process
    from .model import HookedRewardModel
    from .scoring import score_pairs

    csv = _writable_file(args.csv) if args.csv else None  # fail before a long scoring run
    model = HookedRewardModel.from_pretrained(args.model)
    pairs = load_pairs(args.pairs, format=args.format, limit=args.limit, skip_bad=args.skip_bad)
    scores = score_pairs(
        model,
        pairs,
        batch_size=args.batch_size,
        truncation=args.truncation,
        progress=True,
        on_error=args.on_error,
    )
    if not is_main_process():  # under torchrun every rank has the result; rank 0 reports it
        return 0
    frame = scores.to_dataframe()
    if csv is not None:
        frame.to_csv(csv, index=False)
    print(frame.drop(columns=["index", "record"]).describe().to_string())
    print(f"\naccuracy (chosen > rejected): {scores.accuracy:.4f} over {len(frame)} pairs")
    if scores.skipped:
        print(f"skipped {len(scores.skipped)} pair(s) that could not be scored:")
        for skip in scores.skipped[:20]:
            print(f"  {skip}")
        if len(scores.skipped) > 20:
            print(f"  … and {len(scores.skipped) - 20} more")
    return 0


def _writable_file(path: str) -> Path:
    """``path`` if a file can be written there (its folder exists and is writable)."""
    from .errors import InvalidArgumentError

    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if target.is_dir() or not folder.is_dir() or not os.access(folder, os.W_OK):
        raise InvalidArgumentError(
            f"cannot write {path}: its folder does not exist or is not writable (or it is a folder)"
        )
    return target


def _info(args) -> int:
    from .checkpoint_info import describe_files

    for key, value in describe_files(args.model).items():
        print(f"{key + ':':16}{value}", flush=True)
    if args.no_parity:
        return 0
    from .loading import convert_hf_model, verify_parity
    from .model import HookedRewardModel

    model = HookedRewardModel.from_pretrained(args.model)
    hf = convert_hf_model(args.model).hf_model
    err = verify_parity(model, hf, model.adapter)
    print(f"{'adapter:':16}{model.adapter.describe()}")
    print(f"{'parity:':16}max |converted − HF| = {err:.2e} on random tokens (float32, ≤ 1e-3 ok)")
    return 0


def _report(args) -> int:
    import torch

    from .distributed import is_main_process
    from .report import build_report

    torch.set_num_threads(args.threads)
    numbers = build_report(
        args.model,
        args.pairs,
        args.out,
        limit=args.limit,
        seed=args.seed,
        resume=args.resume,
        format=args.format,
        truncation=args.truncation,
    )
    if not is_main_process():  # under torchrun rank 0 wrote the page and reports it
        return 0
    print(
        f"report written to {Path(args.out) / 'report.html'}: accuracy {numbers['accuracy']:.1%} "
        f"over {numbers['n_scored']} pairs ({numbers['n_skipped']} skipped)"
    )
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

    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    demo = sub.add_parser("demo", help="run the main job on the shipped zoo model")
    demo.add_argument("--model", default=None, help="local checkpoint (default: zoo scalar)")
    demo.add_argument("--out", default="reports/demo", help="output directory")
    demo.set_defaults(func=_demo)

    score = sub.add_parser("score", help="score a preference-pair file with a local checkpoint")
    score.add_argument("model", help="local checkpoint directory (config.json + safetensors)")
    score.add_argument("pairs", help="pair file: HH-RLHF, LLMBar, RM-Bench, RewardBench jsonl, …")
    score.add_argument("--format", default=None, help="the file's format (default: guessed)")
    score.add_argument("--limit", type=int, default=None, help="score at most this many pairs")
    score.add_argument("--batch-size", type=int, default=16, help="pairs per forward pass")
    score.add_argument(
        "--truncation",
        choices=["error", "left", "right"],
        default="error",
        help="a conversation longer than the context: error, drop the oldest prompt content "
        "(left) or the end of the response (right); template markers are always kept",
    )
    score.add_argument(
        "--on-error",
        choices=["raise", "skip"],
        default="raise",
        help="a pair that cannot be scored (e.g. too long): stop (raise) or skip and report it",
    )
    score.add_argument(
        "--skip-bad", action="store_true", help="skip malformed records of the file, with a count"
    )
    score.add_argument(
        "--csv", default=None, help="write per-pair scores here (with the input record index)"
    )
    score.set_defaults(func=_score)

    info = sub.add_parser(
        "info", help="describe a checkpoint (template, padding, pooling, context) and check parity"
    )
    info.add_argument("model", help="local checkpoint directory")
    info.add_argument("--no-parity", action="store_true", help="only read the files; load nothing")
    info.set_defaults(func=_info)

    report = sub.add_parser(
        "report", help="one self-contained HTML page: scores, lens, components, patching, tokens"
    )
    report.add_argument("model", help="local checkpoint directory")
    report.add_argument("pairs", help="pair file (any format `score` reads)")
    report.add_argument("--out", default="reports/report", help="output directory")
    report.add_argument(
        "--limit", type=int, default=None, help="a seeded sample of this many pairs"
    )
    report.add_argument("--seed", type=int, default=0, help="seed of the --limit sample")
    report.add_argument(
        "--resume", action="store_true", help="continue an interrupted run (same arguments)"
    )
    report.add_argument("--format", default=None, help="the pair file's format (default: guessed)")
    report.add_argument(
        "--truncation",
        choices=["error", "left", "right"],
        default="left",
        help="conversations longer than the context: drop the oldest prompt content (left), "
        "the end of the response (right), or skip the pair (error)",
    )
    report.add_argument("--threads", type=int, default=1, help="torch threads")
    report.set_defaults(func=_report)
    from .sweep.cli import add_arguments as add_sweep_arguments

    add_sweep_arguments(sub)  # `sweep` and `sweep-stats`
    add_eval_parser(sub)

    zoo = sub.add_parser("zoo", help="the planted-mechanism model zoo")
    zoo_sub = zoo.add_subparsers(dest="zoo_command", required=True)
    train = zoo_sub.add_parser("train", help="regenerate the zoo models")
    train.add_argument("--out", default="zoo_models", help="output directory")
    train.add_argument("--seed", type=int, default=0, help="training seed")
    train.add_argument(
        "--which", nargs="+", default=["scalar", "multi", "policy"], help="models to train"
    )
    train.add_argument("--fast", action="store_true", help="tiny-step config (for smoke tests)")
    train.set_defaults(func=_zoo_train)
    _add_debug_flag(sub)
    return parser


def _add_debug_flag(sub: argparse._SubParsersAction) -> None:
    """``--debug`` after any subcommand too (``reward-lens score … --debug``)."""
    for child in set(sub.choices.values()):
        if "--debug" not in child._option_string_actions:
            child.add_argument(
                "--debug",
                action="store_true",
                default=argparse.SUPPRESS,
                help="show the full traceback of an error",
            )
        for action in child._actions:
            if isinstance(action, argparse._SubParsersAction):
                _add_debug_flag(action)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.debug:
        return args.func(args)
    from .errors import RewardLensError

    try:
        return args.func(args)
    except (RewardLensError, OSError) as err:
        print(f"reward-lens: error: {type(err).__name__}: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("reward-lens: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
