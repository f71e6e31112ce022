"""A checkpoint is untrusted input: no remote code, no prompt, no silently random weights.

Each test here failed before ``reward_lens_tl.checkpoint`` existed (wave 1 prompted "[y/N]" and
ran the checkpoint's code on "y", loaded a file missing a layer with random weights, and raised
raw library errors for corrupt files).
"""

import json
import subprocess
import sys
import textwrap

import pytest
import torch
from safetensors.torch import load_file, save_file

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.errors import (
    CheckpointError,
    CheckpointWeightsError,
    MissingFileError,
    RewardLensError,
    TokenizerLoadError,
    UnsafeCheckpointError,
)
from reward_lens_tl.testing import tiny_reward_model, tiny_tokenizer


@pytest.fixture()
def saved(tmp_path):
    hf = tiny_reward_model("llama")
    hf.save_pretrained(tmp_path)
    tiny_tokenizer().save_pretrained(tmp_path)
    return tmp_path, hf


def _remote_code_checkpoint(path):
    marker = path / "EXECUTED"
    (path / "config.json").write_text(
        json.dumps(
            {
                "model_type": "evil_rm",
                "architectures": ["EvilForSequenceClassification"],
                "auto_map": {
                    "AutoConfig": "configuration_evil.EvilConfig",
                    "AutoModelForSequenceClassification": "modeling_evil.EvilModel",
                },
            }
        )
    )
    code = f"open({str(marker)!r}, 'w').write('ran')\nfrom transformers import PretrainedConfig\n"
    code += "class EvilConfig(PretrainedConfig):\n    model_type = 'evil_rm'\n"
    (path / "configuration_evil.py").write_text(code)
    (path / "modeling_evil.py").write_text(code)
    return marker


def test_remote_code_refused_without_prompt_even_when_stdin_says_yes(tmp_path):
    marker = _remote_code_checkpoint(tmp_path)
    script = textwrap.dedent(
        f"""
        from reward_lens_tl import HookedRewardModel
        from reward_lens_tl.errors import UnsafeCheckpointError
        try:
            HookedRewardModel.from_pretrained({str(tmp_path)!r})
        except UnsafeCheckpointError as err:
            print("REFUSED", err)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        input="y\ny\n",
        capture_output=True,
        text=True,
        timeout=300,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", **_pythonpath()},
    )
    assert "REFUSED" in out.stdout, out.stdout + out.stderr
    assert "auto_map" in out.stdout
    assert "[y/N]" not in out.stdout + out.stderr
    assert not marker.exists(), "the checkpoint's code was executed"


def _pythonpath():
    import os

    return {k: v for k, v in os.environ.items() if k in ("PYTHONPATH", "HOME")}


def test_remote_code_refused_in_process(tmp_path, monkeypatch):
    marker = _remote_code_checkpoint(tmp_path)
    monkeypatch.setattr("builtins.input", lambda *a: pytest.fail("read standard input"))
    with pytest.raises(UnsafeCheckpointError, match="auto_map"):
        HookedRewardModel.from_pretrained(tmp_path)
    assert not marker.exists()


def test_missing_layer_is_refused_with_tensor_names(saved):
    path, _ = saved
    weights = load_file(path / "model.safetensors")
    kept = {k: v for k, v in weights.items() if ".layers.1." not in k}
    save_file(kept, path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(CheckpointWeightsError, match=r"missing.*model\.layers\.1\."):
        HookedRewardModel.from_pretrained(path)


def test_unexpected_tensor_is_refused(saved):
    path, _ = saved
    weights = load_file(path / "model.safetensors")
    weights["lm_head.weight"] = torch.zeros(3, 4)
    save_file(weights, path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(CheckpointWeightsError, match="unexpected.*lm_head.weight"):
        HookedRewardModel.from_pretrained(path)


def test_num_labels_disagreeing_with_head(saved):
    path, _ = saved
    weights = load_file(path / "model.safetensors")
    weights["score.weight"] = torch.zeros(3, weights["score.weight"].shape[1])
    save_file(weights, path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(CheckpointWeightsError, match="score.weight.*num_labels"):
        HookedRewardModel.from_pretrained(path)


def test_truncated_safetensors_names_the_file(saved):
    path, _ = saved
    file = path / "model.safetensors"
    file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="model.safetensors.*truncated"):
        HookedRewardModel.from_pretrained(path)


def test_malformed_config_names_the_file(saved):
    path, _ = saved
    (path / "config.json").write_text('{"model_type": "llama", ')
    with pytest.raises(CheckpointError, match="config.json"):
        HookedRewardModel.from_pretrained(path)


def test_corrupt_tokenizer_is_not_called_unsafe(saved):
    path, _ = saved
    (path / "tokenizer.json").write_text('{"version": "1.0", "model": {')
    with pytest.raises(TokenizerLoadError, match="tokenizer=") as info:
        HookedRewardModel.from_pretrained(path)
    assert not isinstance(info.value, UnsafeCheckpointError)


def test_missing_directory_and_config(tmp_path):
    with pytest.raises(MissingFileError, match="does not exist"):
        HookedRewardModel.from_pretrained(tmp_path / "nope")
    with pytest.raises(MissingFileError, match="config.json") as info:
        HookedRewardModel.from_pretrained(tmp_path)
    assert isinstance(info.value, FileNotFoundError) and isinstance(info.value, RewardLensError)


def test_clean_checkpoint_still_loads_with_parity_and_quietly(saved, capfd):
    path, hf = saved
    model = HookedRewardModel.from_pretrained(path)
    captured = capfd.readouterr()
    assert "Loading weights" not in captured.out + captured.err
    assert "LOAD REPORT" not in captured.out + captured.err
    ids = torch.tensor([[1, 7, 8, 9, 2]])
    with torch.no_grad():
        torch.testing.assert_close(
            model.rewards(ids), hf(input_ids=ids).logits[:, 0], atol=1e-4, rtol=0
        )


def _rewrite_header(file, edit):
    """Rewrite a safetensors file's JSON header with ``edit(header)``, keeping its data bytes."""
    raw = file.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + n])
    edit(header)
    new = json.dumps(header).encode()
    file.write_bytes(len(new).to_bytes(8, "little") + new + raw[8 + n :])


