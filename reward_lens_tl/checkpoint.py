"""A checkpoint directory: read as untrusted input before transformers touches it, and described.

A checkpoint is a folder someone else wrote. Before any of its files reaches transformers:

- `config.json` must parse; a config whose `model_type` transformers does not know and that
  ships code (`auto_map`) is refused with `UnsafeCheckpointError` *before* transformers
  is asked, so transformers never prompts "[y/N]" on standard input and no `*.py` file of the
  checkpoint is imported;
- every `*.safetensors` file's header must parse and its data must cover the file exactly
  (a truncated download is a `CheckpointError` naming the file);
- pickle weights are refused (safetensors only);
- after loading, missing, unexpected or mis-shaped tensors are a
  `CheckpointWeightsError` naming them (transformers would fill missing ones with random
  values and only log it);
- transformers' loading reports and progress bars are silenced while we load.

Every transformers entry point here passes `trust_remote_code=False` and `local_files_only`.

What `reward-lens info` reports about a checkpoint comes from here too: first what the files
say (`describe_files`: instant, nothing loaded), then, unless skipped, a conversion and a
parity check against HF.

Examples:
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "config.json").write_text("{not json")
    >>> try:
    ...     read_config_dict(d)
    ... except CheckpointError as err:
    ...     print(type(err).__name__)
    CheckpointError
"""

from __future__ import annotations

import contextlib
import json
import math
import struct
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import (
    CheckpointError,
    CheckpointWeightsError,
    MissingFileError,
    TokenizerLoadError,
    UnsafeCheckpointError,
    UnsupportedArchitectureError,
)

__all__ = [
    "CAUSAL_LM_ENDINGS",
    "IMPLICIT_REWARD_HINT",
    "SAFE_KWARGS",
    "checkpoint_tokenizer",
    "describe_files",
    "ignored_auto_map",
    "is_causal_lm",
]

#: Keyword arguments every transformers `from_pretrained` call here carries.
SAFE_KWARGS: dict[str, Any] = {"local_files_only": True, "trust_remote_code": False}
_MAX_HEADER = 100_000_000  # safetensors' own limit on the JSON header


def checkpoint_dir(path: str | Path) -> Path:
    """`path` as a checkpoint directory that exists and holds `config.json`."""
    path = Path(path)
    if not path.exists():
        raise MissingFileError(
            f"{path} does not exist. Pass a checkpoint directory (save_pretrained(dir)) or a "
            "hub id 'org/name'"
        )
    if not (path / "config.json").is_file():
        raise MissingFileError(
            f"{path} is not a checkpoint directory (no config.json). Save the model with "
            "save_pretrained(dir) and pass that directory, or pass a hub id 'org/name'"
        )
    return path


def read_config_dict(path: Path) -> dict[str, Any]:
    """`config.json` as a dict; a typed error naming the file when it is not a JSON object."""
    file = Path(path) / "config.json"
    try:
        data = json.loads(file.read_text(encoding="utf-8-sig"))  # a BOM is allowed
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(
            f"{file} is not valid JSON ({err}); the checkpoint is corrupt"
        ) from err
    if not isinstance(data, dict):
        raise CheckpointError(f"{file} must hold a JSON object, got {type(data).__name__}")
    return data


class AutoMapIgnoredWarning(UserWarning):
    """A checkpoint of a known `model_type` also ships its own code (`auto_map`), never run."""


def ignored_auto_map(config: dict[str, Any]) -> list[str]:
    """The `auto_map` entries of a config whose `model_type` transformers knows (never run).

    Such a checkpoint loads as the built-in class; the author's own classes (a custom head, a
    different pooling) may compute something else, so the caller says which were skipped.

    Args:
        config: `config.json` as a dict.

    Returns:
        `"AutoModelForSequenceClassification → modeling_x.Cls"` strings (empty when none).

    Examples:
        >>> ignored_auto_map({"model_type": "llama", "auto_map": {"AutoConfig": "c.C"}})
        ['AutoConfig → c.C']
        >>> ignored_auto_map({"model_type": "llama"})
        []
    """
    from transformers import CONFIG_MAPPING

    auto_map = config.get("auto_map")
    if config.get("model_type") not in CONFIG_MAPPING or not isinstance(auto_map, dict):
        return []
    return [f"{key} → {value}" for key, value in auto_map.items()]


