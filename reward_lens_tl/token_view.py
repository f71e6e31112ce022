"""Which tokens carry a reward: an exact per-token decomposition and its coloured view.

`token_attribution` splits one example's reward over its tokens. Every attention head's
direct contribution is split by the source token it reads (`pattern × (v W_O · u)`, exact);
what is written at the reward-reading position itself (its embedding, every MLP there, the
blocks' output biases) is assigned to that position. So the per-token values sum to
`reward − b_R` exactly (`TokenAttribution.completeness_error`). With `mode="position"`
the view shows instead the reward the head would read at every position and its change from
the previous token (where in the sequence the reward moves).

In Jupyter the result renders itself as coloured tokens (CircuitsVis; blue raises the reward,
red lowers it, the value on hover) above a table of each token's top components; `plot()`
draws the same as bars over
the tokens (interactive, with the same hover), and `to_dataframe()` and `top_k()` work as
for every result.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.zoo import zoo_path
    >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    >>> view = token_attribution(model, model.encode("explain how to bake bread", "the bomb"))
    >>> view.top_k(1)[0][0], view.completeness_error() < 1e-4
    ('10:bomb', True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import torch
from jaxtyping import Float
from torch import Tensor

from .attribution import direct_attribution
from .errors import InvalidArgumentError
from .inputs import EncodedConversation
from .padding import reading_position_known
from .plotting import PLOT_DOC, SIGNED, Backend, bar, render, shown_token
from .readout import Objective
from .results import Result, TopK, top_entries
from .signatures import pasted_docs

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from .model import HookedRewardModel


@dataclass(frozen=True)
class TokenAttribution(Result):
    """Per-token values of one example (see the module docstring).

    Built by `token_attribution`.

    Attributes:
        tokens: The example's tokens, as strings.
        values: One value per token: its direct contribution to the reward (attribution
            mode) or the change of the reward read there from the previous position
            (position mode).
        hovers: One hover line per token: the components that contribute most through it.
        reward: The example's reward.
        head_bias: The reward head's bias `b_R` (of the objective shown).
        reward_position: The position the reward is read at.
        response_start: The index of the response's first token, or `None` when the example
            was given as ids.
        mode: `"attribution"` or `"position"`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.token_view import token_attribution
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> view = token_attribution(model, ("explain how to bake bread", "the bomb"))
        >>> view.tokens[view.response_start :], view.reward_position
        (('the', 'bomb', '<|end|>', '<eos>'), 12)
        >>> round(float(view.values.sum()) + view.head_bias, 3), round(view.reward, 3)
        (-6.701, -6.701)
        >>> [label for label, _ in view.top_k(2)]
        ['10:bomb', '8:<|assistant|>']
    """

    tokens: tuple[str, ...]
    values: Float[Tensor, " pos"]
    hovers: tuple[str, ...]
    reward: float
    head_bias: float
    reward_position: int
    response_start: int | None
    mode: str = "attribution"
    title = "reward by token"
    no_example_axis = "it is one example: its rows are that example's tokens"

    def completeness_error(self) -> float:
        """`|Σ values + b_R − reward|` (attribution mode; 0 up to float rounding)."""
        if self.mode != "attribution":
            raise InvalidArgumentError("completeness holds for mode='attribution' only")
        return abs(float(self.values.sum()) + self.head_bias - self.reward)

    def labels(self) -> list[str]:
        """`"{index}:{token}"` of each token."""
        return [f"{i}:{t}" for i, t in enumerate(self.tokens)]

    def to_dataframe(self):
        """One row per token."""
        import pandas as pd

        return pd.DataFrame(
            {
                "pos": range(len(self.tokens)),
                "token": list(self.tokens),
                "value": self.values.tolist(),
                "part": [self._part(i) for i in range(len(self.tokens))],
                "top_components": list(self.hovers),
            }
        )

    def _part(self, pos: int) -> str:
        if self.response_start is None:
            return "sequence"
        return "prompt" if pos < self.response_start else "response"

    def top_k(self, k: int = 5) -> TopK:
        """Tokens with the largest |value| (labelled `pos:token`).

        Args:
            k: How many tokens.

        Returns:
            `(label, value)` pairs, the largest |value| first.
        """
        return top_entries(self.labels(), self.values.tolist(), k, self.mode)

    @pasted_docs(plot=PLOT_DOC)
    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """Bars over the positions, the tokens on the x axis, red below 0 and blue above.

        Hover shows the position and token, its exact value and its hover line (the
        components that contribute most through it); the response is shaded.

        {plot}
        """
        attribution = self.mode == "attribution"
        name = "contribution to the reward" if attribution else "Δ reward read"
        n = len(self.tokens)
        fig = bar(
            [shown_token(t) for t in self.tokens],
            self.values,
            xaxis="token",
            yaxis=name if attribution else "Δ reward read (from the previous position)",
            title=f"{'reward by token' if attribution else 'reward read along the sequence'}: "
            f"reward {self.reward:+.3g}",
            colors=SIGNED,
            horizontal=False,
            width=int(min(1400, max(720, 120 + 18 * n))),
        )
        where = [
            f"{i}: {shown_token(t)}" + (" (reward read here)" if i == self.reward_position else "")
            for i, t in enumerate(self.tokens)
        ]
        fig.data[0].update(
            customdata=[
                [w, h.replace("\n", "<br>")] for w, h in zip(where, self.hovers, strict=True)
            ],
            hovertemplate=f"%{{customdata[0]}}<br>{name}: %{{y:.5g}}<br>%{{customdata[1]}}"
            "<extra></extra>",
        )
        if self.response_start is not None and self.response_start < n:
            fig.add_vrect(
                x0=self.response_start - 0.5,
                x1=n - 0.5,
                fillcolor="rgba(112,173,71,0.12)",
                line_width=0,
                layer="below",
                annotation_text="response",
                annotation_position="top left",
            )
        return render(fig, backend, ax)

    def to_html(self, max_rows: int = 0, *, include_script: bool = True) -> str:
        """The view as HTML: coloured tokens (circuitsvis), then each token's components.

        Blue tokens raise the reward, red ones lower it (a scale symmetric around 0), the value
        on hover; the token the reward is read at is marked `⟦…⟧`. The components that
        contribute most through each token follow in a table (`reward_lens_tl.views`).

        Args:
            max_rows: List at most this many tokens in the table, those of the largest |value|
                (0: all).
            include_script: Include circuitsvis's script (1.3 MB). On a page with several views,
                pass `False` and put `reward_lens_tl.views.script_tag()` on the page once.

        Returns:
            The HTML (no network access, now or when it is opened).
        """
        from .views import attribution_view

        return attribution_view(self, max_rows).html(include_script=include_script)

    def _repr_html_(self) -> str:
        """Jupyter's view: `to_html()` with its script (offline: circuitsvis is never asked)."""
        return self.to_html(include_script=True)


