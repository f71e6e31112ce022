"""Known PRM checkpoint layouts whose HF class ships as remote code, implemented here.

Internal (no public names): used by `reward_lens_tl.judges` to load PRM checkpoints.

Implemented here so their weights load without running any checkpoint code.

`Qwen2ForProcessRewardModel` (Qwen2.5-Math-PRM): the Qwen2 decoder (`model.*`) and
`score = Sequential(Linear(d, d), ReLU, Linear(d, num_labels))` (`score.0.*`,
`score.2.*`); the step score is the softmax probability of label 1 at each `<extra_0>`.
The checkpoint's `auto_map` names its own modeling file; reward-lens-tl never imports it.

Examples:
    >>> from transformers import Qwen2Config
    >>> cfg = Qwen2Config(vocab_size=11, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
    ...                   num_attention_heads=2, num_key_value_heads=1, num_labels=2)
    >>> model = Qwen2ForProcessRewardModel(cfg)
    >>> sorted(k for k in model.state_dict() if k.startswith("score"))
    ['score.0.bias', 'score.0.weight', 'score.2.bias', 'score.2.weight']
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn
from transformers import Qwen2Model, Qwen2PreTrainedModel
from transformers.modeling_outputs import TokenClassifierOutput

__all__: list[str] = []


class Qwen2ForProcessRewardModel(Qwen2PreTrainedModel):
    """Qwen2.5-Math-PRM's layout: per-token two-label logits from a ReLU MLP head.

    Args:
        config: The Qwen2 config (with `num_labels`).
    """

    def __init__(self, config: Any) -> None:
        """Build the decoder and the score head."""
        super().__init__(config)
        d = config.hidden_size
        self.model = Qwen2Model(config)
        self.score = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, config.num_labels))
        self.post_init()

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, **kwargs: Any
    ) -> TokenClassifierOutput:
        """Per-token label logits.

        Args:
            input_ids: The token ids, `[batch, pos]`.
            attention_mask: The attention mask.
            **kwargs: Ignored.

        Returns:
            The output, with `logits` `[batch, pos, num_labels]`.
        """
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return TokenClassifierOutput(logits=self.score(hidden))


#: Architecture names of `LAYOUTS` → our class.
LAYOUTS: dict[str, type[torch.nn.Module]] = {
    "Qwen2ForProcessRewardModel": Qwen2ForProcessRewardModel,
}