def refuse_remote_code(config: dict[str, Any], path: Path) -> None:
    """Refuse a config that only remote code could load, before transformers sees it.

    A known `model_type` with an `auto_map` loads as the built-in class and warns
    (`AutoMapIgnoredWarning`) naming the entries that were not run.
    """
    from transformers import CONFIG_MAPPING

    model_type = config.get("model_type")
    if model_type in CONFIG_MAPPING:
        skipped = ignored_auto_map(config)
        if skipped:
            warnings.warn(
                f"{path / 'config.json'} names its own code (auto_map: {'; '.join(skipped)}), "
                f"which reward-lens-tl never runs: it is loaded as the built-in {model_type!r} "
                "class. If the author's head or pooling differs from the built-in one, the "
                "rewards differ from theirs: compare with scores from the author's code",
                AutoMapIgnoredWarning,
                stacklevel=3,
            )
        return
    if config.get("auto_map"):
        raise UnsafeCheckpointError(
            f"{path / 'config.json'} has model_type {model_type!r}, which transformers does not "
            "know, and ships its own code (auto_map). reward-lens-tl never imports or runs a "
            "checkpoint's code; convert the model to a supported architecture in a trusted "
            "environment, or register an adapter for it"
        )
    raise UnsupportedArchitectureError(
        f"{path / 'config.json'} has model_type {model_type!r}, which this transformers version "
        "does not know"
    )


def load_config(path: Path):
    """The checked HF config of a checkpoint directory (no remote code, no network)."""
    from transformers import AutoConfig

    refuse_remote_code(read_config_dict(path), path)
    with quiet_transformers():
        try:
            return AutoConfig.from_pretrained(path, **SAFE_KWARGS)
        except (ValueError, KeyError, TypeError, OSError) as err:
            raise CheckpointError(f"{path / 'config.json'} cannot be read: {err}") from err


def safetensors_header(file: Path) -> dict[str, Any]:
    """The tensor table of one safetensors file, checked against the file's size."""
    size = file.stat().st_size
    with open(file, "rb") as fh:
        raw = fh.read(8)
        if len(raw) < 8:
            raise CheckpointError(f"{file} is truncated ({size} bytes): not a safetensors file")
        (n_header,) = struct.unpack("<Q", raw)
        if n_header > min(_MAX_HEADER, size - 8):
            raise CheckpointError(
                f"{file} is truncated or not a safetensors file (header of {n_header} bytes in a "
                f"file of {size})"
            )
        try:
            header = json.loads(fh.read(n_header))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise CheckpointError(f"{file} has a corrupt safetensors header ({err})") from err
    if not isinstance(header, dict):
        raise CheckpointError(f"{file} has a corrupt safetensors header (not a JSON object)")
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    end = _check_spans(file, tensors)
    if 8 + n_header + end != size:
        raise CheckpointError(
            f"{file} is truncated or padded: its header describes {8 + n_header + end} bytes, the "
            f"file has {size}. Re-save or re-download the checkpoint"
        )
    return tensors


#: Bytes per element of each safetensors dtype.
SAFETENSORS_ITEMSIZE: dict[str, int] = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}  # fmt: skip


def _check_spans(file: Path, tensors: dict[str, Any]) -> int:
    """Check each tensor's dtype × shape against its byte span; the end of the data.

    A header that lies (F16 declared over F32-sized data, a shape that does not fill its span,
    overlapping or gapped spans) is refused here, naming the tensor, before anything is read.
    """
    spans = []
    for name, entry in tensors.items():
        try:
            dtype, shape = entry["dtype"], [int(n) for n in entry["shape"]]
            start, stop = (int(x) for x in entry["data_offsets"])
        except (KeyError, TypeError, ValueError) as err:
            raise CheckpointError(
                f"{file}: tensor {name!r} has a malformed header entry ({entry!r})"
            ) from err
        if dtype not in SAFETENSORS_ITEMSIZE or any(n < 0 for n in shape):
            raise CheckpointError(
                f"{file}: tensor {name!r} declares dtype {dtype!r} and shape {shape}, which no "
                "safetensors tensor has; the checkpoint is corrupt"
            )
        expected = SAFETENSORS_ITEMSIZE[dtype] * math.prod(shape)
        if not 0 <= start <= stop or stop - start != expected:
            raise CheckpointError(
                f"{file}: tensor {name!r} declares {dtype} {shape} ({expected} bytes) over bytes "
                f"[{start}, {stop}) ({stop - start} bytes): its header does not describe its "
                "data (a wrong dtype or shape). Re-save or re-download the checkpoint"
            )
        spans.append((start, stop, name))
    end = 0
    for start, stop, name in sorted(spans):
        if start != end:
            raise CheckpointError(
                f"{file}: tensor {name!r} starts at byte {start}, but the data before it ends at "
                f"{end} (overlapping or gapped spans); the checkpoint is corrupt"
            )
        end = stop
    return end


