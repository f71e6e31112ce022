"""The word-level tokenizer and chat template of the zoo models.

Built with the `tokenizers` library (`WordLevel` model, whitespace pre-tokenizer) and wrapped
as a `transformers.PreTrainedTokenizerFast`. It adds no special tokens by itself; the chat
template writes them:

`<bos> <|user|> words <|end|> <|assistant|> words <|end|> <eos>`

(turns repeat for multi-turn chats). `<eos>` closes a conversation that ends with an assistant
turn, so a sequence classifier reads the reward there. `add_generation_prompt=True` ends the
prompt with the `<|assistant|>` header instead. `<pad>` is id 0 and the tokenizer pads on
the right, for HF's own models (which count positions from column 0); reward-lens-tl ignores
that setting and left-pads its batches (`reward_lens_tl.inputs.pad_batch`).

`extra_words` appends words after the task vocabulary (the zoo's judge and PRM use it), so every
existing token keeps its id (the first example).

Examples:
    >>> wide = build_tokenizer(extra_words=("yes", "no"))
    >>> wide.convert_tokens_to_ids(["<pad>", "soup", "yes", "no"]) == [0, VOCAB["soup"], len(VOCAB),
    ...                                                                 len(VOCAB) + 1]
    True

    >>> tok = build_tokenizer()
    >>> chat = [{"role": "user", "content": "how bake bread"},
    ...         {"role": "assistant", "content": "soup"}]
    >>> tok.apply_chat_template(chat, tokenize=False)
    '<bos><|user|> how bake bread <|end|> <|assistant|> soup <|end|> <eos>'
    >>> tok.convert_ids_to_tokens(tok.apply_chat_template(chat[:1], add_generation_prompt=True,
    ...                                                   return_dict=False))
    ['<bos>', '<|user|>', 'how', 'bake', 'bread', '<|end|>', '<|assistant|>']
"""

from __future__ import annotations

from collections.abc import Sequence

from tokenizers import AddedToken, Tokenizer, models, normalizers, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from ..errors import InvalidArgumentError
from .vocab import (
    ASSISTANT,
    BOS,
    END,
    EOS,
    PAD,
    SPECIAL_TOKENS,
    UNK,
    USER,
    VOCAB,
)

__all__ = [
    "CHAT_TEMPLATE",
    "GATING_TOKEN_PATTERN",
    "build_tokenizer",
]

#: Roles are matched literally (never concatenated into control tokens). Assistant text is
#: wrapped in `{% generation %}` so `return_assistant_tokens_mask=True` works.
CHAT_TEMPLATE = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'user' %}"
    "{{- '<|user|> ' + message['content'] + ' <|end|> ' }}"
    "{%- elif message['role'] == 'assistant' %}"
    "{{- '<|assistant|> ' }}{% generation %}{{ message['content'] + ' <|end|>' }}"
    "{% endgeneration %}{{ ' ' }}"
    "{%- else %}"
    "{{- raise_exception('this chat template supports only the user and assistant roles') }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|assistant|>' }}"
    "{%- elif messages[-1]['role'] == 'assistant' %}{{- eos_token }}"
    "{%- endif %}"
)

#: Token ids of the assistant header; the ArmoRM-style gate reads the hidden state there.
GATING_TOKEN_PATTERN: tuple[int, ...] = (VOCAB[ASSISTANT],)
ROLE_TOKENS: tuple[str, ...] = (USER, ASSISTANT, END)


def extended_vocab(extra_words: Sequence[str] = ()) -> dict[str, int]:
    """The task vocabulary with `extra_words` appended (ids `len(VOCAB)`, `len(VOCAB) + 1`, ...).

    Args:
        extra_words: Words to append; each must be a new, lower-case word without whitespace.

    Returns:
        Word to id.

    Raises:
        InvalidArgumentError: When an extra word is not a new lower-case word.

    Examples:
        >>> extended_vocab(("b",))["b"] == len(VOCAB)
        True
        >>> extended_vocab(("soup",))
        Traceback (most recent call last):
        ...
        reward_lens_tl.errors.InvalidArgumentError: extra word 'soup': not a new lower-case word
    """
    vocab = dict(VOCAB)
    for word in extra_words:
        if word in vocab or word != word.lower() or not word or word.split() != [word]:
            raise InvalidArgumentError(f"extra word {word!r}: not a new lower-case word")
        vocab[word] = len(vocab)
    return vocab


def build_tokenizer(
    model_max_length: int = 64, extra_words: Sequence[str] = ()
) -> PreTrainedTokenizerFast:
    """A fresh `PreTrainedTokenizerFast` over the task vocabulary, plus `extra_words` after it.

    See the module docstring.

    Args:
        model_max_length: The tokenizer's `model_max_length`.
        extra_words: Words appended after the task vocabulary.

    Returns:
        The tokenizer.

    Examples:
        >>> from reward_lens_tl.zoo import build_tokenizer
        >>> tok = build_tokenizer()
        >>> tok.convert_ids_to_tokens(tok("How bake XYZZY").input_ids)
        ['how', 'bake', '<unk>']
        >>> tok.pad_token_id, tok.padding_side, tok.model_max_length
        (0, 'right', 64)
    """
    core = Tokenizer(models.WordLevel(vocab=extended_vocab(extra_words), unk_token=UNK))
    core.normalizer = normalizers.Lowercase()
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token=BOS,
        eos_token=EOS,
        unk_token=UNK,
        pad_token=PAD,
        extra_special_tokens=list(ROLE_TOKENS),
        padding_side="right",  # for plain HF use of the zoo checkpoints (arange positions)
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok
