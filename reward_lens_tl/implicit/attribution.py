"""Exact attribution of an implicit reward to the policy's components.

`log π(y_t) = logit_{y_t} − LSE_t` with `LSE_t = logsumexp(logits_t)`. What is linear and
what is not:

- the **taken token's logit** is linear in the final residual once the final norm's scale is
  frozen at the value the policy used (as `reward_lens_tl.readout` does for rewards): it
  splits exactly along `W_U[:, y_t]` into embeddings, heads, MLPs and block biases, plus the
  unembed bias `b_U[y_t]` (`head_bias`);
- the **log-sum-exp** is not linear; it is reported as one separate term (`nonlinear`);
- the **reference** log-probs are a constant for the policy; reported as one term
  (`reference = −β Σ log π_ref`).

So `Σ parts + head_bias + nonlinear + reference = implicit reward`, exactly.

`lse="expected"` splits instead along `W_U[:, y_t] − E_p[W_U]` (`p` the policy's next-token
distribution at that position), using the identity `LSE = E_p[logit] + H(p)`: the components
then carry how much they favour the taken token *over the policy's average token*, and the
non-linear remainder is the entropy term `−β Σ H(p_t)`. Both splits are exact; the second
holds `p` (like the scale) fixed at the value the policy computed.

The components are those of a reward model's attribution (one decomposition walk,
`reward_lens_tl.attribution.decompose`, read along another direction), with
TransformerLens's names too (the last example).

Examples:
    >>> from reward_lens_tl.zoo import zoo_path
    >>> from reward_lens_tl.implicit import ImplicitRewardModel
    >>> irm = ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))
    >>> ids, attention, response = irm.batch([irm.encode("how bake bread", "soup oven")])
    >>> attr = implicit_attribution(irm, ids, response, attention)
    >>> attr.labels[:3], attr.linear_error() < 1e-4, attr.completeness_error() < 1e-4
    (('embed', 'L0H0', 'L0H1'), True, True)
    >>> attr.linear.tl_labels[-2:]
    ('1_mlp_out', 'bias')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import torch
from jaxtyping import Float
from torch import Tensor

from ..attribution import AttributionResult, Reading, attribution_hook_names, decompose
from ..errors import InvalidArgumentError, NonlinearUnembedError
from ..plotting import GREY, Backend, render
from ..readout import effective_head, is_centred
from ..results import MarginResult, Result, axes, bar_chart, join_pairs, signed_color, split_pair
from .batches import pair_chunks
from .reward_model import token_logprobs

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "ImplicitAttribution",
    "PairImplicitAttribution",
    "implicit_attribution",
    "pair_implicit_attribution",
]

LSE = Literal["term", "expected"]


@dataclass(frozen=True)
class ImplicitAttribution(Result):
    """Implicit rewards split into policy components and two explicit non-linear terms.

    `linear.completeness_error()` checks the parts.

    Args:
        linear: An `AttributionResult` whose `rewards` are the linear part computed from the
            policy's logits (`β Σ logit_{y_t}`, or `β Σ (logit_{y_t} − E_p logit)` for
            `lse="expected"`).
        nonlinear: `−β Σ LSE` (or `−β Σ H(p)`).
        reference: `−β Σ log π_ref`.
        rewards: The implicit rewards.
        lse: `"term"` or `"expected"`.

    Examples:
        >>> from reward_lens_tl.implicit import ImplicitRewardModel, implicit_attribution
        >>> from reward_lens_tl.zoo import zoo_path
        >>> irm = ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))
        >>> ids, attention, response = irm.batch([irm.encode("how bake bread", "soup oven")])
        >>> attr = implicit_attribution(irm, ids, response, attention)
        >>> parts = float(attr.values.sum()) + sum(float(t) for t in attr.terms().values())
        >>> round(parts, 3), round(float(attr.rewards), 3)  # components + terms = reward
        (-2.636, -2.636)
        >>> {name: round(float(t), 3) for name, t in attr.terms().items()}
        {'head_bias': 0.0, 'nonlinear': -2.694, 'reference': 0.947}
        >>> [(name, round(v, 2)) for name, v in attr.top_k(2)]
        [('mlp1', -0.89), ('mlp0', 0.59)]
    """

    example_axes = axes(linear=0, nonlinear=0, reference=0, rewards=0)

    linear: AttributionResult
    nonlinear: Float[Tensor, " example"]
    reference: Float[Tensor, " example"]
    rewards: Float[Tensor, " example"]
    lse: str

    @property
    def labels(self) -> tuple[str, ...]:
        """The components' labels."""
        return self.linear.labels

    @property
    def values(self) -> Float[Tensor, "component example"]:
        """The components' contributions, `[component, example]`."""
        return self.linear.values

    def total(self) -> Float[Tensor, " example"]:
        """Σ parts + head bias + nonlinear + reference.

        Returns:
            One total per example.
        """
        return self.linear.total() + self.nonlinear + self.reference

    def linear_error(self) -> float:
        """Max |Σ parts + head bias − linear part| (exact up to float error).

        Returns:
            The error.
        """
        return self.linear.completeness_error()

    def completeness_error(self) -> float:
        """Max |Σ parts + head bias + nonlinear + reference − implicit reward|.

        Returns:
            The error.
        """
        return float((self.total() - self.rewards).abs().max())

    def terms(self) -> dict[str, Tensor]:
        """The explicit terms beside the components.

        Returns:
            `head_bias`, `nonlinear` and `reference`, by name.
        """
        return {
            "head_bias": self.linear.head_bias,
            "nonlinear": self.nonlinear,
            "reference": self.reference,
        }

    def __sub__(self, other: ImplicitAttribution) -> ImplicitAttribution:
        """The difference of two attributions, field by field."""
        return ImplicitAttribution(
            linear=self.linear - other.linear,
            nonlinear=self.nonlinear - other.nonlinear,
            reference=self.reference - other.reference,
            rewards=self.rewards - other.rewards,
            lse=self.lse,
        )

    def top_k(self, k: int = 10, example: int | None = None):
        """Components with the largest |contribution| (signed values).

        As in `AttributionResult.top_k`.

        Args:
            k: How many components.
            example: One example, or `None` for the mean over examples.

        Returns:
            The components and their contributions.
        """
        return self.linear.top_k(k, example)

    def to_dataframe(self):
        """One row per (component or term, example).

        Returns:
            A `pandas.DataFrame`.
        """
        import pandas as pd

        rows = [self.linear.to_dataframe()]
        for name, value in self.terms().items():
            rows.append(
                pd.DataFrame(
                    {"component": name, "example": range(len(value)), "contribution": value}
                )
            )
        return pd.concat(rows, ignore_index=True)

    def plot(self, ax: Axes | None = None, k: int = 12, *, backend: Backend | None = None) -> Any:
        """Bars of the top-`k` components and the three terms (means over examples).

        Components are red where they lower the implicit reward and blue where they raise
        it; the head bias, non-linear and reference terms are grey, below them.

        Args:
            ax: Matplotlib axes to draw the static form on.
            k: How many components.
            backend: `"plotly"` or `"matplotlib"` (see `reward_lens_tl.plotting`).

        Returns:
            The figure (not shown).
        """
        top = self.top_k(k)
        terms = [(n, float(v.mean())) for n, v in self.terms().items()]
        colors = [signed_color(v) for _, v in top] + [GREY] * len(terms)
        n = len(self.rewards)
        fig = bar_chart(
            [*top, *terms[::-1]],
            "contribution to the implicit reward",
            colors=colors,
            title=f"Implicit reward attribution (lse={self.lse!r}) · "
            + ("1 example" if n == 1 else f"mean over {n} examples"),
        )
        return render(fig, backend, ax)


