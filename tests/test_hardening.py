"""Regression tests from the outside review of wave 1 (truncation, per-pair errors, typed
errors for bad data, unknown tokens). Each failed on the wave-1 code."""

import gzip
import json
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace as Pair

import pytest
import torch

from reward_lens_tl import HookedRewardModel, encode_conversation, pad_batch
from reward_lens_tl.data import load_hh_rlhf, load_pairs
from reward_lens_tl.errors import (
    DataFormatError,
    EmptyInputError,
    InvalidArgumentError,
    MalformedRecordError,
    MissingFileError,
    RewardLensError,
    SequenceTooLongError,
    TemplateError,
)
from reward_lens_tl.inputs import UnknownTokenWarning, _warned_unknown
from reward_lens_tl.scoring import score_pairs
from reward_lens_tl.testing import tiny_tokenizer
from reward_lens_tl.zoo import zoo_path

HH = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "data"
    / "hh_rlhf"
    / "harmless_base_test.jsonl.gz"
)
needs_hh = pytest.mark.skipif(not HH.exists(), reason="../shared/data/hh_rlhf is absent")


@pytest.fixture(scope="module")
def scalar():
    return HookedRewardModel.from_pretrained(zoo_path("scalar"))


@pytest.fixture(scope="module")
def multi():
    return HookedRewardModel.from_pretrained(zoo_path("multi"))


def _tokens(model, enc):
    return model.tokenizer.convert_ids_to_tokens(list(enc.ids))


def _words(n, start=0):
    vocab = ["soup", "pasta", "oven", "flour", "bread", "salad", "spice", "recipe", "butter"]
    return " ".join(vocab[(start + i) % len(vocab)] for i in range(n))


# -- item 3: truncation keeps the template's fixed parts ----------------------------------------
def test_right_truncation_keeps_end_of_turn_and_eos(scalar):
    enc = scalar.encode("explain how to bake bread", _words(80), truncation="right")
    toks = _tokens(scalar, enc)
    assert len(enc) <= scalar.cfg.n_ctx
    assert toks[-2:] == ["<|end|>", "<eos>"]  # the reward is read where the model expects it
    assert toks[enc.response_start - 1] == "<|assistant|>"
    assert enc.response_end == len(enc) - 2
    assert (
        toks[enc.response_start : enc.response_end]
        == _words(80).split()[: enc.response_end - enc.response_start]
    )


def test_left_truncation_keeps_bos_headers_and_the_response(scalar):
    response = "great question the oven and the flour"
    enc = scalar.encode(_words(90), response, truncation="left")
    toks = _tokens(scalar, enc)
    assert len(enc) <= scalar.cfg.n_ctx
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


def test_truncation_that_cannot_fit_is_typed(scalar):
    with pytest.raises(SequenceTooLongError, match="response alone.*'right'"):
        scalar.encode("explain", _words(90), truncation="left")
    with pytest.raises(SequenceTooLongError, match="prompt alone.*'left'"):
        scalar.encode(_words(90), "soup", truncation="right")


@needs_hh
def test_left_truncation_on_real_hh_keeps_every_conversation_whole(scalar, multi):
    pairs = load_hh_rlhf(HH, limit=150)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownTokenWarning)
        encoded, too_long = [], 0
        for p in pairs:
            try:
                encoded.append(scalar.encode(p.prompt, p.chosen, truncation="left"))
            except SequenceTooLongError as err:  # a 60-word answer cannot fit 64 tokens
                assert "response alone" in str(err)
                too_long += 1
    assert len(encoded) >= 100 and len(encoded) + too_long == len(pairs)
    for enc in encoded:
        toks = _tokens(scalar, enc)
        assert len(enc) <= scalar.cfg.n_ctx
        assert toks[:2] == ["<bos>", "<|user|>"], toks
        assert toks[enc.response_start - 1] == "<|assistant|>"
        assert toks[-2:] == ["<|end|>", "<eos>"]
    # the gated model finds its gating position (after the prompt) in every one of them
    ids, mask = pad_batch(encoded[:40], multi.pad_token_id)
    with torch.no_grad():
        assert torch.isfinite(multi.rewards(ids, mask)).all()


