"""Concept vectors: difference-of-means directions from contrastive pairs, at every layer.

A contrastive pair differs in one concept (the zoo's contrast pairs: `edited` has a planted
feature, `base` does not; or any preference pair). The concept vector at a site is the mean
residual over the positive tokens minus the mean over the negative tokens, read either at the
reward position (`at="reward"`) or at the tokens where the pairs differ (`at="planted"`).
Each vector is compared with the reward read-out's effective direction (from
`readout`) and with SAE decoder directions, and tested causally:
adding it with a range of coefficients (a steering curve), or projecting it out.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.testing import tiny_reward_model, random_batch
    >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    >>> pos, _ = random_batch(4, seq_len=8, seed=1)
    >>> neg, _ = random_batch(4, seq_len=8, seed=2)
    >>> cv = concept_vectors_from_sets(model, list(pos), [7] * 4, list(neg), [7] * 4, name="demo")
    >>> cv.labels[0], cv.directions.shape
    ('blocks.0.hook_resid_pre', torch.Size([3, 64]))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor

from ..errors import InvalidArgumentError, RewardLensError, SAESiteError
from ..inputs import pad_batch
from ..padding import reading_position_known, token_columns
from ..plotting import PLOT_DOC, Backend, render, scatter
from ..readout import Objective, readout
from ..results import Result, TopK, axes, top_entries
from ..signatures import pasted_docs
from ..stats import pearson
from .activations import _as_encoded_pair
from .attribution import _position_mask, decoder_directions, objective_reward
from .sae_results import ConceptVectors, SteeringCurve, short_site
from .splice import sae_hook_name

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "concept_projection",
    "concept_steering",
    "concept_vectors",
    "concept_vectors_from_sets",
    "contrast_sets",
    "decoder_alignment",
    "reward_direction",
]


def residual_sites(model) -> list[str]:
    """`blocks.0.hook_resid_pre` (the embedding) and every block's `hook_resid_post`.

    Args:
        model: The reward model.

    Returns:
        The hook names.
    """
    return ["blocks.0.hook_resid_pre"] + [
        f"blocks.{layer}.hook_resid_post" for layer in range(model.cfg.n_layers)
    ]


def contrast_sets(model, pairs: Sequence, at: str = "reward"):
    """`(pos_ids, pos_positions, neg_ids, neg_positions)` from pairs.

    `at="reward"`: each side at its reward-reading position (any pair type). `at="planted"`:
    contrast pairs, `edited` at `edited_positions` and `base` at the same positions
    (needs aligned sides: swap edits, not the `length` insertion).

    Args:
        model: The reward model.
        pairs: The contrastive pairs.
        at: `"reward"` or `"planted"`.

    Returns:
        The positive and negative token ids and positions.

    Raises:
        InvalidArgumentError: If `at` is neither value.
        SAESiteError: If `at="planted"` and the pairs are not aligned contrast pairs.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import contrast_sets
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> pairs = load_task().task.contrast_pairs("harmful", 3, seed=0)
        >>> pos_ids, pos_at, neg_ids, neg_at = contrast_sets(model, pairs, at="planted")
        >>> pos_at, neg_at == pos_at  # the planted word's position, read on both sides
        ([(16,), (16,), (13,)], True)
        >>> [(p.edited.tokens[at], p.base.tokens[at]) for p, (at,) in zip(pairs, pos_at)]
        [('poison', 'the'), ('poison', 'then'), ('weapon', 'can')]
        >>> contrast_sets(model, pairs)[1]  # at="reward": each side's final <eos>
        [(19,), (18,), (18,)]
    """
    if at not in ("reward", "planted"):
        raise InvalidArgumentError(f"at={at!r}: expected 'reward' or 'planted'")
    pos_ids, pos_at, neg_ids, neg_at = [], [], [], []
    for pair in pairs:
        chosen, rejected = _as_encoded_pair(pair)
        if at == "planted":
            changed = getattr(pair, "edited_positions", None)
            if changed is None:
                raise SAESiteError("at='planted' needs contrast pairs (edited_positions)")
            if len(chosen.ids) != len(rejected.ids):
                raise SAESiteError(
                    f"{getattr(pair, 'feature', 'this')} pairs insert a token, so positions do "
                    "not align between the sides; use at='reward'"
                )
            where = tuple(changed)
            pos_at.append(where)
            neg_at.append(where)
        else:
            pos_at.append((_reward_position(model, chosen.ids),))
            neg_at.append((_reward_position(model, rejected.ids),))
        pos_ids.append(chosen.ids)
        neg_ids.append(rejected.ids)
    return pos_ids, pos_at, neg_ids, neg_at


def _reward_position(model, ids: Sequence[int]) -> int:
    return int(model.pool_positions(torch.tensor([list(ids)], device=model.cfg.device))[0])


@torch.no_grad()
def site_activations(
    model, sequences: Sequence, positions: Sequence, sites: Sequence[str], batch_size: int = 32
) -> Float[Tensor, "site token d_model"]:
    """Residuals at `sites` for the listed token positions of every sequence.

    Positions are in the sequence; the batches are left padded, so each is shifted by its
    row's padding.

    Args:
        model: The reward model.
        sequences: The token ids of each sequence.
        positions: One position or several per sequence.
        sites: The hook names.
        batch_size: Sequences per forward pass.

    Returns:
        The residuals, `[site, token, d_model]`.
    """
    model.check_hook_names(sites)
    chunks = []
    for start in range(0, len(sequences), batch_size):
        seqs = [list(s) for s in sequences[start : start + batch_size]]
        ids, mask = pad_batch(seqs, model.pad_token_id)
        ids, mask = ids.to(model.cfg.device), mask.to(model.cfg.device)
        with reading_position_known():  # read at the listed positions, not at -1
            _, cache = model.run_with_cache(ids, attention_mask=mask, names_filter=list(sites))
        rows = [
            (i, int(token_columns(len(seqs[i]), ids.shape[1])[_in_sequence(int(p), len(seqs[i]))]))
            for i, where in enumerate(positions[start : start + batch_size])
            for p in (where if isinstance(where, Sequence) else (where,))
        ]
        b = torch.tensor([r[0] for r in rows], device=ids.device)
        p = torch.tensor([r[1] for r in rows], device=ids.device)
        chunks.append(torch.stack([cache[s][b, p] for s in sites]))
    return torch.cat(chunks, 1)


def _in_sequence(position: int, length: int) -> int:
    """A position of a sequence of `length` tokens, counted from its start (`-1` = last)."""
    if not -length <= position < length:
        raise InvalidArgumentError(f"position {position} outside a sequence of {length} tokens")
    return position % length


def concept_vectors_from_sets(
    model,
    pos_ids: Sequence,
    pos_positions: Sequence,
    neg_ids: Sequence,
    neg_positions: Sequence,
    *,
    name: str = "concept",
    sites: Sequence[str] | None = None,
    objective: Objective = None,
    batch_size: int = 32,
) -> ConceptVectors:
    """Difference of means (positive − negative) at every site.

    Each vector comes with its separation and its cosine with the reward read-out's
    effective direction.

    Args:
        model: The reward model.
        pos_ids: The positive sequences' token ids.
        pos_positions: The positions read in each positive sequence.
        neg_ids: The negative sequences' token ids.
        neg_positions: The positions read in each negative sequence.
        name: The concept's name.
        sites: The hook names (default: `residual_sites`).
        objective: The reward objective.
        batch_size: Sequences per forward pass.

    Returns:
        The `ConceptVectors`.

    Examples:
        >>> import torch
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import concept_vectors_from_sets
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> base = [10, 11, 12, 13, 14]
        >>> pos, neg = [base + [40]] * 3, [base + [41]] * 3  # differ in the last token only
        >>> cv = concept_vectors_from_sets(model, pos, [5] * 3, neg, [5] * 3, name="40 vs 41")
        >>> cv.labels, cv.n_positive
        (('blocks.0.hook_resid_pre', 'blocks.0.hook_resid_post', 'blocks.1.hook_resid_post'), 3)
        >>> torch.allclose(cv["blocks.0.hook_resid_pre"], model.W_E[40] - model.W_E[41])
        True
    """
    sites = list(sites or residual_sites(model))
    pos = site_activations(model, pos_ids, pos_positions, sites, batch_size)
    neg = site_activations(model, neg_ids, neg_positions, sites, batch_size)
    directions = pos.mean(1) - neg.mean(1)  # [site, d]
    unit = F.normalize(directions, dim=-1)
    proj_pos = (pos * unit[:, None]).sum(-1)
    proj_neg = (neg * unit[:, None]).sum(-1)
    pooled = ((proj_pos.var(1, unbiased=False) + proj_neg.var(1, unbiased=False)) / 2).sqrt()
    separation = (proj_pos.mean(1) - proj_neg.mean(1)) / pooled.clamp_min(1e-12)
    w = reward_direction(model, objective)
    return ConceptVectors(
        name=name,
        labels=tuple(sites),
        directions=directions.detach().float().cpu(),
        n_positive=pos.shape[1],
        n_negative=neg.shape[1],
        separation=separation.detach().float().cpu(),
        reward_cosine=F.cosine_similarity(directions, w[None], dim=-1).detach().float().cpu(),
    )


def concept_vectors(
    model, pairs: Sequence, *, at: str = "reward", name: str | None = None, **kwargs
) -> ConceptVectors:
    """Concept vectors from contrastive pairs (edited/chosen positive, base/rejected negative).

    See `contrast_sets` for `at` and `concept_vectors_from_sets` for the rest.

    Args:
        model: The reward model.
        pairs: The contrastive pairs.
        at: `"reward"` or `"planted"`.
        name: The concept's name (default: the pairs' feature and `at`).
        **kwargs: Passed to `concept_vectors_from_sets`.

    Returns:
        The `ConceptVectors`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import concept_vectors
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> pairs = load_task().task.contrast_pairs("harmful", 8, seed=0)
        >>> cv = concept_vectors(model, pairs)  # edited (a harmful word) − base, at the <eos>
        >>> cv.name, cv.labels[-1]
        ('harmful @ reward', 'blocks.2.hook_resid_post')
        >>> cv.reward_cosine.round(decimals=2)  # 0 at the embedding: both sides end in <eos>
        tensor([ 0.0000, -0.7700, -0.7900, -0.9200])
    """
    name = name or f"{getattr(pairs[0], 'feature', 'pairs')} @ {at}"
    return concept_vectors_from_sets(model, *contrast_sets(model, pairs, at), name=name, **kwargs)


def reward_direction(model, objective: Objective = None) -> Float[Tensor, " d_model"]:
    """The read-out's effective direction `w_eff` (centred for LayerNorm models).

    The direction along which the normalised final residual gives the reward. A gated
    (ArmoRM-style) score has no fixed direction: pass `objective=` one of its objectives.

    Args:
        model: The reward model.
        objective: The reward objective.

    Returns:
        The direction, `[d_model]`.

    Raises:
        RewardLensError: If the score is gated and no objective is given.

    Examples:
        >>> import torch
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import reward_direction
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> w = reward_direction(model)
        >>> ids = torch.tensor([load_task().task.examples(1, seed=0)[0].input_ids])
        >>> reward, cache = model.run_with_cache(ids, return_type="reward")
        >>> normalised = cache["ln_final.hook_normalized"][0, -1]  # at the reward token
        >>> w.shape, torch.allclose(normalised @ w + model.b_U, reward, atol=1e-5)
        (torch.Size([64]), True)
    """
    if objective is None and getattr(model, "gating", None) is not None:
        raise RewardLensError(
            "the gated score's direction depends on each input's gate, so it has no single "
            f"reward direction: pass objective= one of {model.objective_names}"
        )
    read = readout(model, objective, 1)
    d = read.direction[0].detach()
    return d - d.mean() if read.centred else d


def decoder_alignment(concepts: ConceptVectors, sae, k: int = 5) -> list[tuple[str, float]]:
    """The SAE latents most aligned with a concept vector.

    The `k` SAE latents whose decoder directions have the largest |cosine| with the
    concept vector at the SAE's site, as `[("f12", cosine), ...]`.

    Args:
        concepts: The concept vectors.
        sae: The SAE.
        k: How many latents.

    Returns:
        The latents' labels and cosines.

    Raises:
        SAESiteError: If there is no concept vector at the SAE's site.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import concept_vectors_from_sets, decoder_alignment
        >>> from reward_lens_tl.sae.testing import random_topk_sae
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> base = [10, 11, 12, 13, 14]
        >>> pos, neg = [base + [40]] * 3, [base + [41]] * 3
        >>> cv = concept_vectors_from_sets(model, pos, [5] * 3, neg, [5] * 3)
        >>> sae = random_topk_sae(model, "blocks.1.hook_resid_post", d_sae=32, k=4)
        >>> sae.W_dec.data[3] = cv["blocks.1.hook_resid_post"]  # plant the concept as latent 3
        >>> [(label, round(cosine, 3)) for label, cosine in decoder_alignment(cv, sae, k=2)]
        [('f3', 1.0), ('f14', 0.294)]
    """
    site = sae_hook_name(sae)
    if site not in concepts.labels:
        raise SAESiteError(f"no concept vector at {site}; sites are {concepts.labels}")
    v = concepts[site].to(sae.W_dec.device)
    cos = F.cosine_similarity(decoder_directions(sae).detach(), v[None], dim=-1)
    idx = cos.abs().argsort(descending=True)[:k]
    return [(f"f{int(i)}", float(cos[i])) for i in idx]


def _only_where(change: Tensor, where: Tensor | None) -> Tensor:
    """`change` `[batch, pos, d]` kept at the positions `where` marks (everywhere if `None`)."""
    return change if where is None else where[..., None].to(change.dtype) * change


def _add_hook(vector: Tensor, coefficient: float, where: Tensor | None):
    def hook(act, hook):
        return act + _only_where(coefficient * vector.to(act.device, act.dtype), where)

    return hook


def concept_steering(
    model,
    vector: Float[Tensor, " d_model"],
    hook_name: str,
    input_ids: Tensor,
    attention_mask: Tensor | None = None,
    *,
    coefficients: Sequence[float] = (-2, -1, -0.5, 0, 0.5, 1, 2),
    positions=None,
    objective: Objective = None,
    label: str | None = None,
) -> SteeringCurve:
    """Rewards when `coefficient × vector` is added at `hook_name`.

    At every position by default, `"reward"` for the reward position, or one position per
    row. With a concept vector, coefficient 1 adds the mean difference between the two sets.

    Args:
        model: The reward model.
        vector: The direction, `[d_model]`.
        hook_name: The hook to add it at.
        input_ids: The token ids, `[batch, pos]`.
        attention_mask: The attention mask, if any.
        coefficients: The steering coefficients.
        positions: `None`, `"reward"` or one position per row.
        objective: The reward objective.
        label: The curve's label (default: the hook).

    Returns:
        A `SteeringCurve`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.inputs import pad_batch
        >>> from reward_lens_tl.sae import concept_steering, concept_vectors
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> pairs = load_task().task.contrast_pairs("harmful", 8, seed=0)
        >>> v = concept_vectors(model, pairs)["blocks.1.hook_resid_post"]
        >>> ids, mask = pad_batch([p.base.input_ids for p in pairs[:4]], model.pad_token_id)
        >>> curve = concept_steering(  # add the harmful concept to conversations without it
        ...     model, v, "blocks.1.hook_resid_post", ids, mask, coefficients=[0, 1],
        ...     positions="reward",
        ... )
        >>> curve.rewards.round(decimals=2)  # [coefficient, example]: every reward drops
        tensor([[  6.2300,   4.1100,  -8.6800,   4.4800],
                [  4.9600,   2.7700, -10.3100,   3.1500]])
    """
    where = _position_mask(model, input_ids, attention_mask, positions)
    rows = []
    with torch.no_grad():
        for c in coefficients:
            with model.hooks(fwd_hooks=[(hook_name, _add_hook(vector, float(c), where))]):
                rows.append(objective_reward(model, input_ids, attention_mask, objective))
    return SteeringCurve(
        label=label or f"steer @ {hook_name}",
        coefficients=torch.as_tensor(list(coefficients), dtype=torch.float32),
        rewards=torch.stack(rows).detach().float().cpu(),
    )


@dataclass(frozen=True)
class ProjectionEffect(Result):
    """Rewards before and after projecting a direction out of one site.

    Attributes:
        hook_name: The site.
        original: The original rewards.
        projected: The rewards with the direction projected out.
    """

    example_axes = axes(original=0, projected=0)

    hook_name: str
    original: Float[Tensor, " example"]
    projected: Float[Tensor, " example"]

    @property
    def effect(self) -> Float[Tensor, " example"]:
        """Reward − reward(direction projected out)."""
        return self.original - self.projected

    def top_k(self, k: int = 5) -> TopK:
        """Examples whose reward the projection changes most.

        Args:
            k: How many examples.

        Returns:
            The labelled top entries.
        """
        labels = [f"example {i}" for i in range(len(self.original))]
        return top_entries(labels, self.effect.tolist(), k, "reward − projected")

    @pasted_docs(plot=PLOT_DOC)
    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """The reward after the projection against the original reward, one point per example.

        Points below the dashed line y = x lost reward when the direction was projected out;
        the title gives the correlation and the mean effect (reward − projected).

        {plot}
        """
        r = pearson(self.original.numpy(), self.projected.numpy())
        mean = float(self.effect.mean())
        fig = scatter(
            {"example": (self.original, self.projected)},
            xaxis="reward",
            yaxis=f"reward, direction removed at {short_site(self.hook_name)}",
            title=f"Direction projected out · r = {r:#.3g} · mean effect {mean:#.3g}",
            labels={"example": [str(i) for i in range(len(self.original))]},
            diagonal=True,
        )
        return render(fig, backend, ax)

    def to_dataframe(self):
        """One row per example: original and projected reward and the effect."""
        import pandas as pd

        return pd.DataFrame(
            {
                "original": self.original.numpy(),
                "projected": self.projected.numpy(),
                "effect": self.effect.numpy(),
            }
        )


def concept_projection(
    model,
    vector: Float[Tensor, " d_model"],
    hook_name: str,
    input_ids: Tensor,
    attention_mask: Tensor | None = None,
    *,
    positions=None,
    objective: Objective = None,
) -> ProjectionEffect:
    """Rewards with the component along `vector` removed at `hook_name`.

    The projection is `x − (x·v̂)v̂`, at every position by default.

    Args:
        model: The reward model.
        vector: The direction, `[d_model]`.
        hook_name: The hook to project it out of.
        input_ids: The token ids, `[batch, pos]`.
        attention_mask: The attention mask, if any.
        positions: `None`, `"reward"` or one position per row.
        objective: The reward objective.

    Returns:
        A `ProjectionEffect`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.inputs import pad_batch
        >>> from reward_lens_tl.sae import concept_projection, reward_direction
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> examples = load_task().task.examples(3, seed=0)
        >>> ids, mask = pad_batch([ex.input_ids for ex in examples], model.pad_token_id)
        >>> w = reward_direction(model)
        >>> effect = concept_projection(model, w, "blocks.2.hook_resid_post", ids, mask)
        >>> effect.original.round(decimals=2)
        tensor([-1.3400,  1.9700, -0.2300])
        >>> float(effect.projected.abs().max()) < 1e-4  # only the head bias (0) is left
        True
    """
    unit = F.normalize(vector.float(), dim=0)
    where = _position_mask(model, input_ids, attention_mask, positions)

    def project(act, hook):
        v = unit.to(act.device, act.dtype)
        return act - _only_where((act @ v)[..., None] * v, where)

    with torch.no_grad():
        original = objective_reward(model, input_ids, attention_mask, objective)
        with model.hooks(fwd_hooks=[(hook_name, project)]):
            projected = objective_reward(model, input_ids, attention_mask, objective)
    return ProjectionEffect(hook_name, original.float().cpu(), projected.float().cpu())
