"""Hub ids (``reward_lens_tl.hub``), offline, against a hub cache built here in the layout
``huggingface_hub`` reads (``models--org--name/{blobs,snapshots/<commit>,refs/<name>}``), so
that huggingface_hub's own resolution code runs; the online steps (the file listing, the
download) are checked with fakes in place of the network."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from fnmatch import fnmatch
from pathlib import Path

import httpx2
import huggingface_hub
import pytest
import torch
from huggingface_hub import constants
from huggingface_hub.errors import (
    GatedRepoError,
    LocalEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import filter_repo_objects

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.checkpoint import check_weight_files, checkpoint_tokenizer
from reward_lens_tl.cli import build_parser, main
from reward_lens_tl.errors import (
    HubGatedRepoError,
    HubIncompleteSnapshotError,
    HubNotCachedError,
    HubRepoNotFoundError,
    HubRevisionNotFoundError,
    InvalidArgumentError,
    MissingFileError,
    UnsafeCheckpointError,
)
from reward_lens_tl.hub import (
    ALLOWED_PATTERNS,
    IGNORED_PATTERNS,
    WEIGHT_PATTERNS,
    check_hub_files,
    download_command,
    resolve_checkpoint,
)
from reward_lens_tl.testing import VOCAB, tiny_reward_model, tiny_tokenizer
from reward_lens_tl.zoo import zoo_path

REPO = "org/tiny-rm"
MAIN = hashlib.sha1(b"main").hexdigest()  # 40 hex characters, like a git commit
V1 = hashlib.sha1(b"v1").hexdigest()
# the download command the installed huggingface_hub ships (`hf` since 1.0)
NEW_CLI = int(huggingface_hub.__version__.split(".")[0]) >= 1
CLI = "hf download" if NEW_CLI else "huggingface-cli download"


# -- a hub cache in huggingface_hub's layout -------------------------------------------------------
def repo_folder(cache: Path, repo_id: str) -> Path:
    return cache / ("models--" + repo_id.replace("/", "--"))


def add_snapshot(
    cache: Path, repo_id: str, source: Path, commit: str, refs=(), symlinks: bool = True
) -> Path:
    """Put ``source``'s files into the cache as snapshot ``commit``: symlinks into ``blobs/``
    (as huggingface_hub writes them) or plain files; ``refs/<ref>`` hold the commit."""
    repo = repo_folder(cache, repo_id)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for file in sorted(source.iterdir()):
        if not symlinks:
            shutil.copy(file, snapshot / file.name)
            continue
        data = file.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(exist_ok=True)
        blob.write_bytes(data)
        (snapshot / file.name).symlink_to(os.path.relpath(blob, snapshot))
    for ref in refs:
        (repo / "refs" / ref).parent.mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(commit)  # no newline, as huggingface_hub writes it
    return snapshot


def saved_model(folder: Path, seed: int):
    """A tiny Llama reward model (safetensors) with a tokenizer, saved in ``folder``."""
    hf = tiny_reward_model("llama", seed=seed)
    hf.save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    assert any(folder.glob("*.safetensors")) and not any(folder.glob("*.bin"))
    return hf


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """A cache holding ``org/tiny-rm`` at main (seed 0) and at tag v1 (seed 1, other weights),
    as symlinks into blobs; ``org/plain-rm`` as plain files."""
    root = tmp_path_factory.mktemp("hub")
    cache = root / "cache"
    hf_main, hf_v1 = saved_model(root / "main", 0), saved_model(root / "v1", 1)
    snapshots = {
        "main": add_snapshot(cache, REPO, root / "main", MAIN, refs=["main"]),
        "v1": add_snapshot(cache, REPO, root / "v1", V1, refs=["v1"]),
        "plain": add_snapshot(cache, "org/plain-rm", root / "main", MAIN, ["main"], False),
    }
    return {"cache": cache, "snapshots": snapshots, "hf": {"main": hf_main, "v1": hf_v1}}


def hf_rewards(hf, ids):
    with torch.no_grad():
        return hf(input_ids=ids).logits[:, 0]


IDS = torch.randint(3, VOCAB, (3, 10), generator=torch.Generator().manual_seed(1))


# -- resolution through huggingface_hub's cache code ---------------------------------------------
def test_a_hub_id_resolves_to_the_snapshot_of_its_revision(hub):
    cache, snapshots = hub["cache"], hub["snapshots"]
    assert resolve_checkpoint(REPO, cache_dir=cache).samefile(snapshots["main"])
    assert resolve_checkpoint(REPO, cache_dir=cache, revision="v1").samefile(snapshots["v1"])
    assert resolve_checkpoint(REPO, cache_dir=cache, revision=V1).samefile(snapshots["v1"])
    assert resolve_checkpoint(REPO, cache_dir=cache, revision="main").name == MAIN
    plain = resolve_checkpoint("org/plain-rm", cache_dir=cache, local_files_only=True)
    assert plain.samefile(snapshots["plain"]) and not (plain / "config.json").is_symlink()
    assert (resolve_checkpoint(REPO, cache_dir=cache) / "config.json").is_symlink()


def test_cache_from_the_environment_when_no_cache_dir_is_given(hub, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(hub["cache"]))
    assert resolve_checkpoint(REPO, revision="v1").samefile(hub["snapshots"]["v1"])


def test_rewards_through_the_resolved_snapshot_equal_hf(hub):
    """Each revision loads its own weights: main's rewards are main's HF rewards, v1's are
    v1's, and the two differ (so a revision that was ignored would fail)."""
    for revision in ("main", "v1"):
        path = resolve_checkpoint(REPO, cache_dir=hub["cache"], revision=revision)
        model = HookedRewardModel.from_pretrained(path)
        expected = hf_rewards(hub["hf"][revision], IDS)
        torch.testing.assert_close(model.rewards(IDS), expected, atol=1e-4, rtol=0)
        assert model.tokenizer is not None  # the tokenizer files came along
        assert checkpoint_tokenizer(path).eos_token == "<eos>"
    gap = (hf_rewards(hub["hf"]["main"], IDS) - hf_rewards(hub["hf"]["v1"], IDS)).abs().max()
    assert gap > 1e-2