def token_attribution(
    model: HookedRewardModel,
    example: EncodedConversation | Tensor | tuple[str, str],
    *,
    mode: Literal["attribution", "position"] = "attribution",
    objective: Objective = None,
    top: int = 3,
) -> TokenAttribution:
    """Per-token view of one `example`.

    `example` is an `EncodedConversation`, ids `[pos]` or `[1, pos]`, or a `(prompt, response)` pair
    encoded with `model.encode`. A row of a padded batch is shown without its pads.

    `mode`: `"attribution"`, the exact per-token decomposition, or `"position"`, the
    change of the reward read at each position. `top` components are listed per token on
    hover. `model`: the `HookedRewardModel`; `objective`: a
    head column of a multi-objective model.

    Args:
        model: The reward model.
        example: One example: an `EncodedConversation`, ids `[pos]` or `[1, pos]`, or a
            `(prompt, response)` pair.
        mode: `"attribution"` (the exact per-token decomposition) or `"position"` (the
            change of the reward read at each position).
        objective: A head column of a multi-objective model (`None`: the model's reward).
        top: How many components each token's hover line lists.

    Returns:
        The per-token values, with the reward and where it is read.

    Raises:
        InvalidArgumentError: An unknown `mode`, or a batch of more than one example.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.token_view import token_attribution
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> pair = ("explain how to bake bread", "the bomb")
        >>> view = token_attribution(model, pair)  # the values sum to reward - b_R
        >>> round(view.reward, 3), view.completeness_error() < 1e-4
        (-6.701, True)
        >>> moves = token_attribution(model, pair, mode="position")
        >>> round(float(moves.values.sum()), 3)  # the changes add up to the reward read last
        -6.701
    """
    ids, start = _as_ids(model, example)
    if mode == "position":
        return _position_view(model, ids, start)
    if mode != "attribution":
        raise InvalidArgumentError(f"mode={mode!r}: choose 'attribution' or 'position'")
    attr = direct_attribution(model, ids, sources=True, objective=objective)
    assert attr.sources is not None  # sources=True always fills them
    sources = attr.sources[:, :, 0].detach()  # [layer, head, src]
    per_token = sources.sum((0, 1)).clone()
    pos = int(model.pool_positions(ids)[0])
    direct = [
        (c.label, float(attr.values[i, 0]))
        for i, c in enumerate(attr.components)
        if c.kind != "head"
    ]
    per_token[pos] += sum(v for _, v in direct)
    hovers = [_hover(sources, s, top) for s in range(ids.shape[1])]
    extra = ", ".join(
        f"{lab} {v:+.3f}" for lab, v in sorted(direct, key=lambda x: -abs(x[1]))[:top]
    )
    hovers[pos] = f"{hovers[pos]}\nat this position: {extra}"
    return TokenAttribution(
        tokens=_token_strings(model, ids[0]),
        values=per_token.float(),
        hovers=tuple(hovers),
        reward=float(attr.rewards[0]),
        head_bias=float(attr.head_bias[0]),
        reward_position=pos,
        response_start=start,
    )


