r"""The reward as the response unfolds: the reward of every response prefix, from one cached pass.

`reward_unfolding` scores every prefix of a response as a conversation of its own: prefix `t`
is the prompt, the response's first `t` tokens and the template's closing tokens (the
`EncodedConversation`'s suffix ids: end-of-turn, EOS), `t = 0 .. T`, read where the HF pooling
rule reads that sequence. Prefix `T` is the whole conversation, so the curve ends at the reward,
and its increments `r(t+1) − r(t)` (`RewardCurve.jumps`) say how much adding each response token
moved the reward. Beside it lies the exact per-token direct attribution of the whole
conversation (`reward_lens_tl.token_view.token_attribution`): the attribution splits one reward
over the tokens it reads, the curve says what the reward *would be* if the response stopped
there; the two agree where a token's effect is direct and local, and differ where a token works
through later ones.

**One cached pass.** Causal attention makes the keys and values of position `j` depend on tokens
`≤ j` only, so one run of `prompt + response` with TransformerLens's key-value cache holds every
prefix's keys and values. All `T + 1` prefixes' closing tokens then run as one batch (in chunks of
`batch_size` rows) against that cache, expanded along the batch (stride 0, never copied until
attention concatenates it): row `t`'s cache mask is one before position `p + t` (`p` the
prompt's length) and zero after, which TransformerLens turns into both the attention mask and
the positions (`cumsum` of the mask: the closing tokens sit at `p + t, p + t + 1, …`, for rotary
and absolute position embeddings alike). The package's shared-prefix attention
(`fast_attention.shared_prefix_z`) takes a cached mask of ones then zeros per row, so the cached
keys are read without being copied per row. A reading position inside
the cached part (a pooling rule that reads before the closing tokens) is served from the cached
run's final residual. Every prefix reward equals `model.rewards` of that prefix scored on its
own (≤ 1e-4, tests/test_unfolding.py: the zoo models, tiny Llama, GPT-2 and Gemma-2). A model
without TransformerLens 3.9's key-value cache (`reward_lens_tl.capabilities.PREFIX_CACHE`: the
TransformerBridge backend) scores every prefix in full instead (`method="naive"`), with the same
numbers.

A process reward model's closing token is its step tag (`HookedPRM.encode` leaves the last tag
outside the response), so its curve is the margin of a step closed after each token; the step
rewards (`RewardCurve.step_rewards`, the PRM's own per-step outputs) are read from the same pass
and sit on the curve (prefix `t_k` ends just before step `k`'s tag).

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.zoo import zoo_path
    >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    >>> curve = reward_unfolding(model, ("explain how to bake bread", "the bomb oven"))
    >>> curve.tokens[1:], [round(j, 2) for j in curve.jumps().tolist()]
    (('the', 'bomb', 'oven'), [0.23, -2.43, 2.4])
    >>> round(curve.reward, 3) == round(float(curve.prefix_rewards[-1]), 3)
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

import torch
from jaxtyping import Float, Int
from torch import Tensor

from .capabilities import PREFIX_CACHE, supports
from .errors import (
    ArgumentTypeError,
    ConversionMismatchError,
    EmptyInputError,
    InvalidArgumentError,
)
from .inputs import EncodedConversation, pad_batch
from .plotting import PLOT_DOC, SIGNED, Backend, bar, line, render, shown_token
from .readout import Objective, objective_index
from .results import Result, TopK, top_entries
from .signatures import pasted_docs
from .sweep.cached import _final_norm
from .token_view import _token_strings

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from transformer_lens.cache.key_value_cache_entry import TransformerLensKeyValueCacheEntry

    from .model import HookedRewardModel
    from .token_view import TokenAttribution

__all__ = ["RewardCurve", "reward_unfolding"]

Method = Literal["cached", "naive"]
#: Relative tolerance of the check that the last prefix's reward is the attribution's reward.
END_TOLERANCE = 1e-3
#: Line colour of the prefix reward.
CURVE_COLOR = "#222222"
STEP_COLOR = "#ed7d31"


@dataclass(frozen=True)
class RewardCurve(Result):
    """The reward of every prefix of one response, beside its per-token attribution.

    Built by `reward_unfolding`. The axis has `T + 1` slots: slot `t` is the prefix that ends
    with the response's first `t` tokens (slot 0: the prompt alone, labelled by its last token),
    so slot `t ≥ 1` is labelled by response token `t − 1`, the token whose arrival the jump into
    slot `t` measures.

    Attributes:
        tokens: The label of each slot: the prompt's last token, then the response's tokens.
        prefix_rewards: The reward of each prefix (`[T + 1]`), with the closing tokens appended.
        reading_positions: Where each prefix's reward is read, in that prefix's own sequence.
        reward: The conversation's reward (the last prefix's).
        response_start: The index of the response's first token in the conversation.
        attribution: The direct attribution of each slot's token to the whole conversation's
            reward (`token_attribution`; slot 0 is the prompt's last token, NaN without one),
            or `None` when not computed.
        token_view: The whole conversation's `TokenAttribution` (every token, the suffix
            included, with its hover lines), or `None`.
        step_positions: A PRM's step tags in the response and suffix (absolute positions;
            empty for a reward model).
        step_rewards: The PRM's own per-step outputs at those tags (`prm.rewards`), or `None`.
        step_margins: The same steps' margins (the curve's scale), or `None`.
        objective: The objective read (`None`: the model's reward).
        method: `"cached"` (one cached pass) or `"naive"` (every prefix scored in full).

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.unfolding import reward_unfolding
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> curve = reward_unfolding(model, ("how bake bread", "oven bomb"))
        >>> [(label, round(jump, 2)) for label, jump in curve.top_k(2)]
        [('8:bomb', -2.52), ('7:oven', 2.29)]
        >>> list(curve.to_dataframe().columns)[:4]
        ['slot', 'pos', 'token', 'prefix_reward']
    """

    tokens: tuple[str, ...]
    prefix_rewards: Float[Tensor, " slot"]
    reading_positions: Int[Tensor, " slot"]
    reward: float
    response_start: int
    attribution: Float[Tensor, " slot"] | None = None
    token_view: TokenAttribution | None = None
    step_positions: tuple[int, ...] = ()
    step_rewards: Float[Tensor, " step"] | None = None
    step_margins: Float[Tensor, " step"] | None = None
    objective: str | None = None
    method: str = "cached"
    title = "reward as the response unfolds"
    no_example_axis = "it is one response: its rows are the prefixes of that response"

    def jumps(self) -> Float[Tensor, " token"]:
        """`r(t + 1) − r(t)`: how much each response token moved the reward (`[T]`)."""
        return self.prefix_rewards.diff()

    def positions(self) -> list[int]:
        """The absolute position of each slot's token (`response_start − 1 + t`)."""
        return [self.response_start - 1 + t for t in range(len(self.tokens))]

    def step_slots(self) -> list[int]:
        """The slot of each step: the prefix that ends just before its tag (at most `T`)."""
        last = len(self.tokens) - 1
        return [min(q - self.response_start, last) for q in self.step_positions]

    def labels(self) -> list[str]:
        """`"{pos}:{token}"` of each slot (the labels `token_attribution` uses)."""
        return [f"{p}:{t}" for p, t in zip(self.positions(), self.tokens, strict=True)]

    def to_dataframe(self):
        """One row per slot: its token, prefix reward, jump, attribution and step reward."""
        import pandas as pd

        n = len(self.tokens)
        jumps = [math.nan, *self.jumps().tolist()]
        attribution = self.attribution.tolist() if self.attribution is not None else [math.nan] * n
        steps = [math.nan] * n
        if self.step_rewards is not None:
            for slot, value in zip(self.step_slots(), self.step_rewards.tolist(), strict=True):
                steps[slot] = value
        return pd.DataFrame(
            {
                "slot": range(n),
                "pos": self.positions(),
                "token": list(self.tokens),
                "prefix_reward": self.prefix_rewards.tolist(),
                "jump": jumps,
                "attribution": attribution,
                "step_reward": steps,
                "part": ["prompt", *["response"] * (n - 1)],
            }
        )

    def top_k(self, k: int = 5) -> TopK:
        """The response tokens with the largest |jump| (labelled `pos:token`).

        Args:
            k: How many tokens.

        Returns:
            `(label, jump)` pairs, the largest |jump| first.
        """
        return top_entries(self.labels()[1:], self.jumps().tolist(), k, "jump")

    @pasted_docs(plot=PLOT_DOC)
    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """The prefix reward as a line over the tokens, the attribution as bars on the same axis.

        Hover on a point shows the prefix reward and the jump into it; on a bar, the token's
        direct attribution. A PRM's steps are marked on the curve (hover: the step's reward).

        {plot}
        """
        import plotly.graph_objects as go

        n = len(self.tokens)
        names = [shown_token(t) for t in self.tokens]
        xs = list(range(n))
        target = self.objective or "reward"
        xaxis, title = "token (the prefix ends here)", f"{target} as the response unfolds: "
        title += f"{self.reward:+.3g}"
        width = int(min(1400, max(720, 140 + 22 * n)))
        where = [f"{p}: {t}" for p, t in zip(self.positions(), names, strict=True)]
        if self.attribution is not None:
            values = [0.0 if v != v else v for v in self.attribution.tolist()]
            fig = bar(
                names,
                values,
                colors=SIGNED,
                horizontal=False,
                xaxis=xaxis,
                yaxis=target,
                title=title,
                width=width,
            )
            fig.data[0].update(
                name="direct attribution of the token",
                marker_opacity=0.55,
                customdata=where,
                hovertemplate="%{customdata}<br>direct attribution: %{y:.5g}<extra></extra>",
            )
        else:
            fig = line(
                self.prefix_rewards,
                x=names,
                xaxis=xaxis,
                yaxis=target,
                title=title,
                zero_line=True,
                width=width,
            )
            fig.data = ()  # the curve is added below, with its jumps on hover
        jumps = ["", *[f"<br>jump: {j:+.4g}" for j in self.jumps().tolist()]]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=self.prefix_rewards.tolist(),
                name=f"{target} of the prefix",
                mode="lines+markers" if n <= 120 else "lines",
                line=dict(color=CURVE_COLOR, width=2),
                marker=dict(size=5),
                customdata=[[w, j] for w, j in zip(where, jumps, strict=True)],
                hovertemplate=f"%{{customdata[0]}}<br>{target} of the prefix: %{{y:.5g}}"
                "%{customdata[1]}<extra></extra>",
            )
        )
        if self.step_margins is not None and self.step_rewards is not None:
            slots = self.step_slots()
            scores = self.step_rewards.tolist()
            fig.add_trace(
                go.Scatter(
                    x=slots,
                    y=self.step_margins.tolist(),
                    name="step reward (at its tag)",
                    mode="markers",
                    marker=dict(color=STEP_COLOR, size=12, symbol="diamond"),
                    customdata=[
                        [f"step {k}", where[s], float(r)]
                        for k, (s, r) in enumerate(zip(slots, scores, strict=True))
                    ],
                    hovertemplate="%{customdata[0]}, closed after %{customdata[1]}<br>"
                    "margin: %{y:.5g}<br>step reward: %{customdata[2]:.4g}<extra></extra>",
                )
            )
        if n > 1:
            fig.add_vrect(
                x0=0.5,
                x1=n - 0.5,
                fillcolor="rgba(112,173,71,0.10)",
                line_width=0,
                layer="below",
                annotation_text="response",
                annotation_position="top left",
            )
        # the legend in a row between the title and the plot: below it, it would cover the
        # rotated token labels and the axis title
        fig.update_layout(
            showlegend=True,
            legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0),
            margin=dict(t=80),
        )
        return render(fig, backend, ax)


