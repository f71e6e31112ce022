"""HF causal language models (local directory or in memory) → TransformerLens models.

`HookedTransformer.from_pretrained` only accepts official hub names; a DPO policy and its
reference usually live in a local directory. `load_causal_lm` builds the TL config and
weights itself with the same adapters that convert reward models (`reward_lens_tl.adapters`),
but keeps the vocabulary unembed (`lm_head`) instead of a reward head, so `model(tokens)` are
the causal LM's logits. The result is a `HookedSAETransformer` (SAEs splice as usual).

Weight processing: `fold_ln` moves the final norm's weight into `W_U` (`ln_final` becomes
`RMSNormPre`); `center_unembed` stays **off** so the logits equal HF's exactly (centring
would shift each position's logits by a constant, which changes no log-prob but does change the
taken token's logit that `.attribution` decomposes).

On TransformerLens 4 (the bridge backend) `load_causal_lm` is refused with the pointer to
`reward_lens_tl.bridge.boot_causal_lm`, its counterpart there; `load_policy_lm` (what
`ImplicitRewardModel.from_pretrained` calls) takes whichever of the two the installed line runs.

Examples:
    >>> from reward_lens_tl.zoo import zoo_path
    >>> policy = load_causal_lm(zoo_path("policy"))
    >>> policy.cfg.d_vocab_out, policy.tokenizer is not None
    (122, True)
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from ..checkpoint import checkpoint_tokenizer
from ..errors import ArgumentTypeError, BridgeUnsupportedError

if TYPE_CHECKING:  # TransformerLens 3.9 and sae_lens: imported where used (not under 4)
    from sae_lens import HookedSAETransformer

__all__ = [
    "load_causal_lm",
]


def bridge_line() -> bool:
    """Whether the installed TransformerLens is 4 or later (the bridge backend's line).

    Returns:
        `True` under TransformerLens 4.
    """
    from ..bridge.versions import is_bridge_line

    return is_bridge_line()


def load_policy_lm(model_or_path: nn.Module | str | Path, tokenizer: Any = None, **options: Any):
    """A policy or reference on the installed line's backend.

    `load_causal_lm` on TransformerLens 3.9, `reward_lens_tl.bridge.boot_causal_lm` on 4.

    Args:
        model_or_path: A local checkpoint folder or an in-memory HF causal LM.
        tokenizer: The tokenizer; the checkpoint's own when not given.
        **options: The loader's options.

    Returns:
        The TransformerLens model (a `BridgeCausalLM` on TransformerLens 4).
    """
    if bridge_line():
        from ..bridge.implicit import boot_causal_lm

        return boot_causal_lm(model_or_path, tokenizer, **options)
    return load_causal_lm(model_or_path, tokenizer, **options)


def load_hf_causal_lm(path: str | Path) -> nn.Module:
    """A local causal-LM checkpoint, from safetensors only, never remote code, in eval mode.

    It takes the reward models' loading path with the checkpoint's own class.

    Args:
        path: The checkpoint's folder.

    Returns:
        The HF model.
    """
    from ..adapters import RewardModelAdapter
    from ..loading import load_hf_model

    return load_hf_model(path, RewardModelAdapter())


def _reward_view(hf_config: Any) -> Any:
    from ..adapters.causal import CAUSAL_TO_REWARD, reward_view

    return reward_view(
        hf_config,
        CAUSAL_TO_REWARD,
        "Models TransformerLens knows by name can be loaded with "
        "HookedTransformer.from_pretrained(name) and passed to ImplicitRewardModel as is",
    )


def load_causal_lm(
    model_or_path: nn.Module | str | Path,
    tokenizer: Any = None,
    *,
    fold_ln: bool = True,
    device: str | torch.device | None = None,
    n_ctx: int | None = None,
) -> HookedSAETransformer:
    """Convert an HF causal LM (a local directory or an in-memory model, left unmodified).

    The model gets `tokenizer` (the checkpoint's own when not given), `pad_token_id` and
    `eos_token_id` attributes. Gemma-2's final logit soft-cap is kept (its logits then match
    HF's, but exact logit attribution is refused).

    Args:
        model_or_path: A local checkpoint folder or an in-memory HF causal LM.
        tokenizer: The tokenizer; the checkpoint's own when not given.
        fold_ln: Whether to fold the norms' weights into the following matrices.
        device: Where to put the model.
        n_ctx: The context length, or `None` for the checkpoint's.

    Returns:
        The TransformerLens model.

    Raises:
        ArgumentTypeError: When the model is not a transformers `PreTrainedModel`.
        BridgeUnsupportedError: Under TransformerLens 4 (use
            `reward_lens_tl.bridge.boot_causal_lm`).

    Examples:
        >>> import torch
        >>> from reward_lens_tl.implicit import load_causal_lm
        >>> from reward_lens_tl.zoo import load_model, zoo_path
        >>> policy = load_causal_lm(zoo_path("policy"))  # a local checkpoint folder
        >>> hf = load_model("policy")  # the same checkpoint as a transformers model
        >>> ids = torch.tensor([[1, 4, 27, 50, 42, 6, 5, 34, 35, 43, 6, 2]])
        >>> bool((policy(ids) - hf(input_ids=ids).logits).abs().max() < 1e-4)  # HF's logits
        True
        >>> policy.cfg.n_layers, policy.cfg.d_vocab_out, policy.eos_token_id
        (2, 122, 2)
        >>> load_causal_lm(hf).tokenizer is None  # an in-memory model brings no tokenizer
        True
    """
    if bridge_line():
        raise BridgeUnsupportedError(
            "load_causal_lm builds a TransformerLens 3.9 HookedSAETransformer, which "
            "TransformerLens 4 does not have: boot the checkpoint with "
            "reward_lens_tl.bridge.boot_causal_lm (ImplicitRewardModel.from_pretrained does)"
        )
    from sae_lens import HookedSAETransformer
    from transformers import PreTrainedModel

    from ..adapters import ConversionOptions, adapter_for
    from ..adapters.causal import BackboneView
    from ..loading import check_finite, resolve_pad_token_id

    if isinstance(model_or_path, nn.Module):
        hf_model, path = model_or_path, None
    else:
        path = Path(model_or_path)
        hf_model = load_hf_causal_lm(path)
    if not isinstance(hf_model, PreTrainedModel):
        raise ArgumentTypeError(
            "load_causal_lm converts a Hugging Face causal LM (a transformers PreTrainedModel), "
            f"got a {type(hf_model).__name__}"
        )
    hf_config: Any = copy.deepcopy(hf_model.config)  # a PretrainedConfig of any architecture
    if not getattr(hf_config, "architectures", None):
        hf_config.architectures = [type(hf_model).__name__]
    view = _reward_view(hf_config)
    adapter = adapter_for(view)
    check_finite(hf_model)
    options = ConversionOptions(device=device, n_ctx=n_ctx)
    cfg = adapter.tl_config(view, options, hf_config.vocab_size)
    cap = getattr(hf_config, "final_logit_softcapping", None)
    if cap:
        cfg.output_logits_soft_cap = float(cap)
    head = hf_model.get_output_embeddings()
    stand_in = BackboneView(hf_model, head, view)
    state_dict = {
        k: v.detach().float().clone() for k, v in adapter.backbone_state_dict(stand_in, cfg).items()
    }
    state_dict["unembed.W_U"] = head.weight.detach().T.float().clone()
    bias = getattr(head, "bias", None)
    state_dict["unembed.b_U"] = (
        bias.detach().float().clone() if bias is not None else torch.zeros(cfg.d_vocab_out)
    )
    model = HookedSAETransformer(cfg)
    flags = dict(fold_ln=fold_ln, center_writing_weights=True, fold_value_biases=True)
    flags = adapter.fold_options(flags)  # center_unembed stays off
    model.load_and_process_state_dict(state_dict, refactor_factored_attn_matrices=False, **flags)
    model.eval()
    tokenizer = tokenizer if tokenizer is not None else checkpoint_tokenizer(path)
    model.tokenizer = tokenizer  # set directly: TL's set_tokenizer reloads it by name
    model.pad_token_id = resolve_pad_token_id(hf_config, tokenizer)
    model.eos_token_id = getattr(hf_config, "eos_token_id", None)
    return model
