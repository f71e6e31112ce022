r"""Counterfactual edits: the fewest response-token changes that flip a preference, verified.

`counterfactual_edits` looks for the smallest set of token substitutions or deletions in one
**response** (never the prompt, never the template's tokens) that reverses the model's
preference between a pair's two responses, or that moves a single response's reward by a
`target` amount. Edits are *proposed* by a cheap first-order signal and *verified* by exact
re-scoring:

- **positions** are ranked by the exact per-token attribution of the response being edited
  (`proposer="attribution"`: `token_view.token_attribution`, values that sum to
  `reward − b_R`; to lower the reward the largest positive contributions go first), or by
  the best first-order estimate at that position (`proposer="gradient"`, HotFlip / AtP on the
  embedding);
- **substitutes** at position `p` (holding token `x_p`) are the `n_substitutes` tokens of a
  bounded candidate vocabulary with the largest first-order estimate of the change
  `Δ̂(p, t) = (W_E[t] − W_E[x_p]) · ∂r/∂e_p` in the wanted direction (one backward pass gives
  every `(p, t)`: works for a 100k vocabulary), plus deleting `x_p`;
- the search is a beam (`beam=1`: greedy) over edit sets: each step extends every kept set by
  one edit at one of its `n_positions` top-ranked unedited positions and re-scores **every**
  extension exactly in one batch, the shared prompt prefix run once
  (`sweep.cached.PrefixCache`). It stops at the first size at which an extension reaches the
  goal (the one that goes furthest wins), so the reported edit set is the smallest the
  candidates contain, up to the beam's width. Otherwise it keeps the `beam` sets that went
  furthest and grows them, up to `max_edits`.

Every reported reward (before, after each step, the other response) is computed again at the
end by `model.rewards` on the full edited sequences (a batch of `steps + 1` rows), and
`found`/`flipped` are decided on those numbers.

**Which side is edited.** For a pair, `side="chosen"` (default) edits the chosen response and
`side="rejected"` the rejected one. "Flip" is defined on the model's own preference:
`margin = r(chosen) − r(rejected)`, a tie counting as preferring the chosen response; a
flip is an edit after which the margin has the opposite sign (strictly). So when the model
prefers the chosen response, editing it must lower its reward below the rejected one's, and
editing the rejected response must raise it above the chosen one's (and the other way round
when the model already prefers the rejected one). A single response (an
`EncodedConversation`, a zoo `Example` or `(prompt, response)` text) needs `target`: the
signed reward change to reach (`r_after − r_before ≥ target` for `target > 0`, `≤` for
`target < 0`). A search that does not reach the goal within `max_edits` is **not** an
error: the result has `found=False` and holds the best edit set it tried.

`random_edit_baseline` applies random edits (a random order of the response's positions, each
token replaced by a random candidate or deleted) until the goal is reached: the edit size a
search without a proposer needs.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.zoo import zoo_path
    >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    >>> chosen = model.encode("explain how to bake bread", "the oven and the flour")
    >>> rejected = model.encode("explain how to bake bread", "the oven and the bomb")
    >>> edit = counterfactual_edits(model, (chosen, rejected), side="rejected")
    >>> edit.found, edit.flipped, [(e.old_token, e.new_token) for e in edit.edits]
    (True, True, [('bomb', 'recipe')])
    >>> edit.margin_before > 0 > edit.margin_after
    True
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import torch
from jaxtyping import Float
from torch import Tensor

from .contrast import as_conversation, is_pair, pair_sides
from .errors import EmptyInputError, InvalidArgumentError
from .html import escape
from .inputs import EncodedConversation, pad_batch
from .plotting import PLOT_DOC, SIGNED, Backend, bar, render, shown_token, side_by_side
from .readout import Objective, objective_index
from .results import Result, TopK, top_entries
from .signatures import pasted_docs
from .token_view import _token_strings

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from .model import HookedRewardModel

__all__ = [
    "CounterfactualEdit",
    "TokenEdit",
    "counterfactual_edits",
    "random_edit_baseline",
]

Side = Literal["chosen", "rejected"]
Proposer = Literal["attribution", "gradient"]

#: How a deleted token is shown.
DELETED = "∅"


@dataclass(frozen=True)
class TokenEdit:
    """One edit of one response token.

    Attributes:
        position: The token's position in the unedited sequence (prompt and template included).
        old_id: The token id there.
        new_id: The substitute's id, or `None` for a deletion.
        old_token: The old token's text.
        new_token: The substitute's text, or `None` for a deletion.

    Examples:
        >>> edit = TokenEdit(9, 38, None, "bomb", None)
        >>> edit.kind, edit.label
        ('delete', '9:bomb→∅')
    """

    position: int
    old_id: int
    new_id: int | None
    old_token: str
    new_token: str | None

    @property
    def kind(self) -> str:
        """`"substitute"` or `"delete"`."""
        return "delete" if self.new_id is None else "substitute"

    @property
    def label(self) -> str:
        """`"{position}:{old}→{new}"` (`∅` for a deletion)."""
        return f"{self.position}:{self.old_token}→{self.new_token or DELETED}"


@dataclass(frozen=True)
class CounterfactualEdit(Result):
    """The edits found for one response and the exact rewards before and after.

    Built by `counterfactual_edits` and `random_edit_baseline` (see the module docstring).

    Attributes:
        edits: The edits, in the order the search added them.
        original: The edited response's conversation before the edits.
        edited: The conversation after the edits (`edited.ids` are the edited ids).
        reward_before: `model.rewards` of `original` (of the objective searched).
        reward_after: `model.rewards` of `edited`.
        step_rewards: `model.rewards` after each edit in turn (the last is `reward_after`).
        other_reward: The other response's reward for a pair, else `None`.
        side: `"chosen"`, `"rejected"` (a pair) or `"response"` (a single response).
        target: The reward change asked for (a single response), else `None` (a flip).
        found: Whether the goal (the flip, or the target) is reached, by `model.rewards`.
        tokens_before: The tokens of `original`.
        tokens_after: The tokens of `edited`.
        attribution_before: The per-token attribution of `original` (sums to
            `reward_before − b_R`).
        attribution_after: The per-token attribution of `edited`.
        n_scored: How many edited sequences were scored exactly during the search.
        proposer: `"attribution"`, `"gradient"` or `"random"`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> reply = model.encode("explain how to bake bread", "the oven and the bomb")
        >>> edit = counterfactual_edits(model, reply, target=2.0)
        >>> edit.found, edit.side, len(edit.edits), edit.reward_after - edit.reward_before >= 2
        (True, 'response', 1, True)
        >>> list(edit.to_dataframe().columns)[:4]
        ['edit', 'position', 'old_token', 'new_token']
    """

    edits: tuple[TokenEdit, ...]
    original: EncodedConversation
    edited: EncodedConversation
    reward_before: float
    reward_after: float
    step_rewards: tuple[float, ...]
    other_reward: float | None
    side: str
    target: float | None
    found: bool
    tokens_before: tuple[str, ...]
    tokens_after: tuple[str, ...]
    attribution_before: Float[Tensor, " pos"]
    attribution_after: Float[Tensor, " pos_after"]
    n_scored: int
    proposer: str
    title = "counterfactual edit"
    label_column = "edit"
    value_column = "delta"
    no_example_axis = "it is one edit of one example: its rows are the edits"

    def _margin(self, reward: float) -> float | None:
        if self.other_reward is None:
            return None
        return reward - self.other_reward if self.side == "chosen" else self.other_reward - reward

    @property
    def margin_before(self) -> float | None:
        """`r(chosen) − r(rejected)` before the edits (`None` for a single response)."""
        return self._margin(self.reward_before)

    @property
    def margin_after(self) -> float | None:
        """`r(chosen) − r(rejected)` after the edits (`None` for a single response)."""
        return self._margin(self.reward_after)

    @property
    def flipped(self) -> bool:
        """Whether a pair's preference is reversed (always `False` for a single response)."""
        return self.other_reward is not None and self.found

    @property
    def positions(self) -> tuple[int, ...]:
        """The edited positions (in the unedited sequence)."""
        return tuple(e.position for e in self.edits)

    def to_dataframe(self):
        """One row per edit, in order: the tokens, the exact reward after it and its change."""
        import pandas as pd

        before = (self.reward_before, *self.step_rewards)
        return pd.DataFrame(
            {
                "edit": [e.label for e in self.edits],
                "position": [e.position for e in self.edits],
                "old_token": [e.old_token for e in self.edits],
                "new_token": [e.new_token or DELETED for e in self.edits],
                "kind": [e.kind for e in self.edits],
                "reward": list(self.step_rewards),
                "delta": [b - a for a, b in zip(before, before[1:], strict=False)],
            }
        )

    def top_k(self, k: int = 5) -> TopK:
        """The edits that changed the reward most (exact change at their step).

        Args:
            k: How many edits.

        Returns:
            `(edit label, change)` pairs, the largest |change| first.
        """
        frame = self.to_dataframe()
        return top_entries(frame["edit"].tolist(), frame["delta"].tolist(), k, "delta")

    def _shown_before(self, label: Callable[[str], str] = shown_token) -> list[str]:
        """The tokens before the edits, an edited one as `[old→new]`, each through `label`.

        `shown_token` for a figure's HTML ticks; `str` for views that escape on their own.
        """
        edited = {e.position: e for e in self.edits}
        return [
            f"[{label(t)}→{label(edited[i].new_token or DELETED)}]" if i in edited else label(t)
            for i, t in enumerate(self.tokens_before)
        ]

    def _goal_short(self) -> str:
        """The goal in a few words, for a figure's title (it must fit a phone's width)."""
        return f"target Δ {self.target:+.3g}" if self.target is not None else f"{self.side} side"

    def _goal_text(self) -> str:
        if self.target is not None:
            return f"target Δ {self.target:+.3g}"
        return f"flip ({self.side} side edited)"

    @pasted_docs(plot=PLOT_DOC)
    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """The edited response's per-token attribution, edited tokens marked, and the rewards.

        Left: bars of each token's exact attribution before the edits; an edited token is
        labelled `[old→new]` (`∅`: deleted) and outlined. Right: the rewards before and after
        each edit (and the other response's reward, for a pair).

        {plot}
        """
        labels = self._shown_before()
        n = len(labels)
        tokens = bar(
            labels,
            self.attribution_before,
            xaxis="token ([old→new]: edited)",
            yaxis="contribution to the reward",
            title="attribution before the edits",
            colors=SIGNED,
            horizontal=False,
            width=int(min(1000, max(520, 100 + 18 * n))),
        )
        edited = set(self.positions)
        tokens.data[0].marker.line = dict(
            width=[3 if i in edited else 0 for i in range(n)], color="#000000"
        )
        names = ["before"] + [f"+{e.label}" for e in self.edits]
        values = [self.reward_before, *self.step_rewards]
        if self.other_reward is not None:
            names.append(f"{'rejected' if self.side == 'chosen' else 'chosen'}(other)")
            values.append(self.other_reward)
        rewards = bar(
            [shown_token(x, 32) for x in names],
            values,
            xaxis="after edit",
            yaxis="reward (exact)",
            title="reward before and after",
            colors=SIGNED,
            horizontal=False,
        )
        state = "found" if self.found else "not found"
        fig = side_by_side(
            [tokens, rewards],
            title=f"edit {state}: reward {self.reward_before:+.3g} → {self.reward_after:+.3g} "
            f"({self._goal_short()})",
        )
        return render(fig, backend, ax)

    def to_html(self, max_rows: int = 0, *, include_script: bool = True) -> str:
        """The edit as HTML: the response before and after as coloured tokens, then the edits.

        Tokens are coloured by their exact attribution (blue raises the reward, red lowers it,
        one scale for both views); an edited token is shown `[old→new]` before and `[new]`
        after. Every text is escaped.

        Args:
            max_rows: List at most this many edits in the table (0: all).
            include_script: Include circuitsvis's script (1.3 MB); pass `False` on a page
                that has `reward_lens_tl.views.script_tag()` once.

        Returns:
            The HTML (no network access).
        """
        from .views import script_tag, tokens_view

        scale = float(
            torch.cat([self.attribution_before, self.attribution_after]).abs().max().clamp(min=0)
        )
        after_new = {p for p in _after_positions(self)}
        after = [f"[{t}]" if i in after_new else t for i, t in enumerate(self.tokens_after)]
        before_view = tokens_view(
            self._shown_before(str),
            self.attribution_before,
            scale=scale,
            title=f"before: reward {self.reward_before:+.4f}",
        )
        after_view = tokens_view(
            after,
            self.attribution_after,
            scale=scale,
            title=f"after: reward {self.reward_after:+.4f}",
        )
        margins = ""
        if self.other_reward is not None:
            margins = (
                f"; margin {self.margin_before:+.4f} → {self.margin_after:+.4f} "
                f"(other side {self.other_reward:+.4f})"
            )
        state = "found" if self.found else "not found"
        head = (
            f"<div><strong>{escape(self.title)}</strong>: {escape(self._goal_text())}, "
            f"{escape(state)}, {len(self.edits)} edit(s){escape(margins)}; "
            f"{self.n_scored} exact re-scorings ({escape(self.proposer)})</div>"
        )
        frame = self.to_dataframe()
        rows = frame if max_rows <= 0 else frame.head(max_rows)
        table = "".join(
            f"<tr><td>{int(r.position)}</td><td>{escape(r.old_token)}</td>"
            f"<td>{escape(r.new_token)}</td><td>{r.reward:+.4f}</td><td>{r.delta:+.4f}</td></tr>"
            for r in rows.itertuples()
        )
        table = (
            '<table style="border-collapse:collapse;font-size:12px"><tr><th>pos</th>'
            "<th>old</th><th>new</th><th>reward</th><th>Δ</th></tr>"
            f"{table}</table>"
        )
        return (
            head
            + (script_tag() if include_script else "")
            + before_view.html(include_script=False)
            + after_view.html(include_script=False)
            + table
        )

    def _repr_html_(self) -> str:
        """Jupyter's view: `to_html()` with its script (offline)."""
        return self.to_html(include_script=True)