# -- item 4: one long pair does not stop the run ------------------------------------------------
def _long_and_short_pairs():
    return [
        Pair(prompt="explain how to bake bread", chosen=_words(90), rejected="the bomb"),
        Pair(prompt="explain how to bake bread", chosen="the oven", rejected="the bomb"),
        Pair(prompt=_words(90), chosen="soup", rejected="poison"),
        Pair(prompt="explain how to bake bread", chosen="the flour", rejected="the weapon"),
    ]


def test_score_pairs_raise_names_the_pair(scalar):
    with pytest.raises(SequenceTooLongError, match=r"^pair 0.*on_error='skip'"):
        score_pairs(scalar, _long_and_short_pairs())


def test_score_pairs_skip_reports_index_and_reason(scalar):
    scores = score_pairs(scalar, _long_and_short_pairs(), on_error="skip", batch_size=1)
    assert [s.index for s in scores.skipped] == [0, 2]
    assert all("max_length" in s.reason for s in scores.skipped)
    frame = scores.to_dataframe()
    assert frame["index"].tolist() == [1, 3]
    alone = score_pairs(scalar, _long_and_short_pairs()[1:2])
    assert abs(float(scores.margins[0]) - float(alone.margins[0])) < 1e-5
    assert scores.skipped_dataframe()["index"].tolist() == [0, 2]


@needs_hh
def test_score_pairs_on_real_hh_with_a_small_context(scalar):
    pairs = load_hh_rlhf(HH, limit=20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownTokenWarning)
        with pytest.raises(SequenceTooLongError, match="^pair 0 \\(record 0\\)"):
            score_pairs(scalar, pairs)
        scores = score_pairs(scalar, pairs, on_error="skip")
    assert len(scores.indices) + len(scores.skipped) == 20
    assert set(scores.indices).isdisjoint(s.index for s in scores.skipped)
    assert scores.to_dataframe()["record"].tolist() == list(scores.indices)


def test_bad_batch_size_and_empty_pair_set(scalar):
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        score_pairs(scalar, _long_and_short_pairs()[1:2], batch_size=0)
    with pytest.raises(EmptyInputError, match="empty"):
        score_pairs(scalar, [])
    with pytest.raises(InvalidArgumentError, match="on_error"):
        score_pairs(scalar, _long_and_short_pairs()[1:2], on_error="ignore")


# -- item 6: typed errors -----------------------------------------------------------------------
def _hh_line(i):
    return json.dumps(
        {
            "chosen": f"\n\nHuman: q{i}\n\nAssistant: a",
            "rejected": f"\n\nHuman: q{i}\n\nAssistant: b",
        }
    )


def test_non_utf8_line_is_skipped_alone(tmp_path):
    f = tmp_path / "pairs.jsonl"
    f.write_bytes(
        (_hh_line(0) + "\n").encode() + b'{"chosen": "\xff\xfe"}\n' + (_hh_line(2) + "\n").encode()
    )
    with pytest.warns(UserWarning, match="skipped 1"):
        pairs = load_hh_rlhf(f, skip_bad=True)
    assert len(pairs) == 2 and [p.record for p in pairs] == [0, 2]
    assert "UTF-8" in pairs.skipped[0].reason
    with pytest.raises(MalformedRecordError, match="record 1.*UTF-8"):
        load_hh_rlhf(f)


def test_binary_truncated_empty_and_unknown_files(tmp_path):
    binary = tmp_path / "x.jsonl"
    binary.write_bytes(b"\x00\x01\x02\x89PNG\x00" * 20)
    with pytest.raises(DataFormatError, match="x.jsonl.*binary"):
        load_pairs(binary)
    gz = tmp_path / "y.jsonl.gz"
    gz.write_bytes(
        gzip.compress(("\n".join(_hh_line(i) for i in range(200)) + "\n").encode())[:300]
    )
    with pytest.raises(DataFormatError, match="y.jsonl.gz.*truncated"):
        load_hh_rlhf(gz)
    empty = tmp_path / "z.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(EmptyInputError, match="z.jsonl.*empty"):
        load_pairs(empty)
    with pytest.raises(DataFormatError, match="unknown format 'csv'"):
        load_pairs(empty, format="csv")
    with pytest.raises(MissingFileError) as info:
        load_pairs(tmp_path / "missing.jsonl")
    assert isinstance(info.value, FileNotFoundError)


