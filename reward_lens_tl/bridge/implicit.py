"""A DPO policy and its reference on TransformerLens 4's bridge, for `reward_lens_tl.implicit`.

`boot_causal_lm` boots a causal LM of a family the bridge backend supports (Llama, Mistral,
Qwen2, Qwen3, Gemma-2, GPT-2) with its vocabulary unembed kept, and `BridgeCausalLM` gives it
what `ImplicitRewardModel` and its analyses (`implicit_lens`, `implicit_attribution`,
`policy_features`) read: `cfg`, `ln_final` (the weight it applies), `unembed`, `hooks`,
`run_with_cache`, and `model(ids, attention_mask=mask)` as the logits. Weights are processed
as `load_causal_lm` processes them on TransformerLens 3.9 (final norm folded into `W_U`, writing
weights centred, value biases folded, the unembed never centred), so residuals, logits and every
number of those analyses agree with the default backend (tests/tl4/test_implicit.py).

The bridge counts a left-padded row's positions from its first real token, as TransformerLens
3.9 does (HF's plain forward counts from column 0, which moves GPT-2's absolute positions), so a
padded batch gives each row's unpadded log-probs. A directory is read as untrusted input, as
`boot_reward_bridge` reads one (`reward_lens_tl.checkpoint`: safetensors only,
`trust_remote_code=False`, no network). `ImplicitRewardModel.from_pretrained` calls
`boot_causal_lm` under TransformerLens 4.

Examples:
    >>> import torch
    >>> from reward_lens_tl.bridge.implicit import boot_causal_lm
    >>> from reward_lens_tl.zoo import load_model, zoo_path
    >>> policy = boot_causal_lm(zoo_path("policy"))
    >>> ids = torch.tensor([[1, 4, 27, 50, 42, 6, 5, 34, 35, 43, 6, 2]])
    >>> hf = load_model("policy")
    >>> bool((policy(ids) - hf(input_ids=ids).logits).abs().max() < 1e-4)  # HF's logits
    True
    >>> policy.cfg.n_layers, policy.cfg.d_vocab_out, policy.eos_token_id
    (2, 122, 2)
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from ..errors import ArgumentTypeError, BridgeUnsupportedError, UnsupportedArchitectureError
from .boot import _config_token_id, build_bridge
from .families import BRIDGE_ARCHITECTURES
from .post_norms import AppliedNorm, post_norm_view
from .versions import require_bridge
from .windows import bridge_inputs

__all__ = ["CAUSAL_ARCHITECTURES", "BridgeCausalLM", "boot_causal_lm"]

#: The causal-LM architectures the bridge backend boots (its reward families' causal LMs).
CAUSAL_ARCHITECTURES: tuple[str, ...] = tuple(
    sorted({causal for causal, _ in BRIDGE_ARCHITECTURES.values()})
)


def causal_architecture(hf_config: Any, architecture: str | None = None) -> str:
    """The causal LM's architecture, refused with the reason when the bridge backend lacks it.

    Args:
        hf_config: The HF config.
        architecture: The architecture's name (`None`: `hf_config.architectures[0]`; a model
            built in memory has none there, so pass its class's name).

    Returns:
        The architecture, one of `CAUSAL_ARCHITECTURES`.

    Raises:
        UnsupportedArchitectureError: A reward model, or a family the backend does not boot.

    Examples:
        >>> from transformers import LlamaConfig
        >>> causal_architecture(LlamaConfig(architectures=["LlamaForCausalLM"]))
        'LlamaForCausalLM'
    """
    archs = getattr(hf_config, "architectures", None) or [None]
    arch = architecture or archs[0]
    if arch in CAUSAL_ARCHITECTURES:
        return arch
    hint = (
        "it is a reward model: boot it with reward_lens_tl.bridge.boot_reward_bridge"
        if arch in BRIDGE_ARCHITECTURES
        else "the default backend's load_causal_lm (TransformerLens 3.9) may convert it"
    )
    raise UnsupportedArchitectureError(
        f"the TransformerBridge backend boots no causal LM {arch} as a policy or reference "
        f"({hint}). Supported: {', '.join(CAUSAL_ARCHITECTURES)}"
    )


def _load_causal_lm(path: Path) -> tuple[nn.Module, Any]:
    """The causal LM and tokenizer of a checkpoint directory, read as untrusted input."""
    import transformers

    from ..checkpoint import checkpoint_dir, checkpoint_tokenizer, load_config, load_weights

    path = checkpoint_dir(path)
    config = load_config(path)  # remote code refused before transformers sees the config
    arch = causal_architecture(config)  # refused before any weight is read
    cls = getattr(transformers, arch)
    model = load_weights(cls, path, config, attn_implementation="eager")
    return model, checkpoint_tokenizer(path)


def _in_memory(model: nn.Module) -> nn.Module:
    """A float32 eager copy of an HF causal LM (the bridge replaces submodules in place)."""
    from transformers import PreTrainedModel

    if not isinstance(model, PreTrainedModel):
        raise ArgumentTypeError(
            "boot_causal_lm boots a checkpoint directory or a Hugging Face causal LM (a "
            f"transformers PreTrainedModel), got a {type(model).__name__}"
        )
    causal_architecture(model.config, type(model).__name__)
    out: Any = copy.deepcopy(model).float().eval()
    out.config._attn_implementation = "eager"  # hooks see the pattern
    out.config.architectures = [type(model).__name__]
    return out


def boot_causal_lm(
    model_or_path: str | Path | nn.Module,
    tokenizer: Any = None,
    *,
    device: str | torch.device | None = None,
    dtype: torch.dtype = torch.float32,
    **unsupported: Any,
) -> BridgeCausalLM:
    """Boot an HF causal LM through TransformerLens 4's bridge, its vocabulary unembed kept.

    The bridge counterpart of `reward_lens_tl.implicit.load_causal_lm` (module docstring): the
    model gets `tokenizer` (the checkpoint's own when not given; none for a model in memory),
    `pad_token_id` (the config's, else the tokenizer's) and `eos_token_id`. A model in memory is
    copied first and left unmodified. Gemma-2's final logit soft-cap is kept (HF applies it;
    `cfg.output_logits_soft_cap` says so, and exact attribution is refused as on 3.9).

    Args:
        model_or_path: A local checkpoint folder or an in-memory HF causal LM.
        tokenizer: The tokenizer; the checkpoint's own when not given.
        device: Where the bridge runs (`None`: the CPU).
        dtype: The parameters' dtype; weights are processed in float32, then cast.
        **unsupported: `load_causal_lm`'s other options (`fold_ln`, `n_ctx`): refused.

    Returns:
        The `BridgeCausalLM`.

    Raises:
        TransformerLensVersionError: TransformerLens 4 is not installed.
        UnsupportedArchitectureError: A family the bridge backend does not boot (or a reward
            model).
        ArgumentTypeError: Neither a path nor an HF model.
        BridgeUnsupportedError: An option of `load_causal_lm` the bridge does not take.

    Examples:
        >>> from reward_lens_tl.bridge.implicit import boot_causal_lm
        >>> from reward_lens_tl.zoo import load_model
        >>> policy = boot_causal_lm(load_model("policy"))  # in memory: no tokenizer
        >>> policy.tokenizer is None, policy.pad_token_id, tuple(policy.W_U.shape)
        (True, 0, (64, 122))
    """
    require_bridge()
    if unsupported:
        raise BridgeUnsupportedError(
            f"boot_causal_lm does not take {', '.join(sorted(unsupported))}: the bridge always "
            "folds the norms and keeps the checkpoint's context (load_causal_lm's defaults). "
            "Use the default backend (TransformerLens 3.9) for other settings"
        )
    if isinstance(model_or_path, (str, Path)):
        hf_model, own = _load_causal_lm(Path(model_or_path))
        tokenizer = own if tokenizer is None else tokenizer
        name = str(model_or_path)
    elif isinstance(model_or_path, nn.Module):
        hf_model = _in_memory(model_or_path)
        name = str(getattr(model_or_path, "name_or_path", "") or "causal-lm")
    else:
        raise ArgumentTypeError(
            "model_or_path must be a checkpoint directory or an HF causal LM, got "
            f"{type(model_or_path).__name__}"
        )
    return BridgeCausalLM(_bridge(hf_model, tokenizer, name, device, dtype), tokenizer)


def _bridge(hf_model: Any, tokenizer: Any, name: str, device: Any, dtype: torch.dtype) -> Any:
    """The processed bridge around `hf_model` (weights processed as `load_causal_lm` does)."""
    from ..weights import check_finite

    for key, tensor in hf_model.state_dict().items():
        if tensor.is_floating_point():
            check_finite(key, tensor)
    # fold_ln, centred writing weights, folded value biases; the unembed is not centred (its
    # logits then equal HF's and the taken token's logit is what attribution splits)
    return build_bridge(hf_model, tokenizer, name, dtype=dtype, device=device, head=False)


class BridgeCausalLM:
    """A causal LM on the bridge with the surface `reward_lens_tl.implicit` reads.

    Attribute lookups the class does not define go to the bridge (`cfg`, `blocks`, `W_U`,
    `b_U`, `unembed`, `hooks`, `hook_dict`, ...); a post-norm model's `cfg` and `blocks` are
    read as TransformerLens 3.9 reads them (`post_norms.post_norm_view`).

    Args:
        bridge: A processed bridge around an HF causal LM (`boot_causal_lm` builds one).
        tokenizer: The tokenizer, or `None`.

    Examples:
        >>> from reward_lens_tl.bridge.implicit import BridgeCausalLM, boot_causal_lm
        >>> from reward_lens_tl.zoo import zoo_path
        >>> policy = boot_causal_lm(zoo_path("policy"))
        >>> isinstance(policy, BridgeCausalLM), type(policy.bridge).__name__
        (True, 'TransformerBridge')
    """

    #: No TransformerLens 3.9 key/value cache, widened batches or attention components
    #: (`reward_lens_tl.capabilities`).
    supports_prefix_cache = False
    supports_batch_widening = False
    supports_tl_attention = False

    def __init__(self, bridge: Any, tokenizer: Any = None):
        """Wrap `bridge` (nothing is copied)."""
        self.bridge = bridge
        self.tokenizer = tokenizer
        pad = _config_token_id(bridge, "pad_token_id")
        self.pad_token_id = pad if pad is not None else getattr(tokenizer, "pad_token_id", None)
        self.eos_token_id = _config_token_id(bridge, "eos_token_id")

    def __getattr__(self, name: str) -> Any:
        """The bridge's attribute `name` (a post-norm model's `cfg`/`blocks` as 3.9 reads them)."""
        if name == "bridge":  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        view = post_norm_view(self.bridge, name)
        return getattr(self.bridge, name) if view is None else view

    @property
    def ln_final(self) -> AppliedNorm:
        """The final norm, its `w` the weight it applies (`1 + w` for Gemma's offset)."""
        offset = bool(getattr(self.bridge.cfg, "rmsnorm_uses_offset", False))
        return AppliedNorm(self.bridge.ln_final, offset)

    def _kwargs(self, attention_mask: Tensor | None, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The bridge's keywords: the mask, or a sliding window over real tokens (`windows`)."""
        return dict(kwargs, **bridge_inputs(self.bridge, attention_mask))

    def __call__(self, *args: Any, **kwargs: Any) -> Tensor:
        """`forward`."""
        return self.forward(*args, **kwargs)

    def forward(
        self,
        input_ids: Int[Tensor, "batch pos"],
        *,
        attention_mask: Tensor | None = None,
        **kwargs: Any,
    ) -> Float[Tensor, "batch pos vocab"]:
        """The logits (Gemma-2's soft-cap applied, as HF does).

        Args:
            input_ids: Token ids `[batch, pos]`.
            attention_mask: `[batch, pos]`, or `None`.
            **kwargs: Passed to the bridge.

        Returns:
            The logits.
        """
        return self.bridge(input_ids, **self._kwargs(attention_mask, kwargs))

    def run_with_cache(
        self,
        input_ids: Int[Tensor, "batch pos"],
        *,
        attention_mask: Tensor | None = None,
        names_filter: Any = None,
        **kwargs: Any,
    ) -> tuple[Tensor, Any]:
        """The bridge's `run_with_cache`: `(logits, cache)`.

        Args:
            input_ids: Token ids `[batch, pos]`.
            attention_mask: `[batch, pos]`, or `None`.
            names_filter: The hook names to cache.
            **kwargs: Passed to the bridge.

        Returns:
            `(logits, cache)`.

        Examples:
            >>> from reward_lens_tl.bridge.implicit import boot_causal_lm
            >>> from reward_lens_tl.zoo import zoo_path
            >>> policy = boot_causal_lm(zoo_path("policy"))
            >>> logits, cache = policy.run_with_cache(
            ...     torch.tensor([[1, 4, 27, 6]]), names_filter=["blocks.1.hook_resid_post"])
            >>> resid = cache["blocks.1.hook_resid_post"]
            >>> bool(torch.allclose(policy.unembed(policy.ln_final(resid)), logits, atol=1e-5))
            True
        """
        kwargs = self._kwargs(attention_mask, kwargs)
        return self.bridge.run_with_cache(input_ids, names_filter=names_filter, **kwargs)