def _after_positions(result: CounterfactualEdit) -> list[int]:
    """Positions in `edited` holding a substitute."""
    subs = {e.position for e in result.edits if e.new_id is not None}
    dels = sorted(e.position for e in result.edits if e.new_id is None)
    return [p - sum(d < p for d in dels) for p in subs]


# -- the job: what is edited and what counts as reaching the goal ----------------------------------
@dataclass(frozen=True)
class _Goal:
    """The edited conversation, the other side's reward, the direction and the goal test."""

    conversation: EncodedConversation
    side: str
    other_reward: float | None
    target: float | None
    reward_before: float
    direction: int  # +1: the reward must rise, -1: fall
    threshold: float  # reached when direction * (reward - threshold) > 0 (or >= for targets)

    def reached(self, reward: Tensor) -> Tensor:
        gap = self.direction * (reward - self.threshold)
        return gap >= 0 if self.target is not None else gap > 0


def _sides(model, example) -> tuple[EncodedConversation, EncodedConversation | None]:
    """`(chosen, rejected)` of a pair, or `(response, None)`."""
    if is_pair(example):
        first, second, _ = pair_sides(model, example)
        return first, second
    return as_conversation(model, example), None


def _span(model, conversation: EncodedConversation) -> tuple[int, int]:
    start = conversation.response_start
    end = conversation.suffix_start(getattr(model.tokenizer, "eos_token_id", None))
    return start, end


