"""Train TopK SAEs with sae_lens's own classes, offline, from any stream of activations.

sae_lens's `LanguageModelSAETrainingRunner` wants a dataset from the hub; its `SAETrainer`
does not: it takes any iterator of `[batch, d_in]` tensors. `train_topk_sae` builds a
`TopKTrainingSAE` from a `TopKTrainingSAEConfig`, trains it with `SAETrainer` (the
learning-rate end point `lr_end` is always set, as the trainer requires) and returns the
*inference* SAE (decoder norms folded, exactly what `save_inference_model` writes) with
training statistics. `save_sae` / `load_sae` use sae_lens's on-disk format, so any
SAE saved by sae_lens loads here too.

Examples:
    >>> import torch
    >>> acts = torch.randn(2048, 16)
    >>> trained = train_topk_sae(acts, "blocks.0.hook_resid_post", d_sae=32, k=4, steps=50)
    >>> type(trained.sae).__name__, trained.sae.cfg.metadata.hook_name
    ('TopKSAE', 'blocks.0.hook_resid_post')
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from unittest import mock

import torch
from jaxtyping import Float
from sae_lens import SAE, TopKTrainingSAE, TopKTrainingSAEConfig
from sae_lens.config import LoggingConfig, SAETrainerConfig
from sae_lens.saes.sae import SAEMetadata
from sae_lens.training import sae_trainer as _sae_trainer
from sae_lens.training.sae_trainer import SAETrainer
from torch import Tensor

from ..errors import EmptyActivationsError, SAESiteError
from ..progress import progress_bar
from .activations import check_hook, shuffled_batches

__all__ = [
    "TrainedSAE",
    "load_sae",
    "sae_stats",
    "save_sae",
    "train_topk_sae",
]


@dataclass(frozen=True)
class SAEStats:
    """Reconstruction quality of an SAE on a set of activations.

    Attributes:
        fvu: Fraction of variance unexplained, Σ‖x − x̂‖² / Σ‖x − x̄‖².
        l0: Mean number of active latents per token.
        dead_fraction: Share of latents never active on these activations.
        n_tokens: The number of activations.
    """

    fvu: float  # fraction of variance unexplained, Σ‖x − x̂‖² / Σ‖x − x̄‖²
    l0: float  # mean number of active latents per token
    dead_fraction: float  # latents never active on these activations
    n_tokens: int


@dataclass(frozen=True)
class TrainedSAE:
    """An inference SAE plus how it was trained and how well it reconstructs.

    Returned by `train_topk_sae`; `save_sae` writes its SAE.

    Attributes:
        sae: The inference SAE.
        steps: Training steps run.
        samples: Training samples seen.
        seconds: Training time.
        stats: Its `SAEStats` on the evaluation activations, if any.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import collect_activations, train_topk_sae
        >>> from reward_lens_tl.testing import random_batch, tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> ids, mask = random_batch(8, seq_len=10)
        >>> acts = collect_activations(model, "blocks.1.hook_resid_post", [(ids, mask)])
        >>> trained = train_topk_sae(
        ...     acts, "blocks.1.hook_resid_post", d_sae=32, k=4, steps=20, batch_size=32, threads=1
        ... )
        >>> trained.steps, trained.samples  # 20 steps of 32 activations
        (20, 640)
        >>> trained.stats.n_tokens, trained.stats.l0  # evaluated on the 80 training tokens
        (80, 4.0)
    """

    sae: SAE
    steps: int
    samples: int
    seconds: float
    stats: SAEStats | None  # on the evaluation activations (the training tensor by default)

    @property
    def samples_per_second(self) -> float:
        """Training throughput."""
        return self.samples / max(self.seconds, 1e-9)


@torch.no_grad()
def sae_stats(sae: SAE, acts: Float[Tensor, "tokens d_in"], batch_size: int = 4096) -> SAEStats:
    """FVU, L0 and the fraction of never-active latents of `sae` on `acts`.

    Args:
        sae: The SAE.
        acts: The activations, `[tokens, d_in]`.
        batch_size: Rows per batch.

    Returns:
        The `SAEStats`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import collect_activations, sae_stats
        >>> from reward_lens_tl.sae.testing import random_topk_sae
        >>> from reward_lens_tl.testing import random_batch, tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> ids, mask = random_batch(8, seq_len=10)
        >>> acts = collect_activations(model, "blocks.1.hook_resid_post", [(ids, mask)])
        >>> sae = random_topk_sae(model, "blocks.1.hook_resid_post", d_sae=32, k=4)
        >>> stats = sae_stats(sae, acts)  # untrained: worse than predicting the mean
        >>> stats.n_tokens, stats.l0, round(stats.fvu, 2), round(stats.dead_fraction, 3)
        (80, 4.0, 1.57, 0.156)
    """
    sq_err = 0.0
    l0 = 0.0
    fired = torch.zeros(sae.cfg.d_sae, dtype=torch.bool, device=acts.device)
    for x in acts.split(batch_size):
        z = sae.encode(x)
        sq_err += float((sae.decode(z) - x).pow(2).sum())
        l0 += float((z != 0).sum())
        fired |= (z != 0).any(0)
    var = float((acts - acts.mean(0)).pow(2).sum())
    return SAEStats(
        fvu=sq_err / max(var, 1e-12),
        l0=l0 / acts.shape[0],
        dead_fraction=1.0 - float(fired.float().mean()),
        n_tokens=acts.shape[0],
    )


def to_inference_sae(training_sae: TopKTrainingSAE) -> SAE:
    """The inference SAE that `training_sae.save_inference_model` would write (in memory).

    Args:
        training_sae: The trained SAE.

    Returns:
        The inference SAE.
    """
    state = {k: v.detach().clone() for k, v in training_sae.state_dict().items()}
    training_sae.process_state_dict_for_saving_inference(state)
    sae = SAE.from_dict(training_sae.cfg.get_inference_sae_cfg_dict())
    sae.process_state_dict_for_loading(state)
    sae.load_state_dict(state)
    return sae.to(training_sae.device)


@contextlib.contextmanager
def _threads(n: int | None):
    previous = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _quiet_trainer(progress: bool):
    """Our bar (`progress_bar`) for the one sae_lens's trainer opens, silent unless `progress`.

    sae_lens opens a `tqdm.auto` bar; ours is shown only where someone watches it.
    """
    return mock.patch.object(_sae_trainer, "tqdm", partial(progress_bar, show=progress))


def train_topk_sae(
    activations: Float[Tensor, "tokens d_in"] | Iterator[Float[Tensor, "batch d_in"]],
    hook_name: str,
    *,
    d_sae: int,
    k: int,
    steps: int = 1000,
    batch_size: int = 256,
    lr: float = 3e-3,
    lr_end: float | None = None,
    seed: int = 0,
    d_in: int | None = None,
    model=None,
    dead_feature_window: int | None = None,
    eval_activations: Tensor | None = None,
    progress: bool = False,
    threads: int | None = None,
    **config,
) -> TrainedSAE:
    """Train a TopK SAE on `activations` with sae_lens's `TopKTrainingSAE` + `SAETrainer`.

    `activations` is either a `[tokens, d_in]` tensor (shuffled into batches of
    `batch_size` every epoch, seeded) or any iterator of `[batch_size, d_in]` tensors
    (e.g. `rebatch` over a streamed collection), which must
    last `steps` batches. `lr_end` defaults to `lr / 10` with a cosine schedule.
    `model` (optional) checks that `hook_name` exists. Extra keyword arguments go to
    `TopKTrainingSAEConfig` (e.g. `rescale_acts_by_decoder_norm`, `aux_loss_coefficient`).
    The decoder bias starts at the mean activation (of the tensor, or of the first batch).
    Weight initialisation and batch order are seeded by `seed`. `threads` sets torch's
    thread count during training (restored after): small SAEs train fastest on one thread,
    and far faster than with several on a busy machine.

    Args:
        activations: A `[tokens, d_in]` tensor or an iterator of batches.
        hook_name: The hook the activations come from.
        d_sae: The number of latents.
        k: The number of active latents per token.
        steps: Training steps.
        batch_size: Rows per batch.
        lr: The learning rate.
        lr_end: The final learning rate (default `lr / 10`).
        seed: The seed of the initialisation and batch order.
        d_in: The activation width (default: that of the first batch).
        model: A model to check `hook_name` against, if any.
        dead_feature_window: Steps before a latent counts as dead (default `steps // 10`).
        eval_activations: Activations for the statistics (default: the training tensor).
        progress: Whether to show sae_lens's progress bar.
        threads: Torch threads during training, or `None`.
        **config: Passed to `TopKTrainingSAEConfig`.

    Returns:
        The `TrainedSAE`.

    Raises:
        SAESiteError: If the activations' width does not match.
        EmptyActivationsError: If the iterator ends too soon.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import collect_activations, train_topk_sae
        >>> from reward_lens_tl.testing import random_batch, tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> ids, mask = random_batch(8, seq_len=10)
        >>> acts = collect_activations(model, "blocks.1.hook_resid_post", [(ids, mask)])
        >>> trained = train_topk_sae(
        ...     acts, "blocks.1.hook_resid_post", d_sae=32, k=4, steps=20, batch_size=32,
        ...     model=model, threads=1,
        ... )
        >>> type(trained.sae).__name__, trained.sae.cfg.d_sae, trained.sae.cfg.metadata.hook_name
        ('TopKSAE', 32, 'blocks.1.hook_resid_post')
        >>> trained.stats.l0, round(trained.stats.fvu, 2)  # k latents per token; FVU below 1
        (4.0, 0.79)
    """
    if model is not None:
        check_hook(model, hook_name)
    stream, first = _stream(activations, batch_size, seed)
    d_in = d_in or first.shape[-1]
    if first.shape[-1] != d_in:
        raise SAESiteError(f"activations have width {first.shape[-1]}, not d_in={d_in}")
    if model is not None:
        _check_width(model, hook_name, d_in)
    with torch.random.fork_rng(devices=[]), _threads(threads):
        torch.manual_seed(seed)
        cfg = TopKTrainingSAEConfig(
            d_in=d_in,
            d_sae=d_sae,
            k=k,
            device=str(first.device),
            metadata=SAEMetadata(hook_name=hook_name),
            **config,
        )
        training_sae = TopKTrainingSAE(cfg)
        with torch.no_grad():
            mean = (activations if isinstance(activations, Tensor) else first).mean(0)
            training_sae.b_dec.copy_(mean)
        trainer_cfg = SAETrainerConfig(
            total_training_samples=steps * batch_size,
            train_batch_size_samples=batch_size,
            lr=lr,
            lr_end=lr / 10 if lr_end is None else lr_end,
            lr_scheduler_name="cosineannealing",
            device=str(first.device),
            dead_feature_window=dead_feature_window or max(steps // 10, 10),
            feature_sampling_window=max(steps, 1),
            logger=LoggingConfig(log_to_wandb=False),
        )
        trainer = SAETrainer(cfg=trainer_cfg, sae=training_sae, data_provider=stream)
        start = time.perf_counter()
        try:
            with _quiet_trainer(progress), torch.enable_grad():
                trainer.fit()
        except StopIteration:
            raise EmptyActivationsError(
                f"the activation iterator ended after {trainer.n_training_steps} of {steps} "
                "steps: pass a longer (or endless) iterator, or fewer steps"
            ) from None
        seconds = time.perf_counter() - start
    sae = to_inference_sae(training_sae)
    if eval_activations is None and isinstance(activations, Tensor):
        eval_activations = activations
    stats = None if eval_activations is None else sae_stats(sae, eval_activations)
    return TrainedSAE(sae, trainer.n_training_steps, trainer.n_training_samples, seconds, stats)


def _stream(activations, batch_size: int, seed: int) -> tuple[Iterator[Tensor], Tensor]:
    """A data provider and its first batch (the provider still yields that batch first)."""
    if isinstance(activations, Tensor):
        if activations.ndim != 2:
            raise SAESiteError(
                f"expected activations [tokens, d_in], got {tuple(activations.shape)}"
            )
        stream = shuffled_batches(activations.detach(), batch_size, seed)
    else:
        stream = iter(activations)
    try:
        first = next(stream)
    except StopIteration:
        raise EmptyActivationsError("the activation iterator yielded nothing") from None

    def provider():
        yield first
        yield from stream

    return provider(), first


def _check_width(model, hook_name: str, d_in: int) -> None:
    """Compare `d_in` with the hook's width when it is the residual stream's."""
    if "resid" in hook_name and d_in != model.cfg.d_model:
        raise SAESiteError(
            f"{hook_name} has width d_model={model.cfg.d_model}, the activations {d_in}"
        )


def save_sae(sae: SAE | TopKTrainingSAE | TrainedSAE, path: str | Path) -> Path:
    """Write `sae` in sae_lens's format (weights + `cfg.json`).

    A training SAE is saved as its inference model.

    Args:
        sae: The SAE.
        path: The directory.

    Returns:
        The directory.

    Examples:
        >>> import tempfile
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import save_sae
        >>> from reward_lens_tl.sae.testing import random_topk_sae
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> sae = random_topk_sae(model, "blocks.1.hook_resid_post", d_sae=32, k=4)
        >>> path = save_sae(sae, tempfile.mkdtemp())
        >>> sorted(p.name for p in path.iterdir())
        ['cfg.json', 'sae_weights.safetensors']
    """
    sae = sae.sae if isinstance(sae, TrainedSAE) else sae
    path = Path(path)
    if hasattr(sae, "save_inference_model"):
        sae.save_inference_model(path)
    else:
        sae.save_model(path)
    return path


def load_sae(path: str | Path, model=None, device: str | None = None) -> SAE:
    """Any sae_lens SAE saved on disk (`SAE.load_from_disk`).

    With `model`, its hook must exist there (`SAEHookError` otherwise).

    Args:
        path: The directory.
        model: A model to check the hook against, if any.
        device: The device (default: the model's, or the CPU).

    Returns:
        The SAE.

    Raises:
        FileNotFoundError: If the directory holds no `cfg.json`.
        SAEHookError: If the hook is not on `model`.

    Examples:
        >>> import tempfile
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import load_sae, save_sae
        >>> from reward_lens_tl.sae.testing import random_topk_sae
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> sae = random_topk_sae(model, "blocks.1.hook_resid_post", d_sae=32, k=4)
        >>> loaded = load_sae(save_sae(sae, tempfile.mkdtemp()), model=model)
        >>> type(loaded).__name__, loaded.cfg.metadata.hook_name
        ('TopKSAE', 'blocks.1.hook_resid_post')
        >>> bool((loaded.W_dec == sae.W_dec).all())
        True
    """
    path = Path(path)
    if not (path / "cfg.json").exists():
        raise FileNotFoundError(
            f"{path} holds no sae_lens SAE (no cfg.json); save one with save_sae(sae, path)"
        )
    device = device or (model.cfg.device if model is not None else "cpu")
    sae = SAE.load_from_disk(path, device=str(device))
    if model is not None:
        check_hook(model, sae.cfg.metadata.hook_name)
    return sae