@dataclass(frozen=True)
class PairImplicitAttribution(MarginResult):
    """Implicit-reward attribution of chosen and rejected; `.margin` is their difference.

    Args:
        chosen: The chosen responses' attribution.
        rejected: The rejected responses' attribution.

    Examples:
        >>> from reward_lens_tl.implicit import ImplicitRewardModel, pair_implicit_attribution
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> irm = ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))
        >>> pairs = load_task().task.contrast_pairs("harmful", 2, seed=0)  # edited: chosen
        >>> pair = pair_implicit_attribution(irm, pairs)
        >>> [[round(r, 3) for r in side.rewards.tolist()]
        ...  for side in (pair.chosen, pair.rejected, pair.margin)]  # margin: chosen − rejected
        [[-0.511, -1.784], [-0.286, -0.005], [-0.225, -1.779]]
        >>> pair.margin.completeness_error() < 1e-4  # its parts sum to the margin
        True
    """

    chosen: ImplicitAttribution
    rejected: ImplicitAttribution


def _directions(policy, logits: Tensor, ids: Tensor, lse: LSE) -> tuple[Tensor, Tensor, Tensor]:
    """Per predicting position `p` (target `ids[p+1]`): direction, bias and non-linear term.

    The read-out direction `[b, p, d]` is in normalised-residual space, its bias `[b, p]`, and
    the non-linear term `[b, p]`.
    """
    W, b = effective_head(policy)  # [d_model, vocab], [vocab]
    logits = logits[:, :-1].float()
    target = ids[:, 1:]
    direction = W.T[target]  # [b, p, d]
    bias = b[target]
    if lse == "term":
        nonlinear = -torch.logsumexp(logits, -1)
    else:
        probs = logits.softmax(-1)
        direction = direction - probs @ W.T
        bias = bias - probs @ b
        nonlinear = (probs * logits.log_softmax(-1)).sum(-1)  # −H(p)
    if is_centred(policy):
        direction = direction - direction.mean(-1, keepdim=True)
    return direction, bias, nonlinear


