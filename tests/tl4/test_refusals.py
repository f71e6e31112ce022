"""Typed refusals of the bridge backend: what it cannot boot, untrusted input, SAEs, old TL."""

import importlib
import json
import sys

import pytest
import torch

from tests.tl4.tl4_only import skip_unless_tl4

skip_unless_tl4()

from reward_lens_tl.bridge import boot_reward_bridge, require_bridge  # noqa: E402
from reward_lens_tl.errors import (  # noqa: E402
    ArgumentTypeError,
    BridgeUnsupportedError,
    RewardLensError,
    TransformerLensVersionError,
    UnsafeCheckpointError,
    UnsupportedArchitectureError,
)
from reward_lens_tl.testing import tiny_reward_model  # noqa: E402


def test_a_gated_model_of_another_layout_is_refused_with_the_reason():
    """ArmoRM-style models boot (tests/tl4/test_gated.py); a class of that name that is not
    this library's layout (a checkpoint's own code) cannot have its gate applied exactly."""

    class LlamaForRewardModelWithGating(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.config = tiny_reward_model("armorm").config

    with pytest.raises(UnsupportedArchitectureError, match="layout.*HookedArmoRM"):
        boot_reward_bridge(LlamaForRewardModelWithGating())


def test_unsupported_family_lists_the_supported_ones(tmp_path):
    from transformers import BertConfig, BertForSequenceClassification

    model = BertForSequenceClassification(
        BertConfig(
            num_labels=1,
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
        )
    )
    with pytest.raises(UnsupportedArchitectureError, match="LlamaForSequenceClassification"):
        boot_reward_bridge(model)
    model.save_pretrained(tmp_path)  # refused from a directory too, before any weight is read
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(UnsupportedArchitectureError, match="BertForSequenceClassification"):
        boot_reward_bridge(tmp_path)


def test_pickle_only_checkpoint_is_refused(tmp_path):
    model = tiny_reward_model("llama")
    model.save_pretrained(tmp_path, safe_serialization=True)
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(UnsafeCheckpointError, match="pickle"):
        boot_reward_bridge(tmp_path)


def test_remote_code_is_refused(tmp_path):
    tiny_reward_model("llama").save_pretrained(tmp_path, safe_serialization=True)
    config = json.loads((tmp_path / "config.json").read_text())
    config["model_type"] = "my_own_llama"
    config["auto_map"] = {"AutoModelForSequenceClassification": "modeling.MyModel"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(RewardLensError, match="remote code|auto_map|its own code"):
        boot_reward_bridge(tmp_path)


def test_not_a_model():
    with pytest.raises(ArgumentTypeError, match="checkpoint directory"):
        boot_reward_bridge(42)


def test_old_transformer_lens_is_refused_with_the_install_command():
    require_bridge()  # this environment: TransformerLens 4
    with pytest.raises(TransformerLensVersionError, match="requirements-tl4.txt"):
        require_bridge("3.9.0")
    assert issubclass(TransformerLensVersionError, ImportError)


def test_sae_tools_refuse_to_import_under_tl4(monkeypatch):
    for name in [m for m in sys.modules if m.startswith("reward_lens_tl.sae")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(BridgeUnsupportedError, match="sae_lens.*default environment"):
        importlib.import_module("reward_lens_tl.sae")
