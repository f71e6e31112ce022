"""Contrast pairs: two conversations that differ in one (planted or hypothesised) feature.

The ground-truth tools (`localization`,
`minimal_head_sets`, `atp_recall`,
`causal_ground_truth`,
`observational_ground_truth`) take a list of
`ContrastPair`. Fields:

==================== =====================================================================
`base`             `EncodedConversation` *without* the feature
                     (the corrupted run of denoising patching)
`edited`           the same conversation *with* the feature (the clean run; plays "chosen")
`edited_positions` positions in `edited` that carry the feature (the planted span)
`neutral_positions` positions in `edited` changed on purpose in a way that should not matter
                     (controls: a tool that ranks them high is wrong)
`feature`          the feature's name (pairs are grouped by it)
`rule_delta`       the reward difference the feature should cause, if known (else `None`)
==================== =====================================================================

`response_start` is `edited.response_start`. Build one from two texts with
`ContrastPair.from_texts` or from two id lists with `ContrastPair.from_ids`: the
edited positions are then found by diffing the ids. The zoo's own pairs
(`ExamplePair`, the same fields over zoo examples) are converted by
`as_contrast_pair`, which every tool calls on what it is given.

Examples:
    >>> pair = ContrastPair.from_ids([1, 3, 7, 4, 8, 9, 2], [1, 3, 7, 4, 8, 50, 2],
    ...                              response_start=4, feature="my_word")
    >>> pair.edited_positions, pair.response_start
    ((5,), 4)
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import ArgumentTypeError, InvalidArgumentError
from .inputs import EncodedConversation, as_encoded

__all__ = [
    "ContrastPair",
    "as_contrast_pair",
    "as_contrast_pairs",
    "as_conversation",
    "changed_positions",
    "encode_contrast",
    "is_pair",
    "pair_sides",
]


@dataclass(frozen=True)
class ContrastPair:
    """Two encodings differing in one feature; see the module docstring for the fields.

    Args:
        base: The conversation *without* the feature (the corrupted run).
        edited: The same conversation *with* the feature (the clean run; plays "chosen").
        edited_positions: Positions in `edited` that carry the feature.
        neutral_positions: Positions in `edited` changed in a way that should not matter.
        feature: The feature's name (pairs are grouped by it).
        rule_delta: The reward difference the feature should cause, if known.

    Examples:
        >>> from reward_lens_tl import EncodedConversation
        >>> pair = ContrastPair(EncodedConversation((1, 3, 7, 2), 2),
        ...                     EncodedConversation((1, 3, 9, 2), 2), edited_positions=(2,))
        >>> pair.response_start, pair.same_length
        (2, True)
    """

    base: EncodedConversation
    edited: EncodedConversation
    edited_positions: tuple[int, ...]
    neutral_positions: tuple[int, ...] = ()
    feature: str = "feature"
    rule_delta: float | None = None

    def __post_init__(self) -> None:
        """Check the encoded conversations and normalise the positions."""
        for name in ("base", "edited"):
            if not isinstance(getattr(self, name), EncodedConversation):
                raise InvalidArgumentError(
                    f"ContrastPair.{name} must be an EncodedConversation (use from_ids or "
                    f"from_texts), got {type(getattr(self, name)).__name__}"
                )
        n = len(self.edited)
        for name in ("edited_positions", "neutral_positions"):
            positions = tuple(int(p) for p in getattr(self, name))
            object.__setattr__(self, name, positions)
            bad = [p for p in positions if not 0 <= p < n]
            if bad:
                raise InvalidArgumentError(
                    f"ContrastPair.{name} {bad} outside the edited sequence [0, {n})"
                )
        if not self.edited_positions:
            raise InvalidArgumentError(
                "ContrastPair needs at least one edited position (the tokens carrying the "
                "feature); the two sequences are identical or the positions were not given"
            )

    @property
    def response_start(self) -> int:
        """Index of the response's first token (of the edited conversation)."""
        return self.edited.response_start

    @property
    def same_length(self) -> bool:
        """Whether base and edited have the same number of tokens."""
        return len(self.base) == len(self.edited)

    @classmethod
    def from_ids(
        cls,
        base_ids: Sequence[int],
        edited_ids: Sequence[int],
        *,
        response_start: int,
        edited_positions: Sequence[int] | None = None,
        neutral_positions: Sequence[int] = (),
        feature: str = "feature",
        base_response_start: int | None = None,
        rule_delta: float | None = None,
    ) -> ContrastPair:
        """From two id lists.

        `edited_positions=None` diffs the ids: every position of `edited` that is replaced or
        inserted relative to `base`.

        Args:
            base_ids: The token ids without the feature.
            edited_ids: The token ids with the feature.
            response_start: Index of the response's first token in `edited_ids`.
            edited_positions: Positions carrying the feature (`None`: found by diffing).
            neutral_positions: Positions changed in a way that should not matter.
            feature: The feature's name.
            base_response_start: The response's start in `base_ids` (`None`: `response_start`).
            rule_delta: The reward difference the feature should cause, if known.

        Returns:
            The contrast pair.

        Examples:
            >>> pair = ContrastPair.from_ids([1, 3, 7, 2], [1, 3, 7, 7, 2], response_start=2)
            >>> pair.edited_positions, pair.same_length
            ((3,), False)
        """
        edited = EncodedConversation(tuple(edited_ids), response_start)
        base_start = response_start if base_response_start is None else base_response_start
        base = EncodedConversation(tuple(base_ids), base_start)
        if edited_positions is None:
            edited_positions = changed_positions(base.ids, edited.ids)
        return cls(
            base, edited, tuple(edited_positions), tuple(neutral_positions), feature, rule_delta
        )

    @classmethod
    def from_texts(
        cls,
        model_or_tokenizer: Any,
        prompt,
        base_response: str,
        edited_response: str,
        *,
        feature: str = "feature",
        edited_positions: Sequence[int] | None = None,
        neutral_positions: Sequence[int] = (),
        rule_delta: float | None = None,
    ) -> ContrastPair:
        """From a prompt and two responses, encoded as the model's template would.

        Encoding uses a model's `encode`, or a tokenizer through `encode_conversation`.

        Args:
            model_or_tokenizer: A reward model (its `encode`) or a tokenizer.
            prompt: The prompt both responses answer.
            base_response: The response without the feature.
            edited_response: The response with the feature.
            feature: The feature's name.
            edited_positions: Positions carrying the feature (`None`: found by diffing).
            neutral_positions: Positions changed in a way that should not matter.
            rule_delta: The reward difference the feature should cause, if known.

        Returns:
            The contrast pair.

        Examples:
            >>> from reward_lens_tl import HookedRewardModel
            >>> from reward_lens_tl.zoo import zoo_path
            >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
            >>> pair = ContrastPair.from_texts(model, "explain how to bake bread",
            ...                                "great soup", "great soup great", feature="repeat")
            >>> pair.feature, pair.same_length
            ('repeat', False)
        """
        base = _encode(model_or_tokenizer, prompt, base_response)
        edited = _encode(model_or_tokenizer, prompt, edited_response)
        if edited_positions is None:
            edited_positions = changed_positions(base.ids, edited.ids)
        return cls(
            base, edited, tuple(edited_positions), tuple(neutral_positions), feature, rule_delta
        )