def test_a_local_directory_is_used_as_it_is_and_has_no_revisions():
    assert resolve_checkpoint(zoo_path("scalar")) == zoo_path("scalar")
    assert resolve_checkpoint(str(zoo_path("scalar"))) == zoo_path("scalar")
    with pytest.raises(InvalidArgumentError, match="revision='v1'.*no revisions"):
        resolve_checkpoint(zoo_path("scalar"), revision="v1")


@pytest.mark.parametrize("text", ["./missing/dir", "a/b/c", "/no/such/checkpoint", "x--y/z"])
def test_neither_a_path_nor_a_hub_id_is_a_missing_file(text):
    with pytest.raises(MissingFileError, match="does not exist.*not a hub repo id") as info:
        resolve_checkpoint(text)
    assert not isinstance(info.value, HubNotCachedError)
    assert "'org/name'" in str(info.value)


def test_a_pathlib_path_is_never_a_hub_id(hub):
    with pytest.raises(MissingFileError, match="always a local path"):
        resolve_checkpoint(Path(REPO), cache_dir=hub["cache"])


# -- offline failures ---------------------------------------------------------------------------
def test_not_cached_offline_says_how_to_fetch_it(hub):
    assert constants.HF_HUB_OFFLINE  # conftest: HF_HUB_OFFLINE=1
    with pytest.raises(HubNotCachedError) as info:
        resolve_checkpoint("org/absent", cache_dir=hub["cache"])
    message = str(info.value)
    assert f"{CLI} org/absent" in message
    assert '"model-*.safetensors"' in message and "model.safetensors.index.json" in message
    assert "config.json" in message and "*.bin" not in message
    assert "HF_HUB_OFFLINE=1" in message and str(hub["cache"]) in message
    assert isinstance(info.value, MissingFileError)  # what a missing directory raised before


