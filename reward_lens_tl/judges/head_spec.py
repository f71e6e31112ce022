"""Which head a judge or PRM reads, chosen from its load options (imports no TransformerLens).

Internal (no public names): `HookedJudge`/`HookedPRM` (TransformerLens 3.9) and
`reward_lens_tl.bridge.BridgeJudge`/`BridgePRM` (TransformerLens 4) both read their options here,
so a judge or PRM gets the same head, score and attributes on either backend.

A generative judge's verdict `logit(v0) − logit(v1)` at the reading position is
`normed · (W_U[:, v0] − W_U[:, v1]) + (b[v0] − b[v1])`: a linear head on the final normalised
residual. `HeadSpec` says which rows of which HF head make it:

- `"lm_head"` (judges, token PRMs): rows `ids` of the output embedding, combined by
  `combine [n_out, len(ids)]` (`[[1, -1]]` for a verdict difference, the identity for
  separate logits);
- `"score"` (value PRMs: a `*ForTokenClassification` model with one label): the linear head;
- `"classifier"` (two-label PRMs, `score = Sequential(Linear, ReLU, Linear)`): the first
  linear layer is the head (its hidden units, pre-ReLU, are the objectives); the ReLU and the
  last layer are applied to them by the score (`head_mode = "classifier"`).

Examples:
    >>> import torch
    >>> spec = HeadSpec("lm_head", ids=(5, 7), combine=torch.tensor([[1.0, -1.0]]),
    ...                 names=("verdict",))
    >>> spec.n_out, spec.rows(torch.eye(8)).tolist()
    (1, [[0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, -1.0]])
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

import torch
from torch import Tensor, nn

from ..errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    RewardHeadError,
)
from .templates import (
    DEFAULT_VERDICTS,
    PRM_TEMPLATE,
    TEMPLATES,
    check_template,
    grades_of,
    placeholders,
    token_id,
    token_ids,
)

__all__: list[str] = []

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


@dataclass(frozen=True)
class HeadSpec:
    """Which head to read, the LM head rows and their combination, and the objectives' names.

    Args:
        source: `"lm_head"`, `"score"` or `"classifier"`.
        names: The objectives' names.
        ids: The LM head rows read (`"lm_head"` only).
        combine: The matrix combining those rows, `[n_out, len(ids)]`.
    """

    source: str
    names: tuple[str, ...]
    ids: tuple[int, ...] = ()
    combine: Tensor | None = None

    @property
    def n_out(self) -> int:
        """The number of head outputs (objectives)."""
        return len(self.names)

    def rows(self, table: Tensor) -> Tensor:
        """`combine @ table[ids]`: the head's rows from an LM head's weight (or bias) rows.

        Args:
            table: The LM head's weight `[vocab, d_model]` or bias `[vocab]`.

        Returns:
            `[n_out, d_model]` (or `[n_out]` from a bias).
        """
        assert self.combine is not None
        picked = table.detach()[torch.tensor(self.ids, device=table.device)]
        return self.combine.to(picked) @ picked


@dataclass(frozen=True)
class HeadChoice:
    """What a judge's or PRM's load options choose.

    Args:
        spec: The head to read.
        mode: How the head outputs score (`VerdictScore.head_mode`).
        softcap: The model's final logit soft-cap (Gemma-2), or `None`.
        settings: The attributes the loaded model gets (`kind`, `template`, ...).
    """

    spec: HeadSpec
    mode: str
    softcap: float | None
    settings: dict[str, Any] = field(default_factory=dict)

    def apply(self, model: Any) -> Any:
        """Set the choice's attributes on `model` (after it is built).

        Args:
            model: The loaded judge or PRM.

        Returns:
            `model`.
        """
        for name, value in self.settings.items():
            setattr(model, name, value)
        model.head_mode, model.softcap = self.mode, self.softcap
        return model


def resolve_source(model_or_path: Any, tokenizer: Any, hub: dict[str, Any]) -> tuple[Any, Any, Any]:
    """`(model or local path, tokenizer, hf_config)`.

    Hub ids are fetched or read from the cache as reward models are
    (`reward_lens_tl.hub.resolve_checkpoint`).

    Args:
        model_or_path: An HF model, a checkpoint directory or a hub id.
        tokenizer: The tokenizer (required for an in-memory model).
        hub: `resolve_checkpoint`'s options (`revision`, ...).

    Returns:
        `(model or local path, tokenizer, hf_config)`.

    Raises:
        InvalidArgumentError: An in-memory model without `tokenizer=`, or a directory without
            tokenizer files.
        ArgumentTypeError: Neither a model nor a path.
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


