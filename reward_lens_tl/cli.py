"""The reward-lens command line.

Subcommands: `report` (one report, HTML and markdown; on the shipped zoo model and its data
without arguments: the main job, `make demo`), `score` (a pair file with a checkpoint),
`info` (what a checkpoint's files say, and parity), `check` (diagnostics for
your own reward model), `sweep` / `sweep-stats` (token sweeps), `eval` (benchmark
metrics, `reward_lens_tl.evals.cli`) and `zoo train`.

Building the parser imports nothing heavy (no torch, TransformerLens or transformers), so
`--help` and argument mistakes answer at once: every handler imports its implementation when
it runs, and the subcommands another module defines (`sweep`, `sweep-stats`, `eval`) get
their arguments only when one of them is parsed (`LazySubParsers`).

Errors print one line (`reward-lens: error: ...`, exit status 2; `--debug` shows the
traceback), after closing any progress bar; warnings print as `warning: <message>` without
source files or lines; absolute paths of this machine are shortened (`scrub_paths`).

`MODEL` is a local checkpoint directory or a hub id (`org/name`, with `--revision`):
`reward_lens_tl.hub.resolve_checkpoint` fetches its config, tokenizer and safetensors
only (never code or pickle weights) into the hub cache, and with `HF_HUB_OFFLINE=1` resolves
it from the cache alone. The handlers here resolve it before loading; the subcommands other
modules define get it resolved before their handler runs (`resolving_model`). Nothing
else is ever downloaded: every transformers call reads local files only.

Examples:
    >>> parser = build_parser()
    >>> parser.parse_args(["check", "model_dir", "--format", "json"]).format
    'json'
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import re
import sys
import warnings
from pathlib import Path
from typing import cast

__all__ = [
    "main",
]

DESCRIPTION = (
    "Mechanistic interpretability of reward models as TransformerLens HookedTransformers: "
    "score, inspect, check and report on a local checkpoint or a hub id (org/name). Run "
    "'reward-lens COMMAND --help' for a command's options."
)

#: Subcommands whose arguments another module defines: name -> (help, "module:function").
#: The module is imported only when that subcommand is parsed.
LAZY_SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "sweep": (
        "score every single-token (or listed) response to one prompt, ranked",
        "reward_lens_tl.sweep.cli:add_arguments",
    ),
    "sweep-stats": (
        "statistics of a score CSV (candidate column + one per model)",
        "reward_lens_tl.sweep.cli:add_arguments",
    ),
    "eval": (
        "benchmark metrics (RewardBench, RewardMATH, RM-Bench) from scores or a model",
        "reward_lens_tl.evals.cli:add_eval_parser",
    ),
}

_PACKAGE_PARENT = Path(__file__).resolve().parent.parent
#: What every `MODEL` argument accepts (the help of other modules' `model` arguments is
#: rewritten to say so: `accept_hub_ids`).
LOCAL_MODEL = "local checkpoint directory"
MODEL_HELP = "local checkpoint directory, hub id org/name, or zoo name (scalar, multi, …)"


# -- argument types and plain text --------------------------------------------------------------
def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1 (`--limit -1` is an argument error).

    Args:
        text: The argument as given.

    Returns:
        The integer.

    Raises:
        argparse.ArgumentTypeError: Not an integer, or less than 1.

    Examples:
        >>> positive_int("3")
        3
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer (1 or more), got {value}")
    return value


def plain_text(text: str) -> str:
    """`text` without reStructuredText markup (double backticks, `:func:` roles).

    Args:
        text: Text that may hold reStructuredText markup.

    Returns:
        The text with the markup removed.

    Examples:
        >>> plain_text("``reward-lens eval``: see :mod:`~reward_lens_tl.evals`")
        'reward-lens eval: see reward_lens_tl.evals'
    """
    text = re.sub(r":[a-z]+:`~?([^`]*)`", r"\1", text)
    return text.replace("``", "")


def scrub_paths(text: str) -> str:
    """`text` with this machine's absolute paths shortened.

    The working directory and the package's installation folder are dropped, the home directory
    becomes `~`.

    Args:
        text: The text to print.

    Returns:
        The text with the paths shortened.

    Examples:
        >>> scrub_paths(str(Path.cwd() / "data" / "pairs.jsonl")) == str(
        ...     Path("data", "pairs.jsonl")
        ... )
        True
    """
    roots = {str(Path.cwd()): "", str(_PACKAGE_PARENT): "", str(Path.home()): "~" + os.sep}
    for root in sorted(roots, key=len, reverse=True):
        if len(root) > 1:
            text = text.replace(root + os.sep, roots[root])
    return text


# -- printing next to progress bars --------------------------------------------------------------
def _end_progress_bars() -> None:
    """Close every open tqdm bar, so that what is printed next starts on a line of its own."""
    tqdm = sys.modules.get("tqdm")
    for bar in list(getattr(getattr(tqdm, "tqdm", None), "_instances", ())):
        bar.close()


def _print_line(text: str) -> None:
    """Print one line on stderr, above any open progress bar (never glued onto it)."""
    tqdm = sys.modules.get("tqdm")
    if tqdm is not None and len(getattr(tqdm.tqdm, "_instances", ())):
        tqdm.tqdm.write(text, file=sys.stderr)
    else:
        print(text, file=sys.stderr, flush=True)


def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """`warnings.showwarning` for the CLI: `warning: <message>`.

    With no source file, line number or code line, and no absolute local paths.

    Args:
        message: The warning.
        category: The warning's class.
        filename: The source file (not shown).
        lineno: The line number (not shown).
        file: Where to print (default: stderr).
        line: The code line (not shown).

    Examples:
        >>> import contextlib
        >>> with contextlib.redirect_stderr(sys.stdout):
        ...     show_warning(UserWarning("3 records skipped"), UserWarning, "/src/x.py", 12)
        warning: 3 records skipped
    """
    _print_line(f"warning: {scrub_paths(in_cli_words(str(message)))}")


def print_error(message: str) -> None:
    r"""`reward-lens: error: <message>` on one line, after closing any progress bar.

    Args:
        message: The error message (its line breaks become spaces).

    Examples:
        >>> import contextlib
        >>> with contextlib.redirect_stderr(sys.stdout):
        ...     print_error("cannot read pairs.jsonl:\nline 3 is not JSON")
        reward-lens: error: cannot read pairs.jsonl: line 3 is not JSON
    """
    _end_progress_bars()
    one_line = " ".join(part.strip() for part in scrub_paths(message).splitlines())
    print(f"reward-lens: error: {one_line}", file=sys.stderr, flush=True)


# -- handlers -------------------------------------------------------------------------------------
def _score(args) -> int:
    from .data import load_pairs
    from .distributed import is_main_process
    from .model import HookedRewardModel
    from .scoring import score_pairs

    csv = _writable_file(args.csv) if args.csv else None  # fail before a long scoring run
    path = resolve_model(args)
    existing_file(args.pairs, "the pair file")  # before the model loads
    model = HookedRewardModel.from_pretrained(path)
    skip = args.on_error == "skip"
    pairs = load_pairs(args.pairs, format=args.format, limit=args.limit, skip_bad=skip)
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
            print(f"  {in_cli_words(str(skip))}")
        if len(scores.skipped) > 20:
            print(f"  … and {len(scores.skipped) - 20} more")
    return 0


def existing_file(path: str, what: str) -> Path:
    """`path` if it exists (a file, or a folder of data files); checked before a model loads.

    Args:
        path: The path given.
        what: What it is, for the message (`"the pair file"`).

    Returns:
        The path.

    Raises:
        MissingFileError: Nothing at `path`.

    Examples:
        >>> from reward_lens_tl.errors import MissingFileError
        >>> try:
        ...     existing_file("no/such/pairs.jsonl", "the pair file")
        ... except MissingFileError as err:
        ...     print(str(err)[:40])
        the pair file no/such/pairs.jsonl does n
    """
    from .errors import MissingFileError

    target = Path(path)
    if not target.exists():
        raise MissingFileError(f"{what} {path} does not exist (nothing was loaded): check the path")
    return target


def _writable_file(path: str) -> Path:
    """`path` if a file can be written there now, in a folder that exists.

    `provenance.check_output_file`'s checks, plus the folder: pandas writes the CSV at the
    end of the run and makes no folder.
    """
    from .errors import InvalidArgumentError
    from .provenance import check_output_file

    target = check_output_file(path, "the --csv file")
    if not target.parent.is_dir():
        raise InvalidArgumentError(
            f"cannot write the --csv file {path}: its folder {target.parent} does not exist; "
            "create it first"
        )
    return target


def resolve_model(args: argparse.Namespace) -> Path:
    """`args.model` (a local directory or a hub id, at `args.revision`) as a checkpoint directory.

    Typed errors say what to do.

    Args:
        args: The parsed arguments, with `model` and optionally `revision`.

    Returns:
        The checkpoint directory.

    Raises:
        InvalidArgumentError: A `--revision` without a model.

    Examples:
        >>> from reward_lens_tl.zoo import zoo_path
        >>> resolve_model(argparse.Namespace(model=str(zoo_path("scalar")))) == zoo_path("scalar")
        True
    """
    from .errors import InvalidArgumentError
    from .hub import resolve_checkpoint

    revision = getattr(args, "revision", None)
    if args.model is None:
        raise InvalidArgumentError(
            "--revision was given without a MODEL (a hub id org/name)"
            if revision is not None
            else "no MODEL was given: pass a checkpoint directory, a hub id org/name or a zoo name"
        )
    zoo = _zoo_model(args.model)
    if zoo is not None:
        if revision is not None:
            raise InvalidArgumentError(
                f"--revision was given with the zoo model {args.model!r}, which has no revisions"
            )
        return zoo
    return resolve_checkpoint(args.model, revision=revision)


def _zoo_model(name: str) -> Path | None:
    """The zoo checkpoint a bare name (`scalar`, `multi`, …) means, unless a folder has it."""
    if "/" in name or os.sep in name or Path(name).exists():
        return None
    from .zoo.load import ZOO_NAMES, zoo_path

    return zoo_path(name) if name in ZOO_NAMES else None


def _optional_model(args: argparse.Namespace) -> Path | None:
    """`resolve_model`, or `None` when neither a model nor a revision was given."""
    if args.model is None and getattr(args, "revision", None) is None:
        return None
    return resolve_model(args)


def resolving_model(handler):
    """`handler` with `args.model` resolved first (`resolve_model`; a path string).

    The handlers of subcommands other modules define then load a directory as before.

    Args:
        handler: The subcommand's handler, `handler(args)`.

    Returns:
        The wrapped handler.
    """

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        path = _optional_model(args)
        if path is not None:
            args.model = str(path)
        return handler(args)

    return run


def _info(args) -> int:
    from .checkpoint import describe_files, is_causal_lm

    path = resolve_model(args)
    facts = describe_files(path)
    if path != Path(args.model):  # a hub id: say which snapshot it resolved to
        facts = {"snapshot": path, **facts}
    for key, value in facts.items():
        print(f"{key + ':':16}{value}", flush=True)
    if args.no_parity or is_causal_lm(facts["architecture"]):
        return 0
    from .adapters import adapter_for
    from .checkpoint import load_config
    from .model import parity_at_load

    err = parity_at_load(path)
    print(f"{'adapter:':16}{adapter_for(load_config(path)).describe()}")
    print(
        f"{'parity:':16}max |converted − HF| = {err:.2e} on random tokens, first 2 layers + "
        "head (float32, ≤ 1e-3 ok)"
    )
    return 0


def _check(args) -> int:
    from .diagnostics import check

    path = resolve_model(args)
    if args.data is not None:
        existing_file(args.data, "the --data file")
    report = check(path, data=args.data)
    print(report.to_json() if args.format == "json" else report.to_text(), flush=True)
    if getattr(args, "debug", False) and report.errors:
        raise report.errors[0]  # the traceback of the first failed check
    return 1 if report.failed else 0


def _report(args) -> int:
    import torch

    if args.resume:
        check_work_files(Path(args.out) / ".work")
    model = _optional_model(args)  # None: the zoo's scalar model
    if args.pairs is not None:
        existing_file(args.pairs, "the pair file")
    from .distributed import is_main_process
    from .report import build_report

    torch.set_num_threads(args.threads)  # the zoo model is tiny: one thread is fastest
    keys = ("limit", "seed", "resume", "format", "truncation", "backend")
    options = {k: getattr(args, k) for k in keys}
    numbers = build_report(model, args.pairs, args.out, markdown=True, **options)
    if not is_main_process():  # under torchrun rank 0 wrote the page and reports it
        return 0
    print(
        f"report written to {Path(args.out) / 'report.html'} and report.md: accuracy "
        f"{numbers['accuracy']:.1%} over {numbers['n_scored']} pairs ({numbers['n_skipped']} "
        f"skipped); sections: {', '.join(numbers['sections'])}"
    )
    return 0


def check_work_files(work: Path) -> None:
    """Refuse to resume a report whose stored JSON files (`.work/*.json`) are corrupt.

    The error names the file and what to do (a typed error, not a traceback from deep inside the
    run).

    Args:
        work: The report's work folder.

    Raises:
        DataFormatError: A stored JSON file that cannot be read.

    Examples:
        >>> import tempfile
        >>> work = Path(tempfile.mkdtemp())
        >>> _ = (work / "args.json").write_text('{"model": ')
        >>> try:
        ...     check_work_files(work)
        ... except Exception as err:
        ...     print(type(err).__name__, "start again without --resume" in str(err))
        DataFormatError True
    """
    from .errors import DataFormatError

    for file in sorted(work.glob("*.json")) if work.is_dir() else ():
        try:
            json.loads(file.read_text(encoding="utf-8-sig"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            todo = (
                "start again without --resume"
                if file.name == "args.json"
                else "delete it and --resume again to recompute that step"
            )
            raise DataFormatError(
                f"{file} is corrupt ({err}): the interrupted run cannot be resumed from it; {todo}"
            ) from None


def _zoo_train(args) -> int:
    from .zoo import train_zoo

    result = train_zoo(Path(args.out), seed=args.seed, which=tuple(args.which), fast=args.fast)
    for name, meta in result.items():
        print(f"{name}: {meta}")
    return 0


# -- the parser -----------------------------------------------------------------------------------
class LazySubParsers(argparse._SubParsersAction):
    """Subparsers some of which get their arguments on first use.

    `add_lazy` registers a subcommand (its name and help, shown by `--help`) and the
    `"module:function"` that adds its arguments; that module is imported only when the
    subcommand is parsed.

    Args:
        *args: `argparse._SubParsersAction`'s arguments.
        **kwargs: `argparse._SubParsersAction`'s keyword arguments.
    """

    def __init__(self, *args, **kwargs):
        """Subparsers without lazy subcommands yet.

        Args:
            *args: `argparse._SubParsersAction`'s arguments.
            **kwargs: `argparse._SubParsersAction`'s keyword arguments.
        """
        super().__init__(*args, **kwargs)
        self._builders: dict[str, str] = {}

    def add_lazy(self, name: str, help: str, builder: str) -> argparse.ArgumentParser:
        """Register a subcommand whose arguments `builder` adds when it is parsed.

        Args:
            name: The subcommand.
            help: Its help and description, shown by `--help`.
            builder: `"module:function"` that adds its arguments.

        Returns:
            The subcommand's parser (without its arguments yet).
        """
        self._builders[name] = builder
        return self.add_parser(name, help=help, description=help)

    def __call__(self, parser, namespace, values, option_string=None):
        """Build the chosen subcommand's arguments, then parse as argparse does.

        Args:
            parser: The parent parser.
            namespace: The namespace being filled.
            values: The subcommand and its arguments.
            option_string: Unused (argparse's signature).
        """
        self.build(values[0])
        super().__call__(parser, namespace, values, option_string)

    def build(self, name: str) -> None:
        """Import the module that defines `name`'s arguments and let it add them.

        Args:
            name: The subcommand.
        """
        builder = self._builders.get(name)
        if builder is None:
            return
        built = [n for n, b in self._builders.items() if b == builder]
        for other in built:
            del self._builders[other]
        module, function = builder.split(":")
        getattr(importlib.import_module(module), function)(_Placeholders(self))
        for other in built:
            accept_hub_ids(self.choices[other])
        _add_debug_flag(self)


class _Placeholders:
    """Stands in for the subparsers handed to another module's `add_*` function.

    Its `add_parser` returns the subparser already registered under that name (its description
    made plain text).
    """

    def __init__(self, sub: LazySubParsers):
        self._sub = sub

    def add_parser(self, name: str, **kwargs) -> argparse.ArgumentParser:
        if name not in self._sub.choices:  # a subcommand LAZY_SUBCOMMANDS does not list
            return self._sub.add_parser(name, **kwargs)
        parser = self._sub.choices[name]
        if kwargs.get("description"):
            parser.description = plain_text(kwargs["description"])
        return parser


def build_parser() -> argparse.ArgumentParser:
    """The `reward-lens` parser; building it (and printing its help) imports nothing heavy.

    Returns:
        The parser.
    """
    parser = argparse.ArgumentParser(
        prog="reward-lens", description=DESCRIPTION, formatter_class=DefaultsHelpFormatter
    )
    parser.register("action", "parsers", LazySubParsers)
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    parser.add_argument("--version", action="version", version=f"reward-lens {_version()}")
    sub = cast(LazySubParsers, parser.add_subparsers(dest="command", required=True))
    _add_score(sub)
    _add_info_and_check(sub)
    _add_report(sub)
    for name, (help_text, builder) in LAZY_SUBCOMMANDS.items():
        sub.add_lazy(name, help_text, builder)
    _add_zoo(sub)
    _add_debug_flag(sub)
    _show_defaults(sub)
    return parser


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """`--help` shows each option's default, unless its help already says it or it has none."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        shown = action.default not in (None, False, argparse.SUPPRESS, [])
        if shown and action.option_strings and "default" not in text:
            text += " (default: %(default)s)"
        return text


def _show_defaults(sub: argparse._SubParsersAction) -> None:
    """Every subcommand's help (nested ones too) shows the defaults."""
    for child in set(sub.choices.values()):
        child.formatter_class = DefaultsHelpFormatter
        for action in child._actions:
            if isinstance(action, argparse._SubParsersAction):
                _show_defaults(action)


def _version() -> str:
    """The installed package's version (read without importing the package's heavy parts)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("reward-lens-tl")
    except PackageNotFoundError:
        return "unknown"


def cli_words(message: str, parser: argparse.ArgumentParser | None) -> str:
    """`message` with Python keywords of the subcommand's options spelled as its CLI flags.

    A message written for the Python API says `truncation='left'`; on the command line the user
    types `--truncation left`. Only keywords that are options of `parser` are rewritten.

    Args:
        message: The error message.
        parser: The subcommand's parser (`None`: unchanged).

    Returns:
        The message in the command line's words.

    Examples:
        >>> p = argparse.ArgumentParser()
        >>> _ = p.add_argument("--truncation"), p.add_argument("--batch-size", type=int)
        >>> _ = p.add_argument("--on-error")
        >>> cli_words("pass truncation='left' or batch_size=8; skip_bad=True", p)
        'pass --truncation left or --batch-size 8; skip_bad=True'
        >>> cli_words("pass truncation= (one of left, right)", p)
        'pass --truncation (one of left, right)'
    """
    if parser is None:
        return message
    flags = {
        action.dest: max(action.option_strings, key=len)
        for action in parser._actions
        if action.option_strings and action.dest not in ("help", "debug", "version")
    }
    if not flags:
        return message
    names = "|".join(re.escape(d) for d in sorted(flags, key=len, reverse=True))
    pattern = re.compile(rf"\b({names})=(?:'([^']*)'|\"([^\"]*)\"|([\w.+-]+))")

    def flag(match: re.Match) -> str:
        value = next(v for v in match.groups()[1:] if v is not None)
        return f"{flags[match.group(1)]} {value}"

    bare = re.compile(rf"\b({names})=(?=[\s(),;:]|$)")  # "pass format= (one of …)"
    return bare.sub(lambda m: flags[m.group(1)], pattern.sub(flag, message))


def _add_model(parser: argparse.ArgumentParser, help: str = MODEL_HELP, **kwargs) -> None:
    """The positional `MODEL` (a directory or a hub id) and its `--revision`."""
    parser.add_argument("model", help=help, **kwargs)
    _add_revision(parser)


def _add_revision(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--revision",
        default=None,
        help="with a hub id: the branch, tag or commit to load (default: main)",
    )


def accept_hub_ids(parser: argparse.ArgumentParser) -> None:
    """Let a subcommand another module defines take a hub id as its `model`.

    The help says so, `--revision` is added, and the handler gets `args.model` resolved to a
    directory (`resolving_model`). Subcommands without a positional `model` are left alone.

    Args:
        parser: The subcommand's parser.

    Examples:
        >>> p = argparse.ArgumentParser()
        >>> _ = p.add_argument("model", help="local checkpoint directory")
        >>> p.set_defaults(func=lambda args: 0)
        >>> accept_hub_ids(p)
        >>> p.parse_args(["org/name", "--revision", "v1"]).revision
        'v1'
    """
    model = next((a for a in parser._actions if a.dest == "model" and not a.option_strings), None)
    if model is None:
        return
    model.help = (model.help or LOCAL_MODEL).replace(LOCAL_MODEL, MODEL_HELP)
    if "--revision" not in parser._option_string_actions:
        _add_revision(parser)
    handler = parser.get_default("func")
    if handler is not None and not hasattr(handler, "__wrapped__"):
        parser.set_defaults(func=resolving_model(handler))


def _add_truncation(parser: argparse.ArgumentParser, default: str, error: str) -> None:
    """`--truncation`: what to do with a conversation longer than the context.

    `error` says what the `"error"` choice does for this command.
    """
    parser.add_argument(
        "--truncation",
        choices=["error", "left", "right", "both"],
        default=default,
        help="a conversation longer than the context: drop the oldest prompt content (left), "
        "the end of the response (right), or both (half the content budget each), or "
        f"{error} (error); template markers are always kept",
    )


def _add_score(sub) -> None:
    score = sub.add_parser("score", help="score a preference-pair file with a checkpoint")
    _add_model(score, f"{MODEL_HELP} (config.json + safetensors)")
    score.add_argument("pairs", help="pair file: HH-RLHF, LLMBar, RM-Bench, RewardBench jsonl, …")
    score.add_argument("--format", default=None, help="the file's format (default: guessed)")
    score.add_argument("--limit", type=positive_int, default=None, help="at most this many pairs")
    score.add_argument("--batch-size", type=positive_int, default=16, help="pairs per forward")
    _add_truncation(score, "error", "stop")
    score.add_argument(
        "--on-error",
        choices=["raise", "skip"],
        default="raise",
        help="a malformed record or a pair that cannot be scored (e.g. too long): stop (raise) "
        "or skip it and report it with a count",
    )
    score.add_argument(
        "--csv", default=None, help="write per-pair scores here (with the input record index)"
    )
    score.set_defaults(func=_score)


def _add_info_and_check(sub) -> None:
    info = sub.add_parser(
        "info", help="describe a checkpoint (template, padding, pooling, context) and check parity"
    )
    _add_model(info)
    info.add_argument("--no-parity", action="store_true", help="only read the files; load nothing")
    info.set_defaults(func=_info)

    check = sub.add_parser(
        "check",
        help="diagnose your own reward model: HF parity, batch and padding invariance, reading "
        "position, pad/EOS/BOS, template, determinism (exit 1 on a failed check)",
    )
    _add_model(check)
    check.add_argument(
        "--data",
        default=None,
        help="a pair file (any format `score` reads): its first pairs are the test conversations "
        "and a sample of up to 200 pairs gives the share of unknown tokens",
    )
    check.add_argument("--format", choices=["text", "json"], default="text", help="output style")
    check.set_defaults(func=_check)


def _add_report(sub) -> None:
    report = sub.add_parser(
        "report",
        help="one report (HTML page and markdown): scores, lens, components, patching, tokens, "
        "probes, failures; without a pair file, the zoo report ('make demo')",
    )
    _add_model(report, f"{MODEL_HELP} (default: zoo scalar)", nargs="?", default=None)
    report.add_argument(
        "pairs",
        nargs="?",
        default=None,
        help="pair file (any format `score` reads); without one, the zoo's rule-labelled pairs "
        "and the sections only the zoo's ground truth allows",
    )
    report.add_argument("--out", default="reports/report", help="output directory")
    report.add_argument(
        "--limit", type=positive_int, default=None, help="a seeded sample of this many pairs"
    )
    report.add_argument("--seed", type=int, default=0, help="seed of the --limit sample")
    report.add_argument(
        "--resume", action="store_true", help="continue an interrupted run (same arguments)"
    )
    report.add_argument("--format", default=None, help="the pair file's format (default: guessed)")
    _add_truncation(report, "left", "skip the pair")
    report.add_argument("--threads", type=positive_int, default=1, help="torch threads")
    report.add_argument(
        "--backend",
        choices=["tl3", "bridge"],
        default="tl3",
        help="tl3: HookedRewardModel on TransformerLens 3.9 (default); bridge: TransformerLens 4's "
        "TransformerBridge (the second environment, requirements-tl4.txt), where the sections "
        "that need TransformerLens 3.9 (the SAE sections) are noted",
    )
    report.set_defaults(func=_report)


def _add_zoo(sub) -> None:
    zoo = sub.add_parser("zoo", help="the planted-mechanism model zoo")
    zoo_sub = zoo.add_subparsers(dest="zoo_command", required=True)
    train = zoo_sub.add_parser("train", help="regenerate the zoo models")
    train.add_argument("--out", default="zoo_models", help="output directory")
    train.add_argument("--seed", type=int, default=0, help="training seed")
    train.add_argument(
        "--which",
        nargs="+",
        default=["scalar", "multi", "policy", "judge", "prm"],
        help="models to train",
    )
    train.add_argument("--fast", action="store_true", help="tiny-step config (for smoke tests)")
    train.set_defaults(func=_zoo_train)


def _add_debug_flag(sub: argparse._SubParsersAction) -> None:
    """`--debug` after any subcommand too (`reward-lens score … --debug`)."""
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


# -- main -----------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    """Run one command.

    Args:
        argv: The arguments (default: `sys.argv[1:]`).

    Returns:
        The exit status (2 for a user error, 130 when interrupted).

    Examples:
        >>> try:
        ...     main(["--version"])
        ... except SystemExit as done:  # argparse exits after printing the version
        ...     print("exit status", done.code)
        reward-lens 0.1.0
        exit status 0
    """
    with warnings.catch_warnings():
        warnings.showwarning = show_warning
        parser = build_parser()
        args = parser.parse_args(argv)
        return _run(args, _subcommand_parser(parser, args))


#: The parser of the subcommand running now (`main` sets it): what it prints names its flags.
_RUNNING: list[argparse.ArgumentParser | None] = [None]


def in_cli_words(text: str) -> str:
    """`text` with the running subcommand's keywords spelled as its flags (`cli_words`).

    Args:
        text: A message printed while a subcommand runs (a warning, a skipped pair).

    Returns:
        The text in the command line's words (unchanged outside a subcommand).
    """
    return cli_words(text, _RUNNING[0])


def _subcommand_parser(parser: argparse.ArgumentParser, args) -> argparse.ArgumentParser | None:
    """The parser of the subcommand `args` ran (its options name the CLI flags)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices.get(str(getattr(args, "command", "")))
    return None


def _run(args, parser: argparse.ArgumentParser | None = None) -> int:
    """Call the handler: a typed error or an interruption is one line.

    The traceback shows with `--debug`; anything else is a bug and keeps its traceback, on a line
    of its own. The line names the subcommand's CLI flags where the message names keywords.
    """
    from .errors import RewardLensError

    expected = () if args.debug else (RewardLensError, OSError)
    _RUNNING[0] = parser
    try:
        return args.func(args)
    except expected as err:
        print_error(f"{type(err).__name__}: {cli_words(str(err), parser)}")
        return 2
    except KeyboardInterrupt:
        if args.debug:
            _end_progress_bars()
            raise
        print_error("interrupted")
        return 130
    except BaseException:
        _end_progress_bars()
        raise
    finally:
        _RUNNING[0] = None


if __name__ == "__main__":
    sys.exit(main())