def test_template_rejection_and_empty_ids_are_typed(scalar):
    system = [{"role": "system", "content": "soup"}, {"role": "user", "content": "soup"}]
    with pytest.raises(TemplateError, match="system"):
        scalar.encode(system, "soup")
    with pytest.raises(EmptyInputError):
        pad_batch([[]], 0)
    with pytest.raises(EmptyInputError):
        scalar.rewards(torch.zeros((1, 0), dtype=torch.long))


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "reward_lens_tl.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_cli_prints_one_line_errors_and_fails_fast_on_a_bad_csv(tmp_path):
    out = _cli(
        "score",
        str(tmp_path / "no_model"),
        str(tmp_path / "no.jsonl"),
        "--csv",
        str(tmp_path / "nope" / "x.csv"),
    )
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "x.csv" in lines[0] and "Traceback" not in out.stderr
    out = _cli("score", str(zoo_path("scalar")), str(tmp_path / "no.jsonl"))
    assert (
        out.returncode != 0 and "MissingFileError" in out.stderr and "Traceback" not in out.stderr
    )
    out = _cli("score", str(zoo_path("scalar")), str(tmp_path / "no.jsonl"), "--debug")
    assert out.returncode != 0 and "Traceback" in out.stderr


@needs_hh
def test_cli_csv_has_record_indices(tmp_path):
    csv = tmp_path / "s.csv"
    out = _cli(
        "score",
        str(zoo_path("scalar")),
        str(HH),
        "--limit",
        "12",
        "--on-error",
        "skip",
        "--truncation",
        "left",
        "--csv",
        str(csv),
    )
    assert out.returncode == 0, out.stderr
    import pandas as pd

    frame = pd.read_csv(csv)
    assert frame["record"].tolist() == frame["index"].tolist()  # one HH record per pair
    skipped = [
        int(line.split()[1]) for line in out.stdout.splitlines() if line.startswith("  pair ")
    ]
    assert sorted(frame["record"].tolist() + skipped) == list(range(12)) and skipped


# -- item 8: unknown tokens are not silent --------------------------------------------------------
def test_unknown_tokens_warn_once_and_name_the_template(scalar):
    _warned_unknown.clear()
    with pytest.warns(UnknownTokenWarning, match="chat template"):
        scalar.encode("tell me about cooking stuff", "sure , here you go my friend")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnknownTokenWarning)
        scalar.encode("tell me about cooking stuff", "sure , here you go my friend")  # once
        scalar.encode("explain how to bake bread", "the oven and the flour")  # known words


def test_errors_are_all_reward_lens_errors():
    for cls in (
        DataFormatError,
        EmptyInputError,
        InvalidArgumentError,
        TemplateError,
        MissingFileError,
    ):
        assert issubclass(cls, RewardLensError)


# -- item 5: index arguments are checked, never wrapped ----------------------------------------
def test_patching_layers_do_not_wrap(scalar):
    from reward_lens_tl.patching import activation_patching, attribution_patching

    chosen = scalar.encode("explain how to bake bread", "the oven and the flour")
    rejected = scalar.encode("explain how to bake bread", "the bomb and the flour")
    with pytest.raises(InvalidArgumentError, match="layer 5 out of range"):
        activation_patching(scalar, chosen, rejected, site="resid_pre", layers=[5])
    with pytest.raises(InvalidArgumentError, match="layer 3 out of range"):
        attribution_patching(scalar, chosen, rejected, site="resid_pre", layers=[3])
    with pytest.raises(InvalidArgumentError, match="integer"):
        activation_patching(scalar, chosen, rejected, site="z", layers=[1.5])
    with pytest.raises(InvalidArgumentError, match="head 4 out of range"):
        activation_patching(scalar, chosen, rejected, site="z", heads=[4])
    with pytest.raises(InvalidArgumentError, match="head -1 out of range"):
        activation_patching(scalar, chosen, rejected, site="z", heads=[-1])
    last = activation_patching(scalar, chosen, rejected, site="resid_pre", layers=[-1])
    explicit = activation_patching(scalar, chosen, rejected, site="resid_pre", layers=[2])
    assert torch.equal(last.values, explicit.values)  # Python's negative indexing only