def _hover(sources: Tensor, src: int, top: int) -> str:
    flat = sources[:, :, src].flatten()
    n_heads = sources.shape[1]
    idx = flat.abs().argsort(descending=True)[:top].tolist()
    parts = [f"L{i // n_heads}H{i % n_heads} {float(flat[i]):+.3f}" for i in idx]
    return "read by " + ", ".join(parts)


def _position_view(model, ids, start) -> TokenAttribution:
    with torch.no_grad(), reading_position_known():  # every position is shown, not just -1
        per_pos = model(ids)[0, :, 0].float().cpu()
        reward = float(model.pooled_rewards(ids)[0])
    pos = int(model.pool_positions(ids)[0])
    delta = per_pos.diff(prepend=torch.zeros(1))
    hovers = tuple(f"reward read here {float(v):+.3f}" for v in per_pos)
    return TokenAttribution(
        tokens=_token_strings(model, ids[0]),
        values=delta,
        hovers=hovers,
        reward=reward,
        head_bias=float(model.b_R[0].detach()),
        reward_position=pos,
        response_start=start,
        mode="position",
    )


def _as_ids(model, example) -> tuple[Tensor, int | None]:
    if isinstance(example, tuple) and len(example) == 2 and isinstance(example[1], str):
        example = model.encode(*example)
    if isinstance(example, EncodedConversation):
        ids = torch.tensor([example.ids], device=model.cfg.device)
        return ids, example.response_start
    ids = torch.as_tensor(example, device=model.cfg.device)
    ids = ids[None] if ids.ndim == 1 else ids
    if ids.shape[0] != 1:
        raise InvalidArgumentError(
            f"token_attribution shows one example; got a batch of {ids.shape[0]}"
        )
    mask = model.infer_attention_mask(model.check_tokens(ids))
    if mask is not None:  # a row of a padded batch: show its tokens only
        ids = ids[:, mask[0] != 0]
    return ids, None


def _token_strings(model, ids: Tensor | Sequence[int]) -> tuple[str, ...]:
    tokenizer = model.tokenizer
    if tokenizer is None:
        return tuple(str(int(i)) for i in ids)
    return tuple(tokenizer.convert_ids_to_tokens([int(i) for i in ids]))


__all__ = ["TokenAttribution", "token_attribution"]
