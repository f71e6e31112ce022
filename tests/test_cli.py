"""The command line: the main job and the scoring command, end to end."""

import json

import pytest

from reward_lens_tl.cli import main
from reward_lens_tl.zoo import zoo_path

pytestmark = pytest.mark.skipif(
    not (zoo_path("scalar") / "model.safetensors").exists(), reason="zoo model not built"
)


def test_info(capsys):
    assert main(["info", str(zoo_path("scalar"))]) == 0
    out = capsys.readouterr().out
    assert "LlamaForSequenceClassification" in out and "padding side:   right" in out
    assert "rightmost token that is not the pad id 0" in out and "context:        64" in out
    err = float(out.split("max |converted − HF| = ")[1].split()[0])
    assert err < 1e-4


def test_info_without_loading_and_on_a_gated_model(capsys):
    assert main(["info", str(zoo_path("multi")), "--no-parity"]) == 0
    out = capsys.readouterr().out
    assert "token before the first pad id 0 (ArmoRM)" in out and "parity" not in out
    assert main(["info", str(zoo_path("multi"))]) == 0  # random tokens get the gating marker
    assert float(capsys.readouterr().out.split("HF| = ")[1].split()[0]) < 1e-4


def test_score_rewardbench_jsonl(tmp_path, capsys):
    records = [
        {
            "prompt": "how bake bread",
            "chosen": "great question soup oven",
            "rejected": "bomb rain",
            "subset": "zoo",
        },
        {
            "prompt": "explain laptop",
            "chosen": "laptop screen code",
            "rejected": "soup",
            "subset": "zoo",
        },
    ]
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records))
    out_csv = tmp_path / "scores.csv"
    assert main(["score", str(zoo_path("scalar")), str(path), "--csv", str(out_csv)]) == 0
    import pandas as pd

    frame = pd.read_csv(out_csv)
    assert len(frame) == 2 and (frame["margin"] > 0).all()
    assert "accuracy (chosen > rejected): 1.0000 over 2 pairs" in capsys.readouterr().out


def test_demo_writes_report(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path)]) == 0
    report = (tmp_path / "report.md").read_text()
    assert "Agreement with the hidden rule: 100%" in report
    for feature in ("topic_match", "harmful", "sycophancy", "length"):
        assert (tmp_path / f"lens_{feature}.png").stat().st_size > 1000
        assert (tmp_path / f"attribution_{feature}.png").stat().st_size > 1000
    assert (tmp_path / "margins.png").exists()
    names = ("patching_resid_topic_match", "localization", "observational_vs_causal")
    for name in (*names, "sae_ground_truth", "sae_margin_harmful"):
        assert (tmp_path / f"{name}.png").stat().st_size > 1000
    assert "## Observational vs causal" in report and "## SAE features" in report
    page = (tmp_path / "html" / "report.html").read_text()
    assert "Token views" in page and page.count("data:image/png;base64,") >= 3
    assert "## Reward-hacking probes" in report and "Invariance probes flagged: 0 of" in report
    assert (tmp_path / "probes.png").stat().st_size > 1000
    completeness = float(report.split("latents + terms − reward = ")[1].split(".\n")[0])
    assert completeness < 1e-4
    # the localization table: at resid_pre 0 the planted span is the top unit in every pair
    rows = [r for r in report.splitlines() if "| resid_pre 0 |" in r]
    assert len(rows) == 3 and all(r.split("|")[3].strip() == "+1.000" for r in rows)


def test_demo_runs_on_the_multi_objective_zoo_model(tmp_path):
    """Every section runs on the ArmoRM-style model: patching reads the gated score, and the
    concept vectors' cosines use one objective (a gated score has no single direction)."""
    from reward_lens_tl.zoo import zoo_path

    assert main(["demo", "--model", str(zoo_path("multi")), "--out", str(tmp_path)]) == 0
    report = (tmp_path / "report.md").read_text()
    assert "of objective `helpfulness`" in report and "## SAE features" in report
