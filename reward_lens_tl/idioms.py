"""TransformerLens idioms on a reward model: right answers or typed errors, never wrong numbers.

A TL notebook calls ``model.to_tokens(text)``, ``model.generate(...)``, ``loss_fn``,
``tokens_to_residual_directions("word")`` and ``utils.test_prompt``. On a reward model these
either mean something else or nothing. :class:`RewardModelIdioms` (mixed into
:class:`~reward_lens_tl.model.HookedRewardModel`) gives each the reward-model meaning or a
:class:`~reward_lens_tl.errors.NotForRewardModelsError` that says what to use instead:

- ``to_tokens((prompt, response))`` / ``to_tokens([(p, r), ...])``: the conversation's ids
  with the chat template (BOS, headers, EOS), right padded; a bare string is refused;
- ``generate``, ``loss_fn``: refused (a reward model has no next-token distribution);
- ``tokens_to_residual_directions(i)``: the reward head's column ``i`` (objective ``i``; ``0`` for
  a scalar head); a string is refused.

>>> from reward_lens_tl import HookedRewardModel
>>> from reward_lens_tl.zoo import zoo_path
>>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
>>> model.to_tokens(("explain how to bake bread", "the oven")).shape
torch.Size([1, 12])
"""

from __future__ import annotations

from collections.abc import Sequence

from jaxtyping import Float, Int
from torch import Tensor

from .errors import NotForRewardModelsError
from .indices import check_index

_TEXT = (
    "a reward model scores a conversation, not a text: use model.to_tokens((prompt, response)), "
    "model.encode(prompt, response) (an EncodedConversation with the chat template, BOS and EOS) "
    "or model.score(prompt, response)"
)


class RewardModelIdioms:
    """TL's tokenisation and LM utilities, answered the reward-model way."""

    def to_tokens(
        self, input, prepend_bos=None, padding_side=None, move_to_device=True, truncate=True
    ) -> Int[Tensor, "batch pos"]:
        """Ids of ``(prompt, response)`` (or a list of them) through the chat template, right
        padded with the pad id (``attention_mask``: ``ids != pad`` or :func:`pad_batch`).

        ``truncate=True`` drops the end of a response that does not fit the context
        (``truncation="right"``: end-of-turn and EOS stay); ``False`` raises instead. A bare
        string or list of strings is refused: without the template, the reward changes."""
        from .inputs import pad_batch

        if isinstance(input, str) or (
            isinstance(input, list) and input and all(isinstance(x, str) for x in input)
        ):
            raise NotForRewardModelsError(f"to_tokens got text. {_TEXT}")
        if padding_side not in (None, "right"):
            raise NotForRewardModelsError(
                "reward batches are right padded (HF's pooling reads the last non-pad token); "
                "pass padding_side=None or 'right'"
            )
        pairs = [input] if _is_pair(input) else list(input)
        if not pairs or not all(_is_pair(p) for p in pairs):
            raise NotForRewardModelsError(f"to_tokens expects (prompt, response) pairs. {_TEXT}")
        mode = "right" if truncate else "error"
        encoded = [self.encode(p, r, truncation=mode) for p, r in pairs]
        ids, _ = pad_batch(encoded, self.pad_token_id)
        return ids.to(self.cfg.device) if move_to_device else ids

    def generate(self, *args, **kwargs):
        """Refused: a reward model has no next-token distribution to sample from."""
        raise NotForRewardModelsError(
            "generate() needs a language-model head; a reward model's unembed is its reward head "
            "(generation would append pad id 0 forever). Generate with the policy model, then "
            "score the text with model.score(prompt, response)"
        )

    def loss_fn(self, *args, **kwargs):
        """Refused: there is no language-model loss on a reward head."""
        raise NotForRewardModelsError(
            "a reward model has no language-model loss; for a preference loss use the margins of "
            "reward_lens_tl.scoring.score_pairs (Bradley-Terry: -logsigmoid(margin))"
        )

    def tokens_to_residual_directions(self, tokens) -> Float[Tensor, "... d_model"]:
        """The reward head's direction for objective index ``tokens`` (``0`` for a scalar
        head): ``W_R[:, i]``. Vocabulary tokens (strings) have no direction here."""
        if isinstance(tokens, str):
            raise NotForRewardModelsError(
                f"{tokens!r} is text; a reward model has no vocabulary unembed. The direction "
                "read by the reward is model.W_R[:, objective] (model.w_r for a scalar head): "
                "pass an objective index, e.g. tokens_to_residual_directions(0)"
            )
        n = self.cfg.d_vocab_out
        if isinstance(tokens, Tensor) and tokens.numel() > 1:
            idx = tokens.long()
            if bool(((idx < 0) | (idx >= n)).any()):
                raise NotForRewardModelsError(
                    f"objective indices {tokens.unique().tolist()} outside [0, {n}): these look "
                    "like vocabulary ids; a reward head has one column per objective"
                )
            return self.W_U[:, idx].movedim(0, -1)
        index = int(tokens.item()) if isinstance(tokens, Tensor) else tokens
        return self.W_U[:, check_index(index, n, "objective index")]

    def to_single_token(self, string: str) -> int:
        """Refused: vocabulary tokens have no reward-head column (used by TL's ``logit_attrs``
        and ``test_prompt``)."""
        raise NotForRewardModelsError(
            f"to_single_token({string!r}): a reward model's outputs are objectives, not "
            "vocabulary tokens; pass an objective index (0 for a scalar head)"
        )


def _is_pair(x) -> bool:
    return (
        isinstance(x, (tuple, list))
        and len(x) == 2
        and isinstance(x[1], str)
        and (isinstance(x[0], str) or isinstance(x[0], Sequence))
    )


__all__ = ["RewardModelIdioms"]
