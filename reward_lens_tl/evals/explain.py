"""Why a reward model fails benchmark items: attribution, driving tokens and the lens, in one pass.

For the failed comparisons of an evaluation (`EvalResult.failures`), one cached forward
per chunk of failures (chosen rows then rejected rows) gives three readings of the same run:

- **components**: the exact direct attribution of each failure's margin (chosen − rejected) to
  embeddings, heads, MLPs and biases (parts + head bias = margin), averaged over the failures
  and set against the same average over a sample of comparisons the model got right: a component
  whose mean is lower on failures than on successes pushes the wrong way;
- **tokens**: every head's contribution split by source position (pattern × value, exact),
  mapped back to the token it reads, signed as a contribution to the margin (a token of the
  rejected response that raises its reward counts negative): the most negative tokens drive the
  wrong preference;
- **layer**: the reward lens of both responses; per failure, the first site where the (wrong)
  margin reaches half its final value (`PairLensResult.crystallization`).

For RewardMATH the comparison is the correct solution against its hardest (highest-scored) wrong
one. Cost: one forward of the failures' sequences plus `reference` successes (default a
quarter as many pairs as failures, sampled with `seed`), i.e. about 1.25 forwards per failure.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from ..attribution import AttributionResult, direct_attribution, pair_attribution
from ..errors import EmptyInputError, InvalidArgumentError
from ..inputs import pad_batch
from ..lens import PairLensResult, RewardLensResult, lens_sites
from ..padding import token_columns
from ..pair_batches import encoded_pair
from ..plotting import BLUE, RED, Backend, bar, render, side_by_side
from ..readout import gather_positions, readout, recomputed_scale
from ..results import Result, TopK, ranked, split_pair
from .comparisons import Comparison, ComparisonSet

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["PARTS", "FailureExplanation", "TokenDriver", "explain_failures"]

PARTS = ("prompt", "response", "suffix")
"""Where a source token sits: the prompt (with the template's header), the response, or the
template's suffix (end-of-turn, EOS)."""


@dataclass(frozen=True)
class TokenDriver:
    """A head's contribution through one source token to one failure's margin.

    `value` is signed as a contribution to `chosen − rejected`: negative pushes the wrong way.
    `side` is `"chosen"` or `"rejected"`; `position` indexes that side's token ids.

    Args:
        failure: the failure's index.
        side: `"chosen"` or `"rejected"`.
        position: the source token's index in that side's token ids.
        token: the source token's text.
        head: the head, by name.
        value: the contribution to the margin.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.data import RankedItem
        >>> from reward_lens_tl.evals.run import score_items
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> items = [RankedItem("how bake bread", "soup", ("great question the soup", "rain"))]
        >>> failures = score_items(model, items, progress=False).failures()
        >>> driver = failures.explain(model, reference=None).drivers[0]  # the strongest
        >>> driver.side, driver.token, driver.head, round(driver.value, 2)
        ('rejected', 'question', 'L1H3', -1.03)
    """

    failure: int
    side: str
    position: int
    token: str
    head: str
    value: float


@dataclass(frozen=True)
class FailureExplanation(Result):
    """What `explain_failures` found (see the module docstring).

    `margin`: attribution `[component, failure]` of each failure's margin; `reference`:
    the same over the sampled successes (`None` if none); `lens`: the pair lens of the
    failures; `crystallization`: per failure, the first lens site at half the final margin;
    `drivers`: per failure, its top token drivers (head × source token).

    Args:
        benchmark: the evaluation's benchmark.
        comparisons: the failed comparisons explained.
        margin: attribution `[component, failure]` of each failure's margin.
        reference: the same over the sampled successes (`None` if none).
        lens: the pair lens of the failures.
        crystallization: per failure, the first lens site at half the final margin.
        drivers: per failure, its top token drivers (head × source token).
        token_totals: per-token totals over heads.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.data import RankedItem
        >>> from reward_lens_tl.evals.run import score_items
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> items = [RankedItem("how bake bread", "soup", ("great question the soup", "rain"))]
        >>> result = score_items(model, items, progress=False)
        >>> ex = result.failures().explain(model, reference=None)  # a FailureExplanation
        >>> ex.per_failure()[["margin", "crystallizes_at", "top_token", "top_token_head"]].round(2)
           margin crystallizes_at            top_token top_token_head
        0   -3.98           1_pre  rejected:question@8           L1H3
        >>> ex.components().head(2).round(2)  # successes are 0: no reference sampled
          component  failures  successes  difference
        0      L1H3     -2.03        0.0       -2.03
        1      L0H1     -0.62        0.0       -0.62
    """

    no_example_axis = "its reference is the successes as a whole, and drivers number failures"

    benchmark: str
    comparisons: tuple[Comparison, ...]
    margin: AttributionResult
    reference: AttributionResult | None
    lens: PairLensResult
    crystallization: tuple[str | None, ...]
    drivers: tuple[TokenDriver, ...]
    token_totals: tuple[tuple[int, str, int, str, str, float], ...]

    def components(self):
        """One row per component, most wrong-way first.

        Columns: mean margin contribution over `failures` and over `successes`, and
        `difference` (failures − successes), sorted by `difference`.
        """
        import pandas as pd

        fail = self.margin.values.mean(1)
        succ = (
            self.reference.values.mean(1) if self.reference is not None else torch.zeros_like(fail)
        )
        frame = pd.DataFrame(
            {
                "component": self.margin.labels,
                "failures": fail.numpy(),
                "successes": succ.numpy(),
                "difference": (fail - succ).numpy(),
            }
        )
        return frame.sort_values("difference", kind="stable").reset_index(drop=True)

    def wrong_way_components(self, k: int = 5) -> list[str]:
        """The `k` components pushing hardest the wrong way on failures (vs successes).

        Args:
            k: how many components.

        Returns:
            The components' names.
        """
        return self.components()["component"].head(k).tolist()

    def tokens(self, k: int | None = 10, part: str | None = None):
        """Source tokens by their net contribution to the margin per failure.

        Contributions are summed over heads, occurrences and both sides (a token present on
        both sides partly cancels), most negative first: `token`, `part`, `value`, `chosen`
        and `rejected` (occurrences on each side).

        Args:
            k: how many tokens (`None`: all).
            part: keep only `"prompt"` (prompt and template header), `"response"` (the
                response's own tokens) or `"suffix"` (end-of-turn, EOS) tokens (`None`: all).

        Returns:
            A `pandas.DataFrame`.
        """
        import pandas as pd

        columns = ["failure", "side", "position", "token", "part", "value"]
        rows = pd.DataFrame(self.token_totals, columns=columns)
        if part is not None:
            if part not in PARTS:
                raise InvalidArgumentError(f"part must be one of {PARTS} or None, got {part!r}")
            rows = rows[rows["part"] == part]
        grouped = rows.groupby(["token", "part"], as_index=False).agg(
            value=("value", "sum"),
            chosen=("side", lambda s: int((s == "chosen").sum())),
            rejected=("side", lambda s: int((s == "rejected").sum())),
        )
        grouped["value"] = grouped["value"] / max(len(self.comparisons), 1)
        grouped = grouped.sort_values("value", kind="stable").reset_index(drop=True)
        return grouped if k is None else grouped.head(k)

    def wrong_way_tokens(self, k: int = 5, part: str | None = "response") -> list[str]:
        """The `k` token strings (of the responses, by default) that push hardest the wrong way.

        Args:
            k: how many tokens.
            part: the part of the sequence to keep (see `tokens`).

        Returns:
            The token strings.
        """
        return self.tokens(k, part)["token"].tolist()

    def per_failure(self):
        """One row per failure.

        Columns: item id, margin, crystallization site, top component and the top token driver
        (side, token, head, value).
        """
        import pandas as pd

        best: dict[int, TokenDriver] = {}
        for d in self.drivers:
            if d.failure not in best or d.value < best[d.failure].value:
                best[d.failure] = d
        rows = []
        for f, c in enumerate(self.comparisons):
            column = self.margin.values[:, f]
            top = best.get(f)
            rows.append(
                {
                    "item_id": c.item_id,
                    "group": c.subset,
                    "chosen_index": c.chosen_index,
                    "rejected_index": c.rejected_index,
                    "margin": float(self.margin.rewards[f]),
                    "crystallizes_at": self.crystallization[f],
                    "top_component": self.margin.labels[int(column.argmin())],
                    "top_token": None if top is None else f"{top.side}:{top.token}@{top.position}",
                    "top_token_head": None if top is None else top.head,
                    "top_token_value": None if top is None else top.value,
                }
            )
        return pd.DataFrame(rows)

    def to_dataframe(self):
        """The components table (see `components`)."""
        return self.components()

    def top_k(self, k: int = 5) -> TopK:
        """The `k` components with the most negative `difference` (failures − successes).

        They come most wrong-way first (sorted by the difference shown).

        Args:
            k: how many components.

        Returns:
            The components and their differences, ranked.
        """
        frame = self.components().head(k)
        return ranked(zip(frame["component"], frame["difference"], strict=True), "difference")

    def crystallization_site(self) -> str | None:
        """The most common crystallization site over the failures."""
        sites = [s for s in self.crystallization if s is not None]
        return max(sorted(set(sites)), key=sites.count) if sites else None

    def plot(self, ax: Axes | None = None, k: int = 12, *, backend: Backend | None = None) -> Any:
        """Two panels: the `k` wrong-way components and the failures' lens margins per site.

        The first panel puts each component's mean margin contribution over the failures
        (red) beside that over the successes (blue); the second is `PairLensResult.plot` of
        the failures. Hover shows each bar's and line's exact value.

        Args:
            ax: Not usable: the figure has two panels (pass `backend="matplotlib"`).
            k: How many components.
            backend: `"plotly"` or `"matplotlib"` (see `reward_lens_tl.plotting`).

        Returns:
            The figure (not shown).
        """
        top = self.components().head(k)
        n = len(self.comparisons)
        left = bar(
            top["component"].tolist(),
            top["failures"].to_numpy(),
            xaxis="mean contribution to the margin",
            title=f"wrong-way components: {n} failure{'s' * (n != 1)} (red) vs successes (blue)",
            colors=RED,
        )
        successes = bar(top["component"].tolist(), top["successes"].to_numpy(), colors=BLUE)
        for shift, (trace, name) in enumerate(
            ((left.data[0], "failures"), (successes.data[0], "successes"))
        ):  # failures just above each component's tick, successes just below
            trace.update(
                y=[i - 0.2 + 0.4 * shift for i in range(len(top))],
                width=0.4,
                name=name,
                showlegend=True,
                hovertemplate=f"%{{customdata}} ({name})<br>mean contribution: %{{x:.5g}}"
                "<extra></extra>",
            )
        left.add_trace(successes.data[0])
        left.update_layout(showlegend=True)
        right = self.lens.figure(title="lens margin of the failures per site")
        fig = side_by_side([left, right], title="why the failures fail")
        return render(fig, backend, ax)

    def report(self, k: int = 5) -> list[str]:
        """Markdown lines: headline, wrong-way components and tokens.

        Args:
            k: how many components and tokens.

        Returns:
            The lines.
        """
        comps = self.components().head(k)
        toks = self.tokens(k, part="response")
        lines = [
            f"{len(self.comparisons)} failed comparisons; the wrong preference crystallizes "
            f"at `{self.crystallization_site()}` (most common lens site at half the margin).",
            "",
            "| component | failures | successes | difference |",
            "|---|---|---|---|",
            *(
                f"| {r.component} | {r.failures:+.3f} | {r.successes:+.3f} | {r.difference:+.3f} |"
                for r in comps.itertuples()
            ),
            "",
            "Response tokens driving the wrong preference (head attribution by source "
            "position, summed over heads):",
            "",
            "| token | margin contribution per failure | in chosen | in rejected |",
            "|---|---|---|---|",
            *(
                f"| `{r.token}` | {r.value:+.3f} | {r.chosen} | {r.rejected} |"
                for r in toks.itertuples()
            ),
        ]
        return lines


def explain_failures(
    model,
    failures: ComparisonSet,
    *,
    reference: int | str | None = "auto",
    batch_size: int = 8,
    drivers_per_failure: int = 5,
    objective=None,
    seed: int = 0,
    truncation: str = "error",
) -> FailureExplanation:
    """Explain the failed comparisons in `failures` (see the module docstring).

    Args:
        model: the converted reward model (a `HookedRewardModel`).
        failures: an `EvalResult`'s `reward_lens_tl.evals.eval_result.EvalResult.failures`.
        reference: how many of the result's successes to attribute as the baseline —
            `"auto"` (a quarter as many as failures, at least one), an int, `"all"`, or
            `None`/`0` for none.
        batch_size: failures per cached forward.
        drivers_per_failure: the top token drivers kept per failure.
        objective: the column of a plain multi-objective head.
        seed: the seed of the successes' sample.
        truncation: encodes the texts as scoring them did (`"error"`, `"left"`, `"right"`).

    Returns:
        The explanation.

    Raises:
        EmptyInputError: there are no failed comparisons.
        InvalidArgumentError: `batch_size` or `reference` is invalid.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.evals.explain import explain_failures
        >>> from reward_lens_tl.evals.run import score_items
        >>> from reward_lens_tl.evals.zoo_set import zoo_benchmark
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> pairs = zoo_benchmark(load_task().task, n_per_subset=2)
        >>> hack = score_items(model, pairs, progress=False).failures().filter(
        ...     subset="zoo-sycophancy-hack")
        >>> ex = explain_failures(model, hack)  # the same as hack.explain(model)
        >>> len(ex.comparisons), ex.margin.completeness_error() < 1e-4
        (2, True)
        >>> ex.wrong_way_tokens(2), ex.wrong_way_components(2)  # the planted sycophancy hack
        (['question', 'great'], ['L1H3', 'L2H3'])
    """
    pairs = failures.pairs()
    if not pairs:
        raise EmptyInputError("no failed comparisons to explain: the model got every item right")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidArgumentError(f"batch_size must be a positive int, got {batch_size!r}")
    parts = [
        _explain_chunk(
            model, pairs[s : s + batch_size], s, drivers_per_failure, objective, truncation
        )
        for s in range(0, len(pairs), batch_size)
    ]
    margin = AttributionResult.concat(p[0] for p in parts)
    lens = PairLensResult(
        chosen=RewardLensResult.concat(p[1] for p in parts),
        rejected=RewardLensResult.concat(p[2] for p in parts),
    )
    ref = _reference(
        model, failures, reference, len(pairs), seed, batch_size, objective, truncation
    )
    return FailureExplanation(
        benchmark=failures.result.benchmark,
        comparisons=tuple(failures),
        margin=margin,
        reference=ref,
        lens=lens,
        crystallization=tuple(lens.crystallization(0.5)),
        drivers=tuple(d for p in parts for d in p[3]),
        token_totals=tuple(t for p in parts for t in p[4]),
    )


def _reference(model, failures, reference, n_failures, seed, batch_size, objective, truncation):
    successes = failures.result.successes()
    if reference in (None, 0) or not len(successes):
        return None
    if reference == "auto":
        n = max(1, math.ceil(n_failures / 4))
    elif reference == "all":
        n = len(successes)
    elif isinstance(reference, int) and not isinstance(reference, bool) and reference > 0:
        n = reference
    else:
        raise InvalidArgumentError(
            f"reference must be 'auto', 'all', a positive int or None, got {reference!r}"
        )
    picked = sorted(random.Random(seed).sample(range(len(successes)), min(n, len(successes))))
    sample = successes.take(picked)
    return pair_attribution(
        model, sample.pairs(), batch_size=batch_size, objective=objective, truncation=truncation
    ).margin


def _explain_chunk(model, pairs: Sequence, offset: int, per_failure: int, objective, truncation):
    """Attribution (with sources) and lens of one chunk of failures, from one forward."""
    encoded = [encoded_pair(model, p, truncation) for p in pairs]
    n = len(encoded)
    ids, mask = pad_batch(
        [c.ids for c, _ in encoded] + [r.ids for _, r in encoded], model.pad_token_id
    )
    ids, mask = ids.to(model.cfg.device), mask.to(model.cfg.device)
    sites = lens_sites(model, "layer")
    store: dict[str, torch.Tensor] = {}

    def grab(name: str):  # keyed by the name asked for (a bridge's hook may carry an alias)
        def save(act, hook):
            store[name] = act.detach()

        return save

    names = [name for _, name in sites]
    gated = getattr(model, "gating", None) is not None
    if gated and "hook_gate" in model.hook_dict:
        names.append("hook_gate")
    attr = direct_attribution(
        model, ids, mask, sources=True, objective=objective,
        fwd_hooks=[(name, grab(name)) for name in names],
    )  # fmt: skip
    lens_values = _lens_values(model, store, sites, ids, mask, objective)
    chosen, rejected = split_pair(attr, n)
    labels = tuple(label for label, _ in sites)
    lens_c, lens_r = split_pair(RewardLensResult(lens_values, labels, attr.rewards, "recompute"), n)
    assert attr.sources is not None  # asked for with sources=True
    sources = attr.sources.detach()
    drivers, totals = _token_drivers(model, sources, encoded, offset, per_failure)
    return chosen - rejected, lens_c, lens_r, drivers, totals


def _lens_values(model, store, sites, ids, mask, objective) -> torch.Tensor:
    """`[site, batch]` reward lens (recomputed norm) from the captured residuals."""
    pos = model.pool_positions(ids, mask)
    gate = store.get("hook_gate")
    if gate is None and getattr(model, "gating", None) is not None:  # no hook point: ask
        gate = model.gate(ids, mask)
    read = readout(model, objective, ids.shape[0], gate)
    values = []
    for _, name in sites:
        x = gather_positions(store[name], pos)[:, None]
        values.append(read.project(x, recomputed_scale(model, x))[:, 0] + read.bias)
    return torch.stack(values).detach().float().cpu()


def _part(enc, position: int, eos: int | None) -> str:
    if position < enc.response_start:
        return "prompt"
    return "response" if position < enc.suffix_start(eos) else "suffix"


def _token_drivers(model, sources, encoded, offset, per_failure):
    """Top head × source-token drivers per failure, and per-token totals over heads."""
    n_layers, n_heads = sources.shape[:2]
    heads = [f"L{layer}H{h}" for layer in range(n_layers) for h in range(n_heads)]
    flat = sources.reshape(n_layers * n_heads, sources.shape[2], sources.shape[3])  # [lh, row, src]
    eos = getattr(model.tokenizer, "eos_token_id", None)
    n = len(encoded)
    drivers, totals = [], []
    for f, pair in enumerate(encoded):
        candidates = []
        for side, row, sign, enc in (
            ("chosen", f, 1.0, pair[0]),
            ("rejected", n + f, -1.0, pair[1]),
        ):
            length = len(enc.ids)
            cols = token_columns(length, flat.shape[2]).to(flat.device)  # the row's own tokens
            tokens = model.tokenizer.convert_ids_to_tokens(list(enc.ids))
            signed = sign * flat[:, row, cols]  # [lh, src] contribution to the margin
            for p, value in enumerate(signed.sum(0).tolist()):
                totals.append((offset + f, side, p, tokens[p], _part(enc, p, eos), value))
            k = min(per_failure, signed.numel())
            for idx in torch.topk(-signed.flatten(), k).indices.tolist():
                head, p = divmod(idx, length)
                value = float(signed[head, p])
                candidates.append(TokenDriver(offset + f, side, p, tokens[p], heads[head], value))
        drivers += sorted(candidates, key=lambda d: d.value)[:per_failure]
    return drivers, totals
