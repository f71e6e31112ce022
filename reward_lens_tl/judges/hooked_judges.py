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

The text side (templates, step tags, scores from head outputs) is shared with the TransformerLens 4
backend (`judge_text.JudgeText`, `prm_steps.PRMSteps`, `verdict_score.VerdictScore`); this
module holds what needs TransformerLens 3.9: loading through the converter, and the hooks of
`HookedRewardModel`. On TransformerLens 4 use `reward_lens_tl.bridge.BridgeJudge` and
`BridgePRM`, which take the same options.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self, Unpack, cast, overload

from jaxtyping import Float
from torch import Tensor, nn

from ..errors import InvalidArgumentError, NotForRewardModelsError
from ..loading import HUB_OPTIONS, LoadOptions, positional_tokenizer
from ..model import MODEL_KINDS, HookedRewardModel, load_reward_model
from .head_spec import (
    DEFAULT_VERDICT,
    HeadChoice,
    JudgeKind,
    PRMKind,
    check_judge_kind,
    check_prm_kind,
    classifier_layers,
    judge_choice,
    prm_choice,
    resolve_source,
)
from .heads import HeadAdapter
from .judge_text import JudgeText
from .prm_steps import PRMSteps, StepEncoding
from .templates import PRM_TEMPLATE
from .verdict_score import VerdictScore


class _VerdictHead(VerdictScore):
    """`VerdictScore` with `HookedRewardModel`'s hooks for a non-linear score."""

    def _gated_logits_needed(self, kwargs) -> bool:
        """A non-linear score at every position (`model(ids)[:, -1]` is the reward)."""
        return self.scored_head and kwargs.get("stop_at_layer") is None

    def _gated_per_position(self, resid, tokens):
        model = cast(Any, self)
        normed = model.ln_final(resid) if model.cfg.normalization_type is not None else resid
        return self.score_from(model.unembed(normed))[..., None]

    def _final_reward(self, pooled: Tensor, normed: Tensor, tokens: Tensor | None) -> Tensor:
        if self.head_mode == "linear":  # (also while loading, before the mode is set)
            return cast(Any, super())._final_reward(pooled, normed, tokens)
        return self.score_from(pooled)


def _load(cls, source, tokenizer, choice: HeadChoice, kind_key: str, options: dict[str, Any]):
    model = load_reward_model(
        source, tokenizer, adapter=HeadAdapter(choice.spec, kind_key), **options
    )
    if not isinstance(model, cls):
        raise InvalidArgumentError(f"expected a {cls.__name__}, built a {type(model).__name__}")
    return choice.apply(model)


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


class HookedJudge(_VerdictHead, JudgeText, HookedRewardModel):
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
        check_judge_kind(kind)
        tokenizer = positional_tokenizer((tokenizer, *args))
        hub, load_options = _split_options(options)
        source, tok, config = resolve_source(model_name, tokenizer, hub)
        choice = judge_choice(kind, verdict, template, chat, grades, tok, config)
        return _load(cls, source, tok, choice, "judge", load_options)

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


class HookedPRM(_VerdictHead, PRMSteps, HookedRewardModel):
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
        check_prm_kind(kind)
        tokenizer = positional_tokenizer((tokenizer, *args))
        hub, load_options = _split_options(options)
        source, tok, config = resolve_source(model_name, tokenizer, hub)
        choice = prm_choice(
            kind,
            step_tag=step_tag,
            labels=labels,
            template=template,
            chat=chat,
            system=system,
            step_format=step_format,
            step_separator=step_separator,
            transform=transform,
            tokenizer=tok,
            config=config,
        )
        return _load(cls, source, tok, choice, "prm", load_options)

    def attach_extras(self, extras: dict[str, Any]) -> None:
        """Attach the extra modules loaded with the model (a classifier head's output layer).

        Args:
            extras: The extra modules by name.
        """
        head_out = extras.get("head_out")
        if head_out is not None:
            self.head_out = head_out.to(self.cfg.device)


MODEL_KINDS["judge"] = HookedJudge
MODEL_KINDS["prm"] = HookedPRM
__all__ = ["HookedJudge", "HookedPRM", "StepEncoding", "classifier_layers"]
