r"""Text in, token ids out: conversations → ids, and ids → left-padded batches.

Ids are assembled directly from the tokenizer: with a chat template, the template renders the
conversation and is tokenized once (no decode → re-encode round trip; a template's BOS is not
doubled by the tokenizer). Without one, the documented plain format is used:

    <tokenizer's own prefix specials> "\n\nHuman: {user}\n\nAssistant: {assistant}" ...
    "\n\nAssistant:" + " {response}" <tokenizer's own suffix specials>

(the Anthropic HH format; the specials are whatever `tokenizer(text)` itself adds, e.g. a BOS).

Every encoding records three spans: `ids[:response_start]` is the prompt with the template's
fixed parts (BOS, role headers), `ids[response_start:response_end]` is the response content,
`ids[response_end:]` the template's suffix (end-of-turn, EOS). Truncation cuts only prompt or
response *content* (or both, `truncation="both"`); the fixed parts always survive (see
`encode_conversation`).

Examples:
    >>> from reward_lens_tl.inputs import pad_batch
    >>> ids, mask = pad_batch([[5, 6, 7], [5, 8]], pad_token_id=0)
    >>> ids.tolist(), mask.tolist()
    ([[5, 6, 7], [5, 0, 8]], [[1, 1, 1], [1, 0, 1]])
"""

from __future__ import annotations

import operator
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from jaxtyping import Int
from torch import Tensor

from .errors import ArgumentTypeError, InvalidArgumentError, SequenceTooLongError, TemplateError
from .padding import PaddingSide, left_pad

__all__ = [
    "EncodedConversation",
    "Message",
    "Prompt",
    "Truncation",
    "UnknownTokenWarning",
    "as_encoded",
    "encode_checked",
    "encode_conversation",
    "pad_batch",
]

Message = Mapping[str, str]
Prompt = str | Sequence[Message]
Truncation = Literal["error", "left", "right", "both"]
TRUNCATION_MODES = ("error", "left", "right", "both")
#: Share of a sequence's tokens that may be the unknown token before `encode` warns.
UNK_WARN_SHARE = 0.2


@dataclass(frozen=True)
class EncodedConversation:
    """Token ids of one conversation and where the scored response starts (and ends).

    `response_end` is where the template's suffix (end-of-turn, EOS) begins. It may be left
    out when building one by hand from `ids` and `response_start`: then a trailing EOS id (if
    `eos_token_id` is given to `suffix_start`) counts as the suffix, else nothing does.
    `dropped` is what truncation removed: `(prompt content tokens dropped from the start,
    response content tokens dropped from the end)`; it is not part of equality.
    Out-of-range or non-integer positions are an `InvalidArgumentError`.

    Attributes:
        ids: The token ids of the whole conversation (template parts included).
        response_start: The index of the response's first token (the length of the prompt part).
        response_end: Where the template's suffix starts, or `None` when not recorded.
        dropped: `(prompt content tokens dropped, response content tokens dropped)` by
            truncation; keyword-only, not part of equality.

    Examples:
        >>> from reward_lens_tl.inputs import EncodedConversation
        >>> enc = EncodedConversation(ids=(1, 7, 8, 9, 2), response_start=2)
        >>> enc.suffix_start(eos_token_id=2), enc.response_ids(eos_token_id=2)
        (4, (8, 9))
        >>> enc = EncodedConversation(ids=(1, 7, 8, 9, 5, 2), response_start=2, response_end=4)
        >>> enc.prompt_ids(), enc.response_ids(), enc.suffix_ids(), len(enc)
        ((1, 7), (8, 9), (5, 2), 6)
    """

    ids: tuple[int, ...]
    response_start: int
    response_end: int | None = None
    dropped: tuple[int, int] = field(default=(0, 0), compare=False, repr=False, kw_only=True)

    def __post_init__(self) -> None:
        """Normalise the ids and check the spans."""
        object.__setattr__(self, "ids", tuple(_as_int(i, "a token id") for i in self.ids))
        n = len(self.ids)
        start = _as_int(self.response_start, "response_start")
        object.__setattr__(self, "response_start", start)
        if not 0 <= start <= n:
            raise InvalidArgumentError(
                f"response_start={start} is outside [0, {n}] for {n} ids; it is the index of the "
                "response's first token (len(prompt ids) when built by hand)"
            )
        if self.response_end is not None:
            end = _as_int(self.response_end, "response_end")
            object.__setattr__(self, "response_end", end)
            if not start <= end <= n:
                raise InvalidArgumentError(
                    f"response_end={end} is outside [response_start={start}, {n}] for {n} ids; "
                    "it is where the template's suffix starts (leave it out for none)"
                )

    def __len__(self) -> int:
        """Number of token ids."""
        return len(self.ids)

    def suffix_start(self, eos_token_id: int | None = None) -> int:
        """Where the template's suffix starts: `response_end` when recorded.

        Otherwise a trailing `eos_token_id` is the suffix; otherwise the sequence's end.

        Args:
            eos_token_id: The EOS id, read only when `response_end` was not recorded.

        Returns:
            The index of the suffix's first token (`len(ids)` when there is none).
        """
        if self.response_end is not None:
            return self.response_end
        n = len(self.ids)
        if eos_token_id is not None and n > self.response_start and self.ids[-1] == eos_token_id:
            return n - 1
        return n

    def prompt_ids(self) -> tuple[int, ...]:
        """The prompt with its template parts (everything before the response)."""
        return self.ids[: self.response_start]

    def response_ids(self, eos_token_id: int | None = None) -> tuple[int, ...]:
        """The response content (without the template's suffix).

        Args:
            eos_token_id: The EOS id, read only when `response_end` was not recorded (see
                `suffix_start`).

        Returns:
            The ids from `response_start` to the suffix.
        """
        return self.ids[self.response_start : self.suffix_start(eos_token_id)]

    def suffix_ids(self, eos_token_id: int | None = None) -> tuple[int, ...]:
        """The template's suffix after the response (end-of-turn, EOS).

        Args:
            eos_token_id: The EOS id, read only when `response_end` was not recorded (see
                `suffix_start`).

        Returns:
            The ids from the suffix's start to the end.
        """
        return self.ids[self.suffix_start(eos_token_id) :]


