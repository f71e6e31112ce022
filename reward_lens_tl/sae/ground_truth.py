"""Do SAE latents recover the zoo's planted features?

For every planted feature of the zoo task (``topic_match``, ``harmful``, ``length``,
``sycophancy``) the report looks for a latent whose activation tracks the feature and whose
ablation moves the reward with the planted sign.

**Site.** ``blocks.0.hook_resid_post`` by default. Patching the base side's residual into the
edited side of the zoo's contrast pairs, at the planted tokens only, restores 67 % (harmful),
98 % (topic_match) and 97 % (sycophancy) of the margin after the first block, but 51 %, 65 %
and 9 % after the second, where much of it has moved to the reward-reading token. So after the
first block per-token latents can be both correlated with a planted feature and causally used.

**Metric (default ``"sequence"``).** Pearson correlation, over conversations, between a
latent's activation summed over the conversation and the feature's contribution to its score.
Every planted contribution is a sum over the conversation's tokens (a count times a weight, or
the one-off sycophancy bonus), so the summed activation is the quantity that should match it;
``"token"`` instead correlates per-token activations with the 0/1 indicator of
``Example.feature_positions`` over every non-padding token (prompt included). The per-token
number is stricter: it penalises activations whose size varies between the feature's words and
a two-token feature that a causal model can only recognise at its second token ("great
**question**"). Both numbers are reported for every selected latent.

**Reward contribution.** ``reward − reward(latent zeroed at every position)`` with the SAE's
error term kept, averaged over conversations where the latent fires. Among the most correlated
latents (≥ 0.8), the report selects the one with the largest contribution of the planted sign,
and also reports the best-correlated latent overall with its contribution.

>>> from reward_lens_tl import HookedRewardModel
>>> from reward_lens_tl.zoo import load_task, zoo_path  # doctest: +SKIP
>>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))  # doctest: +SKIP
>>> sae = train_zoo_sae(model, load_task().task).sae  # doctest: +SKIP
>>> planted_feature_report(model, sae, load_task().task).to_dataframe()  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from jaxtyping import Float
from torch import Tensor

from ..inputs import pad_batch
from .activations import collect_activations, iter_batch_activations
from .attribution import latent_ablation
from .results import GroundTruthReport, GroundTruthRow
from .splice import sae_hook_name
from .training import TrainedSAE, train_topk_sae

ZOO_FEATURES: tuple[str, ...] = ("topic_match", "harmful", "length", "sycophancy")
ZOO_SITE = "blocks.0.hook_resid_post"


def train_zoo_sae(
    model,
    task,
    hook_name: str = ZOO_SITE,
    *,
    n_examples: int = 1000,
    d_sae: int = 256,
    k: int = 8,
    steps: int = 1500,
    batch_size: int = 256,
    seed: int = 0,
    threads: int | None = 1,
    **kwargs,
) -> TrainedSAE:
    """A TopK SAE on ``hook_name`` trained on every token of ``n_examples`` sampled
    conversations (seeds disjoint from :func:`planted_feature_report`'s)."""
    examples = task.examples(n_examples, seed=10_000 + seed)
    acts = collect_activations(model, hook_name, examples, batch_size=128)
    return train_topk_sae(
        acts,
        hook_name,
        d_sae=d_sae,
        k=k,
        steps=steps,
        batch_size=batch_size,
        seed=seed,
        model=model,
        threads=threads,
        **kwargs,
    )


def latent_table(
    model, sae, examples: Sequence, features: Sequence[str], batch_size: int = 64
) -> tuple[Float[Tensor, "token d_sae"], Float[Tensor, "token feature"], Tensor]:
    """Latent activations of every non-padding token, the planted indicators per token, and
    each token's example index."""
    zs, ind, owner = [], [], []
    offset = 0
    for _, mask, act in iter_batch_activations(model, sae_hook_name(sae), examples, batch_size):
        with torch.no_grad():
            z = sae.encode(act)
        real = mask.bool()
        zs.append(z[real].float().cpu())
        for row in range(act.shape[0]):
            ex = examples[offset + row]
            n = int(real[row].sum())
            y = torch.zeros(n, len(features))
            for j, f in enumerate(features):
                y[list(ex.feature_positions[f]), j] = 1.0
            ind.append(y)
            owner.append(torch.full((n,), offset + row))
        offset += act.shape[0]
    return torch.cat(zs), torch.cat(ind), torch.cat(owner)


def column_correlations(
    z: Float[Tensor, "n d_sae"], y: Float[Tensor, " n"]
) -> Float[Tensor, " d_sae"]:
    """Pearson correlation of each column of ``z`` with ``y`` (0 for constant columns)."""
    zc = z - z.mean(0)
    yc = y - y.mean()
    denom = zc.norm(dim=0) * yc.norm()
    return torch.where(denom > 0, (zc * yc[:, None]).sum(0) / denom.clamp_min(1e-12), 0.0)


def planted_feature_report(
    model,
    sae,
    task,
    *,
    features: Sequence[str] = ZOO_FEATURES,
    n: int = 400,
    seed: int = 1,
    metric: str = "sequence",
    candidates: int = 8,
    threshold: float = 0.8,
    min_effect: float = 0.05,
    n_effect: int = 64,
    batch_size: int = 64,
) -> GroundTruthReport:
    """Per planted feature, the latents with the ``candidates`` highest correlations (by
    ``metric``) are ablated on up to ``n_effect`` conversations where each fires. Among those
    with correlation ≥ ``threshold`` whose reward contribution has the planted sign and
    ``|effect| ≥ min_effect`` (default 0.05 reward units, a tenth of the smallest planted
    weight), the row reports the one with the largest effect; if there is none, the
    best-correlated latent (``passed`` is then false)."""
    if metric not in ("token", "sequence"):
        raise ValueError(f"metric={metric!r}: expected 'token' or 'sequence'")
    examples = task.examples(n, seed)
    z, ind, owner = latent_table(model, sae, examples, features, batch_size)
    per_seq = torch.zeros(len(examples), z.shape[1]).index_add_(0, owner, z)
    ids, mask = pad_batch([ex.input_ids for ex in examples], model.pad_token_id)
    rows = []
    for j, feature in enumerate(features):
        sign = _sign(task.rule.weight(feature))
        contrib = torch.tensor([ex.contributions[feature] for ex in examples]) * sign
        corr = {
            "token": column_correlations(z, ind[:, j]),
            "sequence": column_correlations(per_seq, contrib),
        }
        order = corr[metric].argsort(descending=True)[:candidates].tolist()
        effects = [
            _ablation_effect(model, sae, ids, mask, per_seq[:, f], f, n_effect) for f in order
        ]
        ok = [_sign(e) == sign and abs(e) >= min_effect for e in effects]
        good = [i for i, f in enumerate(order) if ok[i] and corr[metric][f] >= threshold]
        pick = max(good, key=lambda i: abs(effects[i])) if good else 0
        latent = order[pick]
        rows.append(
            GroundTruthRow(
                feature=feature,
                hook_name=sae_hook_name(sae),
                d_sae=sae.cfg.d_sae,
                metric=metric,
                latent=latent,
                correlation=float(corr[metric][latent]),
                token_correlation=float(corr["token"][latent]),
                sequence_correlation=float(corr["sequence"][latent]),
                effect=effects[pick],
                planted_sign=sign,
                sign_ok=ok[pick],
                best_latent=order[0],
                best_correlation=float(corr[metric][order[0]]),
                best_effect=effects[0],
            )
        )
    return GroundTruthReport(tuple(rows))


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def _ablation_effect(model, sae, ids, mask, activity: Tensor, latent: int, n_effect: int) -> float:
    """Mean ``reward − reward(latent ablated)`` over conversations where the latent fires."""
    active = (activity > 0).nonzero().flatten()[:n_effect]
    if not len(active):
        return 0.0
    rows = active.to(ids.device)
    sub_ids, sub_mask = ids[rows], mask[rows]
    width = int(sub_mask.sum(1).max())
    sub_ids, sub_mask = sub_ids[:, :width].to(model.cfg.device), sub_mask[:, :width]
    effect = latent_ablation(model, sae, sub_ids, sub_mask.to(model.cfg.device), [latent])
    return float(effect.values.mean())
