"""Real reward models' shapes with random weights, written as sharded safetensors in bounded memory.

Three shapes (``SHAPES``), each a transformers configuration of a sequence classifier with one
label and a word-level tokenizer (:func:`reward_lens_tl.testing.tiny_tokenizer`, words
``w6 … w{vocab-1}``; pad 0, bos 1, eos 2):

- ``1b``: Llama-3.2-1B (hidden 2048, 16 layers, 32 / 8 kv heads, head_dim 64, intermediate
  8192, vocab 128256, llama3 rope scaling factor 32), 1.24 B parameters, 2.30 GiB in bf16;
- ``8b``: Llama-3.1-8B (hidden 4096, 32 layers, 32 / 8 kv heads, head_dim 128, intermediate
  14336, vocab 128256, rope_theta 500000, llama3 rope scaling factor 8 / low 1 / high 4 /
  original 8192, 131072 positions), 7.50 B parameters, 14.0 GiB in bf16;
- ``27b``: a slice of Gemma-2-27B's width (hidden 4608, 32 / 16 kv heads, head_dim 128,
  query_pre_attn_scalar 144, intermediate 36864, vocab 256000, sliding window 4096, attention
  / final soft-capping 50 / 30) with 2 layers (``layers=`` for more): 2.31 B parameters, 4.3 GiB.

``tiny=True`` keeps each family and its options but shrinks the width (2 layers, hidden 64,
4 / 2 heads of 16, intermediate 128, vocab 512; Gemma's sliding window 32) for smoke runs.

The writer never holds the model: tensor names and shapes come from the classifier built on
the meta device, each tensor is generated on its own from a seed derived from ``(seed, name)``
directly in the checkpoint's dtype (``0.02 · N(0, 1)``; norm weights ``1 + 0.1 · N(0, 1)``, or
``0.1 · N(0, 1)`` for Gemma whose RMSNorm multiplies by ``1 + w``), and shards are written one
at a time with ``safetensors.torch.save_file`` (``model-0000i-of-0000n.safetensors`` plus
``model.safetensors.index.json`` with ``weight_map`` and ``metadata.total_size``, as
``save_pretrained`` lays them out; a single ``model.safetensors`` when everything fits in one
shard). Peak memory is one shard (``shard_bytes``, default 1 GiB; a tensor larger than that
gets a shard of its own) plus the interpreter. The values do not depend on the shard size.

:func:`ensure_checkpoint` is idempotent: a directory whose marker file
(``bench_checkpoint.json``: shape, seed, dtype, layers, config, shard size, the files' sizes and
the config / index hashes) matches is reused as it is.

>>> import tempfile
>>> path = Path(tempfile.mkdtemp())
>>> first = ensure_checkpoint("8b", path, tiny=True, shard_bytes=2**16)
>>> again = ensure_checkpoint("8b", path, tiny=True, shard_bytes=2**16)
>>> first.reused, again.reused, again.n_params == checkpoint_params(path)
(False, True, True)
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import transformers

VOCAB = 128256
GIB = 2**30
WRITER_VERSION = 1
MARKER = "bench_checkpoint.json"
INDEX = "model.safetensors.index.json"
DEFAULT_ROOT = Path("/tmp/rl_ckpt")
SPECIALS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)


def llama3_config(
    width: dict, n_layers: int, rope_factor: float, **overrides
) -> transformers.LlamaConfig:
    """A Llama-3-family one-label sequence classifier (llama3 rope scaling, 128k positions)."""
    shape = dict(vocab_size=VOCAB, num_hidden_layers=n_layers, num_attention_heads=32)
    return transformers.LlamaConfig(
        **{**shape, **width, **overrides},
        max_position_embeddings=131072,
        rope_theta=500000.0,
        rope_scaling=dict(
            rope_type="llama3",
            factor=rope_factor,
            low_freq_factor=1.0,
            high_freq_factor=4.0,
            original_max_position_embeddings=8192,
        ),
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        **SPECIALS,
        num_labels=1,
    )


def llama_1b_config(n_layers: int = 16, **overrides) -> transformers.LlamaConfig:
    """Llama-3.2-1B's configuration (``overrides`` shrink it for a smoke run)."""
    width = dict(hidden_size=2048, intermediate_size=8192, num_key_value_heads=8, head_dim=64)
    return llama3_config(width, n_layers, 32.0, **overrides)


def llama_8b_config(n_layers: int = 32, **overrides) -> transformers.LlamaConfig:
    """Llama-3.1-8B's configuration as a one-label sequence classifier."""
    width = dict(hidden_size=4096, intermediate_size=14336, num_key_value_heads=8, head_dim=128)
    return llama3_config(width, n_layers, 8.0, **overrides)


