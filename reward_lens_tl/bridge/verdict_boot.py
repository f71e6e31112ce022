"""A judge's or PRM's head as the unembed of a TransformerLens 4 bridge (`boot_verdict_bridge`).

A generative judge is a causal LM, which the bridge wraps natively; what it reads is not the
vocabulary but a few rows of the LM head (`reward_lens_tl.judges.head_spec.HeadSpec`: the
verdict difference, the two capped logits, the Likert grades) or a PRM's value or classifier
head. As for reward models (`families.causal_stand_in`), the bridge is handed a stand-in: the
family's causal LM on the meta device whose backbone is the model's own and whose `lm_head` is
that head, so the bridge's output is the head outputs at every position, `[batch, pos, n_out]`,
exactly what TransformerLens 3.9's `HookedJudge`/`HookedPRM` have as their unembed. A classifier
PRM's last layer (`Linear` after a `ReLU`) stays outside, as in `HookedPRM` (`head_out`).
Gemma-2's final soft-cap is left to the score (`VerdictScore.cap`), as there.

Examples:
    >>> from reward_lens_tl.bridge.verdict_boot import VERDICT_ARCHITECTURES
    >>> VERDICT_ARCHITECTURES["GPT2ForTokenClassification"]
    ('GPT2LMHeadModel', 'transformer')
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..errors import RewardHeadError, UnsupportedArchitectureError
from ..judges.head_spec import HeadSpec, classifier_layers, head_module
from .boot import build_bridge

__all__ = ["VERDICT_ARCHITECTURES", "boot_verdict_bridge", "load_verdict_model", "verdict_stand_in"]

_FAMILIES = {"Llama": "model", "Mistral": "model", "Qwen2": "model", "Gemma2": "model"}
#: A judge's or PRM's HF architecture → (the causal LM the bridge wraps, the backbone's
#: attribute on both): the causal LMs (judges, token PRMs), their `*ForTokenClassification`
#: (value and classifier PRMs) and Qwen2.5-Math-PRM's layout (`judges.prm_module`); the families
#: `HookedJudge`/`HookedPRM` load.
VERDICT_ARCHITECTURES: dict[str, tuple[str, str]] = {
    **{f"{f}ForCausalLM": (f"{f}ForCausalLM", b) for f, b in _FAMILIES.items()},
    **{f"{f}ForTokenClassification": (f"{f}ForCausalLM", b) for f, b in _FAMILIES.items()},
    "GPT2LMHeadModel": ("GPT2LMHeadModel", "transformer"),
    "GPT2ForTokenClassification": ("GPT2LMHeadModel", "transformer"),
    "Qwen2ForProcessRewardModel": ("Qwen2ForCausalLM", "model"),
}


def verdict_architecture(hf_config: Any, architecture: str | None = None) -> str:
    """The judge's or PRM's architecture, refused with the supported list when unknown.

    Args:
        hf_config: The HF config.
        architecture: The architecture's name (`None`: `hf_config.architectures[0]`).

    Returns:
        A key of `VERDICT_ARCHITECTURES`.

    Raises:
        UnsupportedArchitectureError: Another architecture.
    """
    arch = architecture or (getattr(hf_config, "architectures", None) or [None])[0]
    if arch not in VERDICT_ARCHITECTURES:
        raise UnsupportedArchitectureError(
            f"the TransformerBridge backend has no judge or PRM stand-in for {arch} (model_type="
            f"{getattr(hf_config, 'model_type', None)!r}). Supported: "
            f"{', '.join(VERDICT_ARCHITECTURES)}. The default backend (HookedJudge, HookedPRM; "
            "TransformerLens 3.9) reads the same families"
        )
    return arch


def load_verdict_model(path: Path, hf_config: Any) -> nn.Module:
    """A judge's or PRM's HF model from a checkpoint directory, read as untrusted input.

    The architecture is checked before any weight is read; the weights are loaded by
    `reward_lens_tl.checkpoint.load_weights` (safetensors only, every tensor accounted for,
    no remote code: Qwen2.5-Math-PRM's layout is this library's `judges.prm_module`).

    Args:
        path: The checkpoint directory (`hf_config` already read from it by `load_config`).
        hf_config: Its HF config.

    Returns:
        The HF model, float32, in eval mode.

    Examples:
        >>> from reward_lens_tl.checkpoint import load_config
        >>> from reward_lens_tl.zoo import zoo_path
        >>> path = zoo_path("prm")
        >>> type(load_verdict_model(path, load_config(path))).__name__
        'LlamaForCausalLM'
    """
    import transformers

    from ..checkpoint import load_weights
    from ..judges.prm_module import LAYOUTS

    arch = verdict_architecture(hf_config)
    cls = LAYOUTS[arch] if arch in LAYOUTS else getattr(transformers, arch)
    return load_weights(cls, path, hf_config, attn_implementation="eager")


def verdict_stand_in(
    hf_model: nn.Module, spec: HeadSpec, *, copy_backbone: bool = True
) -> tuple[nn.Module, nn.Linear | None]:
    """The family's causal LM with `hf_model`'s backbone and the head of `spec`.

    Args:
        hf_model: A judge's or PRM's HF model (an architecture of `VERDICT_ARCHITECTURES`).
        spec: The head to read (`reward_lens_tl.judges.head_spec`).
        copy_backbone: Copy the backbone (the bridge replaces its submodules in place); `False`
            for a model nobody else holds (one loaded from a directory here).

    Returns:
        `(stand_in, head_out)`: the stand-in in eval mode, float32, its `lm_head` the head; and a
        classifier PRM's last layer (a float32 copy), else `None`.

    Raises:
        UnsupportedArchitectureError: The architecture is not supported.
        RewardHeadError: The model has no such head.

    Examples:
        >>> import torch
        >>> from reward_lens_tl.judges.head_spec import HeadSpec
        >>> from reward_lens_tl.testing import tiny_causal_lm
        >>> hf, _ = tiny_causal_lm("llama")
        >>> spec = HeadSpec("lm_head", ("w10-w11",), (10, 11), torch.tensor([[1.0, -1.0]]))
        >>> stand_in, head_out = verdict_stand_in(hf, spec)
        >>> ids = torch.tensor([[1, 12, 13, 9]])
        >>> logits = hf(ids).logits[0, -1]
        >>> bool(torch.allclose(stand_in(ids).logits[0, -1, 0], logits[10] - logits[11]))
        True
        >>> stand_in.model is hf.model, head_out is None  # the backbone is a copy
        (False, True)
    """
    import transformers

    arch = verdict_architecture(hf_model.config, type(hf_model).__name__)
    causal_name, backbone = VERDICT_ARCHITECTURES[arch]
    source = head_module(hf_model, spec)
    head = _head_linear(source, spec)
    head_out = None
    if spec.source == "classifier":
        head_out = copy.deepcopy(classifier_layers(hf_model)[-1]).float().eval()
    config: Any = copy.deepcopy(hf_model.config)
    config.architectures = [causal_name]
    config.tie_word_embeddings = False
    config._attn_implementation = "eager"  # hooks see the attention pattern
    if hasattr(config, "final_logit_softcapping"):
        config.final_logit_softcapping = None  # the score caps (`VerdictScore.cap`)
    with torch.device("meta"):
        stand_in = getattr(transformers, causal_name)(config)
    body = getattr(hf_model, backbone)
    setattr(stand_in, backbone, (copy.deepcopy(body) if copy_backbone else body).float())
    stand_in.lm_head = head
    on_meta = [n for n, t in (*stand_in.named_parameters(), *stand_in.named_buffers()) if t.is_meta]
    if on_meta:  # pragma: no cover - a transformers layout this table does not know
        raise UnsupportedArchitectureError(
            f"the {causal_name} stand-in for {arch} has tensors the model does not provide: "
            f"{', '.join(on_meta[:5])}"
        )
    for p in head_out.parameters() if head_out is not None else ():
        p.requires_grad_(False)
    return stand_in.eval(), head_out


def _head_linear(source: nn.Linear, spec: HeadSpec) -> nn.Linear:
    """The head as one `Linear` (float32): the spec's combination of LM head rows, or `source`."""
    bias = getattr(source, "bias", None)
    if spec.source == "lm_head":
        weight = spec.rows(source.weight)
        bias = spec.rows(bias) if bias is not None else None
    else:
        weight = source.weight.detach()
        bias = bias.detach() if bias is not None else None
    if spec.source != "classifier" and weight.shape[0] != spec.n_out:
        raise RewardHeadError(
            f"the {spec.source} head has {weight.shape[0]} outputs; expected {spec.n_out} "
            f"({spec.names})"
        )
    head = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
    with torch.no_grad():
        head.weight.copy_(weight.float())
        if bias is not None:
            head.bias.copy_(bias.float())
    return head.eval()


