"""One CLI vocabulary: messages name CLI flags, one way to skip, every subcommand takes the same
model spellings (directory, hub id, zoo name), files are checked before a model loads,
`--version`, and `--help` shows the defaults. Each test failed on the previous main."""

import json
from unittest import mock

import pytest

from reward_lens_tl.cli import build_parser, main
from reward_lens_tl.zoo import zoo_path

PROMPT = "explain how to bake bread"


def test_version_and_defaults_in_help(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.startswith("reward-lens 0.")
    score = build_parser()._subparsers._group_actions[0].choices["score"]
    text = score.format_help()
    assert "(default: 16)" in text and "(default: raise)" in text and "(default: error)" in text
    assert "(default: guessed) (default" not in text  # a help that says its default keeps it


def test_one_flag_skips_malformed_records_and_unscorable_pairs(tmp_path, capsys):
    rows = [{"prompt": PROMPT, "chosen": "the oven", "rejected": "the bomb"}] * 3
    rows.append({"prompt": PROMPT, "chosen": 7})  # malformed
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(SystemExit):
        main(["score", "scalar", str(path), "--skip-bad"])  # gone: --on-error skip says it
    assert "--skip-bad" in capsys.readouterr().err
    assert main(["score", "scalar", str(path), "--on-error", "skip"]) == 0
    assert "over 3 pairs" in capsys.readouterr().out
    assert main(["score", "scalar", str(path)]) == 2
    assert "chosen" in capsys.readouterr().err


def test_messages_name_the_cli_flags(tmp_path, capsys):
    path = tmp_path / "long.jsonl"
    row = {"prompt": PROMPT + " " + "flour " * 80, "chosen": "the oven", "rejected": "the bomb"}
    path.write_text(json.dumps(row) + "\n")
    assert main(["score", "scalar", str(path)]) == 2
    err = capsys.readouterr().err
    assert "--truncation left" in err and "truncation='left'" not in err
    # the same words in what a run prints: a skipped pair's reason
    path.write_text(path.read_text() + json.dumps({**row, "prompt": PROMPT}) + "\n")
    assert main(["score", "scalar", str(path), "--on-error", "skip"]) == 0
    out = capsys.readouterr().out
    assert "skipped 1 pair" in out and "--truncation left" in out and "truncation='" not in out


def test_every_subcommand_takes_zoo_names_and_checks_files_before_loading(tmp_path, capsys):
    with mock.patch("reward_lens_tl.model.HookedRewardModel.from_pretrained") as load:
        assert main(["score", "scalar", str(tmp_path / "missing.jsonl")]) == 2
        assert main(["check", "scalar", "--data", str(tmp_path / "missing.jsonl")]) == 2
        assert main(["report", "scalar", str(tmp_path / "missing.jsonl")]) == 2
    assert load.call_count == 0
    err = capsys.readouterr().err
    assert err.count("MissingFileError") == 3 and "missing.jsonl does not exist" in err
    assert main(["info", "scalar", "--no-parity"]) == 0
    assert "LlamaForSequenceClassification" in capsys.readouterr().out
    assert main(["info", str(zoo_path("multi")), "--no-parity"]) == 0
    with pytest.raises(SystemExit):
        main(["info", "scalar", "--revision", "v1", "--no-parity", "--bogus"])
    assert main(["info", "scalar", "--revision", "v1", "--no-parity"]) == 2
    assert "zoo model 'scalar', which has no revisions" in capsys.readouterr().err
