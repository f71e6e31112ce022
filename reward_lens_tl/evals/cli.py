"""reward-lens eval BENCHMARK: metrics from a score file, or from a model scoring a data file.

Internal (no public names): the `eval` subcommand of `reward_lens_tl.cli`.

Typical commands:

    reward-lens eval rewardmath --scores results/ArmoRM_scores.json --format json
    reward-lens eval rewardmath MODEL_DIR RewardMATH_direct.json --out scores.jsonl
    reward-lens eval rewardbench --scores scores.jsonl --data pairs.jsonl --format table
    reward-lens eval rmbench MODEL_DIR rmbench/ --out rm.jsonl --explain 5
    reward-lens eval rewardmath --scores math_shepherd_prm_scores.json --prm-aggregate min
    reward-lens eval rewardbench2 --scores rb2_scores.jsonl --format json

With `--format json` one JSON object is printed: `{"n": <items>, <figure>: <percent>, ...,
"skipped": <bad records and unscorable items skipped>, "missing": <data items without a score>}`
(RewardMATH: `accuracy`, `mrr`, `accuracy_with_ties`), plus `"ci"` with each figure's
interval and, when items were skipped, `"skipped_items"`: `[{"id", "reason"}, ...]`. Errors
print one line on stderr and exit with status 2.

RewardMATH score files of process reward models (a list of step scores per solution) are scored
with `--prm-aggregate` (min, max, prod, geometric_mean, mean, mean_logit, mean_odd, last; see
`reward_lens_tl.evals.prm`); the JSON then has `"prm_aggregate"`. Without it the figures
are those of `prod` (the aggregate the RewardMATH paper reports PRMs with), and `"by_aggregate"`
holds every aggregate's `accuracy` / `mrr` / `accuracy_with_ties`, as the reference's
`--prm_mode` prints all eight. A file with `chosen_position` (a pairwise judge's A/B verdicts)
is scored with the reference's pairwise rule and says `"protocol": "pairwise"`. RewardBench 2
(`rewardbench2`) is evaluated from score files only (no data ships; see
`reward_lens_tl.evals.rewardbench2` for the record format).

Scoring with a model: an item that does not fit the model's context (under `--truncation`) is
an error naming its id, or with `--on-error skip` is skipped and listed. `--out` records the
model's fingerprint and the arguments; a rerun resumes it only if they match, one run at a
time, and a run that scores nothing leaves no file behind. An `--out` that cannot be a file (a
directory, a path under a regular file, an unwritable place) is refused before the model loads.
"""

from __future__ import annotations

import json

from ..errors import InvalidArgumentError, RewardLensError
from .scores import BENCHMARKS

__all__: list[str] = []


def add_eval_parser(sub) -> None:
    """Add the `eval` subcommand to the CLI's subparsers.

    Args:
        sub: the subparsers of the `reward-lens` parser.
    """
    p = sub.add_parser(
        "eval",
        help="benchmark metrics (RewardBench, RewardMATH, RM-Bench) from scores or a model",
        description=__doc__.splitlines()[0],
    )
    p.add_argument("benchmark", choices=BENCHMARKS, help="which benchmark's protocol to apply")
    p.add_argument("model", nargs="?", help="local checkpoint directory to score DATA with")
    p.add_argument("data", nargs="?", help="the benchmark's data file (or folder) to score")
    p.add_argument("--scores", help="read per-item scores from this file instead of a model")
    p.add_argument(
        "--prm-aggregate",
        metavar="NAME",
        help="per-step (PRM) scores: one score per solution by min, max, prod, geometric_mean, "
        "mean, mean_logit, mean_odd or last (default prod, the RewardMATH paper's; the JSON then "
        "lists every aggregate under by_aggregate, as the reference's --prm_mode prints all)",
    )
    p.add_argument("--data", dest="data_opt", help="data file matching --scores (for --explain)")
    p.add_argument("--out", help="score file to write while scoring (a rerun resumes it)")
    p.add_argument("--format", choices=["json", "table"], default="table", help="output style")
    p.add_argument(
        "--on-error",
        choices=["raise", "skip"],
        default="raise",
        help="a malformed record or an item that cannot be scored (e.g. too long): stop (raise) "
        "or skip it and list it",
    )
    p.add_argument("--batch-size", type=int, default=16, help="sequences per forward pass")
    p.add_argument("--limit", type=int, default=None, help="score only the first N data items")
    p.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples for the CIs")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument(
        "--explain", type=int, default=0, metavar="K", help="explain the failures (needs a model)"
    )
    p.add_argument(
        "--truncation",
        choices=["error", "left", "right", "both"],
        default="error",
        help="conversations longer than the model's context: error (or skip, with --on-error "
        "skip), drop the oldest prompt content (left), the end of the response (right) or both",
    )
    p.set_defaults(func=run_eval_command)


def _load_items(benchmark: str, path: str, skip_bad: bool, limit: int | None):
    from ..data import load_pairs, load_rewardmath, load_rmbench

    if benchmark == "rewardbench2":
        raise InvalidArgumentError(
            "rewardbench2 is evaluated from a score file (--scores FILE, one record per prompt: "
            "see reward_lens_tl.evals.rewardbench2); there is no RewardBench 2 data loader"
        )
    if benchmark == "rewardmath":
        return load_rewardmath(path, skip_bad=skip_bad, limit=limit)
    if benchmark == "rmbench":
        return load_rmbench(path, skip_bad=skip_bad, limit=limit)
    return load_pairs(path, skip_bad=skip_bad, limit=limit)