def test_local_files_only_is_named_when_it_is_the_reason(hub, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(HubNotCachedError, match="local_files_only=True"):
        resolve_checkpoint("org/absent", cache_dir=hub["cache"], local_files_only=True)


def test_a_revision_the_cache_does_not_hold_is_named(hub):
    with pytest.raises(HubRevisionNotFoundError) as info:
        resolve_checkpoint(REPO, cache_dir=hub["cache"], revision="v2")
    message = str(info.value)
    assert "'v2'" in message and REPO in message and "--revision v2" in message
    assert f"v1 → {V1[:12]}" in message and f"main → {MAIN[:12]}" in message
    with pytest.raises(HubRevisionNotFoundError, match="0{40}"):
        resolve_checkpoint(REPO, cache_dir=hub["cache"], revision="0" * 40)


def test_a_cached_pickle_only_snapshot_is_returned_but_never_loaded(tmp_path):
    source = tmp_path / "pickled"
    source.mkdir()
    hf = saved_model(source, 0)
    for file in source.glob("*.safetensors"):
        file.unlink()
    torch.save(hf.state_dict(), source / "pytorch_model.bin")
    add_snapshot(tmp_path / "cache", "org/pickled", source, MAIN, refs=["main"])
    path = resolve_checkpoint("org/pickled", cache_dir=tmp_path / "cache")
    with pytest.raises(UnsafeCheckpointError, match="pickle"):
        check_weight_files(path)
    with pytest.raises(UnsafeCheckpointError, match="safetensors"):
        HookedRewardModel.from_pretrained(path)


def test_a_snapshot_with_remote_code_is_refused(tmp_path):
    source = tmp_path / "evil"
    source.mkdir()
    saved_model(source, 0)
    config = json.loads((source / "config.json").read_text())
    config.update(model_type="evil_rm", auto_map={"AutoConfig": "configuration_evil.EvilConfig"})
    (source / "config.json").write_text(json.dumps(config))
    add_snapshot(tmp_path / "cache", "org/evil", source, MAIN, refs=["main"])
    path = resolve_checkpoint("org/evil", cache_dir=tmp_path / "cache")
    with pytest.raises(UnsafeCheckpointError, match="auto_map"):
        HookedRewardModel.from_pretrained(path)


def test_an_interrupted_download_is_an_incomplete_snapshot(tmp_path):
    source = tmp_path / "sharded"
    source.mkdir()
    (source / "config.json").write_text("{}")
    (source / "model-00001-of-00002.safetensors").write_bytes(b"")
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors"}}
    index["weight_map"]["b"] = "model-00002-of-00002.safetensors"
    (source / "model.safetensors.index.json").write_text(json.dumps(index))
    add_snapshot(tmp_path / "cache", "org/sharded", source, MAIN, refs=["main"])
    with pytest.raises(HubIncompleteSnapshotError, match="model-00002-of-00002.safetensors"):
        resolve_checkpoint("org/sharded", cache_dir=tmp_path / "cache")
    only_config = tmp_path / "only_config"  # e.g. a cache where AutoConfig fetched config.json
    only_config.mkdir()
    (only_config / "config.json").write_text("{}")
    add_snapshot(tmp_path / "cache", "org/config-only", only_config, MAIN, refs=["main"])
    with pytest.raises(HubIncompleteSnapshotError, match=r"lacks \*\.safetensors"):
        resolve_checkpoint("org/config-only", cache_dir=tmp_path / "cache")


# -- what is fetched ------------------------------------------------------------------------------
SAMPLE_FILES = [
    "config.json",
    "model.safetensors",
    "model-00001-of-00004.safetensors",
    "model.safetensors.index.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.model",
    "chat_template.jinja",
    "pytorch_model.bin",
    "pytorch_model-00001-of-00002.bin",
    "pytorch_model.bin.index.json",
    "training_args.bin",
    "model.pt",
    "weights.pth",
    "checkpoint.ckpt",
    "optimizer.pkl",
    "modeling_custom.py",
    "configuration_custom.py",
    "original/consolidated.00.pth",
    "onnx/model.safetensors",
    "README.md",
]


def test_only_config_tokenizer_and_safetensors_are_fetched():
    unsafe = (".py", ".bin", ".pt", ".pth", ".ckpt", ".pkl")
    for pattern in ALLOWED_PATTERNS:
        assert not pattern.endswith(unsafe) and ".bin" not in pattern, pattern
        for suffix in unsafe:
            assert not fnmatch(f"x{suffix}", pattern), (pattern, suffix)
    fetched = list(
        filter_repo_objects(
            SAMPLE_FILES, allow_patterns=list(ALLOWED_PATTERNS), ignore_patterns=IGNORED_PATTERNS
        )
    )  # huggingface_hub's own filter, as snapshot_download applies it
    assert fetched == [
        "config.json",
        "model.safetensors",
        "model-00001-of-00004.safetensors",
        "model.safetensors.index.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "tokenizer.model",
        "chat_template.jinja",
    ]


def test_the_download_command_fetches_exactly_the_allowed_files():
    command = download_command(REPO, revision="v1", cache_dir="/data/hub")
    assert command.startswith(f"{CLI} {REPO} --include config.json")
    for pattern in ALLOWED_PATTERNS:
        assert pattern in command
    assert command.endswith("--cache-dir /data/hub --revision v1")
    assert '--exclude "*/*"' in command and ".bin" not in command and ".py" not in command


# -- online steps, with fakes in place of the network ---------------------------------------------
@pytest.fixture()
def online(monkeypatch):
    """huggingface_hub believes it is online; the listing and the download are fakes (each
    call recorded), so nothing reaches the network."""
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    calls: dict[str, list] = {"list": [], "download": []}
    state: dict = {"files": None, "list_error": None, "download": None}

    def list_repo_files(self, repo_id, *, revision=None, repo_type=None, token=None):
        calls["list"].append(dict(repo_id=repo_id, revision=revision, repo_type=repo_type))
        if state["list_error"] is not None:
            raise state["list_error"]
        return state["files"]

    def snapshot_download(repo_id, **kwargs):
        calls["download"].append(dict(repo_id=repo_id, **kwargs))
        if isinstance(state["download"], BaseException):
            raise state["download"]
        return str(state["download"])

    monkeypatch.setattr(huggingface_hub.HfApi, "list_repo_files", list_repo_files)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    return state, calls


def _http_error(cls, status: int):
    request = httpx2.Request("GET", f"https://huggingface.co/api/models/{REPO}")
    return cls(f"{status} error", response=httpx2.Response(status, request=request))


def test_the_file_list_refuses_pickle_only_repositories():
    check_hub_files(REPO, ["config.json", "model.safetensors", "pytorch_model.bin"])
    shards = ["model-00001-of-00002.safetensors", "model.safetensors.index.json"]
    check_hub_files(REPO, ["config.json", *shards, "x.py"])
    with pytest.raises(MissingFileError, match="consolidated.safetensors"):  # not transformers'
        check_hub_files(REPO, ["config.json", "consolidated.safetensors"])
    with pytest.raises(UnsafeCheckpointError) as info:
        check_hub_files(REPO, ["config.json", "pytorch_model.bin", "model.pt", "README.md"])
    assert "pytorch_model.bin" in str(info.value) and "model.pt" in str(info.value)
    assert REPO in str(info.value) and "refs/pr/N" in str(info.value)
    with pytest.raises(UnsafeCheckpointError):  # a subfolder's safetensors are not fetched
        check_hub_files(REPO, ["config.json", "pytorch_model.bin", "onnx/model.safetensors"])
    with pytest.raises(MissingFileError, match="no config.json"):
        check_hub_files(REPO, ["adapter_config.json", "adapter_model.safetensors"])


def test_online_a_pickle_only_repository_is_refused_before_any_download(online):
    state, calls = online
    state["files"] = ["config.json", "pytorch_model.bin", "modeling_rm.py"]
    with pytest.raises(UnsafeCheckpointError, match="pytorch_model.bin"):
        resolve_checkpoint(REPO, revision="v1", token="hf_x")
    assert calls["list"] == [dict(repo_id=REPO, revision="v1", repo_type="model")]
    assert calls["download"] == []


def test_online_the_download_asks_for_the_allowed_files_only(online, hub):
    state, calls = online
    state["files"] = ["config.json", "model.safetensors", "pytorch_model.bin", "rm.py"]
    state["download"] = hub["snapshots"]["v1"]
    path = resolve_checkpoint(REPO, revision="v1", cache_dir=hub["cache"], token="hf_x")
    assert path == hub["snapshots"]["v1"]
    metadata, weights = calls["download"]  # first config, tokenizer and index; then weights
    assert metadata["allow_patterns"] == [p for p in ALLOWED_PATTERNS if p not in WEIGHT_PATTERNS]
    assert weights["allow_patterns"] == ["model.safetensors"]  # no index: the single file
    for call in (metadata, weights):
        assert call["ignore_patterns"] == list(IGNORED_PATTERNS)
        assert (call["repo_type"], call["revision"], call["token"]) == ("model", "v1", "hf_x")
        assert call["local_files_only"] is False and Path(call["cache_dir"]) == hub["cache"]


def test_online_a_sharded_repository_fetches_exactly_the_shards_its_index_names(online, tmp_path):
    state, calls = online
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "w-2.safetensors"}}
    repo = tmp_path / ("models--" + REPO.replace("/", "--"))
    snapshot = repo / "snapshots" / ("a" * 40)  # where snapshot_download puts it
    snapshot.mkdir(parents=True)
    (snapshot / "model.safetensors.index.json").write_text(json.dumps(index))
    state["files"] = ["config.json", "model.safetensors.index.json", "adapter_model.safetensors"]
    state["download"] = snapshot
    with pytest.raises(HubIncompleteSnapshotError):  # the fake download wrote no shard
        resolve_checkpoint(REPO, token="hf_x", cache_dir=tmp_path)
    assert calls["download"][1]["allow_patterns"] == [
        "model-00001-of-00002.safetensors",
        "w-2.safetensors",
    ]


