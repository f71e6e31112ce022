"""`boot_reward_bridge`: a reward model as a TransformerLens 4 `TransformerBridge`.

The bridge wraps a causal stand-in (`families.causal_stand_in`) whose `lm_head` is the reward
head, so `bridge(ids, attention_mask=mask)` gives the reward at every position
(`[batch, pos, n_objectives]`) and `bridge_rewards` reads it where HF's classifier pools (the
rightmost token that is not the pad id, `reward_lens_tl.padding.hf_last_non_pad`). Weights are
processed as `HookedRewardModel`'s are (`enable_compatibility_mode` with the final norm folded
into the head, writing weights centred, value biases folded) but never with `center_unembed`:
TransformerLens's default centres the one-column head to zero, and every reward becomes 0.0.

Examples:
    >>> import torch
    >>> from reward_lens_tl.bridge import boot_reward_bridge, bridge_rewards
    >>> from reward_lens_tl.zoo import load_model, zoo_path
    >>> bridge = boot_reward_bridge(zoo_path("scalar"))
    >>> ids = torch.tensor([[1, 4, 27, 6, 5, 43, 6, 2], [1, 4, 27, 6, 5, 38, 0, 0]])
    >>> mask = (ids != 0).long()
    >>> hf = load_model("scalar")
    >>> expected = hf(input_ids=ids, attention_mask=mask).logits[:, 0]
    >>> bool((bridge_rewards(bridge, ids, mask) - expected).abs().max() < 1e-5)
    True
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from ..errors import ArgumentTypeError, RewardHeadError, UnsupportedArchitectureError
from ..padding import hf_last_non_pad
from .families import (
    BRIDGE_ARCHITECTURES,
    bridge_architecture,
    causal_stand_in,
    reward_model_class,
)
from .residual import route_resid_mid
from .versions import require_bridge

__all__ = [
    "boot_reward_bridge",
    "build_bridge",
    "bridge_rewards",
    "cast_bridge",
    "reward_positions",
]


def _load_reward_model(path: Path) -> tuple[nn.Module, Any]:
    """The reward model and tokenizer of a checkpoint directory, read as untrusted input."""
    from ..checkpoint import checkpoint_dir, checkpoint_tokenizer, load_config, load_weights

    path = checkpoint_dir(path)
    config = load_config(path)  # remote code refused before transformers sees the config
    arch = bridge_architecture(config)  # refused before any weight is read
    model = load_weights(reward_model_class(arch), path, config, attn_implementation="eager")
    return model, checkpoint_tokenizer(path)


def boot_reward_bridge(
    path_or_model: str | Path | nn.Module,
    *,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device | None = None,
    tokenizer: Any = None,
    process_weights: bool = True,
) -> Any:
    """Boot a reward model through TransformerLens 4's `TransformerBridge`, `score` as unembed.

    A directory is read as untrusted input (`reward_lens_tl.checkpoint`: `config.json` checked
    and remote code refused before transformers reads it, safetensors only, every tensor
    accounted for, `trust_remote_code=False`, no network). A model in memory is copied first:
    the bridge replaces the wrapped model's submodules in place.

    Args:
        path_or_model: A checkpoint directory, or an HF `*ForSequenceClassification` model (or
            an ArmoRM-style `LlamaForRewardModelWithGating`).
        dtype: The parameters' dtype; weights are processed in float32, then cast.
        device: Where the bridge runs (`None`: the CPU).
        tokenizer: The tokenizer (`None`: the checkpoint's own; none for a model in memory).
            TransformerLens reloads it from its `name_or_path` with `add_bos_token=True`.
        process_weights: Fold the final norm into the reward head, centre the writing weights
            and fold the value biases (`enable_compatibility_mode`, never `center_unembed`), as
            `HookedRewardModel` does, with the legacy hook names; `False` keeps the raw HF
            weights (the residual stream then differs from `HookedRewardModel`'s).

    Returns:
        The `TransformerBridge`. `bridge(ids, attention_mask=mask)` is the reward at every
        position (`[batch, pos, n_objectives]`); `bridge_rewards` reads it where HF does.

    Raises:
        TransformerLensVersionError: TransformerLens 4 is not installed (the message gives the
            install command).
        UnsupportedArchitectureError: A family the bridge backend does not boot, with the
            reason. An ArmoRM-style model boots: the bridge's output is its objectives and the
            gate is attached as `bridge.reward_gate` (`gated.py`, `BridgeRewardModel` applies it).
        ArgumentTypeError: `path_or_model` is neither a path nor a model.
        RewardHeadError: Weight processing zeroed the reward head.

    Examples:
        >>> from reward_lens_tl.bridge import boot_reward_bridge
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> bridge = boot_reward_bridge(tiny_reward_model("qwen2"))
        >>> type(bridge).__name__, bridge.cfg.n_layers, tuple(bridge.W_U.shape)
        ('TransformerBridge', 2, (64, 1))
        >>> ids = torch.tensor([[1, 7, 8, 9]])
        >>> tuple(bridge(ids).shape)                    # one reward per position
        (1, 4, 1)
    """
    require_bridge()
    reward_model: Any
    if isinstance(path_or_model, (str, Path)):
        reward_model, own_tokenizer = _load_reward_model(Path(path_or_model))
        tokenizer = own_tokenizer if tokenizer is None else tokenizer
        name = str(path_or_model)
    elif isinstance(path_or_model, nn.Module) and hasattr(path_or_model, "config"):
        import copy

        bridge_architecture(path_or_model.config, type(path_or_model).__name__)
        reward_model = copy.deepcopy(path_or_model).float().eval()
        reward_model.config._attn_implementation = "eager"  # hooks see the pattern
        name = str(getattr(path_or_model, "name_or_path", "") or "reward-model")
    else:
        raise ArgumentTypeError(
            "path_or_model must be a checkpoint directory or an HF *ForSequenceClassification "
            f"model, got {type(path_or_model).__name__}"
        )
    from .gated import RewardGate

    gate = RewardGate.of(reward_model)  # ArmoRM's gate, read before processing folds the norm
    untested = type(reward_model).__name__ not in BRIDGE_ARCHITECTURES
    probe = _probe_ids(reward_model) if untested else None
    expected = _hf_rewards(reward_model, probe) if probe is not None else None
    stand_in: Any = causal_stand_in(reward_model)
    try:
        bridge = build_bridge(
            stand_in, tokenizer, name, device=device, process_weights=process_weights, head=True
        )
    except RewardHeadError as err:
        if not untested:  # pragma: no cover - a guard on TL's folding in the tested families
            raise
        raise UnsupportedArchitectureError(
            f"{type(reward_model).__name__} is not in the tested families, and TransformerLens "
            f"4's weight processing of its stand-in zeroed the reward head ({err}). Use the "
            "default backend (HookedRewardModel, TransformerLens 3.9), or process_weights=False"
        ) from err
    if gate is not None:  # applied outside the bridge (`gated.py`)
        bridge.reward_gate = gate
    if probe is not None and expected is not None:  # in float32, before any cast
        _check_against_hf(bridge, probe, expected, type(reward_model).__name__)
    return cast_bridge(bridge, dtype)


def _probe_ids(reward_model: Any) -> Tensor:
    """Random ids (2 rows of 12, no pad id) a family outside the tested table is checked on."""
    vocab = int(reward_model.config.vocab_size)
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(min(3, vocab - 1), vocab, (2, 12), generator=generator)
    pad = reward_model.config.pad_token_id
    if isinstance(pad, int):  # HF would read before a pad; the bridge is read at the last token
        ids[ids == pad] = (pad + 1) % vocab if (pad + 1) % vocab != pad else pad
    return ids


@torch.no_grad()
def _hf_rewards(reward_model: Any, ids: Tensor) -> Tensor:
    """HF's own rewards of each row of `ids` alone (HF refuses batches without a pad id)."""
    device = next(reward_model.parameters()).device
    rows = [reward_model(input_ids=row[None].to(device)).logits for row in ids]
    return torch.cat(rows).float().cpu()


@torch.no_grad()
def _check_against_hf(bridge: Any, ids: Tensor, expected: Tensor, architecture: str) -> None:
    """Refuse a family outside the tested table whose bridge disagrees with HF."""
    out = bridge(ids.to(bridge.cfg.device)).float().cpu()[:, -1]
    error = float((out - expected).abs().max())
    tolerance = 1e-3 * (1.0 + float(expected.abs().max()))
    if not error <= tolerance:  # NaN included
        raise UnsupportedArchitectureError(
            f"{architecture} is not in the tested families, and on the TransformerBridge its "
            f"rewards differ from HF's by {error:.3g} on random tokens (tolerance "
            f"{tolerance:.3g}), so it is refused. Use the default backend "
            "(HookedRewardModel, TransformerLens 3.9), which may convert it"
        )


def build_bridge(
    causal_lm: Any,
    tokenizer: Any,
    name: str,
    *,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device | None = None,
    process_weights: bool = True,
    head: bool = True,
) -> Any:
    """A `TransformerBridge` around an HF causal LM (or a stand-in whose `lm_head` is a head).

    The one place the package builds a bridge (`boot_reward_bridge`, the judges' and PRMs'
    `verdict_boot`, the implicit reward's `boot_causal_lm`): TransformerLens's
    `build_bridge_from_module` (TL's adapter for the causal LM's architecture), `hook_resid_mid`
    routed into the residual stream (`residual.route_resid_mid`), the tokenizer kept as
    `bridge.reward_tokenizer` (TransformerLens reloads it with `add_bos_token=True`, and only
    from a directory), then the weights processed as `HookedRewardModel`'s are
    (`enable_compatibility_mode`, never `center_unembed`: it zeroes a one-column head).

    Args:
        causal_lm: The model; the bridge takes its modules over (pass a copy).
        tokenizer: Its tokenizer, or `None`.
        name: The model's name (a path or a label).
        dtype: The parameters' dtype; weights are processed in float32, then cast.
        device: Where the bridge runs (`None`: the CPU).
        process_weights: Process the weights (`False`: the raw HF weights).
        head: `lm_head` is a reward head: the output width is its width, and a head that
            processing zeroed is refused.

    Returns:
        The bridge.

    Raises:
        RewardHeadError: Weight processing zeroed the head.

    Examples:
        >>> from reward_lens_tl.bridge.families import causal_stand_in
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> bridge = build_bridge(causal_stand_in(tiny_reward_model("llama")), None, "tiny")
        >>> bridge.cfg.d_vocab_out, type(bridge.hook_dict["blocks.0.hook_resid_mid"]).__name__
        (1, 'ResidualHookPoint')
    """
    require_bridge()
    from transformer_lens.model_bridge.sources import build_bridge_from_module

    if device is not None:
        causal_lm.to(device)
    bridge = build_bridge_from_module(
        causal_lm,
        causal_lm.config.architectures[0],  # the causal LM's: TL's adapter for it
        hf_config=causal_lm.config,
        tokenizer=tokenizer if _reloadable(tokenizer) else None,
        dtype=torch.float32,
        device=device,
        model_name=name,
    )
    route_resid_mid(bridge)  # an edit at hook_resid_mid reaches the residual (residual.py)
    bridge.reward_tokenizer = tokenizer  # what `encode` uses
    if head:  # TransformerLens takes the output width from the vocabulary
        bridge.cfg.d_vocab_out = causal_lm.lm_head.out_features
    if process_weights:
        bridge.enable_compatibility_mode(disable_warnings=True, center_unembed=False)
        if head and not bool(bridge.W_U.abs().sum() > 0):  # pragma: no cover - TL's folding
            raise RewardHeadError("weight processing zeroed the head")
    return cast_bridge(bridge, dtype)


def cast_bridge(bridge: Any, dtype: torch.dtype) -> Any:
    """`bridge` with its parameters in `dtype` and its config saying so (processed in float32).

    Args:
        bridge: A bridge from `build_bridge`.
        dtype: The dtype.

    Returns:
        The same bridge.

    Examples:
        >>> from reward_lens_tl.bridge.families import causal_stand_in
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> bridge = build_bridge(causal_stand_in(tiny_reward_model("llama")), None, "tiny")
        >>> cast_bridge(bridge, torch.bfloat16).W_U.dtype, bridge.cfg.dtype  # doctest: +ELLIPSIS
        Changing model dtype to torch.bfloat16
        (torch.bfloat16, torch.bfloat16)
    """
    if dtype != torch.float32:
        bridge.to(dtype)
        bridge.cfg.dtype = dtype
    return bridge


def _reloadable(tokenizer: Any) -> bool:
    """Whether TransformerLens can reload `tokenizer` (it does, to add a BOS): from a directory.

    A tokenizer built in memory has nowhere to be reloaded from; the bridge then gets none (the
    model keeps its own as `reward_tokenizer`).
    """
    where = getattr(tokenizer, "init_kwargs", {}).get("name_or_path")
    return bool(where) and Path(str(where)).is_dir()


def _config_token_id(bridge: Any, name: str) -> int | None:
    """A special id from the checkpoint's config (`pad_token_id`, `eos_token_id`).

    The first of a list; `None` when the config names none (as `HookedRewardModel` reads them).
    """
    token = getattr(bridge.original_model.config, name, None)
    if isinstance(token, (list, tuple)):
        token = token[0] if token else None
    return token


def _pad_token_id(bridge: Any) -> int | None:
    return _config_token_id(bridge, "pad_token_id")


def reward_positions(
    bridge: Any, input_ids: Int[Tensor, "batch pos"], attention_mask: Tensor | None = None
) -> Int[Tensor, " batch"]:
    """Where HF's classifier reads each row's reward: the rightmost token that is not the pad id.

    An ArmoRM-style model is read by its own rule (`gated.armorm_positions`, which uses
    `attention_mask`); HF's classifier rule does not need it.

    Args:
        bridge: A bridge from `boot_reward_bridge`.
        input_ids: The token ids (`[batch, pos]`).
        attention_mask: `[batch, pos]`, nonzero at real tokens, or `None` (ArmoRM's rule only).

    Returns:
        One position per row.

    Raises:
        MissingPadTokenError: Several rows and a model without a pad id (ArmoRM: any rows).

    Examples:
        >>> from reward_lens_tl.bridge import boot_reward_bridge, reward_positions
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> bridge = boot_reward_bridge(tiny_reward_model("llama"))   # pad id 0
        >>> reward_positions(bridge, torch.tensor([[1, 5, 6, 0], [1, 5, 6, 7]])).tolist()
        [2, 3]
    """
    gate = getattr(bridge, "reward_gate", None)
    if gate is not None:
        return gate.read_positions(input_ids, attention_mask)
    return hf_last_non_pad(input_ids, _pad_token_id(bridge))


def bridge_rewards(
    bridge: Any,
    input_ids: Int[Tensor, "batch pos"],
    attention_mask: Int[Tensor, "batch pos"] | None = None,
) -> Float[Tensor, " batch"] | Float[Tensor, "batch n_objectives"]:
    """The rewards HF's classifier gives: the bridge's output at `reward_positions`.

    Args:
        bridge: A bridge from `boot_reward_bridge`.
        input_ids: The token ids (`[batch, pos]`), padded on either side.
        attention_mask: `[batch, pos]`, nonzero at real tokens (`None`: every position attends,
            as in HF).

    Returns:
        `[batch]` for a scalar head, `[batch, n_objectives]` otherwise.

    Examples:
        >>> from reward_lens_tl.bridge import boot_reward_bridge, bridge_rewards
        >>> from reward_lens_tl.testing import random_batch, tiny_reward_model
        >>> hf = tiny_reward_model("gpt2")
        >>> bridge = boot_reward_bridge(hf)
        >>> ids, mask = random_batch(2, [7, 5], padding_side="right")
        >>> expected = hf(input_ids=ids, attention_mask=mask).logits[:, 0]
        >>> bool((bridge_rewards(bridge, ids, mask) - expected).abs().max() < 1e-5)
        True
    """
    out = bridge(input_ids, attention_mask=attention_mask)
    rows = torch.arange(input_ids.shape[0], device=out.device)
    read = out[rows, reward_positions(bridge, input_ids, attention_mask).to(out.device)]
    return read[:, 0] if read.shape[-1] == 1 else read
