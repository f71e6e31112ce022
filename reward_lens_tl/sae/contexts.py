"""Max-activating contexts: where SAE latents fire most strongly over a set of sequences.

Sequences are streamed in model batches; for each requested latent the `k` strongest
(sequence, position) activations are kept with a window of token ids around them (positions
count each sequence's tokens from its first real one, whatever the padding), and each
latent's firing frequency over non-padding tokens is counted.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.testing import tiny_reward_model, random_batch
    >>> from reward_lens_tl.sae.testing import random_topk_sae
    >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    >>> sae = random_topk_sae(model, "blocks.0.hook_resid_post")
    >>> ids, mask = random_batch(4, [9, 6, 12, 3])
    >>> ctx = max_activating_contexts(model, sae, [(ids, mask)], features=[0, 1], k=3)
    >>> len(ctx[0]) <= 3, ctx[0][0].activation >= ctx[0][-1].activation
    (True, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from sae_lens import SAE

from ..indices import check_indices
from .activations import iter_batch_activations
from .sae_results import Context, FeatureContexts
from .splice import sae_hook_name

__all__ = [
    "max_activating_contexts",
]


@torch.no_grad()
def max_activating_contexts(
    model,
    sae: SAE,
    source: Any,
    features: Sequence[int] | None = None,
    *,
    k: int = 5,
    window: tuple[int, int] = (8, 2),
    batch_size: int = 32,
    tokenizer: Any = None,
) -> FeatureContexts:
    """The top-`k` activating tokens of each latent in `features`, with context.

    All latents when `features` is `None`, over `source` (anything `model_batches` takes),
    with `window = (before, after)` tokens of context.

    Args:
        model: The reward model.
        sae: The SAE.
        source: The inputs.
        features: The latents, or `None` for all.
        k: Contexts per latent.
        window: Tokens of context before and after.
        batch_size: Rows per batch.
        tokenizer: The tokenizer used to show contexts (default: the model's).

    Returns:
        The `FeatureContexts`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import max_activating_contexts
        >>> from reward_lens_tl.sae.testing import random_topk_sae
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> sae = random_topk_sae(model, "blocks.0.hook_resid_post", d_sae=32, k=4)
        >>> seqs = [[5, 6, 7, 8, 9, 10], [11, 12, 13], [14, 15, 16, 17]]
        >>> ctx = max_activating_contexts(model, sae, seqs, features=[16, 0], k=2, window=(2, 1))
        >>> [(c.example, c.position, c.text()) for c in ctx[16]]  # strongest first
        [(2, 0, '[[14]] 15'), (1, 2, '11 12 [[13]]')]
        >>> ctx[0], ctx.frequency.round(decimals=3)  # f16 fires on 7 of the 13 tokens, f0 never
        ((), tensor([0.5380, 0.0000]))
    """
    feats = torch.as_tensor(
        list(range(sae.cfg.d_sae))
        if features is None
        else list(check_indices(features, sae.cfg.d_sae, "latent")),
        dtype=torch.long,
    )
    best_val = torch.full((len(feats), 0), float("-inf"))
    best_loc = torch.zeros((len(feats), 0, 2), dtype=torch.long)
    fired = torch.zeros(len(feats))
    n_tokens = 0
    sequences: list[tuple[int, ...]] = []
    for ids, mask, act in iter_batch_activations(model, sae_hook_name(sae), source, batch_size):
        z = sae.encode(act)[..., feats.to(act.device)].float().cpu()  # [b, pos, F]
        real = mask.bool().cpu()
        fired += (z[real] > 0).sum(0)
        n_tokens += int(real.sum())
        z = z.masked_fill(~real[..., None], float("-inf"))
        b, p, _ = z.shape
        flat = z.reshape(b * p, -1).T  # [F, b*pos]
        val, idx = flat.topk(min(k, b * p), dim=-1)
        in_seq = (real.long().cumsum(1) - 1).flatten()  # column -> position in its sequence
        loc = torch.stack([idx // p + len(sequences), in_seq[idx]], -1)
        best_val, order = torch.cat([best_val, val], 1).topk(
            min(k, best_val.shape[1] + val.shape[1]), -1
        )
        best_loc = torch.cat([best_loc, loc], 1).gather(1, order[..., None].expand(-1, -1, 2))
        sequences += [tuple(row[m].tolist()) for row, m in zip(ids.cpu(), real, strict=True)]
    contexts = tuple(
        tuple(
            _context(int(f), float(v), int(e), int(q), sequences[int(e)], window)
            for v, (e, q) in zip(best_val[i], best_loc[i], strict=True)
            if v > 0
        )
        for i, f in enumerate(feats)
    )
    return FeatureContexts(
        contexts=contexts,
        features=tuple(int(f) for f in feats),
        frequency=fired / max(n_tokens, 1),
        tokenizer=tokenizer if tokenizer is not None else getattr(model, "tokenizer", None),
    )


def _context(feature, value, example, position, seq, window) -> Context:
    start = max(position - window[0], 0)
    stop = min(position + window[1] + 1, len(seq))
    return Context(feature, value, example, position, tuple(seq[start:stop]), start)
