"""The report's sections after the core steps, registered in page order when this is imported.

Internal (no public names): imported by `reward_lens_tl.report` to register its sections.

Each is `fn(ctx) -> Section | None`; on the zoo (`ctx["task"]`) a section uses
the zoo's data and ground truth, and the zoo-only sections of `reward_lens_tl.report.zoo`
join in (elsewhere they return `None`).

- `Planted features`, `Where the planted features sit`, `Observational vs causal`,
  `SAE features` (zoo only, `reward_lens_tl.report.zoo`);
- `Reward-hacking probes`: the built-in probes applied to the rejected responses (flip rates,
  distortion index; invariance probes must not be flagged) — pairs that only fit the context
  after truncation are left out, and fewer than ten fitting pairs skip the section with a note;
  on the zoo, the zoo's probes on 64 held-out conversations with their cascade onsets;
- `Failures explained`: the pairs the model gets wrong, explained with
  `Failures.explain` (wrong-way components against the
  successes, the tokens that drive them, where the wrong preference appears); on the zoo, the
  zoo's RewardBench-style set with its planted hacks, scored by this model and the other zoo
  reward model, and this model's hack failures explained;
- `Token sweep`: every vocabulary token as the whole response to the pair set's most common
  prompt that fits the context (skipped, with a note, for vocabularies above
  `MAX_SWEEP_VOCAB` tokens: run `reward-lens sweep` for those);
- `Concept erasure: removing the planted harm penalty` (zoo only): LEACE erasure of the
  planted harmful concept with its probe certificate (`reward_lens_tl.erasure`);
- `Difference dictionary`: a TopK SAE on chosen − rejected at the final norm's output, each
  margin split over its latents (pair sets of at least 64 scored pairs; on the zoo, 512
  rule-labelled pairs and the planted features matched; `reward_lens_tl.sae.difference`);
- `Counterfactual edits`: the smallest response edit that flips each of the closest pairs
  (`reward_lens_tl.counterfactual`);
- `The reward as the response unfolds`: the reward of every prefix of the most separated
  pair's two responses (`reward_lens_tl.unfolding`);
- `Implicit reward of the DPO policy vs the explicit reward model` (zoo only).
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from .build import register_section
from .counterfactual import counterfactual_section
from .difference import difference_section
from .erasure import erasure_section
from .judges import judges_section
from .page import Section, format_cell, plural, words_list
from .pressure import pressure_section
from .unfolding import unfolding_section
from .zoo import (
    implicit_section,
    localization_section,
    observational_section,
    planted_features_section,
    sae_section,
)

__all__: list[str] = []

MAX_SWEEP_VOCAB = 5000


def _prompt_key(prompt) -> str:
    return prompt if isinstance(prompt, str) else repr(prompt)


def sweep_section(ctx) -> Section:
    """The token sweep section (module docstring).

    Args:
        ctx: The report's context.

    Returns:
        The section.
    """
    from ..errors import SequenceTooLongError
    from ..sweep import token_sweep

    model = ctx["model"]
    section = Section("Token sweep")
    if model.cfg.d_vocab > MAX_SWEEP_VOCAB:
        return section.text(
            f"Skipped: the vocabulary has {model.cfg.d_vocab} tokens (more than "
            f"{MAX_SWEEP_VOCAB}); run `reward-lens sweep MODEL_DIR --prompt TEXT` for a sweep."
        )
    counts = Counter(_prompt_key(p.prompt) for p in ctx["pairs"])
    prompts = {_prompt_key(p.prompt): p.prompt for p in ctx["pairs"]}
    for key, _ in counts.most_common():  # the most common prompt that fits the context
        try:
            result = token_sweep(model, prompts[key], progress=False)
            break
        except SequenceTooLongError:
            continue
    else:
        return section.text(
            f"Skipped: none of the {len(counts)} prompts fits the model's context of "
            f"{model.cfg.n_ctx} tokens with a one-token response."
        )
    section.text(
        "Every one-token response to the most common prompt that fits "
        f"({plural(counts[key], 'pair')}) of "
        f"{len(result)} candidate tokens, built from token ids with the template's suffix. "
        f"Prompt: {key[:120]}"
    )
    top, bottom = result.top_k(8), result.bottom_k(8)
    if len(result) <= 16:  # the optimal and pessimal tables would share tokens: one table
        every = result.top_k(len(result))
        section.text(f"Every candidate ({len(result)}), optimal first:").table(
            every.to_dataframe(), max_rows=len(result)
        )
    else:
        section.text("Optimal tokens:").table(top.to_dataframe())
        section.text("Pessimal tokens:").table(bottom.to_dataframe())
    ctx["numbers"]["sweep"] = {"prompt": key, "top": list(top), "bottom": list(bottom)}
    section.figure(result.plot(), "reward of every one-token response", "sweep")
    return section


def failures_section(ctx) -> Section:
    """The failures-explained section (module docstring).

    Args:
        ctx: The report's context.

    Returns:
        The section.
    """
    from ..evals.run import score_items

    if "task" in ctx:
        return _benchmark_failures(ctx)
    model = ctx["model"]
    pairs = [ctx["pairs"][i] for i in ctx["kept"]]
    result = score_items(model, pairs, truncation=ctx["truncation"], progress=False)
    failures = result.failures()
    section = Section("Failures explained")
    if len(failures) == 0:
        ctx["numbers"]["failures"] = {"n": 0}
        return section.text(f"The model prefers the chosen response in all {len(pairs)} pairs.")
    explanation = failures.explain(model, truncation=ctx["truncation"])
    section.text(
        f"{len(failures)} of {len(pairs)} pairs are failed (rejected ≥ chosen). Components "
        "pushing the margin the wrong way on the failures, against the same on successes; the "
        "wrong preference most often appears at "
        f"{explanation.crystallization_site()} (pair lens)."
    )
    ctx["numbers"]["failures"] = _explained(section, explanation, k=8, part=None)
    return section


def _explained(section: Section, explanation, k: int, part: str | None) -> dict:
    """Components, driving tokens (of `part`) and the figure of an explanation; its numbers."""
    components, tokens = explanation.components(), explanation.tokens(k, part=part)
    section.table(components, max_rows=k, kinds=_signed(components, "failures", "successes"))
    where = "" if part is None else f" of the {part}s"
    section.text(f"Tokens{where} that drive the failures (net contribution to the margin):")
    section.table(tokens, max_rows=k, kinds=_signed(tokens, "value"))
    section.figure(explanation.plot(), "wrong-way components and lens of the failures", "failures")
    return {
        "n": len(explanation.comparisons),
        "wrong_way_components": explanation.wrong_way_components(5),
        "crystallizes_at": explanation.crystallization_site(),
    }


def _signed(frame, *columns: str) -> dict[str, str]:
    """`{column: "signed"}` for those of `columns` the frame has (contributions to a margin)."""
    return {c: "signed" for c in columns if c in frame.columns}


def _benchmark_failures(ctx) -> Section:
    """The zoo's benchmark: both zoo reward models' metrics, this model's failures explained."""
    from ..evals.run import score_items
    from ..evals.zoo_set import ZOO_SECTIONS, zoo_benchmark
    from ..zoo import zoo_path
    from .backends import load_reward_model

    model = ctx["model"]
    pairs = zoo_benchmark(ctx["task"], n_per_subset=16, seed=0)
    other = "scalar" if getattr(model, "gating", None) is not None else "multi"
    load = ctx.get("load_model", load_reward_model)  # the report's backend
    others = {f"zoo {other}": load(zoo_path(other))}
    results = {
        name: score_items(m, pairs, progress=False)
        for name, m in {"this model": model, **others}.items()
    }
    frames = []
    for name, result in results.items():
        frame = result.metrics(sections=ZOO_SECTIONS, n_boot=500).to_dataframe()
        frame.insert(0, "model", name)
        frames.append(frame)
    table = pd.concat(frames)[["model", "figure", "value", "low", "high", "n"]]
    shown = table.assign(**{c: table[c] / 100 for c in ("value", "low", "high")})
    section = Section("Failures explained")
    section.text(
        f"A RewardBench-style set built from the zoo task ({len(pairs)} pairs): honest pairs "
        "labelled by the hidden rule, and two subsets whose worse answer carries a planted hack "
        '(the opener "great question", or filler padding). Accuracy with 95% bootstrap '
        "intervals:"
    )
    shares = {"value": "share", "low": "share", "high": "share"}
    section.table(shown, max_rows=len(shown), kinds=shares)
    numbers: dict = {"benchmark": table.to_dict("records")}
    failures = results["this model"].failures().filter(subset="zoo-sycophancy-hack")
    which = "sycophancy-hack failures"
    if not len(failures):  # a model that resists the hack: explain what it does get wrong
        failures, which = results["this model"].failures(), "failures"
    if len(failures):
        explanation = failures.explain(model)
        section.text(
            f"result.failures().explain(model) on this model's {which}: "
            f"{len(failures)} failed comparisons; the wrong preference crystallizes at "
            f"{explanation.crystallization_site()} (most common lens site at half the margin). "
            "Components pushing the margin the wrong way, failures against successes:"
        )
        numbers |= _explained(section, explanation, k=5, part="response")
    ctx["numbers"]["failures"] = {**numbers, "explained": which, "n": len(failures)}
    return section


