"""Extra report sections from the other analyses (registered when this module is imported).

- ``Reward-hacking probes``: the built-in probes applied to the rejected responses (flip rates,
  distortion index; invariance probes must not be flagged) — pairs that only fit the context
  after truncation are left out, and fewer than ten fitting pairs skip the section with a note;
- ``Failures explained``: the pairs the model gets wrong, explained with
  :meth:`~reward_lens_tl.evals.results.Failures.explain` (wrong-way components against the
  successes, the tokens that drive them, where the wrong preference appears);
- ``Token sweep``: every vocabulary token as the whole response to the pair set's most common
  prompt that fits the context (skipped, with a note, for vocabularies above
  :data:`MAX_SWEEP_VOCAB` tokens: run ``reward-lens sweep`` for those).
"""

from __future__ import annotations

from collections import Counter

from .build import register_section
from .page import Section

MAX_SWEEP_VOCAB = 5000


def _prompt_key(prompt) -> str:
    return prompt if isinstance(prompt, str) else repr(prompt)


def sweep_section(ctx) -> Section:
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
        f"Every one-token response to the most common prompt that fits ({counts[key]} pairs) of "
        f"{len(result)} candidate tokens, built from token ids with the template's suffix. "
        f"Prompt: {key[:120]}"
    )
    top, bottom = result.top_k(8), result.bottom_k(8)
    section.text("Optimal tokens:").table(top.to_dataframe())
    section.text("Pessimal tokens:").table(bottom.to_dataframe())
    ctx["numbers"]["sweep"] = {"prompt": key, "top": list(top), "bottom": list(bottom)}
    section.figure(result.plot(), "reward of every one-token response")
    return section


def failures_section(ctx) -> Section:
    from ..evals.run import score_items

    model = ctx["model"]
    pairs = [ctx["pairs"][i] for i in ctx["kept"]]
    result = score_items(model, pairs, truncation=ctx["truncation"], progress=False)
    failures = result.failures()
    section = Section("Failures explained")
    if len(failures) == 0:
        ctx["numbers"]["failures"] = {"n": 0}
        return section.text(f"The model prefers the chosen response in all {len(pairs)} pairs.")
    explanation = failures.explain(model, truncation=ctx["truncation"])
    ctx["numbers"]["failures"] = {
        "n": len(failures),
        "wrong_way_components": explanation.wrong_way_components(5),
        "crystallizes_at": explanation.crystallization_site(),
    }
    section.text(
        f"{len(failures)} of {len(pairs)} pairs are failed (rejected ≥ chosen). Components "
        "pushing the margin the wrong way on the failures, against the same on successes; the "
        "wrong preference most often appears at "
        f"{explanation.crystallization_site()} (pair lens)."
    )
    section.table(explanation.components(), max_rows=8)
    section.text("Tokens that drive the failures (net contribution to the margin):")
    section.table(explanation.tokens(8), max_rows=8)
    section.figure(explanation.plot(), "wrong-way components and lens of the failures")
    return section


def probes_section(ctx) -> Section:
    from ..errors import RewardLensError
    from ..probes import builtin_probes, run_probes

    model = ctx["model"]
    section = Section("Reward-hacking probes")
    fitting = []
    for i in ctx["kept"]:
        pair = ctx["pairs"][i]
        try:
            model.encode(pair.prompt, pair.chosen), model.encode(pair.prompt, pair.rejected)
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
        f"pairs; flagged: {ctx['numbers']['probes']['flagged'] or 'none'}; invariance probes "
        f"flagged: {flagged} of {tested}. Probes whose text the tokenizer does not know insert "
        "unknown tokens; skipped examples are counted in the table."
    )
    section.table(frame, max_rows=20)
    section.figure(report.plot(), "reward deltas per probe")
    return section


register_section("probes", probes_section)
register_section("failures", failures_section)
register_section("sweep", sweep_section)
