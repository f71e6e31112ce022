"""Which responses a sweep scores: vocabulary tokens (filtered by a documented rule) or words.

A candidate is a response given as **token ids**, never as text to be re-tokenized: the sweep
scores `prompt ids + candidate ids + the chat template's suffix ids`.

The vocabulary rule (`vocabulary_candidates`) keeps token id `t` unless

- `special`: it is one of the tokenizer's special tokens (BOS, EOS, pad, unk, role markers and
  any added token flagged special);
- `non_printing`: its decoded text is empty, only whitespace, or holds a control character;
- `byte_fragment`: it is a byte-fallback piece (`<0x0A>`) or decodes to the Unicode
  replacement character (a fragment of a multi-byte character);
- `beyond_tokenizer`: the model's embedding has more rows than the tokenizer has tokens.

Word lists (`word_candidates`) are tokenized the way the chat template tokenizes a
response, so a word may be several tokens; a word containing the unknown token is refused.

**Repeats are scored once.** A candidate is its token ids: `word_candidates` and
`token_candidates` keep the first occurrence of each id sequence (and its label) and
count the dropped repeats in `excluded["duplicate"]` (a word given three times, or two
spellings that tokenize alike), so a repeated word cannot weigh more in the statistics. A
`CandidateSet` built by hand with repeated ids is refused.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.zoo import zoo_path
    >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    >>> cands = vocabulary_candidates(model)
    >>> len(cands), cands.excluded
    (115, {'special': 7})
    >>> word_candidates(model, "how bake bread", ["soup", "great question"]).ids
    ((43,), (34, 35))
    >>> words = word_candidates(model, "how bake bread", ["soup", "soup", "great question", "soup"])
    >>> words.labels, words.excluded
    (('soup', 'great question'), {'duplicate': 2})
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..errors import EmptyInputError, InvalidArgumentError, TemplateError, UnknownCandidateError
from ..inputs import EncodedConversation, Prompt

__all__ = [
    "CandidateSet",
    "token_candidates",
    "vocabulary_candidates",
    "word_candidates",
]

_BYTE_PIECE = re.compile(r"^<0x[0-9A-Fa-f]{2}>$")


@dataclass(frozen=True)
class CandidateSet:
    """Candidates as token-id tuples with their labels (the token string or the word).

    `excluded` counts the vocabulary ids the filter rule dropped, by reason, and the
    repeated candidates a word or id list held (`"duplicate"`). Repeated ids are refused.

    Args:
        labels: the candidates' labels.
        ids: the candidates' token ids.
        excluded: `{reason: count}` of the dropped candidates.

    Raises:
        InvalidArgumentError: as many labels as candidates are needed, ids are integers, and
            no candidate repeats.
        EmptyInputError: no candidate, or a candidate without ids.

    Examples:
        >>> from reward_lens_tl.sweep import CandidateSet
        >>> cands = CandidateSet(("soup", "great question", "bomb"), ((43,), (34, 35), (38,)))
        >>> len(cands), cands.max_len
        (3, 2)
        >>> cands.subset([2, 0]).labels
        ('bomb', 'soup')

        A candidate given twice would count twice in every statistic, so it is refused:

        >>> from reward_lens_tl.errors import InvalidArgumentError
        >>> try:
        ...     CandidateSet(("soup", "again"), ((43,), (43,)))
        ... except InvalidArgumentError as e:
        ...     print(e)
        1 candidate(s) appear more than once (['again: [43]'], label: ids): ...
    """

    labels: tuple[str, ...]
    ids: tuple[tuple[int, ...], ...]
    excluded: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Normalise the labels and ids, and check them."""
        object.__setattr__(self, "labels", tuple(str(s) for s in self.labels))
        object.__setattr__(self, "ids", tuple(tuple(_token_id(i) for i in c) for c in self.ids))
        if len(self.labels) != len(self.ids):
            raise InvalidArgumentError(f"{len(self.labels)} labels for {len(self.ids)} candidates")
        if not self.ids:
            raise EmptyInputError(
                "the candidate set is empty: pass at least one word or token id (or leave "
                "candidates=None for the filtered vocabulary)"
            )
        empty = [lab for lab, c in zip(self.labels, self.ids, strict=True) if not c]
        if empty:
            raise EmptyInputError(f"candidates {empty[:5]} have no token ids")
        if len(set(self.ids)) != len(self.ids):
            repeated = _repeats(self.labels, self.ids)
            raise InvalidArgumentError(
                f"{len(repeated)} candidate(s) appear more than once ({repeated[:5]}, label: "
                "ids): a repeat would be counted again in every statistic. Pass each candidate "
                "once (word_candidates / token_candidates drop repeats for you)"
            )

    def __len__(self) -> int:
        """The number of candidates."""
        return len(self.ids)

    @property
    def max_len(self) -> int:
        """The most token ids of a candidate."""
        return max(len(c) for c in self.ids)

    def subset(self, indices: Sequence[int]) -> CandidateSet:
        """The candidates at `indices`, in that order.

        Args:
            indices: the candidates' positions.

        Returns:
            The new `CandidateSet` (without `excluded`).
        """
        return CandidateSet(
            tuple(self.labels[i] for i in indices), tuple(self.ids[i] for i in indices)
        )


