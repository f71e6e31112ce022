"""Truncation cuts content, never the template (``truncation="left"`` / ``"right"``): BOS, role
headers, end-of-turn and EOS survive, the oldest turns go first, and a conversation that cannot
fit is a typed error. Each test failed on the wave-1 code (split from the wave-1 review's
regression file; ``truncation="both"`` is in ``test_inputs_truncation_both.py``)."""

import warnings

import pytest
import torch

from reward_lens_tl import encode_conversation, pad_batch
from reward_lens_tl.data import load_hh_rlhf
from reward_lens_tl.errors import SequenceTooLongError
from reward_lens_tl.inputs import UnknownTokenWarning
from reward_lens_tl.testing import tiny_tokenizer

HH_HARMLESS = "hh_rlhf/harmless_base_test.jsonl.gz"


def _tokens(model, enc):
    return model.tokenizer.convert_ids_to_tokens(list(enc.ids))


def _words(n, start=0):
    vocab = ["soup", "pasta", "oven", "flour", "bread", "salad", "spice", "recipe", "butter"]
    return " ".join(vocab[(start + i) % len(vocab)] for i in range(n))


def test_right_truncation_keeps_end_of_turn_and_eos(zoo_scalar):
    enc = zoo_scalar.encode("explain how to bake bread", _words(80), truncation="right")
    toks = _tokens(zoo_scalar, enc)
    assert len(enc) <= zoo_scalar.cfg.n_ctx
    assert toks[-2:] == ["<|end|>", "<eos>"]  # the reward is read where the model expects it
    assert toks[enc.response_start - 1] == "<|assistant|>"
    assert enc.response_end == len(enc) - 2
    assert (
        toks[enc.response_start : enc.response_end]
        == _words(80).split()[: enc.response_end - enc.response_start]
    )


def test_left_truncation_keeps_bos_headers_and_the_response(zoo_scalar):
    response = "great question the oven and the flour"
    enc = zoo_scalar.encode(_words(90), response, truncation="left")
    toks = _tokens(zoo_scalar, enc)
    assert len(enc) <= zoo_scalar.cfg.n_ctx
    assert toks[:2] == ["<bos>", "<|user|>"] and toks.count("<bos>") == 1
    assert toks[enc.response_start - 2 : enc.response_start] == ["<|end|>", "<|assistant|>"]
    assert toks[enc.response_start : enc.response_end] == response.split()
    assert toks[-2:] == ["<|end|>", "<eos>"]
    # the kept prompt content is the *end* of the original prompt
    kept = toks[2 : enc.response_start - 2]
    assert kept == _words(90).split()[-len(kept) :] and len(kept) > 0


def test_left_truncation_drops_oldest_turns_first():
    tok = tiny_tokenizer()
    prompt = [
        {"role": "user", "content": " ".join(f"w{i}" for i in range(6, 30))},
        {"role": "assistant", "content": "w40 w41"},
        {"role": "user", "content": "w50 w51"},
    ]
    enc = encode_conversation(tok, prompt, "w60", max_length=10, truncation="left")
    toks = tok.convert_ids_to_tokens(list(enc.ids))
    assert toks[0] == "<bos>" and toks[-1] == "<eos>" and len(enc) <= 10
    assert toks[enc.response_start - 1] == "<|assistant|>" and "w50" in toks and "w51" in toks
    assert "w6" not in toks  # the oldest content goes first
    assert prompt[0]["content"].startswith("w6 ")  # the input is not modified


def test_truncation_that_cannot_fit_is_typed(zoo_scalar):
    with pytest.raises(SequenceTooLongError, match="response alone.*'right'"):
        zoo_scalar.encode("explain", _words(90), truncation="left")
    with pytest.raises(SequenceTooLongError, match="prompt alone.*'left'"):
        zoo_scalar.encode(_words(90), "soup", truncation="right")


@pytest.mark.data
def test_left_truncation_on_real_hh_keeps_every_conversation_whole(
    zoo_scalar, zoo_multi, shared_file
):
    pairs = load_hh_rlhf(shared_file(HH_HARMLESS), limit=150)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownTokenWarning)
        encoded, too_long = [], 0
        for p in pairs:
            try:
                encoded.append(zoo_scalar.encode(p.prompt, p.chosen, truncation="left"))
            except SequenceTooLongError as err:  # a 60-word answer cannot fit 64 tokens
                assert "response alone" in str(err)
                too_long += 1
    assert len(encoded) >= 100 and len(encoded) + too_long == len(pairs)
    for enc in encoded:
        toks = _tokens(zoo_scalar, enc)
        assert len(enc) <= zoo_scalar.cfg.n_ctx
        assert toks[:2] == ["<bos>", "<|user|>"], toks
        assert toks[enc.response_start - 1] == "<|assistant|>"
        assert toks[-2:] == ["<|end|>", "<eos>"]
    # the gated model finds its gating position (after the prompt) in every one of them
    ids, mask = pad_batch(encoded[:40], zoo_multi.pad_token_id)
    with torch.no_grad():
        assert torch.isfinite(zoo_multi.rewards(ids, mask)).all()