@pytest.mark.parametrize(
    "error, expected, words",
    [
        (_http_error(RepositoryNotFoundError, 404), HubRepoNotFoundError, ["check the spelling"]),
        (_http_error(GatedRepoError, 403), HubGatedRepoError, ["gated", "accept"]),
        (_http_error(RevisionNotFoundError, 404), HubRevisionNotFoundError, ["'v9'"]),
    ],
)
def test_online_hub_errors_are_typed_and_say_what_to_do(online, error, expected, words):
    state, calls = online
    state["list_error"] = error
    with pytest.raises(expected) as info:
        resolve_checkpoint(REPO, revision="v9")
    for word in [REPO, *words]:
        assert word in str(info.value)
    assert calls["download"] == []


def test_online_without_network_falls_back_to_the_cache_or_says_so(online, hub):
    state, calls = online
    state["list_error"] = httpx2.ConnectError("no route to host")
    state["download"] = hub["snapshots"]["main"]  # the cache had it
    assert resolve_checkpoint(REPO, cache_dir=hub["cache"]) == hub["snapshots"]["main"]
    state["download"] = LocalEntryNotFoundError("cannot find the requested files")
    with pytest.raises(HubNotCachedError, match="could not be reached") as info:
        resolve_checkpoint("org/absent", cache_dir=hub["cache"])
    assert "download org/absent" in str(info.value)