def _tokenizer(model):
    tok = getattr(model, "tokenizer", None)
    if tok is None:
        raise TemplateError(
            "this model has no tokenizer: load it with from_pretrained(..., tokenizer=...) or "
            "pass candidates as token ids (token_candidates)"
        )
    return tok


def special_ids(tokenizer) -> set[int]:
    """Ids of the tokenizer's special tokens (named specials and added tokens flagged special).

    Args:
        tokenizer: the tokenizer.

    Returns:
        The ids.
    """
    ids = {int(i) for i in getattr(tokenizer, "all_special_ids", [])}
    for i, tok in getattr(tokenizer, "added_tokens_decoder", {}).items():
        if getattr(tok, "special", False):
            ids.add(int(i))
    return ids


def exclusion_reason(tokenizer, token_id: int, specials: set[int]) -> str | None:
    """Why the vocabulary rule (module docstring) drops `token_id`, or `None` to keep it.

    Args:
        tokenizer: the tokenizer.
        token_id: the token id.
        specials: the special ids (`special_ids`).

    Returns:
        The reason, or `None`.
    """
    if token_id in specials:
        return "special"
    piece = tokenizer.convert_ids_to_tokens(token_id)
    if piece is not None and _BYTE_PIECE.match(piece):
        return "byte_fragment"
    text = tokenizer.decode([token_id])
    if "\ufffd" in text:
        return "byte_fragment"
    if not text.strip() or not text.isprintable():
        return "non_printing"
    return None


def vocabulary_candidates(model) -> CandidateSet:
    """Every single-token response the model's vocabulary allows.

    They are filtered by the rule in the module docstring; labels are the tokenizer's token
    strings (unique per id).

    Args:
        model: the `HookedRewardModel` (with a tokenizer).

    Returns:
        The `CandidateSet`, with the dropped ids counted by reason.

    Raises:
        TemplateError: the model has no tokenizer.

    Examples:
        The zoo's word-level vocabulary: 122 ids, of which the 7 special tokens are dropped.

        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sweep import vocabulary_candidates
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> cands = vocabulary_candidates(model)
        >>> len(cands), cands.excluded, model.cfg.d_vocab
        (115, {'special': 7}, 122)
        >>> cands.labels[:3], cands.ids[:3]
        (('the', 'a', 'and'), ((7,), (8,), (9,)))
    """
    tok = _tokenizer(model)
    specials = special_ids(tok)
    n_tok = len(tok)
    labels: list[str] = []
    ids: list[tuple[int, ...]] = []
    excluded: dict[str, int] = {}
    for t in range(model.cfg.d_vocab):
        reason = "beyond_tokenizer" if t >= n_tok else exclusion_reason(tok, t, specials)
        if reason is not None:
            excluded[reason] = excluded.get(reason, 0) + 1
            continue
        labels.append(tok.convert_ids_to_tokens(t))
        ids.append((t,))
    return CandidateSet(tuple(labels), tuple(ids), excluded)


def token_candidates(model, token_ids: Iterable[int]) -> CandidateSet:
    """Single-token candidates from explicit ids (checked against the vocabulary).

    A repeated id is kept once (counted in `excluded["duplicate"]`).

    Args:
        model: the `HookedRewardModel`.
        token_ids: the token ids.

    Returns:
        The `CandidateSet`.

    Raises:
        UnknownCandidateError: ids outside the vocabulary.
        InvalidArgumentError: ids that are not integers.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sweep import token_candidates
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> cands = token_candidates(model, [43, 38, 43])
        >>> cands.labels, cands.ids, cands.excluded
        (('soup', 'bomb'), ((43,), (38,)), {'duplicate': 1})
    """
    ids = [_token_id(t) for t in token_ids]
    bad = [t for t in ids if not 0 <= t < model.cfg.d_vocab]
    if bad:
        raise UnknownCandidateError(
            f"candidate token ids {bad[:10]} are outside the vocabulary [0, {model.cfg.d_vocab})"
        )
    unique = list(dict.fromkeys(ids))
    tok = getattr(model, "tokenizer", None)
    labels = tok.convert_ids_to_tokens(unique) if tok is not None else [str(t) for t in unique]
    return CandidateSet(
        tuple(labels), tuple((t,) for t in unique), _duplicates(len(ids) - len(unique))
    )


