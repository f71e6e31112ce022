"""Issue 23, item 4: the report says what its numbers rest on, and the pair analyses skip and
record pairs like ``score_pairs``. Each test failed before: the report silenced the
unknown-token warning and had no data-quality note, and ``pair_attribution``/``pair_lens`` had
no ``on_error`` and no record of which input pair each example was."""

import json
import re
from types import SimpleNamespace as Pair

import pytest
import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.attribution import pair_attribution
from reward_lens_tl.errors import EmptyInputError, InvalidArgumentError, SequenceTooLongError
from reward_lens_tl.inputs import UnknownTokenWarning
from reward_lens_tl.lens import pair_lens
from reward_lens_tl.report import build, build_report
from reward_lens_tl.testing import tiny_reward_model, tiny_tokenizer
from reward_lens_tl.zoo import zoo_path


def _unknown(n: int, start: int = 0) -> str:
    return " ".join(f"qq{i}" for i in range(start, start + n))  # not in the zoo's vocabulary


def _write(path, rows):
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


@pytest.fixture
def scores_only(monkeypatch):
    """The report's first step only (the note comes from it): a fast build."""
    monkeypatch.setattr(build, "STEPS", build.STEPS[:1])
    monkeypatch.setattr(build, "SECTIONS", [])


def test_report_on_mostly_unknown_text_leads_with_a_data_quality_note(tmp_path, scores_only):
    rows = [{"prompt": _unknown(4), "chosen": "soup pasta", "rejected": _unknown(2, 4)}] * 6
    rows += [{"prompt": _unknown(100, 10), "chosen": "soup", "rejected": "oven"}] * 2  # cut
    rows += [{"prompt": _unknown(1), "chosen": " ".join(["soup"] * 80), "rejected": "oven"}]
    out = tmp_path / "out"
    with pytest.warns(UnknownTokenWarning, match="unknown token"):  # not silenced
        build_report(zoo_path("scalar"), _write(tmp_path / "p.jsonl", rows), out, progress=False)
    text = (out / "report.json").read_text()
    assert str(tmp_path) not in text  # names, not local paths
    numbers = json.loads(text)
    assert list(numbers)[:2] == ["args", "data_quality"] and numbers["args"]["pairs"] == "p.jsonl"
    q = numbers["data_quality"]
    # short pairs: 2 × 12 tokens, 4 + 6 unknown; cut pairs ('left'): 2 × 64 tokens, 57 + 57
    # unknown (64 − 6 template tokens − 1 response token); 288 of 400 tokens are unknown
    assert q["unknown_token_share"] == pytest.approx(288 / 400)
    assert (q["n_pairs"], q["n_scored"], q["n_skipped"], q["n_truncated"]) == (9, 8, 1, 2)
    assert q["truncated"] == {"prompt_start_cut": 2, "response_end_cut": 0}
    assert q["n_sequences_mostly_unknown"] == 16 and q["unknown_token"] == "<unk>"
    assert q["skipped"][0]["pair"] == 8 and "response alone" in q["skipped"][0]["reason"]
    assert list(q["skipped_reasons"].values()) == [1] and len(q["warnings"]) == 3
    page = (out / "report.html").read_text()
    first = re.search(r"<section id='([^']+)'>(.*?)</section>", page, re.S)
    assert first.group(1) == "data-quality"
    note = first.group(2)
    assert "72.0% of the scored tokens are the unknown token" in note
    assert "1 of 9 pairs were skipped" in note and "2 of 8 scored pairs were truncated" in note
    assert "Caution: 3 data-quality caveat(s)" in page[: page.index("<section")]
    assert page.index("id='data-quality'") < page.index("id='scores'")


def test_report_on_clean_text_has_no_caveats(tmp_path, scores_only):
    rows = [{"prompt": "explain how to bake bread", "chosen": "soup", "rejected": "oven"}] * 3
    out = tmp_path / "out"
    numbers = build_report(
        zoo_path("scalar"), _write(tmp_path / "p.jsonl", rows), out, progress=False
    )
    q = numbers["data_quality"]
    assert q["unknown_token_share"] == 0.0 and q["warnings"] == [] and q["n_truncated"] == 0
    page = (out / "report.html").read_text()
    assert "No caveats: 3 of 3 pairs scored" in page and "Caution" not in page


# -- pair_attribution / pair_lens: on_error and provenance ---------------------------------------
@pytest.fixture(scope="module")
def tiny():
    return HookedRewardModel.from_pretrained(tiny_reward_model("llama"), tiny_tokenizer())


def _pairs():
    long = "w7 " * 99  # more than the 64-token context
    return [
        Pair(prompt="w6", chosen=chosen, rejected=f"w{20 + i}", record=100 + i)
        for i, chosen in enumerate(["w8 w9", long, "w10", long, "w11 w12 w13"])
    ]


@pytest.mark.parametrize("analysis", [pair_attribution, pair_lens])
def test_pair_analyses_skip_and_record_the_input_pair(tiny, analysis):
    pairs = _pairs()
    result = analysis(tiny, pairs, batch_size=2, on_error="skip")
    assert result.indices == (0, 2, 4) and result.records == (100, 102, 104)
    assert [s.index for s in result.skipped] == [1, 3]
    assert [s.record for s in result.skipped] == [101, 103]
    assert "more than max_length=64" in result.skipped[0].reason
    alone = analysis(tiny, [pairs[i] for i in (0, 2, 4)], batch_size=2)
    for side in ("chosen", "rejected"):
        torch.testing.assert_close(getattr(result, side).values, getattr(alone, side).values)
    frame = result.to_dataframe()
    assert sorted(set(frame["index"])) == [0, 2, 4]
    assert (frame["record"] - frame["index"] == 100).all()
    last = frame[frame["example"] == 2]
    assert set(last["index"]) == {4}


@pytest.mark.parametrize("analysis", [pair_attribution, pair_lens])
def test_pair_analyses_raise_naming_the_pair(tiny, analysis):
    with pytest.raises(SequenceTooLongError, match=r"^pair 1 \(record 101\).*on_error='skip'"):
        analysis(tiny, _pairs(), batch_size=2)
    with pytest.raises(EmptyInputError, match="all 2 pairs were skipped"):
        analysis(tiny, [_pairs()[1], _pairs()[3]], on_error="skip")
    with pytest.raises(InvalidArgumentError, match="on_error"):
        analysis(tiny, _pairs(), on_error="ignore")