def gemma2_27b_config(n_layers: int = 2, **overrides) -> transformers.Gemma2Config:
    """Gemma-2-27B's width with ``n_layers`` layers, as a one-label sequence classifier."""
    shape = dict(
        vocab_size=256000,
        hidden_size=4608,
        intermediate_size=36864,
        num_hidden_layers=n_layers,
        num_attention_heads=32,
        num_key_value_heads=16,
        head_dim=128,
        query_pre_attn_scalar=144,
        sliding_window=4096,
    )
    return transformers.Gemma2Config(
        **{**shape, **overrides},
        attn_logit_softcapping=50.0,
        final_logit_softcapping=30.0,
        max_position_embeddings=8192,
        rms_norm_eps=1e-6,
        **SPECIALS,
        num_labels=1,
    )


TINY = dict(
    vocab_size=512,
    hidden_size=64,
    intermediate_size=128,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
)


@dataclass(frozen=True)
class Shape:
    """One benchmark shape: its configuration, default depth and smoke-size overrides."""

    key: str
    title: str
    dirname: str
    make_config: Callable[..., transformers.PretrainedConfig]
    cls_name: str
    layers: int
    tiny: dict = field(default_factory=dict)
    norm_center: float = 1.0  # Gemma's RMSNorm scales by 1 + w, so its weights sit near 0

    def config(self, layers: int | None = None, tiny: bool = False):
        n = layers if layers is not None else (2 if tiny else self.layers)
        config = self.make_config(n, **(self.tiny if tiny else {}))
        config.architectures = [self.cls_name]
        return config

    def default_dir(self, layers: int | None = None, tiny: bool = False) -> Path:
        name = self.dirname
        if tiny:
            name = f"tiny_{name}"
        if layers is not None and layers != self.layers or self.key == "27b":
            name = f"{name}_{layers if layers is not None else self.layers}l"
        return DEFAULT_ROOT / name


SHAPES: dict[str, Shape] = {
    "1b": Shape(
        "1b", "Llama-3.2-1B", "llama1b", llama_1b_config, "LlamaForSequenceClassification", 16, TINY
    ),
    "8b": Shape(
        "8b", "Llama-3.1-8B", "llama8b", llama_8b_config, "LlamaForSequenceClassification", 32, TINY
    ),
    "27b": Shape(
        "27b",
        "Gemma-2-27B width",
        "gemma27b",
        gemma2_27b_config,
        "Gemma2ForSequenceClassification",
        2,
        {**TINY, "query_pre_attn_scalar": 16, "sliding_window": 32},
        norm_center=0.0,
    ),
}


# -- tensors ------------------------------------------------------------------------------------
def tensor_specs(config) -> list[tuple[str, torch.Size]]:
    """The classifier's state-dict names and shapes, from a model built on the meta device."""
    cls = getattr(transformers, config.architectures[0])
    with torch.device("meta"):
        model = cls(config)
    specs = [(name, t.shape) for name, t in model.state_dict().items()]
    del model
    return specs


def tensor_seed(seed: int, name: str) -> int:
    """A stable per-tensor seed, so the values do not depend on the order or the shards."""
    return zlib.crc32(f"{seed}:{name}".encode())


def tensor_values(
    name: str, shape, dtype: torch.dtype, seed: int, norm_center: float = 1.0
) -> torch.Tensor:
    """One tensor's values: ``0.02 · N(0, 1)``, norm weights ``center + 0.1 · N(0, 1)``."""
    gen = torch.Generator().manual_seed(tensor_seed(seed, name))
    t = torch.randn(tuple(shape), generator=gen, dtype=dtype)
    if "norm" in name:
        return t.mul_(0.1).add_(norm_center)
    return t.mul_(0.02)


def plan_shards(sizes: list[tuple[str, int]], shard_bytes: int) -> list[list[str]]:
    """Names grouped into shards in state-dict order, each at most ``shard_bytes`` (a larger
    tensor alone), the rule ``save_pretrained`` follows."""
    shards: list[list[str]] = [[]]
    used = 0
    for name, size in sizes:
        if shards[-1] and used + size > shard_bytes:
            shards.append([])
            used = 0
        shards[-1].append(name)
        used += size
    return shards


def shard_names(n: int) -> list[str]:
    if n == 1:
        return ["model.safetensors"]
    return [f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(1, n + 1)]


def write_tensors(
    config,
    path: Path,
    dtype: torch.dtype,
    *,
    seed: int = 0,
    shard_bytes: int = GIB,
    norm_center: float = 1.0,
) -> dict:
    """Write the random weights shard by shard; returns ``{file: size}`` and the totals."""
    from safetensors.torch import save_file

    specs = tensor_specs(config)
    item = torch.empty((), dtype=dtype).element_size()
    sizes = [(name, shape.numel() * item) for name, shape in specs]
    shapes = dict(specs)
    groups = plan_shards(sizes, shard_bytes)
    names = shard_names(len(groups))
    weight_map = {}
    for file, group in zip(names, groups, strict=True):
        shard = {n: tensor_values(n, shapes[n], dtype, seed, norm_center) for n in group}
        save_file(shard, str(path / file), metadata={"format": "pt"})
        del shard
        weight_map.update(dict.fromkeys(group, file))
    n_params = sum(shape.numel() for _, shape in specs)
    total = sum(size for _, size in sizes)
    if len(names) > 1:
        index = {
            "metadata": {"total_parameters": n_params, "total_size": total},
            "weight_map": weight_map,
        }
        (path / INDEX).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    files = {f: (path / f).stat().st_size for f in names}
    return {"files": files, "n_params": n_params, "total_size": total}


