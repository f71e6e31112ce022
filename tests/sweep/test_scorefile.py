"""`reward_lens_tl.sweep.scorefile`: score files, hand-computed Kendall τ, and the shared score
files against scipy."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from reward_lens_tl.cli import main
from reward_lens_tl.sweep import kendall_tau_matrix, read_score_csv, score_file_stats
from tests.figures import check_figure
from tests.sweep.conftest import FIXTURE_CSV

SHARED = Path(
    os.environ.get(
        "REWARD_LENS_SHARED_DATA", Path(__file__).resolve().parents[3] / "shared" / "data"
    )
)
SCORE_CSVS = sorted((SHARED / "optimal_pessimal").glob("scores_*.csv"))


def test_score_file_counts_are_integers(tmp_path):
    path = tmp_path / "scores.csv"
    path.write_text(FIXTURE_CSV)
    summary = score_file_stats(path)["summary"]
    assert summary["c"]["n"] == 4 and type(summary["c"]["n"]) is int
    assert type(summary["c"]["mean"]) is float


def test_score_csv_reproduces_hand_computed_tau(tmp_path, capsys):
    path = tmp_path / "scores.csv"
    path.write_text(FIXTURE_CSV)
    # a vs b: 10 pairs, discordant (x,y) and (z,u): (8 - 2) / 10
    # a vs c (v missing): 6 pairs, (x,y) tied in c, 5 concordant: 5 / sqrt(6 * 5)
    # b vs c: (x,y) tied in c; (z,u) discordant; 4 concordant: (4 - 1) / sqrt(6 * 5)
    expected = {"model a | model/b": 0.6, "model a | c": 5 / 30**0.5, "model/b | c": 3 / 30**0.5}
    assert main(["sweep-stats", str(path), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["models"] == ["model a", "model/b", "c"]
    assert list(out["kendall_tau"]) == list(expected)
    for key, tau in expected.items():
        assert out["kendall_tau"][key] == pytest.approx(tau, abs=1e-12)
    assert out["n_shared"]["model a | c"] == 4
    assert out["top"]["model a"][:2] == ["v", "u"]


@pytest.mark.data
@pytest.mark.skipif(not SCORE_CSVS, reason=f"shared score CSVs not found under {SHARED}")
def test_shared_score_files():
    from scipy.stats import kendalltau

    for path in SCORE_CSVS:
        stats = score_file_stats(path)
        models = stats["models"]
        assert len(models) == 10 and stats["n_candidates"] == 7530
        assert len(stats["kendall_tau"]) == 45
        frame = read_score_csv(path)
        a, b = models[0], models[-1]
        ref = kendalltau(frame[a], frame[b], variant="b").statistic
        assert stats["kendall_tau"][f"{a} | {b}"] == pytest.approx(ref, abs=1e-12)
        assert all(-1 <= t <= 1 for t in stats["kendall_tau"].values())
    matrix = kendall_tau_matrix(read_score_csv(SCORE_CSVS[0]))
    torch.testing.assert_close(matrix.tau, matrix.tau.T)  # numpy arrays, symmetric
    fig = check_figure(
        matrix.plot(), static=matrix.plot(backend="matplotlib"), x_labels=matrix.names
    )
    assert list(fig.layout.xaxis.ticktext) == list(matrix.names)  # whole, and all different
