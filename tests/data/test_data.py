"""Tests for ``reward_lens_tl.data``: the types, each loader on real files, and malformed input.

Tests marked ``data`` read the public reference files in ``../shared/data`` (override the folder
with ``REWARD_LENS_SHARED_DATA``) and are skipped with a reason when it is absent. Everything else
writes tiny files to ``tmp_path``.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
from pathlib import Path
from typing import Any

import pytest

from reward_lens_tl.data import (
    GridItem,
    ItemSet,
    PairSet,
    PreferencePair,
    RankedItem,
    SkippedRecord,
    SkippedRecordsWarning,
    load_hh_rlhf,
    load_llmbar,
    load_pairs,
    load_rewardbench_jsonl,
    load_rewardmath,
    load_rewardmath_scores,
    load_rmbench,
    parse_hh_transcript,
    sniff_format,
)
from reward_lens_tl.errors import EmptyInputError, MalformedRecordError

SHARED = Path(
    os.environ.get(
        "REWARD_LENS_SHARED_DATA", Path(__file__).resolve().parents[3] / "shared" / "data"
    )
)
_needs_shared = pytest.mark.skipif(
    not SHARED.is_dir(),
    reason=f"shared reference data not found at {SHARED} (set REWARD_LENS_SHARED_DATA)",
)


def real_data(test):
    """Mark a test as needing ``../shared/data`` (skipped with a reason when it is absent)."""
    return pytest.mark.data(_needs_shared(test))


def write_json(path: Path, records: Any) -> Path:
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def write_jsonl(path: Path, records: list[Any], gz: bool = False) -> Path:
    text = "".join(json.dumps(r) + "\n" for r in records)
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    return path


def hh(*turns: str) -> str:
    """An HH transcript from alternating Human / Assistant turn texts."""
    return "".join(
        f"\n\n{'Human' if i % 2 == 0 else 'Assistant'}: {t}" for i, t in enumerate(turns)
    )


# --------------------------------------------------------------------------------------------
# types


def test_pair_with_str_prompt():
    pair = PreferencePair("Hi", "Hello!", "Go away.", subset="s")
    assert pair.prompt_messages() == ({"role": "user", "content": "Hi"},)
    assert pair.messages("rejected") == (
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Go away."},
    )
    with pytest.raises(ValueError, match="which"):
        pair.messages("both")  # type: ignore[arg-type]


def test_pair_copies_its_inputs_and_hands_out_copies():
    prompt = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    metadata = {"k": 1}
    pair = PreferencePair(prompt, "a", "b", metadata=metadata)
    prompt[1]["content"] = "changed"
    prompt.append({"role": "user", "content": "more"})
    metadata["k"] = 2
    assert isinstance(pair.prompt, tuple) and len(pair.prompt) == 2
    assert pair.prompt[1]["content"] == "Hi" and pair.metadata == {"k": 1}
    pair.messages("chosen")[0]["content"] = "mutated"
    assert pair.prompt[0]["content"] == "Be brief."


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"prompt": 3}, "prompt"),
        ({"prompt": []}, "prompt"),
        ({"prompt": [{"role": "bot", "content": "x"}]}, "prompt[0].role"),
        ({"prompt": [{"role": "user", "content": 1}]}, "prompt[0].content"),
        ({"prompt": ["hi"]}, "prompt[0]"),
        ({"chosen": None}, "chosen"),
        ({"rejected": ["x"]}, "rejected"),
        ({"subset": 1}, "subset"),
        ({"metadata": [1]}, "metadata"),
    ],
)
def test_pair_validation_names_the_field(kwargs, field):
    args = {"prompt": "p", "chosen": "c", "rejected": "r", **kwargs}
    with pytest.raises(MalformedRecordError) as info:
        PreferencePair(**args)
    assert info.value.field == field
    assert f"field {field!r}" in str(info.value)


def test_ranked_item_pairs():
    item = RankedItem("q", "right", ["w0", "w1"], id="p1", metadata={"level": 2})
    assert item.wrong == ("w0", "w1")
    got = item.pairs()
    assert [(p.chosen, p.rejected) for p in got] == [("right", "w0"), ("right", "w1")]
    assert got[1].metadata == {"level": 2, "id": "p1", "wrong_index": 1}
    with pytest.raises(MalformedRecordError, match="'wrong'"):
        RankedItem("q", "right", [])
    with pytest.raises(MalformedRecordError, match="'wrong'"):
        RankedItem("q", "right", "w0")  # a str is not a list of responses


def test_grid_item_pairs_cover_the_grid_in_order():
    item = GridItem("q", ["c0", "c1", "c2"], ["r0", "r1", "r2"], id=5, subset="s", domain="d")
    got = item.pairs()
    assert len(got) == 9
    assert [(p.chosen, p.rejected) for p in got[:4]] == [
        ("c0", "r0"),
        ("c0", "r1"),
        ("c0", "r2"),
        ("c1", "r0"),
    ]
    styles = [(p.metadata["chosen_style"], p.metadata["rejected_style"]) for p in got]
    assert styles == [(i, j) for i in range(3) for j in range(3)]
    assert {p.subset for p in got} == {"s"} and got[0].metadata["id"] == 5
    with pytest.raises(MalformedRecordError, match="exactly 3"):
        GridItem("q", ["c0", "c1"], ["r0", "r1", "r2"])


def test_pair_set_is_a_read_only_sequence():
    items = [PreferencePair(f"q{i}", "c", "r", subset="ab"[i % 2]) for i in range(5)]
    skip = SkippedRecord(9, None, "chosen", "is missing", "f.jsonl")
    ps = PairSet(items, [skip], "f.jsonl")
    assert len(ps) == 5 and ps[-1].prompt == "q4" and [p.prompt for p in ps][:2] == ["q0", "q1"]
    part = ps[1:3]
    assert isinstance(part, PairSet) and len(part) == 2
    assert part.skipped == (skip,) and part.source == "f.jsonl"
    assert ps.subsets() == {"a": 3, "b": 2}
    assert [p.prompt for p in ps.filter(subset="b")] == ["q1", "q3"]
    assert len(ps.filter(subset=["a", "b"], where=lambda p: p.prompt != "q0")) == 4
    assert repr(ps) == "PairSet(5 pairs from 'f.jsonl', 1 skipped)"
    assert ps.pairs() is ps


def test_to_dataframe_flattens_metadata():
    ps = PairSet([PreferencePair("q", "c", "r", metadata={"index": 0, "subset": "clash"})])
    df = ps.to_dataframe()
    assert list(df.columns) == [
        "prompt",
        "chosen",
        "rejected",
        "subset",
        "index",
        "metadata.subset",
    ]
    assert df.loc[0, "metadata.subset"] == "clash" and df.loc[0, "subset"] is None
    assert list(PairSet().to_dataframe().columns) == ["prompt", "chosen", "rejected", "subset"]


def test_item_set_pairs_flattens():
    items = ItemSet([GridItem("q", list("abc"), list("xyz"))], source="s")
    assert isinstance(items[:1], ItemSet) and len(items.pairs()) == 9
    assert items.pairs().source == "s"


# --------------------------------------------------------------------------------------------
# HH-RLHF parsing


def test_parse_hh_transcript_multi_turn_exactly():
    text = (
        "\n\nHuman: How do I bake bread?\n\nAssistant: Do you have yeast?"
        "\n\nHuman: Yes, and flour.\n\nAssistant:  Mix them with water.\nThen knead it.  "
    )
    assert parse_hh_transcript(text) == (
        {"role": "user", "content": "How do I bake bread?"},
        {"role": "assistant", "content": "Do you have yeast?"},
        {"role": "user", "content": "Yes, and flour."},
        {"role": "assistant", "content": "Mix them with water.\nThen knead it."},
    )


def test_parse_hh_transcript_quirks():
    # repeated Assistant markers merge; "Human:" not preceded by a blank line stays as text
    text = "\n\nHuman: Hi\n\nAssistant: One.\n\nAssistant: Human: two.  Human: three"
    assert parse_hh_transcript(text) == (
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "One.\n\nHuman: two.  Human: three"},
    )
    assert parse_hh_transcript("Human: Hi\n\nAssistant:")[-1] == {
        "role": "assistant",
        "content": "",
    }
    for bad, reason in [
        ("Hello\n\nHuman: Hi\n\nAssistant: Yo", "text before"),
        ("\n\nAssistant: Hi", "start with"),
        ("\n\nHuman: Hi\n\nAssistant: Yo\n\nHuman: And?", "end with"),
        ("no markers at all", "no "),
    ]:
        with pytest.raises(MalformedRecordError, match=reason):
            parse_hh_transcript(bad)


def test_load_hh_rlhf_multi_turn(tmp_path):
    record = {
        "chosen": hh("Hi", "Hello! How can I help?", "Tell me a joke.", "Why did the..."),
        "rejected": hh("Hi", "Hello! How can I help?", "Tell me a joke.", "No."),
        "source": "demo",
    }
    path = write_jsonl(tmp_path / "hh.jsonl.gz", [record], gz=True)
    (pair,) = load_hh_rlhf(path)
    assert pair.prompt == (
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke."},
    )
    assert (pair.chosen, pair.rejected, pair.subset) == ("Why did the...", "No.", None)
    assert pair.metadata == {"source": "demo", "index": 0, "merged_turns": 0}
    assert pair.messages("chosen")[-1] == {"role": "assistant", "content": "Why did the..."}


# --------------------------------------------------------------------------------------------
# malformed input, one case table per loader

GOOD_HH = {"chosen": hh("q", "yes"), "rejected": hh("q", "no")}
GOOD_LLMBAR = {"input": "q", "output_1": "a", "output_2": "b", "label": 1}
GOOD_RMB = {"id": 1, "prompt": "q", "subset": "s", "chosen": list("abc"), "rejected": list("xyz")}
GOOD_RB = {"prompt": "q", "chosen": "a", "rejected": "b", "subset": "s", "id": 10}


_DROP = object()  # as a value in _with(): remove the field


def _with(record: dict, **changes: Any) -> dict:
    out = {**record, **changes}
    return {k: v for k, v in out.items() if v is not _DROP}


MALFORMED = [
    # (loader, file name, bad record, expected field, expected id)
    (load_hh_rlhf, "hh.jsonl", _with(GOOD_HH, rejected=_DROP), "rejected", None),
    (load_hh_rlhf, "hh.jsonl", _with(GOOD_HH, chosen=7), "chosen", None),
    (load_hh_rlhf, "hh.jsonl", _with(GOOD_HH, chosen="q: yes"), "chosen", None),
    (load_hh_rlhf, "hh.jsonl", _with(GOOD_HH, chosen=hh("q", "yes", "more?")), "chosen", None),
    (load_hh_rlhf, "hh.jsonl", _with(GOOD_HH, rejected=hh("other", "no")), "rejected", None),
    (load_hh_rlhf, "hh.jsonl", ["not", "an", "object"], "<record>", None),
    (load_llmbar, "Natural.json", _with(GOOD_LLMBAR, label=3), "label", None),
    (load_llmbar, "Natural.json", _with(GOOD_LLMBAR, label="1"), "label", None),
    (load_llmbar, "Natural.json", _with(GOOD_LLMBAR, label=True), "label", None),
    (load_llmbar, "Natural.json", _with(GOOD_LLMBAR, output_2=_DROP), "output_2", None),
    (load_rmbench, "chat_filtered.json", _with(GOOD_RMB, id=5, chosen=["a"]), "chosen", 5),
    (
        load_rmbench,
        "chat_filtered.json",
        _with(GOOD_RMB, id=6, rejected=[1, 2, 3]),
        "rejected[0]",
        6,
    ),
    (load_rmbench, "chat_filtered.json", _with(GOOD_RMB, id=7, prompt=None), "prompt", 7),
    (load_rmbench, "chat_filtered.json", _with(GOOD_RMB, id=[1]), "id", None),
    (load_rewardbench_jsonl, "rb.jsonl", _with(GOOD_RB, id=3, chosen=_DROP), "chosen", 3),
    (load_rewardbench_jsonl, "rb.jsonl", _with(GOOD_RB, id=4, subset=2), "subset", 4),
    (
        load_rewardbench_jsonl,
        "rb.jsonl",
        _with(GOOD_RB, id="x", prompt=[{"role": "bot", "content": "q"}]),
        "prompt[0].role",
        "x",
    ),
]


def _write(name: str, records: list[Any], path: Path) -> Path:
    return (write_jsonl if name.endswith(".jsonl") else write_json)(path / name, records)


@pytest.mark.parametrize(("load", "name", "bad", "field", "rid"), MALFORMED)
def test_malformed_record_raises_naming_record_and_field(tmp_path, load, name, bad, field, rid):
    good = {"hh": GOOD_HH, "Na": GOOD_LLMBAR, "ch": GOOD_RMB, "rb": GOOD_RB}[name[:2]]
    path = _write(name, [good, bad, good], tmp_path)
    with pytest.raises(MalformedRecordError) as info:
        load(path)
    message = str(info.value)
    assert name in message and "record 1" in message and f"field {field!r}" in message
    assert info.value.record.field == field and info.value.record.id == rid
    if rid is not None:
        assert f"(id={rid!r})" in message


@pytest.mark.parametrize(("load", "name", "bad", "field", "rid"), MALFORMED)
def test_skip_bad_keeps_the_good_records(tmp_path, load, name, bad, field, rid):
    good = {"hh": GOOD_HH, "Na": GOOD_LLMBAR, "ch": GOOD_RMB, "rb": GOOD_RB}[name[:2]]
    path = _write(name, [good, bad, good, bad], tmp_path)
    with pytest.warns(SkippedRecordsWarning, match="skipped 2 malformed"):
        loaded = load(path, skip_bad=True)
    assert len(loaded) == 2
    assert [s.index for s in loaded.skipped] == [1, 3]
    assert {(s.field, s.id, s.source) for s in loaded.skipped} == {(field, rid, str(path))}
    assert [item.metadata["index"] for item in loaded] == [0, 2]


def test_invalid_json_line_is_a_malformed_record(tmp_path):
    path = tmp_path / "rb.jsonl"
    path.write_text(json.dumps(GOOD_RB) + "\n\n{oops\n" + json.dumps(GOOD_RB) + "\n")
    with pytest.raises(MalformedRecordError, match=r"record 1, field '<record>': is not valid"):
        load_rewardbench_jsonl(path)
    with pytest.warns(SkippedRecordsWarning):
        assert len(load_rewardbench_jsonl(path, skip_bad=True)) == 2


def test_file_level_problems(tmp_path):
    with pytest.raises(MalformedRecordError, match="JSON list"):
        load_llmbar(write_json(tmp_path / "Natural.json", {"input": "q"}))
    bad = tmp_path / "broken.json"
    bad.write_text("[{")
    with pytest.raises(MalformedRecordError, match="not valid JSON"):
        load_llmbar(bad)
    with pytest.raises(FileNotFoundError):
        load_rmbench(tmp_path / "missing.json")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n  \n")  # blank lines only: refused whichever way it is loaded
    for load in (load_rewardbench_jsonl, lambda p: load_pairs(p, "rewardbench"), load_pairs):
        with pytest.raises(EmptyInputError, match="no records|empty"):
            load(empty)


def _solution(i: int, kind: str, problem_id: int = 0, problem: str = "1+1?") -> dict:
    return {
        "problem": problem,
        "problem_id": problem_id,
        "id": i,
        "eval_solution": [f"step {i}", "so"],
        "solution_type": kind,
        "solution_reference": "human_to_GPT-4" if kind == "chosen" else f"model{i}",
        "subject": "Algebra",
    }


def test_rewardmath_groups_solutions(tmp_path):
    records = [_solution(0, "chosen"), _solution(1, "rejected"), _solution(2, "rejected")]
    records += [_solution(3, "rejected", 7, "2+2?"), _solution(4, "chosen", 7, "2+2?")]
    items = load_rewardmath(write_json(tmp_path / "rm.json", records))
    assert [(i.id, i.prompt, len(i.wrong)) for i in items] == [(0, "1+1?", 2), (7, "2+2?", 1)]
    assert items[0].correct == "step 0\nso" and items[1].wrong == ("step 3\nso",)
    assert items[1].metadata["solution_ids"] == (4, 3)
    assert items[0].metadata["subject"] == "Algebra"
    assert len(load_rewardmath(tmp_path / "rm.json", limit=1)) == 1


@pytest.mark.parametrize(
    ("bad_index", "change", "field", "problems_left"),
    [
        (1, {"eval_solution": "one step"}, "eval_solution", 2),
        (1, {"solution_type": "maybe"}, "solution_type", 2),
        (1, {"problem": "changed"}, "problem", 2),
        (1, {"solution_type": "chosen"}, "solution_type", 2),  # a second correct solution
        (0, {"solution_type": "rejected"}, "solution_type", 1),  # problem 0 has none correct
    ],
)
def test_rewardmath_malformed(tmp_path, bad_index, change, field, problems_left):
    records = [_solution(i, "chosen" if i in (0, 3) else "rejected", i // 3) for i in range(6)]
    records[bad_index] = {**records[bad_index], **change}
    path = write_json(tmp_path / "rm.json", records)
    with pytest.raises(MalformedRecordError, match=f"record {bad_index} .*field '{field}'"):
        load_rewardmath(path)
    with pytest.warns(SkippedRecordsWarning, match="skipped 1"):
        items = load_rewardmath(path, skip_bad=True)
    assert len(items) == problems_left and len(items.skipped) == 1


def test_rewardmath_scores(tmp_path):
    ok = {"problem": "q", "solution_reference": ["human_to_GPT-4", "m", "m"], "score": [1, 2, 0.5]}
    df = load_rewardmath_scores(write_json(tmp_path / "RM_scores.json", [ok, ok]))
    assert list(df.columns) == [
        "model",
        "problem_id",
        "problem",
        "solution_index",
        "solution_reference",
        "is_correct",
        "score",
    ]
    assert df["problem_id"].tolist() == [0, 0, 0, 1, 1, 1]
    assert df["is_correct"].tolist() == [True, False, False] * 2
    assert df["score"].dtype == "float64" and set(df["model"]) == {"RM"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"score": [1, 2]}, "score"),
        ({"score": [1, "2", 3]}, "score[1]"),
        ({"score": [1, math.nan, 3]}, "score[1]"),
        ({"solution_reference": ["a", "m", "m"]}, "solution_reference"),
        ({"problem": None}, "problem"),
    ],
)
def test_rewardmath_scores_malformed(tmp_path, change, field):
    ok = {"problem": "q", "solution_reference": ["human_to_GPT-4", "m", "n"], "score": [1, 2, 3]}
    path = write_json(tmp_path / "x_scores.json", [ok, {**ok, **change}, ok])
    with pytest.raises(MalformedRecordError, match=re.escape(f"record 1, field '{field}'")):
        load_rewardmath_scores(path)
    with pytest.warns(SkippedRecordsWarning):
        df = load_rewardmath_scores(path, skip_bad=True)
    assert sorted(set(df["problem_id"])) == [0, 2] and len(df.attrs["skipped"]) == 1


# --------------------------------------------------------------------------------------------
# limit and load_pairs


def test_limit(tmp_path):
    hh_path = write_jsonl(tmp_path / "hh.jsonl", [GOOD_HH] * 5)
    assert len(load_hh_rlhf(hh_path, limit=2)) == 2 and len(load_hh_rlhf(hh_path, limit=0)) == 0
    folder = tmp_path / "llmbar"
    folder.mkdir()
    write_json(folder / "Natural.json", [GOOD_LLMBAR] * 3)
    write_json(folder / "Adversarial_Manual.json", [GOOD_LLMBAR] * 3)
    assert load_llmbar(folder, limit=4).subsets() == {"llmbar-adver-manual": 3, "llmbar-natural": 1}
    with pytest.raises(ValueError, match="limit"):
        load_hh_rlhf(hh_path, limit=-1)


def test_limit_stops_before_later_bad_records(tmp_path):
    path = write_jsonl(tmp_path / "hh.jsonl", [GOOD_HH, GOOD_HH, {"chosen": 1}])
    assert len(load_hh_rlhf(path, limit=2)) == 2


def test_load_pairs_sniffs_and_dispatches(tmp_path):
    files = {
        "hh-rlhf": write_jsonl(tmp_path / "a.jsonl", [GOOD_HH]),
        "llmbar": write_json(tmp_path / "b.json", [GOOD_LLMBAR]),
        "rm-bench": write_json(tmp_path / "c.json", [GOOD_RMB]),
        "rewardbench": write_jsonl(tmp_path / "d.jsonl", [GOOD_RB]),
        "rewardmath": write_json(tmp_path / "e.json", [_solution(0, "chosen"), _solution(1, "x")]),
    }
    for fmt, path in files.items():
        if fmt != "rewardmath":
            assert sniff_format(path) == fmt
    assert sniff_format(files["rewardmath"]) == "rewardmath"
    assert len(load_pairs(files["rm-bench"])) == 9
    assert len(load_pairs(files["rm-bench"], "RMBench", limit=4)) == 4
    assert load_pairs(files["hh-rlhf"], "hh_rlhf")[0].chosen == "yes"
    with pytest.raises(ValueError, match="unknown format"):
        load_pairs(files["llmbar"], "csv")
    scores = write_json(
        tmp_path / "s.json", [{"problem": "q", "solution_reference": [], "score": []}]
    )
    with pytest.raises(ValueError, match="load_rewardmath_scores"):
        load_pairs(scores)


# --------------------------------------------------------------------------------------------
# real files in ../shared/data

HH_FILE = SHARED / "hh_rlhf" / "harmless_base_test.jsonl.gz"


@real_data
def test_real_hh_rlhf():
    ps = load_hh_rlhf(HH_FILE)
    assert len(ps) == 2312 and ps.skipped == ()  # every record parses; nothing is malformed
    assert all(p.prompt[-1]["role"] == "user" and len(p.prompt) % 2 == 1 for p in ps)
    # quirks: four chosen replies are empty; nine records repeat a role, which is merged
    assert [i for i, p in enumerate(ps) if p.chosen == ""] == [86, 516, 925, 1103]
    merged = [i for i, p in enumerate(ps) if p.metadata["merged_turns"]]
    assert merged == [667, 763, 1254, 1319, 1688, 1849, 1950, 1952, 2036]
    assert ps[0].prompt[:3] == (
        {"role": "user", "content": "what are some pranks with a pen i can do?"},
        {"role": "assistant", "content": "Are you looking for practical joke ideas?"},
        {"role": "user", "content": "yep"},
    )
    # record 1254: the chosen transcript has two Assistant turns after the shared prompt
    assert len(ps[1254].prompt) == 3
    assert ps[1254].chosen.endswith("\n\nI think they call them that because")
    assert ps[1254].rejected.startswith("A drag king is the opposite of a drag queen")


@real_data
def test_real_llmbar():
    ps = load_llmbar(SHARED / "llmbar")
    assert len(ps) == 419 and ps.skipped == ()
    assert ps.subsets() == {
        "llmbar-adver-GPTInst": 92,
        "llmbar-adver-GPTOut": 47,
        "llmbar-adver-manual": 46,
        "llmbar-adver-neighbor": 134,
        "llmbar-natural": 100,
    }
    assert sum(p.metadata["label"] == 1 for p in ps) == 206


@real_data
def test_real_rmbench():
    chat = load_rmbench(SHARED / "rmbench" / "chat_filtered.json")
    safety = load_rmbench(SHARED / "rmbench" / "safety-refuse_filtered.json")
    assert (len(chat), len(safety)) == (129, 284)
    assert {i.domain for i in chat} == {"chat"} and {i.domain for i in safety} == {"safety-refuse"}
    assert {i.subset for i in chat} == {"alpacaeval"}
    assert chat[0].id == 8 and "error_key" in chat[0].metadata
    both = load_rmbench(SHARED / "rmbench")
    assert len(both) == 413 and all(len(item.pairs()) == 9 for item in both)
    assert both.pairs().subsets() == {
        "alpacaeval": 9 * 129,
        "xstest-should-refuse": 9 * 138,
        "refusals-dangerous": 9 * 84,
        "refusals-offensive": 9 * 62,
    }
    # the concise response is always the shortest of the three
    assert all(len(i.chosen[0]) == min(map(len, i.chosen)) for i in both)


@real_data
def test_real_rewardmath():
    items = load_rewardmath(SHARED / "rewardmath" / "RewardMATH_direct.json")
    assert [(i.id, len(i.wrong)) for i in items] == [(0, 9), (399, 9)]
    assert all(i.metadata["solution_references"][0] == "human_to_GPT-4" for i in items)
    assert items[0].correct.endswith("Therefore, the solution for x is $\\boxed{1600}$.")
    assert len(items.pairs()) == 18


SCORE_FILES = [
    "ArmoRM_scores.json",
    "grm_gemma_scores.json",
    "grm_llama3_scores.json",
    "internlm2_scores.json",
    "skywork_llama3_scores.json",
]


@real_data
@pytest.mark.parametrize("name", SCORE_FILES)
def test_real_rewardmath_scores(name):
    df = load_rewardmath_scores(SHARED / "rewardmath" / name)
    assert df.shape == (4830, 7) and df.attrs["skipped"] == ()
    assert df.groupby("problem_id").size().eq(10).all() and df["problem_id"].nunique() == 483
    correct = df[df["is_correct"]]
    assert len(correct) == 483 and correct["solution_index"].eq(0).all()
    # a model can supply several wrong solutions to one problem
    repeats = df.groupby("problem_id")["solution_reference"].nunique().lt(10).sum()
    assert repeats == 77


@real_data
def test_real_scores_line_up_with_the_problems():
    items = load_rewardmath(SHARED / "rewardmath" / "RewardMATH_direct.json")
    df = load_rewardmath_scores(SHARED / "rewardmath" / "ArmoRM_scores.json")
    for item in items:
        rows = df[df["problem_id"] == item.id]
        assert set(rows["problem"]) == {item.prompt}
        assert tuple(rows["solution_reference"]) == item.metadata["solution_references"]


@real_data
def test_real_files_sniff():
    assert sniff_format(HH_FILE) == "hh-rlhf"
    assert sniff_format(SHARED / "llmbar") == "llmbar"
    assert sniff_format(SHARED / "rmbench" / "chat_filtered.json") == "rm-bench"
    assert sniff_format(SHARED / "rewardmath" / "RewardMATH_direct.json") == "rewardmath"
    assert len(load_pairs(SHARED / "rmbench")) == 9 * 413