def reward_unfolding(
    model: HookedRewardModel,
    conversation: EncodedConversation | tuple[str, str] | tuple[Sequence[int] | Tensor, int],
    *,
    objective: Objective = None,
    attribution: bool = True,
    batch_size: int = 256,
    method: Method = "cached",
) -> RewardCurve:
    """The reward of every prefix of the response, with its per-token attribution.

    Prefix `t` is `prompt + response[:t] + closing tokens` (the suffix ids), `t = 0 .. T`; all
    of them are scored from one cached pass over the conversation (see the module docstring), so
    the cost is about that of scoring the conversation plus one forward of the closing tokens
    per prefix. The last prefix is the conversation itself.

    Args:
        model: The reward model (a `HookedPRM` gives step rewards too).
        conversation: An `EncodedConversation`, a `(prompt, response)` pair of strings
            (encoded with `model.encode`), or `(ids, response_start)`: the ids and where the
            response starts (a trailing EOS is the closing part).
        objective: A head column of a multi-objective model (`None`: the model's reward, the
            gated score of an ArmoRM-style model).
        attribution: Also compute the exact per-token direct attribution (one more forward
            with a cache; the full reward is checked against the curve's end).
        batch_size: Prefixes per batch of the cached pass (bounds the memory: each row holds
            the conversation's keys and values in attention).
        method: `"cached"` (one cached pass; used unless a hook is attached to the model, its
            position embedding is neither absolute nor rotary, or it has no TransformerLens 3.9
            key-value cache, `capabilities.PREFIX_CACHE`) or `"naive"` (every prefix scored
            as a full sequence in padded batches: the reference, for comparison).

    Returns:
        The `RewardCurve`.

    Raises:
        InvalidArgumentError: An unknown `method`, a `batch_size` below 1, or a conversation
            that is none of the accepted forms.
        EmptyInputError: A conversation whose empty prefix would have no token (no prompt and
            no closing tokens).
        ConversionMismatchError: The curve's end disagrees with the attribution's reward (the
            cached pass is then wrong for this model: use `method="naive"` and report it).

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.unfolding import reward_unfolding
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> enc = model.encode("explain how to bake bread", "the oven")
        >>> curve = reward_unfolding(model, enc)
        >>> [round(r, 3) for r in curve.prefix_rewards.tolist()]
        [-4.502, -4.273, -1.819]
        >>> rows = [enc.ids[: enc.response_start + t] + enc.suffix_ids() for t in range(3)]
        >>> [round(model.rewards(torch.tensor([r])).item(), 3) for r in rows]
        [-4.502, -4.273, -1.819]
    """
    if method not in ("cached", "naive"):
        raise InvalidArgumentError(f"method={method!r}: choose 'cached' or 'naive'")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidArgumentError(f"batch_size must be a positive int, got {batch_size!r}")
    enc = _as_encoded(model, conversation)
    eos = getattr(model, "eos_token_id", None)
    ids, p, e = enc.ids, enc.response_start, enc.suffix_start(eos)
    suffix = ids[e:]
    if p + len(suffix) == 0:
        raise EmptyInputError(
            "the empty prefix of this conversation has no token (no prompt and no closing "
            "tokens); give a prompt, or mark the closing tokens with response_end"
        )
    column = objective_index(model, objective)
    if method == "cached" and not _cache_applies(model):
        method = "naive"
    step_positions = _step_positions(model, ids, p)
    states: Tensor | None = None
    if method == "cached":
        curve, reading, states = _cached(model, ids, p, e, column, batch_size, step_positions)
    else:
        rows = [ids[: p + t] + suffix for t in range(e - p + 1)]
        curve, reading = _naive(model, rows, column, batch_size)
    step_rewards = step_margins = None
    if step_positions:
        if states is None:  # the naive path reads the steps from one forward of the whole
            from .padding import reading_position_known

            with reading_position_known():
                margins = cast(Any, model).step_margins(torch.tensor([ids]))[0]
            tags = cast(Any, model).step_positions(torch.tensor([ids]))[0]
            keep = [i for i, q in enumerate(tags.tolist()) if q in step_positions]
            step_margins = margins[keep].float().cpu()
        else:
            with torch.no_grad():
                step_margins = _step_values(model, states).float().cpu()
        step_rewards = cast(Any, model).transformed(step_margins)
    view = None
    per_slot = None
    if attribution:
        from .token_view import token_attribution

        view = token_attribution(model, enc, objective=objective)
        end = float(curve[-1])
        if abs(view.reward - end) > END_TOLERANCE * (1.0 + abs(end)):
            raise ConversionMismatchError(
                f"the last prefix's reward {end:.6g} differs from the conversation's reward "
                f"{view.reward:.6g}; the cached pass is wrong for this model: use "
                "method='naive' and report it"
            )
        values = view.values.float().cpu()
        first = values.new_full((1,), math.nan) if p == 0 else values[p - 1 : p]
        per_slot = torch.cat([first, values[p:e]])
    label = None if objective is None else str(objective)
    if column is not None and objective is not None and model.n_objectives > 1:
        label = model.objective_names[column]
    return RewardCurve(
        tokens=(
            _token_strings(model, ids[p - 1 : p])[0] if p else "∅",
            *_token_strings(model, ids[p:e]),
        ),
        prefix_rewards=curve,
        reading_positions=reading,
        reward=float(curve[-1]),
        response_start=p,
        attribution=per_slot,
        token_view=view,
        step_positions=tuple(step_positions),
        step_rewards=step_rewards,
        step_margins=step_margins,
        objective=label,
        method=method,
    )


