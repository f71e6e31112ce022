"""Tiny HF reward models with non-trivial weights, for tests, doctests and benchmarks.

Every parameter is perturbed after HF's initialisation (norm weights away from 1, biases away
from 0) so that folding mistakes show up as parity errors instead of hiding behind identity
norms.

Examples:
    >>> model = tiny_reward_model("qwen2")
    >>> type(model).__name__, model.config.num_labels
    ('Qwen2ForSequenceClassification', 1)
"""

from __future__ import annotations

from typing import Any, cast

import torch
import transformers
from torch import nn

from .armorm_module import LlamaForRewardModelWithGating, armorm_config
from .errors import InvalidArgumentError

__all__ = [
    "random_batch",
    "tiny_causal_lm",
    "tiny_reward_model",
    "tiny_tokenizer",
]

VOCAB = 97
PAD = 0

#: Vocabulary, special tokens and one reward output: shared by every tiny model, GPT-2 too.
_TOKENS = dict(vocab_size=VOCAB, pad_token_id=PAD, bos_token_id=1, eos_token_id=2, num_labels=1)
_COMMON = dict(
    _TOKENS,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
)

FAMILIES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "llama": ("LlamaConfig", "LlamaForSequenceClassification", dict(head_dim=32)),
    "mistral": ("MistralConfig", "MistralForSequenceClassification", dict(sliding_window=5)),
    "qwen2": ("Qwen2Config", "Qwen2ForSequenceClassification", {}),
    "gemma2": (
        "Gemma2Config",
        "Gemma2ForSequenceClassification",
        dict(
            head_dim=16,
            sliding_window=4,
            query_pre_attn_scalar=24,
            attn_logit_softcapping=5.0,
            final_logit_softcapping=3.0,
            hidden_activation="gelu_pytorch_tanh",
        ),
    ),
    "qwen3": ("Qwen3Config", "Qwen3ForSequenceClassification", dict(head_dim=16)),
}


def perturb_(model: nn.Module, scale: float = 0.05, seed: int = 0) -> nn.Module:
    """Add Gaussian noise to every parameter of `model`, in place.

    Args:
        model: The model.
        scale: Standard deviation of the noise.
        seed: Seed of the noise.

    Returns:
        `model`.
    """
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.randn(p.shape, generator=gen))
    return model


def tiny_config(family: str, **overrides: Any):
    """A tiny transformers config of `family`.

    Args:
        family: The model family (as for `tiny_reward_model`).
        **overrides: Config fields to override.

    Returns:
        The config.
    """
    if family == "gpt2":
        kw = dict(_TOKENS, n_embd=64, n_layer=2, n_head=4, n_positions=64)
        return transformers.GPT2Config(**{**kw, **overrides})
    if family == "armorm":
        armorm: dict[str, Any] = dict(
            _COMMON,
            num_objectives=3,
            gating_hidden_dim=32,
            gating_n_hidden=2,
            gating_temperature=10.0,
            gating_token_pattern=[3, 4],
            objective_names=["helpful", "harmless", "verbose"],
        )
        armorm.pop("num_labels")
        return armorm_config(**{**armorm, **overrides})
    config_name, _, extra = FAMILIES[family]
    return getattr(transformers, config_name)(**{**_COMMON, **extra, **overrides})


def tiny_reward_model(family: str, seed: int = 0, **overrides: Any) -> nn.Module:
    """A perturbed tiny reward model of `family`, in eval mode, float32.

    Args:
        family: One of `llama`, `mistral`, `qwen2`, `gemma2`, `gpt2`, `armorm`, `qwen3`.
        seed: The seed of the weights.
        **overrides: Fields of the HF config to change.

    Returns:
        The HF model (`*ForSequenceClassification`, or the ArmoRM module).

    Examples:
        >>> hf = tiny_reward_model("llama")
        >>> type(hf).__name__, hf.config.num_hidden_layers, hf.config.hidden_size
        ('LlamaForSequenceClassification', 2, 64)
    """
    torch.manual_seed(seed)
    config = tiny_config(family, **overrides)
    model: nn.Module
    if family == "gpt2":
        model = transformers.GPT2ForSequenceClassification(config)
    elif family == "armorm":
        gated = LlamaForRewardModelWithGating(config)
        with torch.no_grad():
            gated.reward_transform_matrix.copy_(
                torch.eye(config.num_objectives)
                + 0.3 * torch.randn(config.num_objectives, config.num_objectives)
            )
        model = gated
    else:
        model = getattr(transformers, FAMILIES[family][1])(config)
    return perturb_(model, seed=seed).eval()


