"""Where the shipped zoo models live and how to load them (offline, from local directories).

Examples:
    >>> zoo_path("scalar").name
    'scalar'
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from torch import nn
from transformers import (
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    PreTrainedTokenizerBase,
)

from ..armorm_module import ARMORM_ARCHITECTURE, LlamaForRewardModelWithGating
from ..checkpoint import SAFE_KWARGS, checkpoint_tokenizer
from ..errors import MissingFileError, UnknownNameError
from .task import FEATURES, ConversationTask, ScoringRule
from .tokenizer import build_tokenizer

__all__ = [
    "ZOO_NAMES",
    "ZooTask",
    "load_metadata",
    "load_model",
    "load_task",
    "load_tokenizer",
    "zoo_path",
]

MODELS_DIR = Path(__file__).resolve().parent / "models"
ZOO_NAMES: tuple[str, ...] = ("scalar", "multi", "reference", "policy", "judge", "prm")


def zoo_path(name: str = "scalar") -> Path:
    """Directory of a shipped zoo model.

    Args:
        name: `scalar`, `multi`, `reference`, `policy`, or the generative `judge` and token
            `prm` of `reward_lens_tl.zoo.judge` and `reward_lens_tl.zoo.prm`.

    Returns:
        The model's folder.

    Raises:
        UnknownNameError: When `name` is not a zoo model.

    Examples:
        >>> from reward_lens_tl.zoo import zoo_path
        >>> path = zoo_path("judge")
        >>> path.name, (path / "config.json").is_file(), (path / "model.safetensors").is_file()
        ('judge', True, True)
        >>> zoo_path("giant")
        Traceback (most recent call last):
        ...
        reward_lens_tl.errors.UnknownNameError: unknown zoo model 'giant'; expected one of (...)
    """
    if name not in ZOO_NAMES:
        raise UnknownNameError(f"unknown zoo model {name!r}; expected one of {ZOO_NAMES}")
    return MODELS_DIR / name


def _resolve(name_or_path: str | Path) -> Path:
    if isinstance(name_or_path, str) and name_or_path in ZOO_NAMES:
        return zoo_path(name_or_path)
    return Path(name_or_path)


def load_model(name_or_path: str | Path = "scalar") -> nn.Module:
    """A zoo model in eval mode, by name or directory, built from its `config.json`.

    Args:
        name_or_path: A zoo model's name or a folder.

    Returns:
        The HF model.

    Examples:
        The scalar model's rewards are in the hidden rule's units up to a constant: the rule
        scores these two responses 5.0 and −2.0, 7.0 apart.

        >>> import torch
        >>> from reward_lens_tl.zoo import load_model, load_task
        >>> model = load_model("scalar")
        >>> type(model).__name__, model.training
        ('LlamaForSequenceClassification', False)
        >>> task = load_task().task
        >>> good = task.make_example(("how", "bake", "bread"), ("oven", "flour"))
        >>> bad = task.make_example(("how", "bake", "bread"), ("bomb", "rain"))
        >>> with torch.no_grad():
        ...     rewards = model(input_ids=torch.tensor([good.input_ids, bad.input_ids])).logits
        >>> good.score - bad.score, round(float(rewards[0, 0] - rewards[1, 0]), 1)
        (7.0, 7.2)
    """
    path = _resolve(name_or_path)
    arch = json.loads((path / "config.json").read_text())["architectures"][0]
    model: nn.Module
    if arch == ARMORM_ARCHITECTURE:
        model = LlamaForRewardModelWithGating.from_pretrained(path, **SAFE_KWARGS)
    elif arch == "LlamaForCausalLM":
        model = AutoModelForCausalLM.from_pretrained(path, **SAFE_KWARGS)
    else:
        model = AutoModelForSequenceClassification.from_pretrained(path, **SAFE_KWARGS)
    return model.eval()


def load_tokenizer(name_or_path: str | Path = "scalar") -> PreTrainedTokenizerBase:
    """The tokenizer of a zoo model, by name or directory.

    It is read by `reward_lens_tl.checkpoint.checkpoint_tokenizer`, which never downloads.

    Args:
        name_or_path: A zoo model's name or a folder.

    Returns:
        The tokenizer.

    Raises:
        MissingFileError: When the folder holds no tokenizer files.

    Examples:
        >>> load_tokenizer("scalar").eos_token
        '<eos>'
    """
    path = _resolve(name_or_path)
    tokenizer = checkpoint_tokenizer(path)
    if tokenizer is None:
        raise MissingFileError(f"{path} holds no tokenizer files (tokenizer.json)")
    return tokenizer


def load_metadata(name_or_path: str | Path = "scalar") -> dict:
    """The `metadata.json` of a zoo model, by name or directory.

    Args:
        name_or_path: A zoo model's name or a folder.

    Returns:
        The metadata.

    Examples:
        >>> from reward_lens_tl.zoo import load_metadata
        >>> meta = load_metadata("prm")
        >>> meta["name"], meta["planted_sizes"], meta["quality"]["shortcut_fooled_rate"]
        ('prm', {'correctness': 3.0, 'shortcut': 4.5}, 1.0)
    """
    return json.loads((_resolve(name_or_path) / "metadata.json").read_text())


@dataclass
class ZooTask:
    """The synthetic task, its hidden rule and the tokenizer every zoo model shares.

    Args:
        task: The conversation task.
        tokenizer: The shared tokenizer.
        features: The planted features.

    Examples:
        The shared tokenizer's chat template gives the task's own ids:

        >>> from reward_lens_tl.zoo import load_task
        >>> zoo = load_task()
        >>> zoo.features, zoo.rule.harmful
        (('topic_match', 'harmful', 'length', 'sycophancy'), -3.0)
        >>> ex = zoo.task.make_example(("how", "bake", "bread"), ("oven", "bomb"))
        >>> zoo.tokenizer.apply_chat_template(ex.messages, return_dict=False) == list(ex.input_ids)
        True
    """

    task: ConversationTask
    tokenizer: PreTrainedTokenizerBase
    features: tuple[str, ...] = field(default=FEATURES)

    @property
    def rule(self) -> ScoringRule:
        """The task's hidden scoring rule."""
        return self.task.rule


def load_task() -> ZooTask:
    """The task objects; the tokenizer comes from the shipped files when present.

    Returns:
        The task, its rule and the tokenizer.

    Examples:
        >>> from reward_lens_tl.zoo import load_task
        >>> zoo = load_task()
        >>> ex = zoo.task.make_example(("how", "bake", "bread"),
        ...                            ("great", "question", "oven", "bomb"))
        >>> ex.score, ex.contributions
        (3.5, {'topic_match': 2.0, 'harmful': -3.0, 'length': 2.0, 'sycophancy': 2.5})
        >>> zoo.tokenizer.pad_token_id, zoo.tokenizer.eos_token
        (0, '<eos>')
    """
    shipped = zoo_path("scalar") / "tokenizer.json"
    tokenizer = load_tokenizer("scalar") if shipped.exists() else build_tokenizer()
    return ZooTask(task=ConversationTask(), tokenizer=tokenizer)
