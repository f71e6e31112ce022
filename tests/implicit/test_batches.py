"""Padded batches with response masks, checked against masks and pads written out by hand."""

from types import SimpleNamespace

import pytest
import torch

from reward_lens_tl.errors import EmptyInputError, InvalidArgumentError
from reward_lens_tl.implicit import response_masks
from reward_lens_tl.implicit.batches import batch_encodings, pair_chunks, predicting_mask
from reward_lens_tl.inputs import EncodedConversation

EOS = 2
#: no recorded response_end: the trailing EOS is the suffix; response_start=0: token 0 never counts
CONVERSATIONS = [
    EncodedConversation((1, 4, 9, 5, 7, 8, 6, 2), response_start=4, response_end=6),
    EncodedConversation((3, 5, 7, 2), response_start=2),
    EncodedConversation((8, 9, 10), response_start=0),
]


def test_response_masks_match_masks_written_by_hand():
    left_with_suffix = [
        [0, 0, 0, 0, 1, 1, 1, 1],
        [0, 0, 0, 0, 0, 0, 1, 1],
        [0, 0, 0, 0, 0, 0, 1, 1],
    ]
    right_without_suffix = [
        [0, 0, 0, 0, 1, 1, 0, 0, 0],
        [0, 0, 1, 0, 0, 0, 0, 0, 0],
        [0, 1, 1, 0, 0, 0, 0, 0, 0],
    ]
    got = response_masks(CONVERSATIONS, eos_token_id=EOS)
    assert got.dtype == torch.long and got.tolist() == left_with_suffix
    got = response_masks(
        CONVERSATIONS, include_suffix=False, eos_token_id=EOS, width=9, padding_side="right"
    )
    assert got.tolist() == right_without_suffix
    # without the EOS id the second conversation has no suffix: its last token counts
    assert response_masks(CONVERSATIONS[1:2], include_suffix=False).tolist() == [[0, 0, 1, 1]]
    with pytest.raises(InvalidArgumentError, match="width=7"):
        response_masks(CONVERSATIONS, width=7)


def test_predicting_mask_is_the_response_mask_one_position_earlier():
    resp = torch.tensor([[0, 0, 1, 1, 0, 1], [1, 0, 0, 0, 1, 1]])
    expected = torch.zeros(2, 6, dtype=torch.float64)
    for row, t in resp.nonzero().tolist():  # position t - 1 predicts token t
        if t > 0:
            expected[row, t - 1] = 1.0
    got = predicting_mask(resp, dtype=torch.float64)
    assert got.dtype == torch.float64 and torch.equal(got, expected)


def test_batch_encodings_pads_every_row_on_the_left():
    ids, attention, resp = batch_encodings(CONVERSATIONS, pad_token_id=0, eos_token_id=EOS)
    assert ids.tolist() == [
        [1, 4, 9, 5, 7, 8, 6, 2],
        [0, 0, 0, 0, 3, 5, 7, 2],
        [0, 0, 0, 0, 0, 8, 9, 10],
    ]
    assert attention.tolist() == [[1] * 8, [0] * 4 + [1] * 4, [0] * 5 + [1] * 3]
    assert resp.tolist() == [
        [0, 0, 0, 0, 1, 1, 1, 1],
        [0, 0, 0, 0, 0, 0, 1, 1],
        [0, 0, 0, 0, 0, 0, 1, 1],
    ]
    _, _, content = batch_encodings(
        CONVERSATIONS, pad_token_id=0, include_suffix=False, eos_token_id=EOS
    )
    assert content.tolist() == [
        [0, 0, 0, 0, 1, 1, 0, 0],
        [0, 0, 0, 0, 0, 0, 1, 0],
        [0, 0, 0, 0, 0, 0, 1, 1],
    ]


def test_pair_chunks_put_chosen_before_rejected():
    model = SimpleNamespace(cfg=SimpleNamespace(n_ctx=16))
    a, b, c = CONVERSATIONS
    pairs = [(a, b), (b, c), (c, a)]
    chunks = list(pair_chunks(model, pairs, batch_size=2))
    assert [n for _, n in chunks] == [2, 1]
    assert chunks[0][0] == [a, b, b, c]  # chosen of both pairs, then rejected of both
    assert chunks[1][0] == [c, a]
    with pytest.raises(EmptyInputError, match="no pairs"):
        next(pair_chunks(model, [], batch_size=2))