# -- the command line ---------------------------------------------------------------------------
def test_cli_info_takes_a_hub_id_and_a_revision(hub, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_CACHE", str(hub["cache"]))
    assert main(["info", REPO]) == 0
    out = capsys.readouterr().out
    assert "architecture:   LlamaForSequenceClassification" in out
    assert f"snapshot:       {hub['snapshots']['main']}" in out
    assert float(out.split("max |converted − HF| = ")[1].split()[0]) < 1e-4
    assert main(["info", REPO, "--revision", "v1", "--no-parity"]) == 0
    assert V1 in capsys.readouterr().out


def test_cli_a_hub_id_that_is_not_cached_exits_2_with_the_typed_message(hub, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_CACHE", str(hub["cache"]))
    argvs = [
        ["info", "org/absent"],
        ["score", "org/absent", "pairs.jsonl"],
        ["check", "org/absent"],
        ["sweep", "org/absent", "--prompt", "hi", "--out", str(hub["cache"].parent / "sweep")],
        ["eval", "rewardbench", "org/absent", "data.jsonl"],
    ]
    for argv in argvs:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("reward-lens: error: HubNotCachedError:") and err.count("\n") == 1
        assert f"{CLI} org/absent" in err
    assert not (hub["cache"].parent / "sweep").exists()  # refused before the sweep started
    assert main(["info", REPO, "--revision", "v2"]) == 2
    assert "HubRevisionNotFoundError: revision 'v2'" in capsys.readouterr().err
    assert main(["info", str(zoo_path("scalar")), "--revision", "v1"]) == 2
    assert "no revisions" in capsys.readouterr().err


def test_cli_every_model_argument_says_it_takes_a_hub_id():
    parser = build_parser()
    for command in ("score", "info", "check", "report", "sweep", "eval"):
        sub = parser._subparsers._group_actions[0]  # type: ignore[union-attr]
        sub.build(command)  # the lazy subcommands get their arguments now
        child = sub.choices[command]
        (model,) = [a for a in child._actions if a.dest == "model" and not a.option_strings]
        assert "hub id org/name" in model.help, command
        assert "--revision" in child._option_string_actions, command


# The lead wires hub ids into HookedRewardModel.from_pretrained itself (issue 24, item 1); this
# test states the interface it is to meet: a hub id, `revision=` and `cache_dir=` accepted by
# from_pretrained, resolved with reward_lens_tl.hub.resolve_checkpoint.
def test_from_pretrained_takes_a_hub_id_and_a_revision(hub):
    model = HookedRewardModel.from_pretrained(REPO, cache_dir=hub["cache"], revision="v1")
    expected = hf_rewards(hub["hf"]["v1"], IDS)
    torch.testing.assert_close(model.rewards(IDS), expected, atol=1e-4, rtol=0)


# -- untrusted paths: the cache and a checkpoint directory cannot be walked out of ---------------
@pytest.mark.parametrize(
    "revision", ["../../../outside", "main/../../x", "/etc/passwd", "..", ".hidden", "a\\b", ""]
)
def test_a_revision_that_walks_out_of_refs_is_refused_before_anything_is_read(
    hub, tmp_path, revision
):
    outside = hub["cache"].parent / "outside"
    outside.write_text(MAIN)  # had it been read, it would pass for a commit of the cache
    with pytest.raises(InvalidArgumentError, match="not a branch, tag or commit"):
        resolve_checkpoint(REPO, revision=revision, cache_dir=hub["cache"], local_files_only=True)
    with pytest.raises(InvalidArgumentError, match="not a branch, tag or commit"):
        HookedRewardModel.from_pretrained(
            REPO, revision=revision, cache_dir=hub["cache"], local_files_only=True
        )


def test_ref_names_with_segments_still_resolve(hub):
    cache = hub["cache"]
    add_snapshot(
        cache, REPO, hub["snapshots"]["v1"], hashlib.sha1(b"pr").hexdigest(), ["refs/pr/3"]
    )
    path = resolve_checkpoint(REPO, revision="refs/pr/3", cache_dir=cache, local_files_only=True)
    assert path.name == hashlib.sha1(b"pr").hexdigest()
    assert resolve_checkpoint(REPO, revision=V1, cache_dir=cache, local_files_only=True).samefile(
        hub["snapshots"]["v1"]
    )


def test_a_snapshot_file_linked_outside_the_cache_is_refused(tmp_path, hub):
    cache = tmp_path / "cache"
    snapshot = add_snapshot(cache, "org/evil-rm", hub["snapshots"]["main"], MAIN, refs=["main"])
    secret = tmp_path / "secret.safetensors"
    shutil.copy(snapshot / "model.safetensors", secret)  # a valid file, outside the cache
    (snapshot / "model.safetensors").unlink()
    (snapshot / "model.safetensors").symlink_to(secret)
    with pytest.raises(UnsafeCheckpointError, match="outside the checkpoint"):
        resolve_checkpoint("org/evil-rm", cache_dir=cache, local_files_only=True)
    with pytest.raises(UnsafeCheckpointError, match="secret.safetensors"):
        HookedRewardModel.from_pretrained("org/evil-rm", cache_dir=cache, local_files_only=True)


def test_a_checkpoint_directory_linking_outside_itself_is_refused(tmp_path, hub):
    folder = tmp_path / "ckpt"
    shutil.copytree(hub["snapshots"]["plain"], folder)
    assert HookedRewardModel.from_pretrained(folder).cfg.n_layers > 0  # plain files load
    elsewhere = tmp_path / "elsewhere.json"
    shutil.move(folder / "tokenizer_config.json", elsewhere)
    (folder / "tokenizer_config.json").symlink_to(elsewhere)
    with pytest.raises(UnsafeCheckpointError, match="tokenizer_config.json"):
        HookedRewardModel.from_pretrained(folder)
    # a snapshot folder of a hub cache, passed as a directory, reads its own blobs
    assert resolve_checkpoint(hub["snapshots"]["main"]).samefile(hub["snapshots"]["main"])


def test_an_unreachable_hub_is_asked_once_then_the_cache_answers(online, hub):
    """Without HF_HUB_OFFLINE and without network, one failed listing is enough: the snapshot is
    looked up in the cache alone (no second round of network timeouts), and a miss says the hub
    could not be reached."""
    import httpx2

    state, calls = online
    state["list_error"] = httpx2.ConnectError("no route to host")
    state["download"] = hub["snapshots"]["main"]
    assert resolve_checkpoint(REPO, cache_dir=hub["cache"]).samefile(hub["snapshots"]["main"])
    assert calls["download"][-1]["local_files_only"] is True
    state["download"] = huggingface_hub.errors.LocalEntryNotFoundError("not cached")
    with pytest.raises(HubNotCachedError, match="could not be reached") as info:
        resolve_checkpoint("org/absent", cache_dir=hub["cache"])
    assert "downloads are off" not in str(info.value)
    assert all(call["local_files_only"] is True for call in calls["download"])
