"""Text in, token ids out: conversations → ids, and ids → right-padded batches.

Ids are assembled directly from the tokenizer: with a chat template, the template renders the
conversation and is tokenized once (no decode → re-encode round trip; a template's BOS is not
doubled by the tokenizer). Without one, the documented plain format is used::

    <tokenizer's own prefix specials> "\\n\\nHuman: {user}\\n\\nAssistant: {assistant}" ...
    "\\n\\nAssistant:" + " {response}" <tokenizer's own suffix specials>

(the Anthropic HH format; the specials are whatever ``tokenizer(text)`` itself adds, e.g. a BOS).

>>> from reward_lens_tl.inputs import pad_batch
>>> ids, mask = pad_batch([[5, 6, 7], [8]], pad_token_id=0)
>>> ids.tolist(), mask.tolist()
([[5, 6, 7], [8, 0, 0]], [[1, 1, 1], [1, 0, 0]])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from jaxtyping import Int
from torch import Tensor

from .errors import MissingPadTokenError, SequenceTooLongError

Message = Mapping[str, str]
Prompt = str | Sequence[Message]
Truncation = Literal["error", "left", "right"]


@dataclass(frozen=True)
class EncodedConversation:
    """Token ids of one conversation and where the scored response starts."""

    ids: tuple[int, ...]
    response_start: int

    def __len__(self) -> int:
        return len(self.ids)


def prompt_messages(prompt: Prompt) -> list[dict[str, str]]:
    """A prompt as chat messages (a string is one user turn). Inputs are copied, not changed."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return [dict(m) for m in prompt]


def encode_conversation(
    tokenizer: Any,
    prompt: Prompt,
    response: str,
    *,
    max_length: int | None = None,
    truncation: Truncation = "error",
    use_chat_template: bool | None = None,
) -> EncodedConversation:
    """Ids for ``prompt`` followed by the assistant ``response``.

    ``use_chat_template=None`` uses the tokenizer's template when it has one. Sequences longer
    than ``max_length`` raise :class:`SequenceTooLongError` unless ``truncation`` is ``"left"``
    (drop the start of the prompt, keeping the tokenizer's prefix specials) or ``"right"``
    (drop the end of the response, keeping suffix specials).
    """
    messages = prompt_messages(prompt)
    templated = bool(getattr(tokenizer, "chat_template", None))
    if use_chat_template is None:
        use_chat_template = templated
    if use_chat_template:
        enc = _encode_with_template(tokenizer, messages, response)
    else:
        enc = _encode_plain(tokenizer, messages, response)
    return truncate(enc, max_length, truncation, _special_wrap(tokenizer))


def _template_ids(tokenizer: Any, messages: list[dict], add_generation_prompt: bool) -> list[int]:
    out = tokenizer.apply_chat_template(
        messages, tokenize=True, add_generation_prompt=add_generation_prompt
    )
    if not isinstance(out, list):  # BatchEncoding in some versions
        out = out["input_ids"]
    ids = [int(i) for i in out]
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is not None and ids[:2] == [bos, bos]:
        ids = ids[1:]
    return ids


def _encode_with_template(tokenizer, messages, response) -> EncodedConversation:
    full = _template_ids(tokenizer, [*messages, {"role": "assistant", "content": response}], False)
    head = _template_ids(tokenizer, messages, True)
    start = len(head) if full[: len(head)] == head else _common_prefix(full, head)
    return EncodedConversation(ids=tuple(full), response_start=start)


def _special_wrap(tokenizer: Any) -> tuple[list[int], list[int]]:
    """The special ids the tokenizer itself puts before and after a text (e.g. BOS)."""
    with_specials = list(tokenizer("x")["input_ids"])
    plain = list(tokenizer("x", add_special_tokens=False)["input_ids"])
    at = _find(with_specials, plain)
    if at < 0:
        return [], []
    return with_specials[:at], with_specials[at + len(plain) :]


def _encode_plain(tokenizer, messages, response) -> EncodedConversation:
    names = {"user": "Human", "assistant": "Assistant", "system": "System"}
    text = "".join(f"\n\n{names.get(m['role'], 'Human')}: {m['content']}" for m in messages)
    prefix, suffix = _special_wrap(tokenizer)
    head = prefix + list(tokenizer(text + "\n\nAssistant:", add_special_tokens=False)["input_ids"])
    body = list(tokenizer(" " + response, add_special_tokens=False)["input_ids"])
    return EncodedConversation(ids=tuple(head + body + suffix), response_start=len(head))


def truncate(
    enc: EncodedConversation,
    max_length: int | None,
    truncation: Truncation,
    wrap: tuple[list[int], list[int]] = ([], []),
) -> EncodedConversation:
    if max_length is None or len(enc) <= max_length:
        return enc
    excess = len(enc) - max_length
    if truncation == "error":
        raise SequenceTooLongError(
            f"conversation has {len(enc)} tokens, more than max_length={max_length}; shorten it or "
            "pass truncation='left' (drop the start of the prompt) or 'right' (drop the end of "
            "the response)"
        )
    n_pre, n_suf = len(wrap[0]), len(wrap[1])
    ids = list(enc.ids)
    if truncation == "left":
        if excess > enc.response_start - n_pre:
            raise SequenceTooLongError("the response alone exceeds max_length; use 'right'")
        ids = ids[:n_pre] + ids[n_pre + excess :]
        return EncodedConversation(tuple(ids), enc.response_start - excess)
    end = len(ids) - n_suf
    if end - excess <= enc.response_start:
        raise SequenceTooLongError("the prompt alone exceeds max_length; use 'left'")
    ids = ids[: end - excess] + ids[end:]
    return EncodedConversation(tuple(ids), enc.response_start)


def pad_batch(
    sequences: Sequence[Sequence[int]], pad_token_id: int | None
) -> tuple[Int[Tensor, "batch pos"], Int[Tensor, "batch pos"]]:
    """Right-pad id sequences; returns ``(input_ids, attention_mask)``."""
    if pad_token_id is None:
        if len(sequences) > 1:
            raise MissingPadTokenError(
                "cannot batch several sequences without a pad token id; set tokenizer.pad_token"
            )
        pad_token_id = 0
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for i, seq in enumerate(sequences):
        ids[i, : len(seq)] = torch.as_tensor(list(seq), dtype=torch.long)
        mask[i, : len(seq)] = 1
    return ids, mask


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _find(haystack: list[int], needle: list[int]) -> int:
    for i in range(len(haystack) - len(needle) + 1):
        if haystack[i : i + len(needle)] == needle:
            return i
    return -1