def boot_verdict_bridge(
    stand_in: Any,
    tokenizer: Any,
    name: str,
    *,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device | None = None,
    process_weights: bool = True,
) -> Any:
    """Boot a stand-in (`verdict_stand_in`) through TransformerLens 4's bridge.

    Weights are processed as `HookedJudge`'s are (`enable_compatibility_mode`: the final norm
    folded into the head, writing weights centred, value biases folded; never `center_unembed`,
    which would zero a one-column head), with the legacy hook names and `hook_resid_mid` routed
    to the residual (`residual.route_resid_mid`), as `boot.boot_reward_bridge` does.

    Args:
        stand_in: The stand-in (the bridge takes its modules over).
        tokenizer: The judge's or PRM's tokenizer (kept as `bridge.reward_tokenizer`).
        name: The model's name (a path or a label).
        dtype: The parameters' dtype; weights are processed in float32, then cast.
        device: Where the bridge runs (`None`: the CPU).
        process_weights: Process the weights as above (`False`: the raw HF weights).

    Returns:
        The `TransformerBridge`; its output is the head outputs at every position.

    Raises:
        TransformerLensVersionError: TransformerLens 4 is not installed.
        RewardHeadError: Weight processing zeroed the head.

    Examples:
        >>> import torch
        >>> from reward_lens_tl.judges.head_spec import HeadSpec
        >>> from reward_lens_tl.testing import tiny_causal_lm
        >>> hf, tok = tiny_causal_lm("qwen2")
        >>> spec = HeadSpec("lm_head", ("w10-w11",), (10, 11), torch.tensor([[1.0, -1.0]]))
        >>> bridge = boot_verdict_bridge(verdict_stand_in(hf, spec)[0], tok, "tiny")
        >>> tuple(bridge.W_U.shape), tuple(bridge(torch.tensor([[1, 12, 9]])).shape)
        ((64, 1), (1, 3, 1))
    """
    return build_bridge(
        stand_in,
        tokenizer,
        name,
        dtype=dtype,
        device=device,
        process_weights=process_weights,
        head=True,
    )
