"""A local, remote-code-free module with the ArmoRM reward-model layout.

The public ArmoRM checkpoint (`LlamaForRewardModelWithGating`) ships its modelling code as
remote code, which this library never executes. This module re-implements the same computation
with the same state-dict names so that (a) checkpoints in that layout load without
`trust_remote_code` and (b) conversion parity can be tested against a reference.

Layout (names as in the checkpoint):

- `model`: a `LlamaModel` backbone;
- `regression_layer`: `Linear(d_model, n_objectives, bias=False)`, read at the last real token
  (the token before the first pad);
- `gating`: an MLP (`gating.layers.{i}`, ReLU between layers) over the final hidden state at
  the start of the last `gating_token_pattern` occurrence (the end of the prompt), followed by
  `softmax(x / temperature) * logit_scale`;
- `reward_transform_matrix`: `[n_objectives, n_objectives]`;
- `score = sum(gate * (objectives @ reward_transform_matrix), -1)`.

Examples:
    >>> import torch
    >>> cfg = armorm_config(vocab_size=40, hidden_size=16, intermediate_size=32,
    ...                     num_hidden_layers=1, num_attention_heads=2, num_objectives=3,
    ...                     gating_hidden_dim=8, gating_token_pattern=[5, 6], pad_token_id=0)
    >>> model = LlamaForRewardModelWithGating(cfg).eval()
    >>> out = model(torch.tensor([[1, 7, 5, 6, 9, 0]]))
    >>> tuple(out.rewards.shape), tuple(out.score.shape)
    ((1, 3), (1,))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import LlamaConfig, LlamaModel, LlamaPreTrainedModel
from transformers.utils import ModelOutput

from .errors import InvalidArgumentError, MissingPadTokenError

__all__ = [
    "LlamaForRewardModelWithGating",
]

ARMORM_ARCHITECTURE = "LlamaForRewardModelWithGating"
#: `<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n` in the Llama-3 tokenizer.
LLAMA3_GATING_PATTERN = (128009, 128006, 78191, 128007, 271)


def armorm_config(
    *,
    num_objectives: int = 19,
    gating_hidden_dim: int = 1024,
    gating_n_hidden: int = 3,
    gating_temperature: float = 10.0,
    gating_token_pattern: Sequence[int] = LLAMA3_GATING_PATTERN,
    objective_names: Sequence[str] | None = None,
    **llama_kwargs,
) -> LlamaConfig:
    """A `LlamaConfig` carrying the extra ArmoRM fields (as its `config.json` does)."""
    cfg = LlamaConfig(**llama_kwargs)
    cfg.architectures = [ARMORM_ARCHITECTURE]
    cfg.num_objectives = num_objectives
    cfg.gating_hidden_dim = gating_hidden_dim
    cfg.gating_n_hidden = gating_n_hidden
    cfg.gating_temperature = gating_temperature
    cfg.gating_token_pattern = list(gating_token_pattern)
    if objective_names is not None:
        cfg.objective_names = list(objective_names)
    return cfg


class GatingNetwork(nn.Module):
    """ReLU MLP → `softmax(x / temperature) * logit_scale` over objectives."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        *,
        hidden_dim: int,
        n_hidden: int,
        temperature: float,
        logit_scale: float = 1.0,
        bias: bool = True,
    ):
        """Build the gating MLP.

        Args:
            in_features: Width of the input (the prompt embedding).
            out_features: Number of objectives.
            hidden_dim: Width of each hidden layer.
            n_hidden: Number of hidden layers.
            temperature: Softmax temperature.
            logit_scale: Factor applied to the softmax output.
            bias: Whether the linear layers have biases.
        """
        super().__init__()
        widths = [in_features] + [hidden_dim] * n_hidden + [out_features]
        self.layers = nn.ModuleList(
            nn.Linear(a, b, bias=bias) for a, b in zip(widths[:-1], widths[1:], strict=True)
        )
        self.temperature = temperature
        self.logit_scale = nn.Parameter(torch.full((1,), float(logit_scale)))

    def logits(self, x: Tensor) -> Tensor:
        """Pre-softmax gating logits of `x`.

        Args:
            x: Input features.

        Returns:
            The logits over objectives.
        """
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = F.relu(x)
        return x

    def forward(self, x: Tensor) -> Tensor:
        """Gating weights of `x`: `softmax(logits / temperature) * logit_scale`.

        Args:
            x: Input features.

        Returns:
            The gating weights over objectives.
        """
        return F.softmax(self.logits(x) / self.temperature, dim=-1) * self.logit_scale[0]


def gating_positions(input_ids: Tensor, pattern: Sequence[int]) -> Tensor:
    """Start index of the last occurrence of `pattern` in each row (`ValueError` if absent)."""
    k = len(pattern)
    pat = torch.tensor(list(pattern), device=input_ids.device)
    windows = input_ids.unfold(-1, k, 1)  # [batch, n_windows, k]
    hits = (windows == pat).all(-1)  # [batch, n_windows]
    if not bool(hits.any(-1).all()):
        missing = (~hits.any(-1)).nonzero().flatten().tolist()
        raise InvalidArgumentError(
            f"gating token pattern {list(pattern)} not found in batch rows {missing}; ArmoRM-style "
            "models need the prompt to end with the chat template's assistant header"
        )
    idx = torch.arange(hits.shape[-1], device=input_ids.device)
    return (hits.long() * (idx + 1)).argmax(-1)