def _as_encoded(model, conversation) -> EncodedConversation:
    if isinstance(conversation, EncodedConversation):
        return conversation
    if isinstance(conversation, tuple) and len(conversation) == 2:
        first, second = conversation
        if isinstance(first, str) and isinstance(second, str):
            return model.encode(first, second)
        if isinstance(second, int) and not isinstance(second, bool):
            if isinstance(first, Tensor):
                if first.ndim == 2 and first.shape[0] == 1:
                    first = first[0]
                if first.ndim != 1:
                    raise InvalidArgumentError(
                        f"ids of one conversation are [pos] or [1, pos]; got {tuple(first.shape)}"
                    )
                first = first.tolist()
            if isinstance(first, Sequence) and not isinstance(first, str):
                return EncodedConversation(ids=tuple(first), response_start=second)
    if isinstance(conversation, str):
        raise ArgumentTypeError(
            "pass the conversation as (prompt, response), an EncodedConversation or "
            "(ids, response_start), not one string"
        )
    raise InvalidArgumentError(
        "conversation must be an EncodedConversation (model.encode(prompt, response)), a "
        f"(prompt, response) pair of strings or (ids, response_start); got {type(conversation)}"
    )


def _cache_applies(model) -> bool:
    """Whether the cached pass runs and is exact here: a TL 3.9 cache, no hook, known positions."""
    if not supports(model, PREFIX_CACHE):  # no TransformerLens 3.9 key-value cache
        return False
    from .fast_attention import hooked

    return model.cfg.positional_embedding_type in ("standard", "rotary") and not hooked([model])


