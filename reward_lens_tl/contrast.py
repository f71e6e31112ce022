"""Contrast pairs: two conversations that differ in one (planted or hypothesised) feature.

Placeholder kept minimal until the contrast-pair type lands (issue 15, item 7).
"""

from __future__ import annotations

from .inputs import EncodedConversation


def encode_example(example) -> EncodedConversation:
    """A zoo :class:`~reward_lens_tl.zoo.Example` (token ids, response start) as an
    :class:`EncodedConversation`."""
    return EncodedConversation(ids=tuple(example.input_ids), response_start=example.response_start)


def encode_contrast(pair) -> tuple[EncodedConversation, EncodedConversation]:
    """``(edited, base)`` as encoded conversations (edited plays "chosen")."""
    return encode_example(pair.edited), encode_example(pair.base)