def first_pad_minus_one(input_ids: Tensor, pad_token_id: int) -> Tensor:
    """ArmoRM's pooling: the token before the first pad (the last token when there is none)."""
    first_pad = (input_ids == pad_token_id).int().argmax(-1)
    return (first_pad - 1) % input_ids.shape[-1]


def read_positions(input_ids: Tensor, pad_token_id: int, attention_mask: Tensor | None) -> Tensor:
    """ArmoRM's rule on each row's real tokens (HF's own, `first_pad_minus_one`, without a mask).

    With `attention_mask`, a padded row is read where the row alone is: the pads the mask hides
    (this package's layout puts them after each row's first token) are not "the first pad".
    Both backends read ArmoRM-style models here (`adapters.armorm`, `bridge.gated`).
    """
    if attention_mask is None:
        return first_pad_minus_one(input_ids, pad_token_id)
    real = attention_mask.to(input_ids.device) != 0
    cols = torch.arange(input_ids.shape[1], device=input_ids.device)[None]
    pad_real = (input_ids == pad_token_id) & real
    first = torch.where(pad_real, cols, input_ids.shape[1]).min(1, keepdim=True).values
    before = torch.where(real & (cols < first), cols, -1).max(1).values
    last = torch.where(real, cols, -1).max(1).values
    return torch.where(pad_real.any(1) & (before >= 0), before, last)


@dataclass
class ArmoRMOutput(ModelOutput):
    """Outputs of `LlamaForRewardModelWithGating`: rewards, gate, score and prompt embedding."""

    rewards: Tensor | None = None
    gating_output: Tensor | None = None
    score: Tensor | None = None
    prompt_embedding: Tensor | None = None


class LlamaForRewardModelWithGating(LlamaPreTrainedModel):
    """Local re-implementation of the ArmoRM layout (see the module docstring).

    Args:
        config: Llama config with the ArmoRM fields (`num_objectives`, gating sizes).

    Examples:
        The zoo's `multi` model has this layout (three objectives):

        >>> from reward_lens_tl.zoo import load_tokenizer, zoo_path
        >>> hf = LlamaForRewardModelWithGating.from_pretrained(zoo_path("multi"))
        >>> tok = load_tokenizer("multi")
        >>> text = tok.apply_chat_template(
        ...     [{"role": "user", "content": "how bake bread"},
        ...      {"role": "assistant", "content": "oven flour"}], tokenize=False)
        >>> out = hf(tok(text, return_tensors="pt", add_special_tokens=False).input_ids)
        >>> tuple(out.rewards.shape), round(out.score.detach()[0].item(), 3)
        ((1, 3), 2.198)
    """

    def __init__(self, config: LlamaConfig):
        """Build the backbone, regression layer, gating network and reward transform.

        Args:
            config: Llama config with the ArmoRM fields (`num_objectives`, gating sizes).
        """
        super().__init__(config)
        self.model = LlamaModel(config)
        n_obj = config.num_objectives
        self.regression_layer = nn.Linear(config.hidden_size, n_obj, bias=False)
        self.gating = GatingNetwork(
            config.hidden_size,
            n_obj,
            hidden_dim=config.gating_hidden_dim,
            n_hidden=config.gating_n_hidden,
            temperature=config.gating_temperature,
        )
        self.reward_transform_matrix = nn.Parameter(torch.eye(n_obj), requires_grad=False)
        self.post_init()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
    ) -> ArmoRMOutput:
        """Like the checkpoint's own forward.

        As in every HF Llama, positions are `arange` unless `position_ids` are given: a left-padded
        batch needs `position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)` to score like each
        row alone.

        Args:
            input_ids: Token ids `[batch, pos]`.
            attention_mask: `1` on real tokens (default: all ones).
            position_ids: Explicit positions (default: `arange`).

        Returns:
            The per-objective rewards, the gating output and the score.
        """
        hidden = self.model(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids
        ).last_hidden_state
        rows = torch.arange(input_ids.shape[0], device=input_ids.device)
        pad_token_id = self.config.pad_token_id
        if pad_token_id is None:
            raise MissingPadTokenError(
                "ArmoRM pools the token before the first pad: its config needs a pad_token_id"
            )
        last = first_pad_minus_one(input_ids, pad_token_id)
        rewards = self.regression_layer(hidden[rows, last])
        gate_pos = gating_positions(input_ids, self.config.gating_token_pattern)
        prompt_embedding = hidden[rows, gate_pos]
        gate = self.gating(prompt_embedding)
        score = (gate * (rewards @ self.reward_transform_matrix)).sum(-1)
        return ArmoRMOutput(
            rewards=rewards, gating_output=gate, score=score, prompt_embedding=prompt_embedding
        )
