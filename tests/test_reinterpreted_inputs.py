"""Inputs that used to be silently reinterpreted (issue 23, item 3) are refused with a typed
error that says what to do, or handled by a documented rule: float and bool ids, a list of ints
given as ids, repeated sweep candidates and score-file names, pre-encoded pairs for models with
different tokenizers, an SAE of the wrong width, a probe whose edit function is broken."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.cli import main
from reward_lens_tl.crossmodel import compare_models
from reward_lens_tl.crossmodel.sources import (
    PreEncodedPairsError,
    as_source,
    check_shared_tokenizer,
)
from reward_lens_tl.data import PreferencePair
from reward_lens_tl.errors import (
    InvalidArgumentError,
    ProbeFunctionError,
    RewardLensError,
    SAESiteError,
    ShapeMismatchError,
)
from reward_lens_tl.inputs import EncodedConversation, pad_batch
from reward_lens_tl.model import TokenIdsTypeError
from reward_lens_tl.probes import Probe, ProbeSkip, run_probes
from reward_lens_tl.sae.splice import splice_report
from reward_lens_tl.sae.testing import random_topk_sae
from reward_lens_tl.sweep import CandidateSet, distribution_summary, token_candidates, token_sweep
from reward_lens_tl.testing import random_batch, tiny_reward_model, tiny_tokenizer


@pytest.fixture(scope="module")
def tiny():
    return HookedRewardModel.from_pretrained(tiny_reward_model("llama"), tiny_tokenizer())


# -- token ids --------------------------------------------------------------------------------
#: What is not integer ids: never rounded, cast or indexed with.
NOT_IDS = {
    "fractional": [1.7, 3.2],
    "integral-floats": [1.0, 3.0],
    "float-tensor": torch.tensor([1.0, 3.0]),
    "bool-tensor": torch.tensor([True, False]),
    "bools": [True, False],
    "float-array": np.array([1.5, 2.0]),
    "nested": [[1, 2], [3, 4]],
    "text": "hello",
}


def test_pad_batch_refuses_what_is_not_integer_ids_and_keeps_integers():
    for bad in NOT_IDS.values():
        with pytest.raises(InvalidArgumentError, match="sequence 1 "):
            pad_batch([[5, 6], bad], pad_token_id=0)
    ids, mask = pad_batch([np.array([5, 6, 7]), torch.tensor([8], dtype=torch.int32), (9, 10)], 0)
    assert ids.tolist() == [[5, 6, 7], [0, 0, 8], [9, 0, 10]]  # pads after the first token
    assert mask.tolist() == [[1, 1, 1], [0, 0, 1], [1, 0, 1]]
    assert ids.dtype == torch.long


def test_rewards_of_a_list_of_ints_points_to_a_tensor(tiny):
    with pytest.raises(TokenIdsTypeError, match=r"list of ints.*torch\.tensor") as info:
        tiny.rewards([1, 5, 6, 7])
    assert "not strings" not in str(info.value)
    assert isinstance(info.value, (TypeError, RewardLensError))
    with pytest.raises(TokenIdsTypeError, match="not strings"):
        tiny.rewards(["hello"])
    with pytest.raises(TokenIdsTypeError, match="not strings"):
        tiny.rewards("hello")


def test_bool_ids_are_refused_not_indexed(tiny):
    ids = torch.tensor([[True, False, True]])
    with pytest.raises(TokenIdsTypeError, match="torch.bool") as info:
        tiny.rewards(ids)
    assert isinstance(info.value, ShapeMismatchError)


# -- repeated candidates ------------------------------------------------------------------------
def test_a_word_given_three_times_is_scored_once(zoo_scalar):
    prompt = "how bake bread"
    once = token_sweep(zoo_scalar, prompt, ["soup", "great question"])
    thrice = token_sweep(zoo_scalar, prompt, ["soup", "great question", "soup", "soup"])
    assert thrice.labels == once.labels == ("soup", "great question")
    assert thrice.candidates.excluded == {"duplicate": 2}
    torch.testing.assert_close(thrice.scores, once.scores)
    assert distribution_summary(thrice) == distribution_summary(once)
    ids = token_candidates(zoo_scalar, [43, 10, 43])
    assert ids.ids == ((43,), (10,)) and ids.excluded == {"duplicate": 1}


def test_a_hand_built_candidate_set_with_repeats_or_float_ids_is_refused(zoo_scalar):
    with pytest.raises(InvalidArgumentError, match=r"b: \[43\]"):
        CandidateSet(("a", "b", "c"), ((43,), (43,), (44, 45)))
    with pytest.raises(InvalidArgumentError, match="never rounded"):
        CandidateSet(("a",), ((43.7,),))
    with pytest.raises(InvalidArgumentError, match="never rounded"):
        token_candidates(zoo_scalar, [43, 10.5])
    assert token_candidates(zoo_scalar, [np.int64(43), torch.tensor(10)]).ids == ((43,), (10,))


def test_score_csv_with_repeated_names_is_refused(tmp_path, capsys):
    path = tmp_path / "scores.csv"
    path.write_text("name,m1,m2\nx,1,2\ny,2,1\nx,3,3\nz,4,4\n")
    assert main(["sweep-stats", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "lists 1 candidate(s) more than once ({'x': [2, 4]}" in captured.err


# -- models with different tokenizers -----------------------------------------------------------
def test_pre_encoded_pairs_for_different_tokenizers_are_refused(zoo_scalar, tiny, zoo_task):
    pair = (EncodedConversation((1, 5, 6, 7, 2), 2), EncodedConversation((1, 5, 8, 2), 2))
    with pytest.raises(PreEncodedPairsError, match="pass the pairs as text|Pass the pairs as text"):
        compare_models({"zoo": zoo_scalar, "tiny": tiny}, [pair] * 3, n_boot=10)
    contrast = zoo_task.contrast_pairs("harmful", 2, seed=0)
    with pytest.raises(PreEncodedPairsError, match=r"pairs \[0, 1\] are token ids"):
        compare_models({"zoo": zoo_scalar, "tiny": tiny}, contrast, n_boot=10)
    # text is encoded by each model itself; one shared vocabulary may take ids
    text = [PreferencePair(prompt="w6 w7", chosen="w8", rejected="w9")]
    check_shared_tokenizer([as_source(zoo_scalar, "a"), as_source(tiny, "b")], text)
    check_shared_tokenizer([as_source(zoo_scalar, "a"), as_source(zoo_scalar, "b")], [pair])


# -- SAEs ---------------------------------------------------------------------------------------
def test_add_sae_refuses_a_width_that_is_not_the_hooks():
    model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    for hook, d_in, width in [
        ("blocks.0.mlp.hook_post", 64, "d_mlp=128"),
        ("blocks.1.hook_mlp_out", 32, "d_model=64"),
        ("blocks.0.attn.hook_z", 64, "d_head=32"),
    ]:
        sae = random_topk_sae(model, hook, d_in=d_in)
        expected = f"d_in={d_in}, but that hook's activations have width {width}"
        with pytest.raises(SAESiteError, match=expected):
            model.add_sae(sae)
        assert model.acts_to_saes == {}
    # the right width splices, and exactly with the error term
    ids, mask = random_batch(2, [9, 6])
    sae = random_topk_sae(model, "blocks.0.mlp.hook_post", d_in=128)
    assert splice_report(model, sae, ids, mask).max_error_with_error_term < 1e-5


# -- probes -------------------------------------------------------------------------------------
EXAMPLES = [(f"w{6 + i}", f"w{8 + i} w9") for i in range(10)]


def test_a_probe_returning_the_wrong_type_surfaces(tiny):
    upper = Probe("upper", lambda conv: conv.text(conv.response).upper())
    with pytest.raises(ProbeFunctionError, match="probe 'upper' failed on example 0: ProbeError"):
        run_probes(tiny, EXAMPLES, [upper])


def test_a_probe_raising_a_python_error_surfaces_with_its_cause(tiny):
    def broken(conv):
        return conv.with_response(conv.response + (conv.response[99],))

    with pytest.raises(
        ProbeFunctionError, match="'broken' failed on example 0: IndexError"
    ) as info:
        run_probes(tiny, EXAMPLES, [Probe("broken", broken)])
    assert isinstance(info.value.__cause__, IndexError)


def test_a_library_refusal_on_every_example_is_a_broken_probe(tiny):
    def refused(conv):
        raise InvalidArgumentError("always refused")

    def half(conv):
        if conv.response[0] % 2:
            raise ProbeSkip("odd first token")
        raise InvalidArgumentError("refused here")

    with pytest.raises(ProbeFunctionError, match="'refused' failed on example 0.*always refused"):
        run_probes(tiny, EXAMPLES, [Probe("refused", refused)])
    report = run_probes(tiny, EXAMPLES, [Probe("half", half)])  # skips with reasons, as before
    reasons = report.skipped_frame().reason
    assert (reasons == "odd first token").sum() == 5
    assert reasons.str.contains("refused here").sum() == 5
