"""``truncation="both"``: a pair whose prompt and response are both long fits a short context by
cutting the start of the prompt and the end of the response, the template intact (issue 23,
item 4); and hand-built ``EncodedConversation``s refuse bad positions with a typed error
(item 3). Each test failed before: "both" was not a mode, left/right only pointed at each other,
and bad positions raised a plain ``ValueError`` or were truncated silently."""

import warnings

import pytest
import torch

from reward_lens_tl import encode_conversation, pad_batch
from reward_lens_tl.data import load_hh_rlhf
from reward_lens_tl.errors import InvalidArgumentError, SequenceTooLongError
from reward_lens_tl.inputs import EncodedConversation, UnknownTokenWarning, split_budget
from reward_lens_tl.scoring import score_pairs

HH_HARMLESS = "hh_rlhf/harmless_base_test.jsonl.gz"


@pytest.fixture(scope="module")
def words(zoo_scalar):
    """The zoo vocabulary's plain words, each one token (WordLevel), in a fixed order."""
    vocab = zoo_scalar.tokenizer.get_vocab()
    plain = sorted(w for w in vocab if w.isalpha() and w.islower())
    assert len(plain) >= 80
    return plain


def _tokens(model, enc):
    return model.tokenizer.convert_ids_to_tokens(list(enc.ids))


@pytest.mark.parametrize(
    ("n_prompt", "n_response", "max_length", "kept_prompt", "kept_response"),
    [(80, 80, 64, 29, 29), (10, 80, 64, 10, 48), (80, 10, 64, 48, 10), (80, 80, 63, 28, 29)],
)
def test_both_keeps_prompt_end_and_response_start(
    zoo_scalar, words, n_prompt, n_response, max_length, kept_prompt, kept_response
):
    """64 tokens − 6 template tokens = 58 for content: each side keeps up to half (the odd one
    goes to the response), a short side gives the rest to the other; the ids are the template's
    ids of the shortened text."""
    prompt_words, response_words = words[:n_prompt], words[-n_response:]
    tok = zoo_scalar.tokenizer
    enc = encode_conversation(
        tok,
        " ".join(prompt_words),
        " ".join(response_words),
        max_length=max_length,
        truncation="both",
    )
    expected = encode_conversation(
        tok,
        " ".join(prompt_words[n_prompt - kept_prompt :]),
        " ".join(response_words[:kept_response]),
    )
    assert enc.ids == expected.ids and len(enc) == max_length
    assert enc.response_start == expected.response_start
    assert enc.response_end == expected.response_end
    assert enc.dropped == (n_prompt - kept_prompt, n_response - kept_response)
    toks = _tokens(zoo_scalar, enc)
    assert toks[:2] == ["<bos>", "<|user|>"] and toks.count("<bos>") == 1
    assert toks[enc.response_start - 2 : enc.response_start] == ["<|end|>", "<|assistant|>"]
    assert toks[-2:] == ["<|end|>", "<eos>"] and enc.response_end == max_length - 2
    assert toks[2 : enc.response_start - 2] == prompt_words[-kept_prompt:]  # the prompt's END
    assert toks[enc.response_start : enc.response_end] == response_words[:kept_response]  # START


def test_both_leaves_a_fitting_conversation_alone(zoo_scalar, words):
    text, response = " ".join(words[:5]), " ".join(words[5:9])
    enc = zoo_scalar.encode(text, response, truncation="both")
    assert enc == zoo_scalar.encode(text, response) and enc.dropped == (0, 0) and len(enc) == 15


def test_both_drops_the_oldest_turns_first(zoo_scalar, words):
    prompt = [
        {"role": "user", "content": " ".join(words[:40])},
        {"role": "assistant", "content": " ".join(words[40:50])},
        {"role": "user", "content": " ".join(words[50:60])},
    ]
    enc = zoo_scalar.encode(prompt, " ".join(words[:70]), truncation="both")
    toks = _tokens(zoo_scalar, enc)
    # three prompt turns + the response: 10 template tokens, 54 for content, 27 a side
    assert len(enc) == 64 and toks[-2:] == ["<|end|>", "<eos>"]
    assert toks[enc.response_start : enc.response_end] == words[:27]
    kept = [t for t in toks[: enc.response_start] if not t.startswith("<")]
    assert kept == words[33:60] and enc.dropped == (33, 43)
    assert toks.count("<|user|>") == 2 and toks[1] == "<|user|>" and toks[2] == words[33]
    assert prompt[0]["content"] == " ".join(words[:40])  # the input is not modified


def test_split_budget_is_the_documented_rule():
    assert split_budget(58, 100, 100) == (29, 29)
    assert split_budget(57, 100, 100) == (28, 29)  # the odd token goes to the response
    assert split_budget(58, 3, 100) == (3, 55)
    assert split_budget(58, 100, 0) == (58, 0)
    assert split_budget(58, 20, 20) == (20, 20)


