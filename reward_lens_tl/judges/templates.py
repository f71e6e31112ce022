"""Prompt templates of generative judges and PRMs, and the tokens their verdicts are read from.

A judge's template is a plain string with `{prompt}` and `{response}` placeholders
(pairwise: `{response_a}` and `{response_b}`). It is rendered with `str.format` and the
text tokenized with the judge's tokenizer as it is (its own special tokens, e.g. BOS, added);
the verdict is read at the last token of the rendered template. A PRM's template has
`{prompt}` and `{steps}`; each step is written with `step_format` (`{step}` and
`{tag}`), so the step tag follows every step.

Examples:
    >>> render(POINTWISE_TEMPLATE, "pointwise", prompt="2+2?", response="4").splitlines()[-1]
    'Answer:'
    >>> try:
    ...     check_template("{prompt} -> {response_b}", "pairwise")
    ... except JudgeTemplateError as err:
    ...     print(str(err)[:50])
    the pairwise template has no {response_a} placehol
"""

from __future__ import annotations

import math
import numbers
import string
from collections.abc import Sequence
from typing import Any

from ..errors import ArgumentTypeError, JudgeTemplateError, VerdictTokenError

__all__ = ["LIKERT_TEMPLATE", "PAIRWISE_TEMPLATE", "POINTWISE_TEMPLATE", "PRM_TEMPLATE"]

#: Built-in pointwise template (GenRM-style "Is the answer correct? Yes/No").
POINTWISE_TEMPLATE = (
    "Question:\n{prompt}\nResponse:\n{response}\n"
    "Is the response correct and helpful? Answer Yes or No.\nAnswer:"
)
#: Built-in pairwise template (both responses shown; the verdict is "A" or "B").
PAIRWISE_TEMPLATE = (
    "Question:\n{prompt}\nResponse A:\n{response_a}\nResponse B:\n{response_b}\n"
    "Which response is better? Answer A or B.\nAnswer:"
)
#: Built-in Likert template (a grade from 1 to 5).
LIKERT_TEMPLATE = (
    "Question:\n{prompt}\nResponse:\n{response}\n"
    "Rate the response from 1 (worst) to 5 (best).\nRating:"
)
#: Built-in PRM template: the problem, then the steps.
PRM_TEMPLATE = "{prompt} {steps}"

TEMPLATES = {
    "pointwise": POINTWISE_TEMPLATE,
    "pairwise": PAIRWISE_TEMPLATE,
    "likert": LIKERT_TEMPLATE,
}
#: Each kind's default verdict tokens (`verdict=("Yes", "No")`, the signature's default, is
#: read as "the kind's default" for pairwise and Likert judges).
DEFAULT_VERDICTS: dict[str, tuple[str, ...]] = {
    "pointwise": ("Yes", "No"),
    "pairwise": ("A", "B"),
    "likert": ("1", "2", "3", "4", "5"),
}
SLOTS: dict[str, tuple[str, ...]] = {
    "pointwise": ("prompt", "response"),
    "likert": ("prompt", "response"),
    "pairwise": ("prompt", "response_a", "response_b"),
    "prm": ("prompt", "steps"),
}


def placeholders(template: str) -> list[str]:
    """The `{name}` fields of a format string.

    Args:
        template: The format string.

    Returns:
        The fields' names.

    Raises:
        JudgeTemplateError: If it does not parse, or a field has a conversion or format spec
            (`{response!r}`, `{response:>9}` would change the text the verdict is read from).
    """
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError as err:
        raise JudgeTemplateError(f"the template does not parse as a format string: {err}") from None
    for _, name, spec, conversion in fields:
        if name is not None and (spec or conversion):
            raise JudgeTemplateError(
                f"the template's field {{{name}}} has a conversion or format spec "
                f"({'!' + conversion if conversion else ''}{':' + spec if spec else ''}); "
                "placeholders must be plain, e.g. {response}"
            )
    return [name for _, name, _, _ in fields if name is not None]


def check_template(template: Any, kind: str) -> str:
    """`template` if it is a string holding exactly the placeholders `kind` needs.

    Args:
        template: The template.
        kind: `"pointwise"`, `"pairwise"`, `"likert"` or `"prm"`.

    Returns:
        The template.

    Raises:
        ArgumentTypeError: When the template is not a string.
        JudgeTemplateError: When a placeholder is missing or unknown.
    """
    if not isinstance(template, str):
        raise ArgumentTypeError(f"template must be a string, got {type(template).__name__}")
    fields = placeholders(template)
    need = SLOTS[kind]
    for slot in need:
        if slot not in fields:
            raise JudgeTemplateError(
                f"the {kind} template has no {{{slot}}} placeholder; a {kind} template needs "
                f"{', '.join('{' + s + '}' for s in need)} (got {template!r})"
            )
    unknown = sorted({f for f in fields if f not in need})
    if unknown:
        raise JudgeTemplateError(
            f"the {kind} template has unknown placeholder(s) {unknown}; it may only use "
            f"{', '.join('{' + s + '}' for s in need)} (write a literal brace as {{{{ or }}}})"
        )
    return template


