"""How a judge's verdict or a PRM's step score becomes a reward head the converter understands.

Internal (no public names): used by `reward_lens_tl.judges.hooked_judges` to load judges and PRMs.

A generative judge is a causal LM; its verdict `logit(Yes) − logit(No)` at the reading position
is `normed · (W_U[:, yes] − W_U[:, no]) + (b[yes] − b[no])`: a linear reward head on the final
normalised residual. `HeadAdapter` hands the package's converter exactly that head (rows
of the LM head combined by a small matrix), and otherwise converts the backbone with the
family's own reward-model adapter, so judges and PRMs load like reward models: from a directory
or hub id read as untrusted input, one layer at a time, checked against HF at load.

The heads it builds are `head_spec.HeadSpec`'s (shared with the TransformerLens 4 backend,
`reward_lens_tl.bridge.BridgeJudge`).

Examples:
    >>> import torch
    >>> spec = HeadSpec("lm_head", ids=(5, 7), combine=torch.tensor([[1.0, -1.0]]),
    ...                 names=("verdict",))
    >>> spec.n_out
    1
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import Tensor, nn

from ..adapters import ConversionOptions, RewardHead, RewardModelAdapter, adapter_for
from ..adapters.base import hf_last_non_pad
from ..adapters.causal import BackboneView, reward_view
from ..errors import RewardHeadError
from .head_spec import HeadSpec, classifier_layers, head_module, hidden_names

__all__: list[str] = []


def model_config(hf_model: nn.Module) -> Any:
    """The HF model's config, with `architectures` filled in from its class when unset.

    Args:
        hf_model: The HF model.

    Returns:
        The config (a copy when `architectures` was filled in).
    """
    config: Any = hf_model.config
    if getattr(config, "architectures", None):
        return config
    config = copy.copy(config)
    config.architectures = [type(hf_model).__name__]
    return config


class HeadAdapter(RewardModelAdapter):
    """The family adapter of a causal LM or token classifier, with the head of `spec`.

    Args:
        spec: The head to read.
        model_kind: The kind of model loaded (`"judge"` or `"prm"`).
    """

    verify_by_default = True  # a judge's or PRM's head is checked against HF unless verify=False

    def __init__(self, spec: HeadSpec, model_kind: str) -> None:
        """Keep the head spec and the model kind."""
        self.spec = spec
        self.model_kind = model_kind

    def describe(self) -> str:
        """A short description of the adapter.

        Returns:
            The description.
        """
        return f"HeadAdapter({self.spec.source}, {self.spec.names})"

    def model_class(self, hf_config: Any) -> type[nn.Module]:
        """The HF model class to build for a config (a PRM layout where one is registered).

        Args:
            hf_config: The HF config.

        Returns:
            The model class.
        """
        from .prm_module import LAYOUTS

        reward_view(hf_config)  # refuses unsupported architectures by name
        arch = hf_config.architectures[0]
        return LAYOUTS[arch] if arch in LAYOUTS else super().model_class(hf_config)

    def tl_config(self, hf_config: Any, options: ConversionOptions, n_objectives: int = 1):
        """The TL config of the backbone, from the family's reward-model adapter.

        Args:
            hf_config: The HF config.
            options: The conversion options.
            n_objectives: The number of head outputs.

        Returns:
            The TL config.
        """
        view = reward_view(hf_config)
        return adapter_for(view).tl_config(view, options, n_objectives)

    def fold_options(self, requested: dict[str, bool]) -> dict[str, bool]:
        """The fold options requested, with the unembed never centred.

        Args:
            requested: The fold options requested.

        Returns:
            The fold options used.
        """
        return {**requested, "center_unembed": False}

    def head_module(self, hf_model: nn.Module) -> nn.Linear:
        """The linear module the converters read as the LM head (`head_spec.head_module`).

        Args:
            hf_model: The HF model.

        Returns:
            The head's linear module.
        """
        return head_module(hf_model, self.spec)

    def backbone_state_dict(self, hf_model, cfg):
        """The backbone's state dict, converted by the family's reward-model adapter.

        Args:
            hf_model: The HF model.
            cfg: The TL config.

        Returns:
            The converted state dict.
        """
        view_config = reward_view(model_config(hf_model))
        stand_in = BackboneView(hf_model, self.head_module(hf_model), view_config)
        return adapter_for(view_config).backbone_state_dict(stand_in, cfg)

    def reward_head(self, hf_model: nn.Module, options: ConversionOptions) -> RewardHead:
        """The reward head built from the spec's rows of the HF head.

        Args:
            hf_model: The HF model.
            options: The conversion options.

        Returns:
            The reward head.

        Raises:
            RewardHeadError: When the head's number of outputs is not the spec's.
        """
        head = self.head_module(hf_model)
        weight = head.weight
        bias = head.bias if getattr(head, "bias", None) is not None else None
        if self.spec.source == "lm_head":
            W = self.spec.rows(weight).T.clone()  # [d_model, n_out]
            b = self.spec.rows(bias) if bias is not None else None
        else:
            W = weight.detach().T.clone()
            b = bias.detach().clone() if bias is not None else None
        if W.shape[1] != self.spec.n_out and self.spec.source != "classifier":
            raise RewardHeadError(
                f"the {self.spec.source} head has {W.shape[1]} outputs; expected "
                f"{self.spec.n_out} ({self.spec.names})"
            )
        if b is None:
            b = torch.zeros(W.shape[1], device=W.device, dtype=W.dtype)
        names = self.spec.names if self.spec.source != "classifier" else hidden_names(W.shape[1])
        return RewardHead(W=W, b=b, objective_names=names)

    def extra_modules(self, hf_model: nn.Module, cfg, fold_ln: bool) -> dict[str, Any]:
        """Modules kept beside the hooked model: a classifier head's last linear layer.

        Args:
            hf_model: The HF model.
            cfg: The TL config.
            fold_ln: Whether layer norms are folded.

        Returns:
            The extra modules by name (empty for other heads).
        """
        if self.spec.source != "classifier":
            return {}
        last = classifier_layers(hf_model)[-1]
        out = nn.Linear(last.in_features, last.out_features, bias=last.bias is not None)
        out.load_state_dict({k: v.detach().float() for k, v in last.state_dict().items()})
        return {"head_out": out}

    def pool_index(self, input_ids, pad_token_id, attention_mask=None):
        """The last real token; without a pad id the rows are unpadded: the last one.

        Args:
            input_ids: The token ids, `[batch, pos]`.
            pad_token_id: The pad token id, or `None`.
            attention_mask: Unused (the rule reads ids only).

        Returns:
            The index read in each row, `[batch]`.
        """
        if pad_token_id is None:
            return torch.full(
                (input_ids.shape[0],),
                input_ids.shape[1] - 1,
                dtype=torch.long,
                device=input_ids.device,
            )
        return hf_last_non_pad(input_ids, pad_token_id)

    @torch.no_grad()
    def reference_rewards(self, hf_model, input_ids, attention_mask=None) -> Tensor:
        """The head's outputs computed by HF's own modules at HF's reading position.

        `[batch, n_out]` (pre-softcap logits for Gemma-2; the classifier's two logits).

        Args:
            hf_model: The HF model.
            input_ids: The token ids, `[batch, pos]`.
            attention_mask: The attention mask.

        Returns:
            The head outputs, `[batch, n_out]`.
        """
        base = getattr(hf_model, hf_model.base_model_prefix)
        hidden = base(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        pos = self.pool_index(input_ids, getattr(hf_model.config, "pad_token_id", None))
        h = hidden[torch.arange(hidden.shape[0]), pos.to(hidden.device)]
        head = self.reward_head(hf_model, ConversionOptions())  # the classifier's first layer
        return h @ head.W.to(h) + head.b.to(h)
