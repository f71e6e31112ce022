"""Shared plumbing for the loaders: reading record files, field checks, and bad-record handling.

Internal (no public names): used by `reward_lens_tl.data.loaders` and the format readers.

Files are JSON lists (`.json`) or JSON lines (`.jsonl`, `.ndjson`), optionally gzip-compressed
(detected from the content, not the name), UTF-8 with or without a byte-order mark (read as
`encoding="utf-8-sig"` would; Windows tools often write one). Any other name is read as a JSON
list if its first non-blank character is `[`, else as JSON lines. A record is identified by its
0-based position among the file's records (blank lines are not records).

A parse function turns one record into an item or raises `FieldError`; `collect`
turns that into a `MalformedRecordError` naming file, record and field, or, with
`skip_bad=True`, into a `SkippedRecord` plus one `SkippedRecordsWarning`.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import warnings
import zlib
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ..errors import (
    DataFormatError,
    EmptyInputError,
    InvalidArgumentError,
    MalformedRecordError,
    MissingFileError,
)
from ._validate import FieldError, check_id, type_name
from .schema import SkippedRecord, SkippedRecordsWarning

__all__: list[str] = []

T = TypeVar("T")
BOM = b"\xef\xbb\xbf"
"""The UTF-8 byte-order mark some editors put at the start of a file (skipped when reading)."""
RECORD = "<record>"
"""The field name used when a whole record (not one of its fields) is unusable."""


@dataclass(frozen=True)
class Unparsable:
    """Stands in for a JSON-lines record that is not valid JSON.

    Args:
        reason: Why the line could not be parsed.
    """

    reason: str


def open_bytes(path: Path) -> io.BufferedIOBase:
    """Open `path` for reading bytes, decompressing it if it is gzip data.

    Args:
        path: The file.

    Returns:
        A binary file object.
    """
    with open(path, "rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gzipped else open(path, "rb")


def _check_text(path: Path, head: bytes) -> None:
    if b"\x00" in head:
        raise DataFormatError(
            f"{path} looks like a binary file (it contains NUL bytes), not JSON or JSON lines"
        )


def _layout(path: Path) -> str | None:
    """`"json"` or `"jsonl"` from the file name, `None` if it does not say."""
    name = path.name.lower().removesuffix(".gz")
    if name.endswith(".json"):
        return "json"
    return "jsonl" if name.endswith((".jsonl", ".ndjson")) else None


def iter_records(path: Path) -> Iterator[tuple[int, Any]]:
    """`(index, record)` for every record of a JSON-list or JSON-lines file.

    A JSON-lines line that is not UTF-8 or not JSON becomes an unparsable record (so
    `skip_bad=True` skips that line only).

    Args:
        path: The file.

    Yields:
        `(index, record)` pairs.

    Raises:
        DataFormatError: For a binary file, a truncated gzip archive or a JSON list that is
            not UTF-8.
        MalformedRecordError: For a JSON-list file that is not valid JSON or not a list.
    """
    try:
        yield from _iter_records(path)
    except (EOFError, gzip.BadGzipFile, zlib.error) as err:
        raise DataFormatError(
            f"{path} is a truncated or corrupt gzip archive ({err}); re-download it"
        ) from err


def _lines(f: Iterable[bytes]) -> Iterator[bytes]:
    """The file's lines, the first without a UTF-8 byte-order mark."""
    first = True
    for raw in f:
        yield raw.removeprefix(BOM) if first else raw
        first = False


def _iter_records(path: Path) -> Iterator[tuple[int, Any]]:
    layout = _layout(path)
    with open_bytes(path) as f:
        lines = _lines(f)
        for raw in lines:
            _check_text(path, raw)
            if raw.strip():
                break
        else:
            return
        if layout == "json" or (layout is None and raw.lstrip().startswith(b"[")):
            rest = raw + f.read()
            _check_text(path, rest)
            yield from enumerate(_json_list(path, _decode_all(path, rest)))
            return
        yield 0, _json_line(raw)
        index = 1
        for raw in lines:
            if raw.strip():
                _check_text(path, raw)
                yield index, _json_line(raw)
                index += 1


