"""`reward_lens_tl.probes.probe`: probes on every input format (text and ids insertion, the
zoo's own format) and the built-in probes on a vocabulary that knows no English."""

import random

import numpy as np
import pytest

from reward_lens_tl.inputs import EncodedConversation, encode_conversation
from reward_lens_tl.probes import Probe, builtin_probes, run_probes
from reward_lens_tl.probes.runner import apply_probe, as_items
from tests.probes.conftest import tiny


@pytest.mark.parametrize("chat_template", [True, False])
@pytest.mark.parametrize(
    "at, expected",
    [
        ("response_start", ("w6 w7", "w10 w11 w8 w9")),
        ("response_end", ("w6 w7", "w8 w9 w10 w11")),
        ("prompt_end", ("w6 w7 w10 w11", "w8 w9")),
    ],
)
def test_insert_equals_encoding_the_edited_text(chat_template, at, expected):
    """Text insertion at each place gives exactly the template's (or the HH fallback's)
    encoding of the edited conversation, and ids insertion the same ids."""
    model = tiny(chat_template)
    item = as_items(model, [("w6 w7", "w8 w9")])[0]
    text = " w10 w11" if at == "prompt_end" else "w10 w11"
    out = apply_probe(model, Probe.insert(text, at=at, name="p"), item, random.Random(0))
    want = encode_conversation(model.tokenizer, *expected)
    assert out == want
    if at != "prompt_end":
        ids = apply_probe(model, Probe.insert([10, 11], at=at), item, random.Random(0))
        assert ids.ids == want.ids


def test_custom_format_token_ids(zoo_scalar, zoo_task):
    """The zoo's own format: with response_end recorded, insertion at the response end lands
    before <|end|>; built from ids and response_start alone, before the trailing EOS."""
    ex = zoo_task.make_example(("how", "bake", "bread"), ("soup", "the"))
    full = EncodedConversation(ex.input_ids, ex.response_start, len(ex.input_ids) - 2)
    bare = EncodedConversation(ex.input_ids, ex.response_start)
    probe = Probe.insert([99], at="response_end", name="x")
    a = apply_probe(zoo_scalar, probe, as_items(zoo_scalar, [full])[0], random.Random(0))
    b = apply_probe(zoo_scalar, probe, as_items(zoo_scalar, [bare])[0], random.Random(0))
    assert a.ids == ex.input_ids[:-2] + (99,) + ex.input_ids[-2:]
    assert b.ids == ex.input_ids[:-1] + (99,) + ex.input_ids[-1:]
    assert a.response_ids() == (*ex.input_ids[ex.response_start : -2], 99)


def test_builtin_probes_run_and_skip_with_reasons():
    """Every built-in runs on a model whose vocabulary knows no English: edits that change
    nothing or find nothing are skipped per example with the reason, never dropped."""
    model = tiny(True)
    examples = [(f"w{6 + i} w7", f"w{8 + i} w9") for i in range(10)]
    report = run_probes(model, examples, builtin_probes(), seed=0)
    frame, skipped = report.to_dataframe(), report.skipped_frame()
    assert len(frame) == len(builtin_probes())
    assert (frame.n + frame.n_skipped == 10).all()
    reasons = set(skipped.reason)
    assert "' ' encodes to no tokens with this tokenizer" in reasons  # whitespace
    assert any("no member of the swap groups" in r for r in reasons)  # synonyms
    assert not np.isinf(frame.select_dtypes("number").to_numpy(dtype=float)).any()