def _step_positions(model, ids: tuple[int, ...], p: int) -> list[int]:
    """A PRM's step tags at or after the response's start (empty for other models)."""
    tag = getattr(model, "step_tag_id", None)
    if tag is None or not hasattr(model, "step_margins"):
        return []
    return [q for q in range(p, len(ids)) if ids[q] == tag]


@torch.no_grad()
def _cached(
    model, ids: tuple[int, ...], p: int, e: int, column: int | None, batch_size: int, steps
) -> tuple[Tensor, Tensor, Tensor | None]:
    """Curve, reading positions and the steps' final states, from one cached pass."""
    device = model.cfg.device
    suffix = ids[e:]
    n_suffix, n_rows = len(suffix), e - p + 1
    cached = _prefix_run(model, ids[:e]) if e else None
    normed_cached = cached[0] if cached is not None else None
    row_states, gate_states, readings = [], [], []
    last_suffix: Tensor | None = None
    gated = column is None and getattr(model, "gating", None) is not None
    for t0 in range(0, n_rows, batch_size):
        t1 = min(n_rows, t0 + batch_size)
        ts = torch.arange(t0, t1, device=device)
        rows = [ids[: p + t] + suffix for t in range(t0, t1)]
        full, mask = pad_batch(rows, model.pad_token_id, padding_side="right")
        full, mask = full.to(device), mask.to(device)
        pos = model.pool_positions(model.check_tokens(full, mask), mask)
        suffix_states = None
        if n_suffix:
            suffix_states = _suffix_run(model, cached, suffix, p, ts)
            if t1 == n_rows:
                last_suffix = suffix_states[-1]
        row_states.append(_gather(normed_cached, suffix_states, p + ts, pos))
        if gated:
            gate_pos = cast(Any, model).gate_positions(full)
            gate_states.append(_gather(normed_cached, suffix_states, p + ts, gate_pos))
        readings.append(pos)
    states = torch.cat(row_states)
    curve = _reduce(model, states, column, torch.cat(gate_states) if gated else None)
    step_states = None
    if steps:
        parts = [
            normed_cached[q] if q < e else cast(Tensor, last_suffix)[q - e]  # type: ignore[index]
            for q in steps
        ]
        step_states = torch.stack(parts)
    return curve.float().cpu(), torch.cat(readings).cpu(), step_states


