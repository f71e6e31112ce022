"""The adapter protocol: how one family of HF reward models becomes a `HookedRewardModel`.

An adapter is a small stateless object. `RewardModelAdapter` supplies defaults shared by
every family (safetensors loading, HF's pooling rule, the scalar reward head, the HF-side
reference score); a family overrides only what differs, usually `matches`, `tl_config` and
`backbone_state_dict`.

Examples:
    >>> from reward_lens_tl.adapters import supported_architectures
    >>> "LlamaForSequenceClassification" in supported_architectures()
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypedDict, cast

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn
from transformer_lens import HookedTransformerConfig

from ..errors import RewardHeadError
from ..padding import hf_last_non_pad

__all__ = [
    "ConversionOptions",
    "RewardHead",
    "RewardModelAdapter",
    "linear_head",
    "pad_token_id_of",
    "tl_device",
]


@dataclass(frozen=True)
class RewardHead:
    """The reward head as TL wants it: `W [d_model, n_objectives]`, `b [n_objectives]`.

    Attributes:
        W: the head's weight, one column per objective (`[d_model, n_objectives]`).
        b: the head's bias (`[n_objectives]`).
        objective_names: one name per column (`("reward",)` for a scalar head).

    Examples:
        >>> import torch
        >>> from reward_lens_tl.adapters import RewardHead
        >>> names = ("helpful", "harmless", "brief")
        >>> head = RewardHead(W=torch.zeros(64, 3), b=torch.zeros(3), objective_names=names)
        >>> head.n_objectives
        3

        An adapter reads it off the HF model's `score` layer:

        >>> from reward_lens_tl.adapters import ConversionOptions, adapter_for
        >>> from reward_lens_tl.zoo import load_model
        >>> hf = load_model("scalar")
        >>> head = adapter_for(hf.config).reward_head(hf, ConversionOptions())
        >>> tuple(head.W.shape), head.objective_names
        ((64, 1), ('reward',))
        >>> bool(torch.equal(head.W, hf.score.weight.T))
        True
    """

    W: Float[Tensor, "d_model n_objectives"]
    b: Float[Tensor, " n_objectives"]
    objective_names: tuple[str, ...] = ("reward",)

    @property
    def n_objectives(self) -> int:
        """The number of head outputs."""
        return self.W.shape[1]


class ConversionOptions(TypedDict, total=False):
    """The conversion options, declared once (every loading entry point takes them).

    `HookedRewardModel.from_pretrained`, `load_reward_model` and `convert_hf_model` take them as
    `**options: Unpack[ConversionOptions]` (`reward_lens_tl.loading.OPTIONS_DOC` documents each,
    `reward_lens_tl.loading.OPTION_DEFAULTS` holds their defaults); the adapters receive the
    resolved ones (`dtype` a `torch.dtype`, `device` a string or `None`). The keys after
    `use_safetensors` in TransformerLens's `from_pretrained` without a meaning here are accepted
    only at their no-op values.

    Examples:
        >>> import torch
        >>> from reward_lens_tl.adapters import ConversionOptions, tl_device
        >>> options = ConversionOptions(device=torch.device("cpu"), n_ctx=128)
        >>> tl_device(options), options.get("n_ctx"), options.get("dtype", torch.float32)
        ('cpu', 128, torch.float32)
        >>> tl_device(ConversionOptions()) is None
        True
    """

    fold_ln: bool
    center_writing_weights: bool
    fold_value_biases: bool
    center_unembed: bool
    refactor_factored_attn_matrices: bool
    dtype: torch.dtype | str
    torch_dtype: torch.dtype | str | None
    device: str | torch.device | None
    n_ctx: int | None
    objective_names: Sequence[str] | None
    adapter: RewardModelAdapter | None
    revision: str | None
    cache_dir: str | Path | None
    token: str | bool | None
    local_files_only: bool
    hf_model: nn.Module | None
    n_devices: int
    move_to_device: bool
    first_n_layers: int | None
    checkpoint_index: int | None
    checkpoint_value: int | None
    checkpoint_label: int | None
    default_prepend_bos: bool | None
    default_padding_side: Literal["left", "right"] | None
    trust_remote_code: bool
    load_in_8bit: bool
    load_in_4bit: bool
    use_safetensors: bool


def tl_device(options: ConversionOptions) -> str | None:
    """The options' `device` as TransformerLens's config takes it (a string, or `None`).

    Args:
        options: The conversion options.

    Returns:
        The device's name, or `None` (TransformerLens's default).

    Examples:
        >>> tl_device(ConversionOptions(device="cpu")), tl_device(ConversionOptions())
        ('cpu', None)
    """
    device = options.get("device")
    return None if device is None else str(device)


class RewardModelAdapter:
    """Base adapter: override what your family does differently.

    The ten methods of the protocol are `matches`, `tl_config`, `load_hf`,
    `backbone_state_dict`, `reward_head`, `pool_index`, `extra_modules`,
    `fold_options`, `reference_rewards` and `describe`. (Prompt formatting lives in
    `reward_lens_tl.inputs` and uses the tokenizer's own chat template.)

    Examples:
        The adapter of the zoo's Llama reward model, and the defaults it inherits:

        >>> import torch
        >>> from reward_lens_tl.adapters import ConversionOptions, adapter_for
        >>> from reward_lens_tl.zoo import load_model
        >>> hf = load_model("scalar")
        >>> adapter = adapter_for(hf.config)
        >>> adapter.describe()
        'LlamaAdapter: LlamaForSequenceClassification'
        >>> cfg = adapter.tl_config(hf.config, ConversionOptions())
        >>> cfg.n_layers, cfg.d_model, cfg.d_vocab_out
        (3, 64, 1)
        >>> ids = torch.tensor([[1, 4, 27, 6, 5, 43, 6, 2], [1, 4, 27, 6, 5, 38, 0, 0]])
        >>> adapter.pool_index(ids, hf.config.pad_token_id).tolist()
        [7, 5]
        >>> adapter.reference_rewards(hf, ids, (ids != 0).long()).shape
        torch.Size([2])

        A new family subclasses it and overrides what differs (see `register_adapter`).
    """

    #: HF `architectures[0]` names this adapter accepts (used by `matches` and error text).
    architectures: tuple[str, ...] = ()
    #: Whether the head is a single scalar (`num_labels` must then be 1).
    scalar_head: bool = True
    #: Name of the `HookedRewardModel` subclass key to build (see `model.py`).
    model_kind: str = "scalar"
    #: Whether `from_pretrained` checks parity against HF on random tokens by default.
    verify_by_default: bool = False

    # -- identification -------------------------------------------------------------------
    def matches(self, hf_config: Any) -> bool:
        """Whether the config's first architecture is one of `architectures`.

        Args:
            hf_config: the HF model config.

        Returns:
            Whether this adapter converts the model.
        """
        archs = getattr(hf_config, "architectures", None) or []
        return bool(archs) and archs[0] in self.architectures

    def describe(self) -> str:
        """The adapter's name and the architectures it accepts."""
        return f"{type(self).__name__}: {', '.join(self.architectures)}"

    # -- loading --------------------------------------------------------------------------
    def model_class(self, hf_config: Any) -> type[nn.Module]:
        """The transformers class named by the config's first architecture.

        Args:
            hf_config: the HF model config.

        Returns:
            The class (e.g. `transformers.LlamaForSequenceClassification`).
        """
        import transformers

        return getattr(transformers, hf_config.architectures[0])

    def load_hf(self, path: Path, hf_config: Any) -> nn.Module:
        """Load the HF model from a local directory.

        Safetensors only, never remote code, and missing or unexpected tensors refused (see
        `reward_lens_tl.checkpoint`).

        Args:
            path: the checkpoint directory.
            hf_config: its HF config.

        Returns:
            The HF model.
        """
        from ..checkpoint import load_weights

        return load_weights(self.model_class(hf_config), path, hf_config)

    # -- conversion -----------------------------------------------------------------------
    def tl_config(
        self, hf_config: Any, options: ConversionOptions, n_objectives: int = 1
    ) -> HookedTransformerConfig:  # pragma: no cover - abstract
        """The TransformerLens config of the backbone with an `n_objectives`-output head.

        Args:
            hf_config: the HF model config.
            options: the load-time options (dtype, device, context length).
            n_objectives: the number of head outputs (`d_vocab_out` of the config).

        Returns:
            The `HookedTransformerConfig`.
        """
        raise NotImplementedError

    def backbone_state_dict(
        self, hf_model: nn.Module, cfg: HookedTransformerConfig
    ) -> dict[str, Tensor]:  # pragma: no cover - abstract
        """The backbone's weights as a TransformerLens state dict.

        Args:
            hf_model: the HF model.
            cfg: the TransformerLens config (`tl_config`).

        Returns:
            The state dict.
        """
        raise NotImplementedError

    def head_module(self, hf_model: nn.Module) -> nn.Linear:
        """The HF model's linear reward head (`score`).

        Args:
            hf_model: the HF model.

        Returns:
            The head module.

        Raises:
            RewardHeadError: the module has no 2-D weight.
        """
        return linear_head(hf_model, "score")

    def reward_head(self, hf_model: nn.Module, options: ConversionOptions) -> RewardHead:
        """`score.weight.T` and its bias (zeros when absent), with objective names.

        Args:
            hf_model: the HF model.
            options: the load-time options (`objective_names`).

        Returns:
            The `RewardHead`.

        Raises:
            RewardHeadError: if a scalar head has several outputs and no objective names, or
                the number of names does not match the outputs.
        """
        head = self.head_module(hf_model)
        n_out = head.weight.shape[0]
        given = options.get("objective_names")
        names = tuple(given) if given else None
        if self.scalar_head and n_out != 1 and names is None:
            raise RewardHeadError(
                f"{type(hf_model).__name__} has num_labels={n_out}, but a scalar reward head has "
                "exactly one output. If each output is a separate reward objective, pass "
                f"objective_names=[...] ({n_out} names) to from_pretrained to load it as a "
                "multi-objective head; if it is a classifier, it is not a reward model."
            )
        if names is not None and len(names) != n_out:
            raise RewardHeadError(f"objective_names has {len(names)} names for {n_out} outputs")
        if names is None:
            names = ("reward",) if n_out == 1 else tuple(f"objective_{i}" for i in range(n_out))
        W = head.weight.detach().T.clone()
        b = head.bias.detach().clone() if head.bias is not None else torch.zeros(n_out)
        return RewardHead(W=W, b=b, objective_names=names)

    def extra_modules(
        self, hf_model: nn.Module, cfg: HookedTransformerConfig, fold_ln: bool
    ) -> dict[str, Any]:
        """Modules beyond backbone and head (e.g. ArmoRM's gating); none by default.

        Args:
            hf_model: the HF model.
            cfg: the TransformerLens config.
            fold_ln: whether the final norm's weight is folded into the head.

        Returns:
            The modules, by name.
        """
        return {}

    def fold_options(self, requested: dict[str, bool]) -> dict[str, bool]:
        """The folding flags to use.

        `center_unembed` is always off: with one output column it would zero the head, and for
        several objectives it would change each one.

        Args:
            requested: the folding flags the user asked for (`fold_ln`, `center_writing_weights`,
                ...).

        Returns:
            The flags to use.
        """
        return {**requested, "center_unembed": False}

    # -- reading rewards ------------------------------------------------------------------
    def pool_index(
        self,
        input_ids: Int[Tensor, "batch pos"],
        pad_token_id: int | None,
        attention_mask: Tensor | None = None,
    ) -> Int[Tensor, " batch"]:
        """The reward-reading position of each row (HF's pooling rule, `hf_last_non_pad`).

        HF's rule reads ids only (the rightmost token that is not the pad id), so it reads the
        same token in every padding layout; `attention_mask` is for rules that need it.

        Args:
            input_ids: the token ids (`[batch, pos]`).
            pad_token_id: the padding id, or `None`.
            attention_mask: `[batch, pos]`, nonzero at real tokens (unused by HF's rule).

        Returns:
            One position per row.
        """
        return hf_last_non_pad(input_ids, pad_token_id)

    @torch.no_grad()
    def reference_rewards(
        self, hf_model: nn.Module, input_ids: Tensor, attention_mask: Tensor | None = None
    ) -> Tensor:
        """The HF model's own pooled output (`[batch]` scalar or `[batch, n]`).

        Args:
            hf_model: the HF model.
            input_ids: the token ids (`[batch, pos]`).
            attention_mask: the attention mask (`None`: every position attends).

        Returns:
            The rewards.
        """
        logits = hf_model(input_ids=input_ids, attention_mask=attention_mask).logits
        return logits[:, 0] if logits.shape[-1] == 1 else logits


def linear_head(hf_model: nn.Module, name: str) -> nn.Linear:
    """The HF model's linear head `name` (`score` for sequence classifiers).

    It is a module with a 2-D `weight` (and a `bias` or `None`), as `nn.Linear` has.

    Args:
        hf_model: The HF model.
        name: The head's attribute name.

    Returns:
        The head module.

    Raises:
        RewardHeadError: if the module has no 2-D weight.

    Examples:
        >>> from reward_lens_tl.zoo import load_model
        >>> tuple(linear_head(load_model("scalar"), "score").weight.shape)
        (1, 64)
    """
    head = getattr(hf_model, name)
    weight = getattr(head, "weight", None)
    if not isinstance(weight, Tensor) or weight.ndim != 2:
        raise RewardHeadError(
            f"{type(hf_model).__name__}.{name} is a {type(head).__name__} without a 2-D weight, "
            "not the linear reward head this adapter converts"
        )
    return cast(nn.Linear, head)


def pad_token_id_of(hf_config: Any) -> int | None:
    """The config's pad token id (the first one when it lists several), or `None`.

    Args:
        hf_config: The HF config.

    Returns:
        The pad id, or `None`.

    Examples:
        >>> from types import SimpleNamespace
        >>> pad_token_id_of(SimpleNamespace(pad_token_id=[2, 3])), pad_token_id_of(object())
        (2, None)
    """
    pad = getattr(hf_config, "pad_token_id", None)
    if isinstance(pad, (list, tuple)):
        pad = pad[0] if pad else None
    return pad
