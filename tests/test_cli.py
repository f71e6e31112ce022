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


@pytest.fixture(scope="module")
def zoo_report(tmp_path_factory):
    """``make demo``: ``reward-lens report`` with no arguments, the report on the zoo."""
    out = tmp_path_factory.mktemp("zoo_report")
    assert main(["report", "--out", str(out)]) == 0
    numbers = json.loads((out / "report.json").read_text())
    return out, numbers, (out / "report.md").read_text(), (out / "report.html").read_text()


def test_make_demo_is_the_report_on_the_zoo(zoo_report):
    out, numbers, report, page = zoo_report
    assert "agreement with the hidden rule 100% of 8 pairs" in report
    for feature in ("topic_match", "harmful", "sycophancy", "length"):
        assert (out / f"lens_{feature}.png").stat().st_size > 1000
        assert (out / f"attribution_{feature}.png").stat().st_size > 1000
    assert (out / "margins.png").exists()
    names = ("patching_resid_topic_match", "localization", "observational_vs_causal")
    for name in (*names, "sae_ground_truth", "sae_margin_harmful", "probes", "probe_cascade"):
        assert (out / f"{name}.png").stat().st_size > 1000
    assert "## Observational vs causal" in report and "## SAE features" in report
    assert "Token views" in page and page.count('class="plotly-graph-div"') >= 20
    assert "## Reward-hacking probes" in report and "Invariance probes flagged: 0 of" in report
    completeness = float(report.split("latents + terms − reward = ")[1].split(".\n")[0])
    assert completeness < 1e-4
    stored = numbers["sae"]["harmful_margin_attribution"]["completeness_error"]
    assert f"{stored:.1e}" == f"{completeness:.1e}"
    # the localization table: at resid_pre 0 the planted span is the top unit in every pair
    rows = [r for r in report.splitlines() if "| resid_pre 0 |" in r]
    assert len(rows) == 3 and all(r.split("|")[3].strip() == "100%" for r in rows)
    first = [r for r in numbers["localization"] if r["site"] == "resid_pre 0"]
    assert [r["top1_planted"] for r in first] == [1.0, 1.0, 1.0]


def test_zoo_report_numbers_equal_the_api(zoo_report):
    """Two of the zoo report's numbers recomputed another way: the agreement with the hidden
    rule (rewards of the rule-labelled pairs) and a planted feature's mean margin (rewards of
    its contrast pairs, which the report gets from the attribution's sum)."""
    import torch

    from reward_lens_tl import HookedRewardModel
    from reward_lens_tl.contrast import encode_contrast
    from reward_lens_tl.inputs import pad_batch
    from reward_lens_tl.report import zoo_pairs
    from reward_lens_tl.zoo import load_task

    _, numbers, _, _ = zoo_report
    model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    task = load_task().task

    def rewards(encoded):
        ids, mask = pad_batch(encoded, model.pad_token_id)
        return model.rewards(ids, mask).detach()

    pairs = zoo_pairs(task)
    chosen = rewards([model.encode(p.prompt, p.chosen) for p in pairs])
    rejected = rewards([model.encode(p.prompt, p.rejected) for p in pairs])
    assert numbers["accuracy"] == float((chosen > rejected).float().mean())
    torch.testing.assert_close(torch.tensor(numbers["chosen"]), chosen, rtol=0, atol=1e-5)
    encoded = [encode_contrast(p) for p in task.contrast_pairs("harmful", 24, seed=7)]
    margin = rewards([e for e, _ in encoded]) - rewards([b for _, b in encoded])
    row = next(r for r in numbers["planted_features"] if r["feature"] == "harmful")
    torch.testing.assert_close(torch.tensor(row["mean margin"]), margin.mean(), atol=1e-4, rtol=0)


def test_zoo_report_best_of_n_equals_the_api(zoo_report):
    """The optimisation-pressure section's ladder is ``best_of_n``'s, and its top rung's proxy
    is the mean over prompts of each prompt's best sample (n = n_max: the maximum)."""
    from reward_lens_tl.pressure import best_of_n
    from reward_lens_tl.pressure.training import zoo_prompts
    from reward_lens_tl.pressure.zoo import zoo_gold
    from reward_lens_tl.report.pressure import N_MAX, N_PROMPTS

    _, numbers, report, _ = zoo_report
    ladder = best_of_n("policy", "scalar", zoo_prompts(N_PROMPTS), n_max=N_MAX, gold=zoo_gold)
    stored = numbers["pressure"]["ladder"]
    assert stored["n"] == [1, 2, 4, 8, 16, 32]
    assert stored["proxy"] == pytest.approx(ladder.to_dataframe()["proxy"].tolist(), abs=1e-6)
    assert stored["proxy"][-1] == pytest.approx(float(ladder.proxy_samples.max(1).values.mean()))
    assert "## Optimisation pressure: best-of-n" in report


