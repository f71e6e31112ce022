"""Conversations → ids: chat template without re-encoding or doubled BOS; plain fallback."""

import torch

from reward_lens_tl import HookedRewardModel, encode_conversation, pad_batch
from reward_lens_tl.testing import tiny_reward_model, tiny_tokenizer


def test_chat_template_ids_and_response_start():
    tok = tiny_tokenizer()
    enc = encode_conversation(tok, "w6 w7", "w8 w9")
    assert tok.convert_ids_to_tokens(list(enc.ids)) == [
        "<bos>",
        "<|user|>",
        "w6",
        "w7",
        "<|assistant|>",
        "w8",
        "w9",
        "<eos>",
    ]
    assert enc.response_start == 5
    assert list(enc.ids).count(tok.bos_token_id) == 1


def test_multi_turn_prompt():
    tok = tiny_tokenizer()
    prompt = [
        {"role": "user", "content": "w6"},
        {"role": "assistant", "content": "w7"},
        {"role": "user", "content": "w8"},
    ]
    enc = encode_conversation(tok, prompt, "w9")
    assert tok.convert_ids_to_tokens(list(enc.ids)) == [
        "<bos>",
        "<|user|>",
        "w6",
        "<|assistant|>",
        "w7",
        "<|user|>",
        "w8",
        "<|assistant|>",
        "w9",
        "<eos>",
    ]
    assert prompt[0] == {"role": "user", "content": "w6"}  # input untouched


def test_plain_fallback_format():
    tok = tiny_tokenizer(chat_template=False)
    enc = encode_conversation(tok, "w6", "w8 w9")
    toks = tok.convert_ids_to_tokens(list(enc.ids))
    # "<bos>" (the tokenizer's own prefix), "\n\nHuman: w6\n\nAssistant:" then " w8 w9"
    assert toks[0] == "<bos>" and toks[enc.response_start :] == ["w8", "w9"]
    assert toks.count("<bos>") == 1


def test_pad_batch_left_pads_unless_asked():
    ids, mask = pad_batch([[5, 6, 7], [8]], pad_token_id=0)
    assert ids.tolist() == [[5, 6, 7], [0, 0, 8]] and mask.tolist() == [[1, 1, 1], [0, 0, 1]]
    ids, mask = pad_batch([[5, 6, 7], [8]], pad_token_id=0, padding_side="right")
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0]] and mask.tolist() == [[1, 1, 1], [1, 0, 0]]


def test_text_scoring_matches_hf(tmp_path):
    tok = tiny_tokenizer()
    hf = tiny_reward_model("llama")
    hf.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    model = HookedRewardModel.from_pretrained(tmp_path)
    assert model.tokenizer is not None
    ids = torch.tensor([model.encode("w6 w7", "w8 w9").ids])
    with torch.no_grad():
        ref = hf(input_ids=ids).logits[0, 0]
    assert abs(float(model.score("w6 w7", "w8 w9")) - float(ref)) <= 1e-4