def _exact(model, rows: Sequence[Sequence[int]], column: int | None) -> Tensor:
    """`model.rewards` (or the objective's column) of id rows, one padded batch."""
    ids, mask = pad_batch([tuple(r) for r in rows], model.pad_token_id)
    ids, mask = ids.to(model.cfg.device), mask.to(model.cfg.device)
    if column is None:
        out = model.rewards(ids, mask)
        if out.ndim != 1:
            raise InvalidArgumentError(
                f"this head has {model.n_objectives} objectives {model.objective_names}; pass "
                "objective=<name or index>"
            )
        return out.float().cpu()
    return model.objective_rewards(ids, mask)[:, column].float().cpu()


def _goal(model, example, side, target, column) -> _Goal:
    chosen, rejected = _sides(model, example)
    if rejected is None:
        if side is not None:
            raise InvalidArgumentError(
                f"side={side!r} is for a pair; a single response is edited itself (leave side out)"
            )
        if target is None or not float(target) or float(target) != float(target):
            raise InvalidArgumentError(
                "a single response needs target=<the non-zero reward change to reach>, e.g. "
                "target=-2.0"
            )
        before = float(_exact(model, [chosen.ids], column)[0])
        t = float(target)
        return _Goal(chosen, "response", None, t, before, 1 if t > 0 else -1, before + t)
    if target is not None:
        raise InvalidArgumentError(
            "target= is for a single response; a pair's goal is the flip (pass one "
            "response, e.g. pair.chosen's EncodedConversation, to move it by a target)"
        )
    side = "chosen" if side is None else side
    if side not in ("chosen", "rejected"):
        raise InvalidArgumentError(f"side={side!r}: choose 'chosen' or 'rejected'")
    rewards = _exact(model, [chosen.ids, rejected.ids], column)
    rc, rr = float(rewards[0]), float(rewards[1])
    prefers_chosen = rc - rr >= 0  # a tie counts as preferring the chosen response
    edited, other = (chosen, rr) if side == "chosen" else (rejected, rc)
    before = rc if side == "chosen" else rr
    # preferring chosen: chosen must fall below rejected, rejected rise above chosen
    direction = -1 if prefers_chosen == (side == "chosen") else 1
    return _Goal(edited, side, other, None, before, direction, other)


