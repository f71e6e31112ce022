"""The score of a judge's or PRM's head outputs, and the text helpers both backends share.

Internal (no public names): a mixin of `reward_lens_tl.judges.HookedJudge`/`HookedPRM`
(TransformerLens 3.9) and of `reward_lens_tl.bridge.BridgeJudge`/`BridgePRM` (TransformerLens 4).
It imports no TransformerLens, so the analyses of `reward_lens_tl.judges` run on either backend.

What is linear (the exact analyses' target) for each head mode, and the published score:

| `head_mode` | head outputs (linear) | the score (`score_from`) |
| --- | --- | --- |
| `"linear"` | one column: the score itself | `l[..., 0]` |
| `"capped_pair"` | the two logits (Gemma-2) | `cap(l)[0] − cap(l)[1]` |
| `"likert"` | each grade's logit | `Σ_k grade_k · softmax(cap(l))_k` |
| `"classifier"` | the classifier head's hidden units | `head_out(relu(l))[1] − [0]` |

Examples:
    >>> import torch
    >>> head = VerdictScore()
    >>> head.head_mode, head.softcap = "capped_pair", 2.0
    >>> round(float(head.score_from(torch.tensor([1.0, -1.0]))), 4)  # 2·tanh(1/2)·2
    1.8485
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from ..errors import (
    ArgumentTypeError,
    EmptyInputError,
    InvalidArgumentError,
    MissingPadTokenError,
    SequenceTooLongError,
)
from ..padding import left_pad

__all__: list[str] = []


class VerdictScore:
    """The score computed from the pooled head outputs, and the text helpers judges and PRMs share.

    A mixin of `HookedJudge`/`HookedPRM` and of `reward_lens_tl.bridge.BridgeJudge`/`BridgePRM`:
    it uses only the backend protocol (`cfg`, `tokenizer`, `pad_token_id`).
    """

    if TYPE_CHECKING:  # provided by the backend's reward-model class
        cfg: Any
        head_out: nn.Linear  # a classifier PRM's last layer

        def _require_tokenizer(self) -> Any: ...

    #: `"linear"` (one column, the score itself), `"capped_pair"`, `"likert"`,
    #: `"classifier"`; set at load.
    head_mode: str = "linear"
    softcap: float | None = None
    grades: Tensor | None = None

    @property
    def scored_head(self) -> bool:
        """Whether the head's score is not its single linear column."""
        return self.head_mode != "linear"

    def linear_advice(self) -> str:
        """What is linear in this head, for the error of an exact read-out of its score."""
        names = getattr(self, "objective_names", ())
        what = {
            "capped_pair": "the soft-capped verdict difference",
            "likert": "the expected grade",
            "classifier": "the classifier head's margin (Linear, ReLU, Linear)",
        }.get(self.head_mode, "this score")
        return (
            f"{what} is not linear in the residual stream; exact read-outs (lens, attribution) "
            f"take one head output: objective=<one of {tuple(names)[:6]}>, or "
            "reward_lens_tl.judges.linearised_attribution(model, ids) for the score itself "
            "(exact parts of its first-order term, and the remainder)"
        )

    def pad_rows(
        self, rows: list[list[int]], padding_side: str = "left"
    ) -> tuple[Int[Tensor, "batch pos"], Int[Tensor, "batch pos"]]:
        """Pad id rows (left: after each row's first token); without a pad id, one length only.

        Args:
            rows: The token id rows.
            padding_side: Which side to pad (`"left"` by default).

        Returns:
            `(input_ids, attention_mask)`, both `[batch, pos]`.

        Raises:
            MissingPadTokenError: When rows differ in length and the tokenizer has no pad token.
        """
        pad = getattr(self, "pad_token_id", None)
        if pad is None:
            if len({len(r) for r in rows}) > 1:
                raise MissingPadTokenError(
                    "this tokenizer has no pad token, so texts of different lengths cannot be "
                    "batched: set tokenizer.pad_token (e.g. = tokenizer.eos_token) and pass "
                    "tokenizer= to from_pretrained, or score one item at a time"
                )
            pad = 0  # nothing is padded
        return left_pad(rows, pad, cast(Any, padding_side))

    def tokenize(
        self, text: str, add_special_tokens: bool = True, offsets: bool = False
    ) -> tuple[list[int], list[tuple[int, int]]]:
        """The ids and character offsets of the text the model reads.

        Refused when empty or longer than the context.

        Args:
            text: The text to tokenize.
            add_special_tokens: Whether the tokenizer adds its special tokens.
            offsets: Whether to return the character offsets (they need a fast tokenizer).

        Returns:
            `(ids, character offsets)`; the offsets are empty unless asked for.

        Raises:
            EmptyInputError: When the text tokenizes to no tokens.
            SequenceTooLongError: When the text is longer than the model's context.
        """
        enc = self._require_tokenizer()(
            text, add_special_tokens=add_special_tokens, return_offsets_mapping=offsets
        )
        ids = list(enc["input_ids"])
        if not ids:
            raise EmptyInputError("the rendered text tokenized to no tokens")
        if len(ids) > self.cfg.n_ctx:
            raise SequenceTooLongError(
                f"the rendered text is {len(ids)} tokens; this model's context is "
                f"{self.cfg.n_ctx}: shorten the prompt or response"
            )
        return ids, [tuple(o) for o in enc["offset_mapping"]] if offsets else []

    def cap(self, logits: Tensor) -> Tensor:
        """The logits soft-capped as the model caps them (unchanged without a cap).

        Args:
            logits: The logits to cap.

        Returns:
            The capped logits.
        """
        return logits if not self.softcap else self.softcap * torch.tanh(logits / self.softcap)

    def score_from(self, pooled: Float[Tensor, "... n_out"]) -> Float[Tensor, "..."]:
        """The reward from the head outputs (any leading shape).

        Args:
            pooled: The head outputs, `[..., n_out]`.

        Returns:
            The reward, `[...]`.

        Raises:
            InvalidArgumentError: When the head mode is unknown.
        """
        mode = self.head_mode
        if mode == "linear":
            return pooled[..., 0]
        if mode == "capped_pair":
            capped = self.cap(pooled)
            return capped[..., 0] - capped[..., 1]
        if mode == "likert":
            assert self.grades is not None
            probs = torch.softmax(self.cap(pooled).float(), dim=-1)
            return (probs * self.grades.to(probs.device)).sum(-1).to(pooled.dtype)
        if mode == "classifier":
            head_out = self.head_out  # the classifier's last layer
            logits = head_out(torch.relu(pooled).to(head_out.weight.dtype))
            return (logits[..., 1] - logits[..., 0]).to(pooled.dtype)
        raise InvalidArgumentError(f"unknown head mode {mode!r}")