def check_weight_files(path: Path) -> list[Path]:
    """The checkpoint's safetensors files, each header checked; pickle-only folders refused."""
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise UnsafeCheckpointError(
            f"{path} has no *.safetensors weights; pickle checkpoints (*.bin, *.pt) are "
            "refused because loading them can execute code. Convert once with "
            "`model.save_pretrained(dir, safe_serialization=True)` in a trusted environment."
        )
    for file in files:
        safetensors_header(file)
    return files


def load_weights(cls, path: Path, hf_config: Any, **kwargs):
    """`cls.from_pretrained` from safetensors only, refusing tensors that do not fit.

    Missing, unexpected or mis-shaped tensors raise `CheckpointWeightsError`.
    """
    import torch

    check_weight_files(path)
    common = dict(SAFE_KWARGS, config=hf_config, use_safetensors=True, dtype=torch.float32)
    with quiet_transformers():
        try:
            model, info = cls.from_pretrained(path, output_loading_info=True, **common, **kwargs)
        except RuntimeError as err:
            if "mismatched" not in str(err) and "size" not in str(err):
                raise CheckpointError(
                    f"{path}: transformers could not load the weights: {err}"
                ) from err
            _, info = cls.from_pretrained(
                path, output_loading_info=True, ignore_mismatched_sizes=True, **common, **kwargs
            )
            raise CheckpointWeightsError(weights_message(path, info)) from None
    if info.get("missing_keys") or info.get("unexpected_keys") or info.get("mismatched_keys"):
        raise CheckpointWeightsError(weights_message(path, info))
    return model.eval()


def weights_message(path: Path, info: dict) -> str:
    """What is wrong with a checkpoint's tensors, naming up to 8 of each.

    `info` is transformers' loading report, or the same keys from `reward_lens_tl.streaming`'s own
    check.
    """
    parts = []
    for key, what in (
        ("missing_keys", "missing (transformers would initialise them randomly)"),
        ("unexpected_keys", "unexpected (not part of the model the config describes)"),
        ("mismatched_keys", "of the wrong shape or type"),
    ):
        names = sorted(str(k) for k in info.get(key) or ())
        if names:
            shown = ", ".join(names[:8]) + (
                f" … (+{len(names) - 8} more)" if len(names) > 8 else ""
            )
            parts.append(f"{len(names)} tensor(s) {what}: {shown}")
    hint = (
        " If the head's size disagrees, config.json's num_labels does not match score.weight."
        if info.get("mismatched_keys")
        else ""
    )
    return f"{path}: the weights do not match config.json: " + "; ".join(parts) + "." + hint


def checkpoint_tokenizer(path: Path | None):
    """The tokenizer saved in the checkpoint directory `path`, or `None` without tokenizer files.

    The zoo's `load_tokenizer` loads a zoo model's tokenizer by name through this function.

    Args:
        path: The checkpoint's directory, or `None`.

    Returns:
        The tokenizer, or `None`.

    Raises:
        TokenizerLoadError: Corrupt tokenizer files.

    Examples:
        >>> from reward_lens_tl.zoo import zoo_path
        >>> checkpoint_tokenizer(zoo_path("scalar")).eos_token, checkpoint_tokenizer(None)
        ('<eos>', None)
    """
    if path is None or not any(
        (path / f).exists() for f in ("tokenizer.json", "tokenizer_config.json")
    ):
        return None
    from transformers import AutoTokenizer

    with quiet_transformers():
        try:
            return AutoTokenizer.from_pretrained(path, **SAFE_KWARGS)
        except Exception as err:  # tokenizers raises a bare Exception on corrupt JSON
            raise TokenizerLoadError(
                f"could not load the tokenizer files in {path} ({type(err).__name__}: {err}); "
                "fix or remove them, or pass tokenizer= explicitly"
            ) from err


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' load reports and progress bars inside the block (restored after)."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