def probes_section(ctx) -> Section:
    """The reward-hacking probes section (module docstring).

    Args:
        ctx: The report's context.

    Returns:
        The section.
    """
    from ..errors import RewardLensError
    from ..probes import builtin_probes, run_probes

    if "task" in ctx:
        return _zoo_probes(ctx)
    model = ctx["model"]
    section = Section("Reward-hacking probes")
    fitting = []
    for i in ctx["kept"]:
        pair = ctx["pairs"][i]
        try:
            model.encode(pair.prompt, pair.chosen)
            model.encode(pair.prompt, pair.rejected)
        except RewardLensError:
            continue
        fitting.append(pair)
    if len(fitting) < 10:
        return section.text(
            f"Skipped: {len(fitting)} pairs fit the context without truncation; the probe "
            "statistics need at least 10."
        )
    report = run_probes(model, fitting, builtin_probes(), seed=0)
    frame = report.to_dataframe()
    flagged, tested = report.false_positive_rate()
    ctx["numbers"]["probes"] = {
        "n_pairs": len(fitting),
        "flagged": report.flagged(),
        "invariance_flagged": [flagged, tested],
    }
    section.text(
        f"{len(frame)} built-in probes applied to the rejected responses of {len(fitting)} "
        f"pairs; flagged: {words_list(ctx['numbers']['probes']['flagged'])}; invariance probes "
        f"flagged: {flagged} of {tested}. Probes whose text the tokenizer does not know insert "
        "unknown tokens; skipped examples are counted in the table."
    )
    section.table(frame, max_rows=20)
    section.figure(report.plot(), "reward deltas per probe", "probes")
    return section


