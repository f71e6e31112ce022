"""A lens on the policy's residual stream, read out as per-token implicit reward.

At each site (`resid_pre` of every layer, optionally `resid_mid`, and the final residual) the
policy's residual at every position goes through the policy's **final norm** (scale recomputed
from that residual, the logit-lens convention), the unembed (and its logit soft-cap, Gemma-2's)
and a log-softmax; the log-prob of the taken next token minus the reference's log-prob, times
β, is the per-token lens value, and its sum over the response is the lens implicit reward. Two
choices for the reference side:

- `reference="final"` (default): the reference's *final* log-probs — the lens asks "what
  implicit reward would the policy have if it stopped here", against a fixed baseline;
- `reference="lens"`: the reference's own lens at the same site (both models must have the
  same number of layers) — it compares the two models' intermediate predictions.

Either way the final site equals the implicit reward exactly.

Examples:
    >>> from reward_lens_tl.zoo import zoo_path
    >>> from reward_lens_tl.implicit import ImplicitRewardModel
    >>> irm = ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))
    >>> ids, attention, response = irm.batch([irm.encode("how bake bread", "soup oven")])
    >>> lens = implicit_lens(irm, ids, response, attention)
    >>> lens.labels, bool((lens.values[-1] - lens.rewards).abs().max() < 1e-5)
    (('0_pre', '1_pre', 'final'), True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import torch
from jaxtyping import Float
from torch import Tensor

from ..errors import InvalidArgumentError
from ..lens import PairLensResult, Resolution, RewardLensResult, lens_sites
from ..plotting import Backend, imshow, line, render, shown_token
from ..results import Result, axes, join_pairs, split_pair, tidy_frame
from .batches import pair_chunks
from .reward_model import token_logprobs

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "ImplicitLensResult",
    "implicit_lens",
    "pair_implicit_lens",
]

Reference = Literal["final", "lens"]


@dataclass(frozen=True)
class ImplicitLensResult(Result):
    """Lens implicit rewards per site and example, with the per-token values.

    Args:
        values: Lens implicit rewards, `[site, example]`.
        token_values: Per-token values, `[site, example, pos]` (position `t` scores token `t`;
            0 outside the response mask).
        labels: One label per site.
        rewards: The implicit rewards.
        reference: `"final"` or `"lens"`.
        tokens: Each example's tokens, one per position (the heat map's column labels);
            empty when the model has no tokenizer.

    Examples:
        >>> import torch
        >>> from reward_lens_tl.implicit import ImplicitRewardModel, implicit_lens
        >>> from reward_lens_tl.zoo import zoo_path
        >>> irm = ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))
        >>> ids, attention, response = irm.batch([irm.encode("how bake bread", "soup oven")])
        >>> lens = implicit_lens(irm, ids, response, attention)
        >>> tuple(lens.values.shape), tuple(lens.token_values.shape)  # [site, example (, pos)]
        ((3, 1), (3, 1, 11))
        >>> bool(torch.allclose(lens.values, lens.token_values.sum(-1)))  # summed over tokens
        True
        >>> lens.to_dataframe().round(3)
            site  example  lens_implicit_reward
        0  0_pre        0                -1.795
        1  1_pre        0                -0.169
        2  final        0                -2.636
        >>> fig = lens.plot(example=0)  # per-token values: sites × the example's tokens
        >>> fig.data[0].z.shape, len(fig.layout.xaxis.ticktext)
        ((3, 11), 11)
    """

    example_axes = axes(values=1, token_values=1, rewards=0, tokens=0)

    values: Float[Tensor, "site example"]
    token_values: Float[Tensor, "site example pos"]
    labels: tuple[str, ...]
    rewards: Float[Tensor, " example"]
    reference: str
    tokens: tuple[tuple[str, ...], ...] = ()

    def as_reward_lens(self) -> RewardLensResult:
        """The summed values as a `RewardLensResult`.

        Returns:
            The lens result.
        """
        return RewardLensResult(self.values, self.labels, self.rewards, f"ref={self.reference}")

    def to_dataframe(self):
        """One row per (site, example).

        Returns:
            A `pandas.DataFrame`.
        """
        return tidy_frame(self.values, self.labels, "site", "lens_implicit_reward")

    def top_k(self, k: int = 5):
        """Sites with the largest mean |change| from the previous site.

        Args:
            k: How many sites.

        Returns:
            The sites and their changes.
        """
        return self.as_reward_lens().top_k(k)

    def plot(
        self,
        ax: Axes | None = None,
        example: int | None = None,
        *,
        backend: Backend | None = None,
    ) -> Any:
        """Lens reward per site (one line per example), or one example's per-token heat map.

        Without `example`: the lens implicit reward at each site, one line for each of the
        first 8 examples. With `example`: its per-token values, sites × positions, the
        columns labelled by the tokens (by position without a tokenizer), the colour scale
        centred at 0 (red: the token lowers the implicit reward, blue: raises it).

        Args:
            ax: Matplotlib axes to draw the static form on.
            example: One example's index for its heat map, or `None`.
            backend: `"plotly"` or `"matplotlib"` (see `reward_lens_tl.plotting`).

        Returns:
            The figure (not shown).
        """
        if example is None:
            shown = range(min(self.values.shape[1], 8))
            fig = line(
                {f"example {b}": self.values[:, b] for b in shown},
                x=list(self.labels),
                xaxis="site",
                yaxis="lens implicit reward",
                title=f"Implicit reward lens (reference={self.reference!r})",
                zero_line=True,
            )
            return render(fig, backend, ax)
        values = self.token_values[:, example].float().cpu()
        tokens = self.tokens[example] if self.tokens else ()
        by_token = len(tokens) == values.shape[1]
        fig = imshow(
            values,
            x=[shown_token(t) for t in tokens] if by_token else None,
            y=list(self.labels),
            xaxis="token" if by_token else "position",
            yaxis="site",
            title=f"Per-token implicit reward lens · example {example}",
            value_name="β·log-ratio",
        )
        return render(fig, backend, ax)


def _read_out(model, x: Tensor) -> Tensor:
    """The logits `model` would give from residual `x`: final norm, unembed, its logit soft-cap.

    (Gemma-2 soft-caps after the unembed; without the cap the final site would miss the reward.)
    """
    normed = model.ln_final(x) if model.cfg.normalization_type is not None else x
    logits = model.unembed(normed)
    cap = float(getattr(model.cfg, "output_logits_soft_cap", -1.0) or -1.0)
    return cap * torch.tanh(logits / cap) if cap > 0 else logits


def _site_logprobs(model, cache, name: str, ids: Tensor) -> Tensor:
    """Taken-token log-probs when `model` reads its residual at `name` (final norm recomputed)."""
    return token_logprobs(_read_out(model, cache[name]), ids)


def implicit_lens(
    model,
    ids: Tensor,
    response_mask: Tensor,
    attention_mask: Tensor | None = None,
    *,
    reference: Reference = "final",
    resolution: Resolution = "layer",
    layers: Sequence[int] | None = None,
    fwd_hooks: Sequence = (),
) -> ImplicitLensResult:
    """Lens implicit reward at every site (see the module docstring). Two forwards.

    Args:
        model: The implicit reward model.
        ids: The token ids.
        response_mask: The response-token mask.
        attention_mask: The attention mask.
        reference: `"final"` or `"lens"` (module docstring).
        resolution: Which sites (see `reward_lens_tl.lens.lens_sites`).
        layers: Only these layers, or `None` for all.
        fwd_hooks: Forward hooks on the policy.

    Returns:
        The lens result.

    Raises:
        InvalidArgumentError: When `reference` is unknown, or `"lens"` with models of
            different depths.

    Examples:
        >>> from reward_lens_tl.implicit import ImplicitRewardModel, implicit_lens
        >>> from reward_lens_tl.zoo import zoo_path
        >>> irm = ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))
        >>> encodings = [irm.encode("how bake bread", "soup oven"), irm.encode("hi", "great")]
        >>> ids, attention, response = irm.batch(encodings)
        >>> lens = implicit_lens(irm, ids, response, attention, resolution="sublayer")
        >>> lens.labels
        ('0_pre', '0_mid', '1_pre', '1_mid', 'final')
        >>> [round(v, 3) for v in lens.values[-1].tolist()]  # the final site: the reward
        [-2.636, -1.797]
        >>> [round(v, 3) for v in irm.rewards(ids, response, attention).tolist()]
        [-2.636, -1.797]
    """
    if reference not in ("final", "lens"):
        raise InvalidArgumentError(f"reference must be 'final' or 'lens', got {reference!r}")
    policy, ref = model.policy, model.reference
    if reference == "lens" and ref.cfg.n_layers != policy.cfg.n_layers:
        raise InvalidArgumentError(
            f"reference='lens' needs the same depth: policy {policy.cfg.n_layers} layers, "
            f"reference {ref.cfg.n_layers}; use reference='final'"
        )
    ids = model.check_inputs(ids, response_mask, attention_mask)
    sites = lens_sites(policy, resolution, layers)
    names = [name for _, name in sites]
    keep = model.beta * (response_mask != 0).float()
    with torch.no_grad():
        with policy.hooks(fwd_hooks=list(fwd_hooks)):
            _, cache = policy.run_with_cache(ids, attention_mask=attention_mask, names_filter=names)
        ref_logits, ref_cache = ref.run_with_cache(
            ids,
            attention_mask=attention_mask,
            names_filter=names if reference == "lens" else [names[-1]],
        )
        ref_final = token_logprobs(ref_logits, ids)
        tokens = []
        for name in names:
            pol = _site_logprobs(policy, cache, name, ids)
            base = _site_logprobs(ref, ref_cache, name, ids) if reference == "lens" else ref_final
            tokens.append(keep * (pol - base))
    token_values = torch.stack(tokens).detach().float().cpu()
    final_policy = _site_logprobs(policy, cache, names[-1], ids)
    rewards = (keep * (final_policy - ref_final)).sum(-1)
    return ImplicitLensResult(
        values=token_values.sum(-1),
        token_values=token_values,
        labels=tuple(label for label, _ in sites),
        rewards=rewards.detach().float().cpu(),
        reference=reference,
        tokens=_tokens(model, ids),
    )


def _tokens(model, ids: Tensor) -> tuple[tuple[str, ...], ...]:
    """Each row's tokens (for the figure), or `()` without a tokenizer."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        return ()
    return tuple(tuple(map(str, tokenizer.convert_ids_to_tokens(row))) for row in ids.tolist())