@pytest.mark.parametrize(
    "lie, words",
    [
        ({"dtype": "F16"}, "declares F16"),  # F16 over F32-sized data
        ({"shape_factor": 2}, "does not describe its data"),
        ({"dtype": "F17"}, "no safetensors tensor has"),
        ({"shift": 4}, "overlapping or gapped"),
    ],
)
def test_a_header_that_lies_about_its_data_is_refused_naming_the_tensor(saved, lie, words):
    path, _ = saved
    file = path / "model.safetensors"
    name = "score.weight"

    def edit(header):
        entry = header[name]
        if "dtype" in lie:
            entry["dtype"] = lie["dtype"]
        if "shape_factor" in lie:
            entry["shape"] = [entry["shape"][0] * lie["shape_factor"], *entry["shape"][1:]]
        if "shift" in lie:  # move one span inside another, keeping its length
            start, stop = entry["data_offsets"]
            entry["data_offsets"] = [start + lie["shift"], stop + lie["shift"]]

    _rewrite_header(file, edit)
    with pytest.raises(CheckpointError, match=f"{name}.*{words}|{words}.*{name}") as info:
        HookedRewardModel.from_pretrained(path)
    assert "SafetensorError" not in type(info.value).__name__


def test_a_known_architecture_with_its_own_code_warns_and_check_says_so(saved):
    from reward_lens_tl.checkpoint import AutoMapIgnoredWarning
    from reward_lens_tl.diagnostics import check

    path, hf = saved
    config = json.loads((path / "config.json").read_text())
    config["auto_map"] = {"AutoModelForSequenceClassification": "modeling_custom.CustomRM"}
    (path / "config.json").write_text(json.dumps(config))
    (path / "modeling_custom.py").write_text("raise SystemExit('executed')\\n")
    with pytest.warns(AutoMapIgnoredWarning, match="modeling_custom.CustomRM"):
        model = HookedRewardModel.from_pretrained(path)
    ids = torch.tensor([[1, 5, 6, 7, 2]])
    with torch.no_grad():
        assert torch.allclose(model.rewards(ids), hf(input_ids=ids).logits[:, 0], atol=1e-4)
    report = check(path)
    assert report.status("load") == "warn" and not report.failed
    load_row = next(r for r in report.rows if r.check == "load")
    assert "modeling_custom.CustomRM" in load_row.detail and "not run" in load_row.detail