def _prefix_run(model, prefix: tuple[int, ...]):
    """Run `prompt + response` once: its final normed states and its cache per layer."""
    from transformer_lens.cache.key_value_cache import TransformerLensKeyValueCache

    x = torch.tensor([prefix], device=model.cfg.device)
    kv = TransformerLensKeyValueCache.init_cache(model.cfg, model.cfg.device, 1)
    resid = model(
        x,
        return_type=None,
        stop_at_layer=model.cfg.n_layers,
        attention_mask=torch.ones_like(x),
        past_kv_cache=kv,
    )
    keys = [entry.past_keys for entry in kv.entries]
    values = [entry.past_values for entry in kv.entries]
    rotated: list[Tensor | None] = [None] * len(keys)
    if model.cfg.positional_embedding_type == "rotary":
        rotated = [b.attn.apply_rotary(k, 0, None) for b, k in zip(model.blocks, keys, strict=True)]
    return _final_norm(model, resid)[0], keys, values, rotated


def _suffix_run(model, cached, suffix: tuple[int, ...], p: int, ts: Tensor) -> Tensor:
    """The closing tokens of prefixes `ts` against the cache: final normed states `[B, S, d]`."""
    from transformer_lens.cache.key_value_cache import TransformerLensKeyValueCache

    from .fast_attention import RotatedPrefixEntry

    device = model.cfg.device
    n = ts.shape[0]
    new = torch.tensor([suffix], device=device).expand(n, -1)
    width = p + int(ts[-1])  # the longest prefix of the chunk sees cached keys < p + t
    if cached is None or width == 0:  # the empty prefix of a conversation without prompt
        resid = model(new, return_type=None, stop_at_layer=model.cfg.n_layers)
        return _final_norm(model, resid)
    _, keys, values, rotated = cached
    entries: list[TransformerLensKeyValueCacheEntry] = [
        RotatedPrefixEntry(
            past_keys=k[:, :width].expand(n, -1, -1, -1),
            past_values=v[:, :width].expand(n, -1, -1, -1),
            frozen=True,
            rotated_keys=None if r is None else r[:, :width].expand(n, -1, -1, -1),
        )
        for k, v, r in zip(keys, values, rotated, strict=True)
    ]
    seen = (torch.arange(width, device=device)[None] < (p + ts)[:, None]).long()
    cache = TransformerLensKeyValueCache(entries, seen, frozen=True)
    resid = model(
        new,
        return_type=None,
        stop_at_layer=model.cfg.n_layers,
        attention_mask=torch.ones_like(new),
        past_kv_cache=cache,
    )
    return _final_norm(model, resid)


