"""Hub ids: `"org/name"` resolved to a local snapshot of config, tokenizer and safetensors.

`resolve_checkpoint` turns what a user passes as a model into a checkpoint directory:

- an existing local directory is used as it is (a local directory wins over a hub id of the
  same spelling);
- a string that `huggingface_hub` accepts as a repo id (`"org/name"` or `"name"`) is
  resolved with `huggingface_hub.snapshot_download` into the hub cache, fetching only
  `ALLOWED_PATTERNS` at the repository's top level: `config.json`, the tokenizer files
  and `*.safetensors` with their index. Never `*.py` files, never pickle weights
  (`*.bin`, `*.pt`, `*.pth`, `*.ckpt`, `*.pkl`). Online, the repository's file list is
  read first and a repository with pickle weights only is refused
  (`UnsafeCheckpointError`) before anything large is fetched;
- `HF_HUB_OFFLINE=1` or `local_files_only=True` resolve from the cache only, with the
  same layout `huggingface_hub` writes (`models--org--name/refs/<branch or tag>`,
  `models--org--name/snapshots/<commit>/…`).

The snapshot returned is still untrusted input: the loaders put it through
`reward_lens_tl.checkpoint` (remote code refused, safetensors only, headers checked), as
they do any directory. Each failure is a typed error (`HubResolutionError` and its
subclasses in `reward_lens_tl.errors`) naming the repo id and, where it matters, the
revision, and saying what to do: for a hub id that is neither cached nor reachable, the exact
`download_command` that fetches it.

Examples:
    >>> from reward_lens_tl.zoo import zoo_path
    >>> resolve_checkpoint(zoo_path("scalar")) == zoo_path("scalar")
    True
    >>> is_hub_id("Skywork/Skywork-Reward-V2-Llama-3.1-8B"), is_hub_id("./missing/dir")
    (True, False)
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .checkpoint import checkpoint_dir
from .errors import (
    CheckpointError,
    HubGatedRepoError,
    HubIncompleteSnapshotError,
    HubNotCachedError,
    HubRepoNotFoundError,
    HubResolutionError,
    HubRevisionNotFoundError,
    InvalidArgumentError,
    MissingFileError,
    UnsafeCheckpointError,
)

__all__ = [
    "resolve_checkpoint",
]

#: The files fetched from a hub repository (`fnmatch` patterns, as `huggingface_hub` reads
#: them): the config, the tokenizer files and the safetensors weights with their index.
ALLOWED_PATTERNS: tuple[str, ...] = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "added_tokens.json",
    "chat_template.jinja",
    "chat_template.json",
    "model.safetensors.index.json",
    "model.safetensors",
    "model-*.safetensors",
)
#: The weight patterns of `ALLOWED_PATTERNS`. `resolve_checkpoint` fetches the
#: other files first, then exactly the shards `model.safetensors.index.json` names (or
#: `model.safetensors`): what transformers reads, never an adapter's or another format's
#: `*.safetensors` lying beside them.
WEIGHT_PATTERNS: tuple[str, ...] = ("model.safetensors", "model-*.safetensors")
#: Never fetched, whatever matches above: anything in a subfolder (the loaders read the top
#: level only; subfolders hold other formats and training checkpoints).
IGNORED_PATTERNS: tuple[str, ...] = ("*/*",)
#: Weight files that are Python pickles: loading one can execute code.
PICKLE_SUFFIXES: tuple[str, ...] = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
_TRUE = {"1", "ON", "YES", "TRUE"}  # what huggingface_hub reads as a true flag


def resolve_checkpoint(
    name_or_path: str | os.PathLike,
    *,
    revision: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    token: str | bool | None = None,
    local_files_only: bool = False,
) -> Path:
    """The checkpoint directory `name_or_path` names.

    A local directory, or the snapshot of a hub id (`"org/name"`) at `revision`. With
    `local_files_only=True` or `HF_HUB_OFFLINE=1` nothing is downloaded. A `pathlib.Path` is
    always a local path; only a string can be a hub id.

    Args:
        name_or_path: A local checkpoint directory or a hub id (`"org/name"`).
        revision: For a hub id, a branch, tag or commit (default `main`).
        cache_dir: The hub cache (default `$HF_HUB_CACHE`, else `huggingface_hub`'s).
        token: Passed to `huggingface_hub` (default: the logged-in token or `HF_TOKEN`).
        local_files_only: Resolve from the local cache only, downloading nothing.

    Returns:
        The checkpoint directory (the local directory itself, or the hub snapshot).

    Raises:
        InvalidArgumentError: A `revision` given with a local directory.
        HubResolutionError: A hub id that cannot be resolved (a subclass says why: not cached,
            not found, gated, incomplete snapshot).

    Examples:
        >>> import pathlib, tempfile
        >>> cache = pathlib.Path(tempfile.mkdtemp())
        >>> repo = cache / "models--org--tiny"
        >>> snapshot = repo / "snapshots" / ("a" * 40)
        >>> snapshot.mkdir(parents=True)
        >>> for name in ("config.json", "model.safetensors"):
        ...     _ = (snapshot / name).write_text("{}")
        >>> (repo / "refs").mkdir()
        >>> _ = (repo / "refs" / "main").write_text("a" * 40)
        >>> resolve_checkpoint("org/tiny", cache_dir=cache, local_files_only=True).samefile(
        ...     snapshot
        ... )
        True
        >>> try:
        ...     resolve_checkpoint("org/absent", cache_dir=cache, local_files_only=True)
        ... except HubNotCachedError as err:
        ...     print("hf download org/absent" in str(err) or "huggingface-cli" in str(err))
        True
    """
    local = _local_path(name_or_path)
    if local is not None:
        if revision is not None:
            raise InvalidArgumentError(
                f"revision={revision!r} was given with the local directory {local}, which has no "
                "revisions: leave revision unset, or pass a hub id ('org/name') to pick one"
            )
        path = checkpoint_dir(local)
        check_files_inside(path, _roots_of_local(path))
        return path
    repo_id = str(name_or_path)
    check_revision(revision)
    cache = hub_cache_dir(cache_dir)
    offline = local_files_only or is_offline()
    why = None
    if not offline:
        files = _remote_files(repo_id, revision, token, cache)
        if files is not None:
            check_hub_files(repo_id, files, revision=revision)
        else:  # the hub could not be asked: the cache may still have it; no second wait
            offline, why = True, UNREACHABLE
    path = _snapshot(repo_id, revision, cache, token, offline, local_files_only, why)
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    check_files_inside(path, (repo / "snapshots", repo / "blobs"), snapshot_of=repo / "snapshots")
    _check_snapshot(path, repo_id, revision, cache)
    return path


#: Why a resolution ran from the cache alone although downloads were allowed.
UNREACHABLE = "the hub could not be reached"

#: A revision: a 40-hex commit, or a git ref name made of safe segments (`main`, `v1.0`,
#: `refs/pr/3`): no empty, `.` or `..` segment, no segment starting with a dot, no backslash.
_SEGMENT = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9._\-]*")


def check_revision(revision: str | None) -> None:
    """Refuse a revision that is not a branch, tag or commit name.

    `huggingface_hub` joins the revision into the cache's `refs/` folder, so a revision such
    as `"../../../x"` would read a file outside the cache and take it as a commit hash.

    Args:
        revision: A branch, tag or commit (`None`: the default branch).

    Raises:
        InvalidArgumentError: Not a string, or not a ref name (path separators only between
            safe segments; no `..`, no leading dot, no backslash or control character).

    Examples:
        >>> check_revision("main"), check_revision("refs/pr/3"), check_revision("a" * 40)
        (None, None, None)
        >>> try:
        ...     check_revision("../../../outside")
        ... except InvalidArgumentError as err:
        ...     print(str(err)[:44])
        revision='../../../outside' is not a branch,
    """
    if revision is None:
        return
    if not isinstance(revision, str):
        raise InvalidArgumentError(
            f"revision must be a branch, tag or commit name (a string), got {revision!r}"
        )
    segments = revision.split("/")
    if len(revision) > 255 or not all(_SEGMENT.fullmatch(s) for s in segments):
        raise InvalidArgumentError(
            f"revision={revision!r} is not a branch, tag or commit name: a revision is a "
            "40-hex commit or a ref name such as 'main', 'v1.0' or 'refs/pr/3' (segments of "
            "letters, digits, '.', '_', '-', none empty, none '..' or starting with a dot)"
        )


def check_files_inside(
    directory: Path, roots: Iterable[Path], *, snapshot_of: Path | None = None
) -> None:
    """Refuse a checkpoint whose files lead outside where they belong.

    Every file of `directory` (links followed) must resolve inside one of `roots`: the
    directory itself for a local checkpoint, the repository's `blobs/` (and its snapshots) for a
    hub snapshot. A link to a file elsewhere (another user's file, `/etc/passwd`) is refused,
    never read.

    Args:
        directory: The checkpoint directory.
        roots: The folders its files may resolve into.
        snapshot_of: For a hub snapshot, its repository's `snapshots/` folder (the directory
            itself must resolve inside it).

    Raises:
        UnsafeCheckpointError: A file (or the snapshot itself) resolving outside `roots`.
    """
    inside = [Path(r).resolve() for r in roots]
    if snapshot_of is not None and not _within(directory.resolve(), snapshot_of.resolve()):
        raise UnsafeCheckpointError(
            f"the hub snapshot {directory} resolves to {directory.resolve()}, outside the "
            f"cache's {snapshot_of}; the cache was tampered with: delete it and fetch again"
        )
    for file in sorted(directory.rglob("*")):
        target = file.resolve()
        if file.is_dir() and not file.is_symlink():
            continue
        if not any(_within(target, root) for root in inside):
            raise UnsafeCheckpointError(
                f"{file} is a link to {target}, outside the checkpoint "
                f"({', '.join(str(r) for r in inside)}): a checkpoint is untrusted input and its "
                "files are read only where they belong. Copy the file into the checkpoint "
                "directory (or, for a hub id, delete the cached snapshot and fetch it again)"
            )


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _roots_of_local(path: Path) -> tuple[Path, ...]:
    """Where a local checkpoint's files may resolve: itself, or a hub snapshot's blobs."""
    snapshots = path.resolve().parent
    if snapshots.name == "snapshots" and (snapshots.parent / "blobs").is_dir():
        return (path, snapshots.parent / "blobs")  # a snapshot folder of a hub cache
    return (path,)


def is_hub_id(text: str) -> bool:
    """Whether `text` is shaped like a hub repo id.

    `huggingface_hub`'s own rule: `"name"` or `"org/name"`, letters, digits, `-`, `_`, `.`.

    Args:
        text: The string to check.

    Returns:
        `True` when `text` is a valid hub repo id.

    Examples:
        >>> is_hub_id("org/name"), is_hub_id("name"), is_hub_id("a/b/c"), is_hub_id("/abs/dir")
        (True, True, False, False)
    """
    return _repo_id_problem(text) is None


def hub_cache_dir(cache_dir: str | os.PathLike | None = None) -> Path:
    """The hub cache folder.

    `cache_dir` if given, else `$HF_HUB_CACHE` as it is set now, else `huggingface_hub`'s
    default (`~/.cache/huggingface/hub`).

    Args:
        cache_dir: An explicit cache folder, or `None`.

    Returns:
        The hub cache folder.

    Examples:
        >>> str(hub_cache_dir("/data/hub"))
        '/data/hub'
    """
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    from huggingface_hub import constants

    return Path(os.environ.get("HF_HUB_CACHE") or constants.HF_HUB_CACHE).expanduser()


def is_offline() -> bool:
    """Whether `HF_HUB_OFFLINE` is on.

    As `huggingface_hub` read it at import or as the environment says now.

    Returns:
        `True` when the hub is offline.
    """
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE) or _env_true("HF_HUB_OFFLINE")


def check_hub_files(repo_id: str, files: Iterable[str], *, revision: str | None = None) -> None:
    """Refuse a hub repository, from its file list, before anything large is downloaded.

    Refused: no top-level `config.json` (`MissingFileError`), or pickle weights only, no
    `*.safetensors` (`UnsafeCheckpointError`, naming the files).

    Args:
        repo_id: The hub repo id (`"org/name"`).
        files: The repository's file names.
        revision: The branch, tag or commit, named in the error.

    Raises:
        MissingFileError: No top-level `config.json`, or safetensors files that are not the
            model's weights.
        UnsafeCheckpointError: Pickle weights only, no `*.safetensors`.

    Examples:
        >>> check_hub_files("org/rm", ["config.json", "model.safetensors", "pytorch_model.bin"])
        >>> try:
        ...     check_hub_files("org/old", ["config.json", "pytorch_model.bin"])
        ... except UnsafeCheckpointError as err:
        ...     print("pytorch_model.bin" in str(err))
        True
    """
    top = sorted(f for f in files if "/" not in f)
    where = _where(repo_id, revision)
    if "config.json" not in top:
        raise MissingFileError(
            f"the hub repository {where} has no config.json at its top level, so it is not a "
            f"transformers checkpoint (files: {_some(top)}); pass the id of the full model"
        )
    if "model.safetensors" in top or "model.safetensors.index.json" in top:
        return
    others = [f for f in top if f.endswith(".safetensors")]
    if others:
        raise MissingFileError(
            f"the hub repository {where} has no model.safetensors and no "
            f"model.safetensors.index.json, only {_some(others)}, which transformers does not "
            "read as the model's weights (an adapter or another format); pass the id of the "
            "full model"
        )
    pickles = [f for f in top if f.endswith(PICKLE_SUFFIXES)]
    raise UnsafeCheckpointError(
        f"the hub repository {where} has no *.safetensors weights, only "
        f"{_some(pickles) if pickles else 'no weights at all'}; pickle weights are refused "
        "because loading them can execute code, and nothing was downloaded. Look for a "
        f"safetensors conversion (a pull request on {_endpoint()}/{repo_id}/discussions: pass "
        "revision='refs/pr/N'), or convert once in a trusted environment with "
        "model.save_pretrained(dir, safe_serialization=True) and pass that directory"
    )


def download_command(
    repo_id: str, *, revision: str | None = None, cache_dir: str | os.PathLike | None = None
) -> str:
    """The shell command that fetches what `resolve_checkpoint` needs of `repo_id`.

    The command is the installed `huggingface_hub`'s; it downloads into the hub cache.

    Args:
        repo_id: The hub repo id (`"org/name"`).
        revision: The branch, tag or commit to fetch (default: the hub's `main`).
        cache_dir: The hub cache to fetch into (default: `huggingface_hub`'s).

    Returns:
        The command line, as one string.

    Examples:
        >>> cmd = download_command("org/name", revision="v1")
        >>> cmd.split()[-2:], '"model-*.safetensors"' in cmd, "*.bin" in cmd
        (['--revision', 'v1'], True, False)
    """
    new_cli = _hub_major() >= 1
    head = "hf download" if new_cli else "huggingface-cli download"
    quoted = [f'"{p}"' if "*" in p else p for p in ALLOWED_PATTERNS]
    include = (
        " ".join(f"--include {p}" for p in quoted) if new_cli else "--include " + " ".join(quoted)
    )
    parts = [head, repo_id, include, f'--exclude "{IGNORED_PATTERNS[0]}"']
    if cache_dir is not None:
        parts.append(f"--cache-dir {cache_dir}")
    if revision is not None:
        parts.append(f"--revision {revision}")
    return " ".join(parts)


# -- local paths and repo ids ---------------------------------------------------------------------
def _local_path(name_or_path: str | os.PathLike) -> Path | None:
    """`name_or_path` as an existing local path; `None` for a hub id.

    A typed error for a missing path that is not a hub id either.
    """
    path = Path(name_or_path)
    if path.exists():
        return path
    problem = (
        _repo_id_problem(name_or_path)
        if isinstance(name_or_path, str)
        else "a path object, not a string, is always a local path"
    )
    if problem is None:
        return None
    raise MissingFileError(
        f"{os.fspath(name_or_path)} does not exist, and it is not a hub repo id either "
        f"({problem}). Pass a checkpoint directory (written by save_pretrained(dir)) or a hub "
        "id 'org/name' (only its config, tokenizer and safetensors files are fetched)"
    )


def _repo_id_problem(text: str) -> str | None:
    """Why `text` is not a hub repo id (`huggingface_hub`'s validator), or `None`."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(text)
    except HFValidationError as err:
        return str(err).split(". Use `repo_type`")[0].rstrip(".")  # that hint is not ours
    return None


# -- the hub: listing and downloading -------------------------------------------------------------
def _remote_files(
    repo_id: str, revision: str | None, token: str | bool | None, cache: Path
) -> list[str] | None:
    """The repository's file names, or `None` when the hub cannot be asked now.

    No network, or a server error: `snapshot_download` then falls back to the cache or says why
    not.
    """
    from huggingface_hub import HfApi
    from huggingface_hub.errors import (
        HfHubHTTPError,
        LocalTokenNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    unreachable: tuple[type[BaseException], ...] = (
        HfHubHTTPError,
        OfflineModeIsEnabled,
        *_network_errors(),
    )
    try:
        return HfApi().list_repo_files(repo_id, revision=revision, repo_type="model", token=token)
    except (RepositoryNotFoundError, RevisionNotFoundError, LocalTokenNotFoundError) as err:
        raise _hub_error(err, repo_id, revision, cache, offline=False) from err
    except unreachable:
        return None


def _snapshot(
    repo_id: str,
    revision: str | None,
    cache: Path,
    token: str | bool | None,
    offline: bool,
    local_files_only: bool,
    why: str | None = None,
) -> Path:
    """`snapshot_download` of the allowed files; its errors made typed.

    `why` says why it runs offline when neither `local_files_only` nor `HF_HUB_OFFLINE` does.
    """
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        HfHubHTTPError,
        LocalEntryNotFoundError,
        LocalTokenNotFoundError,
        OfflineModeIsEnabled,
    )

    failures: tuple[type[BaseException], ...] = (
        HfHubHTTPError,
        LocalEntryNotFoundError,
        LocalTokenNotFoundError,
        OfflineModeIsEnabled,
        *_network_errors(),
    )

    def download(patterns: Iterable[str]) -> Path:
        return Path(
            snapshot_download(
                repo_id,
                repo_type="model",
                revision=revision,
                cache_dir=cache,
                token=token,
                local_files_only=offline,
                allow_patterns=list(patterns),
                ignore_patterns=list(IGNORED_PATTERNS),
            )
        )

    try:
        folder = download(p for p in ALLOWED_PATTERNS if p not in WEIGHT_PATTERNS)
        if not offline:
            index = folder / "model.safetensors.index.json"
            download(_index_shards(index) if index.is_file() else ["model.safetensors"])
    except failures as err:
        if why is None:
            why = "local_files_only=True" if local_files_only else "HF_HUB_OFFLINE=1"
        raise _hub_error(err, repo_id, revision, cache, offline=offline, why=why) from err
    return folder


def _network_errors() -> tuple[type[BaseException], ...]:
    """Connection failures of whichever HTTP client `huggingface_hub` uses."""
    found: list[type[BaseException]] = [ConnectionError, TimeoutError]
    for module, names in (
        ("httpx2", ("TransportError",)),
        ("httpx", ("TransportError",)),
        ("requests.exceptions", ("ConnectionError", "Timeout")),
    ):
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue
        found += [getattr(mod, n) for n in names if isinstance(getattr(mod, n, None), type)]
    return tuple(found)


# -- typed errors ---------------------------------------------------------------------------------
def _hub_error(
    err: BaseException,
    repo_id: str,
    revision: str | None,
    cache: Path,
    *,
    offline: bool,
    why: str = "HF_HUB_OFFLINE=1",
) -> HubResolutionError:
    """The typed error for one of `huggingface_hub`'s, naming repo id, revision and remedy."""
    from huggingface_hub.errors import (
        GatedRepoError,
        IncompleteSnapshotError,
        LocalTokenNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    where = _where(repo_id, revision)
    fetch = download_command(repo_id, revision=revision, cache_dir=_shown_cache(cache))
    login = "hf auth login" if _hub_major() >= 1 else "huggingface-cli login"
    page = f"{_endpoint()}/{repo_id}"
    if isinstance(err, GatedRepoError):
        return HubGatedRepoError(
            f"{where} is a gated repository: accept its conditions at {page} while logged in, "
            f"then log in here with `{login}` (or set HF_TOKEN, or pass token=...)"
        )
    if isinstance(err, RepositoryNotFoundError):
        return HubRepoNotFoundError(
            f"no model repository {repo_id!r} on {_endpoint()}, or a private one this token "
            f"cannot see: check the spelling, or log in with `{login}` (or HF_TOKEN / token=...). "
            f"No local directory {Path(repo_id).absolute()} exists either"
        )
    if isinstance(err, RevisionNotFoundError):
        return HubRevisionNotFoundError(
            f"revision {revision!r} does not exist in {repo_id} (no branch, tag or commit of "
            f"that name): pass an existing branch, tag or full 40-character commit hash (see "
            f"{page}/tree/main), or leave revision unset for main"
        )
    if isinstance(err, IncompleteSnapshotError):
        return HubIncompleteSnapshotError(
            f"the cached snapshot of {where} in {cache} is incomplete ({err}); complete it with "
            f"`{fetch}`"
        )
    if isinstance(err, LocalTokenNotFoundError):
        return HubResolutionError(
            f"token=True was given for {where} but no token is stored: log in with `{login}`, "
            "set HF_TOKEN, or pass the token itself"
        )
    return _not_cached(repo_id, revision, cache, offline=offline, why=why, err=err)


def _not_cached(
    repo_id: str, revision: str | None, cache: Path, *, offline: bool, why: str, err: BaseException
) -> HubResolutionError:
    """Offline (or unreachable) and not in the cache: a revision the cache lacks, or the repo."""
    where = _where(repo_id, revision)
    fetch = download_command(repo_id, revision=revision, cache_dir=_shown_cache(cache))
    cached = _cached_revisions(cache, repo_id)
    if revision is not None and cached:
        return HubRevisionNotFoundError(
            f"revision {revision!r} of {repo_id} is not in the hub cache at {cache} (cached: "
            f"{cached}) and cannot be fetched now ({why if offline else err}): fetch it with "
            f"`{fetch}` on a machine with network, or pass a cached revision"
        )
    how = (
        f"downloads are off ({why}); allow them (unset HF_HUB_OFFLINE, local_files_only=False) or"
        if offline and why != UNREACHABLE
        else f"the hub could not be reached ({type(err).__name__}); check the network (or "
        "HF_ENDPOINT, a proxy), or"
    )
    also = f" (cached revisions: {cached})" if cached else ""
    return HubNotCachedError(
        f"{where} is not in the hub cache at {cache}{also}, and {how} fetch it on a machine with "
        f"network with `{fetch}` and copy that cache here (or point HF_HUB_CACHE / cache_dir= at "
        f"it). No local directory {Path(repo_id).absolute()} exists either"
    )


def _cached_revisions(cache: Path, repo_id: str) -> str:
    """`"main → 1a2b3c4, v1 → 5d6e7f8"` plus snapshots no ref names, or `""`."""
    from huggingface_hub.file_download import repo_folder_name

    repo = cache / repo_folder_name(repo_id=repo_id, repo_type="model")
    refs = {}
    if (repo / "refs").is_dir():
        for ref in sorted(p for p in (repo / "refs").rglob("*") if p.is_file()):
            refs[ref.relative_to(repo / "refs").as_posix()] = ref.read_text().strip()
    snapshots = (
        sorted(p.name for p in (repo / "snapshots").iterdir() if p.is_dir())
        if (repo / "snapshots").is_dir()
        else []
    )
    named = [f"{name} → {commit[:12]}" for name, commit in refs.items()]
    unnamed = [s for s in snapshots if s not in refs.values()]
    return ", ".join(named + [f"commit {s}" for s in unnamed])


# -- the snapshot -------------------------------------------------------------------------------
def _check_snapshot(path: Path, repo_id: str, revision: str | None, cache: Path) -> None:
    """A snapshot lacking config.json, any weights, or a shard its index names is refused.

    Such a snapshot is an interrupted download. Pickle-only snapshots pass here: the loader
    refuses them.
    """
    missing = [] if (path / "config.json").is_file() else ["config.json"]
    for index in sorted(path.glob("*.safetensors.index.json")):
        missing += [s for s in _index_shards(index) if not (path / s).is_file()]
    has_weights = any(
        f.is_file() and (f.suffix == ".safetensors" or f.name.endswith(PICKLE_SUFFIXES))
        for f in path.iterdir()
    )
    if not has_weights:
        missing.append("*.safetensors")
    if missing:
        fetch = download_command(repo_id, revision=revision, cache_dir=_shown_cache(cache))
        raise HubIncompleteSnapshotError(
            f"the cached snapshot of {_where(repo_id, revision)} at {path} lacks "
            f"{_some(missing)} (an interrupted or partial download); complete it with `{fetch}`"
        )


def _index_shards(index: Path) -> list[str]:
    """The shard files a safetensors index names.

    None when it cannot be read: the loader reports a corrupt index itself.
    """
    from .weights import read_weight_map

    try:
        return sorted(set(read_weight_map(index).values()))
    except (OSError, CheckpointError):
        return []


# -- small helpers --------------------------------------------------------------------------------
def _where(repo_id: str, revision: str | None) -> str:
    return repo_id if revision is None else f"{repo_id} (revision {revision!r})"


def _some(names: Sequence[str], k: int = 8) -> str:
    shown = ", ".join(names[:k])
    return shown + (f" … (+{len(names) - k} more)" if len(names) > k else "")


def _shown_cache(cache: Path) -> Path | None:
    """`cache` for a `--cache-dir` option, `None` when it is the default one."""
    from huggingface_hub import constants

    return None if cache == Path(constants.HF_HUB_CACHE).expanduser() else cache


def _endpoint() -> str:
    from huggingface_hub import constants

    return str(constants.ENDPOINT)


def _hub_major() -> int:
    import huggingface_hub

    version: Any = getattr(huggingface_hub, "__version__", "0")
    head = str(version).split(".")[0]
    return int(head) if head.isdigit() else 0


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().upper() in _TRUE
