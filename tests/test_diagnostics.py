"""``reward_lens_tl.check`` / ``reward-lens check``: diagnostics for a user's own reward model."""

import json
import re
import shutil
from pathlib import Path

import pytest

import reward_lens_tl
from reward_lens_tl.cli import main
from reward_lens_tl.diagnostics import CheckReport, CheckRow, check
from reward_lens_tl.errors import CheckpointWeightsError, InvalidArgumentError
from reward_lens_tl.inputs import encode_conversation
from reward_lens_tl.testing import tiny_reward_model, tiny_tokenizer
from reward_lens_tl.zoo import load_model, load_tokenizer, zoo_path

ZOO = zoo_path("scalar")
CHECKS = (
    "load",
    "parity with HF",
    "batch-size invariance",
    "padding side (ours)",
    "padding side (HF)",
    "reading position 1",
    "reading position 2",
    "reading position 3",
    "pad / EOS / BOS",
    "chat template",
    "determinism",
)


def _number(detail: str, after: str) -> float:
    return float(re.search(re.escape(after) + r"\s*([0-9.e+-]+)", detail).group(1))


@pytest.fixture(scope="module")
def zoo_report():
    return check(ZOO)


def test_the_zoo_model_passes_every_check(zoo_report):
    assert [r.check for r in zoo_report.rows] == list(CHECKS)
    assert {r.check: r.status for r in zoo_report.rows} == dict.fromkeys(CHECKS, "pass")
    rows = {r.check: r.detail for r in zoo_report.rows}
    assert _number(rows["parity with HF"], "max |ours − HF| =") < 1e-4
    assert _number(rows["batch-size invariance"], "max relative difference") <= 1e-4
    assert _number(rows["padding side (ours)"], "max relative difference") <= 1e-4
    assert "bitwise identical" in rows["determinism"] or "max difference" in rows["determinism"]
    # the zoo template ends "<|end|> <eos>" and pad (0) != EOS (2): read at the EOS
    assert rows["reading position 1"].split("  ←")[0].endswith("<|end|> [<eos>]")
    assert "position -1 of" in rows["reading position 1"]
    assert rows["pad / EOS / BOS"].startswith("pad 0 '<pad>', EOS 2 '<eos>', BOS 1 '<bos>'")
    assert not zoo_report.failed and zoo_report.errors == ()