def implicit_attribution(
    model,
    ids: Tensor,
    response_mask: Tensor,
    attention_mask: Tensor | None = None,
    *,
    heads: bool = True,
    lse: LSE = "term",
    fwd_hooks: Sequence = (),
) -> ImplicitAttribution:
    """Attribute each example's implicit reward to the policy's components (module docstring).

    Components are those of `reward_lens_tl.attribution.direct_attribution` (`embed`,
    `L{l}H{h}` or `attn{l}`, `mlp{l}`, `bias`), each summed over the response tokens
    with weight β. Two forwards: the policy (cached) and the reference.

    Args:
        model: The implicit reward model.
        ids: The token ids.
        response_mask: The response-token mask.
        attention_mask: The attention mask.
        heads: Whether to split attention layers into heads.
        lse: `"term"` or `"expected"` (module docstring).
        fwd_hooks: Forward hooks on the policy.

    Returns:
        The attribution.

    Raises:
        InvalidArgumentError: When `lse` is unknown.
        NonlinearUnembedError: When the policy soft-caps its logits or is post-norm.

    Examples:
        >>> from reward_lens_tl.implicit import ImplicitRewardModel, implicit_attribution
        >>> from reward_lens_tl.zoo import zoo_path
        >>> irm = ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))
        >>> ids, attention, response = irm.batch([irm.encode("how bake bread", "soup oven")])
        >>> attr = implicit_attribution(irm, ids, response, attention, heads=False, lse="expected")
        >>> attr.labels
        ('embed', 'attn0', 'mlp0', 'attn1', 'mlp1', 'bias')
        >>> [round(v, 2) for v in attr.values[:, 0].tolist()]
        [0.05, 0.04, 0.25, -1.28, -1.53, 0.0]
        >>> # the non-linear term is −β Σ H(p) with lse="expected"; reference: −β Σ log π_ref
        >>> round(float(attr.nonlinear), 2), round(float(attr.reference), 2)
        (-1.11, 0.95)
        >>> round(float(attr.total()), 3), round(float(irm.rewards(ids, response, attention)), 3)
        (-2.636, -2.636)
    """
    if lse not in ("term", "expected"):
        raise InvalidArgumentError(f"lse must be 'term' or 'expected', got {lse!r}")
    policy = model.policy
    if getattr(policy.cfg, "output_logits_soft_cap", -1.0) > 0:
        raise NonlinearUnembedError(
            "this policy soft-caps its logits (output_logits_soft_cap > 0), so the taken token's "
            "logit is not linear in the components; exact attribution is not available"
        )
    if policy.cfg.use_normalization_before_and_after:
        raise NonlinearUnembedError(
            "post-norm policies (Gemma-2 style) are not supported by implicit attribution yet"
        )
    ids = model.check_inputs(ids, response_mask, attention_mask)
    names = [*attribution_hook_names(policy, heads, False, False), "ln_final.hook_scale"]
    with torch.no_grad(), policy.hooks(fwd_hooks=list(fwd_hooks)):
        logits, cache = policy.run_with_cache(
            ids, attention_mask=attention_mask, names_filter=names
        )
    with torch.no_grad():
        ref_logits = model.reference(ids, attention_mask=attention_mask)
    beta = model.beta
    weight = beta * (response_mask[:, 1:] != 0).float()  # [b, p]
    direction, bias, nonlinear = _directions(policy, logits, ids, lse)
    scale = cache["ln_final.hook_scale"][:, :-1, 0]  # [b, p]
    u = direction / scale[..., None] * weight[..., None]  # β-weighted unit per position
    parts = decompose(policy, cache, Reading(u), heads=heads)  # read at positions 0 … pos − 2

    linear_target = (
        weight * (_taken(logits, ids) if lse == "term" else _taken(logits, ids) + _neg_mean(logits))
    ).sum(-1)
    pol_logp = token_logprobs(logits, ids)[:, 1:]
    ref_logp = token_logprobs(ref_logits, ids)[:, 1:]
    rewards = (weight * (pol_logp - ref_logp)).sum(-1)

    def cpu(t: Tensor) -> Tensor:
        return t.detach().float().cpu()

    linear = AttributionResult(
        values=cpu(parts.values),
        labels=tuple(c.label for c in parts.components),
        components=parts.components,
        head_bias=cpu((weight * bias).sum(-1)),
        rewards=cpu(linear_target),
    )
    return ImplicitAttribution(
        linear=linear,
        nonlinear=cpu((weight * nonlinear).sum(-1)),
        reference=cpu(-(weight * ref_logp).sum(-1)),
        rewards=cpu(rewards),
        lse=lse,
    )


