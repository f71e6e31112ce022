"""The training loop shared by the zoo models: shapes, optimisation settings, determinism.

Internal (no public names): used by `reward_lens_tl.zoo.train`.

Runs are bitwise reproducible for a seed on a given machine and torch build: every random draw
comes from a seeded `random.Random` or the seeded torch generator, and training runs with a
fixed thread count and `torch.use_deterministic_algorithms(True)`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from typing import TypeVar

import torch
import transformers
from torch import Tensor, nn

from .data import PAD_ID
from .vocab import BOS, EOS, VOCAB

__all__: list[str] = []

TRAIN_THREADS = 2
M = TypeVar("M", bound=nn.Module)


@dataclass(frozen=True)
class ModelShape:
    """Llama backbone hyper-parameters shared by the zoo models.

    Args:
        hidden_size: The residual width.
        num_hidden_layers: The number of layers.
        num_attention_heads: Query heads per layer.
        num_key_value_heads: Key-value heads per layer.
        intermediate_size: The MLP width.
        max_position_embeddings: The context length.
        initializer_range: The initialisation's standard deviation.
    """

    hidden_size: int = 64
    num_hidden_layers: int = 3
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    intermediate_size: int = 128
    max_position_embeddings: int = 64
    initializer_range: float = 0.08

    def llama_kwargs(self) -> dict:
        """Keyword arguments of `LlamaConfig` for this shape and the zoo vocabulary.

        Returns:
            The keyword arguments.
        """
        return dict(
            vocab_size=len(VOCAB),
            hidden_size=self.hidden_size,
            num_hidden_layers=self.num_hidden_layers,
            num_attention_heads=self.num_attention_heads,
            num_key_value_heads=self.num_key_value_heads,
            intermediate_size=self.intermediate_size,
            max_position_embeddings=self.max_position_embeddings,
            initializer_range=self.initializer_range,
            pad_token_id=PAD_ID,
            bos_token_id=VOCAB[BOS],
            eos_token_id=VOCAB[EOS],
            tie_word_embeddings=False,
        )


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings.

    Args:
        curriculum: `((max response words, steps), ...)`.
        batch: Examples per step.
        lr: The peak learning rate.
        warmup: Warm-up steps.
        weight_decay: AdamW's weight decay.
        clip: The gradient-norm clip.
        threads: Torch threads while training (results are reproducible for a fixed count).
    """

    curriculum: tuple[tuple[int, int], ...] = ((3, 400), (5, 400), (8, 400), (12, 2300))
    batch: int = 32
    lr: float = 2e-3
    warmup: int = 100
    weight_decay: float = 0.01
    clip: float = 1.0
    #: torch threads while training (results are reproducible for a fixed count).
    threads: int = TRAIN_THREADS

    @property
    def steps(self) -> int:
        """The total number of steps."""
        return sum(n for _, n in self.curriculum)

    def fast(self) -> TrainConfig:
        """A tiny-steps, single-thread variant (for determinism tests).

        Returns:
            The variant.
        """
        return replace(self, curriculum=((3, 4), (12, 4)), batch=8, warmup=2, threads=1)


@contextmanager
def deterministic_torch(seed: int, threads: int = TRAIN_THREADS) -> Iterator[None]:
    """Seed torch, fix the thread count and enable deterministic algorithms (restored after).

    Args:
        seed: The torch seed.
        threads: The thread count.

    Yields:
        Nothing; the settings hold inside the block.
    """
    prev_threads = torch.get_num_threads()
    prev_det = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(seed)
    try:
        yield
    finally:
        torch.set_num_threads(prev_threads)
        torch.use_deterministic_algorithms(prev_det)


def curriculum(cfg: TrainConfig) -> Iterator[int]:
    """The max response length for every step.

    Args:
        cfg: The training configuration.

    Yields:
        The max response length of each step.
    """
    for max_words, steps in cfg.curriculum:
        yield from [max_words] * steps


def make_optimizer(
    model: nn.Module, cfg: TrainConfig
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW with linear warm-up then a cosine decay to 10% of the peak.

    Args:
        model: The model to train.
        cfg: The training configuration.

    Returns:
        The optimiser and its scheduler.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    total = max(cfg.steps, 1)

    def factor(step: int) -> float:
        if step < cfg.warmup:
            return (step + 1) / cfg.warmup
        progress = (step - cfg.warmup) / max(total - cfg.warmup, 1)
        return 0.1 + 0.45 * (1 + math.cos(math.pi * min(progress, 1.0)))

    return opt, torch.optim.lr_scheduler.LambdaLR(opt, factor)


def run_steps(
    model: nn.Module, cfg: TrainConfig, loss_fn: Callable[[int, int], Tensor]
) -> list[float]:
    """The shared loop: `loss_fn(step, max_words)` → loss.

    Args:
        model: The model to train.
        cfg: The training configuration.
        loss_fn: The loss of one step.

    Returns:
        The loss per step.
    """
    opt, sched = make_optimizer(model, cfg)
    model.train()
    losses = []
    for step, max_words in enumerate(curriculum(cfg)):
        loss = loss_fn(step, max_words)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
        opt.step()
        sched.step()
        losses.append(loss.item())
    model.eval()
    return losses


def train_model(
    name: str,
    seed: int,
    cfg: TrainConfig,
    build: Callable[[], M],
    loss: Callable[[M, random.Random, int], Tensor],
) -> tuple[M, list[float]]:
    """Build a model under `deterministic_torch` and train it with `run_steps`.

    Args:
        name: The model's name (part of the random seed).
        seed: The random seed.
        cfg: The training configuration.
        build: Builds the fresh model.
        loss: `loss(model, rng, max_words)` draws its batch from `rng`, seeded
            `"{seed}:{name}"`.

    Returns:
        The model (eval mode) and its per-step losses.
    """
    rng = random.Random(f"{seed}:{name}")
    with deterministic_torch(seed, cfg.threads):
        model = build()
        losses = run_steps(model, cfg, lambda step, max_words: loss(model, rng, max_words))
    return model, losses


def training_metadata(
    name: str, seed: int, fast: bool, cfg: TrainConfig, losses: list[float]
) -> dict:
    """What every zoo model's `metadata.json` records about its training.

    Args:
        name: The model's name.
        seed: The training seed.
        fast: Whether the training was the fast one.
        cfg: The training configuration.
        losses: The per-step losses.

    Returns:
        The metadata.
    """
    tail = losses[-50:]
    return {
        "name": name,
        "seed": seed,
        "fast": fast,
        "steps": cfg.steps,
        "train_config": asdict(cfg),
        "final_loss": sum(tail) / max(len(tail), 1),
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
    }
