"""The report's counterfactual-edits section: the smallest edit that flips the weakest pairs.

For the `N_PAIRS` pairs of the report's pair set with the smallest |margin| (the model's
weakest preferences), `counterfactual_edits` edits each side in turn and keeps the smaller
edit that reverses the model's preference; the section shows it as coloured tokens (exact
per-token attribution, before and after) with the rewards before and after, each number
re-scored by `model.rewards`.

Examples:
    >>> counterfactual_section({"pairs": [], "model": None}) is None
    True
"""

from __future__ import annotations

import pandas as pd

from .page import Section, format_cell

__all__ = [
    "counterfactual_section",
]

#: How many of the smallest-margin pairs the section edits.
N_PAIRS = 3


def counterfactual_section(ctx) -> Section | None:
    """The counterfactual-edits section (module docstring), or `None` without pairs.

    Args:
        ctx: The report's context (`ctx["model"]`, `ctx["pairs"]`; the encoded pairs
            `ctx["encoded"]` and the kept indices are used when the scores step left them).

    Returns:
        The section, or `None` when there is no pair.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.report import zoo_pairs
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> ctx = {"model": model, "pairs": zoo_pairs(load_task().task, n=4), "numbers": {}}
        >>> section = counterfactual_section(ctx)
        >>> section.title, len(ctx["numbers"]["counterfactual"])
        ('Counterfactual edits', 3)
    """
    from ..counterfactual import counterfactual_edits
    from ..errors import RewardLensError
    from ..readout import objective_index

    pairs = ctx.get("pairs")
    if not pairs:
        return None
    model = ctx["model"]
    encoded = ctx.get("encoded")
    if encoded is None:
        from ..pair_batches import encode_pairs

        encoded, kept, _ = encode_pairs(model, pairs, ctx.get("truncation", "error"), "skip")
    else:
        kept = ctx.get("kept", list(range(len(encoded))))
    if not encoded:
        return None
    try:
        objective_index(model, None)
        objective = None
    except RewardLensError:  # a plain multi-objective head: its first objective
        objective = 0
    numbers = ctx.get("numbers", {})
    scored = numbers.get("chosen", ())
    # the scores step's rewards when it left them (one number per kept pair)
    if objective is None and len(scored) == len(encoded) and not isinstance(scored[0], list):
        margins = [c - r for c, r in zip(numbers["chosen"], numbers["rejected"], strict=True)]
    else:
        margins = [_margin(model, chosen, rejected, objective) for chosen, rejected in encoded]
    picks = sorted(range(len(encoded)), key=lambda i: abs(margins[i]))[:N_PAIRS]
    section = Section("Counterfactual edits")
    section.text(
        f"The {len(picks)} pairs with the smallest |margin|: for each, the fewest substitutions "
        "or deletions of response tokens (never the prompt or the template) that reverse the "
        "model's preference, editing the chosen response, and the rejected one when that takes "
        "more than one edit, keeping the smaller edit. Positions are proposed by exact per-token "
        "attribution, substitutes by a "
        "first-order estimate over the candidate vocabulary; every reward shown is re-scored "
        "exactly. Tokens are coloured by their attribution (blue raises the reward, red lowers "
        "it); [old→new] marks an edit, ∅ a deletion."
    )
    rows, found = [], []
    for i in picks:
        chosen, rejected = encoded[i]
        tries = [counterfactual_edits(model, (chosen, rejected), objective=objective)]
        if not tries[0].found or len(tries[0].edits) > 1:  # the rejected side may need fewer
            tries.append(
                counterfactual_edits(
                    model, (chosen, rejected), side="rejected", objective=objective
                )
            )
        best = min(tries, key=lambda e: (not e.found, len(e.edits)))
        ids = numbers.get("pair_ids", kept)
        pair = ids[i] if i < len(ids) else i
        edits = ", ".join(e.label for e in best.edits)
        rows.append(
            {
                "pair": pair,
                "side edited": best.side,
                "edits": edits,
                "n edits": len(best.edits),
                "margin before": best.margin_before,
                "margin after": best.margin_after,
                "flipped": best.flipped,
                "exact re-scorings": sum(e.n_scored for e in tries),
            }
        )
        found.append(dict(rows[-1]))
        state = "flips it" if best.flipped else "was not found within the edit budget"
        section.raw(
            best.to_html(include_script=False),
            f"Pair {pair}: editing the {best.side} response ({edits or 'no edit'}) {state}; "
            f"margin {format_cell(best.margin_before, 'signed')} → "
            f"{format_cell(best.margin_after, 'signed')}.",
        )
    section.table(pd.DataFrame(rows), kinds={"pair": "count"})
    ctx.setdefault("numbers", {})["counterfactual"] = found
    return section


def _margin(model, chosen, rejected, objective) -> float:
    """`r(chosen) − r(rejected)` by `model.rewards` (or the objective's column)."""
    import torch

    ids = torch.tensor([list(chosen.ids)], device=model.cfg.device)
    other = torch.tensor([list(rejected.ids)], device=model.cfg.device)
    if objective is None:
        return float(model.rewards(ids)[0] - model.rewards(other)[0])
    return float(
        model.objective_rewards(ids)[0, objective] - model.objective_rewards(other)[0, objective]
    )