def _gather(cached: Tensor | None, suffix: Tensor | None, lengths: Tensor, pos: Tensor) -> Tensor:
    """Row `b`'s final state at `pos[b]`: from the cached run before `lengths[b]`, else its own."""
    pos = pos.to(lengths.device)
    rows = torch.arange(pos.shape[0], device=pos.device)
    inside = pos < lengths
    parts = []
    if suffix is not None:
        own = suffix[rows, (pos - lengths).clamp(min=0, max=suffix.shape[1] - 1)]
        parts.append(own)
    if cached is not None:
        mine = cached[pos.clamp(max=cached.shape[0] - 1)]
        if not parts:
            return mine
        return torch.where(inside[:, None], mine, parts[0])
    return parts[0]


def _reduce(model, states: Tensor, column: int | None, gate_states: Tensor | None) -> Tensor:
    """The read value from final normed states: a head column, a judge's score or the gated one."""
    pooled = model.unembed(states[:, None])[:, 0]
    if column is not None:
        return pooled[:, column]
    if getattr(model, "scored_head", False):
        return cast(Any, model).score_from(pooled)
    gated = cast(Any, model)
    gate = gated.gating(cast(Tensor, gate_states).to(gated.reward_transform_matrix.dtype))
    mix = gated.reward_transform_matrix.to(pooled.dtype)
    return (gate.to(pooled.dtype) * (pooled @ mix)).sum(-1)


def _step_values(model, states: Tensor) -> Tensor:
    """A PRM's step margins from its final states at the tags (as `step_margins` reads them)."""
    return cast(Any, model).score_from(model.unembed(states[:, None])[:, 0])


@torch.no_grad()
def _naive(model, rows: list[tuple[int, ...]], column: int | None, batch_size: int):
    """Every prefix as a full sequence, in padded batches (the reference)."""
    values, readings = [], []
    for start in range(0, len(rows), batch_size):
        ids, mask = pad_batch(rows[start : start + batch_size], model.pad_token_id)
        ids, mask = ids.to(model.cfg.device), mask.to(model.cfg.device)
        pos = model.pool_positions(model.check_tokens(ids, mask), mask)
        lengths = mask.sum(1)  # pads sit after the first token: shift the rest back
        readings.append(torch.where(pos > 0, pos - (ids.shape[1] - lengths), pos))
        if column is None:
            values.append(model.pooled_rewards(ids, mask))
        else:
            values.append(model.objective_rewards(ids, mask)[:, column])
    return torch.cat(values).float().cpu(), torch.cat(readings).cpu()