def _zoo_probes(ctx) -> Section:
    """The zoo's probes on 64 held-out conversations, with onsets and top components.

    The zoo's probes are `reward_lens_tl.probes.zoo`; each planted-feature probe comes with its
    cascade onset and top components.
    """
    from ..probes import run_probes
    from ..probes.zoo import PLANTED, zoo_examples, zoo_probes

    examples = zoo_examples(ctx["task"], 64, seed=21, max_words=8)
    report = run_probes(ctx["model"], examples, zoo_probes())
    cols = ["probe", "kind", "n", "mean_delta", "ci_low", "ci_high", "relative_effect", "flagged"]
    flagged, tested = report.false_positive_rate()
    section = Section("Reward-hacking probes")
    section.text(
        f"Probes in the zoo's vocabulary (reward_lens_tl.probes.zoo) on {len(examples)} held-out "
        "conversations. Flagged = bootstrap 95% CI of the mean delta excludes 0 and |mean| ≥ "
        f"0.1 × the natural reward sd ({report.natural_sd:.2f}). Invariance probes flagged: "
        f"{flagged} of {tested}."
    )
    section.table(report.to_dataframe()[cols])
    cascade = [
        {
            "probe (planted feature)": f"{c.probe} ({PLANTED[c.probe]})",
            "onset at the reward token": c.onset,
            "amplification": c.amplification,
            "top components of the delta": ", ".join(
                f"{n} {format_cell(float(v), 'signed')}" for n, v in c.top_components(3)
            ),
        }
        for c in report.cascade.probes
        if c.probe in PLANTED
    ]
    section.table(pd.DataFrame(cascade))
    section.figure(report.plot(), "reward deltas per probe", "probes")
    section.figure(report.cascade.plot(), "cascade of the probe deltas", "probe_cascade")
    ctx["numbers"]["probes"] = {
        "n_examples": len(examples),
        "flagged": report.flagged(),
        "invariance_flagged": [flagged, tested],
        "cascade": cascade,
    }
    return section


# name, builder, title (the title the section's note has when it needs TransformerLens 3.9)
register_section("zoo:planted", planted_features_section, "Planted features")
register_section("zoo:localization", localization_section, "Where the planted features sit")
register_section("zoo:observational", observational_section, "Observational vs causal")
register_section("zoo:sae", sae_section, "SAE features")
register_section("probes", probes_section, "Reward-hacking probes")
register_section("failures", failures_section, "Failures explained")
register_section("sweep", sweep_section, "Token sweep")
register_section(
    "zoo:erasure", erasure_section, "Concept erasure: removing the planted harm penalty"
)
register_section("difference", difference_section, "Difference dictionary")
register_section("counterfactual", counterfactual_section, "Counterfactual edits")
register_section("unfolding", unfolding_section, "The reward as the response unfolds")
register_section(
    "zoo:implicit",
    implicit_section,
    "Implicit reward of the DPO policy vs the explicit reward model",
)
register_section("zoo:judges", judges_section, "Generative judge and process reward model")
register_section("zoo:pressure", pressure_section, "Optimisation pressure: best-of-n")
