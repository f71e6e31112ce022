"""Resumable files that know who wrote them: fingerprints, an exclusive lock, whole records.

A resumable file (a token sweep's `resume=` file, a scoring run's `--out` score file) is
JSON lines: a **header** `{"format": ..., "producer": {...}}` and then one record per line.
`producer` says what made the records: the model (`model_fingerprint`), the inputs and
the arguments that change results. A run that resumes a file first compares the file's
producer with its own and refuses a difference with a typed error naming both
(`check_producer`), so another model's (or another prompt's) numbers are never returned.

`ResumableLog` opens such a file for one writer at a time (an exclusive, non-blocking
`fcntl.flock` on the file itself: a second writer gets `FileInUseError` at once), drops a
torn last line left by a killed writer (a record is whole only when its line ends with a newline,
so a reader ignores the torn tail and the writer truncates it and recomputes that record), writes
the header together with the first records (a run that fails before producing anything leaves no
file behind) and appends each record with one `os.write`. `check_output_file` refuses a path
that cannot be such a file, or a file another process is writing, before any work starts.

Examples:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "run.jsonl"
    >>> header = {"format": "demo/1", "producer": {"model": {"name": "m", "weights": "ab12"}}}
    >>> with ResumableLog(path, header) as log:
    ...     log.append([{"x": 1.0}])
    >>> with ResumableLog(path, header) as log:
    ...     [record for _, record in log.records]
    [{'x': 1.0}]
    >>> other = {"format": "demo/1", "producer": {"model": {"name": "m", "weights": "cd34"}}}
    >>> try:
    ...     ResumableLog(path, other).__enter__()
    ... except ProvenanceMismatchError as err:
    ...     print(str(err).split(": ", 1)[1])
    the file's model is 'm' (weights ab12, None), this run's is 'm' (weights cd34, None); \
    model.weights: the file says 'ab12', this run is 'cd34'; delete the file or write to another \
    path
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .errors import (
    FileInUseError,
    InvalidArgumentError,
    NonFiniteResultError,
    ProvenanceMismatchError,
    ResumableFileError,
    UsageError,
)

try:  # POSIX; elsewhere an O_EXCL lock file next to the data file stands in
    import fcntl
except ImportError:  # pragma: no cover - not on Linux
    fcntl = None  # type: ignore[assignment]  # the module is absent on this platform

__all__ = [
    "FINGERPRINT_SAMPLES",
    "FileInUseError",
    "NonFiniteResultError",
    "ProvenanceMismatchError",
    "ResumableFileError",
    "ResumableLog",
    "check_finite",
    "check_output_file",
    "check_producer",
    "content_hash",
    "file_fingerprint",
    "model_fingerprint",
]

#: Values sampled per weight tensor by `model_fingerprint`.
FINGERPRINT_SAMPLES = 4096

#: `cfg` fields that do not change a model's outputs (devices, names, hook switches).
_CFG_IGNORED = frozenset(
    {
        "device",
        "n_devices",
        "model_name",
        "tokenizer_name",
        "seed",
        "checkpoint_index",
        "checkpoint_label_type",
        "checkpoint_value",
        "use_attn_result",
        "use_split_qkv_input",
        "use_hook_mlp_in",
        "use_attn_in",
        "use_hook_tokens",
    }
)


# --------------------------------------------------------------------------------------------
# fingerprints


def content_hash(value: Any, n: int = 16) -> str:
    """The first `n` hex digits of the SHA-256 of `value` as canonical JSON.

    Canonical: keys sorted, so two dicts with the same items hash alike whatever their order;
    a value JSON cannot write is hashed as its `str`.

    Args:
        value: Anything JSON can write (dicts, lists, strings, numbers).
        n: How many hex digits to keep (at most 64).

    Returns:
        The hash, `n` lowercase hex digits.

    Examples:
        >>> from reward_lens_tl.provenance import content_hash
        >>> len(content_hash([1, 2, 3])), len(content_hash([1, 2, 3], n=8))
        (16, 8)
        >>> content_hash({"b": [1, 2], "a": "x"}) == content_hash({"a": "x", "b": [1, 2]})
        True
    """
    blob = json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:n]


def file_fingerprint(path: str | os.PathLike[str]) -> dict[str, Any]:
    r"""`{"name", "size", "sha256"}` of a file, or of a folder's files.

    Every byte of a file is hashed; a folder gives its sorted relative names and their hashes.
    `name` is the base name only: no local path.

    Args:
        path: A file or a folder.

    Returns:
        The base name, the size in bytes (all files together for a folder) and the first 16 hex
        digits of the SHA-256.

    Examples:
        >>> import tempfile, pathlib
        >>> from reward_lens_tl.provenance import file_fingerprint
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "data.jsonl"
        >>> _ = p.write_text("{}\n")
        >>> file_fingerprint(p)["size"]
        3
    """
    path = Path(path)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    digest, size = hashlib.sha256(), 0
    for file in files:
        digest.update(str(file.relative_to(path) if path.is_dir() else "").encode())
        with open(file, "rb") as f:
            while block := f.read(1 << 20):
                digest.update(block)
                size += len(block)
    return {"name": path.name, "size": size, "sha256": digest.hexdigest()[:16]}


def model_fingerprint(model) -> dict[str, str | None]:
    """What identifies a converted model's outputs.

    `{"name", "architecture", "dtype", "config", "tokenizer", "weights"}` (the last three are
    16-hex-digit hashes).

    Cheap by design, not a hash of every weight byte: `config` hashes the TL config's fields
    that change outputs (not devices, names or hook switches) with the pad/EOS/BOS ids, the
    objective names and the adapter; `tokenizer` hashes the vocabulary, special tokens and
    chat template; `weights` hashes every parameter's name, shape and dtype and a strided
    sample of `FINGERPRINT_SAMPLES` of its values (evenly spaced over the flattened
    tensor, first and last included), as float32 bytes, so the same weights give the same
    hash on any device. An 8B model costs ~300 small gathers, not 16 GB of hashing. Any
    fine-tune, retraining or noise added to a tensor changes sampled values; an edit confined
    to unsampled elements of every tensor would not be seen.

    Args:
        model: A converted model (`HookedRewardModel` or a subclass).

    Returns:
        The six facts, as strings (`tokenizer` is `None` for a model without a tokenizer).

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.provenance import model_fingerprint
        >>> from reward_lens_tl.zoo import zoo_path
        >>> fp = model_fingerprint(HookedRewardModel.from_pretrained(zoo_path("scalar")))
        >>> sorted(fp)
        ['architecture', 'config', 'dtype', 'name', 'tokenizer', 'weights']
        >>> fp["name"], fp["dtype"], len(fp["weights"])
        ('scalar', 'float32', 16)
    """
    return {
        "name": _model_name(model),
        "architecture": str(getattr(model.cfg, "original_architecture", None)),
        "dtype": str(model.cfg.dtype).removeprefix("torch."),
        "config": content_hash(_config_facts(model)),
        "tokenizer": _tokenizer_hash(getattr(model, "tokenizer", None)),
        "weights": _weights_hash(model),
    }


def _model_name(model) -> str:
    """The checkpoint folder's base name where known, else the architecture.

    TL's `model_name` is `"custom"` for converted models; the tokenizer remembers the folder.
    """
    name = getattr(model.cfg, "model_name", None)
    if not name or name == "custom":
        name = getattr(getattr(model, "tokenizer", None), "name_or_path", None)
    return Path(str(name or "")).name or str(getattr(model.cfg, "original_architecture", "model"))


def _config_facts(model) -> dict[str, Any]:
    cfg = {k: v for k, v in model.cfg.to_dict().items() if k not in _CFG_IGNORED}
    adapter = getattr(model, "adapter", None)
    return {
        "cfg": cfg,
        "ids": [getattr(model, k, None) for k in ("pad_token_id", "eos_token_id", "bos_token_id")],
        "objectives": list(getattr(model, "objective_names", ())),
        "adapter": type(adapter).__name__ if adapter is not None else None,
        "class": type(model).__name__,
    }


def _tokenizer_hash(tokenizer) -> str | None:
    if tokenizer is None:
        return None
    facts = {
        "vocab": sorted(tokenizer.get_vocab().items()),
        "special": sorted(map(str, getattr(tokenizer, "all_special_tokens", []))),
        "template": getattr(tokenizer, "chat_template", None),
        "class": type(tokenizer).__name__,
    }
    return content_hash(facts)


def _weights_hash(model) -> str:
    import torch

    digest = hashlib.sha256()
    with torch.no_grad():
        for name, param in model.named_parameters():
            flat = param.detach().reshape(-1)
            n = flat.numel()
            k = min(n, FINGERPRINT_SAMPLES)
            index = torch.linspace(0, max(n - 1, 0), k, dtype=torch.float64).round().long()
            sample = flat[index.to(flat.device)].float().cpu().numpy()
            digest.update(f"{name}|{tuple(param.shape)}|{param.dtype}|".encode())
            digest.update(sample.tobytes())
    return digest.hexdigest()[:16]


def check_producer(
    path: str | os.PathLike[str],
    recorded: Mapping[str, Any] | None,
    expected: Mapping[str, Any],
    error: type[ProvenanceMismatchError] = ProvenanceMismatchError,
    what: str = "another producer",
) -> None:
    """Raise `error` naming each field where the file's producer differs from this run's.

    The file's producer is `recorded`, this run's `expected`; `recorded=None` is a file that records
    no producer. `what` names the other producer in the message ("... was written by <what>: ...").

    Args:
        path: The file, named in the message.
        recorded: The producer the file records, or `None` when it records none.
        expected: This run's producer.
        error: The error class to raise (a `ProvenanceMismatchError` subclass).
        what: Names the other producer in the message.

    Raises:
        ProvenanceMismatchError: (or `error`) the file records no producer, or another one.

    Examples:
        >>> from reward_lens_tl.errors import ProvenanceMismatchError
        >>> from reward_lens_tl.provenance import check_producer
        >>> mine = {"model": {"name": "m", "weights": "ab12"}, "seed": 0}
        >>> check_producer("run.jsonl", mine, mine)  # the same producer: silent
        >>> try:
        ...     check_producer("run.jsonl", {**mine, "seed": 1}, mine)
        ... except ProvenanceMismatchError as err:
        ...     print(str(err).split("; ")[1])
        seed: the file says 1, this run is 0
    """
    if recorded is None:
        raise error(
            f"{path} does not record what produced it (a file from an older version or "
            "another tool), so its numbers cannot be trusted for this run; delete the file "
            "or write to another path"
        )
    diffs = _differences(dict(recorded), dict(expected))
    if diffs:
        shown = "; ".join(f"{k}: the file says {a!r}, this run is {b!r}" for k, a, b in diffs[:4])
        more = f" (and {len(diffs) - 4} more)" if len(diffs) > 4 else ""
        raise error(
            f"{path} was written by {what}: the file's model is {_who(recorded)}, this run's "
            f"is {_who(expected)}; {shown}{more}; delete the file or write to another path"
        )


def _who(producer: Mapping[str, Any]) -> str:
    model = producer.get("model")
    if not isinstance(model, Mapping):
        return "not recorded"
    return f"{model.get('name')!r} (weights {model.get('weights')}, {model.get('dtype')})"


def _differences(a: Any, b: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b), key=str):
            out += _differences(a.get(key), b.get(key), f"{prefix}{key}.")
        return out
    return [] if a == b else [(prefix.rstrip("."), a, b)]


def check_finite(values: Iterable[float], where: str) -> None:
    """Raise `NonFiniteResultError` if a value is NaN or infinite (`where` names it).

    Args:
        values: The numbers to check.
        where: What they are, named at the start of the error message.

    Raises:
        NonFiniteResultError: A value is NaN or infinite.

    Examples:
        >>> from reward_lens_tl.provenance import check_finite
        >>> check_finite([1.0, 2.5], "chunk 2")  # all finite: silent
        >>> check_finite([1.0, float("nan")], "chunk 3")
        Traceback (most recent call last):
        ...
        reward_lens_tl.errors.NonFiniteResultError: chunk 3: value 1 is nan; ...
    """
    for k, v in enumerate(values):
        if not math.isfinite(v):
            raise NonFiniteResultError(
                f"{where}: value {k} is {v}; the model produced a non-finite score (check the "
                "dtype — float16 overflows — and the inputs); nothing was written"
            )


# --------------------------------------------------------------------------------------------
# the file


class ResumableLog:
    """A JSON-lines file with a header, held by one writer (a context manager).

    `header` is this run's `{"format", "producer", ...}`. On entry the file is locked
    (`FileInUseError` if another process holds it), a torn last line is truncated (with
    a warning), and an existing header is checked: another `format` or producer raises
    `mismatch` (`check_producer`; `what` names the other producer). `fresh=True`
    empties the file instead of reading it. `records` holds `(line number, parsed
    JSON)` of the records (a line that is not JSON, or holds NaN/Infinity, is
    `ResumableFileError`); `append` writes records (the header first when the file
    is new). On exit a file that never received a record is removed. A path that cannot
    be such a file (a directory, a path under a regular file, an unwritable place) is
    `InvalidArgumentError` naming it (`check_output_file`).

    Args:
        path: The file.
        header: This run's producer, checked against the file's.
        fresh: Empty the file instead of reading it.
        mismatch: The error raised when the producers differ.
        what: Name of the other producer in that error's message.

    Examples:
        >>> import tempfile, pathlib
        >>> from reward_lens_tl.provenance import ResumableLog
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "scores.jsonl"
        >>> header = {"format": "demo/1", "producer": {"model": {"name": "m"}}}
        >>> with ResumableLog(path, header) as log:  # a first run writes two records
        ...     log.append([{"i": 0, "score": 0.5}, {"i": 1, "score": -1.0}])
        >>> with ResumableLog(path, header) as log:  # a resumed run reads them back
        ...     done = {record["i"] for _, record in log.records}
        ...     log.append([{"i": 2, "score": 2.0}])
        >>> done, len(path.read_text().splitlines())  # the header and three records
        ({0, 1}, 4)
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        header: Mapping[str, Any],
        *,
        fresh: bool = False,
        mismatch: type[ProvenanceMismatchError] = ProvenanceMismatchError,
        what: str = "another producer",
    ):
        """Prepare a resumable log at `path` (nothing is opened before `with`; the class's Args)."""
        self.path = Path(path)
        self.header = dict(header)
        self.fresh = fresh
        self.mismatch = mismatch
        self.what = what
        self.records: list[tuple[int, Any]] = []
        self._fd: int | None = None
        self._lockfile: Path | None = None
        self._has_header = False

    # -- entering and leaving ----------------------------------------------------------------
    def __enter__(self) -> ResumableLog:
        """Lock and read the file (or empty it, with `fresh`)."""
        _check_path(self.path, "the file")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = _open_locked(self.path)
        except FileInUseError:
            raise
        except OSError as err:  # changed since the check, or a failure it cannot foresee
            _check_path(self.path, "the file")
            raise InvalidArgumentError(
                f"{self.path} cannot be opened for writing ({err.strerror or err}); choose "
                "another path"
            ) from None
        try:
            self._lockfile = _lockfile_for(self.path) if fcntl is None else None
            if self.fresh:
                os.ftruncate(self._fd, 0)
            self._read()
        except BaseException:
            self._release(remove_empty=False)
            raise
        return self

    def __exit__(self, *exc) -> None:
        """Release the lock, removing the file if it is empty."""
        self._release(remove_empty=True)

    def _release(self, remove_empty: bool) -> None:
        if self._fd is None:
            return
        if remove_empty and os.fstat(self._fd).st_size == 0:
            self.path.unlink(missing_ok=True)  # still locked: nobody else is writing it
        os.close(self._fd)  # releases the flock
        self._fd = None
        if self._lockfile is not None:
            self._lockfile.unlink(missing_ok=True)

    # -- reading -----------------------------------------------------------------------------
    @property
    def _open_fd(self) -> int:
        """The locked file's descriptor (only inside the `with` block)."""
        if self._fd is None:
            raise UsageError("use ResumableLog as a context manager: with ResumableLog(...)")
        return self._fd

    def _read(self) -> None:
        data = _read_all(self._open_fd)
        data = self._drop_torn_tail(data)
        lines = data.decode("utf-8", errors="replace").split("\n")[:-1] if data else []
        if not lines:
            return
        header = _parse_line(self.path, 1, lines[0])
        if not (isinstance(header, dict) and "format" in header and "producer" in header):
            check_producer(self.path, None, self.header.get("producer", {}), self.mismatch)
        if header.get("format") != self.header.get("format"):
            raise self.mismatch(
                f"{self.path} is a {header.get('format')!r} file, not {self.header['format']!r}; "
                "delete it or write to another path"
            )
        expected = self.header["producer"]
        check_producer(self.path, header["producer"], expected, self.mismatch, self.what)
        self._has_header = True
        self.records = [
            (n, _parse_line(self.path, n, line))
            for n, line in enumerate(lines[1:], 2)
            if line.strip()
        ]

    def _drop_torn_tail(self, data: bytes) -> bytes:
        if not data or data.endswith(b"\n"):
            return data
        cut = data.rfind(b"\n") + 1
        tail = data[cut:]
        try:
            json.loads(tail.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            warnings.warn(
                f"{self.path}: dropped a torn last line from an interrupted run ({len(tail)} "
                "bytes); it will be computed again",
                stacklevel=4,
            )
            os.ftruncate(self._open_fd, cut)
            return data[:cut]
        self._write(b"\n")  # a whole record that only lacks its newline
        return data + b"\n"

    # -- writing -----------------------------------------------------------------------------
    def append(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Append `records` (one JSON line each, preceded by the header in a new file).

        Args:
            records: JSON-serialisable mappings; NaN or infinite values are refused
                (`ValueError` from `json.dumps`).

        Raises:
            UsageError: Called outside the `with` block.
        """
        if self._fd is None:
            raise UsageError("use ResumableLog as a context manager: with ResumableLog(...)")
        lines = [json.dumps(dict(r), allow_nan=False) + "\n" for r in records]
        if not lines:
            return
        if not self._has_header:
            lines.insert(0, json.dumps(self.header, allow_nan=False) + "\n")
            self._has_header = True
        self._write("".join(lines).encode("utf-8"))

    def _write(self, data: bytes) -> None:
        fd = self._open_fd
        os.lseek(fd, 0, os.SEEK_END)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]


def check_output_file(path: str | os.PathLike[str], what: str = "the output file") -> Path:
    """`path` as a `Path` if a file can be written (or resumed) there now; nothing is created.

    Meant to run before any work starts, so a bad path fails at once rather than after the
    model ran: `path` must not be a directory or another non-regular file (a device, a
    pipe), the nearest existing folder above it must be a folder (not a regular file), that
    folder (or the existing file) must be writable, and no other process may be writing the
    file (the lock `ResumableLog` holds). `ResumableLog` checks the path again when it
    opens the file, so a later change is refused as well.

    Args:
        path: The file to write.
        what: What the file is, for the message (`"the score file (out=)"`).

    Returns:
        `path` as a `Path`.

    Raises:
        InvalidArgumentError: `path` is a directory or not a regular file, a path
            component above it is a regular file, or it cannot be written; the message names
            the path and what to do.
        FileInUseError: another process (or another writer in this one) holds the file.

    Examples:
        >>> import pathlib, tempfile
        >>> from reward_lens_tl.errors import InvalidArgumentError
        >>> from reward_lens_tl.provenance import check_output_file
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> check_output_file(folder / "new" / "scores.jsonl").name  # folders are made later
        'scores.jsonl'
        >>> try:
        ...     check_output_file(folder, "the score file")
        ... except InvalidArgumentError as err:
        ...     print(str(err).split(folder.name)[1].split(";")[0])
         is a directory, not a file
        >>> _ = (folder / "notes.txt").write_text("")
        >>> try:
        ...     check_output_file(folder / "notes.txt" / "scores.jsonl")
        ... except InvalidArgumentError as err:
        ...     print(str(err).split(": ", 1)[1].split(" (")[0])
        notes.txt is a regular file, not a folder
    """
    target = _check_path(Path(path), what)
    if target.is_file() and fcntl is not None:
        try:
            fd = os.open(target, os.O_RDONLY)
        except OSError:
            return target  # reported when the file is opened for writing
        try:  # a shared lock for an instant: refused only while a writer holds the file
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FileInUseError(_in_use(target)) from None
        finally:
            os.close(fd)
    return target


def _check_path(target: Path, what: str) -> Path:
    """`target` if it can be a file this process writes (see `check_output_file`)."""
    if target.is_dir():
        raise InvalidArgumentError(
            f"{what} {target} is a directory, not a file; give a file path, e.g. "
            f"{target / 'scores.jsonl'}"
        )
    if target.exists() and not target.is_file():
        raise InvalidArgumentError(
            f"{what} {target} is not a regular file (a device, a pipe or a socket); give the "
            "path of a regular file"
        )
    folder = target.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if folder.exists() and not folder.is_dir():
        raise InvalidArgumentError(
            f"{what} {target} cannot be created: {folder.name} is a regular file, not a folder "
            f"({folder}); choose another path, or move that file"
        )
    writable = target if target.exists() else folder
    if writable.exists() and not os.access(writable, os.W_OK):
        raise InvalidArgumentError(
            f"{what} {target} cannot be written: no write permission on {writable}; choose "
            "another path"
        )
    return target


def _in_use(path: Path) -> str:
    return (
        f"{path} is being written by another process (it holds the file's lock); wait for that "
        "run to finish, or write to another path"
    )


def _open_locked(path: Path) -> int:
    """An fd of `path` (created if absent) under an exclusive lock.

    Retried if the file was replaced or removed while we waited for the lock.
    """
    for _ in range(10):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if fcntl is None:
            return fd
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise FileInUseError(_in_use(path)) from None
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # the previous holder removed the file: lock the new one
    raise FileInUseError(f"{path} keeps being replaced by another process; use another path")


def _lockfile_for(path: Path) -> Path:  # pragma: no cover - only without fcntl
    lock = path.with_name(f".{path.name}.lock")
    try:
        os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        raise FileInUseError(
            f"{path} is being written by another process ({lock} exists); wait for it, or "
            "delete the lock file if no run is using it"
        ) from None
    return lock


def _read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while block := os.read(fd, 1 << 20):
        chunks.append(block)
    return b"".join(chunks)


def _parse_line(path: Path, number: int, line: str) -> Any:
    try:
        return json.loads(line, parse_constant=_refuse_constant)
    except (json.JSONDecodeError, ValueError) as err:
        raise ResumableFileError(
            f"{path}, line {number}: not a valid record ({err}); delete the file or write to "
            "another path"
        ) from None


def _refuse_constant(name: str) -> float:
    raise InvalidArgumentError(f"holds {name}, not a finite number")
