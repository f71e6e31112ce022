"""`reward_lens_tl.sweep.exact`: the exact path equals scoring the full `model.encode` of each
candidate, and keeps a token whose text would re-encode differently."""

from __future__ import annotations

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.sweep import exact_sweep, retokenization_changes, vocabulary_candidates
from reward_lens_tl.testing import tiny_reward_model, tiny_tokenizer


def merging_tokenizer() -> PreTrainedTokenizerFast:
    """tiny_tokenizer's vocabulary, except that ids 90-96 are two-word tokens ("w6 w7", ...):
    their decoded text re-encodes as two other tokens, as a BPE merge would not survive."""
    base = tiny_tokenizer()
    vocab = dict(base.get_vocab())
    for i in range(90, 97):
        del vocab[f"w{i}"]
        vocab[f"w{i - 84} w{i - 83}"] = i
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        unk_token="<unk>",
        additional_special_tokens=["<|user|>", "<|assistant|>"],
    )
    tok.chat_template = base.chat_template
    return tok


def test_exact_sweep_equals_scoring_the_full_encode():
    model = HookedRewardModel.from_pretrained(
        tiny_reward_model("llama"), tokenizer=merging_tokenizer()
    )
    cands = vocabulary_candidates(model)
    assert len(cands) == 97 - 6 and cands.excluded == {"special": 6}
    report = retokenization_changes(model, "w8 w9 w10", cands)
    # exactly the seven two-word tokens change under decode -> re-encode
    assert report.n_changed == 7 and report.share_changed == pytest.approx(7 / 91)
    assert {ids for _, ids, _ in report.changed} == {(i,) for i in range(90, 97)}
    result = exact_sweep(model, "w8 w9 w10", cands)
    keep = report.round_trip_indices(cands)
    assert len(keep) == 84
    decode = model.tokenizer.decode
    expected = torch.stack([model.score("w8 w9 w10", decode(list(cands.ids[i]))) for i in keep])
    torch.testing.assert_close(result.scores[keep], expected, atol=1e-5, rtol=0)
    # a round-tripped two-word token scores a different conversation: the sweep keeps the token
    i = cands.ids.index((90,))
    assert result.encoded(i).response_ids() == (90,)