def pair_implicit_lens(model, pairs: Sequence, *, batch_size: int = 16, **kwargs) -> PairLensResult:
    """Lens of each pair's chosen and rejected response as a `PairLensResult`.

    So `crystallization` works unchanged.

    Args:
        model: The implicit reward model.
        pairs: The preference pairs.
        batch_size: Pairs per chunk.
        **kwargs: Options of `implicit_lens`.

    Returns:
        The lens of both sides.

    Examples:
        >>> from reward_lens_tl.implicit import ImplicitRewardModel, pair_implicit_lens
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> irm = ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))
        >>> pairs = load_task().task.contrast_pairs("harmful", 4, seed=0)  # edited: chosen
        >>> lens = pair_implicit_lens(irm, pairs, batch_size=2)
        >>> chosen, rejected = irm.pair_rewards(pairs)
        >>> bool((lens.margins[-1] - (chosen - rejected)).abs().max() < 1e-5)
        True
        >>> lens.labels, lens.crystallization()  # per pair: where the margin settles
        (('0_pre', '1_pre', 'final'), ['1_pre', 'final', 'final', 'final'])
    """

    def lens(encodings) -> RewardLensResult:
        ids, attention, resp = model.batch(encodings)
        return implicit_lens(model, ids, resp, attention, **kwargs).as_reward_lens()

    chunks = pair_chunks(model, pairs, batch_size)  # chosen rows, then rejected rows
    chosen, rejected = join_pairs(split_pair(lens(encs), n) for encs, n in chunks)
    return PairLensResult(chosen=chosen, rejected=rejected)