def sweep_frame(model, prompt: Prompt) -> EncodedConversation:
    """The conversation with a placeholder response.

    Every candidate shares its prompt and suffix ids (`prompt_ids()` and `suffix_ids()`).

    Args:
        model: the `HookedRewardModel` (with a tokenizer).
        prompt: the prompt.

    Returns:
        The `EncodedConversation`.
    """
    tok = _tokenizer(model)
    placeholder = tok.convert_ids_to_tokens(_any_plain_token(model))
    return model.encode(prompt, placeholder)


def _any_plain_token(model) -> int:
    tok = _tokenizer(model)
    specials = special_ids(tok)
    for t in range(min(len(tok), model.cfg.d_vocab)):
        if exclusion_reason(tok, t, specials) is None:
            return t
    raise UnknownCandidateError("the tokenizer has no plain (non-special) token")


def word_candidates(model, prompt: Prompt, words: Sequence[str]) -> CandidateSet:
    """Candidates from words or phrases, tokenized as responses.

    Each is tokenized exactly as the chat template tokenizes a response consisting of it
    (`model.encode(prompt, word).response_ids()`); a word may be several tokens. A repeated
    word, or a word that tokenizes like an earlier one, is kept once (the first; counted in
    `excluded["duplicate"]`).

    Args:
        model: the `HookedRewardModel` (with a tokenizer).
        prompt: the prompt.
        words: the words or phrases.

    Returns:
        The `CandidateSet`.

    Raises:
        EmptyInputError: no word.
        TemplateError: a word that is not a string, or a template that tokenizes the prompt
            or suffix differently around some words.
        UnknownCandidateError: words that contain the unknown token (or tokenize to nothing).

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sweep import word_candidates
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> cands = word_candidates(model, "how bake bread", ["soup", "great question", "soup"])
        >>> cands.labels, cands.ids, cands.excluded
        (('soup', 'great question'), ((43,), (34, 35)), {'duplicate': 1})
    """
    words = list(words)
    if not words:
        raise EmptyInputError("the candidate word list is empty")
    bad_type = [w for w in words if not isinstance(w, str)]
    if bad_type:
        raise TemplateError(f"candidate words must be strings, got {bad_type[:5]}")
    n_given, words = len(words), list(dict.fromkeys(words))
    tok = _tokenizer(model)
    frame = sweep_frame(model, prompt)
    unk = getattr(tok, "unk_token_id", None)
    ids, unknown, mismatched = [], [], []
    for w in words:
        enc = model.encode(prompt, w)
        resp = enc.response_ids()
        if enc.prompt_ids() != frame.prompt_ids() or enc.suffix_ids() != frame.suffix_ids():
            mismatched.append(w)
        if not resp or (unk is not None and unk in resp):
            unknown.append(w)
        ids.append(resp)
    if unknown:
        raise UnknownCandidateError(
            f"{len(unknown)} candidate(s) are not in the vocabulary (they tokenize to the unknown "
            f"token or to nothing): {unknown[:10]}; drop them or pick another tokenizer"
        )
    if mismatched:
        raise TemplateError(
            f"the chat template tokenizes the prompt or suffix differently around {mismatched[:5]}"
            "; such words cannot share one prompt prefix"
        )
    first: dict[tuple[int, ...], int] = {}
    for i, c in enumerate(ids):
        first.setdefault(c, i)
    keep = sorted(first.values())
    return CandidateSet(
        tuple(words[i] for i in keep),
        tuple(ids[i] for i in keep),
        _duplicates(n_given - len(keep)),
    )


def _token_id(value) -> int:
    """An integer token id (Python, NumPy or 0-d tensor integer).

    Floats and bools are refused, never truncated.
    """
    try:
        if isinstance(value, bool):
            raise TypeError
        return operator.index(value)
    except TypeError:
        raise InvalidArgumentError(
            f"candidate token ids must be integers, got {value!r}; ids are never rounded"
        ) from None


def _duplicates(n: int) -> dict[str, int]:
    return {"duplicate": n} if n else {}


def _repeats(labels: Sequence[str], ids: Sequence[tuple[int, ...]]) -> list[str]:
    """`"label: ids"` of every candidate whose ids occurred earlier in the set."""
    seen: set[tuple[int, ...]] = set()
    out = []
    for label, c in zip(labels, ids, strict=True):
        if c in seen:
            out.append(f"{label}: {list(c)}")
        seen.add(c)
    return out
