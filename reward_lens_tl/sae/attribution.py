"""SAE latents' contributions to the reward: exact direct effects and attribution patching.

**Direct (final residual).** For an SAE on `blocks.{L-1}.hook_resid_post` spliced with its
error term, the final residual at the reward position is exactly
`Σ_f a_f d_f + b_dec + error` (`d_f` the effective decoder row). With the final norm's
scale frozen (`reward_lens_tl.readout`), the reward is linear in it, so
`reward = Σ_f a_f (d_f · u) + b_dec · u + error · u + head_bias` with `u` the read-out
direction divided by the scale: `feature_attribution`.

**Attribution patching (any site).** Elsewhere the path to the reward is non-linear;
`latent_attribution_patching` estimates each latent's total effect as
`Σ_pos ∂reward/∂a · a` (one forward and one backward pass through the spliced model, error
term kept), and `atp_check` verifies the top latents against real ablation.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.testing import tiny_reward_model, random_batch
    >>> from reward_lens_tl.sae.testing import random_topk_sae
    >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    >>> sae = random_topk_sae(model, "blocks.1.hook_resid_post")
    >>> ids, mask = random_batch(2, [9, 6])
    >>> feature_attribution(model, sae, ids, mask).completeness_error() < 1e-4
    True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import einops
import torch
from jaxtyping import Float
from sae_lens import SAE
from torch import Tensor

from ..errors import SAESiteError, UnsupportedSAEError
from ..indices import check_index, check_indices
from ..pair_batches import pair_batches
from ..readout import Objective, gather_positions, objective_index, run_readout
from ..results import join_pairs, split_pair
from .activations import _as_encoded_pair, _mask_from_pad
from .sae_results import AtPCheck, FeatureAttribution, FeatureEffects, PairFeatureAttribution
from .splice import sae_hook_name, spliced

__all__ = [
    "atp_check",
    "attribute_features",
    "decoder_directions",
    "feature_attribution",
    "feature_steering",
    "latent_ablation",
    "latent_attribution_patching",
    "pair_feature_attribution",
]


def decoder_directions(sae: SAE) -> Float[Tensor, "d_sae d_in"]:
    """The vector each unit of latent activation adds to the reconstruction.

    `W_dec` rows, divided by their norms when the SAE rescales activations by decoder norm
    (sae_lens TopK SAEs).

    Args:
        sae: The SAE.

    Returns:
        The decoder directions, `[d_sae, d_in]`.

    Raises:
        UnsupportedSAEError: If decoding is not linear (run-time normalisation, transcoders).

    Examples:
        >>> import torch
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import decoder_directions
        >>> from reward_lens_tl.sae.testing import random_topk_sae
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> sae = random_topk_sae(model, "blocks.1.hook_resid_post", d_sae=32, k=4)
        >>> directions = decoder_directions(sae)
        >>> directions.shape
        torch.Size([32, 64])
        >>> z = sae.encode(torch.randn(5, 64))  # decode = Σ_f z_f d_f + b_dec
        >>> torch.allclose(sae.decode(z), z @ directions + sae.b_dec, atol=1e-5)
        True
    """
    norm = getattr(sae.cfg, "normalize_activations", "none")
    if norm in ("constant_norm_rescale", "layer_norm"):
        raise UnsupportedSAEError(
            f"this SAE normalises activations at run time ({norm!r}), so its decoder is not "
            "linear in the latents; fold the normalisation into the weights first"
        )
    out = getattr(sae.cfg.metadata, "hook_name_out", None)
    if out and out != sae_hook_name(sae):
        raise UnsupportedSAEError("transcoders (hook_name_out != hook_name) are not supported")
    W = sae.W_dec
    if getattr(sae.cfg, "rescale_acts_by_decoder_norm", False):
        W = W / W.norm(dim=-1, keepdim=True)
    return W


def final_residual_hook(model) -> str:
    """The final residual's hook name.

    Args:
        model: The reward model.

    Returns:
        `blocks.{L-1}.hook_resid_post`.
    """
    return f"blocks.{model.cfg.n_layers - 1}.hook_resid_post"


def objective_reward(
    model, input_ids: Tensor, attention_mask: Tensor | None, objective: Objective = None
) -> Float[Tensor, " batch"]:
    """The differentiable reward that `objective` names (see `reward_lens_tl.readout`).

    Args:
        model: The reward model.
        input_ids: The token ids, `[batch, pos]`.
        attention_mask: The attention mask, if any.
        objective: The reward objective.

    Returns:
        The rewards, `[batch]`.
    """
    col = objective_index(model, objective)
    store: dict[str, Tensor] = {}

    def grab(act, hook):
        store["r"] = act

    with model.hooks(fwd_hooks=[("hook_reward", grab)]):
        out = model(input_ids, return_type="reward", attention_mask=attention_mask)
    return out if col is None else store["r"][:, col]


def feature_attribution(
    model,
    sae: SAE,
    input_ids: Tensor,
    attention_mask: Tensor | None = None,
    *,
    objective: Objective = None,
    positions: Sequence[int] | Tensor | None = None,
    fwd_hooks: Sequence = (),
) -> FeatureAttribution:
    """Exact direct effect of every latent of a final-residual SAE on the reward.

    `values[f, e] = a_f · (d_f · u)` at the reward position (or `positions`); the error
    term, decoder bias and head bias are separate terms, and everything sums to the reward.
    For SAEs at other sites use `latent_attribution_patching`.

    Args:
        model: The reward model.
        sae: An SAE on the final residual.
        input_ids: The token ids, `[batch, pos]`.
        attention_mask: The attention mask, if any.
        objective: The reward objective.
        positions: The positions to read at (default: the reward position).
        fwd_hooks: Extra forward hooks.

    Returns:
        A direct `FeatureAttribution`.

    Raises:
        SAESiteError: If the SAE is not on the final residual.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import feature_attribution
        >>> from reward_lens_tl.sae.testing import random_topk_sae
        >>> from reward_lens_tl.testing import random_batch, tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> sae = random_topk_sae(model, "blocks.1.hook_resid_post", d_sae=32, k=4)
        >>> ids, mask = random_batch(2, [9, 6])
        >>> attr = feature_attribution(model, sae, ids, mask)
        >>> attr.values.shape, attr.completeness_error() < 1e-4  # [latent, example]; sums up
        (torch.Size([32, 2]), True)
        >>> [(name, round(value, 3)) for name, value in attr.top_k(2, example=0)]
        [('f2', -0.626), ('f13', 0.149)]
    """
    name = sae_hook_name(sae)
    if name != final_residual_hook(model):
        raise SAESiteError(
            f"direct feature attribution needs an SAE on the final residual "
            f"{final_residual_hook(model)!r}, not {name!r}; for earlier sites use "
            "latent_attribution_patching (gradient × activation, checked by atp_check)"
        )
    directions = decoder_directions(sae)
    names = [f"{name}.hook_sae_acts_post", f"{name}.hook_sae_error"]
    with spliced(model, sae, use_error_term=True):
        run = run_readout(
            model,
            input_ids,
            attention_mask,
            names,
            objective=objective,
            positions=positions,
            fwd_hooks=fwd_hooks,
        )
    cache, pos = run.cache, run.positions
    with torch.no_grad():
        u = run.read.unit(gather_positions(cache["ln_final.hook_scale"], pos)[:, 0])
        acts = gather_positions(cache[f"{name}.hook_sae_acts_post"], pos).T  # [d_sae, batch]
        values = acts * einops.einsum(directions, u, "f d, b d -> f b")
        error = (gather_positions(cache[f"{name}.hook_sae_error"], pos) * u).sum(-1)
        decoder_bias = (sae.b_dec * u).sum(-1)
    return FeatureAttribution(
        values=_cpu(values),
        activations=_cpu(acts),
        rewards=_cpu(run.target),
        hook_name=name,
        method="direct",
        error=_cpu(error),
        decoder_bias=_cpu(decoder_bias),
        head_bias=_cpu(run.read.bias),
    )


def _cpu(t: Tensor) -> Tensor:
    return t.detach().float().cpu().contiguous()


def latent_attribution_patching(
    model,
    sae: SAE,
    input_ids: Tensor,
    attention_mask: Tensor | None = None,
    *,
    objective: Objective = None,
    fwd_hooks: Sequence = (),
) -> FeatureAttribution:
    """Attribution patching over latents: `values[f, e] = Σ_pos ∂r/∂a_f · a_f`.

    The linear estimate of `r − r(latent f zeroed everywhere)`, through the spliced SAE
    (error term on). One forward and one backward pass for all latents; gradients are taken
    with `torch.autograd.grad` so the model's parameters accumulate nothing.

    Args:
        model: The reward model.
        sae: The SAE.
        input_ids: The token ids, `[batch, pos]`.
        attention_mask: The attention mask, if any.
        objective: The reward objective.
        fwd_hooks: Extra forward hooks.

    Returns:
        An attribution-patching `FeatureAttribution`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import latent_ablation, latent_attribution_patching
        >>> from reward_lens_tl.sae.testing import random_topk_sae
        >>> from reward_lens_tl.testing import random_batch, tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> sae = random_topk_sae(model, "blocks.0.hook_resid_post", d_sae=32, k=4)
        >>> ids, mask = random_batch(2, [9, 6])
        >>> atp = latent_attribution_patching(model, sae, ids, mask)
        >>> f = atp.top_features(1)[0]
        >>> ablated = latent_ablation(model, sae, ids, mask, [f]).values[0]
        >>> f, atp.values[f].round(decimals=3), ablated.round(decimals=3)  # estimate vs real
        (6, tensor([0.0430, 0.2130]), tensor([0.0470, 0.2210]))
    """
    name = sae_hook_name(sae)
    store: dict[str, Tensor] = {}

    def as_leaf(act, hook):
        store["a"] = act.detach().requires_grad_(True)
        return store["a"]

    hooks = [*fwd_hooks, (f"{name}.hook_sae_acts_post", as_leaf)]
    with torch.enable_grad(), spliced(model, sae, use_error_term=True):
        with model.hooks(fwd_hooks=hooks):
            reward = objective_reward(model, input_ids, attention_mask, objective)
        (grad,) = torch.autograd.grad(reward.sum(), store["a"])
    mask = _real_tokens(model, input_ids, attention_mask)[..., None]
    acts = store["a"].detach() * mask
    return FeatureAttribution(
        values=_cpu((grad * acts).sum(1).T),
        activations=_cpu(acts.sum(1).T),
        rewards=_cpu(reward),
        hook_name=name,
        method="atp",
    )


def _real_tokens(model, input_ids: Tensor, attention_mask: Tensor | None) -> Tensor:
    if attention_mask is not None:
        return attention_mask.to(torch.float32)
    return _mask_from_pad(model, model.check_tokens(input_ids)).to(torch.float32)


def attribute_features(model, sae: SAE, input_ids, attention_mask=None, **kwargs):
    """`feature_attribution` for a final-residual SAE, else attribution patching.

    Args:
        model: The reward model.
        sae: The SAE.
        input_ids: The token ids, `[batch, pos]`.
        attention_mask: The attention mask, if any.
        **kwargs: Passed to the attribution function.

    Returns:
        A `FeatureAttribution`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import attribute_features
        >>> from reward_lens_tl.sae.testing import random_topk_sae
        >>> from reward_lens_tl.testing import random_batch, tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> ids, mask = random_batch(2, [9, 6])
        >>> for site in ("blocks.1.hook_resid_post", "blocks.0.hook_resid_post"):
        ...     sae = random_topk_sae(model, site, d_sae=32, k=4)
        ...     print(site, attribute_features(model, sae, ids, mask).method)
        blocks.1.hook_resid_post direct
        blocks.0.hook_resid_post atp
    """
    if sae_hook_name(sae) == final_residual_hook(model):
        return feature_attribution(model, sae, input_ids, attention_mask, **kwargs)
    return latent_attribution_patching(model, sae, input_ids, attention_mask, **kwargs)


# ---- interventions on latents ------------------------------------------------------------------
def _latent_hook(feature: int, edit: Callable[[Tensor], Tensor], where: Tensor | None):
    """A hook on `hook_sae_acts_post` that rewrites latent `feature` (at `where`)."""

    def hook(act, hook):
        act = act.clone()
        new = edit(act[..., feature])
        act[..., feature] = new if where is None else torch.where(where, new, act[..., feature])
        return act

    return hook


def _shifted_by(c: float) -> Callable[[Tensor], Tensor]:
    """The latent edit `a → a + c`."""

    def edit(a: Tensor) -> Tensor:
        return a + c

    return edit


def _position_mask(model, input_ids, attention_mask, positions) -> Tensor | None:
    """`[batch, pos]` bool: all real tokens (None = every position) or one per row."""
    if positions is None:
        return None
    tokens = model.check_tokens(input_ids, attention_mask)
    if isinstance(positions, str) and positions == "reward":
        positions = model.pool_positions(tokens, attention_mask)
    pos = torch.as_tensor(positions, dtype=torch.long, device=tokens.device).reshape(-1)
    where = torch.zeros(tokens.shape, dtype=torch.bool, device=tokens.device)
    where[torch.arange(tokens.shape[0], device=tokens.device), pos] = True
    return where


def _spliced_reward(model, sae, input_ids, attention_mask, objective, hooks=()) -> Tensor:
    with torch.no_grad(), spliced(model, sae, use_error_term=True):
        with model.hooks(fwd_hooks=list(hooks)):
            return objective_reward(model, input_ids, attention_mask, objective)


def latent_ablation(
    model,
    sae: SAE,
    input_ids: Tensor,
    attention_mask: Tensor | None = None,
    features: Sequence[int] = (),
    *,
    objective: Objective = None,
    positions=None,
) -> FeatureEffects:
    """`reward − reward(latent zeroed)` per feature and example, error term kept.

    Only the latent's own contribution is removed.

    Args:
        model: The reward model.
        sae: The SAE.
        input_ids: The token ids, `[batch, pos]`.
        attention_mask: The attention mask, if any.
        features: The latents to ablate.
        objective: The reward objective.
        positions: `None` (every position), `"reward"`, or one position per row.

    Returns:
        The `FeatureEffects`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import feature_attribution, latent_ablation
        >>> from reward_lens_tl.sae.testing import random_topk_sae
        >>> from reward_lens_tl.testing import random_batch, tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> sae = random_topk_sae(model, "blocks.1.hook_resid_post", d_sae=32, k=4)
        >>> ids, mask = random_batch(2, [9, 6])
        >>> effects = latent_ablation(model, sae, ids, mask, [2, 6], positions="reward")
        >>> effects.labels, effects.values.round(decimals=3)  # [latent, example]
        (('f2', 'f6'), tensor([[-0.5260,  0.0000],
                [ 0.0000,  0.2140]]))
        >>> direct = feature_attribution(model, sae, ids, mask).values[[2, 6]]
        >>> direct.round(decimals=3)  # near the direct effects (the final norm's scale moves)
        tensor([[-0.6260, -0.0000],
                [ 0.0000,  0.1980]])
    """
    features = check_indices(features, sae.cfg.d_sae, "latent")
    name = f"{sae_hook_name(sae)}.hook_sae_acts_post"
    where = _position_mask(model, input_ids, attention_mask, positions)
    base = _spliced_reward(model, sae, input_ids, attention_mask, objective)
    rows = []
    for f in features:
        hook = _latent_hook(int(f), torch.zeros_like, where)
        ablated = _spliced_reward(model, sae, input_ids, attention_mask, objective, [(name, hook)])
        rows.append(base - ablated)
    values = torch.stack(rows) if rows else torch.zeros(0, base.shape[0])
    return FeatureEffects(tuple(int(f) for f in features), _cpu(values), "reward − ablated")


def feature_steering(
    model,
    sae: SAE,
    input_ids: Tensor,
    attention_mask: Tensor | None = None,
    *,
    feature: int,
    coefficients: Sequence[float] = (-4, -2, -1, 0, 1, 2, 4),
    objective: Objective = None,
    positions=None,
):
    """Rewards when latent `feature`'s activation is raised by each coefficient.

    This adds `coefficient × d_f` to the residual at `positions` (every position, `"reward"`
    or one per row), through the spliced SAE with its error term.

    Args:
        model: The reward model.
        sae: The SAE.
        input_ids: The token ids, `[batch, pos]`.
        attention_mask: The attention mask, if any.
        feature: The latent.
        coefficients: The steering coefficients.
        objective: The reward objective.
        positions: `None` (every position), `"reward"`, or one position per row.

    Returns:
        A `SteeringCurve`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import feature_steering
        >>> from reward_lens_tl.sae.testing import random_topk_sae
        >>> from reward_lens_tl.testing import random_batch, tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> sae = random_topk_sae(model, "blocks.1.hook_resid_post", d_sae=32, k=4)
        >>> ids, mask = random_batch(2, [9, 6])
        >>> curve = feature_steering(model, sae, ids, mask, feature=2, coefficients=[-1, 0, 1])
        >>> curve.rewards.round(decimals=2)  # [coefficient, example]; 0 is the original reward
        tensor([[ 0.6400,  0.8900],
                [ 0.1500,  0.6900],
                [-0.2800,  0.1500]])
        >>> round(curve.slope(), 3)  # f2's direct effect is negative: raising it lowers the reward
        -0.415
    """
    from .sae_results import SteeringCurve

    feature = check_index(feature, sae.cfg.d_sae, "latent")
    name = f"{sae_hook_name(sae)}.hook_sae_acts_post"
    where = _position_mask(model, input_ids, attention_mask, positions)
    rows = []
    for c in coefficients:
        hook = _latent_hook(int(feature), _shifted_by(c), where)
        hooks = [(name, hook)]
        rows.append(_spliced_reward(model, sae, input_ids, attention_mask, objective, hooks))
    return SteeringCurve(
        label=f"f{int(feature)} @ {sae_hook_name(sae)}",
        coefficients=torch.as_tensor(list(coefficients), dtype=torch.float32),
        rewards=_cpu(torch.stack(rows)),
    )


def atp_check(
    model,
    sae: SAE,
    input_ids: Tensor,
    attention_mask: Tensor | None = None,
    *,
    k: int = 10,
    objective: Objective = None,
) -> AtPCheck:
    """Attribution patching over latents against real ablation (every position).

    For the `k` latents with the largest mean |estimate|.

    Args:
        model: The reward model.
        sae: The SAE.
        input_ids: The token ids, `[batch, pos]`.
        attention_mask: The attention mask, if any.
        k: How many latents.
        objective: The reward objective.

    Returns:
        An `AtPCheck`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import atp_check
        >>> from reward_lens_tl.sae.testing import random_topk_sae
        >>> from reward_lens_tl.testing import random_batch, tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> sae = random_topk_sae(model, "blocks.0.hook_resid_post", d_sae=32, k=4)
        >>> ids, mask = random_batch(2, [9, 6])
        >>> check = atp_check(model, sae, ids, mask, k=5)
        >>> check.features, round(check.pearson(), 3), check.sign_agreement()
        ((6, 5, 20, 25, 31), 0.995, 1.0)
    """
    atp = latent_attribution_patching(model, sae, input_ids, attention_mask, objective=objective)
    features = atp.top_features(k)
    actual = latent_ablation(model, sae, input_ids, attention_mask, features, objective=objective)
    return AtPCheck(
        features=tuple(features),
        estimate=atp.values[list(features)],
        actual=actual.values,
    )


def pair_feature_attribution(
    model,
    sae: SAE,
    pairs: Sequence,
    *,
    batch_size: int = 16,
    **kwargs,
) -> PairFeatureAttribution:
    """`attribute_features` for both sides of each pair, streamed.

    The pairs are preference pairs, encoded `(chosen, rejected)` tuples, or zoo contrast
    pairs as `(edited, base)`; `.margin.top_k(k, example=i)` gives the top latents of pair
    `i`'s margin.

    Args:
        model: The reward model.
        sae: The SAE.
        pairs: The pairs.
        batch_size: Pairs per batch.
        **kwargs: Passed to `attribute_features`.

    Returns:
        A `PairFeatureAttribution`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import pair_feature_attribution
        >>> from reward_lens_tl.sae.testing import random_topk_sae
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> pairs = load_task().task.contrast_pairs("harmful", 4, seed=0)  # (edited, base)
        >>> [pair.rule_delta for pair in pairs]  # a harmful word costs 3 under the planted rule
        [-3.0, -3.0, -3.0, -3.0]
        >>> sae = random_topk_sae(model, "blocks.2.hook_resid_post", d_sae=32, k=4)
        >>> margin = pair_feature_attribution(model, sae, pairs).margin  # edited − base
        >>> margin.rewards.round(decimals=2), margin.completeness_error() < 1e-4
        (tensor([-3.0800, -3.0000, -2.8500, -2.9700]), True)
    """
    encoded = [_as_encoded_pair(p) for p in pairs]
    batches = pair_batches(model, encoded, batch_size)  # chosen rows, then rejected rows
    chosen, rejected = join_pairs(
        split_pair(attribute_features(model, sae, ids, mask, **kwargs), n)
        for ids, mask, n in batches
    )
    return PairFeatureAttribution(chosen, rejected)
