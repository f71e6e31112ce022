"""A checkpoint's safetensors weights as an index read one tensor at a time.

`CheckpointWeights` reads the tensor table of every `*.safetensors` file (the headers
only, each checked against its file's size by `safetensors_header`)
and, for a sharded checkpoint, its `*.safetensors.index.json`: a shard the index names that is
missing, a tensor the index places in a shard that does not hold it, or a tensor held by two
files is a `CheckpointError` naming the file and tensor. Tensors are
then read one group at a time (`CheckpointWeights.read`): each file is memory-mapped only
while its tensors are copied out and closed afterwards, so the mapped pages never add up to the
whole checkpoint, and every floating tensor read is checked to be finite.

Examples:
    >>> from reward_lens_tl.zoo import zoo_path
    >>> weights = CheckpointWeights(zoo_path("scalar"))
    >>> name = "score.weight"
    >>> weights.shape(name), weights.read([name])[name].dtype
    ((1, 64), torch.float32)
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import torch
from safetensors import safe_open
from torch import Tensor

from .checkpoint import check_weight_files, safetensors_header
from .errors import CheckpointError, NonFiniteWeightsError

__all__ = [
    "CheckpointWeights",
]

#: safetensors' dtype names → torch dtypes (for shapes and sizes without reading data).
_DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}


#: The weights transformers reads from a checkpoint directory: the shards this index names, or
#: else this one file. (Other `*.safetensors` files, e.g. an adapter's, are not the model's.)
INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"


class CheckpointWeights:
    """The tensors of a checkpoint directory: name → file, shape and dtype, read on demand.

    Args:
        path: The checkpoint directory (safetensors, one file or sharded with an index).

    Examples:
        >>> import torch
        >>> from reward_lens_tl.zoo import zoo_path
        >>> weights = CheckpointWeights(zoo_path("scalar"))
        >>> len(weights.names()), weights.shape("score.weight"), weights.dtype("score.weight")
        (30, (1, 64), torch.float32)
        >>> weights.read(["score.weight"], dtype=torch.float64)["score.weight"].dtype
        torch.float64
    """

    def __init__(self, path: str | Path):
        """Read the headers of the checkpoint directory `path`.

        Args:
            path: The checkpoint directory.
        """
        self.path = Path(path)
        self._where: dict[str, Path] = {}
        self._header: dict[str, dict] = {}
        for file in weight_files(self.path):
            for name, entry in safetensors_header(file).items():
                if name in self._where:
                    raise CheckpointError(
                        f"tensor {name!r} is stored twice, in {self._where[name].name} and "
                        f"{file.name}; the checkpoint is inconsistent. Re-save it"
                    )
                self._where[name] = file
                self._header[name] = entry
        index = self.path / INDEX_FILE
        if index.is_file():
            for name, shard in read_weight_map(index).items():
                if self._where.get(name) != self.path / shard:
                    where = self._where.get(name)
                    held = f"it is in {where.name}" if where else "no shard holds it"
                    raise CheckpointError(
                        f"{index.name} places tensor {name!r} in {shard}, but {held}; the "
                        "checkpoint is incomplete or its index is stale. Re-download it"
                    )

    def names(self) -> list[str]:
        """Names of every tensor."""
        return list(self._where)

    def __contains__(self, name: object) -> bool:
        """Whether the checkpoint has the tensor `name`."""
        return name in self._where

    def shape(self, name: str) -> tuple[int, ...]:
        """Shape of the tensor `name`.

        Args:
            name: The tensor's name.

        Returns:
            Its shape.
        """
        return tuple(int(n) for n in self._header[name]["shape"])

    def dtype(self, name: str) -> torch.dtype | None:
        """The stored dtype (`None` for a dtype torch does not have).

        Args:
            name: The tensor's name.

        Returns:
            Its dtype.
        """
        return _DTYPES.get(self._header[name]["dtype"])

    def read(self, names: Iterable[str], dtype: torch.dtype | None = None) -> dict[str, Tensor]:
        """The tensors `names`, each file memory-mapped only while its tensors are copied out.

        Floating tensors are cast to `dtype` when given; a NaN or infinite value raises
        `NonFiniteWeightsError` naming the tensor.

        Args:
            names: The tensors' names.
            dtype: The dtype of the floating tensors (default: as stored).

        Returns:
            The tensors, by name.
        """
        by_file: dict[Path, list[str]] = {}
        for name in names:
            by_file.setdefault(self._where[name], []).append(name)
        out: dict[str, Tensor] = {}
        for file, group in by_file.items():
            with safe_open(str(file), framework="pt", device="cpu") as handle:
                for name in group:
                    out[name] = owned(name, handle.get_tensor(name), dtype)
        return out

    def read_rows(
        self, name: str, start: int, stop: int, dtype: torch.dtype | None = None
    ) -> Tensor:
        """Rows `start:stop` of the tensor `name` (only those bytes are read).

        They are checked finite and cast to `dtype` when given.

        Args:
            name: The tensor's name.
            start: The first row.
            stop: The row after the last.
            dtype: The dtype of a floating tensor (default: as stored).

        Returns:
            The rows.

        Examples:
            >>> from reward_lens_tl.zoo import zoo_path
            >>> CheckpointWeights(zoo_path("scalar")).read_rows(
            ...     "model.embed_tokens.weight", 3, 5
            ... ).shape
            torch.Size([2, 64])
        """
        with safe_open(str(self._where[name]), framework="pt", device="cpu") as handle:
            return owned(f"{name}[{start}:{stop}]", handle.get_slice(name)[start:stop], dtype)


def weight_files(path: Path) -> list[Path]:
    """The safetensors files transformers would read in `path`.

    The shards its `model.safetensors.index.json` names (each must exist), else `model.safetensors`.
    Pickle-only folders are refused; so is a folder whose safetensors have other names.
    """
    if not any(path.glob("*.safetensors")):
        check_weight_files(path)  # the pickle-only refusal
    index = path / INDEX_FILE
    if index.is_file():
        shards = sorted(set(read_weight_map(index).values()))
        for shard in shards:
            if not (path / shard).is_file():
                raise CheckpointError(
                    f"{index.name} places tensors in {shard}, which is missing from {path}. "
                    "Download or copy the missing shard"
                )
        return [path / shard for shard in shards]
    if (path / SINGLE_FILE).is_file():
        return [path / SINGLE_FILE]
    found = ", ".join(f.name for f in sorted(path.glob("*.safetensors")))
    raise CheckpointError(
        f"{path} has no {SINGLE_FILE} and no {INDEX_FILE} (safetensors files: {found}); "
        "transformers reads only those. Re-save the model with save_pretrained(dir)"
    )


def read_weight_map(index: Path) -> dict[str, str]:
    """The `weight_map` of a safetensors index (tensor name → shard file name), checked."""
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as err:
        raise CheckpointError(f"{index} is not a safetensors index ({err})") from err
    if not isinstance(weight_map, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and "/" not in v and v.endswith(".safetensors")
        for k, v in weight_map.items()
    ):
        raise CheckpointError(
            f"{index}'s weight_map must map tensor names to shard files in the same folder "
            "(*.safetensors); the index is corrupt. Re-download it"
        )
    return weight_map


def owned(name: str, tensor: Tensor, dtype: torch.dtype | None) -> Tensor:
    """A tensor read from a file, checked finite, in `dtype`, in memory of its own.

    safetensors may hand out tensors backed by the file's memory map; a weight kept that way
    would change or fault if the file were rewritten while the model lives, and writing to it
    copies each page on first write. So the result never shares the file's memory.

    Args:
        name: The tensor's name (for the error).
        tensor: The tensor as read.
        dtype: The dtype of a floating tensor (default: as stored).

    Returns:
        The tensor.

    Raises:
        NonFiniteWeightsError: A NaN or infinite value.
    """
    if not tensor.is_floating_point():
        return tensor.clone()
    check_finite(name, tensor)
    if dtype is not None and tensor.dtype != dtype:
        return tensor.to(dtype)
    return tensor.clone()


def check_finite(name: str, tensor: Tensor) -> None:
    """Raise `NonFiniteWeightsError` if `tensor` holds a NaN or an infinity.

    (A NaN or infinity makes the sum non-finite, so one fast reduction clears almost every tensor;
    only a non-finite sum, which finite values can also give by overflowing, is checked value by
    value.)
    """
    if bool(torch.isfinite(tensor.sum())):
        return
    if not bool(torch.isfinite(tensor).all()):
        n_bad = int((~torch.isfinite(tensor)).sum())
        raise NonFiniteWeightsError(
            f"parameter {name!r} has {n_bad} NaN/inf values; the checkpoint is corrupt or was "
            "saved after a diverged training step. Reload a good checkpoint."
        )