#: Each section of the former ``make demo`` markdown report, the section of the one report
#: that holds it now, and a text of the former section found there.
FORMER_DEMO_SECTIONS = {
    "Rewards and margins": ("Scores", "rule_margin"),
    "Reward lens and direct attribution on planted features": (
        "Planted features",
        "lens: first site at 50%",
    ),
    "Activation patching": ("Where the planted features sit", "Denoising resid_pre on one"),
    "Observational vs causal": ("Observational vs causal", "Spearman between methods"),
    "SAE features": ("SAE features", "Concept vectors (difference of means"),
    "Reward-hacking probes": ("Reward-hacking probes", "Probes in the zoo's vocabulary"),
    "Benchmarks and why they fail": ("Failures explained", "A RewardBench-style set"),
    "Implicit reward of the DPO policy vs the explicit reward model": (
        "Implicit reward of the DPO policy vs the explicit reward model",
        "held-out rule-labelled pairs the two agree on",
    ),
    # the demo's last section linked the HTML page of the same pairs; it is this page now
    "HTML report": ("Token views", "most preferred response"),
}


@pytest.mark.parametrize("former", sorted(FORMER_DEMO_SECTIONS))
def test_every_former_demo_section_is_in_the_one_report(zoo_report, former):
    import html

    _, numbers, report, page = zoo_report
    title, text = FORMER_DEMO_SECTIONS[former]
    assert title in numbers["sections"]
    in_markdown = report.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    in_page = page.split(f"<h2>{title}</h2>", 1)[1].split("</section>", 1)[0]
    assert text in in_markdown and html.escape(text) in in_page


def test_markdown_and_html_render_the_same_sections(zoo_report):
    """Both files come from the same section objects: the same titles in the same order, the
    same tables cell for cell (numbers formatted once) and the same paragraphs."""
    from reward_lens_tl.report.page import format_cell
    from tests.report.test_build import html_paragraphs, html_tables, md_paragraphs, md_tables

    _, numbers, report, page = zoo_report
    titles = [line[3:] for line in report.splitlines() if line.startswith("## ")]
    assert titles == ["Data quality", *numbers["sections"]]
    tables = md_tables(report)
    assert len(tables) >= 15 and tables == html_tables(page)
    paragraphs, notes = md_paragraphs(report), html_paragraphs(page)
    views = [p for p in paragraphs if p not in notes]  # the token views' stand-ins
    assert [p for p in paragraphs if p in notes] == notes
    tokens = [p for p in views if p.startswith(("The most", "The least"))]
    edits = [p for p in views if p.startswith("Pair ") and "editing the" in p]  # counterfactuals
    assert len(tokens) == 2 and len(edits) == len(numbers["counterfactual"]) == 3
    assert len(views) == len(tokens) + len(edits)
    # the patching grids are figures (tokens on the columns), their top cells said in both
    assert sum(p.startswith("Pair ") and "restoring most" in p for p in notes) == 3
    assert page.count("patching grid of pair") == 3
    harmful = next(r for r in numbers["planted_features"] if r["feature"] == "harmful")
    assert f"| harmful | {format_cell(harmful['mean margin'], 'signed')} |" in report


@pytest.mark.slow  # tens of seconds: the slow tier (make test-all / CI)
def test_zoo_report_on_the_multi_objective_model(tmp_path):
    """``reward-lens report MODEL`` without a pair file writes the zoo report; every section runs
    on the ArmoRM-style model (patching reads the gated score, and the concept vectors' cosines
    use one objective: a gated score has no single direction)."""
    assert main(["report", str(zoo_path("multi")), "--out", str(tmp_path)]) == 0
    report = (tmp_path / "report.md").read_text()
    assert "of objective `helpfulness`" in report and "## SAE features" in report
    assert report.startswith("# reward-lens report: multi on the zoo's pairs\n")
    assert "<h2>Token views</h2>" in (tmp_path / "report.html").read_text()
