"""Writing a trained zoo model: weights, tokenizer files, `metadata.json` and a weights hash.

Internal (no public names): used by `reward_lens_tl.zoo.train` to write the zoo models.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.utils import logging as hf_logging

from .tokenizer import build_tokenizer

__all__: list[str] = []


def state_dict_sha256(state_dict: dict[str, torch.Tensor]) -> str:
    """SHA-256 over the sorted tensor names, dtypes, shapes and raw bytes.

    Args:
        state_dict: The tensors by name.

    Returns:
        The hex digest.
    """
    h = hashlib.sha256()
    for name in sorted(state_dict):
        t = state_dict[name].detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def weights_sha256(model: nn.Module) -> str:
    """`state_dict_sha256` of a model's state dict.

    Args:
        model: The model.

    Returns:
        The hex digest.
    """
    return state_dict_sha256(model.state_dict())


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes.

    Args:
        path: The file.

    Returns:
        The hex digest.
    """
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def save_zoo_model(
    model: PreTrainedModel, out_dir: Path, metadata: dict, tokenizer: Any = None
) -> dict:
    """`save_pretrained` (safetensors) + tokenizer files + `metadata.json`.

    Args:
        model: The trained model.
        out_dir: The folder to write.
        metadata: What `metadata.json` records besides the hashes.
        tokenizer: The tokenizer to save; the zoo's by default.

    Returns:
        The metadata completed with the weights hashes.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    hf_logging.disable_progress_bar()
    try:
        model.save_pretrained(out_dir, safe_serialization=True)
    finally:
        hf_logging.enable_progress_bar()
    (tokenizer if tokenizer is not None else build_tokenizer()).save_pretrained(out_dir)
    metadata = {
        **metadata,
        "weights_sha256": weights_sha256(model),
        "safetensors_sha256": file_sha256(out_dir / "model.safetensors"),
        "n_parameters": sum(p.numel() for p in model.parameters()),
    }
    (out_dir / "metadata.json").write_text(json.dumps(metadata, indent=2, sort_keys=True) + "\n")
    return metadata


def write_trained(
    output_dir: str | Path,
    cfg: Any,
    seed: int,
    fast: bool,
    train: Callable[[int, Any], tuple[PreTrainedModel, list[float]]],
    evaluate: Callable[..., dict],
    metadata: Callable[[int, bool, Any, list[float]], dict],
    tokenizer: Any,
) -> dict:
    """Train, evaluate held out and write a zoo model with `save_zoo_model`.

    The judge and the PRM are written this way.

    Args:
        output_dir: The folder to write.
        cfg: The training configuration (its few-step `fast()` version when `fast`).
        seed: The training seed.
        fast: Few steps, and 100 held-out items instead of 2,000.
        train: `train(seed, cfg)` → the model and its per-step losses.
        evaluate: `evaluate(model, n=...)` → the held-out quality numbers.
        metadata: `metadata(seed, fast, cfg, losses)` → what `metadata.json` records.
        tokenizer: The tokenizer to save.

    Returns:
        The metadata.
    """
    from .loop import deterministic_torch

    cfg = cfg.fast() if fast else cfg
    model, losses = train(seed, cfg)
    with deterministic_torch(seed, cfg.threads):
        quality = evaluate(model, n=100 if fast else 2000)
    meta = {**metadata(seed, fast, cfg, losses), "quality": quality}
    return save_zoo_model(model, Path(output_dir), meta, tokenizer=tokenizer)