def as_list(value: Any, name: str) -> tuple[list[Any], bool]:
    """`(value as a list, whether it was one string)`.

    Args:
        value: A string or a non-empty list of strings.
        name: The argument's name (for the error).

    Returns:
        The list, and whether `value` was a single string.

    Raises:
        ArgumentTypeError: Anything else.
    """
    if isinstance(value, str):
        return [value], True
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value) and value:
        return list(value), False
    raise ArgumentTypeError(
        f"{name} must be a string or a non-empty list of strings, got {value!r}"
    )


def refuse_text_options(whose: str, max_length: Any, use_chat_template: Any) -> None:
    """Refuse the reward-model encoding options a judge's or PRM's template sets itself.

    Args:
        whose: Whose encoding (for the error).
        max_length: The `max_length` given.
        use_chat_template: The `use_chat_template` given.

    Raises:
        InvalidArgumentError: Either was given.
    """
    given = [n for n, v in (("max_length", max_length), ("use_chat_template", use_chat_template))
             if v is not None]  # fmt: skip
    if given:
        raise InvalidArgumentError(
            f"unknown options {given} for {whose} encoding: its template sets the text (chat= at "
            "load) and is never cut"
        )


def token_span(offsets: list[tuple[int, int]], start: int, end: int) -> tuple[int, int]:
    """Tokens `[first, last)` covering characters `[start, end)`.

    From the tokens' character `offsets`: the first token ending after `start` and the first
    token starting at or after `end`.

    Args:
        offsets: Each token's character span (`(0, 0)` for special tokens).
        start: The first character.
        end: One past the last character.

    Returns:
        `(first, last)` token indices.
    """
    n = len(offsets)
    real = [(i, a, b) for i, (a, b) in enumerate(offsets) if b > a]  # special tokens are (0, 0)
    first = next((i for i, _, b in real if b > start), n)
    last = next((i for i, a, _ in real if a >= end and i >= first), n)
    return first, last