def _encode(model_or_tokenizer, prompt, response) -> EncodedConversation:
    if hasattr(model_or_tokenizer, "encode") and hasattr(model_or_tokenizer, "cfg"):
        return model_or_tokenizer.encode(prompt, response)
    from .inputs import encode_conversation

    return encode_conversation(model_or_tokenizer, prompt, response)


def changed_positions(base: Sequence[int], edited: Sequence[int]) -> tuple[int, ...]:
    """Positions of `edited` that are replaced or inserted relative to `base`.

    Args:
        base: The token ids without the feature.
        edited: The token ids with the feature.

    Returns:
        The positions of `edited` that differ, ascending.

    Examples:
        >>> changed_positions([1, 5, 6, 2], [1, 5, 9, 9, 2])
        (2, 3)
    """
    matcher = difflib.SequenceMatcher(a=list(base), b=list(edited), autojunk=False)
    out: list[int] = []
    for tag, _, _, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            out.extend(range(j1, j2))
    return tuple(out)


def as_contrast_pair(pair: Any) -> ContrastPair:
    """A `ContrastPair` from one, from a zoo `ExamplePair`, or from an `(edited, base)` tuple.

    A zoo pair may be any object with `base`, `edited` and `edited_positions`; a tuple holds encoded
    conversations (positions found by diffing).

    Args:
        pair: A `ContrastPair`, a zoo pair or an `(edited, base)` tuple of encodings.

    Returns:
        The contrast pair.

    Raises:
        InvalidArgumentError: `pair` is none of these.

    Examples:
        >>> from reward_lens_tl import EncodedConversation
        >>> edited = EncodedConversation((1, 3, 9, 2), 2)
        >>> base = EncodedConversation((1, 3, 7, 2), 2)
        >>> as_contrast_pair((edited, base)).edited_positions
        (2,)
    """
    if isinstance(pair, ContrastPair):
        return pair
    positions = _declared_positions(pair)
    if positions is not None:
        return ContrastPair(
            base=as_encoded(pair.base),
            edited=as_encoded(pair.edited),
            edited_positions=tuple(positions),
            neutral_positions=tuple(getattr(pair, "neutral_positions", ())),
            feature=str(pair.feature),
            rule_delta=getattr(pair, "rule_delta", None),
        )
    if (
        isinstance(pair, tuple)
        and len(pair) == 2
        and all(isinstance(p, EncodedConversation) for p in pair)
    ):
        edited, base = pair
        return ContrastPair(base, edited, changed_positions(base.ids, edited.ids))
    raise InvalidArgumentError(
        f"cannot use a {type(pair).__name__} as a contrast pair: build a "
        "reward_lens_tl.contrast.ContrastPair (from_texts / from_ids)"
    )


def _declared_positions(pair: Any) -> Sequence[int] | None:
    """The `edited_positions` an object with `base` and `edited` declares (`None`: none)."""
    if not (hasattr(pair, "edited") and hasattr(pair, "base")):
        return None
    return getattr(pair, "edited_positions", None)


