"""`HookedJudge` and `HookedPRM`: generative judges and process reward models.

Both are `HookedRewardModel`s whose head is read from the model's own tokens or heads
(`reward_lens_tl.judges.heads`), so every analysis of the package runs on them: the lens,
exact attribution, patching, probes and sweeps see the **linear** verdict margin
`logit(verdict[0]) − logit(verdict[1])` (a judge) or the step's margin (a PRM), and the
published score (a Likert expected grade, a PRM's probability) is computed from it.

What is linear (the exact analyses' target) for each kind:

| kind | the analyses' reward (linear) | the published score |
| --- | --- | --- |
| pointwise / pairwise | `l[v0] − l[v1]` | the same (Gemma-2: soft-capped logits) |
| likert | each grade's logit (objectives) | `Σ_k grade_k · softmax(l)_k` |
| PRM `token` | `l[+] − l[−]` at each tag | `softmax(l[+], l[−])[0]` |
| PRM `value` | `v_head` at each step end | `sigmoid(v)` |
| PRM `classifier` | the head's hidden units, the margin (ReLU frozen) | `softmax(head(h))[1]` |

Gemma-2 caps its output logits (`final_logit_softcapping`); its judges keep the two verdict
logits as objectives and `rewards` applies the cap, so scores equal HF's logits.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Self, Unpack, cast, overload

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from ..errors import (
    ArgumentTypeError,
    EmptyInputError,
    InvalidArgumentError,
    MissingPadTokenError,
    NotForRewardModelsError,
    SequenceTooLongError,
    StepSeparatorError,
)
from ..inputs import EncodedConversation, Prompt, Truncation
from ..loading import HUB_OPTIONS, LoadOptions, positional_tokenizer
from ..model import MODEL_KINDS, HookedRewardModel, load_reward_model
from ..padding import left_pad
from .heads import HeadAdapter, HeadSpec, classifier_layers
from .templates import (
    DEFAULT_VERDICTS,
    PRM_TEMPLATE,
    TEMPLATES,
    check_template,
    grades_of,
    render,
    token_id,
    token_ids,
)

JudgeKind = Literal["pointwise", "pairwise", "likert"]
#: The verdict argument's default: each kind's own verdict tokens (pointwise `("Yes", "No")`).
DEFAULT_VERDICT: tuple[str, ...] = ("Yes", "No")
PRMKind = Literal["token", "value", "classifier"]
#: How each PRM kind writes a step and its tag, by default (Math-Shepherd: `"step ки"`).
STEP_FORMATS: dict[str, str] = {
    "token": "{step} {tag}",
    "value": "{step}{tag}",
    "classifier": "{step}{tag}",
}
STEP_TAGS: dict[str, str] = {"token": "ки", "value": "\n", "classifier": "<extra_0>"}


class _VerdictHead:
    """The score computed from the pooled head outputs (shared by judges and PRMs)."""

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

    def _gated_logits_needed(self, kwargs) -> bool:
        """A non-linear score at every position (`model(ids)[:, -1]` is the reward)."""
        return self.scored_head and kwargs.get("stop_at_layer") is None

    def _gated_per_position(self, resid, tokens):
        model = cast(Any, self)
        normed = model.ln_final(resid) if model.cfg.normalization_type is not None else resid
        return self.score_from(model.unembed(normed))[..., None]

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

    def _final_reward(self, pooled: Tensor, normed: Tensor, tokens: Tensor | None) -> Tensor:
        if self.head_mode == "linear":  # (also while loading, before the mode is set)
            return cast(Any, super())._final_reward(pooled, normed, tokens)
        return self.score_from(pooled)

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
        model = cast(Any, self)
        enc = model._require_tokenizer()(
            text, add_special_tokens=add_special_tokens, return_offsets_mapping=offsets
        )
        ids = list(enc["input_ids"])
        if not ids:
            raise EmptyInputError("the rendered text tokenized to no tokens")
        if len(ids) > model.cfg.n_ctx:
            raise SequenceTooLongError(
                f"the rendered text is {len(ids)} tokens; this model's context is "
                f"{model.cfg.n_ctx}: shorten the prompt or response"
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
            head_out = cast(nn.Linear, cast(nn.Module, self).get_submodule("head_out"))
            logits = head_out(torch.relu(pooled).to(head_out.weight.dtype))
            return (logits[..., 1] - logits[..., 0]).to(pooled.dtype)
        raise InvalidArgumentError(f"unknown head mode {mode!r}")


@dataclass(frozen=True)
class StepEncoding:
    """Token ids of PRM solutions with where each step is read.

    `ids`/`attention_mask` `[batch, pos]` (left padded; `ids` as `EncodedConversation.ids`),
    `step_positions` `[batch, n_steps]` (`-1` past a row's last step), `n_steps` per row.

    Args:
        ids: The token ids, `[batch, pos]`, left padded.
        attention_mask: The attention mask, `[batch, pos]`.
        step_positions: Where each step is read, `[batch, n_steps]` (`-1` past a row's last step).
        n_steps: The number of steps of each row.
        tag_offset: Step tags before each row's first step.

    Examples:
        >>> from reward_lens_tl.judges import HookedPRM
        >>> from reward_lens_tl.zoo import zoo_path
        >>> prm = HookedPRM.from_pretrained(zoo_path("prm"))
        >>> enc = prm.encode_steps(["what is 3 + 4", "what is 5 - 1 + 2"],
        ...                        [["3 + 4 = 7"], ["5 - 1 = 4", "4 + 2 = 6"]])
        >>> enc.ids.shape, enc.n_steps, enc.tag_offset
        (torch.Size([2, 19]), (1, 2), (0, 0))
        >>> enc.step_positions.tolist()  # left padded, so both rows end at position 18
        [[18, -1], [12, 18]]
        >>> [[round(x, 2) for x in row] for row in prm.rewards(enc).tolist()]
        [[0.93, nan], [0.92, 0.95]]
    """

    ids: Int[Tensor, "batch pos"]
    attention_mask: Int[Tensor, "batch pos"]
    step_positions: Int[Tensor, "batch n_steps"]
    n_steps: tuple[int, ...]
    #: Step tags before each row's first step (the prompt or template holds the tag); a step
    #: view of row `b`'s step `k` is `prm.step(tag_offset[b] + k)` (or a negative index).
    tag_offset: tuple[int, ...] = ()


def _as_list(value: Any, name: str) -> tuple[list[Any], bool]:
    if isinstance(value, str):
        return [value], True
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value) and value:
        return list(value), False
    raise ArgumentTypeError(
        f"{name} must be a string or a non-empty list of strings, got {value!r}"
    )


def _resolve(model_or_path: Any, tokenizer: Any, hub: dict[str, Any]) -> tuple[Any, Any, Any]:
    """`(model or local path, tokenizer, hf_config)`.

    Hub ids are fetched or read from the cache as reward models are
    (`reward_lens_tl.hub.resolve_checkpoint`).
    """
    from ..checkpoint import checkpoint_tokenizer, load_config
    from ..hub import resolve_checkpoint

    if isinstance(model_or_path, nn.Module):
        if tokenizer is None:
            raise InvalidArgumentError(
                "an in-memory judge or PRM needs tokenizer= (verdicts are looked up in it)"
            )
        config: Any = copy.deepcopy(model_or_path.config)
        if not getattr(config, "architectures", None):
            config.architectures = [type(model_or_path).__name__]
        return model_or_path, tokenizer, config
    if not isinstance(model_or_path, (str, Path)):
        raise ArgumentTypeError(
            "model_name must be a checkpoint directory, a hub id ('org/name') or an HF model, "
            f"got {type(model_or_path).__name__}"
        )
    path = resolve_checkpoint(model_or_path, **hub)
    config = load_config(path)
    tokenizer = tokenizer if tokenizer is not None else checkpoint_tokenizer(path)
    if tokenizer is None:
        raise InvalidArgumentError(f"{path} has no tokenizer files: pass tokenizer=")
    return path, tokenizer, config


def _load(cls, source, tokenizer, spec: HeadSpec, kind_key: str, load_options: dict[str, Any]):
    model = load_reward_model(
        source, tokenizer, adapter=HeadAdapter(spec, kind_key), **load_options
    )
    if not isinstance(model, cls):
        raise InvalidArgumentError(f"expected a {cls.__name__}, built a {type(model).__name__}")
    return model


def _pair_spec(ids: list[int], names: tuple[str, ...], capped: bool) -> tuple[HeadSpec, str]:
    if capped:
        return HeadSpec("lm_head", names, tuple(ids), torch.eye(2)), "capped_pair"
    diff = torch.tensor([[1.0, -1.0]])
    return HeadSpec("lm_head", (f"{names[0]}-{names[1]}",), tuple(ids), diff), "linear"


def _split_options(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`(hub options, conversion options)`: a judge's or PRM's `**options` (`verify` defaults on).

    The head is the judge's or PRM's own, so `adapter` is refused.
    """
    if "adapter" in options:
        raise InvalidArgumentError(
            "a judge's or PRM's head is read from its verdict, labels or head module: "
            "adapter= is not an option here"
        )
    hub = {k: options[k] for k in HUB_OPTIONS if k in options}
    load = {k: v for k, v in options.items() if k not in HUB_OPTIONS}
    return hub, load


class HookedJudge(_VerdictHead, HookedRewardModel):
    """A generative judge (a causal LM) whose verdict logits are its reward head.

    Load one with `from_pretrained`; the constructor is `HookedRewardModel`'s, and
    `from_pretrained` sets the judge's attributes (`kind`, `template`, `verdict`, ...) after it.

    Args:
        cfg: The TL config (`d_vocab_out` is the number of head outputs: the verdict logits).
        adapter: The family's adapter (default: `LlamaAdapter`).
        pad_token_id: The pad id.
        eos_token_id: The EOS id.
        objective_names: The head outputs' names (the verdict tokens).
        tokenizer: The tokenizer (kept as it is).
        bos_token_id: The BOS id.
        move_to_device: Move the model to `cfg.device` (TL's meaning).
        padding_side: How `to_tokens` pads by default (`HookedRewardModel`'s).

    Attributes:
        kind: `"pointwise"`, `"pairwise"` or `"likert"`.
        template: The template an item is rendered with.
        verdict: The verdict tokens (strings or ids), the positive side first.
        verdict_ids: The verdict tokens' ids.
        chat: Whether the rendered text is put in a user turn of the chat template.

    Examples:
        >>> from reward_lens_tl.testing import tiny_causal_lm
        >>> hf, tok = tiny_causal_lm("llama")
        >>> judge = HookedJudge.from_pretrained(hf, tokenizer=tok, verdict=("w10", "w11"),
        ...                                     template="{prompt} w8 {response} w9")
        >>> judge.item_ids("w12 w13", "w20").tolist(), judge.score("w12 w13", "w20").shape
        ([[1, 12, 13, 8, 20, 9]], torch.Size([]))
    """

    kind: str = "pointwise"
    template: str = ""
    verdict: tuple[str | int, ...] = ()
    verdict_ids: tuple[int, ...] = ()
    chat: bool = False

    @overload
    @classmethod
    def from_pretrained(
        cls,
        model_name: nn.Module | str | Path,
        tokenizer: Any = None,
        *,
        kind: JudgeKind = "pointwise",
        verdict: Sequence[str | int] = DEFAULT_VERDICT,
        template: str | None = None,
        chat: bool = False,
        grades: Sequence[float] | None = None,
        **options: Unpack[LoadOptions],
    ) -> Self: ...

    @overload
    @classmethod
    def from_pretrained(  # TransformerLens's form, refused as `HookedRewardModel`'s
        cls, model_name: nn.Module | str | Path, *args: Any, **options: Any
    ) -> Self: ...

    @classmethod
    def from_pretrained(
        cls,
        model_name: nn.Module | str | Path,
        tokenizer: Any = None,
        *args: Any,
        kind: JudgeKind = "pointwise",
        verdict: Sequence[str | int] = DEFAULT_VERDICT,
        template: str | None = None,
        chat: bool = False,
        grades: Sequence[float] | None = None,
        **options: Any,
    ) -> Self:
        """Load a judge from a directory, hub id or in-memory HF causal LM.

        Llama, Mistral, Qwen2, Gemma-2 and GPT-2 are read, as untrusted input like reward models.
        The verdict is read at the last token of the rendered, tokenized text.

        Args:
            model_name: A checkpoint directory, a hub id (`"org/name"`) or an HF causal LM.
            tokenizer: The tokenizer (required for an in-memory model; default the checkpoint's).
            *args: Nothing: TransformerLens's positional flags are refused (`ArgumentTypeError`).
            kind: `"pointwise"` (reward = `logit(verdict[0]) − logit(verdict[1])`), `"pairwise"`
                (the same with `("A", "B")`; `score(prompt, a, b)`) or `"likert"` (the expected
                grade over `verdict` = `("1", …, "5")`).
            verdict: Token strings (each must be one token) or ids; left at `("Yes", "No")` it means
                the kind's default.
            template: A string with `{prompt}`/`{response}` (pairwise `{response_a}`,
                `{response_b}`); default the built-in of the kind.
            chat: Whether to put the rendered text in a user turn of the tokenizer's chat template
                with the generation prompt.
            grades: A Likert judge's grade per verdict token (default the verdicts as numbers).
            **options: `HookedRewardModel.from_pretrained`'s conversion and hub options (`dtype`,
                `device`, `revision`, ...); `verify` is on by default.

        Returns:
            The loaded judge.

        Raises:
            InvalidArgumentError: When `kind` is unknown or `grades` is given for a kind other than
                `"likert"`.
        """
        if kind not in TEMPLATES:
            raise InvalidArgumentError(f"kind must be one of {tuple(TEMPLATES)}, got {kind!r}")
        tokenizer = positional_tokenizer((tokenizer, *args))
        hub, load_options = _split_options(options)
        source, tok, config = _resolve(model_name, tokenizer, hub)
        template = check_template(TEMPLATES[kind] if template is None else template, kind)
        if verdict is DEFAULT_VERDICT:  # left at the signature's default: the kind's own
            verdict = DEFAULT_VERDICTS[kind]
        if grades is not None and kind != "likert":
            raise InvalidArgumentError("grades= applies to kind='likert' only")
        ids = token_ids(tok, verdict, "verdict", 2 if kind != "likert" else None)
        names = tuple(str(v) for v in verdict)
        softcap = getattr(config, "final_logit_softcapping", None) or None
        if kind == "likert":
            spec, mode = HeadSpec("lm_head", names, tuple(ids), torch.eye(len(ids))), "likert"
        else:
            spec, mode = _pair_spec(ids, names, softcap is not None)
        model = _load(cls, source, tok, spec, "judge", load_options)
        model.kind, model.template, model.chat = kind, template, chat
        model.verdict, model.verdict_ids = tuple(verdict), tuple(ids)
        model.head_mode, model.softcap = mode, float(softcap) if softcap else None
        model.grades = _grades(verdict, grades) if kind == "likert" else None
        return model

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
        prompts, _ = _as_list(prompt, "prompt")
        responses, _ = _as_list(response, "response")
        seconds = _as_list(response_b, "response_b")[0] if response_b is not None else None
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
        _refuse_text_options("a judge's", max_length, use_chat_template)
        if not isinstance(response, str) or not isinstance(prompt, str):
            raise ArgumentTypeError("a judge encodes a prompt and a response given as strings")
        marker = "\u0000"
        while marker in prompt or marker in response or marker in self.template:
            marker += "\u0000"
        text = self.full_text(self.render(prompt, response))
        ids, offsets = self.tokenize(text, not self.chat, offsets=True)
        marked = self.full_text(render(self.template, self.kind, prompt=prompt, response=marker))
        start_char = marked.index(marker)
        start, end = _token_span(offsets, start_char, start_char + len(response))
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
        _refuse_text_options("a judge's", max_length, use_chat_template)
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

    def tokens_to_residual_directions(self, tokens) -> Float[Tensor, "... d_model"]:
        """The head's column for an objective.

        A verdict token of a difference head has no column of its own: the head *is*
        `W_U[:, v0] − W_U[:, v1]` (column 0).

        Args:
            tokens: An objective (index or name).

        Returns:
            The residual direction(s).

        Raises:
            NotForRewardModelsError: For a verdict token's name on a difference head.
        """
        if isinstance(tokens, str) and self.head_mode == "linear":
            raise NotForRewardModelsError(
                f"{tokens!r}: this judge keeps only the verdict direction W_U[:, "
                f"{self.verdict[0]!r}] - W_U[:, {self.verdict[1]!r}] as its head; it is "
                "judge.W_U[:, 0] (tokens_to_residual_directions(0))"
            )
        return super().tokens_to_residual_directions(tokens)

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


class HookedPRM(_VerdictHead, HookedRewardModel):
    """A process reward model: a score at every step of a solution, all from one forward.

    `rewards(ids)` gives the step scores `[batch, n_steps]`; as a reward model (what the
    package's analyses read) its reward is the **last** step's margin, and `prm.step(k)` is
    the same model read at step `k` (`direct_attribution(prm.step(2), ids)`).

    Load one with `from_pretrained`; the constructor is `HookedRewardModel`'s, and
    `from_pretrained` sets the PRM's attributes (`kind`, `step_tag`, `labels`, ...) after it.

    Args:
        cfg: The TL config (`d_vocab_out` is the number of head outputs: the label logits).
        adapter: The family's adapter (default: `LlamaAdapter`).
        pad_token_id: The pad id.
        eos_token_id: The EOS id.
        objective_names: The head outputs' names.
        tokenizer: The tokenizer (kept as it is).
        bos_token_id: The BOS id.
        move_to_device: Move the model to `cfg.device` (TL's meaning).
        padding_side: How `to_tokens` pads by default (`HookedRewardModel`'s).

    Attributes:
        kind: `"token"`, `"value"` or `"classifier"`.
        template: The solution's template, with `{prompt}` and `{steps}`.
        step_format: How each step is written, with `{step}` and `{tag}`.
        step_separator: What joins the formatted steps.
        step_tag: The token that ends each step.
        step_tag_id: The step tag's id.
        labels: The two label tokens of a `"token"` PRM.
        reading_step: Which step the reward-model face reads (`-1`: the last one).
        transform: `"sigmoid"` or `None` (the raw margin).
        chat: Whether solutions are written with the tokenizer's chat template.
        system: The system turn of a chat-template solution.

    Examples:
        >>> from reward_lens_tl.testing import tiny_causal_lm
        >>> hf, tok = tiny_causal_lm("llama")
        >>> prm = HookedPRM.from_pretrained(hf, tokenizer=tok, step_tag="w40",
        ...                                 labels=("w41", "w42"))
        >>> enc = prm.encode_steps("w12 w13", ["w20", "w21 w22"])
        >>> enc.step_positions.tolist(), prm.step_rewards("w12 w13", ["w20", "w21 w22"]).shape
        ([[4, 7]], torch.Size([2]))
    """

    kind: str = "token"
    template: str = PRM_TEMPLATE
    step_format: str = "{step} {tag}"
    step_separator: str = " "
    step_tag: str | int = "ки"
    step_tag_id: int | None = None
    labels: tuple[str | int, ...] = ()
    #: Which step the reward-model face reads (`-1`: the last one).
    reading_step: int = -1
    #: `"sigmoid"` (the default for all kinds; a two-label softmax is a sigmoid of the
    #: margin) or `None` (the raw value-head output).
    transform: str | None = "sigmoid"
    chat: bool = False
    system: str | None = None

    @overload
    @classmethod
    def from_pretrained(
        cls,
        model_name: nn.Module | str | Path,
        tokenizer: Any = None,
        *,
        kind: PRMKind = "token",
        step_tag: str | int | None = None,
        labels: Sequence[str | int] = ("+", "-"),
        template: str = PRM_TEMPLATE,
        chat: bool = False,
        system: str | None = None,
        step_format: str | None = None,
        step_separator: str = " ",
        transform: str | None = "sigmoid",
        **options: Unpack[LoadOptions],
    ) -> Self: ...

    @overload
    @classmethod
    def from_pretrained(  # TransformerLens's form, refused as `HookedRewardModel`'s
        cls, model_name: nn.Module | str | Path, *args: Any, **options: Any
    ) -> Self: ...

    @classmethod
    def from_pretrained(
        cls,
        model_name: nn.Module | str | Path,
        tokenizer: Any = None,
        *args: Any,
        kind: PRMKind = "token",
        step_tag: str | int | None = None,
        labels: Sequence[str | int] = ("+", "-"),
        template: str = PRM_TEMPLATE,
        chat: bool = False,
        system: str | None = None,
        step_format: str | None = None,
        step_separator: str = " ",
        transform: str | None = "sigmoid",
        **options: Any,
    ) -> Self:
        r"""Load a PRM (directory, hub id or in-memory HF model).

        A solution is written as `template` with `{prompt}` and `{steps}`, the steps each formatted
        by `step_format` and joined by `step_separator`.

        Args:
            model_name: A checkpoint directory, a hub id (`"org/name"`) or an HF model.
            tokenizer: The tokenizer (required for an in-memory model; default the checkpoint's).
            *args: Nothing: TransformerLens's positional flags are refused (`ArgumentTypeError`).
            kind: `"token"` (a causal LM; the step score is the softmax probability of `labels[0]`
                over the two label logits at the step tag, Math-Shepherd's), `"value"` (a
                `*ForTokenClassification` with one label: the value head at each step end, through
                `transform`, default `sigmoid`) or `"classifier"` (`score = Sequential(Linear, ReLU,
                Linear)` with two labels, Qwen2.5-Math-PRM's: the probability of label 1).
            step_tag: The token that ends each step (default `"ки"`, `"\n"`, `"<extra_0>"` by kind).
            labels: The two label tokens of a `"token"` PRM.
            template: The solution's template, with `{prompt}` and `{steps}`.
            chat: Whether to write the solution with the tokenizer's chat template instead (a
                `system` turn when given, the user's `prompt`, the steps as the assistant's
                turn), as Qwen2.5-Math-PRM is used.
            system: The system turn of a chat-template solution.
            step_format: How each step is written, with `{step}` and `{tag}` (default by kind).
            step_separator: What joins the formatted steps.
            transform: `"sigmoid"` or `None` (the raw margin).
            **options: `HookedRewardModel.from_pretrained`'s conversion and hub options (`dtype`,
                `device`, `revision`, ...); `verify` is on by default.

        Returns:
            The loaded PRM.

        Raises:
            InvalidArgumentError: When `kind` or `transform` is unknown, or `chat=True` comes with
                another template.
        """
        if kind not in STEP_TAGS:
            raise InvalidArgumentError(f"kind must be one of {tuple(STEP_TAGS)}, got {kind!r}")
        tokenizer = positional_tokenizer((tokenizer, *args))
        hub, load_options = _split_options(options)
        source, tok, config = _resolve(model_name, tokenizer, hub)
        template = check_template(template, "prm")
        step_format = step_format if step_format is not None else STEP_FORMATS[kind]
        _check_step_format(step_format)
        tag = STEP_TAGS[kind] if step_tag is None else step_tag
        tag_id = token_id(tok, tag, "step_tag")
        if chat and template != PRM_TEMPLATE:
            raise InvalidArgumentError(
                "chat=True writes the solution with the chat template; leave template as it is"
            )
        if transform not in ("sigmoid", None):
            raise InvalidArgumentError(
                f"transform must be 'sigmoid' (a two-label softmax is a sigmoid of the margin) "
                f"or None (the raw margin), got {transform!r}"
            )
        softcap = getattr(config, "final_logit_softcapping", None) or None
        if kind == "token":
            ids = token_ids(tok, labels, "labels", 2)
            spec, mode = _pair_spec(ids, tuple(str(v) for v in labels), softcap is not None)
        elif kind == "value":
            spec, mode = HeadSpec("score", ("value",)), "linear"
        else:
            spec, mode = HeadSpec("classifier", ("margin",)), "classifier"
        model = _load(cls, source, tok, spec, "prm", load_options)
        model.kind, model.template, model.step_format = kind, template, step_format
        model.step_separator, model.step_tag, model.step_tag_id = step_separator, tag, tag_id
        model.labels, model.transform = tuple(labels), transform
        model.chat, model.system = chat, system
        model.head_mode, model.softcap = mode, float(softcap) if softcap else None
        return model

    def attach_extras(self, extras: dict[str, Any]) -> None:
        """Attach the extra modules loaded with the model (a classifier head's output layer).

        Args:
            extras: The extra modules by name.
        """
        head_out = extras.get("head_out")
        if head_out is not None:
            self.head_out = head_out.to(self.cfg.device)

    # -- where steps are read ----------------------------------------------------------------
    def step_positions(
        self, input_ids: Int[Tensor, "batch pos"], attention_mask: Tensor | None = None
    ) -> Int[Tensor, "batch n_steps"]:
        """Positions of the step tags in each row, `-1` past a row's last step.

        A row without a tag is refused.

        Args:
            input_ids: The token ids, `[batch, pos]`.
            attention_mask: The attention mask.

        Returns:
            The step positions, `[batch, n_steps]`.

        Raises:
            InvalidArgumentError: When the PRM has no step tag id.
            StepSeparatorError: When a row holds no step tag.
        """
        tokens = self.check_tokens(input_ids, attention_mask)
        if self.step_tag_id is None:
            raise InvalidArgumentError("this PRM has no step tag id (load it with from_pretrained)")
        is_tag = tokens == self.step_tag_id
        if attention_mask is not None:
            is_tag &= attention_mask.to(tokens.device).bool()
        counts = is_tag.sum(1)
        if bool((counts == 0).any()):
            rows = (counts == 0).nonzero().flatten().tolist()
            raise StepSeparatorError(
                f"rows {rows} hold no step tag {self.step_tag!r} (id {self.step_tag_id}); every "
                "step must end with it (prm.encode_steps writes it)"
            )
        n = int(counts.max())
        out = torch.full((tokens.shape[0], n), -1, dtype=torch.long, device=tokens.device)
        for row in range(tokens.shape[0]):
            found = is_tag[row].nonzero().flatten()
            out[row, : found.numel()] = found
        return out

    def pool_positions(self, tokens, attention_mask=None, positions=None):
        """The positions the reward is read at: the step tags of the step this view reads.

        Args:
            tokens: The token ids, `[batch, pos]`.
            attention_mask: The attention mask.
            positions: Explicit positions (default the read step's tags).

        Returns:
            The positions read, one per row.

        Raises:
            StepSeparatorError: When the read step does not exist in a row.
        """
        if positions is None and self.step_tag_id is not None:
            steps = self.step_positions(tokens, attention_mask)
            counts = (steps >= 0).sum(1)
            k = self.reading_step
            idx = counts + k if k < 0 else torch.full_like(counts, k)
            bad = (idx < 0) | (idx >= counts)
            if bool(bad.any()):
                raise StepSeparatorError(
                    f"step {k} does not exist in rows {bad.nonzero().flatten().tolist()} (they "
                    f"hold {counts[bad].tolist()} step tags)"
                )
            positions = steps[torch.arange(steps.shape[0], device=steps.device), idx]
        return super().pool_positions(tokens, attention_mask, positions)

    def check_reading_position(self, tokens, attention_mask=None) -> None:
        """Warn when a step view is read before the last step.

        `[:, -1]` is the last step's tag, not this step's, so TL idioms on the last position warn
        with what to read instead.

        Args:
            tokens: The token ids, `[batch, pos]`.
            attention_mask: The attention mask.
        """
        from ..padding import ReadingPositionWarning, _user_stacklevel, warnings_silenced

        last = self.reading_step < 0
        if last or self.step_tag_id is None or warnings_silenced():
            return super().check_reading_position(tokens, attention_mask)
        warnings.warn(
            f"this PRM is read at step {self.reading_step}, not at position -1 (the last step's "
            "tag): read cache.reward_positions, pos_slice='reward', prm.step_positions(ids)"
            f"[:, {self.reading_step}] or prm.step_margins(ids)",
            ReadingPositionWarning,
            stacklevel=_user_stacklevel(),
        )

    def step(self, k: int) -> HookedPRM:
        """This PRM read at step `k` (negative `k` counts from the last: `-1` is the last step).

        The same modules and hooks, only the reading position differs, so any analysis of the
        package runs on one step. Steps are counted over the row's step tags: when the prompt holds
        the tag too, add `StepEncoding.tag_offset` (or count from the end).

        Args:
            k: The step to read.

        Returns:
            A view of this PRM read at step `k`.

        Raises:
            ArgumentTypeError: When `k` is not an int.
        """
        if not isinstance(k, int) or isinstance(k, bool):
            raise ArgumentTypeError(f"step must be an int, got {k!r}")
        view = copy.copy(self)
        view.reading_step = k
        return view

    def step_margins(
        self,
        input_ids: Int[Tensor, "batch pos"],
        attention_mask: Tensor | None = None,
        step_positions: Tensor | None = None,
    ) -> Float[Tensor, "batch n_steps"]:
        """Each step's margin (the analyses' reward, before `transform`), from one forward.

        `nan` past a row's last step.

        Args:
            input_ids: The token ids, `[batch, pos]`.
            attention_mask: The attention mask.
            step_positions: Where each step is read (default the step tags).

        Returns:
            The margins, `[batch, n_steps]`.
        """
        steps = (
            self.step_positions(input_ids, attention_mask)
            if step_positions is None
            else step_positions
        )
        from ..padding import reading_position_known

        with torch.no_grad(), reading_position_known():  # each step is read at its own tag
            per_pos = self(input_ids, "objectives", attention_mask=attention_mask)
            rows = torch.arange(steps.shape[0], device=steps.device)[:, None]
            pooled = per_pos[rows, steps.clamp(min=0)]  # [batch, n_steps, n_out]
            margins = self.score_from(pooled).float()
        return margins.masked_fill(steps < 0, float("nan"))

    def rewards(
        self,
        input_ids: Int[Tensor, "batch pos"] | StepEncoding,
        attention_mask: Int[Tensor, "batch pos"] | None = None,
        *,
        pool_positions: Int[Tensor, " batch"] | None = None,
        grad: bool = False,
        step_positions: Int[Tensor, "batch n_steps"] | None = None,
    ) -> Float[Tensor, "batch n_steps"]:
        """Step scores `[batch, n_steps]` at the step tags (or `step_positions`), from one forward.

        `nan` past a row's last step. The reward every analysis reads (one step's):
        `pooled_rewards`.

        Args:
            input_ids: The token ids, or a `StepEncoding` (its mask and step positions are used).
            attention_mask: The attention mask.
            pool_positions: Read row `b` at `pool_positions[b]` only (one step per row: the
                scores are `[batch, 1]`).
            grad: Refused: PRM step scores are computed without gradients.
            step_positions: Where each step is read (default the step tags).

        Returns:
            The step scores, `[batch, n_steps]`.

        Raises:
            InvalidArgumentError: When `grad=True`, or both `pool_positions` and `step_positions`
                are given.
        """
        if isinstance(input_ids, StepEncoding):
            enc = input_ids
            input_ids, attention_mask = enc.ids, enc.attention_mask
            step_positions = enc.step_positions if step_positions is None else step_positions
        if grad:
            raise InvalidArgumentError(
                "PRM step scores are computed without gradients; use step(k)"
            )
        if pool_positions is not None:
            if step_positions is not None:
                raise InvalidArgumentError("pass pool_positions or step_positions, not both")
            step_positions = pool_positions[:, None]
        return self.transformed(self.step_margins(input_ids, attention_mask, step_positions))

    def transformed(self, margins: Tensor) -> Tensor:
        """Step scores from step margins (`transform`).

        Args:
            margins: The step margins.

        Returns:
            The step scores.
        """
        return torch.sigmoid(margins) if self.transform == "sigmoid" else margins

    # -- text ------------------------------------------------------------------------------
    def steps_text(self, steps: Sequence[str]) -> str:
        """The steps as the PRM reads them.

        Each is formatted by `step_format` with its tag, joined by `step_separator` (a step that
        holds the tag is refused).

        Args:
            steps: The steps.

        Returns:
            The steps' text.

        Raises:
            StepSeparatorError: When `steps` is not a non-empty list or a step holds the tag.
            ArgumentTypeError: When a step is not a string.
            EmptyInputError: When a step is empty or whitespace only.
        """
        if isinstance(steps, str) or not isinstance(steps, Sequence) or not steps:
            raise StepSeparatorError("steps must be a non-empty list of strings (one per step)")
        tag_text = self._tag_text()
        for i, step in enumerate(steps):
            if not isinstance(step, str):
                raise ArgumentTypeError(f"steps[{i}] must be a string, got {type(step).__name__}")
            if not step.strip():
                raise EmptyInputError(
                    f"steps[{i}] is empty{' (whitespace only)' if step else ''}: its tag would "
                    "be scored on the previous steps' text alone. Drop the empty step or merge "
                    "it into its neighbour"
                )
            if tag_text and tag_text.strip() and tag_text in step:
                raise StepSeparatorError(f"steps[{i}] contains the step tag {tag_text!r}: {step!r}")
        return self.step_separator.join(
            self.step_format.format(step=s, tag=tag_text) for s in steps
        )

    def render_steps(self, prompt: str, steps: Sequence[str]) -> str:
        """The PRM's input text: `template` with `{prompt}` and `steps_text`.

        With `chat=True`: the tokenizer's chat template, the steps as the assistant's turn.

        Args:
            prompt: The prompt.
            steps: The steps.

        Returns:
            The rendered solution.
        """
        body = self.steps_text(steps)
        if not self.chat:
            return render(self.template, "prm", prompt=prompt, steps=body)
        system = [{"role": "system", "content": self.system}] if self.system is not None else []
        turns = [{"role": "user", "content": prompt}, {"role": "assistant", "content": body}]
        return self._require_tokenizer().apply_chat_template(system + turns, tokenize=False)

    def token_ids_of(self, text: str) -> list[int]:
        """The ids of a rendered solution (special tokens added unless a chat template wrote them).

        Args:
            text: The rendered solution.

        Returns:
            The token ids.
        """
        return self.tokenize(text, not self.chat)[0]

    def encode_steps(
        self, prompt: str | Sequence[str], steps: Sequence[str] | Sequence[Sequence[str]]
    ) -> StepEncoding:
        """Ids of one solution or a batch, with `.step_positions`.

        `steps` is a list of strings for one solution, or lists of those for a batch. Refused when
        the tags do not give one position per step.

        Args:
            prompt: A prompt or a list of prompts.
            steps: One solution's steps, or a list of solutions.

        Returns:
            The encoded solutions.

        Raises:
            InvalidArgumentError: When the numbers of prompts and solutions differ.
            StepSeparatorError: When the tokenizer merges a step tag with its neighbours.
        """
        prompts, single = _as_list(prompt, "prompt")
        solutions = cast(list[Sequence[str]], [steps] if single else list(steps))
        if len(solutions) != len(prompts):
            raise InvalidArgumentError(f"{len(prompts)} prompts for {len(solutions)} solutions")
        rows = [
            self.token_ids_of(self.render_steps(p, s))
            for p, s in zip(prompts, solutions, strict=True)
        ]
        ids, mask = self.pad_rows(rows)
        ids, mask = ids.to(self.cfg.device), mask.to(self.cfg.device)
        tags = self.step_positions(ids, mask)
        counts = (tags >= 0).sum(1).tolist()
        n_steps = [len(sol) for sol in solutions]
        for i, (n, want) in enumerate(zip(counts, n_steps, strict=True)):
            if n < want:
                raise StepSeparatorError(
                    f"solution {i} has {want} steps but its text holds {n} step tags "
                    f"{self.step_tag!r}: the tokenizer merges the tag with its neighbours; "
                    "change step_format (e.g. a space before the tag)"
                )
        # the steps' tags are each row's last ones (the prompt may hold the tag as well)
        positions = torch.full((len(rows), max(n_steps)), -1, dtype=torch.long, device=ids.device)
        for i, (n, want) in enumerate(zip(counts, n_steps, strict=True)):
            positions[i, :want] = tags[i, n - want : n]
        offsets = tuple(int(n - want) for n, want in zip(counts, n_steps, strict=True))
        return StepEncoding(ids, mask, positions, tuple(n_steps), offsets)

    def encode(
        self,
        prompt: Prompt,
        response: str,
        *,
        max_length: int | None = None,
        truncation: Truncation = "error",
        use_chat_template: bool | None = None,
    ) -> EncodedConversation:
        """`(prompt, response)` as a solution, with the response's span marked.

        So pair scoring, probes, sweeps and token views run on a PRM as on a reward model (read at
        the last step's tag). A response written with step tags is those steps (`split_steps`);
        otherwise it is one step. Several steps as a list: `encode_steps`.

        Args:
            prompt: The prompt (a string).
            response: The response.
            max_length: Refused: a solution is never cut.
            truncation: Accepted for the reward-model signature.
            use_chat_template: Refused: whether the PRM writes a chat template is its `chat`.

        Returns:
            The encoded conversation.

        Raises:
            InvalidArgumentError: When `max_length` or `use_chat_template` is given.
            ArgumentTypeError: When the prompt or response is not a string.
        """
        _refuse_text_options("a PRM's", max_length, use_chat_template)
        if not isinstance(response, str) or not isinstance(prompt, str):
            raise ArgumentTypeError("a PRM encodes a prompt and a response given as strings")
        steps = self.split_steps(response)
        text = self.render_steps(prompt, steps)
        body = self.steps_text(steps)
        head, _, _ = self.step_format.partition("{step}")
        tail = self.step_format.partition("{step}")[2].format(tag=self._tag_text())
        start = text.rindex(body) + len(head.format(tag=self._tag_text()))
        end = text.rindex(body) + len(body) - len(tail)  # the last tag stays outside
        ids, offsets = self.tokenize(text, not self.chat, offsets=True)
        first, last = _token_span(offsets, start, end)
        return EncodedConversation(ids=tuple(ids), response_start=first, response_end=last)

    def score(
        self,
        prompt: Prompt,
        response: str,
        *,
        max_length: int | None = None,
        truncation: Truncation = "error",
        use_chat_template: bool | None = None,
    ) -> Tensor:
        """The score of `response`'s last step (`split_steps`) as a solution to `prompt`.

        A 0-d tensor; every step's: `step_rewards`.

        Args:
            prompt: The prompt (a string).
            response: The response, with its step tags.
            max_length: Refused, as by `encode`.
            truncation: Accepted for the reward-model signature.
            use_chat_template: Refused, as by `encode`.

        Returns:
            The last step's score (a 0-d tensor).
        """
        _refuse_text_options("a PRM's", max_length, use_chat_template)
        return self.step_rewards(cast(str, prompt), self.split_steps(response))[-1]

    def split_steps(self, response: str) -> list[str]:
        """The steps of a solution written as text with its step tags (one step when it has none).

        `"3 + 4 = 7 ки 7 + 2 = 9 ки"` → `["3 + 4 = 7", "7 + 2 = 9"]`.

        Args:
            response: The solution's text.

        Returns:
            The steps.
        """
        tag = self._tag_text()
        if not tag.strip() or tag not in response:
            return [response]
        steps = [part.strip() for part in response.split(tag)]
        return [s for s in steps if s] or [response]

    def _tag_text(self) -> str:
        if isinstance(self.step_tag, str):
            return self.step_tag
        return self._require_tokenizer().decode([self.step_tag])

    def body_start(self, prompt: str, steps: Sequence[str]) -> int:
        """Index of the first token of the steps in the ids of one solution.

        The tokens before it are the prompt's and the template's; found from the tokenizer's
        character offsets.

        Args:
            prompt: The prompt.
            steps: The steps.

        Returns:
            The index of the steps' first token.
        """
        text = self.render_steps(prompt, steps)
        _, offsets = self.tokenize(text, not self.chat, offsets=True)
        return _token_span(offsets, text.rindex(self.steps_text(steps)), len(text))[0]

    def score_solutions(
        self,
        prompts: Sequence[str],
        solutions: Sequence[Sequence[str]],
        batch_size: int = 16,
    ) -> list[list[float]]:
        """Every step's score of many solutions (`batch_size` per forward), one list per solution.

        What ProcessBench and RewardMATH score files hold
        (`reward_lens_tl.evals.processbench_from_scores`).

        Args:
            prompts: The prompts.
            solutions: The solutions, each a list of steps.
            batch_size: Solutions per forward.

        Returns:
            One list of step scores per solution.

        Raises:
            InvalidArgumentError: When `batch_size` is not a positive int or the numbers of prompts
                and solutions differ.
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidArgumentError(f"batch_size must be a positive int, got {batch_size!r}")
        prompts, solutions = list(prompts), list(solutions)
        if len(prompts) != len(solutions):
            raise InvalidArgumentError(f"{len(prompts)} prompts for {len(solutions)} solutions")
        out: list[list[float]] = []
        for start in range(0, len(prompts), batch_size):
            chunk = slice(start, start + batch_size)
            enc = self.encode_steps(prompts[chunk], [list(s) for s in solutions[chunk]])
            scores = self.rewards(enc)
            out += [row[:n].tolist() for row, n in zip(scores.cpu(), enc.n_steps, strict=True)]
        return out

    def step_rewards(self, prompt: str, steps: Sequence[str]) -> Float[Tensor, " n_steps"]:
        """One score per step of one solution, from one forward.

        Args:
            prompt: The prompt.
            steps: The steps.

        Returns:
            The step scores, `[n_steps]`.
        """
        enc = self.encode_steps(prompt, steps)
        return self.rewards(enc)[0]


def _refuse_text_options(whose: str, max_length: Any, use_chat_template: Any) -> None:
    """Refuse the reward-model encoding options a judge's or PRM's template sets itself."""
    given = [n for n, v in (("max_length", max_length), ("use_chat_template", use_chat_template))
             if v is not None]  # fmt: skip
    if given:
        raise InvalidArgumentError(
            f"unknown options {given} for {whose} encoding: its template sets the text (chat= at "
            "load) and is never cut"
        )


def _token_span(offsets: list[tuple[int, int]], start: int, end: int) -> tuple[int, int]:
    """Tokens `[first, last)` covering characters `[start, end)`.

    From the tokens' character `offsets`: the first token ending after `start` and the first
    token starting at or after `end`.
    """
    n = len(offsets)
    real = [(i, a, b) for i, (a, b) in enumerate(offsets) if b > a]  # special tokens are (0, 0)
    first = next((i for i, _, b in real if b > start), n)
    last = next((i for i, a, _ in real if a >= end and i >= first), n)
    return first, last


def _grades(verdict: Sequence[str | int], grades: Sequence[float] | None) -> Tensor:
    """A Likert judge's grade per verdict token.

    `grades` when given, else the verdicts as numbers, else `1..K`.
    """
    if grades is None:
        return torch.tensor(grades_of(verdict))
    if isinstance(grades, str) or not isinstance(grades, Sequence):
        raise ArgumentTypeError(f"grades must be a list of numbers, got {grades!r}")
    if any(isinstance(g, bool) or not isinstance(g, int | float) for g in grades):
        raise ArgumentTypeError(f"grades must be numbers, got {list(grades)!r}")
    values = [float(g) for g in grades]
    if not all(math.isfinite(v) for v in values):
        raise InvalidArgumentError(
            f"grades must be finite numbers, got {values}: the expected grade Σ grade·p would "
            "be NaN or infinite for every input"
        )
    if len(values) != len(verdict):
        raise InvalidArgumentError(f"{len(values)} grades for {len(verdict)} verdict tokens")
    return torch.tensor(values)


def _check_step_format(step_format: Any) -> None:
    from .templates import placeholders

    if not isinstance(step_format, str):
        raise ArgumentTypeError(f"step_format must be a string, got {type(step_format).__name__}")
    fields = set(placeholders(step_format))
    if fields != {"step", "tag"}:
        raise InvalidArgumentError(
            f"step_format must use exactly {{step}} and {{tag}}, got {step_format!r}"
        )


MODEL_KINDS["judge"] = HookedJudge
MODEL_KINDS["prm"] = HookedPRM
__all__ = ["HookedJudge", "HookedPRM", "StepEncoding", "classifier_layers"]
