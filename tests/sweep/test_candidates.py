"""`reward_lens_tl.sweep.candidates`: candidate ids and labels are the tokenizer's own."""

from __future__ import annotations

import pytest

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.errors import EmptyInputError, InvalidArgumentError
from reward_lens_tl.sweep import (
    CandidateSet,
    UnknownCandidateError,
    token_candidates,
    vocabulary_candidates,
    word_candidates,
)
from reward_lens_tl.testing import tiny_reward_model, tiny_tokenizer


def test_candidates_are_the_tokenizers_own_ids_and_tokens():
    """The vocabulary's candidates are every id but the tokenizer's special ids, labelled with
    its token strings; a word's ids are the tokenizer's encoding of it, repeats kept once."""
    tok = tiny_tokenizer()
    model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"), tokenizer=tok)
    want = [i for i in range(model.cfg.d_vocab) if i not in set(tok.all_special_ids)]
    cands = vocabulary_candidates(model)
    assert [c for (c,) in cands.ids] == want
    assert list(cands.labels) == tok.convert_ids_to_tokens(want)
    assert cands.excluded == {"special": model.cfg.d_vocab - len(want)}
    words = word_candidates(model, "w8 w9", ["w10 w11", "w12", "w12"])
    assert words.ids == tuple(
        tuple(tok(w, add_special_tokens=False).input_ids) for w in words.labels
    )
    assert words.ids == ((10, 11), (12,)) and words.excluded == {"duplicate": 1}
    ids = token_candidates(model, [30, 7, 30])
    assert ids.labels == ("w30", "w7") and ids.excluded == {"duplicate": 1}
    assert ids.subset([1]).ids == ((7,),) and CandidateSet(("a", "b"), ((1, 2), (3,))).max_len == 2
    with pytest.raises(UnknownCandidateError):
        token_candidates(model, [model.cfg.d_vocab])
    with pytest.raises(InvalidArgumentError, match="more than once"):
        CandidateSet(("a", "b"), ((7,), (7,)))
    with pytest.raises(EmptyInputError):
        CandidateSet((), ())