# -- proposals ------------------------------------------------------------------------------------
def _candidate_ids(model, substitutes: Sequence[int] | None) -> Tensor:
    if substitutes is None:
        from .sweep.candidates import vocabulary_candidates

        ids = [c[0] for c in vocabulary_candidates(model).ids if len(c) == 1]
    else:
        ids = []
        for t in substitutes:
            if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < model.cfg.d_vocab:
                raise InvalidArgumentError(
                    f"substitutes holds {t!r}: token ids in [0, {model.cfg.d_vocab}) are needed"
                )
            ids.append(t)
    if not ids:
        raise EmptyInputError("no substitute tokens to try (substitutes is empty)")
    return torch.tensor(sorted(set(ids)), dtype=torch.long)


def _embedding_grad(model, ids: Sequence[int], column: int | None) -> Tensor:
    """`∂r/∂e_p` at every position `[pos, d_model]` (one forward and backward)."""
    store: dict[str, Tensor] = {}

    def leaf(act, hook):
        act = act.detach().requires_grad_(True)
        store["e"] = act
        return act

    x = torch.tensor([list(ids)], device=model.cfg.device)
    with torch.enable_grad(), model.hooks(fwd_hooks=[("hook_embed", leaf)]):
        if column is None:
            r = model.rewards(x, grad=True)
        else:
            r = model.objective_rewards(x, grad=True)[:, column]
        (grad,) = torch.autograd.grad(r.sum(), store["e"])
    return grad[0].detach().float()


