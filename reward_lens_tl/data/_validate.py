"""Field validation shared by the data types and the loaders.

Internal (no public names): used by `reward_lens_tl.data.schema` and the format readers.

Each `check_*` function returns the (normalised, copied) value or raises `FieldError`,
a `MalformedRecordError` that names the offending field; loaders
add the file and the record to the message.

Examples:
    >>> from reward_lens_tl.data._validate import FieldError, check_prompt
    >>> check_prompt([{"role": "user", "content": "Hi"}])
    ({'role': 'user', 'content': 'Hi'},)
    >>> try:
    ...     check_prompt([{"role": "bot", "content": "Hi"}])
    ... except FieldError as err:
    ...     print(err.field, "|", err.reason)
    prompt[0].role | must be one of user, assistant, system; got 'bot'
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from ..errors import FieldError

__all__: list[str] = []

ROLES = ("user", "assistant", "system")
"""The message roles a prompt may use."""

Message = dict[str, str]
Prompt = str | tuple[Message, ...]


def type_name(value: object) -> str:
    """A short, JSON-flavoured name of `value`'s type, for error messages.

    Args:
        value: Any value.

    Returns:
        The name, e.g. `"null"` or `"list"`.
    """
    if value is None:
        return "null"
    names = {bool: "bool", int: "int", float: "float", str: "str", list: "list", dict: "dict"}
    return names.get(type(value), type(value).__name__)


def check_str(value: object, name: str) -> str:
    """`value` if it is a `str`.

    Args:
        value: The value.
        name: The field's name.

    Returns:
        The value.

    Raises:
        FieldError: Naming `name`, if it is not a `str`.
    """
    if not isinstance(value, str):
        raise FieldError(name, f"must be a str, got {type_name(value)}")
    return value


def check_optional_str(value: object, name: str) -> str | None:
    """`value` if it is `None` or a `str`.

    Args:
        value: The value.
        name: The field's name.

    Returns:
        The value.

    Raises:
        FieldError: If it is neither.
    """
    return None if value is None else check_str(value, name)


def check_message(message: object, name: str) -> Message:
    """A copy of `message` after checking it is a `{"role", "content"}` dict.

    Args:
        message: The message.
        name: The field's name.

    Returns:
        The copy.

    Raises:
        FieldError: If it is not a message dict or its role or content is invalid.
    """
    if not isinstance(message, Mapping):
        raise FieldError(name, f"must be a message dict, got {type_name(message)}")
    role = message.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise FieldError(f"{name}.role", f"must be one of {', '.join(ROLES)}; got {role!r}")
    check_str(message.get("content"), f"{name}.content")
    return dict(message)


def check_prompt(prompt: object, name: str = "prompt") -> Prompt:
    """A `str` prompt unchanged, or a message sequence as a tuple of copied messages.

    Args:
        prompt: The prompt.
        name: The field's name.

    Returns:
        The prompt.

    Raises:
        FieldError: If it is neither a `str` nor a non-empty list of messages.
    """
    if isinstance(prompt, str):
        return prompt
    if not isinstance(prompt, Sequence) or isinstance(prompt, bytes | bytearray):
        raise FieldError(name, f"must be a str or a list of messages, got {type_name(prompt)}")
    if not prompt:
        raise FieldError(name, "is an empty list of messages")
    return tuple(check_message(m, f"{name}[{i}]") for i, m in enumerate(prompt))


def check_responses(values: object, name: str, count: int | None = None) -> tuple[str, ...]:
    """A tuple of `str` responses (exactly `count` of them when given, else at least one).

    Args:
        values: The responses.
        name: The field's name.
        count: The required number, or `None`.

    Returns:
        The responses.

    Raises:
        FieldError: If they are not a list of `str` of the right length.
    """
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise FieldError(name, f"must be a list of str, got {type_name(values)}")
    if count is not None and len(values) != count:
        raise FieldError(name, f"must hold exactly {count} responses, got {len(values)}")
    if not values:
        raise FieldError(name, "must hold at least one response, got none")
    return tuple(check_str(v, f"{name}[{i}]") for i, v in enumerate(values))


def check_three_responses(values: object, name: str) -> tuple[str, str, str]:
    """Exactly three `str` responses (RM-Bench's concise, detailed and markdown styles).

    Args:
        values: The responses.
        name: The field's name.

    Returns:
        The three responses.

    Examples:
        >>> from reward_lens_tl.data._validate import check_three_responses
        >>> check_three_responses(["a", "b", "c"], "chosen")
        ('a', 'b', 'c')
    """
    first, second, third = check_responses(values, name, count=3)
    return first, second, third


def check_id(value: object, name: str = "id") -> Hashable | None:
    """`value` if it can serve as a record id (`None`, `str` or `int`).

    Args:
        value: The value.
        name: The field's name.

    Returns:
        The value.

    Raises:
        FieldError: If it cannot.
    """
    if value is not None and (isinstance(value, bool) or not isinstance(value, str | int)):
        raise FieldError(name, f"must be a str or an int, got {type_name(value)}")
    return value


def check_metadata(value: object) -> dict[str, Any]:
    """A shallow copy of a metadata mapping.

    Args:
        value: The mapping.

    Returns:
        The copy.

    Raises:
        FieldError: If it is not a mapping.
    """
    if not isinstance(value, Mapping):
        raise FieldError("metadata", f"must be a mapping, got {type_name(value)}")
    return dict(value)


def prompt_messages(prompt: Prompt) -> tuple[Message, ...]:
    """The prompt as fresh message dicts: a `str` becomes one user message.

    Args:
        prompt: The prompt.

    Returns:
        The messages.
    """
    if isinstance(prompt, str):
        return ({"role": "user", "content": prompt},)
    return tuple(dict(m) for m in prompt)
