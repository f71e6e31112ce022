"""Conversion: an HF reward model (in memory or a local directory) → the pieces of a
``HookedRewardModel``.

The steps are the same for every family; the adapter supplies what differs:

1. resolve the input: a local directory is read as untrusted input (:mod:`.checkpoint`:
   config checked before transformers sees it, safetensors only, no remote code, missing or
   unexpected tensors refused); an in-memory model is used as it is and never modified;
2. check every parameter is finite;
3. the adapter builds the TL config and the state dict; the reward head becomes ``unembed``.

:meth:`HookedRewardModel.from_pretrained <reward_lens_tl.model.HookedRewardModel.from_pretrained>`
then lets TL fold the weights (in float32; ``center_unembed`` is always off), casts, and
optionally checks the result against HF with :func:`verify_parity`. This module does not import
the model module (the model imports it), so there is no import cycle.

>>> from reward_lens_tl.testing import tiny_reward_model
>>> conversion = convert_hf_model(tiny_reward_model("gpt2"))
>>> conversion.cfg.d_vocab_out, conversion.adapter.model_kind
(1, 'scalar')
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from .adapters import ConversionOptions, RewardModelAdapter, adapter_for
from .adapters.base import pad_token_id_of
from .checkpoint import checkpoint_dir, load_config, load_tokenizer
from .errors import (
    ConversionMismatchError,
    NonFiniteWeightsError,
    UnsafeCheckpointError,
    UnsupportedArchitectureError,
)


@dataclass
class Conversion:
    """Everything needed to build the hooked model: config, float32 state dict (head included)
    and the facts the model keeps (pad/EOS ids, objective names, tokenizer, extra modules)."""

    hf_model: nn.Module
    adapter: RewardModelAdapter
    cfg: Any
    state_dict: dict[str, Tensor]
    objective_names: tuple[str, ...]
    pad_token_id: int | None
    eos_token_id: int | None
    bos_token_id: int | None
    tokenizer: Any
    fold_flags: dict[str, bool]
    extras: dict[str, Any]


def convert_hf_model(
    model_or_path: nn.Module | str | Path,
    tokenizer: Any = None,
    *,
    fold_ln: bool = True,
    center_writing_weights: bool = True,
    fold_value_biases: bool = True,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device | None = None,
    n_ctx: int | None = None,
    objective_names: list[str] | None = None,
    adapter: RewardModelAdapter | None = None,
) -> Conversion:
    """Read and convert; see :func:`reward_lens_tl.model.load_reward_model` for the options."""
    hf_model, hf_config, path = resolve_hf_model(model_or_path, adapter)
    adapter = adapter or adapter_for(hf_config)
    check_finite(hf_model)
    options = ConversionOptions(
        dtype=dtype, device=device, n_ctx=n_ctx, objective_names=objective_names
    )
    head = adapter.reward_head(hf_model, options)
    cfg = adapter.tl_config(hf_config, options, head.n_objectives)
    # on the CPU whatever device the HF model is on: TL folds on the state dict's devices
    state_dict = {
        k: v.detach().to("cpu", torch.float32, copy=True)
        for k, v in adapter.backbone_state_dict(hf_model, cfg).items()
    }
    state_dict["unembed.W_U"] = head.W.to("cpu", torch.float32)
    state_dict["unembed.b_U"] = head.b.to("cpu", torch.float32)
    tokenizer = tokenizer if tokenizer is not None else load_tokenizer(path)
    flags = adapter.fold_options(
        dict(
            fold_ln=fold_ln,
            center_writing_weights=center_writing_weights,
            fold_value_biases=fold_value_biases,
        )
    )
    return Conversion(
        hf_model=hf_model,
        adapter=adapter,
        cfg=cfg,
        state_dict=state_dict,
        objective_names=head.objective_names,
        pad_token_id=resolve_pad_token_id(hf_config, tokenizer),
        eos_token_id=getattr(hf_config, "eos_token_id", None),
        bos_token_id=getattr(hf_config, "bos_token_id", None),
        tokenizer=tokenizer,
        fold_flags=flags,
        extras=adapter.extra_modules(hf_model, cfg, fold_ln),
    )


def resolve_hf_model(
    model_or_path, adapter: RewardModelAdapter | None
) -> tuple[nn.Module, Any, Path | None]:
    """``(hf_model, hf_config, path)``; the config is a copy with ``architectures`` filled in."""
    if isinstance(model_or_path, nn.Module):
        config = copy.deepcopy(model_or_path.config)
        if not getattr(config, "architectures", None):
            config.architectures = [type(model_or_path).__name__]
        return model_or_path, config, None
    path = checkpoint_dir(model_or_path)
    config = load_config(path)
    try:
        adapter = adapter or adapter_for(config)
    except UnsupportedArchitectureError as err:
        if getattr(config, "auto_map", None):
            raise UnsafeCheckpointError(
                f"{err} This checkpoint ships remote code (auto_map), which reward-lens-tl never "
                "executes."
            ) from None
        raise
    return adapter.load_hf(path, config), config, path


def check_finite(hf_model: nn.Module) -> None:
    for name, p in list(hf_model.named_parameters()) + list(hf_model.named_buffers()):
        if p.is_floating_point() and not bool(torch.isfinite(p).all()):
            n_bad = int((~torch.isfinite(p)).sum())
            raise NonFiniteWeightsError(
                f"parameter {name!r} has {n_bad} NaN/inf values; the checkpoint is corrupt or was "
                "saved after a diverged training step. Reload a good checkpoint."
            )


def resolve_pad_token_id(hf_config: Any, tokenizer: Any) -> int | None:
    pad = pad_token_id_of(hf_config)
    if pad is None and tokenizer is not None:
        pad = getattr(tokenizer, "pad_token_id", None)
    return pad


@torch.no_grad()
def verify_parity(
    model,
    hf_model: nn.Module,
    adapter: RewardModelAdapter,
    *,
    seq_len: int = 12,
    atol: float | None = None,
) -> float:
    """Max |converted − HF| pooled reward on two random sequences; raise if above ``atol``."""
    gen = torch.Generator().manual_seed(0)
    pad = model.pad_token_id
    high = model.cfg.d_vocab
    ids = torch.randint(0, high, (2, min(seq_len, model.cfg.n_ctx)), generator=gen)
    if pad is not None:
        ids[ids == pad] = (pad + 1) % high
    pattern = list(getattr(model, "gating_token_pattern", ()))
    if pattern:  # a gated head needs its prompt-end marker (the assistant header) in the row
        mid = ids.shape[1] // 2
        ids[:, mid : mid + len(pattern)] = torch.tensor(pattern)
    hf_device = next(hf_model.parameters()).device  # the HF model may be on a GPU
    ref = adapter.reference_rewards(hf_model, ids.to(hf_device)).float()
    ours = model.objective_rewards(ids) if ref.ndim == 2 else model.rewards(ids)
    err = float((ours.float().cpu() - ref.cpu()).abs().max())
    tol = atol if atol is not None else (1e-3 if model.cfg.dtype == torch.float32 else 5e-2)
    if not err <= tol:
        raise ConversionMismatchError(
            f"converted model differs from HF by {err:.3g} (> {tol}) on random tokens; the "
            f"{type(adapter).__name__} mapping does not fit this checkpoint. Please report it."
        )
    return err