@dataclass
class _State:
    edits: tuple[tuple[int, int | None], ...]  # (original position, new id or None)
    reward: float


def _apply(conversation: EncodedConversation, edits) -> tuple[int, ...]:
    ids = list(conversation.ids)
    for pos, new in edits:
        ids[pos] = -1 if new is None else new
    return tuple(i for i in ids if i != -1)


def _proposals(model, goal: _Goal, state: _State, cands, column, proposer, n_sub, n_pos, deletions):
    """The one-edit extensions of `state` worth scoring: `[(position, new id or None)]`."""
    conv = goal.conversation
    start, end = _span(model, conv)
    done = {p for p, _ in state.edits}
    deleted = sorted(p for p, n in state.edits if n is None)
    current = _apply(conv, state.edits)
    free = [p for p in range(start, end) if p not in done]
    if not free:
        return []
    where = [p - sum(d < p for d in deleted) for p in free]  # positions in `current`
    grad = _embedding_grad(model, current, column)[where]  # [free, d_model]
    W = model.W_E.detach().float()
    old = torch.tensor([current[w] for w in where], device=W.device)
    cand = cands.to(W.device)
    est = goal.direction * (grad @ W[cand].T - (grad * W[old]).sum(-1, keepdim=True))
    est = torch.where(cand[None, :] == old[:, None], torch.full_like(est, -torch.inf), est)
    if proposer == "attribution":
        from .token_view import token_attribution

        values = token_attribution(model, torch.tensor(current), objective=column)
        key = -goal.direction * values.values[where].float()
    else:
        key = est.max(1).values.cpu()
    order = torch.argsort(key.cpu(), descending=True, stable=True)[:n_pos].tolist()
    k = min(n_sub, cand.numel())
    out: list[tuple[int, int | None]] = []
    for i in order:
        top = torch.topk(est[i], k).indices
        out.extend((free[i], int(cand[j])) for j in top.tolist() if est[i, j] > -torch.inf)
        if deletions:
            out.append((free[i], None))
    return out