def check_judge_kind(kind: Any) -> None:
    """Refuse an unknown judge kind.

    Args:
        kind: The kind given.

    Raises:
        InvalidArgumentError: Not `"pointwise"`, `"pairwise"` or `"likert"`.
    """
    if kind not in TEMPLATES:
        raise InvalidArgumentError(f"kind must be one of {tuple(TEMPLATES)}, got {kind!r}")


def check_prm_kind(kind: Any) -> None:
    """Refuse an unknown PRM kind.

    Args:
        kind: The kind given.

    Raises:
        InvalidArgumentError: Not `"token"`, `"value"` or `"classifier"`.
    """
    if kind not in STEP_TAGS:
        raise InvalidArgumentError(f"kind must be one of {tuple(STEP_TAGS)}, got {kind!r}")


def judge_choice(
    kind: str,
    verdict: Sequence[str | int],
    template: str | None,
    chat: bool,
    grades: Sequence[float] | None,
    tokenizer: Any,
    config: Any,
) -> HeadChoice:
    """A judge's head from its options (`HookedJudge.from_pretrained`'s, documented there).

    Args:
        kind: `"pointwise"`, `"pairwise"` or `"likert"`.
        verdict: The verdict tokens (`DEFAULT_VERDICT`: the kind's own).
        template: The template (`None`: the kind's built-in).
        chat: Whether the rendered text goes in a user turn of the chat template.
        grades: A Likert judge's grade per verdict token.
        tokenizer: The judge's tokenizer (verdicts are looked up in it).
        config: The HF config (its `final_logit_softcapping`).

    Returns:
        The head, its score mode and the judge's attributes.

    Raises:
        InvalidArgumentError: `grades` for a kind other than `"likert"`.
    """
    template = check_template(TEMPLATES[kind] if template is None else template, kind)
    if verdict is DEFAULT_VERDICT:  # left at the signature's default: the kind's own
        verdict = DEFAULT_VERDICTS[kind]
    if grades is not None and kind != "likert":
        raise InvalidArgumentError("grades= applies to kind='likert' only")
    ids = token_ids(tokenizer, verdict, "verdict", 2 if kind != "likert" else None)
    names = tuple(str(v) for v in verdict)
    softcap = getattr(config, "final_logit_softcapping", None) or None
    if kind == "likert":
        spec, mode = HeadSpec("lm_head", names, tuple(ids), torch.eye(len(ids))), "likert"
    else:
        spec, mode = pair_spec(ids, names, softcap is not None)
    settings = dict(
        kind=kind,
        template=template,
        chat=chat,
        verdict=tuple(verdict),
        verdict_ids=tuple(ids),
        grades=grades_for(verdict, grades) if kind == "likert" else None,
    )
    return HeadChoice(spec, mode, float(softcap) if softcap else None, settings)


def prm_choice(
    kind: str,
    *,
    step_tag: str | int | None,
    labels: Sequence[str | int],
    template: str,
    chat: bool,
    system: str | None,
    step_format: str | None,
    step_separator: str,
    transform: str | None,
    tokenizer: Any,
    config: Any,
) -> HeadChoice:
    """A PRM's head from its options (`HookedPRM.from_pretrained`'s, documented there).

    Args:
        kind: `"token"`, `"value"` or `"classifier"`.
        step_tag: The token that ends each step (`None`: the kind's default).
        labels: The two label tokens of a `"token"` PRM.
        template: The solution's template.
        chat: Whether solutions are written with the tokenizer's chat template.
        system: The system turn of a chat-template solution.
        step_format: How each step is written (`None`: the kind's default).
        step_separator: What joins the formatted steps.
        transform: `"sigmoid"` or `None`.
        tokenizer: The PRM's tokenizer.
        config: The HF config (its `final_logit_softcapping`).

    Returns:
        The head, its score mode and the PRM's attributes.

    Raises:
        InvalidArgumentError: `chat=True` with another template, or an unknown `transform`.
    """
    template = check_template(template, "prm")
    step_format = step_format if step_format is not None else STEP_FORMATS[kind]
    check_step_format(step_format)
    tag = STEP_TAGS[kind] if step_tag is None else step_tag
    tag_id = token_id(tokenizer, tag, "step_tag")
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
        ids = token_ids(tokenizer, labels, "labels", 2)
        spec, mode = pair_spec(ids, tuple(str(v) for v in labels), softcap is not None)
    elif kind == "value":
        spec, mode = HeadSpec("score", ("value",)), "linear"
    else:
        spec, mode = HeadSpec("classifier", ("margin",)), "classifier"
    settings = dict(
        kind=kind,
        template=template,
        step_format=step_format,
        step_separator=step_separator,
        step_tag=tag,
        step_tag_id=tag_id,
        labels=tuple(labels),
        transform=transform,
        chat=chat,
        system=system,
    )
    return HeadChoice(spec, mode, float(softcap) if softcap else None, settings)


