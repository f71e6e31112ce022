"""``reward-lens eval BENCHMARK``: metrics from a score file, or from a model scoring a data file.

::

    reward-lens eval rewardmath --scores results/ArmoRM_scores.json --format json
    reward-lens eval rewardmath MODEL_DIR RewardMATH_direct.json --out scores.jsonl
    reward-lens eval rewardbench --scores scores.jsonl --data pairs.jsonl --format table
    reward-lens eval rmbench MODEL_DIR rmbench/ --out rm.jsonl --explain 5

With ``--format json`` one JSON object is printed: ``{"n": <items>, <figure>: <percent>, ...,
"skipped": <bad records skipped>, "missing": <data items without a score>}`` (RewardMATH:
``accuracy``, ``mrr``, ``accuracy_with_ties``), plus ``"ci"`` with each figure's interval. Errors
print one line on stderr and exit with status 2.
"""

from __future__ import annotations

import json
import sys

from reward_lens_tl.evals.scores import BENCHMARKS


def add_eval_parser(sub) -> None:
    """Add the ``eval`` subcommand to the CLI's subparsers."""
    p = sub.add_parser(
        "eval",
        help="benchmark metrics (RewardBench, RewardMATH, RM-Bench) from scores or a model",
        description=__doc__.splitlines()[0],
    )
    p.add_argument("benchmark", choices=BENCHMARKS, help="which benchmark's protocol to apply")
    p.add_argument("model", nargs="?", help="local checkpoint directory to score DATA with")
    p.add_argument("data", nargs="?", help="the benchmark's data file (or folder) to score")
    p.add_argument("--scores", help="read per-item scores from this file instead of a model")
    p.add_argument("--data", dest="data_opt", help="data file matching --scores (for --explain)")
    p.add_argument("--out", help="score file to write while scoring (a rerun resumes it)")
    p.add_argument("--format", choices=["json", "table"], default="table", help="output style")
    p.add_argument("--batch-size", type=int, default=16, help="sequences per forward pass")
    p.add_argument("--limit", type=int, default=None, help="score only the first N data items")
    p.add_argument("--skip-bad", action="store_true", help="skip malformed records (counted)")
    p.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples for the CIs")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument(
        "--explain", type=int, default=0, metavar="K", help="explain the failures (needs a model)"
    )
    p.add_argument(
        "--truncation",
        choices=["error", "left", "right"],
        default="error",
        help="what to do with conversations longer than the model's context",
    )
    p.set_defaults(func=run_eval_command)


def _load_items(benchmark: str, path: str, skip_bad: bool, limit: int | None):
    from reward_lens_tl.data import load_pairs, load_rewardmath, load_rmbench

    if benchmark == "rewardmath":
        return load_rewardmath(path, skip_bad=skip_bad, limit=limit)
    if benchmark == "rmbench":
        return load_rmbench(path, skip_bad=skip_bad, limit=limit)
    return load_pairs(path, skip_bad=skip_bad, limit=limit)


def _evaluate(args):
    from reward_lens_tl.evals.results import EvalResult
    from reward_lens_tl.evals.run import align_scores, score_items
    from reward_lens_tl.evals.scores import read_scores

    if args.scores:
        if args.model:
            raise ValueError("give either --scores FILE or MODEL_DIR DATA, not both")
        scores = read_scores(args.scores, benchmark=args.benchmark, skip_bad=args.skip_bad)
        if args.data_opt:
            items = _load_items(args.benchmark, args.data_opt, args.skip_bad, args.limit)
            return align_scores(scores, items), None
        return EvalResult(args.benchmark, scores), None
    if not (args.model and args.data):
        raise ValueError("give --scores FILE, or MODEL_DIR and a DATA file to score")
    from reward_lens_tl.model import HookedRewardModel

    model = HookedRewardModel.from_pretrained(args.model)
    items = _load_items(args.benchmark, args.data, args.skip_bad, args.limit)
    result = score_items(
        model, items, out=args.out, batch_size=args.batch_size, truncation=args.truncation
    )
    return result, model


def _print(result, args) -> None:
    metrics = result.metrics(n_boot=args.n_boot, seed=args.seed)
    summary = result.summary(n_boot=0)
    if args.format == "json":
        summary["ci"] = {
            name: [round(lo, 4), round(hi, 4)]
            for name, lo, hi in zip(metrics.names, metrics.low, metrics.high, strict=True)
        }
        print(json.dumps(summary))
        return
    frame = metrics.to_dataframe()
    print(frame.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    print(f"\n{summary['n']} items; {summary['skipped']} skipped; {summary['missing']} missing")


def run_eval_command(args) -> int:
    """The ``eval`` subcommand: one line on stderr and status 2 on a user error."""
    import torch

    from reward_lens_tl.distributed import is_main_process
    from reward_lens_tl.errors import RewardLensError

    torch.set_num_threads(1)
    try:
        result, model = _evaluate(args)
        if not is_main_process():  # under torchrun every rank has the result; rank 0 prints
            return 0
        _print(result, args)
        if args.explain:
            if model is None:
                raise ValueError("--explain needs a model: give MODEL_DIR and DATA")
            failures = result.failures()
            if len(failures):
                explanation = failures.explain(model, truncation=args.truncation)
                print("\n".join(["", *explanation.report(args.explain)]))
    except (RewardLensError, ValueError, FileNotFoundError, KeyError, OSError) as err:
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        print(f"reward-lens eval: error: {message}", file=sys.stderr)
        return 2
    return 0