def _taken(logits: Tensor, ids: Tensor) -> Tensor:
    return logits[:, :-1].float().gather(-1, ids[:, 1:, None])[..., 0]


def _neg_mean(logits: Tensor) -> Tensor:
    """`−E_p[logit]` at each predicting position."""
    lg = logits[:, :-1].float()
    return -(lg.softmax(-1) * lg).sum(-1)


def pair_implicit_attribution(
    model, pairs: Sequence, *, batch_size: int = 16, **kwargs
) -> PairImplicitAttribution:
    """`implicit_attribution` of each pair's chosen and rejected response, streamed in chunks.

    `.margin` decomposes the implicit-reward margins.

    Args:
        model: The implicit reward model.
        pairs: The preference pairs.
        batch_size: Pairs per chunk.
        **kwargs: Options of `implicit_attribution`.

    Returns:
        The attribution of both sides.

    Examples:
        >>> from reward_lens_tl.implicit import ImplicitRewardModel, pair_implicit_attribution
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> irm = ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))
        >>> pairs = load_task().task.contrast_pairs("harmful", 4, seed=0)  # edited: chosen
        >>> margin = pair_implicit_attribution(irm, pairs, batch_size=2).margin
        >>> chosen, rejected = irm.pair_rewards(pairs)
        >>> [round(m, 3) for m in margin.total().tolist()]  # parts summed
        [-0.225, -1.779, -0.652, -2.948]
        >>> [round(m, 3) for m in (chosen - rejected).tolist()]  # the implicit-reward margins
        [-0.225, -1.779, -0.652, -2.948]
        >>> [(name, round(v, 3)) for name, v in margin.top_k(3)]  # what penalises "harmful"
        [('mlp1', -0.448), ('L1H2', -0.236), ('L1H0', -0.105)]
    """

    def attribute(encodings) -> ImplicitAttribution:
        ids, attention, resp = model.batch(encodings)
        return implicit_attribution(model, ids, resp, attention, **kwargs)

    chunks = pair_chunks(model, pairs, batch_size)  # chosen rows, then rejected rows
    chosen, rejected = join_pairs(split_pair(attribute(encs), n) for encs, n in chunks)
    return PairImplicitAttribution(chosen=chosen, rejected=rejected)