def test_the_cli_prints_the_table_and_exits_0(capsys):
    assert main(["check", str(ZOO)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("reward-lens check: scalar\n")
    assert "PASS  parity with HF" in out and out.rstrip().endswith("11 pass, 0 warn, 0 fail")
    assert main(["check", str(ZOO), "--format", "json"]) == 0
    text = capsys.readouterr().out
    data = json.loads(text)
    assert data["model"] == "scalar" and data["passed"] is True and len(data["rows"]) == 11
    assert str(Path.cwd()) not in text and str(ZOO) not in text  # no local paths


def _pad_is_eos_checkpoint(path: Path) -> Path:
    model = tiny_reward_model("llama", pad_token_id=2)  # pad == eos == 2
    tok = tiny_tokenizer()
    tok.pad_token = "<eos>"
    model.save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    return path


def test_pad_equal_to_eos_warns_and_shows_where_the_reward_is_read(tmp_path, capsys):
    report = check(_pad_is_eos_checkpoint(tmp_path / "pad_eos"))
    status = {r.check: r.status for r in report.rows}
    assert not report.failed
    assert status["pad / EOS / BOS"] == "warn" and status["reading position 1"] == "warn"
    for name in ("parity with HF", "batch-size invariance", "padding side (ours)"):
        assert status[name] == "pass", name
    detail = {r.check: r.detail for r in report.rows}
    assert "pad == EOS" in detail["pad / EOS / BOS"] and "(-2)" in detail["pad / EOS / BOS"]
    reading = detail["reading position 1"]
    assert reading.split("  ←")[0].endswith("] <eos>") and "position -2 of" in reading
    assert "the trailing EOS is skipped as padding" in reading
    assert main(["check", str(tmp_path / "pad_eos")]) == 0  # warnings only
    assert "WARN  pad / EOS / BOS" in capsys.readouterr().out


def test_hf_dependence_on_padding_is_a_warning_with_numbers(tmp_path):
    """GPT-2 has absolute positions: HF's own model scores a left-padded row differently (it
    does not derive positions from the mask); ours does not."""
    path = tmp_path / "gpt2"
    tiny_reward_model("gpt2").save_pretrained(path, safe_serialization=True)
    tiny_tokenizer().save_pretrained(path)
    report = check(path)
    status = {r.check: r.status for r in report.rows}
    detail = {r.check: r.detail for r in report.rows}
    assert status["padding side (HF)"] == "warn" and status["padding side (ours)"] == "pass"
    assert _number(detail["padding side (HF)"], "left padding") > 1e-3
    assert _number(detail["padding side (HF)"], "right padding") <= 1e-4
    assert status["parity with HF"] == "pass" and not report.failed


def test_no_pad_and_no_tokenizer_are_warnings_and_parity_uses_random_ids(tmp_path):
    path = tmp_path / "bare"
    tiny_reward_model("llama", pad_token_id=None).save_pretrained(path, safe_serialization=True)
    report = check(path)
    status = {r.check: r.status for r in report.rows}
    detail = {r.check: r.detail for r in report.rows}
    assert not report.failed and status["parity with HF"] == "pass"
    assert "4 random-id rows" in detail["parity with HF"]
    assert _number(detail["parity with HF"], "max |ours − HF| =") < 1e-4
    for name in ("tokenizer", "batch-size invariance", "pad / EOS / BOS", "chat template"):
        assert status[name] == "warn", name
    assert "no pad token: batches of several sequences are impossible" in detail["pad / EOS / BOS"]
    # the tokenizer pads, the config does not: ours batches, HF's own model cannot
    tiny_tokenizer().save_pretrained(path)
    report = check(path)
    assert report.status("batch-size invariance") == "pass"
    assert report.status("padding side (HF)") == "warn"
    assert "config.json has no pad_token_id" in report.rows[4].detail


def test_a_head_the_loader_cannot_find_is_a_failed_row_and_exit_1(tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    path = tmp_path / "renamed"
    shutil.copytree(ZOO, path)
    tensors = load_file(path / "model.safetensors")
    tensors["classifier.weight"] = tensors.pop("score.weight")
    save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
    report = check(path)
    assert report.failed and [r.check for r in report.rows] == ["load"]
    assert isinstance(report.errors[0], CheckpointWeightsError)
    assert "score.weight" in report.rows[0].detail and "classifier.weight" in report.rows[0].detail
    assert main(["check", str(path)]) == 1
    assert "FAIL  load" in capsys.readouterr().out
    with pytest.raises(CheckpointWeightsError):
        main(["check", str(path), "--debug"])


def test_a_causal_lm_fails_with_a_pointer_to_the_implicit_reward():
    report = check(zoo_path("policy"))
    assert report.failed and "ImplicitRewardModel" in report.rows[0].detail


def _write_jsonl(path: Path, pairs) -> Path:
    records = [{"prompt": p, "chosen": c, "rejected": r, "subset": "x"} for p, c, r in pairs]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _unknown_share(pairs) -> float:
    tok = reward_lens_tl.HookedRewardModel.from_pretrained(ZOO).tokenizer
    encs = [encode_conversation(tok, p, r) for p, c, rej in pairs for r in (c, rej)]
    return sum(e.ids.count(tok.unk_token_id) for e in encs) / sum(len(e) for e in encs)


def test_unknown_tokens_on_the_users_data(tmp_path, capsys):
    zoo_words = [("explain how to bake bread", "great question the oven and the flour", "bomb")]
    english = [
        ("Could you summarise Hamlet?", "Prince Hamlet avenges his father.", "No."),
        ("Where is Paris?", "Paris is in France, on the Seine.", "Somewhere."),
    ]
    report = check(ZOO, data=_write_jsonl(tmp_path / "zoo.jsonl", zoo_words))
    assert report.status("unknown tokens") == "pass" and report.status("context") == "pass"
    assert report.rows[-2].detail.startswith("0.0% of ")
    report = check(ZOO, data=_write_jsonl(tmp_path / "english.jsonl", english))
    share = _unknown_share(english)
    assert share > 0.2 and report.status("unknown tokens") == "fail" and report.failed
    assert report.rows[-2].detail.startswith(f"{share:.1%} of ")
    assert main(["check", str(ZOO), "--data", str(tmp_path / "english.jsonl")]) == 1
    assert "FAIL  unknown tokens" in capsys.readouterr().out


def test_the_report_is_a_result_and_the_top_level_export():
    report = CheckReport("m", (CheckRow("a", "pass", ""), CheckRow("b", "fail", "x")))
    frame = report.to_dataframe()
    assert list(frame.columns) == ["check", "status", "detail", "severity"]
    assert report.top_k(1) == [("b", 2.0)] and report.failed
    assert reward_lens_tl.check is check and reward_lens_tl.CheckReport is CheckReport
    with pytest.raises(InvalidArgumentError, match="no check named 'c'"):
        report.status("c")
    with pytest.raises(InvalidArgumentError, match="status must be one of"):
        CheckRow("a", "ok", "")
    with pytest.raises(InvalidArgumentError, match="takes a checkpoint directory"):
        check(42)


def test_an_in_memory_converted_model_runs_the_checks_it_can(zoo_report):
    model = reward_lens_tl.HookedRewardModel.from_pretrained(ZOO)
    report = check(model)
    status = {r.check: r.status for r in report.rows}
    assert status["parity with HF"] == status["determinism"] == "warn"
    assert status["batch-size invariance"] == "pass" and not report.failed
    report = check(load_model("scalar"), tokenizer=load_tokenizer("scalar"))  # an HF module
    assert [r.check for r in report.rows] == list(CHECKS) and not report.failed
    assert {r.status for r in report.rows} == {"pass"}