def _evaluate(args):
    from .eval_result import EvalResult
    from .run import align_scores, score_items
    from .scores import read_scores

    if args.scores:
        if args.model:
            raise InvalidArgumentError("give either --scores FILE or MODEL_DIR DATA, not both")
        scores = read_scores(
            args.scores,
            benchmark=args.benchmark,
            skip_bad=args.on_error == "skip",
            prm_aggregate=args.prm_aggregate,
        )
        if args.data_opt:
            items = _load_items(args.benchmark, args.data_opt, args.on_error == "skip", args.limit)
            return align_scores(scores, items), None
        return EvalResult(args.benchmark, scores), None
    if args.benchmark == "rewardbench2":
        _load_items(
            args.benchmark, "", args.on_error == "skip", args.limit
        )  # no RewardBench 2 data: refused
    if not (args.model and args.data):
        raise InvalidArgumentError("give --scores FILE, or MODEL_DIR and a DATA file to score")
    if args.prm_aggregate is not None:
        raise InvalidArgumentError("--prm-aggregate applies to a --scores FILE of per-step scores")
    if args.out is not None:
        from ..provenance import check_output_file

        check_output_file(args.out, "the --out file")  # before the model loads
    from ..model import HookedRewardModel

    model = HookedRewardModel.from_pretrained(args.model)
    items = _load_items(args.benchmark, args.data, args.on_error == "skip", args.limit)
    result = score_items(
        model,
        items,
        out=args.out,
        batch_size=args.batch_size,
        truncation=args.truncation,
        on_error=args.on_error,
    )
    return result, model


def _skipped_items(result) -> list[dict]:
    """The items a scoring run skipped (`on_error="skip"`): id and reason."""
    from .run import NOT_SCORED

    return [
        {"id": s.id, "reason": s.reason} for s in result.scores.skipped if s.field == NOT_SCORED
    ]


def _protocol(result, args) -> dict:
    """What a PRM or pairwise score file was scored with (empty for other scores)."""
    from .metrics import metrics_for
    from .prm import PRM_AGGREGATES

    scores = result.scores
    if scores.pairwise:
        return {"protocol": "pairwise"}
    if scores.prm_aggregate is None:
        return {}
    out: dict = {"prm_aggregate": scores.prm_aggregate}
    if args.prm_aggregate is None:
        out["by_aggregate"] = {}
        for name in PRM_AGGREGATES:
            try:
                summary = metrics_for(result.benchmark, scores.with_aggregate(name), n_boot=0)
                figures = summary.summary()
                out["by_aggregate"][name] = {k: v for k, v in figures.items() if k != "n"}
            except RewardLensError as err:
                out["by_aggregate"][name] = {"error": str(err).splitlines()[0]}
    return out


def _print(result, args) -> None:
    metrics = result.metrics(n_boot=args.n_boot, seed=args.seed)
    summary = {**result.summary(n_boot=0), **_protocol(result, args)}
    skipped = _skipped_items(result)
    if args.format == "json":
        summary["ci"] = {
            name: [round(lo, 4), round(hi, 4)]
            for name, lo, hi in zip(metrics.names, metrics.low, metrics.high, strict=True)
        }
        if skipped:
            summary["skipped_items"] = skipped
        print(json.dumps(summary))
        return
    frame = metrics.to_dataframe()
    print(frame.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    print(f"\n{summary['n']} items; {summary['skipped']} skipped; {summary['missing']} missing")
    if "prm_aggregate" in summary:
        print(f"per-step scores aggregated by {summary['prm_aggregate']}")
    if summary.get("protocol") == "pairwise":
        print("a pairwise judge's verdicts, scored with RewardMATH's pairwise rule")
    for name, figures in summary.get("by_aggregate", {}).items():
        shown = ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k}: {v}"
                          for k, v in figures.items())  # fmt: skip
        print(f"  {name}: {shown}")
    for skip in skipped[:20]:
        print(f"  skipped item {skip['id']!r}: {skip['reason']}")
    if len(skipped) > 20:
        print(f"  … and {len(skipped) - 20} more")


def run_eval_command(args) -> int:
    """Run the `eval` subcommand.

    A user error prints one line on stderr (after closing the progress bar, local paths
    shortened) and returns status 2; with `--debug` the error propagates.

    Args:
        args: the parsed command-line arguments.

    Returns:
        The exit status.
    """
    import torch

    from ..cli import print_error
    from ..distributed import is_main_process

    torch.set_num_threads(1)
    try:
        result, model = _evaluate(args)
        if not is_main_process():  # under torchrun every rank has the result; rank 0 prints
            return 0
        _print(result, args)
        if args.explain:
            if model is None:
                raise InvalidArgumentError("--explain needs a model: give MODEL_DIR and DATA")
            failures = result.failures()
            if len(failures):
                explanation = failures.explain(model, truncation=args.truncation)
                print("\n".join(["", *explanation.report(args.explain)]))
    except (RewardLensError, ValueError, FileNotFoundError, KeyError, OSError) as err:
        if getattr(args, "debug", False):
            raise
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        print_error(f"eval: {message}")
        return 2
    return 0
