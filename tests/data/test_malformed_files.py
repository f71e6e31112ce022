"""Bad data files are typed errors that name the file and the record: a line that is not UTF-8
(skipped alone with ``skip_bad=True``), a binary file, a truncated gzip, an empty file, an
unknown format, a missing file. Each test failed on the wave-1 code (split from the wave-1
review's regression file)."""

import gzip
import json

import pytest

from reward_lens_tl.data import load_hh_rlhf, load_pairs
from reward_lens_tl.errors import (
    DataFormatError,
    EmptyInputError,
    InvalidArgumentError,
    MalformedRecordError,
    MissingFileError,
    RewardLensError,
    TemplateError,
)


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


def test_errors_are_all_reward_lens_errors():
    for cls in (
        DataFormatError,
        EmptyInputError,
        InvalidArgumentError,
        TemplateError,
        MissingFileError,
    ):
        assert issubclass(cls, RewardLensError)
