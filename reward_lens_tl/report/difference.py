"""The report's difference-dictionary section: the SAE latents that carry the margin.

A small TopK SAE is trained on chosen − rejected at the final norm's output at the reading
token (`reward_lens_tl.sae.difference`), where each pair's margin splits exactly over its
latents plus a decoder-bias and an error term. On the zoo (`ctx["task"]`) the report's eight
pairs are too few to train on, so the SAE is trained on 512 rule-labelled zoo pairs and the
planted features are matched against its decoder, and against an SAE on the plain activations
(same site, width, k, steps, seed). Elsewhere it is trained on the report's own pairs (at least
`MIN_PAIRS`; fewer skip the section with a note).

Examples:
    >>> difference_section({"numbers": {}, "encoded": []}).parts[0]["text"][:24]
    'Skipped: 0 scored pairs;'
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from .page import Section, format_cell, titled

__all__ = ["difference_section"]

#: The fewest scored pairs the section trains a difference SAE on.
MIN_PAIRS = 64
#: The SAE's size and training (seconds on a CPU at the zoo's size).
SAE_SETTINGS: dict[str, Any] = {"d_sae": 64, "k": 8, "steps": 400, "batch_size": 128, "seed": 0}


def _objective(model):
    """The head column read (`None` for a one-objective head), and a phrase saying so."""
    gated = getattr(model, "gating", None) is not None
    if not gated and model.n_objectives == 1:
        return None, ""
    name = model.objective_names[0]
    why = (
        " (a gated score reads each side along its own gate's direction, so its margin is not "
        "a function of the difference; the first objective is shown)"
        if gated
        else " (the first of the head's objectives)"
    )
    return name, f" of objective `{name}`{why}"


def difference_section(ctx) -> Section:
    """Difference dictionary: the latents of chosen − rejected that carry the margin.

    Args:
        ctx: The report's context (`model`, `encoded` pairs, `numbers`; `task` on the zoo).

    Returns:
        The section (a note when there are too few pairs to train on).

    Examples:
        >>> section = difference_section({"numbers": {}, "encoded": []})
        >>> section.title, section.parts[0]["text"].split(";")[0]
        ('Difference dictionary', 'Skipped: 0 scored pairs')
    """
    from ..sae import difference_dictionary, train_difference_sae

    section = Section("Difference dictionary")
    pairs = list(ctx["encoded"])
    task = ctx.get("task")
    if task is None and len(pairs) < MIN_PAIRS:
        ctx["numbers"]["difference"] = {"skipped": len(pairs)}
        return section.text(
            f"Skipped: {len(pairs)} scored pairs; a difference dictionary needs at least "
            f"{MIN_PAIRS} to train on."
        )
    from .zoo import zoo_pairs

    model = ctx["model"]
    train = list(zoo_pairs(task, n=512, seed=5)) if task is not None else pairs
    trained = train_difference_sae(model, train, **SAE_SETTINGS)
    objective, which = _objective(model)
    dictionary = difference_dictionary(model, trained.sae, pairs, objective=objective)
    terms = dictionary.terms()
    bias_share = dictionary.term_shares()["decoder_bias"]
    source = "512 rule-labelled zoo pairs" if task is not None else f"the {len(pairs)} pairs"
    section.text(
        f"A TopK SAE ({SAE_SETTINGS['d_sae']} latents, k = {SAE_SETTINGS['k']}, "
        f"{SAE_SETTINGS['steps']} steps, sae_lens) trained on chosen − rejected at the final "
        f"norm's output at the reading token, both signs, on {source}. There the margin"
        f"{which} is exactly the difference read along the head, so on the report's "
        f"{len(pairs)} pairs it splits into the latents, the decoder bias (mean "
        f"{format_cell(terms['decoder_bias'], 'signed')}, {format_cell(bias_share, 'share')} "
        f"of the separation) and the error (mean {format_cell(terms['error'], 'signed')}); "
        f"latents + bias + error − margin = {format_cell(dictionary.completeness_error())}."
    )
    frame = dictionary.to_dataframe()
    frame = frame.reindex(frame["contribution"].abs().sort_values(ascending=False).index)
    section.table(frame.head(10), kinds={"share": "share", "active": "share"})
    fig = titled(dictionary.plot(k=12), "the latents of chosen − rejected that carry the margin")
    section.figure(fig, "difference dictionary: contributions to the margin", "difference")
    numbers = {
        "n_train": len(train),
        "completeness_error": dictionary.completeness_error(),
        "decoder_bias_share": bias_share,
        "top": [list(item) for item in dictionary.top_k(5)],
        "objective": objective,
    }
    if task is not None:
        numbers["planted"] = _planted(section, model, task, train, trained, SAE_SETTINGS)
    ctx["numbers"]["difference"] = numbers
    return section


def _planted(section: Section, model, task, train, trained, settings) -> list[dict]:
    from ..sae import (
        planted_match,
        reading_activations,
        train_difference_sae,
        zoo_planted_directions,
    )

    planted = zoo_planted_directions(model, task, n=64)
    chosen, rejected = reading_activations(model, train, batch_size=64)
    plain = train_difference_sae(model, train, plain=True, **settings)
    rows = []
    for name, sae, acts in (
        ("difference (±d)", trained, chosen - rejected),
        ("plain (both sides)", plain, _cat(chosen, rejected)),
    ):
        match = planted_match(sae, planted, activations=acts)
        row = {"SAE": name, "matched": match.n_matched}
        row |= dict(zip(match.features, match.matched, strict=True))
        row |= {"alive": match.n_alive, "unexplained": match.n_unexplained}
        rows.append(row)
        if name.startswith("difference"):
            fig = titled(match.plot(), "planted directions recovered by the difference SAE")
    section.text(
        "Planted features whose direction (mean of edited − base over 64 contrast pairs, same "
        "site) some alive latent explains at |cos| ≥ 0.8 (each latent counts for the planted "
        "direction it is closest to), and alive latents that explain none, for the difference "
        "SAE and an SAE on the plain activations of both sides (same site, width, k, steps, "
        "seed):"
    )
    section.table(pd.DataFrame(rows))
    section.figure(fig, "planted directions matched by the difference SAE", "difference_planted")
    return rows


def _cat(a, b):
    import torch

    return torch.cat([a, b])