def pair_spec(ids: list[int], names: tuple[str, ...], capped: bool) -> tuple[HeadSpec, str]:
    """A two-token head: their difference (one linear column), or both logits when capped.

    Args:
        ids: The two token ids.
        names: Their names.
        capped: Whether the model soft-caps its logits (then the score caps both first).

    Returns:
        `(spec, head_mode)`.
    """
    if capped:
        return HeadSpec("lm_head", names, tuple(ids), torch.eye(2)), "capped_pair"
    diff = torch.tensor([[1.0, -1.0]])
    return HeadSpec("lm_head", (f"{names[0]}-{names[1]}",), tuple(ids), diff), "linear"


def grades_for(verdict: Sequence[str | int], grades: Sequence[float] | None) -> Tensor:
    """A Likert judge's grade per verdict token.

    `grades` when given, else the verdicts as numbers, else `1..K`.

    Args:
        verdict: The verdict tokens.
        grades: The grades given, or `None`.

    Returns:
        The grades, `[K]`.

    Raises:
        ArgumentTypeError: Grades that are not a list of numbers.
        InvalidArgumentError: Non-finite grades, or not one per verdict token.
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


def check_step_format(step_format: Any) -> None:
    """Refuse a step format without exactly `{step}` and `{tag}`.

    Args:
        step_format: The step format given.

    Raises:
        ArgumentTypeError: Not a string.
        InvalidArgumentError: Other placeholders.
    """
    if not isinstance(step_format, str):
        raise ArgumentTypeError(f"step_format must be a string, got {type(step_format).__name__}")
    fields = set(placeholders(step_format))
    if fields != {"step", "tag"}:
        raise InvalidArgumentError(
            f"step_format must use exactly {{step}} and {{tag}}, got {step_format!r}"
        )


def classifier_layers(hf_model: nn.Module) -> list[nn.Linear]:
    """The two linear layers of a `Sequential(Linear, ReLU, Linear)` `score` head.

    Args:
        hf_model: The HF model.

    Returns:
        The first and last linear layers.

    Raises:
        RewardHeadError: When the model's `score` is not such a head.

    Examples:
        >>> from transformers import Qwen2Config
        >>> from reward_lens_tl.judges.prm_module import Qwen2ForProcessRewardModel
        >>> cfg = Qwen2Config(vocab_size=11, hidden_size=8, intermediate_size=16,
        ...                   num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
        ...                   num_labels=2)
        >>> first, last = classifier_layers(Qwen2ForProcessRewardModel(cfg))
        >>> tuple(first.weight.shape), tuple(last.weight.shape)
        ((8, 8), (2, 8))

        A sequence classifier's `score` is one `Linear`:

        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> classifier_layers(tiny_reward_model("llama"))
        Traceback (most recent call last):
        ...
        reward_lens_tl.errors.RewardHeadError: a classifier PRM needs score = Sequential(...
    """
    head = getattr(hf_model, "score", None)
    layers = list(head) if isinstance(head, nn.Sequential) else []
    kinds = [type(m) for m in layers]
    if kinds != [nn.Linear, nn.ReLU, nn.Linear]:
        raise RewardHeadError(
            f"a classifier PRM needs score = Sequential(Linear, ReLU, Linear) (Qwen2.5-Math-PRM's "
            f"head); {type(hf_model).__name__}.score is {head!r}"
        )
    return [cast(nn.Linear, layers[0]), cast(nn.Linear, layers[2])]


def head_module(hf_model: nn.Module, spec: HeadSpec) -> nn.Linear:
    """The linear module whose rows make the head of `spec`.

    Args:
        hf_model: The HF model.
        spec: The head to read.

    Returns:
        The LM head, the `score` (or GPT-2's `classifier`) head, or a classifier head's first
        layer.

    Raises:
        RewardHeadError: When the model has no such head with a weight.
    """
    head: Any
    if spec.source == "lm_head":
        head = hf_model.get_output_embeddings()  # type: ignore[operator]
    elif spec.source == "classifier":
        head = classifier_layers(hf_model)[0]
    else:
        head = getattr(hf_model, "score", None) or getattr(hf_model, "classifier", None)
    if head is None or getattr(head, "weight", None) is None:
        raise RewardHeadError(f"{type(hf_model).__name__} has no {spec.source} head with a weight")
    return head


def hidden_names(n: int) -> tuple[str, ...]:
    """The names of a classifier head's hidden units.

    Args:
        n: The number of hidden units.

    Returns:
        `("hidden_0", …)`.
    """
    return tuple(f"hidden_{i}" for i in range(n))