def _score(cache, goal: _Goal, rows: list[tuple[int, ...]], batch_size: int) -> Tensor:
    start = goal.conversation.response_start
    conts = [r[start:] for r in rows]
    parts = [cache.score(conts[i : i + batch_size]) for i in range(0, len(conts), batch_size)]
    return torch.cat(parts).cpu()


def _check_count(value: int, name: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidArgumentError(f"{name}={value!r}: an integer >= {low} is needed")
    return value


def _result(model, goal: _Goal, edits, column, n_scored: int, proposer: str) -> CounterfactualEdit:
    """Re-score every step with `model.rewards` and build the result."""
    from .token_view import token_attribution

    conv = goal.conversation
    rows = [conv.ids] + [_apply(conv, edits[: k + 1]) for k in range(len(edits))]
    rewards = _exact(model, rows, column).tolist()
    reward_after = rewards[-1]
    found = bool(goal.reached(torch.tensor(reward_after))) and bool(edits)
    start = conv.response_start
    end = _span(model, conv)[1]
    n_del = sum(n is None for _, n in edits)
    after_conv = EncodedConversation(
        rows[-1], start, None if conv.response_end is None else end - n_del
    )
    objective = column
    before_view = token_attribution(model, conv, objective=objective)
    after_view = token_attribution(model, after_conv, objective=objective)
    old_tokens = _token_strings(model, conv.ids)
    token_edits = tuple(
        TokenEdit(
            p,
            conv.ids[p],
            n,
            old_tokens[p],
            None if n is None else _token_strings(model, [n])[0],
        )
        for p, n in edits
    )
    return CounterfactualEdit(
        edits=token_edits,
        original=conv,
        edited=after_conv,
        reward_before=rewards[0],
        reward_after=reward_after,
        step_rewards=tuple(rewards[1:]),
        other_reward=goal.other_reward,
        side=goal.side,
        target=goal.target,
        found=found,
        tokens_before=before_view.tokens,
        tokens_after=after_view.tokens,
        attribution_before=before_view.values,
        attribution_after=after_view.values,
        n_scored=n_scored,
        proposer=proposer,
    )


_ARGS = """model: The `HookedRewardModel`.
        example: A pair (`(chosen, rejected)` `EncodedConversation`s or zoo `Example`s, a
            `PreferencePair`, or a `ContrastPair`/zoo `ExamplePair`, whose `edited` side plays
            chosen) or one response (`EncodedConversation`, zoo `Example`, `(prompt, response)`).
        side: For a pair, the response edited: `"chosen"` (default) or `"rejected"`; leave
            it out for a single response.
        target: For a single response, the signed reward change to reach; `None` for a pair
            (the goal is the flip).
        max_edits: The most edits tried.
        substitutes: The candidate vocabulary (token ids); `None`: the vocabulary filtered by
            `sweep.candidates.vocabulary_candidates` (single tokens).
        deletions: Also try deleting tokens.
        objective: A head column of a multi-objective model (`None`: the model's reward or
            gated score)."""


@pasted_docs(args=_ARGS)
def counterfactual_edits(
    model: HookedRewardModel,
    example: Any,
    *,
    side: Side | None = None,
    target: float | None = None,
    max_edits: int = 4,
    substitutes: Sequence[int] | None = None,
    n_substitutes: int = 16,
    n_positions: int = 8,
    deletions: bool = True,
    proposer: Proposer = "attribution",
    beam: int = 1,
    objective: Objective = None,
    batch_size: int = 512,
) -> CounterfactualEdit:
    """The smallest response edit that flips a pair's preference (or moves a reward by `target`).

    See the module docstring for the proposer, the search and the definition of `side`.

    Args:
        {args}
        n_substitutes: Substitutes per position scored exactly (the candidates with the
            largest first-order estimate of the change in the wanted direction).
        n_positions: Positions per step scored exactly (the proposer's top ones).
        proposer: `"attribution"` (exact per-token attribution ranks the positions) or
            `"gradient"` (the best first-order estimate at a position ranks it).
        beam: How many edit sets each step keeps and extends (1: greedy).
        batch_size: Edited sequences per exact scoring batch.

    Returns:
        The `CounterfactualEdit` (`found=False` with the best edit set tried when the goal is
        not reached within `max_edits`).

    Raises:
        InvalidArgumentError: An unknown `side` or `proposer`, `side` for a single response,
            `target` for a pair or missing for a single response, a count below 1, or
            substitutes that are not token ids.
        EmptyInputError: The edited response has no tokens, or no substitutes.
        ArgumentTypeError: `example` is none of the accepted forms.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> pair = (model.encode("explain how to bake bread", "great question the oven"),
        ...         model.encode("explain how to bake bread", "the oven"))
        >>> edit = counterfactual_edits(model, pair)  # edit the chosen side until it loses
        >>> edit.found, edit.margin_before > 0 > edit.margin_after, len(edit.edits)
        (True, True, 1)
    """
    if proposer not in ("attribution", "gradient"):
        raise InvalidArgumentError(f"proposer={proposer!r}: choose 'attribution' or 'gradient'")
    for value, name in (
        (max_edits, "max_edits"),
        (n_substitutes, "n_substitutes"),
        (n_positions, "n_positions"),
        (beam, "beam"),
        (batch_size, "batch_size"),
    ):
        _check_count(value, name)
    column = objective_index(model, objective)
    goal = _goal(model, example, side, target, column)
    cands = _candidate_ids(model, substitutes)
    start, end = _span(model, goal.conversation)
    if end <= start:
        raise EmptyInputError(
            "the edited response has no tokens to edit (only the prompt and the template); "
            "pass a non-empty response"
        )
    from .sweep.cached import prefix_scorer

    cache = prefix_scorer(model, goal.conversation.prompt_ids(), objective=objective)
    beams = [_State((), goal.reward_before)]
    best = beams[0]
    n_scored = 0
    for _ in range(max_edits):
        seen: set[frozenset] = set()
        extended: list[_State] = []
        for state in beams:
            for edit in _proposals(
                model, goal, state, cands, column, proposer, n_substitutes, n_positions, deletions
            ):
                edits = (*state.edits, edit)
                if frozenset(edits) not in seen:
                    seen.add(frozenset(edits))
                    extended.append(_State(edits, 0.0))
        if not extended:
            break
        rows = [_apply(goal.conversation, s.edits) for s in extended]
        scores = _score(cache, goal, rows, batch_size)
        n_scored += len(rows)
        for s, r in zip(extended, scores.tolist(), strict=True):
            s.reward = r
        progress = goal.direction * scores
        reached = goal.reached(scores)
        if bool(reached.any()):
            pick = int(torch.where(reached, progress, -torch.inf).argmax())
            best = extended[pick]
            break
        order = torch.argsort(progress, descending=True, stable=True)[:beam].tolist()
        beams = [extended[i] for i in order]
        if goal.direction * (beams[0].reward - best.reward) > 0 or not best.edits:
            best = beams[0]
    return _result(model, goal, best.edits, column, n_scored, proposer)


@pasted_docs(args=_ARGS)
def random_edit_baseline(
    model: HookedRewardModel,
    example: Any,
    *,
    side: Side | None = None,
    target: float | None = None,
    seed: int = 0,
    max_edits: int | None = None,
    substitutes: Sequence[int] | None = None,
    deletions: bool = True,
    objective: Objective = None,
) -> CounterfactualEdit:
    """Random edits until the goal is reached: the edit size a search without a proposer needs.

    The response's positions are visited in a random order; each visited token is replaced by a
    random candidate (never itself) or, with `deletions`, deleted (one more choice among the
    candidates). All prefixes of this edit sequence are scored exactly in one batch; the
    shortest that reaches the goal is the result (`found=False`, every edit applied, when none
    does).

    Args:
        {args}
        seed: The random seed.

    Returns:
        The `CounterfactualEdit` (`proposer="random"`).

    Raises:
        InvalidArgumentError: As for `counterfactual_edits`.
        EmptyInputError: The edited response has no tokens, or no substitutes.
        ArgumentTypeError: `example` is none of the accepted forms.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> pair = (model.encode("explain how to bake bread", "great question the oven"),
        ...         model.encode("explain how to bake bread", "the oven"))
        >>> baseline = random_edit_baseline(model, pair, seed=0)
        >>> baseline.proposer, baseline.found == (baseline.margin_after < 0)
        ('random', True)
    """
    column = objective_index(model, objective)
    goal = _goal(model, example, side, target, column)
    cands = _candidate_ids(model, substitutes).tolist()
    start, end = _span(model, goal.conversation)
    if end <= start:
        raise EmptyInputError(
            "the edited response has no tokens to edit (only the prompt and the template); "
            "pass a non-empty response"
        )
    n = end - start if max_edits is None else min(_check_count(max_edits, "max_edits"), end - start)
    rng = random.Random(seed)
    positions = rng.sample(range(start, end), n)
    edits: list[tuple[int, int | None]] = []
    ids = goal.conversation.ids
    for p in positions:
        choices: list[int | None] = [t for t in cands if t != ids[p]]
        if deletions:
            choices.append(None)
        if not choices:
            raise EmptyInputError("no substitute differs from the token to replace")
        edits.append((p, rng.choice(choices)))
    from .sweep.cached import prefix_scorer

    cache = prefix_scorer(model, goal.conversation.prompt_ids(), objective=objective)
    rows = [_apply(goal.conversation, edits[: k + 1]) for k in range(n)]
    scores = _score(cache, goal, rows, 512)
    reached = goal.reached(scores).tolist()
    k = reached.index(True) + 1 if True in reached else n
    return _result(model, goal, tuple(edits[:k]), column, n, "random")
