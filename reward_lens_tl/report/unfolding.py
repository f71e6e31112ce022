"""The report's section on the reward as the response unfolds (`reward_lens_tl.unfolding`).

Internal (no public names): a section of `reward_lens_tl.report` (registered by `.sections`).

For one pair of the report's pair set (the one the model separates most, when the scores are
known), the reward of every prefix of the chosen and of the rejected response, each beside
its per-token direct attribution, and the tokens where each curve jumps most. Numbers go to
`ctx["numbers"]["unfolding"]`.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.data import PreferencePair
    >>> from reward_lens_tl.zoo import zoo_path
    >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    >>> pairs = [PreferencePair("how bake bread", chosen="oven flour", rejected="the bomb")]
    >>> ctx = {"model": model, "pairs": pairs, "numbers": {}}
    >>> section = unfolding_section(ctx)
    >>> section.title, [p["kind"] for p in section.parts]
    ('The reward as the response unfolds', ['text', 'figure', 'figure', 'table'])
    >>> ctx["numbers"]["unfolding"]["rejected"]["largest_fall"]
    'bomb'
"""

from __future__ import annotations

import pandas as pd

from ..errors import RewardLensError
from .page import Section

__all__: list[str] = []

#: The most jumps per response listed in the table.
TOP = 4


def unfolding_section(ctx: dict) -> Section | None:
    """The reward of every prefix of one pair's chosen and rejected responses.

    The pair is the one with the largest model margin when `ctx["numbers"]` holds the scores
    (`chosen`, `rejected`), else the first. No section when the pair set is empty or the
    model has no single reward (a multi-objective head without a gate).

    Args:
        ctx: The report's context (`model`, `pairs`, `numbers`).

    Returns:
        The section, or `None`.
    """
    from ..unfolding import reward_unfolding

    pairs, model = list(ctx.get("pairs") or []), ctx["model"]
    if not pairs:
        return None
    index = _pick(ctx, len(pairs))
    pair = pairs[index]
    curves = {}
    try:
        for side in ("chosen", "rejected"):
            curves[side] = reward_unfolding(model, model.encode(pair.prompt, getattr(pair, side)))
    except RewardLensError:  # a multi-objective head without a gate, a pair too long, ...
        return None
    # the cached pass needs TransformerLens 3.9's key-value cache; without it, every prefix in full
    how = "all from one cached pass" if _all_cached(curves) else "every prefix run in full"
    section = Section("The reward as the response unfolds")
    section.text(
        f"Pair {index}: the reward of every prefix of each response (the prompt, the response's "
        "first t tokens and the template's closing tokens, each scored as a conversation of its "
        f"own, {how}), the line; the exact direct attribution of each token to "
        "the whole conversation's reward, the bars. A jump is what adding that token did to the "
        "reward; a bar is how much of the final reward reads that token directly."
    )
    numbers: dict = {"pair": index}
    rows = []
    for side, curve in curves.items():
        section.figure(curve.plot(), f"prefix rewards of the {side} response", f"unfolding_{side}")
        jumps = curve.jumps()
        numbers[side] = {
            "reward": curve.reward,
            "empty_response": float(curve.prefix_rewards[0]),
            "largest_rise": curve.tokens[1 + int(jumps.argmax())] if len(jumps) else None,
            "largest_fall": curve.tokens[1 + int(jumps.argmin())] if len(jumps) else None,
        }
        for label, value in curve.top_k(TOP):
            rows.append({"response": side, "token": label, "jump": value})
    section.table(pd.DataFrame(rows), max_rows=2 * TOP)
    ctx.setdefault("numbers", {})["unfolding"] = numbers
    return section


def _all_cached(curves: dict) -> bool:
    return all(curve.method == "cached" for curve in curves.values())


def _pick(ctx: dict, n: int) -> int:
    numbers = ctx.get("numbers") or {}
    chosen, rejected = numbers.get("chosen"), numbers.get("rejected")
    if chosen is None or rejected is None or len(chosen) != len(rejected):
        return 0
    kept = ctx.get("kept") or list(range(len(chosen)))
    try:
        margins = [float(c) - float(r) for c, r in zip(chosen, rejected, strict=True)]
    except (TypeError, ValueError):  # per-objective scores: no single margin
        return 0
    if not margins:
        return 0
    best = max(range(len(margins)), key=lambda i: margins[i])
    pick = kept[best] if best < len(kept) else 0
    return pick if pick < n else 0
