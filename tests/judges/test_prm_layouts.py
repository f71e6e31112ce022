"""PRM layouts beyond the plain ones: Qwen2.5-Math-PRM's (remote-code class, loaded without
its code), non-linear heads in the step analysis, the step view's reading-position warning."""

import json
import warnings

import pytest
import torch
from transformers import Qwen2Config

from reward_lens_tl.judges import HookedPRM, first_error_analysis
from reward_lens_tl.judges.prm_module import Qwen2ForProcessRewardModel
from reward_lens_tl.padding import ReadingPositionWarning
from reward_lens_tl.testing import perturb_, tiny_causal_lm, tiny_tokenizer

STEPS = ["w20 w21", "w22", "w23 w24"]
FIXED = ["w20 w21", "w27", "w23 w24"]


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


@pytest.mark.parametrize("family,head", [("qwen2", "classifier"), ("gemma2", "lm")])
def test_first_error_analysis_on_non_linear_heads(family, head):
    hf, tok = tiny_causal_lm(family, head=head)
    kind = "classifier" if head == "classifier" else "token"
    labels = ("+", "-") if kind == "classifier" else ("w41", "w42")
    prm = HookedPRM.from_pretrained(
        hf, tok, kind=kind, step_tag="w40", labels=labels, step_format="{step} {tag}"
    )
    assert prm.scored_head
    res = first_error_analysis(prm, "w12 w13", STEPS, 1, correct_steps=FIXED)
    # the lens applies the whole head at every layer: its final site is the step's margin
    torch.testing.assert_close(res.lens.values[-1, 0], res.margins[1], atol=1e-5, rtol=0)
    assert not res.margins.requires_grad and res.patch is not None and res.patch.shape == (2,)
    fixed = HookedPRM.step_margins(prm, prm.encode_steps("w12 w13", FIXED).ids)[0, 1]
    assert not torch.isclose(fixed, res.margins[1])  # the patch has something to move


def test_step_view_warns_with_the_step_not_padding():
    hf, tok = tiny_causal_lm("llama")
    prm = HookedPRM.from_pretrained(hf, tokenizer=tok, step_tag="w40", labels=("w41", "w42"))
    ids = prm.encode_steps("w12 w13", STEPS).ids
    with pytest.warns(ReadingPositionWarning, match="read at step 0"):
        prm.step(0).run_with_cache(ids)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReadingPositionWarning)
        prm.step(-1).run_with_cache(ids)  # the last step is read at -1: nothing to warn about


@pytest.mark.parametrize("family", ["gemma2", "gpt2", "llama"])
def test_tied_lm_head_streams_from_a_directory(family, tmp_path):
    """A checkpoint that stores a tied LM head once (as the embedding) converts layer by layer,
    with no whole-model fallback, to the same judge as the in-memory model."""
    from reward_lens_tl.judges import HookedJudge
    from reward_lens_tl.streaming import WholeModelWarning

    hf, tok = tiny_causal_lm(family, tie_word_embeddings=True)
    hf.save_pretrained(tmp_path)
    from safetensors import safe_open

    with safe_open(str(tmp_path / "model.safetensors"), "pt") as f:
        assert "lm_head.weight" not in f.keys()  # stored once
    kw = dict(tokenizer=tok, verdict=("w10", "w11"), template="{prompt} w8 {response} w9")
    with warnings.catch_warnings():
        warnings.simplefilter("error", WholeModelWarning)
        from_dir = HookedJudge.from_pretrained(str(tmp_path), **kw)
    in_memory = HookedJudge.from_pretrained(hf, **kw)
    ids = in_memory.item_ids(["w12 w13", "w14"], ["w20 w21", "w30"])
    torch.testing.assert_close(from_dir.rewards(ids), in_memory.rewards(ids), atol=1e-5, rtol=0)
    with torch.no_grad():
        logits = hf(ids[:1]).logits[0, -1]  # Gemma-2's soft-capped, as the judge's reward
    torch.testing.assert_close(
        from_dir.rewards(ids[:1])[0], logits[10] - logits[11], atol=1e-4, rtol=0
    )