def test_left_and_right_point_to_both_when_neither_fits(zoo_scalar, words):
    long_prompt, long_response = " ".join(words[:80]), " ".join(words[-80:])
    with pytest.raises(SequenceTooLongError, match="response alone.*prompt is long too.*'both'"):
        zoo_scalar.encode(long_prompt, long_response, truncation="left")
    with pytest.raises(SequenceTooLongError, match="prompt alone.*response is long too.*'both'"):
        zoo_scalar.encode(long_prompt, long_response, truncation="right")
    with pytest.raises(SequenceTooLongError, match="'both'"):
        zoo_scalar.encode(long_prompt, long_response)  # truncation="error" lists the modes
    # a short side still gets the one mode that fits
    with pytest.raises(SequenceTooLongError, match="use 'right'$"):
        zoo_scalar.encode("soup", long_response, truncation="left")


def test_both_cannot_fit_a_template_longer_than_the_context(zoo_scalar, words):
    with pytest.raises(SequenceTooLongError, match="template alone.*takes 6 tokens.*max_length=5"):
        zoo_scalar.encode(" ".join(words[:9]), " ".join(words[:9]), max_length=5, truncation="both")
    with pytest.raises(InvalidArgumentError, match="truncation must be one of"):
        zoo_scalar.encode("soup", "soup", truncation="middle")


@pytest.mark.data
def test_both_fits_every_real_hh_pair_on_the_64_token_model(zoo_scalar, shared_file):
    pairs = load_hh_rlhf(shared_file(HH_HARMLESS), limit=300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownTokenWarning)  # HH text is unknown to the zoo
        neither = 0
        for p in pairs:  # the pairs neither 'left' nor 'right' can fit
            try:
                zoo_scalar.encode(p.prompt, p.chosen, truncation="left")
            except SequenceTooLongError:
                try:
                    zoo_scalar.encode(p.prompt, p.chosen, truncation="right")
                except SequenceTooLongError:
                    neither += 1
        encoded = [zoo_scalar.encode(p.prompt, p.chosen, truncation="both") for p in pairs]
        scores = score_pairs(zoo_scalar, pairs, truncation="both", on_error="skip", batch_size=64)
    assert neither >= 5  # the case that had no mode before
    assert len(scores.skipped) == 0 and scores.indices == tuple(range(len(pairs)))
    assert torch.isfinite(scores.chosen).all()
    for enc in encoded:
        toks = _tokens(zoo_scalar, enc)
        assert len(enc) <= zoo_scalar.cfg.n_ctx
        assert toks[:2] == ["<bos>", "<|user|>"] and toks.count("<bos>") == 1
        assert toks[enc.response_start - 1] == "<|assistant|>"
        assert toks[enc.response_end :] == ["<|end|>", "<eos>"]
    ids, mask = pad_batch(encoded, zoo_scalar.pad_token_id)
    pos = zoo_scalar.pool_positions(ids, mask)
    read = zoo_scalar.tokenizer.convert_ids_to_tokens(ids[torch.arange(len(ids)), pos].tolist())
    assert set(read) == {"<eos>"} and (pos == ids.shape[1] - 1).all()  # the template's last
    with torch.no_grad():
        per_position = zoo_scalar(ids, attention_mask=mask)[..., 0]
    torch.testing.assert_close(
        scores.chosen, per_position[torch.arange(len(ids)), pos], atol=1e-4, rtol=1e-4
    )


# -- item 3: hand-built encodings refuse bad positions -----------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"ids": (1, 7, 8, 2), "response_start": 9}, r"response_start=9 is outside \[0, 4\]"),
        ({"ids": (1, 7, 8, 2), "response_start": -1}, "response_start=-1 is outside"),
        ({"ids": (1, 7, 8, 2), "response_start": 3, "response_end": 2}, "response_end=2"),
        ({"ids": (1, 7, 8, 2), "response_start": 1, "response_end": 5}, "response_end=5"),
        ({"ids": (1, 7, 8, 2), "response_start": 1.5}, "response_start must be an int"),
        ({"ids": (1, 7, 8, 2), "response_start": True}, "must be an int, got the bool"),
        ({"ids": (1, 7.9, 8, 2), "response_start": 1}, "a token id must be an int"),
    ],
)
def test_encoded_conversation_refuses_bad_positions(kwargs, match):
    with pytest.raises(InvalidArgumentError, match=match):
        EncodedConversation(**kwargs)


def test_encoded_conversation_accepts_integer_tensors_and_numpy():
    import numpy as np

    enc = EncodedConversation(torch.tensor([1, 7, 8, 2]), np.int64(2), torch.tensor(3))
    assert enc.ids == (1, 7, 8, 2) and (enc.response_start, enc.response_end) == (2, 3)
    assert type(enc.response_start) is int and type(enc.ids[0]) is int
