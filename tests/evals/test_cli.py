"""The eval command: scores as JSON, scoring with a model then reading back, items that do not fit
named in one line and no empty out file."""

from __future__ import annotations

import json

from reward_lens_tl.cli import main
from reward_lens_tl.evals.scores import read_scores
from reward_lens_tl.zoo import zoo_path
from tests.data.test_data import (  # the shared-data location and marker, one definition
    SHARED,
    real_data,
)
from tests.evals.conftest import LONG, PROMPT


@real_data
def test_cli_rewardmath_scores_json(capsys):
    from reward_lens_tl.cli import main

    path = SHARED / "rewardmath" / "internlm2_scores.json"
    assert main(["eval", "rewardmath", "--scores", str(path), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n"] == 483 and round(out["accuracy"], 2) == 37.27 and round(out["mrr"], 2) == 55.17
    assert out["ci"]["accuracy"][0] < out["accuracy"] < out["ci"]["accuracy"][1]


def test_cli_scores_with_a_model_then_reads_back(tmp_path, capsys):
    from reward_lens_tl.cli import main
    from reward_lens_tl.zoo import zoo_path

    data = tmp_path / "pairs.jsonl"
    rows = [{"prompt": "how bake bread", "chosen": "soup oven", "rejected": "great question the",
             "subset": "zoo", "id": i} for i in range(3)]  # fmt: skip
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "s.jsonl"
    args = ["eval", "rewardbench", str(zoo_path("scalar")), str(data), "--out", str(out)]
    assert main([*args, "--format", "json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["n"] == 3 and len(read_scores(out)) == 3
    assert main(["eval", "rewardbench", "--scores", str(out), "--format", "json"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["accuracy"] == first["accuracy"]
    assert main(["eval", "rewardmath", "--scores", str(out), "--format", "json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rewardbench scores" in err


HH_FILE = SHARED / "hh_rlhf" / "harmless_base_test.jsonl.gz"


def write_pairs(path, long_ids=("too-long",)):
    rows = [{"prompt": PROMPT, "chosen": "soup oven", "rejected": "great question the",
             "subset": "zoo", "id": f"fits-{i}"} for i in range(3)]  # fmt: skip
    rows[1:1] = [
        {"prompt": PROMPT, "chosen": LONG, "rejected": "bomb", "subset": "zoo", "id": i}
        for i in long_ids
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def last_line(err: str) -> str:
    """The error line: the last line of stderr (progress bars and warnings come before it)."""
    return err.replace("\r", "\n").strip().splitlines()[-1]


def eval_args(data, out, *extra):
    return ["eval", "rewardbench", str(zoo_path("scalar")), str(data), "--out", str(out), *extra]


def test_cli_names_the_item_that_does_not_fit_and_leaves_no_out_file(tmp_path, capsys):
    data, out = write_pairs(tmp_path / "pairs.jsonl"), tmp_path / "s.jsonl"
    assert main(eval_args(data, out)) == 2  # one chunk of 8 sequences: nothing scored
    err = last_line(capsys.readouterr().err)
    assert err.startswith("reward-lens: error:") and "item 'too-long'" in err
    assert "--on-error skip" in err
    assert not out.exists()
    assert main(eval_args(data, out, "--batch-size", "2")) == 2  # one item per chunk
    assert "item 'too-long'" in last_line(capsys.readouterr().err)
    assert read_scores(out).ids() == ["fits-0"]  # what was scored before it is kept


def test_cli_leaves_no_empty_out_file_when_every_item_is_skipped(tmp_path, capsys):
    data = tmp_path / "pairs.jsonl"
    data.write_text(json.dumps({"prompt": PROMPT, "chosen": LONG, "rejected": "x", "id": 7}) + "\n")
    out = tmp_path / "s.jsonl"
    assert main(eval_args(data, out, "--on-error", "skip")) == 2
    assert "all 1 items were skipped" in last_line(capsys.readouterr().err)
    assert not out.exists()


def test_cli_on_error_skip_scores_the_rest_and_lists_the_item(tmp_path, capsys):
    data, out = write_pairs(tmp_path / "pairs.jsonl"), tmp_path / "s.jsonl"
    assert main(eval_args(data, out, "--on-error", "skip", "--format", "json")) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["n"] == 3 and summary["skipped"] == 1 and summary["accuracy"] == 100.0
    (skipped,) = summary["skipped_items"]
    assert skipped["id"] == "too-long" and "more than max_length=64" in skipped["reason"]
    assert read_scores(out).ids() == ["fits-0", "fits-1", "fits-2"]
    assert main(eval_args(data, out, "--on-error", "skip")) == 0  # resumes, lists it again
    table = capsys.readouterr().out
    assert "3 items; 1 skipped" in table and "skipped item 'too-long'" in table


@real_data
def test_hh_rlhf_on_the_short_context_zoo_model(tmp_path, capsys):
    out = tmp_path / "hh.jsonl"
    args = eval_args(HH_FILE, out, "--limit", "40", "--format", "json")
    assert main([*args, "--truncation", "left"]) == 2  # some pair does not fit: named
    err = last_line(capsys.readouterr().err)
    assert err.startswith("reward-lens: error:") and "item " in err and "--on-error skip" in err
    assert not out.exists() or len(read_scores(out)) > 0  # never an empty file
    assert main([*args, "--truncation", "left", "--on-error", "skip"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["n"] + summary["skipped"] == 40 and summary["skipped"] >= 1
    assert len(summary["skipped_items"]) == summary["skipped"]
    assert len(read_scores(out)) == summary["n"]