def write_checkpoint(
    config,
    path: Path,
    dtype: torch.dtype = torch.bfloat16,
    *,
    seed: int = 0,
    shard_bytes: int = GIB,
    norm_center: float = 1.0,
) -> float:
    """Random weights of ``config``'s classifier, its config and a word-level tokenizer saved
    in ``path``; returns the GiB of weights written."""
    from reward_lens_tl.testing import tiny_tokenizer

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if not config.architectures:
        config.architectures = ["LlamaForSequenceClassification"]
    config.dtype = dtype
    config.save_pretrained(path)
    done = write_tensors(
        config, path, dtype, seed=seed, shard_bytes=shard_bytes, norm_center=norm_center
    )
    tiny_tokenizer(vocab_size=config.vocab_size).save_pretrained(path)
    return done["total_size"] / GIB


# -- idempotent checkpoints -------------------------------------------------------------------
@dataclass(frozen=True)
class Checkpoint:
    """A written (or reused) checkpoint."""

    shape: str
    path: Path
    n_params: int
    total_size: int
    reused: bool
    seconds: float

    @property
    def gib(self) -> float:
        return self.total_size / GIB


def _sha(file: Path) -> str | None:
    return hashlib.sha256(file.read_bytes()).hexdigest() if file.is_file() else None


def _marker_key(shape: str, config, seed: int, dtype: torch.dtype, shard_bytes: int) -> dict:
    return {
        "writer": WRITER_VERSION,
        "shape": shape,
        "seed": seed,
        "dtype": str(dtype).removeprefix("torch."),
        "layers": config.num_hidden_layers,
        "shard_bytes": shard_bytes,
        "config": config.to_json_string(use_diff=False),
    }


def _matches(path: Path, key: dict) -> dict | None:
    """The marker when the directory holds exactly what ``key`` describes, else ``None``."""
    marker = path / MARKER
    if not marker.is_file():
        return None
    try:
        stored = json.loads(marker.read_text())
    except json.JSONDecodeError:
        return None
    if stored.get("key") != key:
        return None
    if stored.get("config_sha") != _sha(path / "config.json"):
        return None
    if stored.get("index_sha") != _sha(path / INDEX):
        return None
    for file, size in stored.get("files", {}).items():
        if not (path / file).is_file() or (path / file).stat().st_size != size:
            return None
    return stored


def _clear(path: Path) -> None:
    """Remove what a previous (other or unfinished) write left: only this writer's files."""
    for old in [path / MARKER, path / INDEX, *path.glob("model*.safetensors")]:
        old.unlink(missing_ok=True)


def ensure_checkpoint(
    shape: str,
    path: str | Path | None = None,
    *,
    layers: int | None = None,
    seed: int = 0,
    dtype: torch.dtype = torch.bfloat16,
    tiny: bool = False,
    shard_bytes: int = GIB,
) -> Checkpoint:
    """The checkpoint of ``shape`` in ``path`` (default ``/tmp/rl_ckpt/<shape>``), written
    unless a matching one is already there (the marker is written last, so an interrupted
    write is redone)."""
    import time

    spec = SHAPES[shape]
    path = Path(path) if path is not None else spec.default_dir(layers, tiny)
    config = spec.config(layers, tiny)
    key = _marker_key(shape, config, seed, dtype, shard_bytes)
    stored = _matches(path, key)
    if stored is not None:
        return Checkpoint(shape, path, stored["n_params"], stored["total_size"], True, 0.0)
    if not (path / MARKER).is_file() and any(path.glob("*.safetensors")):
        raise FileExistsError(f"{path} holds weights this writer did not write; not touching it")
    t0 = time.perf_counter()
    path.mkdir(parents=True, exist_ok=True)
    _clear(path)
    from reward_lens_tl.testing import tiny_tokenizer

    config.dtype = dtype
    config.save_pretrained(path)
    tiny_tokenizer(vocab_size=config.vocab_size).save_pretrained(path)
    done = write_tensors(
        config, path, dtype, seed=seed, shard_bytes=shard_bytes, norm_center=spec.norm_center
    )
    marker = {
        "key": key,
        "config_sha": _sha(path / "config.json"),
        "index_sha": _sha(path / INDEX),
        **done,
    }
    (path / MARKER).write_text(json.dumps(marker, indent=2) + "\n")
    seconds = time.perf_counter() - t0
    return Checkpoint(shape, path, done["n_params"], done["total_size"], False, seconds)


def checkpoint_params(path: str | Path) -> int:
    """Number of parameters in a checkpoint's safetensors files (read from their headers)."""
    from safetensors import safe_open

    total = 0
    for file in sorted(Path(path).glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as f:
            for name in f.keys():
                n = 1
                for d in f.get_slice(name).get_shape():
                    n *= d
                total += n
    return total
