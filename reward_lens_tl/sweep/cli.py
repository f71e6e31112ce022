"""The logic of `reward-lens sweep` and `reward-lens sweep-stats`.

Internal (no public names): the `sweep` and `sweep-stats` subcommands of `reward_lens_tl.cli`.

`reward_lens_tl.cli` only parses the arguments and calls these.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..errors import InvalidArgumentError, RewardLensError
from ..plotting import STATIC_SUFFIXES, save

__all__: list[str] = []

#: What `--plot` may end in: `.html` (interactive) or a static image format.


def add_arguments(sub) -> None:
    """Register the two subcommands on the main parser's subparsers.

    Args:
        sub: the main parser's subparsers.
    """
    sweep = sub.add_parser(
        "sweep", help="score every single-token (or listed) response to one prompt, ranked"
    )
    sweep.add_argument("model", help="local checkpoint directory")
    sweep.add_argument("--prompt", required=True, help="the user prompt the responses answer")
    sweep.add_argument(
        "--out",
        required=True,
        help="output directory: sweep.csv (ranked), sweep.png (static figure), sweep.html "
        "(interactive figure, opens offline), summary.json",
    )
    sweep.add_argument(
        "--words",
        default=None,
        help="file with one candidate word or phrase per line (default: the filtered vocabulary)",
    )
    sweep.add_argument("--objective", default=None, help="head column (name or index) to rank")
    sweep.add_argument(
        "--method", choices=["cached", "exact"], default="cached", help="scoring path"
    )
    sweep.add_argument("--chunk-size", type=int, default=256, help="candidates per forward")
    sweep.add_argument(
        "--top", type=int, default=20, help="candidates shown top and bottom (figure, summary)"
    )
    sweep.add_argument(
        "--check-retokenization",
        action="store_true",
        help="also count candidates that a decode -> re-encode round trip would change",
    )
    sweep.set_defaults(func=run_sweep_command)

    stats = sub.add_parser(
        "sweep-stats", help="statistics of a score CSV (candidate column + one per model)"
    )
    stats.add_argument("csv", help="score CSV, e.g. ../shared/data/optimal_pessimal/scores_*.csv")
    stats.add_argument(
        "--format", choices=["json", "text"], default="json", help="output format (stdout)"
    )
    stats.add_argument("--candidate-column", default="name", help="the candidate column")
    stats.add_argument("--top", type=int, default=5, help="top/bottom candidates per model")
    stats.add_argument(
        "--plot",
        default=None,
        metavar="FILE",
        help="write the heat map of Kendall τ-b between the models to FILE: .html for the "
        "interactive figure (hover for exact values; opens offline), .png/.svg/.pdf/.jpg for "
        "a static image",
    )
    stats.set_defaults(func=run_stats_command)


def _one_line_errors(fn):
    def wrapped(args) -> int:
        try:
            return fn(args)
        except (RewardLensError, OSError) as err:
            if getattr(args, "debug", False):
                raise
            from ..cli import print_error  # closes a progress bar first; shortens local paths

            print_error(f"{getattr(args, 'command', None) or 'sweep'}: {err}")
            return 2

    return wrapped


@_one_line_errors
def run_sweep_command(args) -> int:
    """Run `reward-lens sweep`: score, then write the ranked CSV, the plot and a summary.

    Args:
        args: the parsed arguments.

    Returns:
        The exit status.
    """
    import torch

    from ..model import HookedRewardModel
    from ..provenance import check_output_file
    from .retokenize import retokenization_changes
    from .runner import token_sweep

    torch.set_num_threads(1)
    out = Path(args.out)
    check_output_file(out / "sweep.partial.jsonl", "--out's resume file")  # --out is a folder
    out.mkdir(parents=True, exist_ok=True)
    model = HookedRewardModel.from_pretrained(args.model)
    words = None
    if args.words:
        words = [w.strip() for w in Path(args.words).read_text().splitlines() if w.strip()]
    objective = args.objective
    if objective is not None and objective.isdigit():
        objective = int(objective)
    result = token_sweep(
        model,
        args.prompt,
        words,
        method=args.method,
        objective=objective,
        chunk_size=args.chunk_size,
        resume=out / "sweep.partial.jsonl",
        progress=None,
    )
    result.to_dataframe().to_csv(out / "sweep.csv", index=False)
    figure = result.plot(k=args.top, backend="plotly")
    save(figure, out / "sweep.png")
    save(figure, out / "sweep.html")
    from .study_stats import distribution_summary

    summary = {
        "prompt": args.prompt,
        "n_candidates": len(result),
        "summary": distribution_summary(result),
        "top": result.top_k(args.top),
        "bottom": result.bottom_k(args.top),
    }
    if args.check_retokenization:
        report = retokenization_changes(model, args.prompt, result.candidates)
        summary["retokenization"] = {"checked": report.n, "changed": report.n_changed}
    (out / "summary.json").write_text(dumps(summary))
    print(f"{len(result)} candidates scored; ranked CSV and figures (PNG, HTML) in {out}")
    for side, rows in (("top", result.top_k(5)), ("bottom", result.bottom_k(5))):
        print(f"{side}: " + ", ".join(f"{lab!r} {v:.3f}" for lab, v in rows))
    return 0


@_one_line_errors
def run_stats_command(args) -> int:
    """Run `reward-lens sweep-stats`: print the statistics of a score CSV.

    Args:
        args: the parsed arguments.

    Returns:
        The exit status.
    """
    from .scorefile import read_score_csv, score_file_stats
    from .study_stats import kendall_tau_matrix

    plot = None
    if args.plot:
        from ..provenance import check_output_file

        plot = check_output_file(args.plot, "--plot")
        figure_suffix(plot, "--plot")  # a bad name fails before any work
    frame = read_score_csv(args.csv, args.candidate_column)  # refuses repeats and inf cells
    stats = score_file_stats(args.csv, args.candidate_column, k=args.top)
    if plot is not None:
        taus = kendall_tau_matrix(frame)
        save(taus.plot(backend="plotly"), plot)
    if args.format == "json":
        print(dumps(stats))
        return 0
    print(f"{stats['n_candidates']} candidates, {len(stats['models'])} models")
    for key, tau in stats["kendall_tau"].items():
        print(f"tau_b  {tau if tau is None else round(tau, 4)!s:>8}  {key}")
    for m, s in stats["summary"].items():
        print(f"{m}: mean {s['mean']:.3f} skew {s['skew']:.3f} kurtosis {s['kurtosis']:.3f}")
    return 0


def figure_suffix(path: Path, what: str) -> str:
    """The suffix of a figure file, `.html` or one of `STATIC_SUFFIXES` (lower case).

    Args:
        path: The file.
        what: The argument that named it, for the message.

    Returns:
        The suffix.

    Raises:
        InvalidArgumentError: Any other suffix.

    Examples:
        >>> figure_suffix(Path("taus.HTML"), "--plot"), figure_suffix(Path("t.svg"), "--plot")
        ('.html', '.svg')
    """
    suffix = path.suffix.lower()
    if suffix != ".html" and suffix not in STATIC_SUFFIXES:
        raise InvalidArgumentError(
            f"{what} {str(path)!r}: end the name in .html for the interactive figure, or in "
            f"{', '.join(STATIC_SUFFIXES)} for a static image"
        )
    return suffix


def json_ready(value):
    """`value` with every float that is not finite replaced by `None`.

    Such floats are a std of one value or a τ of a constant column; the replacement goes
    recursively through dicts, lists and tuples.

    Args:
        value: the value.

    Returns:
        The JSON-ready value.

    Examples:
        >>> json_ready({"std": float("nan"), "top": [("a", 1.5)]})
        {'std': None, 'top': [['a', 1.5]]}
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    return value


def dumps(value) -> str:
    """Strict JSON (`allow_nan=False`: never the invalid tokens `NaN`/`Infinity`).

    Args:
        value: the value.

    Returns:
        The JSON text.
    """
    return json.dumps(json_ready(value), indent=2, allow_nan=False)
