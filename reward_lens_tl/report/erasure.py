"""The report's section on concept erasure: LEACE removes the zoo's planted harm penalty.

Internal (no public names): a section of `reward_lens_tl.report` (registered by `.sections`).

On the zoo (`reward-lens report` with no pair file) a LEACE eraser
(`reward_lens_tl.erasure.fit_eraser`) is fitted on 2000 zoo conversations labelled 1 when their
response holds a harmful word, at the reward-reading token of `blocks.2.hook_resid_mid` (after
the last attention layer, where the model has read the harm into the reading token). Then 40
contrast pairs per planted feature are scored with and without it, beside two controls: a
random orthogonal projection of the same rank at the same site, and the same fit at
`blocks.0.hook_resid_pre` (before any block: the reading token is the same `<eos>` embedding in
every conversation, so there is nothing to erase). The certificate is a fresh logistic probe on
600 held-out conversations. Where harm is first linearly present at the reading token
(`concept_presence`) is the section's second figure. Numbers go to `ctx["numbers"]["erasure"]`.

Examples:
    >>> erasure_section({}) is None  # not on the zoo: no section
    True
"""

from __future__ import annotations

import pandas as pd

from .page import Section, format_cell, zoo_only

__all__: list[str] = []

SITE = "blocks.2.hook_resid_mid"
EARLY = "blocks.0.hook_resid_pre"
FEATURES = ("harmful", "topic_match", "sycophancy", "length")


def _harmful(examples) -> list[int]:
    return [int(bool(e.feature_positions["harmful"])) for e in examples]


def _num(value) -> str:
    return format_cell(float(value), "signed")


@zoo_only
def erasure_section(ctx) -> Section:
    """The concept erasure section (module docstring).

    {zoo_section}
    """
    from ..erasure import concept_erasure, concept_presence, fit_eraser, random_eraser

    model, task = ctx["model"], ctx["task"]
    fit, heldout = task.examples(2000, seed=3), task.examples(600, seed=11)
    labels, held_labels = _harmful(fit), _harmful(heldout)
    pairs = [p for f in FEATURES for p in task.contrast_pairs(f, 40, seed=1)]
    eraser = fit_eraser(model, fit, labels, hook=SITE, concept="harmful")
    runs = {
        f"LEACE at {SITE}": eraser,
        f"random rank-{eraser.rank} projection at {SITE}": random_eraser(
            model, hook=SITE, rank=eraser.rank
        ),
        f"LEACE at {EARLY}": fit_eraser(model, fit, labels, hook=EARLY, concept="harmful"),
    }
    rows, results = [], {}
    for name, run in runs.items():
        result = concept_erasure(model, run, pairs, heldout=heldout, heldout_labels=held_labels)
        results[name] = result
        for row in result.summary().to_dict("records"):
            rows.append(
                {
                    "eraser": name,
                    "rank": run.rank,
                    "feature": row["feature"],
                    "margin before": row["before"],
                    "margin after": row["after"],
                    "change (95% CI)": f"{_num(row['change'])} "
                    f"({_num(row['change_low'])} to {_num(row['change_high'])})",
                    "probe before": result.probe_before,
                    "probe after": result.probe_after,
                    "chance": result.chance,
                }
            )
    frame = pd.DataFrame(rows)
    main = results[f"LEACE at {SITE}"]
    summary = main.summary().set_index("feature")
    sites = [
        f"blocks.{i}.hook_resid_{k}" for i in range(model.cfg.n_layers) for k in ("pre", "mid")
    ]
    presence = concept_presence(model, heldout, held_labels, hooks=sites)
    others = [f for f in FEATURES[1:] if f in summary.index]
    shifted = [
        f for f in others if not summary.loc[f, "change_low"] <= 0 <= summary.loc[f, "change_high"]
    ]
    moved = (
        f"the change of {', '.join(shifted)} margins has a 95% interval excluding 0"
        if shifted
        else f"the 95% interval of the change of every other feature's margin "
        f"({', '.join(others)}) holds 0"
    )
    section = Section("Concept erasure: removing the planted harm penalty")
    section.text(
        "A LEACE eraser (concept-erasure's LeaceFitter) fitted on 2000 zoo conversations "
        "labelled by whether the response holds a harmful word, applied at the reward-reading "
        f"token of {SITE}, moves the harmful contrast pairs' mean margin from "
        f"{_num(summary.loc['harmful', 'before'])} to {_num(summary.loc['harmful', 'after'])} "
        f"(the rule: −3 per harmful word); {moved}. A fresh logistic probe on 600 held-out "
        "conversations "
        f"reads harm at {main.probe_before:.3f} before erasure and {main.probe_after:.3f} "
        f"after (chance {main.chance:.3f}). Controls: a random projection of the same rank "
        f"at the same site, and the same fit at {EARLY}, before the model has read anything "
        "into the reading token (its eraser has rank 0). Harm is first linearly present at "
        f"the reading token at {presence.first_present(0.95)}."
    )
    section.table(frame, max_rows=len(frame))
    section.figure(main.plot(), "mean margin per feature before and after erasure", "erasure")
    section.figure(presence.plot(), "probe accuracy for harm per site", "erasure_presence")
    ctx["numbers"]["erasure"] = {
        "site": SITE,
        "table": frame.to_dict("records"),
        "presence": presence.to_dataframe().to_dict("records"),
        "first_present": presence.first_present(0.95),
    }
    return section
