"""The command line's fast paths and its manners: help and argument errors import nothing heavy,
plain-text help, one-line errors (never glued onto a progress bar), warnings without source
lines or local paths, ``--debug`` tracebacks, a causal LM pointed to the implicit reward, and
data files with a UTF-8 byte-order mark."""

import gzip
import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import reward_lens_tl.cli as cli
from reward_lens_tl.cli import build_parser, main
from reward_lens_tl.data import load_pairs, sniff_format
from reward_lens_tl.errors import CheckpointError, DataFormatError, MissingFileError
from reward_lens_tl.zoo import zoo_path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformer_lens", "transformers")


def _heavy_modules_after(code: str) -> list[str]:
    """The heavy modules a fresh interpreter has imported after running ``code``."""
    probe = f"import sys\n{code}\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    env = {"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, env=env
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1].replace("'", '"'))


def test_help_and_argument_errors_import_nothing_heavy():
    help_code = "from reward_lens_tl.cli import build_parser; build_parser().format_help()"
    assert _heavy_modules_after(help_code) == []
    error_code = (
        "from reward_lens_tl.cli import main\n"
        "try:\n    main(['report', 'm', 'p', '--limit', '-1'])\nexcept SystemExit as e:\n"
        "    assert e.code == 2\n"
        "try:\n    main(['--help'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
    )
    assert _heavy_modules_after(error_code) == []


def test_help_is_plain_text_and_lists_every_command(capsys):
    text = build_parser().format_help()
    for markup in ("``", ":func:", ":mod:", ":class:"):
        assert markup not in text
    for command in ("score", "info", "check", "report", "sweep", "sweep-stats", "eval"):
        assert command in text
    with pytest.raises(SystemExit):
        main(["eval", "--help"])  # built on first use, its description made plain
    out = capsys.readouterr().out
    assert "reward-lens eval BENCHMARK: metrics" in out and "``" not in out


def test_negative_limit_is_a_one_line_argument_error(capsys):
    for argv in (["report", "m", "p", "--limit", "-1"], ["score", "m", "p", "--limit", "0"]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert "argument --limit: must be a positive integer (1 or more)" in err[-1]
        assert "Traceback" not in "\n".join(err)


def test_lazy_subcommands_parse_their_own_arguments(tmp_path, capsys):
    args = build_parser().parse_args(["sweep-stats", "x.csv", "--format", "text", "--debug"])
    assert (args.csv, args.format, args.debug) == ("x.csv", "text", True)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["eval", "rewardbench", "--bogus"])
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err
    csv = tmp_path / "scores.csv"
    csv.write_text("name,a,b\nx,1.0,2.0\ny,2.0,1.0\nz,3.0,3.5\nw,0.5,0.1\n")
    assert main(["sweep-stats", str(csv), "--format", "json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["n_candidates"] == 4


def test_corrupt_resume_file_is_a_one_line_error(tmp_path, capsys):
    work = tmp_path / "out" / ".work"
    work.mkdir(parents=True)
    (work / "args.json").write_text('{"model": "x", "pairs"')  # cut off mid-write
    argv = ["report", str(zoo_path("scalar")), "pairs.jsonl", "--out", str(tmp_path / "out")]
    assert main([*argv, "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "DataFormatError" in err and "args.json is corrupt" in err
    assert "start again without --resume" in err
    with pytest.raises(DataFormatError):  # --debug: the traceback
        main([*argv, "--resume", "--debug"])


def _failing_after_a_bar(args):
    from tqdm import tqdm

    bar = tqdm(total=10, desc="scoring", file=sys.stderr)
    bar.update(3)
    raise CheckpointError("the weights are corrupt")


def test_an_error_is_never_glued_onto_a_progress_bar(monkeypatch, capsys):
    monkeypatch.setattr(cli, "_info", _failing_after_a_bar)
    assert main(["info", "some_model"]) == 2
    lines = capsys.readouterr().err.split("\n")
    errors = [line for line in lines if "reward-lens: error:" in line]
    assert errors == ["reward-lens: error: CheckpointError: the weights are corrupt"]


def _warning_with_a_local_path(args):
    path = Path.cwd() / "data" / "pairs.jsonl"
    warnings.warn(f"skipped 2 records of {path}", UserWarning, stacklevel=2)
    return 0


def test_warnings_print_one_line_without_source_or_local_paths(monkeypatch, capsys):
    monkeypatch.setattr(cli, "_info", _warning_with_a_local_path)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert main(["info", "some_model"]) == 0
    err = capsys.readouterr().err
    assert err == f"warning: skipped 2 records of {Path('data', 'pairs.jsonl')}\n"


def test_debug_shows_the_traceback(capsys):
    missing = "no/such/checkpoint"
    for argv in (["info", missing], ["score", missing, "p.jsonl"], ["check", missing]):
        assert main(argv) in (1, 2)  # one line, no traceback
        assert "Traceback" not in capsys.readouterr().err
        with pytest.raises(MissingFileError):
            main([*argv, "--debug"])
        with pytest.raises(MissingFileError):
            main(["--debug", *argv])


def test_debug_shows_the_traceback_of_eval():
    with pytest.raises((FileNotFoundError, OSError)):
        main(["eval", "rewardbench", "--scores", "no/such/file.jsonl", "--debug"])


def test_debug_shows_the_traceback_of_sweep_stats():
    from reward_lens_tl.errors import ScoreFileError

    with pytest.raises(ScoreFileError, match="does not exist"):  # raised, not printed
        main(["sweep-stats", "no/such.csv", "--debug"])


def test_info_on_a_causal_lm_points_to_the_implicit_reward(capsys):
    assert main(["info", str(zoo_path("policy"))]) == 0
    out = capsys.readouterr().out
    assert "LlamaForCausalLM" in out and "pooling rule:   none (no reward head)" in out
    assert "reward_lens_tl.implicit.ImplicitRewardModel.from_pretrained" in out
    assert "register" not in out and "parity" not in out


PAIRS = [
    {"prompt": "how bake bread", "chosen": "oven flour", "rejected": "bomb", "subset": "zoo"},
    {"prompt": "explain laptop", "chosen": "screen code", "rejected": "soup", "subset": "zoo"},
]


@pytest.mark.parametrize("layout", ["json", "jsonl", "jsonl.gz", "noext-list", "noext-lines"])
def test_files_with_a_byte_order_mark_load(tmp_path, layout):
    lines = layout in ("jsonl", "jsonl.gz", "noext-lines")
    text = "".join(json.dumps(r) + "\n" for r in PAIRS) if lines else json.dumps(PAIRS)
    data = "\ufeff".encode() + text.encode()
    name = {"noext-list": "pairs", "noext-lines": "pairs2"}.get(layout, f"pairs.{layout}")
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if layout.endswith(".gz") else data)
    assert sniff_format(path) == "rewardbench"
    pairs = load_pairs(path)
    assert [(p.prompt, p.chosen, p.rejected) for p in pairs] == [
        (r["prompt"], r["chosen"], r["rejected"]) for r in PAIRS
    ]
