"""`reward_lens_tl.sweep.cli`: `reward-lens sweep` and `reward-lens sweep-stats` write their
tables and figures."""

from __future__ import annotations

import json

from reward_lens_tl.cli import main
from reward_lens_tl.zoo import zoo_path
from reward_lens_tl.zoo.vocab import TOPICS
from tests.sweep.conftest import FIXTURE_CSV


def test_sweep_stats_writes_the_tau_heat_map_as_html_or_a_static_image(tmp_path, capsys):
    path = tmp_path / "scores.csv"
    path.write_text(FIXTURE_CSV)
    page = tmp_path / "taus.html"
    assert main(["sweep-stats", str(path), "--plot", str(page)]) == 0
    html = page.read_text()
    assert '<script src="http' not in html  # plotly.js is in the page: it opens offline
    assert "Plotly.newPlot" in html
    assert "model a" in html and ("model/b" in html or "model\\u002fb" in html)  # whole names
    for suffix, magic in ((".png", b"\x89PNG"), (".svg", b"<?xml"), (".pdf", b"%PDF")):
        image = tmp_path / f"taus{suffix}"
        assert main(["sweep-stats", str(path), "--plot", str(image)]) == 0
        assert image.read_bytes().startswith(magic), suffix
    capsys.readouterr()
    assert main(["sweep-stats", str(path), "--plot", str(tmp_path / "taus.txt")]) == 2
    err = capsys.readouterr().err
    assert ".html" in err and ".png" in err and err.count("\n") == 1
    assert not (tmp_path / "taus.txt").exists()


def test_cli_sweep_writes_ranked_csv_and_plots(tmp_path, capsys):
    import pandas as pd

    out = tmp_path / "sweep"
    argv = ["sweep", str(zoo_path("scalar")), "--prompt", "how bake bread", "--out", str(out)]
    assert main([*argv, "--check-retokenization"]) == 0
    frame = pd.read_csv(out / "sweep.csv")
    assert len(frame) == 115 and list(frame["rank"][:3]) == [1, 2, 3]
    assert set(frame["candidate"][:10]) == set(TOPICS["cooking"])
    assert (out / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (out / "sweep.html").read_text()
    assert "Plotly.newPlot" in page and '<script src="http' not in page  # offline
    assert "recipe" in page  # the top candidates' labels
    summary = json.loads((out / "summary.json").read_text())
    assert summary["retokenization"] == {"checked": 115, "changed": 0}
    assert "top:" in capsys.readouterr().out
