"""``reward-lens score`` in a real process: one-line errors without a traceback (a traceback
with ``--debug``), a bad ``--csv`` path refused before any work, and CSV rows that carry their
record indices. Each test failed on the wave-1 code (split from the wave-1 review's regression
file). Slow tier: each command starts a Python process that imports torch."""

import subprocess
import sys

import pytest

from reward_lens_tl.zoo import zoo_path

HH_HARMLESS = "hh_rlhf/harmless_base_test.jsonl.gz"
pytestmark = pytest.mark.slow


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "reward_lens_tl.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_cli_prints_one_line_errors_and_fails_fast_on_a_bad_csv(tmp_path):
    out = _cli(
        "score",
        str(tmp_path / "no_model"),
        str(tmp_path / "no.jsonl"),
        "--csv",
        str(tmp_path / "nope" / "x.csv"),
    )
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "x.csv" in lines[0] and "Traceback" not in out.stderr
    out = _cli("score", str(zoo_path("scalar")), str(tmp_path / "no.jsonl"))
    assert (
        out.returncode != 0 and "MissingFileError" in out.stderr and "Traceback" not in out.stderr
    )
    out = _cli("score", str(zoo_path("scalar")), str(tmp_path / "no.jsonl"), "--debug")
    assert out.returncode != 0 and "Traceback" in out.stderr


@pytest.mark.data
def test_cli_csv_has_record_indices(tmp_path, shared_file):
    csv = tmp_path / "s.csv"
    out = _cli(
        "score",
        str(zoo_path("scalar")),
        str(shared_file(HH_HARMLESS)),
        "--limit",
        "12",
        "--on-error",
        "skip",
        "--truncation",
        "left",
        "--csv",
        str(csv),
    )
    assert out.returncode == 0, out.stderr
    import pandas as pd

    frame = pd.read_csv(csv)
    assert frame["record"].tolist() == frame["index"].tolist()  # one HH record per pair
    skipped = [
        int(line.split()[1]) for line in out.stdout.splitlines() if line.startswith("  pair ")
    ]
    assert sorted(frame["record"].tolist() + skipped) == list(range(12)) and skipped
