"""One cached forward pass per sequence serves the reward, the reward lens and the attribution.

Internal (no public names): used by `reward_lens_tl.probes.runner` and `.pressure.monitor`.

`forward_sequences` batches sequences (left padded), runs `run_with_cache` once per
batch with the hook points both analyses need, and reads out the pooled reward, the
reward-lens value at every residual site (recomputed norm) and the exact direct attribution
(frozen norm; parts + head bias = reward). `n_forward` counts the sequences forwarded, which
is what the probe suite's cost is measured in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from ..attribution import attribution_from_run, attribution_hook_names
from ..inputs import EncodedConversation, pad_batch
from ..lens import lens_from_run, lens_sites
from ..readout import Objective, run_readout

__all__: list[str] = []


@dataclass(frozen=True)
class Forwarded:
    """Per-sequence read-outs: `rewards [n]`, and the inside view's.

    With the inside view there are also `lens [site, n]` and `attribution [component, n]` +
    `head_bias [n]` (summing to `rewards`).

    Args:
        rewards: the rewards.
        sites: the lens's sites.
        lens: the reward lens per site.
        components: the attribution's component labels.
        attribution: the exact direct attribution.
        head_bias: the head bias's part.
        n_forward: the number of sequences forwarded.
    """

    rewards: Float[Tensor, " n"]
    sites: tuple[str, ...] = ()
    lens: Float[Tensor, "site n"] | None = None
    components: tuple[str, ...] = ()
    attribution: Float[Tensor, "component n"] | None = None
    head_bias: Float[Tensor, " n"] | None = None
    n_forward: int = 0


def forward_sequences(
    model,
    sequences: Sequence[EncodedConversation | Sequence[int]],
    *,
    objective: Objective = None,
    inside: bool = True,
    batch_size: int = 32,
) -> Forwarded:
    """Rewards (and the inside view) of `sequences`, one cached forward per batch.

    Args:
        model: the `HookedRewardModel`.
        sequences: `EncodedConversation`s or token ids.
        objective: picks a head column (default: the model's reward).
        inside: also read the lens and the attribution.
        batch_size: sequences per forward.

    Returns:
        The `Forwarded` read-outs.
    """
    seqs = [s.ids if isinstance(s, EncodedConversation) else tuple(s) for s in sequences]
    sites = lens_sites(model, "layer")
    names = [name for _, name in sites] + attribution_hook_names(model, True, False, False)
    rewards, lens, attr, bias = [], [], [], []
    labels: tuple[str, ...] = ()
    for start in range(0, len(seqs), batch_size):
        ids, mask = pad_batch(seqs[start : start + batch_size], model.pad_token_id)
        ids, mask = ids.to(model.cfg.device), mask.to(model.cfg.device)
        run = run_readout(model, ids, mask, names if inside else [], objective=objective)
        rewards.append(run.target.detach().float().cpu())
        if inside:
            lens.append(lens_from_run(model, run, sites).values.float())
            result = attribution_from_run(model, run, split_bias=True)
            attr.append(result.values)
            bias.append(result.head_bias)
            labels = result.labels
    return Forwarded(
        rewards=torch.cat(rewards),
        sites=tuple(label for label, _ in sites) if inside else (),
        lens=torch.cat(lens, 1) if inside else None,
        components=labels,
        attribution=torch.cat(attr, 1) if inside else None,
        head_bias=torch.cat(bias) if inside else None,
        n_forward=len(seqs),
    )
