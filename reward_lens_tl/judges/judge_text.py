"""How a generative judge reads an item: its template rendered and tokenized (either backend).

Internal (no public names): `JudgeText` is a mixin of `reward_lens_tl.judges.HookedJudge`
(TransformerLens 3.9) and `reward_lens_tl.bridge.BridgeJudge` (TransformerLens 4). It uses only
the backend protocol (`rewards`, `objective_rewards`, `cfg`, the tokenizer), so a judge renders,
tokenizes and scores an item the same way on both.

Examples:
    >>> from reward_lens_tl.judges import HookedJudge
    >>> from reward_lens_tl.testing import tiny_causal_lm
    >>> hf, tok = tiny_causal_lm("llama")
    >>> judge = HookedJudge.from_pretrained(hf, tokenizer=tok, verdict=("w10", "w11"),
    ...                                     template="{prompt} w8 {response} w9")
    >>> isinstance(judge, JudgeText), judge.render("w12", "w20")
    (True, 'w12 w8 w20 w9')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from jaxtyping import Float, Int
from torch import Tensor

from ..errors import ArgumentTypeError, EmptyInputError, InvalidArgumentError
from ..inputs import EncodedConversation, Prompt, Truncation
from .templates import render
from .verdict_score import VerdictScore, as_list, refuse_text_options, token_span

__all__: list[str] = []


class JudgeText(VerdictScore):
    """A judge's text side: render, tokenize, encode and score items (a mixin; module docstring).

    Attributes:
        kind: `"pointwise"`, `"pairwise"` or `"likert"`.
        template: The template an item is rendered with.
        verdict: The verdict tokens (strings or ids), the positive side first.
        verdict_ids: The verdict tokens' ids.
        chat: Whether the rendered text is put in a user turn of the chat template.
    """

    if TYPE_CHECKING:  # provided by the backend's reward-model class
        tokenizer: Any
        rewards: Any
        objective_rewards: Any

    kind: str = "pointwise"
    template: str = ""
    verdict: tuple[str | int, ...] = ()
    verdict_ids: tuple[int, ...] = ()
    chat: bool = False

    # -- text ------------------------------------------------------------------------------
    def render(self, prompt: str, response: str, response_b: str | None = None) -> str:
        """The judge's input text for one item (pairwise: `response` is answer A).

        Args:
            prompt: The prompt.
            response: The response (pairwise: answer A).
            response_b: Answer B of a pairwise judge (`None` otherwise).

        Returns:
            The rendered template.

        Raises:
            InvalidArgumentError: When `response_b` is missing for a pairwise judge or given for
                another kind.
        """
        if self.kind == "pairwise":
            if response_b is None:
                raise InvalidArgumentError(
                    "a pairwise judge scores (prompt, response_a, response_b)"
                )
            return render(
                self.template, "pairwise", prompt=prompt, response_a=response, response_b=response_b
            )
        if response_b is not None:
            raise InvalidArgumentError(
                f"a {self.kind} judge scores (prompt, response), not two responses"
            )
        return render(self.template, self.kind, prompt=prompt, response=response)

    def full_text(self, text: str) -> str:
        """What the tokenizer reads for a rendered template.

        The text itself, or with `chat=True` a user turn of the tokenizer's chat template with the
        generation prompt.

        Args:
            text: The rendered template.

        Returns:
            The text the tokenizer reads.
        """
        if not self.chat:
            return text
        return self._require_tokenizer().apply_chat_template(
            [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
        )

    def token_ids_of(self, text: str) -> list[int]:
        """The ids the judge scores for a rendered template.

        Special tokens are added as the tokenizer adds them, unless a chat template wrote them.

        Args:
            text: The rendered template.

        Returns:
            The token ids.
        """
        return self.tokenize(self.full_text(text), not self.chat)[0]

    def item_ids(
        self,
        prompt: str | Sequence[str],
        response: str | Sequence[str],
        response_b: str | Sequence[str] | None = None,
    ) -> Int[Tensor, "batch pos"]:
        """The ids the judge scores, `[batch, pos]` left-padded.

        One row for one item; lists of equal length for a batch. Pairwise:
        `item_ids(prompt, response_a, response_b)`. One item with the span of its response
        marked: `encode`.

        Args:
            prompt: A prompt or a list of prompts.
            response: A response or a list of responses (pairwise: answer A).
            response_b: Answer B of a pairwise judge, or a list of them.

        Returns:
            The left-padded ids, `[batch, pos]`.

        Raises:
            InvalidArgumentError: When the lists differ in length.
        """
        prompts, _ = as_list(prompt, "prompt")
        responses, _ = as_list(response, "response")
        seconds = as_list(response_b, "response_b")[0] if response_b is not None else None
        if len(responses) != len(prompts) or (seconds is not None and len(seconds) != len(prompts)):
            raise InvalidArgumentError("prompt and response lists must have the same length")
        rows = [
            self.token_ids_of(self.render(p, r, None if seconds is None else seconds[i]))
            for i, (p, r) in enumerate(zip(prompts, responses, strict=True))
        ]
        ids, _ = self.pad_rows(rows)
        return ids.to(self.cfg.device)

    def encode(
        self,
        prompt: Prompt,
        response: str,
        *,
        max_length: int | None = None,
        truncation: Truncation = "error",
        use_chat_template: bool | None = None,
    ) -> EncodedConversation:
        """One item as an `EncodedConversation`, with the span of `response` marked.

        The rendered template's ids with the span of `response` inside it (found from the
        tokenizer's character offsets), so the package's pair analyses, probes, sweeps and token
        views edit the response inside the template. Pointwise and Likert judges only (a pairwise
        judge has two responses: `item_ids`, `position_bias`).

        Args:
            prompt: The prompt (a string).
            response: The response.
            max_length: Refused: a judge's template is never cut (a text longer than the context
                raises `SequenceTooLongError`).
            truncation: Accepted for the reward-model signature; a judge's template is never cut.
            use_chat_template: Refused: whether the judge reads a chat template is its `chat`.

        Returns:
            The encoded conversation.

        Raises:
            InvalidArgumentError: For a pairwise judge, or when `max_length` or
                `use_chat_template` is given.
            ArgumentTypeError: When the prompt or response is not a string.
        """
        if self.kind == "pairwise":
            raise InvalidArgumentError(
                "a pairwise judge reads two responses; encode marks one response's span, so it "
                "serves pointwise and Likert judges (pairwise: judge.item_ids(prompt, a, b), "
                "position_bias)"
            )
        refuse_text_options("a judge's", max_length, use_chat_template)
        if not isinstance(response, str) or not isinstance(prompt, str):
            raise ArgumentTypeError("a judge encodes a prompt and a response given as strings")
        marker = "\u0000"
        while marker in prompt or marker in response or marker in self.template:
            marker += "\u0000"
        text = self.full_text(self.render(prompt, response))
        ids, offsets = self.tokenize(text, not self.chat, offsets=True)
        marked = self.full_text(render(self.template, self.kind, prompt=prompt, response=marker))
        start_char = marked.index(marker)
        start, end = token_span(offsets, start_char, start_char + len(response))
        return EncodedConversation(ids=tuple(ids), response_start=start, response_end=end)

    def score(
        self,
        prompt: Prompt | Sequence[str],
        response: str | Sequence[str],
        response_b: str | Sequence[str] | None = None,
        *,
        max_length: int | None = None,
        truncation: Truncation = "error",
        use_chat_template: bool | None = None,
    ) -> Tensor:
        """The judge's reward for one item (a 0-d tensor) or a batch (`[batch]`).

        Args:
            prompt: A prompt or a list of prompts.
            response: A response or a list of responses (pairwise: answer A).
            response_b: Answer B of a pairwise judge, or a list of them.
            max_length: Refused, as by `encode`.
            truncation: Accepted for the reward-model signature; a judge's template is never cut.
            use_chat_template: Refused, as by `encode`.

        Returns:
            The reward: a 0-d tensor for one item, `[batch]` for a batch.
        """
        refuse_text_options("a judge's", max_length, use_chat_template)
        ids = self.item_ids(cast(Any, prompt), response, response_b)
        out = self.rewards(ids)
        return out[0] if isinstance(prompt, str) else out

    def to_tokens(  # a judge reads text: its rendered template
        self, input, prepend_bos=None, padding_side=None, move_to_device=True, truncate=True
    ) -> Int[Tensor, "batch pos"]:
        """TL's `to_tokens`: a judge scores text, so text is tokenized as the judge reads it.

        A string (or list of strings: rendered templates, e.g. `judge.render(prompt, response)`) is
        tokenized as the judge reads it; `(prompt, response)` (pairwise `(prompt, a, b)`) tuples are
        rendered first. Left padded; never truncated (a text that does not fit raises).

        Args:
            input: A string, a tuple to render, or a list of those.
            prepend_bos: Accepted for TL's signature (the tokenizer adds its special tokens).
            padding_side: Which side to pad (default left).
            move_to_device: Whether to move the ids to the model's device.
            truncate: Accepted for TL's signature (never truncated).

        Returns:
            The ids, `[batch, pos]`.

        Raises:
            EmptyInputError: When the input is empty.
        """
        texts = [input] if isinstance(input, (str, tuple)) else list(input)
        if not texts:
            raise EmptyInputError("to_tokens got no input")
        rows = [self.token_ids_of(t if isinstance(t, str) else self.render(*t)) for t in texts]
        side = padding_side or getattr(self.tokenizer, "padding_side", None) or "left"
        ids, _ = self.pad_rows(rows, side)
        return ids.to(self.cfg.device) if move_to_device else ids

    def verdict_logits(
        self, input_ids: Int[Tensor, "batch pos"], attention_mask: Tensor | None = None
    ) -> Float[Tensor, "batch n_verdict"]:
        """The verdict tokens' logits as HF's causal LM gives them (soft-capped for Gemma-2).

        For a one-column difference head, only their difference exists here: use `rewards`.

        Args:
            input_ids: The token ids, `[batch, pos]`.
            attention_mask: The attention mask.

        Returns:
            The verdict logits, `[batch, n_verdict]`.

        Raises:
            InvalidArgumentError: For a one-column difference head.
        """
        if self.head_mode == "linear":
            raise InvalidArgumentError(
                "this judge keeps only the verdict difference (one linear column); its "
                "rewards() are logit(verdict[0]) - logit(verdict[1])"
            )
        return self.cap(self.objective_rewards(input_ids, attention_mask))