def test_other_index_arguments_are_checked(scalar, multi):
    from reward_lens_tl.attribution import direct_attribution
    from reward_lens_tl.lens import reward_lens

    ids = torch.tensor([scalar.encode("explain how to bake bread", "the oven").ids])
    with pytest.raises(InvalidArgumentError, match="layer 7"):
        reward_lens(scalar, ids, layers=[7])
    with pytest.raises(InvalidArgumentError, match="integer"):
        direct_attribution(scalar, ids, positions=[2.7])
    with pytest.raises(InvalidArgumentError, match="objective index 3 out of range"):
        direct_attribution(multi, ids, objective=3)
    with pytest.raises(InvalidArgumentError, match="integer"):
        direct_attribution(multi, ids, objective=True)


# -- item 7: ground-truth tools on a user's own contrast pairs ----------------------------------
def _prompt_side_pairs(model, n=8, seed=0):
    """The prompt's topic word changes; the response (same tokens) only matches the edited
    topic. The lookup's query sits on the response words, not on the edited token."""
    import random

    from reward_lens_tl.contrast import ContrastPair
    from reward_lens_tl.zoo.vocab import FILLER_WORDS, TOPICS

    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        t_edit, t_base = rng.sample(sorted(TOPICS), 2)
        response = " ".join(rng.sample(TOPICS[t_edit], 3) + rng.sample(FILLER_WORDS, 2))
        base = model.encode(f"explain {rng.choice(TOPICS[t_base])}", response)
        edited = model.encode(f"explain {rng.choice(TOPICS[t_edit])}", response)
        pairs.append(
            ContrastPair.from_ids(
                base.ids, edited.ids, response_start=edited.response_start, feature="prompt_topic"
            )
        )
    return pairs


def test_contrast_pair_from_texts_and_ids(scalar):
    from reward_lens_tl.contrast import ContrastPair

    pair = ContrastPair.from_texts(
        scalar,
        "explain how to bake bread",
        "the oven and the flour",
        "the oven and the bomb",
        feature="my_harm",
    )
    assert pair.edited_positions == (pair.response_start + 4,) and pair.same_length
    assert scalar.tokenizer.convert_ids_to_tokens([pair.edited.ids[pair.edited_positions[0]]]) == [
        "bomb"
    ]
    insert = ContrastPair.from_ids([1, 5, 6, 2], [1, 5, 9, 6, 2], response_start=2)
    assert insert.edited_positions == (2,) and not insert.same_length
    with pytest.raises(InvalidArgumentError, match="at least one edited position"):
        ContrastPair.from_ids([1, 5, 2], [1, 5, 2], response_start=2)
    with pytest.raises(InvalidArgumentError, match="outside"):
        ContrastPair.from_ids([1, 5, 2], [1, 6, 2], response_start=2, edited_positions=[9])


def test_ground_truth_tools_accept_user_pairs(scalar):
    from reward_lens_tl.contrast import ContrastPair
    from reward_lens_tl.observational import observational_ground_truth
    from reward_lens_tl.patching import atp_recall, localization

    words = ["oven", "flour", "bread", "soup", "pasta", "salad", "spice", "butter"]
    pairs = [
        ContrastPair.from_texts(
            scalar,
            "explain how to bake bread",
            f"the {w} and the flour",
            f"the {w} and the {h}",
            feature="my_harm",
        )
        for w in words
        for h in ("bomb", "poison")
    ]
    table = localization(scalar, pairs)
    assert table.share("planted", "resid_pre 0") == 1.0  # the harmful word is the unit at L0
    rows = atp_recall(scalar, pairs[:4], sites=("z",))
    assert {r["method"] for r in rows} == {"atp", "atp*"} and all(r["pairs"] == 4 for r in rows)
    report = observational_ground_truth(scalar, pairs=pairs)
    finding = report["my_harm"]
    assert finding.completeness_error < 1e-4 and finding.mean_margin < -2.0
    assert finding.planted_source_share is not None


def test_causal_ground_truth_default_cannot_miss_a_prompt_side_mechanism(scalar):
    from reward_lens_tl.patching import causal_ground_truth

    pairs = _prompt_side_pairs(scalar)
    assert all(p.edited_positions == (3,) for p in pairs)  # the prompt's topic word
    result = causal_ground_truth(scalar, pairs=pairs, k=3)
    assert result.head_sets.at == "all"
    assert result.head_sets.shared_set(0.9) is not None  # found with heads at every position
    assert result.head_sets_at_edit is not None and result.head_sets_at_edit.at == "planted"
    assert result.head_sets_at_edit.shared_set(0.9) is None  # nothing at the edited token