def render(template: str, kind: str, **slots: str) -> str:
    """The template's text with its slots filled (each slot must be a string).

    Args:
        template: The template.
        kind: The template's kind (which slots it fills).
        **slots: The slots' values.

    Returns:
        The rendered text.

    Raises:
        ArgumentTypeError: When a slot is not a string.
    """
    for name, value in slots.items():
        if not isinstance(value, str):
            raise ArgumentTypeError(f"{name} must be a string, got {type(value).__name__}")
    return template.format(**{k: slots[k] for k in SLOTS[kind]})


def token_id(tokenizer: Any, token: str | int, argument: str) -> int:
    """The single id of `token` (a string that must be exactly one token, or an id).

    Args:
        tokenizer: The tokenizer.
        token: A string or a token id.
        argument: The argument's name, for the errors.

    Returns:
        The token id.

    Raises:
        ArgumentTypeError: When `token` is neither a string nor an id.
        VerdictTokenError: When the id is out of range or the string is not exactly one known
            token.
    """
    vocab_size = len(tokenizer)
    if isinstance(token, bool) or not isinstance(token, (str, numbers.Integral)):
        raise ArgumentTypeError(f"{argument} entries must be strings or token ids, got {token!r}")
    if not isinstance(token, str):
        token = int(token)
        if not 0 <= token < vocab_size:
            raise VerdictTokenError(f"{argument}: token id {token} is outside [0, {vocab_size})")
        return token
    ids = tokenizer.encode(token, add_special_tokens=False)
    unk = getattr(tokenizer, "unk_token_id", None)
    if len(ids) == 1 and ids[0] == unk and token != getattr(tokenizer, "unk_token", None):
        raise VerdictTokenError(
            f"{argument}: {token!r} is not in this tokenizer's vocabulary (it becomes the unknown "
            f"token {tokenizer.unk_token!r}); pass a token the model has, or its id"
        )
    if len(ids) == 1:
        return int(ids[0])
    hint = ""
    for variant in (f" {token}", token.strip()):
        if variant != token and len(tokenizer.encode(variant, add_special_tokens=False)) == 1:
            hint = f"; {variant!r} is one token: pass that, or its id"
            break
    pieces = tokenizer.convert_ids_to_tokens(ids)
    raise VerdictTokenError(
        f"{argument}: {token!r} is {len(ids)} tokens {pieces} in this tokenizer; it must be one "
        f"token{hint or ' (pass token ids instead)'}"
    )


def token_ids(
    tokenizer: Any, tokens: Sequence[str | int], argument: str, n: int | None
) -> list[int]:
    """Ids of distinct single tokens (`n` of them when given).

    Args:
        tokenizer: The tokenizer.
        tokens: Strings or token ids.
        argument: The argument's name, for the errors.
        n: How many tokens are needed (`None`: at least two).

    Returns:
        The token ids.

    Raises:
        ArgumentTypeError: When `tokens` is not a sequence of strings or ids.
        VerdictTokenError: When the number of tokens is wrong or the ids are not distinct.
    """
    if isinstance(tokens, (str, numbers.Integral)) or not isinstance(tokens, Sequence):
        raise ArgumentTypeError(f"{argument} must be a tuple of strings or ids, got {tokens!r}")
    if n is not None and len(tokens) != n:
        raise VerdictTokenError(f"{argument} needs {n} tokens, got {len(tokens)}: {tuple(tokens)}")
    if len(tokens) < 2:
        raise VerdictTokenError(f"{argument} needs at least two tokens, got {tuple(tokens)}")
    ids = [token_id(tokenizer, t, argument) for t in tokens]
    if len(set(ids)) != len(ids):
        raise VerdictTokenError(
            f"{argument} {tuple(tokens)} map to the token ids {ids}, which are not distinct "
            "(a lower-casing tokenizer merges 'Yes' and 'yes')"
        )
    return ids


def grades_of(verdict: Sequence[str | int]) -> list[float]:
    """A Likert judge's grade values: the verdict strings as numbers when they all are, else `1..K`.

    Args:
        verdict: The verdict tokens.

    Returns:
        The grades.

    Examples:
        >>> grades_of(("1", "2", "3")), grades_of(("bad", "good"))
        ([1.0, 2.0, 3.0], [1.0, 2.0])
    """
    default = [float(k) for k in range(1, len(verdict) + 1)]
    if not all(isinstance(v, str) for v in verdict):
        return default
    try:
        values = [float(str(v).strip()) for v in verdict]
    except ValueError:
        return default
    return values if all(math.isfinite(v) for v in values) else default
