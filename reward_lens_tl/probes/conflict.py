"""Reward-term conflict: which components push two reward terms in opposite directions.

A *term* is a direction the final residual is read along:

- **multi-objective heads** (e.g. the ArmoRM layout): each objective's column of the head with
  the final norm's weight folded in (`readout.effective_head`; centred for LayerNorm), so a
  term's value is exactly that objective's head output;
- **scalar heads**: directions you estimate from contrastive example sets and pass as
  `directions={name: vector}` (e.g. `concept_vectors(model, pairs)[final_site]` from
  `reward_lens_tl.sae.concepts`); a term's value is then the projection of the normalised
  final residual on the unit direction.

For every example, one cached forward gives the exact direct attribution of every term
(frozen final norm; parts + bias = the term's value). A component *conflicts* on terms
`a, b` for an input when its contributions to them have opposite signs; its conflict score is
the mean over inputs of `min(|c_a|, |c_b|)` on the inputs where they oppose (0 elsewhere).

Examples:
    >>> import torch
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.testing import tiny_reward_model, random_batch
    >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    >>> ids, mask = random_batch(4, [8, 6, 7, 5])
    >>> d = {"a": torch.randn(64), "b": torch.randn(64)}
    >>> res = reward_term_conflict(model, [row[m.bool()].tolist() for row, m in zip(ids, mask)],
    ...                            directions=d)
    >>> res.terms, bool(res.completeness_error() < 1e-4)
    (('a', 'b'), True)
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor

from ..attribution import attribution_from_run, attribution_hook_names
from ..errors import ProbeError
from ..inputs import EncodedConversation, pad_batch
from ..plotting import PLOT_DOC, Backend, imshow, render
from ..readout import Readout, ReadoutRun, gather_positions, is_centred, retarget, run_readout
from ..results import Result, TopK, ranked
from ..signatures import pasted_docs

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "reward_term_conflict",
]


@dataclass(frozen=True)
class ConflictResult(Result):
    """Per-term directions, their cosines, and per-term exact attributions.

    Args:
        terms: the terms' names.
        directions: the terms' residual directions.
        components: the attribution's component labels.
        attribution: the exact direct attributions.
        bias: the bias part of each term's value.
        values: the terms' values.
    """

    terms: tuple[str, ...]
    directions: Float[Tensor, "term d_model"]
    components: tuple[str, ...]
    attribution: Float[Tensor, "term component example"]
    bias: Float[Tensor, "term example"]
    values: Float[Tensor, "term example"]

    @property
    def cosines(self) -> Float[Tensor, "term term"]:
        """The cosine similarity of every pair of term directions."""
        unit = F.normalize(self.directions, dim=-1)
        return unit @ unit.T

    def __sub__(self, other: ConflictResult) -> ConflictResult:
        """Difference of two runs over paired inputs (e.g. contrast pairs' edited − base).

        It shows which components carry each term's change.

        Args:
            other: the run to subtract.

        Returns:
            The difference, a `ConflictResult`.

        Raises:
            ProbeError: the runs have different terms or components.
        """
        if self.terms != other.terms or self.components != other.components:
            raise ProbeError("conflict results of different terms or components")
        return ConflictResult(
            self.terms,
            self.directions,
            self.components,
            self.attribution - other.attribution,
            self.bias - other.bias,
            self.values - other.values,
        )

    def completeness_error(self) -> float:
        """The largest |Σ parts + bias − term value| over terms and examples."""
        return float((self.attribution.sum(1) + self.bias - self.values).abs().max())

    def _term(self, name: str) -> int:
        if name not in self.terms:
            raise ProbeError(f"unknown term {name!r}; terms: {self.terms}")
        return self.terms.index(name)

    def drivers(self, term: str, k: int = 5) -> list[tuple[str, float]]:
        """Components with the largest mean |contribution| to `term` (signed means).

        Args:
            term: the term's name.
            k: how many components.

        Returns:
            `(component, mean contribution)` pairs.

        Raises:
            ProbeError: an unknown term.
        """
        a = self.attribution[self._term(term)]
        idx = a.abs().mean(1).argsort(descending=True)[:k]
        return [(self.components[i], float(a[i].mean())) for i in idx]

    def conflict(self, a: str, b: str) -> Float[Tensor, " component"]:
        """Per component, the conflict score of terms `a` and `b` (module docstring).

        Args:
            a: the first term's name.
            b: the second term's name.

        Returns:
            The conflict scores.

        Raises:
            ProbeError: an unknown term.
        """
        ca, cb = self.attribution[self._term(a)], self.attribution[self._term(b)]
        opposed = (ca * cb) < 0
        return torch.where(opposed, torch.minimum(ca.abs(), cb.abs()), 0.0).mean(1)

    def top_k(self, k: int = 10) -> TopK:
        """`(component, term a / term b)` pairs with the largest conflict score.

        Args:
            k: how many pairs.

        Returns:
            The `TopK` of pairs.
        """
        out = []
        for a, b in itertools.combinations(self.terms, 2):
            score = self.conflict(a, b)
            out += [(f"{self.components[i]} ({a}/{b})", float(score[i])) for i in range(len(score))]
        return ranked(sorted(out, key=lambda p: p[1], reverse=True)[:k], "conflict")

    def to_dataframe(self):
        """One row per (term, component): mean and mean |contribution|."""
        import pandas as pd

        rows = [
            {
                "term": t,
                "component": c,
                "mean": float(self.attribution[i, j].mean()),
                "mean_abs": float(self.attribution[i, j].abs().mean()),
            }
            for i, t in enumerate(self.terms)
            for j, c in enumerate(self.components)
        ]
        return pd.DataFrame(rows)

    @pasted_docs(plot=PLOT_DOC)
    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """Heat map of mean direct contributions, components down and terms across.

        The colour scale is centred at 0 (red: the component lowers the term, blue: raises
        it); a component red in one column and blue in another pulls those terms apart.
        Hover shows the exact mean contribution.

        {plot}
        """
        m = self.attribution.mean(2).T  # [component, term]
        fig = imshow(
            m,
            x=self.terms,
            y=self.components,
            xaxis="term",
            yaxis="component",
            title=f"mean direct contribution per term · {self.values.shape[1]} examples",
            value_name="mean contribution",
        )
        return render(fig, backend, ax)


def _term_run(model, run: ReadoutRun, direction: Tensor) -> ReadoutRun:
    """`run` read along a fixed residual `direction` (unit, no bias)."""
    n = run.positions.shape[0]
    d = F.normalize(direction.to(run.rewards.device, torch.float32), dim=0)
    read = Readout(
        direction=d.expand(n, -1), bias=torch.zeros(n, device=d.device), centred=is_centred(model)
    )
    final = f"blocks.{model.cfg.n_layers - 1}.hook_resid_post"
    x = gather_positions(run.cache[final], run.positions)[:, None]
    scale = gather_positions(run.cache["ln_final.hook_scale"], run.positions)
    target = read.project(x, scale)[:, 0]
    return ReadoutRun(run.rewards, run.cache, run.positions, read, target)


def reward_term_conflict(
    model,
    sequences: Sequence[EncodedConversation | Sequence[int]],
    *,
    directions: Mapping[str, Tensor] | None = None,
    batch_size: int = 32,
) -> ConflictResult:
    """Per-term attributions of `sequences` (module docstring).

    Args:
        model: the `HookedRewardModel`.
        sequences: `EncodedConversation`s or token ids.
        directions: `{term: residual vector}`; without it the model's objectives are the
            terms (needs a head with ≥ 2 objectives).
        batch_size: sequences per forward.

    Returns:
        The `ConflictResult`.

    Raises:
        ProbeError: a scalar head without `directions`, or no sequences.

    Examples:
        The zoo's multi-objective model, its three objectives as the terms:

        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> multi = HookedRewardModel.from_pretrained(zoo_path("multi"))
        >>> sequences = [e.input_ids for e in load_task().task.examples(4, 3)]
        >>> conflict = reward_term_conflict(multi, sequences)
        >>> conflict.terms, conflict.completeness_error() < 1e-4
        (('helpfulness', 'harmlessness', 'verbosity'), True)
    """
    if directions is None and model.n_objectives < 2:
        raise ProbeError(
            "a scalar head has one term; pass directions={name: residual vector} estimated from "
            "contrastive example sets (e.g. sae.concepts.concept_vectors)"
        )
    terms = tuple(directions) if directions is not None else model.objective_names
    seqs = [s.ids if isinstance(s, EncodedConversation) else tuple(s) for s in sequences]
    if not seqs:
        raise ProbeError("no sequences given")
    gated = getattr(model, "gating", None) is not None
    first = None if model.is_scalar or gated else 0
    names = attribution_hook_names(model, True, False, False)
    names.append(f"blocks.{model.cfg.n_layers - 1}.hook_resid_post")
    attr, bias, values = [], [], []
    labels: tuple[str, ...] = ()
    with torch.no_grad():
        for start in range(0, len(seqs), batch_size):
            ids, mask = pad_batch(seqs[start : start + batch_size], model.pad_token_id)
            ids, mask = ids.to(model.cfg.device), mask.to(model.cfg.device)
            run = run_readout(model, ids, mask, names, objective=first)
            per_term = []
            for t in terms:
                r = retarget(model, run, t) if directions is None else _term_run(
                    model, run, directions[t]
                )  # fmt: skip
                per_term.append(attribution_from_run(model, r, split_bias=False))
            labels = per_term[0].labels
            attr.append(torch.stack([p.values for p in per_term]))
            bias.append(torch.stack([p.head_bias for p in per_term]))
            values.append(torch.stack([p.rewards for p in per_term]))
    if directions is None:
        from ..readout import effective_head

        W, _ = effective_head(model)
        dirs = W.T.detach().float().cpu()
        if is_centred(model):
            dirs = dirs - dirs.mean(-1, keepdim=True)
    else:
        dirs = torch.stack([F.normalize(directions[t].float().cpu(), dim=0) for t in terms])
    return ConflictResult(
        terms=tuple(terms),
        directions=dirs,
        components=labels,
        attribution=torch.cat(attr, 2),
        bias=torch.cat(bias, 1),
        values=torch.cat(values, 1),
    )
