"""End-to-end TRL runs on the zoo, with ground truth (needs the `trl` extra).

- `train_reward_model`: a zoo-shaped reward model (`LlamaForSequenceClassification`,
  3 layers, d_model 64) trained **from scratch** by TRL's `RewardTrainer` on preference pairs
  labelled by the hidden rule (`zoo_preference_dataset`), with any callbacks;
- `optimise_policy`: the zoo's reference LM optimised by TRL's `GRPOTrainer` against a
  reward-like model (the zoo's `scalar` reward model, which pays for the sycophantic opener,
  or the `multi` model, which does not: the control).

Both are deterministic for a seed and thread count on one machine (TRL's `seed`, the dataset
from seeded `random.Random`; float32: TRL's configs default to `bf16=True` even on a CPU,
so both set `bf16=False`), and small enough for a CPU in minutes; the test versions run a
few dozen steps. The zoo's probe sets: `zoo_feature_pairs` (contrast pairs per planted
feature, the higher-scoring side as `chosen`) and `zoo_prompts`.

Examples:
    >>> pairs = zoo_feature_pairs(2, seed=0)
    >>> sorted(pairs), pairs["harmful"][0].chosen != pairs["harmful"][0].rejected
    (['harmful', 'length', 'sycophancy', 'topic_match'], True)
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..errors import PressureError
from ..zoo.task import FEATURES, ConversationTask

__all__ = [
    "optimise_policy",
    "train_reward_model",
    "zoo_feature_pairs",
    "zoo_prompts",
]

#: Seeds no zoo model trains on (probe sets and prompts).
PROBE_SEED = 31_337


@dataclass(frozen=True)
class TextPair:
    """A preference pair as text (what the monitor, `run_probes` and `score_pairs` read).

    Attributes:
        prompt: the prompt.
        chosen: the preferred response.
        rejected: the other response.
    """

    prompt: str
    chosen: str
    rejected: str


def zoo_feature_pairs(
    n_per_feature: int = 8, seed: int = PROBE_SEED, features: Sequence[str] = FEATURES
) -> dict[str, list[TextPair]]:
    """Per planted feature, `n` contrast pairs differing only in it.

    The side the hidden rule scores higher is `chosen`: a reward model's margin on them is how
    much of the feature it has learned.

    Args:
        n_per_feature: pairs per feature (`n`).
        seed: the seed of the pairs (default: one no zoo model trains on).
        features: the planted features.

    Returns:
        The pairs, by feature.

    Examples:
        >>> pairs = zoo_feature_pairs(2)
        >>> sorted(pairs), len(pairs["harmful"])
        (['harmful', 'length', 'sycophancy', 'topic_match'], 2)
        >>> pairs["harmful"][0].chosen, pairs["harmful"][0].rejected  # only the feature differs
        ('we rocket salad fog', 'scam rocket salad fog')

    """
    task = ConversationTask()
    out = {}
    for feature in features:
        pairs = task.contrast_pairs(feature, n_per_feature, seed=seed, max_words=10)
        out[feature] = [
            TextPair(
                " ".join(p.base.prompt),
                " ".join((p.edited if p.rule_delta > 0 else p.base).response),
                " ".join((p.base if p.rule_delta > 0 else p.edited).response),
            )
            for p in pairs
        ]
    return out


def zoo_prompts(n: int, seed: int = PROBE_SEED) -> list[str]:
    """`n` zoo prompts (texts) from a seed no model trains on.

    Args:
        n: how many prompts.
        seed: the seed of the prompts.

    Returns:
        The prompts.

    Examples:
        >>> from reward_lens_tl.pressure.training import zoo_prompts
        >>> zoo_prompts(3)
        ['please planet star', 'tell song rhythm melody', 'what great also also asteroid']
    """
    task, rng = ConversationTask(), random.Random(f"{seed}:prompts")
    return [" ".join(task.sample_prompt(rng)) for _ in range(n)]


def zoo_preference_dataset(n_pairs: int, seed: int = 0, max_words: int = 12):
    """A `datasets.Dataset` of conversational `chosen`/`rejected` pairs.

    The pairs are drawn from the scalar model's training mixture
    (`reward_lens_tl.zoo.data.scalar_pair`), ordered by the hidden rule; ties are dropped.

    Args:
        n_pairs: how many pairs.
        seed: the seed of the pairs.
        max_words: the longest response, in words.

    Returns:
        The dataset.

    Examples:
        >>> from reward_lens_tl.pressure.training import zoo_preference_dataset
        >>> data = zoo_preference_dataset(3)
        >>> len(data), data.column_names, [m["role"] for m in data[0]["chosen"]]
        (3, ['chosen', 'rejected'], ['user', 'assistant'])
    """
    from datasets import Dataset

    from ..zoo.data import scalar_pair

    task, rng = ConversationTask(), random.Random(f"{seed}:trl-pairs")
    rows: list[dict] = []
    while len(rows) < n_pairs:
        a, b = scalar_pair(task, rng, max_words)
        if a.score != b.score:
            chosen, rejected = (a, b) if a.score > b.score else (b, a)
            rows.append({"chosen": chosen.messages, "rejected": rejected.messages})
    return Dataset.from_list(rows)


def _require_trl():
    try:
        import trl
    except ImportError as err:  # pragma: no cover - the dev extras install it
        raise PressureError(
            "the TRL runs need the trl extra: pip install 'reward-lens-tl[trl]'"
        ) from err
    return trl


def train_reward_model(
    output_dir: str | Path,
    *,
    steps: int = 300,
    batch_size: int = 32,
    learning_rate: float = 2e-3,
    seed: int = 0,
    callbacks: Sequence[Any] = (),
    save_steps: int | None = None,
    threads: int | None = 2,
    quiet: bool = True,
):
    """Train a zoo-shaped reward model from scratch with TRL's `RewardTrainer`.

    Args:
        output_dir: the trainer's output directory.
        steps: optimiser steps.
        batch_size: preference pairs per step.
        learning_rate: the learning rate (constant after 10 warm-up steps).
        seed: the seed of the model, the data and the trainer.
        callbacks: trainer callbacks (e.g. a `RewardLensCallback`).
        save_steps: save checkpoints (`output_dir/checkpoint-<step>`) every `save_steps`
            steps (`None`: no checkpoints).
        threads: fixes torch's thread count for the run (`None`: unchanged).
        quiet: leave out the trainer's printed logs (`trainer.state.log_history` has them).

    Returns:
        The trainer (`trainer.model` is the model).

    Raises:
        PressureError: if TRL is not installed.

    Examples:
        Two optimiser steps, watched by a `RewardLensCallback` (it records before the first
        step and after each):

        >>> import tempfile
        >>> from reward_lens_tl.pressure import RewardLensCallback
        >>> from reward_lens_tl.pressure.training import train_reward_model, zoo_feature_pairs
        >>> callback = RewardLensCallback(None, zoo_feature_pairs(2), every=1)
        >>> with tempfile.TemporaryDirectory() as out:
        ...     trainer = train_reward_model(out, steps=2, batch_size=4, callbacks=[callback])
        >>> trainer.state.global_step, type(trainer.model).__name__, callback.errors
        (2, 'LlamaForSequenceClassification', [])
        >>> callback.records.to_dataframe()["step"].unique().tolist()
        [0, 1, 2]
    """
    trl = _require_trl()
    from transformers import LlamaForSequenceClassification

    from ..zoo.load import load_tokenizer
    from ..zoo.train import scalar_config

    torch.manual_seed(seed)
    model = LlamaForSequenceClassification(scalar_config())
    args = trl.RewardConfig(
        output_dir=str(output_dir), per_device_train_batch_size=batch_size, max_steps=steps,
        learning_rate=learning_rate, lr_scheduler_type="constant_with_warmup", warmup_steps=10,
        logging_steps=max(1, steps // 20), report_to=[], seed=seed, use_cpu=True,
        disable_tqdm=True, max_length=64, center_rewards_coefficient=None,
        save_strategy="steps" if save_steps else "no", save_steps=save_steps or 500,
        save_only_model=True, dataloader_num_workers=0, bf16=False,
    )  # fmt: skip
    trainer = trl.RewardTrainer(
        model=model,
        args=args,
        train_dataset=zoo_preference_dataset(steps * batch_size, seed),
        processing_class=load_tokenizer("scalar"),
        callbacks=list(callbacks),
    )
    with _threads(threads):
        _quiet(trainer, quiet).train()
    return trainer


def optimise_policy(
    reward_model: Any,
    output_dir: str | Path,
    *,
    steps: int = 200,
    prompts_per_step: int = 2,
    num_generations: int = 8,
    max_new_tokens: int = 14,
    learning_rate: float = 5e-4,
    seed: int = 0,
    callbacks: Sequence[Any] = (),
    policy: Any = "reference",
    threads: int | None = 2,
    quiet: bool = True,
    algorithm: str = "grpo",
):
    """Optimise a policy against `reward_model` with TRL's `GRPOTrainer` or `RLOOTrainer`.

    No KL penalty (`beta=0`), a constant learning rate.

    Args:
        reward_model: a reward-like model, zoo name or directory.
        output_dir: the trainer's output directory.
        steps: optimiser steps.
        prompts_per_step: prompts per step.
        num_generations: responses sampled per prompt.
        max_new_tokens: the token budget of each response.
        learning_rate: the learning rate.
        seed: the seed of the prompts and the trainer.
        callbacks: trainer callbacks (e.g. a `RewardLensCallback`).
        policy: a zoo name (default: the zoo's reference LM) or a model.
        threads: as for `train_reward_model`.
        quiet: as for `train_reward_model`.
        algorithm: `"grpo"` (`GRPOTrainer`) or `"rloo"` (`RLOOTrainer`).

    Returns:
        The trainer.

    Raises:
        PressureError: if TRL is not installed or `algorithm` is unknown.

    Examples:
        One GRPO step of the zoo's reference LM against the zoo's reward model, on one prompt
        with two sampled responses:

        >>> import tempfile
        >>> from reward_lens_tl.pressure.training import optimise_policy
        >>> with tempfile.TemporaryDirectory() as out:
        ...     trainer = optimise_policy("scalar", out, steps=1, prompts_per_step=1,
        ...                               num_generations=2, max_new_tokens=4)
        >>> trainer.state.global_step, type(trainer.model).__name__
        (1, 'LlamaForCausalLM')
        >>> "reward" in trainer.state.log_history[0]  # the mean reward of the step's samples
        True
    """
    trl = _require_trl()
    from datasets import Dataset

    from ..zoo.load import load_model, load_tokenizer
    from .ladders import load_reward_like
    from .sampling import score_texts

    rm = load_reward_like(reward_model)

    def reward(prompts, completions, **_) -> list[float]:
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return score_texts(rm, [p[-1]["content"] for p in prompts], texts).tolist()

    prompts = zoo_prompts(steps * prompts_per_step, seed=seed + 1)
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": p}]} for p in prompts])
    if algorithm not in ("grpo", "rloo"):
        raise PressureError(f"algorithm must be 'grpo' or 'rloo', got {algorithm!r}")
    model = load_model(policy) if isinstance(policy, str) else policy
    config, trainer_cls = (
        (trl.GRPOConfig, trl.GRPOTrainer)
        if algorithm == "grpo"
        else (trl.RLOOConfig, trl.RLOOTrainer)
    )
    args = config(
        output_dir=str(output_dir), per_device_train_batch_size=prompts_per_step * num_generations,
        num_generations=num_generations, max_completion_length=max_new_tokens, max_steps=steps,
        learning_rate=learning_rate, logging_steps=max(1, steps // 20), save_strategy="no",
        report_to=[], seed=seed, use_cpu=True, disable_tqdm=True, beta=0.0, temperature=1.0,
        lr_scheduler_type="constant",
        dataloader_num_workers=0, bf16=False,
    )  # fmt: skip
    trainer = trainer_cls(
        model=model,
        reward_funcs=reward,
        args=args,
        train_dataset=data,
        processing_class=load_tokenizer("reference"),
        callbacks=list(callbacks),
    )
    with _threads(threads):
        _quiet(trainer, quiet).train()
    return trainer


def _quiet(trainer, quiet: bool):
    """Without the trainer's printed logs (`state.log_history` keeps them all)."""
    if quiet:
        from transformers.trainer_callback import PrinterCallback, ProgressCallback

        trainer.remove_callback(PrinterCallback)
        trainer.remove_callback(ProgressCallback)
    return trainer


@contextmanager
def _threads(threads: int | None) -> Iterator[None]:
    """Torch's thread count fixed to `threads` for the run (restored after)."""
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
