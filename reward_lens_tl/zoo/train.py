"""Deterministic training of the zoo models on the synthetic task.

- `scalar`: `LlamaForSequenceClassification` trained with a Bradley–Terry loss on pairs whose
  soft labels are `sigmoid(score_a - score_b)` under the hidden rule (so rewards come out in
  rule units up to a constant), with a short-to-long response-length curriculum;
- `multi`: the ArmoRM layout (`reward_lens_tl.armorm_module`), its three objectives
  regressed on the planted contributions, its gate trained towards the planted gate weights,
  plus a pairwise term on the gated score;
- `reference` / `policy`: two `LlamaForCausalLM` (see `reward_lens_tl.zoo.dpo`).

Runs are bitwise reproducible for a seed on a given machine and torch build: every random draw
comes from a seeded `random.Random` or the seeded torch generator, training uses a fixed thread
count and `torch.use_deterministic_algorithms(True)`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import LlamaConfig, LlamaForSequenceClassification

from ..armorm_module import LlamaForRewardModelWithGating, armorm_config
from ..errors import InvalidArgumentError
from .artifacts import save_zoo_model, weights_sha256
from .data import (
    OBJECTIVES,
    collate_examples,
    multi_batch,
    multi_score,
    scalar_batch,
)
from .loop import (
    ModelShape,
    TrainConfig,
    deterministic_torch,
    train_model,
    training_metadata,
)
from .task import ConversationTask
from .tokenizer import GATING_TOKEN_PATTERN

__all__ = ["train_zoo"]

DEFAULT_SHAPE = ModelShape()
SCALAR_TRAIN = TrainConfig()
MULTI_TRAIN = TrainConfig()


def bt_loss(r_a: Tensor, r_b: Tensor, s_a: Tensor, s_b: Tensor, temperature: float = 1.0) -> Tensor:
    """Bradley–Terry with soft labels `sigmoid((s_a - s_b) / temperature)`.

    Args:
        r_a: The model's rewards of the first sides.
        r_b: The model's rewards of the second sides.
        s_a: The rule's scores of the first sides.
        s_b: The rule's scores of the second sides.
        temperature: The soft labels' temperature.

    Returns:
        The mean loss.
    """
    return F.binary_cross_entropy_with_logits(r_a - r_b, torch.sigmoid((s_a - s_b) / temperature))


# ---- scalar -------------------------------------------------------------------------------------
def scalar_config(shape: ModelShape = DEFAULT_SHAPE) -> LlamaConfig:
    """The scalar reward model's `LlamaConfig` (one label).

    Args:
        shape: The model's shape.

    Returns:
        The configuration.
    """
    cfg = LlamaConfig(**shape.llama_kwargs())
    cfg.num_labels = 1  # a property (it sets id2label); LlamaConfig's signature does not list it
    cfg.architectures = ["LlamaForSequenceClassification"]
    return cfg


def train_scalar(
    task: ConversationTask, seed: int = 0, cfg: TrainConfig = SCALAR_TRAIN
) -> tuple[LlamaForSequenceClassification, list[float]]:
    """The scalar reward model and its per-step losses.

    Args:
        task: The conversation task.
        seed: The random seed.
        cfg: The training configuration.

    Returns:
        The trained model and its per-step losses.
    """

    def loss(model: LlamaForSequenceClassification, rng: random.Random, max_words: int) -> Tensor:
        a, b = scalar_batch(task, rng, cfg.batch, max_words)
        ids, mask = collate_examples(a + b)
        r = model(input_ids=ids, attention_mask=mask).logits.squeeze(-1)
        s = torch.tensor([ex.score for ex in a + b])
        n = len(a)
        return bt_loss(r[:n], r[n:], s[:n], s[n:])

    build = lambda: LlamaForSequenceClassification(scalar_config())
    return train_model("scalar", seed, cfg, build, loss)


# ---- multi-objective ----------------------------------------------------------------------------
def multi_config(shape: ModelShape = DEFAULT_SHAPE) -> LlamaConfig:
    """The multi-objective model's configuration (the ArmoRM layout).

    Args:
        shape: The model's shape.

    Returns:
        The configuration.
    """
    return armorm_config(
        num_objectives=len(OBJECTIVES),
        gating_hidden_dim=64,
        gating_n_hidden=2,
        gating_temperature=10.0,
        gating_token_pattern=GATING_TOKEN_PATTERN,
        objective_names=OBJECTIVES,
        **shape.llama_kwargs(),
    )


def train_multi(
    task: ConversationTask, seed: int = 0, cfg: TrainConfig = MULTI_TRAIN
) -> tuple[LlamaForRewardModelWithGating, list[float]]:
    """The ArmoRM-layout model: objective regression + gate cross-entropy + pairwise BT.

    Args:
        task: The conversation task.
        seed: The random seed.
        cfg: The training configuration.

    Returns:
        The trained model and its per-step losses.
    """

    def build() -> LlamaForRewardModelWithGating:
        model = LlamaForRewardModelWithGating(multi_config())
        model.gating.logit_scale.requires_grad_(False)
        return model

    def loss(model: LlamaForRewardModelWithGating, rng: random.Random, max_words: int) -> Tensor:
        examples, values, gates = multi_batch(task, rng, cfg.batch, max_words)
        ids, mask = collate_examples(examples)
        out = model(input_ids=ids, attention_mask=mask)
        regression = F.mse_loss(out.rewards, values)
        logits = model.gating.logits(out.prompt_embedding) / model.gating.temperature
        gate = -(gates * F.log_softmax(logits, -1)).sum(-1).mean()
        s = torch.tensor([multi_score(ex) for ex in examples])
        pairwise = bt_loss(out.score[0::2], out.score[1::2], s[0::2], s[1::2])
        return regression + gate + pairwise

    return train_model("multi", seed, cfg, build, loss)


# ---- the zoo ------------------------------------------------------------------------------------
ZOO_PARTS: tuple[str, ...] = ("scalar", "multi", "policy", "judge", "prm")


def _write_scalar(task: ConversationTask, out: Path, seed: int, fast: bool) -> tuple:
    from .evaluate import evaluate_scalar

    cfg = SCALAR_TRAIN.fast() if fast else SCALAR_TRAIN
    model, losses = train_scalar(task, seed, cfg)
    with deterministic_torch(seed, cfg.threads):
        quality = evaluate_scalar(model, task, **(dict(n_pairs=100, n_edits=20) if fast else {}))
    meta = {**training_metadata("scalar", seed, fast, cfg, losses), "quality": quality}
    return model, save_zoo_model(model, out / "scalar", meta)


def _write_multi(task: ConversationTask, out: Path, seed: int, fast: bool) -> dict:
    from .evaluate import evaluate_multi

    cfg = MULTI_TRAIN.fast() if fast else MULTI_TRAIN
    model, losses = train_multi(task, seed, cfg)
    with deterministic_torch(seed, cfg.threads):
        quality = evaluate_multi(model, task, n=200 if fast else 2000)
    meta = {**training_metadata("multi", seed, fast, cfg, losses), "quality": quality}
    return save_zoo_model(model, out / "multi", meta)


def _write_policy(
    task: ConversationTask, out: Path, seed: int, fast: bool, scalar: nn.Module
) -> dict[str, dict]:
    from . import dpo
    from .evaluate import evaluate_policy, evaluate_reference

    ref_cfg, pol_cfg = dpo.REFERENCE_TRAIN, dpo.POLICY_TRAIN
    if fast:
        ref_cfg, pol_cfg = ref_cfg.fast(), pol_cfg.fast()
    reference, ref_losses = dpo.train_reference(task, seed, ref_cfg)
    policy, pol_losses = dpo.train_policy(task, reference, scalar, seed, pol_cfg)
    with deterministic_torch(seed, pol_cfg.threads):
        ref_quality = evaluate_reference(reference, task, n=50 if fast else 500)
        sizes = dict(n_pairs=100, n_samples=30) if fast else {}
        quality = evaluate_policy(policy, reference, scalar, task, **sizes)
    labels = {"scalar_weights_sha256": weights_sha256(scalar), "beta": dpo.DPO_BETA}
    ref_meta = {
        **training_metadata("reference", seed, fast, ref_cfg, ref_losses),
        "quality": ref_quality,
    }
    pol_meta = {**training_metadata("policy", seed, fast, pol_cfg, pol_losses), "quality": quality}
    return {
        "reference": save_zoo_model(reference, out / "reference", ref_meta),
        "policy": save_zoo_model(policy, out / "policy", {**pol_meta, **labels}),
    }


def train_zoo(
    output_dir: str | Path,
    seed: int = 0,
    which: Sequence[str] = ZOO_PARTS,
    fast: bool = False,
) -> dict[str, dict]:
    """Train the requested zoo models and write each to `output_dir/<name>/`.

    Args:
        output_dir: The folder to write.
        seed: The training seed.
        which: Takes `scalar`, `multi`, `policy` (the latter writes `reference` and `policy`;
            its preference labels come from the scalar model trained in this call, else from
            `output_dir/scalar`, else from the shipped one), `judge` and `prm`
            (`reward_lens_tl.zoo.judge`, `reward_lens_tl.zoo.prm`; the judge's embeddings
            start from the shipped reference LM's).
        fast: A few steps per model on one thread (for determinism tests).

    Returns:
        Each written model's metadata (also saved as `metadata.json`).

    Raises:
        InvalidArgumentError: When `which` names an unknown part.

    Examples:
        The PRM alone, with the few-step settings (the full zoo takes minutes):

        >>> import tempfile
        >>> from pathlib import Path
        >>> from reward_lens_tl.zoo import load_metadata, train_zoo
        >>> folder = Path(tempfile.mkdtemp())
        >>> written = train_zoo(folder, which=["prm"], fast=True)
        >>> list(written), written["prm"]["fast"], load_metadata(folder / "prm")["steps"]
        (['prm'], True, 8)
        >>> train_zoo(folder, which=["giant"])
        Traceback (most recent call last):
        ...
        reward_lens_tl.errors.InvalidArgumentError: unknown zoo parts ['giant']; expected ...
    """
    from .load import load_model, zoo_path

    unknown = set(which) - set(ZOO_PARTS)
    if unknown:
        raise InvalidArgumentError(
            f"unknown zoo parts {sorted(unknown)}; expected a subset of {ZOO_PARTS}"
        )
    out, task = Path(output_dir), ConversationTask()
    written: dict[str, dict] = {}
    scalar = None
    if "scalar" in which:
        scalar, written["scalar"] = _write_scalar(task, out, seed, fast)
    if "multi" in which:
        written["multi"] = _write_multi(task, out, seed, fast)
    if "policy" in which:
        if scalar is None:
            local = out / "scalar"
            scalar = load_model(local if (local / "config.json").exists() else zoo_path("scalar"))
        written.update(_write_policy(task, out, seed, fast, scalar))
    if "judge" in which:  # its topic words start from the reference LM's embeddings
        from .judge import write_judge

        written["judge"] = write_judge(out / "judge", seed=seed, fast=fast)
    if "prm" in which:
        from .prm import write_prm

        written["prm"] = write_prm(out / "prm", seed=seed, fast=fast)
    return written