def random_batch(
    batch: int,
    lengths: list[int] | None = None,
    seq_len: int = 12,
    seed: int = 0,
    vocab: int = VOCAB,
    pad: int = PAD,
    low: int = 3,
    padding_side: str = "left",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random ids and their attention mask, **left** padded like every batch the library builds.

    The pad id never appears inside a sequence. Row `i` holds the same `lengths[i]` random ids in
    every layout: `"left"` is the library's (pads after each row's first token, so the row is
    `ids[i, token_columns(lengths[i], width)]`), `"right"` plain right padding, and
    `"leading"` every pad before the first token (what an HF tokenizer with
    `padding_side="left"` builds).

    Args:
        batch: The number of rows.
        lengths: Each row's number of real tokens (default: every row `seq_len`).
        seq_len: The row length when `lengths` is not given.
        seed: The seed of the ids.
        vocab: The ids are below this.
        pad: The pad id.
        low: The ids are at least this (below it: the special tokens).
        padding_side: `"left"`, `"right"` or `"leading"` (above).

    Returns:
        `(input_ids, attention_mask)`.

    Examples:
        >>> ids, mask = random_batch(2, [3, 2], vocab=9)
        >>> mask.tolist(), random_batch(2, [3, 2], vocab=9, padding_side="right")[1].tolist()
        ([[1, 1, 1], [1, 0, 1]], [[1, 1, 1], [1, 1, 0]])
        >>> random_batch(2, [3, 2], vocab=9, padding_side="leading")[1].tolist()
        [[1, 1, 1], [0, 1, 1]]
    """
    from .padding import token_columns

    if padding_side not in ("left", "right", "leading"):
        raise InvalidArgumentError(
            f"padding_side must be 'left', 'right' or 'leading', got {padding_side!r}"
        )
    gen = torch.Generator().manual_seed(seed)
    lengths = lengths or [seq_len] * batch
    width = max(lengths)
    ids = torch.full((len(lengths), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, n in enumerate(lengths):
        if padding_side == "leading":
            cols = torch.arange(width - n, width)
        else:
            cols = token_columns(n, width, cast(Any, padding_side))
        ids[i, cols] = torch.randint(low, vocab, (n,), generator=gen)
        mask[i, cols] = 1
    return ids, mask


def tiny_tokenizer(vocab_size: int = VOCAB, chat_template: bool = True):
    """A word-level tokenizer, optionally with a chat template.

    Its vocabulary is `<pad> <bos> <eos> <|user|> <|assistant|> <unk> w6 …` (ids 0–5 special; words
    `w6` … `w{V-1}`).

    Args:
        vocab_size: The vocabulary size `V`.
        chat_template: Give it a chat template (`<|user|>` / `<|assistant|>` turns).

    Returns:
        The tokenizer (a `PreTrainedTokenizerFast`).

    Examples:
        >>> tok = tiny_tokenizer()
        >>> len(tok), tok.convert_tokens_to_ids("w7"), tok.pad_token
        (97, 7, '<pad>')
    """
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<bos>", "<eos>", "<|user|>", "<|assistant|>", "<unk>"]
    vocab = {tok: i for i, tok in enumerate(specials)}
    vocab.update({f"w{i}": i for i in range(len(specials), vocab_size)})
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(
        single="<bos> $A", special_tokens=[("<bos>", 1)]
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        unk_token="<unk>",
        additional_special_tokens=["<|user|>", "<|assistant|>"],
    )
    if chat_template:
        tok.chat_template = (
            "{{ bos_token }}{% for m in messages %}"
            "{{ '<|user|>' if m['role'] == 'user' else '<|assistant|>' }} {{ m['content'] }} "
            "{% endfor %}{% if add_generation_prompt %}<|assistant|> {% else %}{{ eos_token }}"
            "{% endif %}"
        )
    return tok


def tiny_causal_lm(family: str, seed: int = 0, head: str = "lm", **overrides: Any):
    """`(hf_model, tokenizer)`.

    A perturbed tiny judge/PRM backbone of `family` with `head` `"lm"` (the causal LM:
    `*ForCausalLM`, GPT-2's `GPT2LMHeadModel`), `"value"` (`*ForTokenClassification` with one label)
    or `"classifier"` (its `score` replaced by `Sequential(Linear, ReLU, Linear)` with two labels,
    Qwen2.5-Math-PRM's head), and `tiny_tokenizer` (words `w6` … `w96`).

    Args:
        family: A family of `tiny_reward_model`.
        seed: The seed of the weights.
        head: `"lm"`, `"value"` or `"classifier"` (above).
        **overrides: Fields of the HF config to change.

    Returns:
        `(hf_model, tokenizer)`.

    Examples:
        >>> model, tok = tiny_causal_lm("qwen2")
        >>> type(model).__name__, tok.convert_tokens_to_ids("w7")
        ('Qwen2ForCausalLM', 7)
    """
    if head not in ("lm", "value", "classifier"):
        raise InvalidArgumentError(f"head must be 'lm', 'value' or 'classifier', got {head!r}")
    torch.manual_seed(seed)
    labels = {"lm": 1, "value": 1, "classifier": 2}[head]
    config = tiny_config(family, **{"num_labels": labels, **overrides})
    if family == "gpt2":
        name = "GPT2LMHeadModel" if head == "lm" else "GPT2ForTokenClassification"
    else:
        suffix = "ForCausalLM" if head == "lm" else "ForTokenClassification"
        name = FAMILIES[family][1].replace("ForSequenceClassification", suffix)
    model = getattr(transformers, name)(config)
    if head == "classifier":
        d = config.hidden_size
        model.score = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 2))
    return perturb_(model, seed=seed).eval(), tiny_tokenizer(chat_template=True)