def as_encoded(item: Any) -> EncodedConversation:
    """An `EncodedConversation` from itself or from a zoo `Example` (token ids, response span).

    A zoo example's `response_end` is recorded, so the template's end-of-turn is suffix. Text is
    encoded by a model: `model.encode(prompt, response)`.

    Args:
        item: An `EncodedConversation`, or anything with `input_ids` and `response_start` (and
            optionally `response`, the response's ids).

    Returns:
        The encoded conversation.

    Raises:
        ArgumentTypeError: When `item` is neither.

    Examples:
        >>> from types import SimpleNamespace
        >>> example = SimpleNamespace(input_ids=[1, 4, 9, 5, 2], response_start=3, response=[5])
        >>> enc = as_encoded(example)
        >>> enc.ids, enc.response_start, enc.response_end, as_encoded(enc) is enc
        ((1, 4, 9, 5, 2), 3, 4, True)
    """
    if isinstance(item, EncodedConversation):
        return item
    if not (hasattr(item, "input_ids") and hasattr(item, "response_start")):
        raise ArgumentTypeError(
            f"expected an EncodedConversation or a zoo Example, got {type(item).__name__}; "
            "encode text with model.encode(prompt, response)"
        )
    start = item.response_start
    response = getattr(item, "response", None)
    end = start + len(response) if response is not None else None
    return EncodedConversation(tuple(item.input_ids), start, end)


def _as_int(value: Any, name: str) -> int:
    """`value` as an int (Python, numpy or one-element integer tensor).

    Floats and bools are an `InvalidArgumentError`, never truncated.
    """
    if type(value) is int:
        return value
    if isinstance(value, bool) or str(getattr(value, "dtype", "")).endswith("bool"):
        raise InvalidArgumentError(f"{name} must be an int, got the bool {value!r}")
    try:
        return operator.index(value)
    except TypeError as err:
        raise InvalidArgumentError(
            f"{name} must be an int, got {value!r} ({type(value).__name__}); pass integer "
            "positions and token ids, not floats"
        ) from err


def prompt_messages(prompt: Prompt) -> list[dict[str, str]]:
    """A prompt as chat messages (a string is one user turn). Inputs are copied, not changed."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    try:
        messages = [dict(m) for m in prompt]
    except (TypeError, ValueError) as err:
        raise TemplateError(
            f"a prompt is a string or a list of {{'role', 'content'}} messages, got "
            f"{type(prompt).__name__}"
        ) from err
    for i, m in enumerate(messages):
        if not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise TemplateError(f"prompt message {i} needs string 'role' and 'content': {m!r}")
    return messages


def encode_conversation(
    tokenizer: Any,
    prompt: Prompt,
    response: str,
    *,
    max_length: int | None = None,
    truncation: Truncation = "error",
    use_chat_template: bool | None = None,
) -> EncodedConversation:
    """Ids for `prompt` followed by the assistant `response`.

    `use_chat_template=None` uses the tokenizer's template when it has one. A conversation
    longer than `max_length` raises `SequenceTooLongError` unless `truncation` is

    - `"left"`: drop the *oldest prompt content* (earlier turns first, then the start of the
      last user message); BOS, role headers, the assistant header and the response survive;
    - `"right"`: drop the *end of the response content*; the end-of-turn and EOS survive, so
      the reward is still read where the model expects it;
    - `"both"`: drop the start of the prompt content *and* the end of the response content,
      for a pair whose prompt and response are both long. The content budget `b` (the most
      content tokens that fit beside the template's fixed parts) is split: the prompt keeps
      its last `b // 2` tokens and the response its first `b - b // 2`; a side shorter
      than its half keeps all of itself and gives the rest to the other side.

    The truncated ids are exactly what the template gives for the shortened text, and
    `.dropped` records how many content tokens each side lost. If even an empty prompt (or
    response) does not fit, `SequenceTooLongError` says so and names the mode that can.

    Args:
        tokenizer: A Hugging Face tokenizer.
        prompt: The user's text, or a list of `{"role", "content"}` messages.
        response: The assistant's response to score.
        max_length: The most ids the conversation may have (`None`: no limit).
        truncation: `"error"`, `"left"`, `"right"` or `"both"` (above).
        use_chat_template: Use the tokenizer's chat template (`True`), the plain HH format
            (`False`), or the template when the tokenizer has one (`None`).

    Returns:
        The ids with the response's span (and `.dropped` when truncated).

    Raises:
        SequenceTooLongError: The conversation is longer than `max_length` and `truncation`
            cannot fit it.
        TemplateError: A malformed prompt or response, or one the chat template rejects.
        InvalidArgumentError: An unknown `truncation`.

    Examples:
        >>> from reward_lens_tl.inputs import encode_conversation
        >>> from reward_lens_tl.testing import tiny_tokenizer
        >>> tok = tiny_tokenizer()
        >>> enc = encode_conversation(tok, "w6 w7 w8 w9", "w10 w11", max_length=7,
        ...                           truncation="left")
        >>> tok.convert_ids_to_tokens(list(enc.ids))
        ['<bos>', '<|user|>', 'w9', '<|assistant|>', 'w10', 'w11', '<eos>']
        >>> enc = encode_conversation(
        ...     tok, "w6 w7 w8 w9", "w10 w11 w12", max_length=9, truncation="both"
        ... )
        >>> tok.convert_ids_to_tokens(list(enc.ids)), enc.dropped
        (['<bos>', '<|user|>', 'w8', 'w9', '<|assistant|>', 'w10', 'w11', 'w12', '<eos>'], (2, 0))
    """
    if not isinstance(truncation, str) or truncation not in TRUNCATION_MODES:
        raise InvalidArgumentError(
            f"truncation must be one of {TRUNCATION_MODES}, got {truncation!r}"
        )
    if not isinstance(response, str):
        raise TemplateError(f"a response is a string, got {type(response).__name__}")
    messages = prompt_messages(prompt)
    templated = bool(getattr(tokenizer, "chat_template", None))
    use_template = templated if use_chat_template is None else use_chat_template
    encode = _encode_with_template if use_template else _encode_plain

    def build(msgs: list[dict[str, str]], resp: str) -> EncodedConversation:
        return encode(tokenizer, msgs, resp)

    enc = build(messages, response)
    if max_length is None or len(enc) <= max_length:
        return enc
    if truncation == "error":
        raise SequenceTooLongError(
            f"conversation has {len(enc)} tokens, more than max_length={max_length}; shorten it "
            "or pass truncation='left' (drop the oldest prompt content), 'right' (drop the end "
            "of the response) or 'both' (both, when prompt and response are long)"
        )
    truncate = {"right": _truncate_response, "left": _truncate_prompt, "both": _truncate_both}
    return truncate[truncation](tokenizer, build, messages, response, max_length)


# -- truncation that keeps the template's fixed parts ------------------------------------------
def _content_tokens(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _largest_fitting(n: int, fits: Callable[[int], bool], room: int | None = None) -> int | None:
    """The largest `k` in `[0, n]` with `fits(k)`, by binary search.

    `fits` is monotone up to tokenizer merges, so the answer is re-checked by the caller. `room`,
    the tokens left beside the template's parts when nothing is kept, is tried first: it is usually
    the answer and then costs two encodings instead of `log2(n)`.
    """
    if not fits(0):
        return None
    if room is not None:
        guess = min(max(room, 0), n)
        if fits(guess) and (guess == n or not fits(guess + 1)):
            return guess
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _truncate_response(tokenizer, build, messages, response, max_length) -> EncodedConversation:
    toks = _content_tokens(tokenizer, response)
    cache: dict[int, EncodedConversation] = {}

    def attempt(k: int) -> EncodedConversation:
        if k not in cache:
            enc = build(messages, _kept_start(tokenizer, response, toks, k))
            cache[k] = replace(enc, dropped=(0, len(toks) - k))
        return cache[k]

    room = max_length - len(attempt(0))
    k = _largest_fitting(len(toks), lambda k: len(attempt(k)) <= max_length, room)
    if k is None:
        everything = sum(len(_content_tokens(tokenizer, m["content"])) for m in messages)
        no_prompt = build(_drop_oldest(tokenizer, messages, None, everything), response)
        raise SequenceTooLongError(
            f"the prompt alone takes {len(attempt(0))} tokens with the template, more than "
            f"max_length={max_length}: truncation='right' only cuts the response; "
            + _other_mode("left", "response", len(no_prompt) <= max_length)
        )
    return attempt(k)


def _truncate_prompt(tokenizer, build, messages, response, max_length) -> EncodedConversation:
    contents = [_content_tokens(tokenizer, m["content"]) for m in messages]
    total = sum(len(c) for c in contents)
    cache: dict[int, EncodedConversation] = {}

    def attempt(drop: int) -> EncodedConversation:
        if drop not in cache:
            enc = build(_drop_oldest(tokenizer, messages, contents, drop), response)
            cache[drop] = replace(enc, dropped=(drop, 0))
        return cache[drop]

    room = max_length - len(attempt(total))
    kept = _largest_fitting(total, lambda keep: len(attempt(total - keep)) <= max_length, room)
    if kept is None:
        no_response = build(messages, "")
        raise SequenceTooLongError(
            f"the response alone takes {len(attempt(total))} tokens with the template, more "
            f"than max_length={max_length}: truncation='left' only cuts the prompt; "
            + _other_mode("right", "prompt", len(no_response) <= max_length)
        )
    return attempt(total - kept)


def _other_mode(mode: str, side: str, fits: bool) -> str:
    if fits:
        return f"use '{mode}'"
    return (
        f"the {side} is long too, so '{mode}' cannot fit it either: use truncation='both' "
        "(drops the start of the prompt and the end of the response)"
    )


def split_budget(budget: int, n_prompt: int, n_response: int) -> tuple[int, int]:
    """How `truncation="both"` shares `budget` content tokens.

    `(prompt tokens kept, response tokens kept)`. The prompt gets up to `budget // 2`, the response
    up to the rest; a side that needs less gives the unused part to the other.

    Examples:
        >>> split_budget(58, 100, 100), split_budget(58, 10, 100), split_budget(58, 100, 10)
        ((29, 29), (10, 48), (48, 10))
    """
    keep_prompt = min(n_prompt, budget // 2)
    keep_response = min(n_response, budget - keep_prompt)
    return min(n_prompt, budget - keep_response), keep_response


def _truncate_both(tokenizer, build, messages, response, max_length) -> EncodedConversation:
    contents = [_content_tokens(tokenizer, m["content"]) for m in messages]
    n_prompt = sum(len(c) for c in contents)
    toks = _content_tokens(tokenizer, response)
    cache: dict[int, EncodedConversation] = {}

    def attempt(budget: int) -> EncodedConversation:
        if budget not in cache:
            keep_p, keep_r = split_budget(budget, n_prompt, len(toks))
            msgs = _drop_oldest(tokenizer, messages, contents, n_prompt - keep_p)
            enc = build(msgs, _kept_start(tokenizer, response, toks, keep_r))
            cache[budget] = replace(enc, dropped=(n_prompt - keep_p, len(toks) - keep_r))
        return cache[budget]

    room = max_length - len(attempt(0))
    budget = _largest_fitting(n_prompt + len(toks), lambda b: len(attempt(b)) <= max_length, room)
    if budget is None:
        raise SequenceTooLongError(
            f"the template alone (an empty prompt and response) takes {len(attempt(0))} tokens, "
            f"more than max_length={max_length}: no truncation can fit it; use a model with a "
            "longer context or fewer turns"
        )
    return attempt(budget)


def _kept_start(tokenizer: Any, text: str, toks: list[int], k: int) -> str:
    """The text of the first `k` of `text`'s tokens (the text itself when nothing is cut)."""
    if k >= len(toks):
        return text
    return tokenizer.decode(toks[:k]) if k else ""


def _drop_oldest(tokenizer, messages, contents, drop: int) -> list[dict[str, str]]:
    """Messages with the `drop` oldest content tokens removed.

    Emptied turns disappear, but the last message (the one the response answers) always stays,
    possibly empty; a leading assistant turn left without its user turn goes too. `contents=None`
    tokenizes them.
    """
    if contents is None:
        contents = [_content_tokens(tokenizer, m["content"]) for m in messages]
    out: list[dict[str, str]] = []
    last = len(messages) - 1
    for i, (m, toks) in enumerate(zip(messages, contents, strict=True)):
        cut = min(drop, len(toks))
        drop -= cut
        rest = toks[cut:]
        if not rest and i < last:
            continue
        text = m["content"] if cut == 0 else (tokenizer.decode(rest) if rest else "")
        out.append({**m, "content": text})
    while len(out) > 1 and out[0]["role"] == "assistant":
        out.pop(0)
    return out


# -- template and plain encodings --------------------------------------------------------------
def _template_ids(tokenizer: Any, messages: list[dict], add_generation_prompt: bool) -> list[int]:
    try:
        out = tokenizer.apply_chat_template(
            messages, tokenize=True, add_generation_prompt=add_generation_prompt
        )
    except Exception as err:  # jinja2 raise_exception, TemplateError, missing fields ...
        roles = [m.get("role") for m in messages]
        raise TemplateError(
            f"the tokenizer's chat template rejected a conversation with roles {roles}: {err}. "
            "Fix the messages (many templates accept only alternating user/assistant turns, some "
            "no system role), or pass use_chat_template=False for the plain HH format"
        ) from err
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
    empty = _template_ids(tokenizer, [*messages, {"role": "assistant", "content": ""}], False)
    n_suffix = min(_common_suffix(full, empty), len(full) - start)
    return EncodedConversation(
        ids=tuple(full), response_start=start, response_end=len(full) - n_suffix
    )


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
    head = prefix + _content_tokens(tokenizer, text + "\n\nAssistant:")
    body = _content_tokens(tokenizer, " " + response) if response else []
    ids = head + body + suffix
    return EncodedConversation(
        ids=tuple(ids), response_start=len(head), response_end=len(ids) - len(suffix)
    )


def unknown_token_share(tokenizer: Any, enc: EncodedConversation) -> float:
    """Share of the conversation's tokens that are the tokenizer's unknown token."""
    unk = getattr(tokenizer, "unk_token_id", None)
    if unk is None or not len(enc):
        return 0.0
    return sum(1 for i in enc.ids if i == unk) / len(enc)


_warned_unknown: weakref.WeakSet = weakref.WeakSet()


def warn_unknown_tokens(tokenizer: Any, enc: EncodedConversation, templated: bool) -> None:
    """Warn once per tokenizer when more than `UNK_WARN_SHARE` of a sequence is unknown."""
    share = unknown_token_share(tokenizer, enc)
    if share <= UNK_WARN_SHARE or tokenizer in _warned_unknown:
        return
    _warned_unknown.add(tokenizer)
    how = "the tokenizer's chat template" if templated else "the plain HH fallback format"
    warnings.warn(
        f"{share:.0%} of this conversation's {len(enc)} tokens became the unknown token "
        f"{getattr(tokenizer, 'unk_token', None)!r} (encoded with {how}); the tokenizer does not "
        "know these words or markers, so rewards will be meaningless. Check the vocabulary "
        "(tokenizer.convert_ids_to_tokens(enc.ids)) or the template.",
        UnknownTokenWarning,
        stacklevel=3,
    )


def encode_checked(
    tokenizer: Any,
    prompt: Prompt,
    response: str,
    *,
    max_length: int,
    truncation: Truncation = "error",
    use_chat_template: bool | None = None,
) -> EncodedConversation:
    """`encode_conversation`, then `warn_unknown_tokens`: what a reward model's `encode` does.

    Both backends' `encode` (`HookedRewardModel.encode`, `BridgeRewardModel.encode`) are this
    with the model's tokenizer and context length.

    Args:
        tokenizer: The model's tokenizer.
        prompt: The user message, or the conversation so far.
        response: The assistant's reply.
        max_length: The longest sequence (the model's context).
        truncation: `"error"`, `"left"`, `"right"` or `"both"`.
        use_chat_template: Use the tokenizer's chat template (default: when it has one).

    Returns:
        The `EncodedConversation`.

    Examples:
        >>> from reward_lens_tl.zoo import load_tokenizer
        >>> enc = encode_checked(load_tokenizer(), "hi", "hello", max_length=64)
        >>> enc.ids[0], len(enc.response_ids()) > 0
        (1, True)
    """
    enc = encode_conversation(
        tokenizer,
        prompt,
        response,
        max_length=max_length,
        truncation=truncation,
        use_chat_template=use_chat_template,
    )
    templated = bool(getattr(tokenizer, "chat_template", None))
    warn_unknown_tokens(
        tokenizer, enc, templated if use_chat_template is None else use_chat_template
    )
    return enc


class UnknownTokenWarning(UserWarning):
    """Much of an encoded sequence is the tokenizer's unknown token.

    Examples:
        Encoding words the zoo's tokenizer does not know warns (here turned into an error):

        >>> import warnings
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("error", UnknownTokenWarning)
        ...     model.encode("How do I bake bread?", "Knead the dough.")
        Traceback (most recent call last):
        ...
        reward_lens_tl.inputs.UnknownTokenWarning: ...
    """


def pad_batch(
    sequences: Sequence[Sequence[int] | EncodedConversation],
    pad_token_id: int | None,
    padding_side: PaddingSide = "left",
) -> tuple[Int[Tensor, "batch pos"], Int[Tensor, "batch pos"]]:
    """Pad id sequences (or `EncodedConversation`s) into `(input_ids, attention_mask)`.

    Rows are **left** padded after their first token (`[BOS, pad, pad, t1, …, EOS]`): column 0
    is every row's first token and every row's reward is read at the same position counted from
    the end (`-1` when the pooling token is the last one), so TransformerLens's `[:, 0]` and
    `[:, -1]` habits both read the right tokens (see `reward_lens_tl.padding`).

    Args:
        sequences: Rows of integer token ids, or `EncodedConversation`s.
        pad_token_id: The pad id; `None` is allowed for a single row only.
        padding_side: `"left"` (the default) or `"right"`.

    Returns:
        The ids and the attention mask (1 on real tokens), both `[batch, pos]` long tensors.

    Raises:
        MissingPadTokenError: Several rows and `pad_token_id=None`.
        EmptyInputError: No sequences.
        InvalidArgumentError: Ids that are not integers, or an unknown `padding_side`.

    Examples:
        >>> from reward_lens_tl.inputs import EncodedConversation, pad_batch
        >>> rows = [[5, 6, 7], EncodedConversation(ids=(8, 9), response_start=1)]
        >>> ids, mask = pad_batch(rows, pad_token_id=0)
        >>> ids.tolist(), ids[:, 0].tolist(), ids[:, -1].tolist()  # both ends are real tokens
        ([[5, 6, 7], [8, 0, 9]], [5, 8], [7, 9])
        >>> ids, mask = pad_batch(rows, pad_token_id=0, padding_side="right")
        >>> ids.tolist(), mask.sum(1).tolist()
        ([[5, 6, 7], [8, 9, 0]], [3, 2])
    """
    seqs = [s.ids if isinstance(s, EncodedConversation) else s for s in sequences]
    return left_pad(seqs, pad_token_id, padding_side)


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _common_suffix(a: Sequence[int], b: Sequence[int]) -> int:
    return _common_prefix(list(reversed(a)), list(reversed(b)))


def _find(haystack: list[int], needle: list[int]) -> int:
    for i in range(len(haystack) - len(needle) + 1):
        if haystack[i : i + len(needle)] == needle:
            return i
    return -1