def as_contrast_pairs(pairs: Sequence[Any]) -> list[ContrastPair]:
    """`as_contrast_pair` of each element of `pairs`.

    Args:
        pairs: Contrast pairs, zoo pairs or `(edited, base)` tuples.

    Returns:
        The contrast pairs.

    Examples:
        >>> from reward_lens_tl import EncodedConversation
        >>> edited = EncodedConversation((1, 3, 9, 2), 2)
        >>> base = EncodedConversation((1, 3, 7, 2), 2)
        >>> [p.edited_positions for p in as_contrast_pairs([(edited, base)])]
        [(2,)]
    """
    return [as_contrast_pair(p) for p in pairs]


def encode_contrast(pair) -> tuple[EncodedConversation, EncodedConversation]:
    """`(edited, base)` as encoded conversations (edited plays "chosen").

    Works for anything with `edited` and `base` (a `ContrastPair`, a zoo pair, two zoo examples).

    Args:
        pair: Anything with `edited` and `base` attributes.

    Returns:
        `(edited, base)`, each an `EncodedConversation`.

    Examples:
        >>> pair = ContrastPair.from_ids([1, 3, 7, 2], [1, 3, 9, 2], response_start=2)
        >>> edited, base = encode_contrast(pair)
        >>> edited.ids, base.ids
        ((1, 3, 9, 2), (1, 3, 7, 2))
    """
    return as_encoded(pair.edited), as_encoded(pair.base)


def as_conversation(model, item: Any) -> EncodedConversation:
    """One conversation, encoded: an `EncodedConversation`, a zoo `Example` or `(prompt, response)`.

    Text is encoded with `model.encode` (the model's chat template).

    Args:
        model: The reward model (its tokenizer encodes text).
        item: The conversation.

    Returns:
        The encoded conversation.

    Raises:
        ArgumentTypeError: `item` is none of these.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> as_conversation(model, ("how bake bread", "the oven")) == model.encode(
        ...     "how bake bread", "the oven")
        True
    """
    if isinstance(item, tuple) and len(item) == 2 and all(isinstance(x, str) for x in item):
        return model.encode(*item)
    if isinstance(item, EncodedConversation) or hasattr(item, "input_ids"):
        return as_encoded(item)
    raise ArgumentTypeError(
        f"expected an EncodedConversation, a zoo Example or (prompt, response) text, got "
        f"{type(item).__name__}"
    )


def is_pair(example: Any) -> bool:
    """Whether `example` is a pair `pair_sides` reads (not one conversation).

    Args:
        example: A pair or one conversation.

    Returns:
        Whether it is a pair.

    Examples:
        >>> from reward_lens_tl import EncodedConversation
        >>> one = EncodedConversation((1, 3, 9, 2), 2)
        >>> is_pair((one, one)), is_pair(("how bake bread", "the oven")), is_pair(one)
        (True, False, False)
    """
    if hasattr(example, "edited") and hasattr(example, "base"):
        return True
    if all(hasattr(example, a) for a in ("prompt", "chosen", "rejected")):
        return True
    return (
        isinstance(example, (tuple, list))
        and len(example) == 2
        and not all(isinstance(x, str) for x in example)
    )


def pair_sides(model, example: Any) -> tuple[EncodedConversation, EncodedConversation, str]:
    """The two sides of a pair, the one that should score higher first, and its group's name.

    - a `ContrastPair` or zoo `ExamplePair`: `(edited, base, feature)` (the edited side plays
      "chosen", the contrast convention);
    - a `PreferencePair` (text): `(chosen, rejected, subset or "pairs")`, encoded with the
      model's chat template;
    - a `(chosen, rejected)` tuple of conversations (`as_conversation`): `(.., .., "pairs")`.

    Args:
        model: The reward model (its tokenizer encodes text).
        example: The pair.

    Returns:
        `(first, second, group)`.

    Raises:
        ArgumentTypeError: `example` is not a pair.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.data import PreferencePair
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> chosen, rejected, group = pair_sides(
        ...     model, PreferencePair("how bake bread", "the oven", "the bomb", subset="demo"))
        >>> chosen == model.encode("how bake bread", "the oven"), group
        (True, 'demo')
    """
    if isinstance(example, ContrastPair) or (
        hasattr(example, "edited") and hasattr(example, "base")
    ):
        pair = as_contrast_pair(example)
        return pair.edited, pair.base, pair.feature
    if all(hasattr(example, a) for a in ("prompt", "chosen", "rejected")):  # a PreferencePair
        chosen = model.encode(example.prompt, example.chosen)
        rejected = model.encode(example.prompt, example.rejected)
        return chosen, rejected, str(getattr(example, "subset", None) or "pairs")
    if is_pair(example):
        return as_conversation(model, example[0]), as_conversation(model, example[1]), "pairs"
    raise ArgumentTypeError(
        f"expected a pair (ContrastPair, zoo ExamplePair, PreferencePair or a (chosen, rejected) "
        f"tuple of conversations), got {type(example).__name__}"
    )
