"""Qwen2.5-Math-PRM's layout loads without its remote code and matches."""

from __future__ import annotations

import json

import torch
from transformers import Qwen2Config

from reward_lens_tl.judges import HookedPRM
from reward_lens_tl.judges.prm_module import Qwen2ForProcessRewardModel
from reward_lens_tl.testing import perturb_, tiny_tokenizer
from tests.judges.conftest import STEPS


def _qwen_prm_dir(tmp_path):
    cfg = Qwen2Config(
        vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, num_labels=2, pad_token_id=0,
        bos_token_id=1, eos_token_id=2, max_position_embeddings=64,
    )  # fmt: skip
    torch.manual_seed(0)
    model = perturb_(Qwen2ForProcessRewardModel(cfg)).eval()
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    # as published: the class is remote code, which must never be imported
    config["auto_map"] = {"AutoModel": "modeling_qwen2_rm.Qwen2ForProcessRewardModel"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "modeling_qwen2_rm.py").write_text("raise SystemExit('remote code ran')\n")
    return model


def test_qwen_math_prm_layout_loads_without_its_code_and_matches(tmp_path):
    hf = _qwen_prm_dir(tmp_path)
    tok = tiny_tokenizer()
    prm = HookedPRM.from_pretrained(
        str(tmp_path), kind="classifier", tokenizer=tok, step_tag="w40", step_format="{step} {tag}"
    )
    enc = prm.encode_steps(["w12 w13", "w50"], [STEPS, STEPS[:2]])
    ours = prm.rewards(enc.ids, enc.attention_mask)
    for row, n in enumerate(enc.n_steps):
        ids = enc.ids[row][enc.attention_mask[row].bool()][None]
        with torch.no_grad():
            logits = hf(ids).logits[0]
        tags = (ids[0] == 40).nonzero().flatten()
        want = torch.softmax(logits[tags], -1)[:, 1]
        torch.testing.assert_close(ours[row, :n], want, atol=1e-5, rtol=0)
    assert torch.isnan(ours[1, 2])
