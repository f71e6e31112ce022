"""Do SAE latents recover the zoo's planted features?

For every planted feature of the zoo task (`topic_match`, `harmful`, `length`,
`sycophancy`) the report looks for a latent whose activation tracks the feature and whose
ablation moves the reward with the planted sign.

**Sites (`ZOO_PLAN`).** Each feature is read where the model holds it. Activation patching of
the zoo's contrast pairs puts `topic_match` on its planted tokens until the last block and
`harmful` there after the first block (half moved to the reward-reading token by the last
block), so both are read at `blocks.0.hook_resid_post`. `sycophancy` ("great question")
is on the phrase tokens only through the first block and after the second at the
reward-reading token (which alone restores 81 % of the margin), and `length` (a count of
response words) is on no single token but at the reward-reading token (67–79 %) from the first
block on: both are read at the final residual `blocks.2.hook_resid_post`, where a latent's
ablation effect is its exact direct effect.

**Metrics.** `"sequence"`: Pearson correlation, over conversations, between a latent's
activation summed over the conversation and the feature's contribution to its score (every
planted contribution is a sum over tokens). `"token"`: per-token activations against the 0/1
indicator of `Example.feature_positions` over every non-padding token (prompt included);
stricter, it penalises activations whose size varies between the feature's words and a
two-token feature a causal model can only recognise at its second token ("great
**question**"). `"reward_token"`: the latent's activation at the reward-reading token (the
model's pooling position) against the feature's contribution, over conversations: for facts
about the whole sequence that the model gathers at the token it reads the reward from. All
three numbers are reported for every selected latent.

**Reward contribution.** `reward − reward(latent zeroed at every position)` with the SAE's
error term kept, averaged over conversations where the latent fires (anywhere, or at the
reward token for `"reward_token"`). Among the most correlated latents (≥ 0.8), the report
selects the one with the largest contribution of the planted sign, and also reports the
best-correlated latent overall with its contribution.

**Observed** (`zoo_ground_truth`: TopK SAEs with 128 latents, k = 8, 1500 steps; SAE
seeds 0, 1, 2; ≈ 4 s of training per site on one thread): all four features pass, with
correlations ≥ 0.91 (`topic_match`), 0.98 (`harmful`), 0.85 (`length`) and 0.98
(`sycophancy`). Other placements do not hold on every seed: at the final residual
`topic_match` reaches only ≈ 0.82 at the reward token (below 0.8 on other evaluation sets);
with 256 latents the final residual's best `length` latent (0.955) fires at the reward token
of every conversation and its ablation lowers the reward (seed 1); at
`blocks.0.hook_resid_post` the ≈ 0.998 `sycophancy` latent moves the reward by −0.01 on
seed 0, and summed activations track `length` at only 0.61–0.81.

`zoo_ground_truth(model, load_task().task)` runs the whole check (its SAEs take seconds to
train); the example below checks one feature with a smaller, quickly trained SAE.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.sae import planted_feature_report, train_zoo_sae
    >>> from reward_lens_tl.zoo import load_task, zoo_path
    >>> model, task = HookedRewardModel.from_pretrained(zoo_path("scalar")), load_task().task
    >>> sae = train_zoo_sae(model, task, n_examples=50, d_sae=32, k=4, steps=50, batch_size=64).sae
    >>> report = planted_feature_report(model, sae, task, features=["harmful"], n=50, candidates=2)
    >>> row = report["harmful"]  # the latent that tracks harmful words and lowers the reward
    >>> row.passed, round(row.correlation, 2), row.planted_sign, round(row.effect, 2)
    (True, 1.0, -1, -1.37)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

import torch
from jaxtyping import Float
from torch import Tensor

from ..errors import InvalidArgumentError
from ..inputs import pad_batch
from ..padding import left_pad_tensor
from .activations import collect_activations, iter_batch_activations
from .attribution import latent_ablation
from .sae_results import GroundTruthReport, GroundTruthRow
from .splice import sae_hook_name
from .training import TrainedSAE, train_topk_sae

__all__ = [
    "ZOO_PLAN",
    "planted_feature_report",
    "train_zoo_sae",
    "zoo_ground_truth",
    "zoo_plan",
]

ZOO_FEATURES: tuple[str, ...] = ("topic_match", "harmful", "length", "sycophancy")
ZOO_SITE = "blocks.0.hook_resid_post"
METRICS: tuple[str, ...] = ("token", "sequence", "reward_token")


#: Per planted feature, the site its SAE is trained at and the correlation metric used there.
def zoo_plan(n_layers: int = 3) -> Mapping[str, tuple[str, str]]:
    """Per planted feature, the site its SAE is trained at and the correlation metric used there.

    Block 0's output for the token-level features, the final residual (of an
    `n_layers` model) for the sequence-level ones.

    Args:
        n_layers: The model's number of layers.

    Returns:
        `(site, metric)` by feature.

    Examples:
        >>> from reward_lens_tl.sae import ZOO_PLAN, zoo_plan
        >>> zoo_plan(3)["harmful"], zoo_plan(3)["length"]
        (('blocks.0.hook_resid_post', 'sequence'), ('blocks.2.hook_resid_post', 'reward_token'))
        >>> zoo_plan(5)["length"], zoo_plan(3) == ZOO_PLAN
        (('blocks.4.hook_resid_post', 'reward_token'), True)
    """
    final = f"blocks.{n_layers - 1}.hook_resid_post"
    return MappingProxyType(
        {
            "topic_match": (ZOO_SITE, "sequence"),
            "harmful": (ZOO_SITE, "sequence"),
            "length": (final, "reward_token"),
            "sycophancy": (final, "reward_token"),
        }
    )


#: `zoo_plan` of the shipped 3-layer scalar model.
ZOO_PLAN = zoo_plan(3)


def train_zoo_sae(
    model,
    task,
    hook_name: str = ZOO_SITE,
    *,
    n_examples: int = 1000,
    d_sae: int = 128,
    k: int = 8,
    steps: int = 1500,
    batch_size: int = 256,
    seed: int = 0,
    threads: int | None = 1,
    **kwargs,
) -> TrainedSAE:
    """A TopK SAE on `hook_name` trained on every token of `n_examples` sampled conversations.

    The seeds are disjoint from `planted_feature_report`'s.

    Args:
        model: The reward model.
        task: The zoo task.
        hook_name: The site.
        n_examples: How many conversations.
        d_sae: The number of latents.
        k: The number of active latents per token.
        steps: Training steps.
        batch_size: Tokens per step.
        seed: The random seed.
        threads: Torch threads while training, or `None`.
        **kwargs: Passed to `train_topk_sae`.

    Returns:
        The `TrainedSAE`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import train_zoo_sae
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> trained = train_zoo_sae(
        ...     model, load_task().task, n_examples=50, d_sae=32, k=4, steps=50, batch_size=64
        ... )
        >>> trained.sae.cfg.metadata.hook_name, trained.samples  # 50 steps of 64 tokens
        ('blocks.0.hook_resid_post', 3200)
        >>> trained.stats.n_tokens, trained.stats.l0, round(trained.stats.fvu, 2)
        (834, 4.0, 0.21)
    """
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


def zoo_ground_truth(
    model,
    task,
    *,
    plan: Mapping[str, tuple[str, str]] | None = None,
    seed: int = 0,
    **report_kwargs,
) -> tuple[GroundTruthReport, dict[str, TrainedSAE]]:
    """Train the zoo's SAEs and report the planted features.

    One `train_zoo_sae` SAE (seeded by `seed`) per site of `plan` (default:
    `zoo_plan` for the model's depth); each feature is reported at its site with its
    metric (rows in `plan` order).

    Args:
        model: The reward model.
        task: The zoo task.
        plan: `(site, metric)` by feature, or `None`.
        seed: The SAEs' seed.
        **report_kwargs: Passed to `planted_feature_report`.

    Returns:
        The report and the trained SAEs by site.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import zoo_ground_truth
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> plan = {"harmful": ("blocks.0.hook_resid_post", "sequence")}  # one site: one SAE
        >>> report, saes = zoo_ground_truth(model, load_task().task, plan=plan, n=50, candidates=2)
        >>> list(saes), saes["blocks.0.hook_resid_post"].steps  # the full 1500 training steps
        (['blocks.0.hook_resid_post'], 1500)
        >>> report["harmful"].passed, report["harmful"].correlation >= 0.8
        (True, True)
    """
    plan = zoo_plan(model.cfg.n_layers) if plan is None else plan
    sites = dict.fromkeys(site for site, _ in plan.values())
    trained = {site: train_zoo_sae(model, task, site, seed=seed) for site in sites}
    rows = {}
    for site, metric in dict.fromkeys(plan.values()):
        features = [f for f, where in plan.items() if where == (site, metric)]
        report = planted_feature_report(
            model, trained[site].sae, task, features=features, metric=metric, **report_kwargs
        )
        rows.update({r.feature: r for r in report.rows})
    return GroundTruthReport(tuple(rows[f] for f in plan)), trained


def latent_table(
    model, sae, examples: Sequence, features: Sequence[str], batch_size: int = 64
) -> tuple[Float[Tensor, "token d_sae"], Float[Tensor, "token feature"], Tensor, Tensor]:
    """Latent activations and planted indicators of every non-padding token.

    Also each token's example index, and whether it is its example's reward-reading token.

    Args:
        model: The reward model.
        sae: The SAE.
        examples: The zoo examples.
        features: The planted features.
        batch_size: Examples per forward pass.

    Returns:
        The activations, the indicators, the example indices and the reward-token flags.
    """
    zs, ind, owner, reads = [], [], [], []
    offset = 0
    for ids, mask, act in iter_batch_activations(model, sae_hook_name(sae), examples, batch_size):
        with torch.no_grad():
            z = sae.encode(act)
        real = mask.bool()
        at_reward = torch.zeros_like(real)
        rows = torch.arange(len(ids), device=real.device)
        at_reward[rows, model.pool_positions(ids, mask)] = True
        zs.append(z[real].float().cpu())
        reads.append(at_reward[real].cpu())
        for row in range(act.shape[0]):
            ex = examples[offset + row]
            n = int(real[row].sum())
            y = torch.zeros(n, len(features))
            for j, f in enumerate(features):
                y[list(ex.feature_positions[f]), j] = 1.0
            ind.append(y)
            owner.append(torch.full((n,), offset + row))
        offset += act.shape[0]
    return torch.cat(zs), torch.cat(ind), torch.cat(owner), torch.cat(reads)


def column_correlations(
    z: Float[Tensor, "n d_sae"], y: Float[Tensor, " n"]
) -> Float[Tensor, " d_sae"]:
    """Pearson correlation of each column of `z` with `y` (0 for constant columns).

    Args:
        z: The columns, `[n, d_sae]`.
        y: The target, `[n]`.

    Returns:
        The correlations, `[d_sae]`.
    """
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
    """Per planted feature, the SAE latent that tracks it and its reward effect.

    Per planted feature, the latents with the `candidates` highest correlations (by
    `metric`: `"token"`, `"sequence"` or `"reward_token"`, see the module docstring) are
    ablated on up to `n_effect` conversations where each fires (anywhere, or at the reward
    token for `"reward_token"`). Among those with correlation ≥ `threshold` whose reward
    contribution has the planted sign and `|effect| ≥ min_effect` (default 0.05 reward units,
    a tenth of the smallest planted weight), the row reports the one with the largest effect;
    if there is none, the best-correlated latent (`passed` is then false).

    Args:
        model: The reward model.
        sae: The SAE.
        task: The zoo task.
        features: The planted features.
        n: How many evaluation conversations.
        seed: Their seed.
        metric: `"token"`, `"sequence"` or `"reward_token"`.
        candidates: How many latents to ablate per feature.
        threshold: The smallest correlation accepted.
        min_effect: The smallest |effect| accepted.
        n_effect: The most conversations ablated per latent.
        batch_size: Examples per forward pass.

    Returns:
        A `GroundTruthReport`.

    Raises:
        InvalidArgumentError: If `metric` is unknown.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import planted_feature_report, train_zoo_sae
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model, task = HookedRewardModel.from_pretrained(zoo_path("scalar")), load_task().task
        >>> trained = train_zoo_sae(
        ...     model, task, n_examples=50, d_sae=32, k=4, steps=50, batch_size=64
        ... )
        >>> report = planted_feature_report(
        ...     model, trained.sae, task, features=["harmful", "topic_match"], n=50, candidates=2
        ... )
        >>> report.to_dataframe()[["feature", "latent", "correlation", "effect", "passed"]].round(2)
               feature  latent  correlation  effect  passed
        0      harmful      15         1.00   -1.37    True
        1  topic_match      17         0.93    0.31    True
    """
    if metric not in METRICS:
        raise InvalidArgumentError(f"metric={metric!r}: expected one of {METRICS}")
    examples = task.examples(n, seed)
    z, ind, owner, reads = latent_table(model, sae, examples, features, batch_size)
    per_seq = torch.zeros(len(examples), z.shape[1]).index_add_(0, owner, z)
    activity = per_seq if metric != "reward_token" else z[reads]
    ids, mask = pad_batch([ex.input_ids for ex in examples], model.pad_token_id)
    rows = []
    for j, feature in enumerate(features):
        sign = _sign(task.rule.weight(feature))
        contrib = torch.tensor([ex.contributions[feature] for ex in examples]) * sign
        corr = {
            "token": column_correlations(z, ind[:, j]),
            "sequence": column_correlations(per_seq, contrib),
            "reward_token": column_correlations(z[reads], contrib),
        }
        order = corr[metric].argsort(descending=True)[:candidates].tolist()
        effects = [
            _ablation_effect(model, sae, ids, mask, activity[:, f], f, n_effect) for f in order
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
                reward_token_correlation=float(corr["reward_token"][latent]),
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
    """Mean `reward − reward(latent ablated)` over conversations where the latent fires."""
    active = (activity > 0).nonzero().flatten()[:n_effect]
    if not len(active):
        return 0.0
    rows = active.to(ids.device)
    sub_ids, sub_mask = ids[rows], mask[rows]
    # drop the columns only padding fills (they follow each row's first token)
    sub_ids, sub_mask = left_pad_tensor(sub_ids, sub_mask, model.pad_token_id)
    keep = sub_mask.any(0)
    sub_ids, sub_mask = sub_ids[:, keep].to(model.cfg.device), sub_mask[:, keep]
    effect = latent_ablation(model, sae, sub_ids, sub_mask.to(model.cfg.device), [latent])
    return float(effect.values.mean())
