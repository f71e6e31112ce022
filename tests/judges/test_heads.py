"""The head adapter: the reward head is the spec's combination of the HF head's rows, its
reference rewards are HF's logits at the last real token, and a classifier PRM's first layer is
the unembed with its last layer kept beside the model."""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen2Config

from reward_lens_tl.adapters import ConversionOptions
from reward_lens_tl.errors import RewardHeadError
from reward_lens_tl.judges.heads import HeadAdapter, HeadSpec, hidden_names, model_config
from reward_lens_tl.judges.prm_module import Qwen2ForProcessRewardModel
from reward_lens_tl.testing import tiny_causal_lm


def verdict_spec(a: int, b: int) -> HeadSpec:
    return HeadSpec("lm_head", ("a-b",), (a, b), torch.tensor([[1.0, -1.0]]))


def test_an_lm_head_spec_is_the_difference_of_two_rows_and_hfs_logit_difference():
    hf, tok = tiny_causal_lm("llama")
    a, b = tok.convert_tokens_to_ids(["w10", "w11"])
    adapter = HeadAdapter(verdict_spec(a, b), "pointwise")
    head = adapter.reward_head(hf, ConversionOptions())
    weight = hf.get_output_embeddings().weight.detach()
    torch.testing.assert_close(head.W[:, 0], weight[a] - weight[b], atol=0, rtol=0)
    assert head.b.tolist() == [0.0] and head.objective_names == ("a-b",)
    ids = torch.tensor(
        [tok("w12 w13 w8 w20 w9")["input_ids"], tok("w14 w8 w21 w22 w9")["input_ids"]]
    )
    with torch.no_grad():
        logits = hf(input_ids=ids).logits[:, -1]
    expected = (logits[:, a] - logits[:, b])[:, None]
    torch.testing.assert_close(adapter.reference_rewards(hf, ids), expected, atol=1e-5, rtol=0)


def test_the_reading_position_is_the_last_real_token_or_the_last_column():
    hf, tok = tiny_causal_lm("llama")
    adapter = HeadAdapter(verdict_spec(10, 11), "pointwise")
    ids = torch.tensor([[5, 6, 7, 0, 0], [5, 6, 7, 8, 9]])
    assert adapter.pool_index(ids, 0).tolist() == [2, 4]
    assert adapter.pool_index(ids, None).tolist() == [4, 4]


def test_a_classifier_head_unembeds_with_its_first_layer_and_keeps_its_last():
    cfg = Qwen2Config(vocab_size=11, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, num_labels=2)  # fmt: skip
    torch.manual_seed(0)
    hf = Qwen2ForProcessRewardModel(cfg)
    adapter = HeadAdapter(HeadSpec("classifier", ("margin",)), "classifier")
    head = adapter.reward_head(hf, ConversionOptions())
    first, last = hf.score[0], hf.score[2]
    torch.testing.assert_close(head.W, first.weight.detach().T, atol=0, rtol=0)
    torch.testing.assert_close(head.b, first.bias.detach(), atol=0, rtol=0)
    assert head.objective_names == hidden_names(8) == tuple(f"hidden_{i}" for i in range(8))
    out = adapter.extra_modules(hf, None, fold_ln=True)["head_out"]
    torch.testing.assert_close(out.weight, last.weight.detach(), atol=0, rtol=0)
    assert HeadAdapter(verdict_spec(1, 2), "pointwise").extra_modules(hf, None, True) == {}


def test_a_head_with_the_wrong_number_of_outputs_is_refused():
    hf, _ = tiny_causal_lm("llama")
    spec = HeadSpec("lm_head", ("x", "y"), (10, 11), torch.tensor([[1.0, -1.0]]))
    with pytest.raises(RewardHeadError, match=r"has 1 outputs; expected 2"):
        HeadAdapter(spec, "pointwise").reward_head(hf, ConversionOptions())


def test_model_config_fills_in_the_architecture_without_touching_the_model():
    hf, _ = tiny_causal_lm("llama")
    hf.config.architectures = ["LlamaForCausalLM"]
    assert model_config(hf) is hf.config
    hf.config.architectures = None
    config = model_config(hf)
    assert config.architectures == [type(hf).__name__] and hf.config.architectures is None
