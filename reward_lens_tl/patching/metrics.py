"""How a patched run is scored: the metrics of the patched rewards.

A metric is any callable from the patched rewards `[variant]` to `[variant]` values (it is
called once per chunk of patched runs; for attribution patching it must be differentiable).
The defaults (signs: `reward_lens_tl.patching.plan`):

- denoising and noising: `margin_fraction`, the fraction of the way from the patched run's
  reward to the source run's reward that the patch alone moves the reward;
- mean and zero ablation: `reward_change`, the reward change from the clean run.

Examples:
    >>> import torch
    >>> restored = margin_fraction(target_reward=-1.0, source_reward=3.0)   # denoising
    >>> restored(torch.tensor([-1.0, 1.0, 3.0])).tolist()
    [0.0, 0.5, 1.0]
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from jaxtyping import Float
from torch import Tensor

from ..errors import PatchingError

__all__ = [
    "Metric",
    "check_metric_output",
    "default_metric",
    "margin_fraction",
    "reward_change",
]

#: A metric: the patched rewards `[variant]` → one value per patched run `[variant]`.
Metric = Callable[[Float[Tensor, " variant"]], Float[Tensor, " variant"]]


def margin_fraction(target_reward: float, source_reward: float) -> Metric:
    """The metric `(r - target) / (source - target)`, the default for denoising and noising.

    0 = unchanged, 1 = moved all the way to the source run's reward.

    Args:
        target_reward: the reward of the run being patched.
        source_reward: the reward of the run the patched values come from.

    Returns:
        The metric, a function of the patched rewards `[variant]`.

    Raises:
        PatchingError: if the two rewards are equal (the fraction is undefined).

    Examples:
        >>> import torch
        >>> from reward_lens_tl.patching import margin_fraction
        >>> destroyed = margin_fraction(target_reward=2.0, source_reward=-2.0)   # noising
        >>> destroyed(torch.tensor([1.0, 0.0, -2.0, -3.0])).tolist()   # 1.25: overshoots
        [0.25, 0.5, 1.0, 1.25]
    """
    gap = source_reward - target_reward
    if abs(gap) < 1e-6:
        raise PatchingError(
            f"the clean and corrupted rewards are equal ({target_reward:.6g}), so the fraction "
            "of the margin restored is undefined; pass metric=reward_change(...) or your own"
        )
    return lambda r: (r - target_reward) / gap


def reward_change(baseline: float) -> Metric:
    """`r - baseline` (the default for mean and zero ablation, baseline = clean reward).

    Args:
        baseline: the reward subtracted, the clean run's reward for an ablation.

    Returns:
        The metric, a function of the patched rewards `[variant]`: negative where the patch
        lowered the reward.

    Examples:
        >>> import torch
        >>> from reward_lens_tl.patching import reward_change
        >>> change = reward_change(baseline=1.5)
        >>> change(torch.tensor([1.5, 0.5, 2.0])).tolist()
        [0.0, -1.0, 0.5]
    """
    return lambda r: r - baseline


def default_metric(
    mode: str, target_reward: float, source_reward: float | None
) -> tuple[Metric, str]:
    """A mode's default metric and its name.

    Ablations (`mean`, `zero`) get the reward change; denoising and noising the fraction of
    the margin moved.

    Args:
        mode: the patching mode.
        target_reward: the reward of the run being patched.
        source_reward: the reward of the run the patched values come from (`None` for
            ablations).

    Returns:
        The metric and its name.

    Raises:
        PatchingError: if a denoising or noising mode has no source reward.

    Examples:
        >>> import torch
        >>> metric, name = default_metric("denoising", target_reward=0.0, source_reward=2.0)
        >>> name, metric(torch.tensor([1.0])).tolist()
        ('fraction restored', [0.5])
        >>> default_metric("zero", 1.0, None)[1]
        'reward change (patched - clean)'
    """
    if mode in ("mean", "zero"):
        return reward_change(target_reward), "reward change (patched - clean)"
    if source_reward is None:
        raise PatchingError(f"mode={mode!r} needs the source run's reward")
    name = "fraction restored" if mode == "denoising" else "fraction destroyed"
    return margin_fraction(target_reward, source_reward), name


def check_metric_output(values: object, n: int) -> Float[Tensor, " variant"]:
    """A metric's output as a tensor `[n]`.

    Args:
        values: what the metric returned (a tensor, a number or a list).
        n: the number of patched runs it scored.

    Returns:
        The values, shape `[n]`.

    Raises:
        PatchingError: if the metric did not return one value per patched run.

    Examples:
        >>> check_metric_output(0.5, 1).tolist()
        [0.5]
        >>> check_metric_output([1.0, 2.0], 3)
        Traceback (most recent call last):
        reward_lens_tl.errors.PatchingError: the metric must return one value per patched run, ...
    """
    tensor = values if isinstance(values, Tensor) else torch.as_tensor(values)
    if tensor.ndim == 0 and n == 1:
        tensor = tensor.reshape(1)
    if tuple(tensor.shape) != (n,):
        raise PatchingError(
            f"the metric must return one value per patched run, shape ({n},); got "
            f"{tuple(tensor.shape)}. Metrics are applied to a [variant] tensor of rewards"
        )
    return tensor