# -- what the files say (`reward-lens info`) -----------------------------------------------------
#: Endings of HF architecture names of language models (no reward head of their own).
CAUSAL_LM_ENDINGS = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")
IMPLICIT_REWARD_HINT = (
    "a causal language model, not a reward model: it has no reward head, so no adapter applies. "
    "If it is a DPO policy, its implicit reward (beta x log-ratio to its reference model) is "
    "reward_lens_tl.implicit.ImplicitRewardModel.from_pretrained(policy_dir, reference_dir, "
    "beta=...)"
)


def describe_files(path: str | Path) -> dict[str, Any]:
    """Facts read from `config.json` and the tokenizer files, without loading weights.

    Args:
        path: The checkpoint's directory.

    Returns:
        The facts by name.

    Examples:
        >>> from reward_lens_tl.zoo import zoo_path
        >>> facts = describe_files(zoo_path("scalar"))
        >>> facts["architecture"], facts["padding side"], facts["context"]
        ('LlamaForSequenceClassification', 'right', 64)
    """
    path = checkpoint_dir(path)
    config = read_config_dict(path)
    refuse_remote_code(config, path)
    tok = _json(path / "tokenizer_config.json")
    template = (path / "chat_template.jinja").is_file() or bool(tok.get("chat_template"))
    archs = config.get("architectures") or ["?"]
    pad = config.get("pad_token_id")
    n_labels = len(config.get("id2label") or {}) or config.get("num_labels", 1)
    facts = {
        "architecture": archs[0],
        "model type": config.get("model_type"),
        "layers": config.get("num_hidden_layers", config.get("n_layer")),
        "d_model": config.get("hidden_size", config.get("n_embd")),
        "context": config.get("max_position_embeddings", config.get("n_positions")),
        "vocabulary": config.get("vocab_size"),
        "outputs": config.get("num_objectives", n_labels),
        "pad token id": pad,
        "eos token id": config.get("eos_token_id"),
        "chat template": "yes (used by model.encode)" if template else "none: plain HH format",
        "padding side": tok.get("padding_side", "right (default)"),
        "pooling rule": pooling_rule(archs[0], pad, config.get("eos_token_id")),
        "weights": ", ".join(sorted(p.name for p in path.glob("*.safetensors"))) or "none",
    }
    if is_causal_lm(archs[0]):
        facts.update({"outputs": "vocabulary logits", "pooling rule": "none (no reward head)"})
        facts["note"] = IMPLICIT_REWARD_HINT
    return facts


def is_causal_lm(architecture: str) -> bool:
    """Whether an HF architecture name is a language model rather than a reward model.

    Args:
        architecture: The HF architecture name.

    Returns:
        Whether it is a language model.

    Examples:
        >>> is_causal_lm("LlamaForCausalLM"), is_causal_lm("LlamaForSequenceClassification")
        (True, False)
    """
    return architecture.endswith(CAUSAL_LM_ENDINGS)


def pooling_rule(architecture: str, pad: Any, eos: Any) -> str:
    """The HF model's rule for where the reward is read, in words.

    Args:
        architecture: The HF architecture name.
        pad: The pad token id.
        eos: The end-of-sequence token id.

    Returns:
        The rule.
    """
    if architecture == "LlamaForRewardModelWithGating":
        return f"token before the first pad id {pad} (ArmoRM)"
    if pad is None:
        return "last token (no pad id: batches of one only)"
    skip = " (pad == eos: a trailing EOS is skipped)" if pad == eos else ""
    return f"rightmost token that is not the pad id {pad}{skip}"


def _json(file: Path) -> dict:
    try:
        data = json.loads(file.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