def _decode_all(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataFormatError(f"{path} is not UTF-8 text ({err})") from err


def _json_list(path: Path, text: str) -> list[Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise MalformedRecordError(f"{path}: not valid JSON ({err})") from err
    if not isinstance(data, list):
        raise MalformedRecordError(
            f"{path}: expected a JSON list of records, got {type_name(data)}"
        )
    return data


def _json_line(raw: bytes) -> Any:
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return Unparsable(f"is not valid UTF-8 ({err})")
    try:
        return json.loads(line)
    except json.JSONDecodeError as err:
        return Unparsable(f"is not valid JSON ({err})")


# --------------------------------------------------------------------------------------------
# field access


def require_object(record: Any) -> dict[str, Any]:
    """`record` if it is a JSON object.

    Args:
        record: The record.

    Returns:
        The record.

    Raises:
        FieldError: On `<record>`, if it is not a JSON object.
    """
    if isinstance(record, Unparsable):
        raise FieldError(RECORD, record.reason)
    if not isinstance(record, dict):
        raise FieldError(RECORD, f"must be a JSON object, got {type_name(record)}")
    return record


def require(record: dict[str, Any], name: str) -> Any:
    """`record[name]`.

    Args:
        record: The record.
        name: The field.

    Returns:
        The field's value.

    Raises:
        FieldError: If it is missing.
    """
    if name not in record:
        raise FieldError(name, "is missing")
    return record[name]


def require_int(record: dict[str, Any], name: str) -> int:
    """`record[name]` if it is an integer (`bool` is refused).

    Args:
        record: The record.
        name: The field.

    Returns:
        The field's value.

    Raises:
        FieldError: If it is missing or not an integer.
    """
    value = require(record, name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(name, f"must be an int, got {type_name(value)}")
    return value


def extras(record: dict[str, Any], known: Iterable[str]) -> dict[str, Any]:
    """The record's fields other than `known` (kept as metadata so nothing is dropped).

    Args:
        record: The record.
        known: The fields already read.

    Returns:
        The other fields.
    """
    known = set(known)
    return {k: v for k, v in record.items() if k not in known}


def record_id(record: Any, key: str | None) -> Hashable | None:
    """The record's id under `key` if it has a usable one, else `None`.

    Args:
        record: The record.
        key: The id field, or `None`.

    Returns:
        The id, or `None`.
    """
    if key is None or not isinstance(record, dict):
        return None
    try:
        return check_id(record.get(key))
    except FieldError:
        return None


# --------------------------------------------------------------------------------------------
# bad-record handling


def malformed(skip: SkippedRecord) -> MalformedRecordError:
    """The error for a bad record; it carries the `SkippedRecord` as `.record`.

    Args:
        skip: The bad record.

    Returns:
        The error.
    """
    err = MalformedRecordError(str(skip))
    err.record = skip  # type: ignore[attr-defined]
    return err


def reject(skip: SkippedRecord, skip_bad: bool, skipped: list[SkippedRecord]) -> None:
    """Record `skip` if `skip_bad`, else raise it as a `MalformedRecordError`.

    Args:
        skip: The bad record.
        skip_bad: Whether to skip it.
        skipped: The list it is appended to.

    Raises:
        MalformedRecordError: If not `skip_bad`.
    """
    if not skip_bad:
        raise malformed(skip)
    skipped.append(skip)


def collect(
    path: Path,
    records: Iterable[tuple[int, Any]],
    parse: Callable[[int, Any], T],
    *,
    skip_bad: bool,
    limit: int | None,
    id_key: str | None = None,
    allow_empty: bool = False,
) -> tuple[list[T], list[SkippedRecord]]:
    """Parse records until `limit` items are made; bad records raise or are skipped.

    Args:
        path: The file (for messages).
        records: `(index, record)` pairs.
        parse: Makes one item from `(index, record)`.
        skip_bad: Whether to skip bad records rather than raise.
        limit: The most items, or `None`.
        id_key: The records' id field, if any.
        allow_empty: Return no items without an error (a score file being started).

    Returns:
        The items and the skipped records.

    Raises:
        EmptyInputError: No item (an empty file, blank lines only, or every record skipped),
            unless `allow_empty` or `limit=0`.
    """
    check_limit(limit)
    items: list[T] = []
    skipped: list[SkippedRecord] = []
    for index, record in records:
        if limit is not None and len(items) >= limit:
            break
        try:
            items.append(with_record(parse(index, record), index))
        except FieldError as err:
            skip = SkippedRecord(index, record_id(record, id_key), err.field, err.reason, str(path))
            reject(skip, skip_bad, skipped)
    if not items and not allow_empty and limit != 0:
        raise_empty(path, skipped)
    return items, skipped


def raise_empty(path: Path | str, skipped: list[SkippedRecord]) -> None:
    """Refuse a load that made no item, saying whether the file had records at all.

    Args:
        path: The file or folder.
        skipped: The records skipped as malformed.

    Raises:
        EmptyInputError: Always.
    """
    if skipped:
        raise EmptyInputError(
            f"every record of {path} was skipped as malformed ({len(skipped)}; the first: "
            f"{skipped[0].field}: {skipped[0].reason}): nothing to load"
        )
    raise EmptyInputError(
        f"{path} holds no records (it is empty or holds blank lines only): nothing to load"
    )


def collect_files(
    path: Path,
    parser_for: Callable[[Path], Callable[[int, Any], T]],
    *,
    skip_bad: bool,
    limit: int | None,
    id_key: str | None = None,
) -> tuple[list[T], list[SkippedRecord]]:
    """`collect` over the files of `expand(path)` in order.

    Each file is parsed by `parser_for(file)`, until `limit` items in all; one
    `warn_skipped` for them all.

    Args:
        path: A file or a directory.
        parser_for: Gives the parse function of a file.
        skip_bad: Whether to skip bad records rather than raise.
        limit: The most items, or `None`.
        id_key: The records' id field, if any.

    Returns:
        The items and the skipped records.
    """
    check_limit(limit)
    items: list[T] = []
    skipped: list[SkippedRecord] = []
    for file in expand(path):
        left = None if limit is None else limit - len(items)
        got, bad = collect(
            file,
            iter_records(file),
            parser_for(file),
            skip_bad=skip_bad,
            limit=left,
            id_key=id_key,
            allow_empty=True,
        )
        items += got
        skipped += bad
    if not items and limit != 0:
        raise_empty(path, skipped)
    warn_skipped(path, skipped, stacklevel=4)  # the loader's caller
    return items, skipped


def with_record(item: T, index: int) -> T:
    """`item` with its source record index filled in (items that track one).

    Args:
        item: The item.
        index: The record's index.

    Returns:
        The item.
    """
    if (
        dataclasses.is_dataclass(item)
        and not isinstance(item, type)
        and getattr(item, "record", 0) is None
    ):
        return dataclasses.replace(item, record=index)
    return item


def check_limit(limit: int | None) -> None:
    """Refuse a negative or non-integer `limit`.

    Args:
        limit: The limit, or `None`.

    Raises:
        InvalidArgumentError: If it is negative or not an integer.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise InvalidArgumentError(f"limit must be None or a non-negative int, got {limit!r}")


def warn_skipped(path: Path | str, skipped: list[SkippedRecord], stacklevel: int = 3) -> None:
    """One warning saying how many records were skipped (nothing if none were).

    Args:
        path: The source (for the message).
        skipped: The skipped records.
        stacklevel: Passed to `warnings.warn`.
    """
    if skipped:
        warnings.warn(
            f"{path}: skipped {len(skipped)} malformed record(s); the first: {skipped[0]}. "
            "See .skipped for all of them.",
            SkippedRecordsWarning,
            stacklevel=stacklevel,
        )


def expand(path: Path, pattern: str = "*.json") -> list[Path]:
    """`[path]` for a file; the sorted files matching `pattern` below a directory.

    Args:
        path: A file or a directory.
        pattern: The glob pattern for a directory's files.

    Returns:
        The files.

    Raises:
        MissingFileError: If `path` does not exist.
        EmptyInputError: If the directory holds no matching files.
    """
    if not path.exists():
        raise MissingFileError(f"no such file or directory: {path}")
    if path.is_dir():
        files = sorted(p for p in path.rglob(pattern) if p.is_file())
        if not files:
            raise EmptyInputError(f"{path} holds no {pattern} files")
        return files
    return [path]
