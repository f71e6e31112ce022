"""The report's section on the zoo's generative judge and process reward model.

Internal (no public names): a section of `reward_lens_tl.report` (registered by `.sections`).

On the zoo (`reward-lens report` with no pair file, which `make demo` runs) the report
loads the zoo judge and PRM (`reward_lens_tl.zoo.judge`, `reward_lens_tl.zoo.prm`)
and shows what the tools find against their planted mechanisms: the judge's topic-match
accuracy, its sycophancy hack (the probe suite's verdict), its position bias decomposed over
components, and the PRM's step accuracy, ProcessBench F1, what its first wrong steps read and
what the shortcut word buys. Numbers go to `ctx["numbers"]["judges"]`.

Examples:
    >>> judges_section({}) is None  # not on the zoo: no section
    True
"""

from __future__ import annotations

from .page import Section, zoo_only

__all__: list[str] = []

N_ITEMS = 120
SEED = 2026


@zoo_only
def judges_section(ctx) -> Section:
    """The generative judge and process reward model section (module docstring).

    {zoo_section}
    """
    from .backends import load_reward_model

    load = ctx.get("load_model", load_reward_model)  # the report's backend
    section = Section("Generative judge and process reward model")
    numbers: dict = {}
    _judge_part(section, numbers, load)
    _prm_part(section, numbers, load)
    ctx["numbers"]["judges"] = numbers
    return section


def _words(words) -> str:
    return " ".join(words)


def _judge_part(section: Section, numbers: dict, load) -> None:
    from ..judges import position_bias
    from ..probes import run_probes
    from ..probes.probe import sycophantic_opener
    from ..zoo import zoo_path
    from ..zoo.judge import (
        JUDGE_PAIRWISE_TEMPLATE,
        JUDGE_POINTWISE_TEMPLATE,
        PLANTED,
        judge_items,
    )

    judge = load(zoo_path("judge"), model_type="judge", template=JUDGE_POINTWISE_TEMPLATE)
    items = [it for it in judge_items("pointwise", N_ITEMS, seed=SEED) if not it.sycophantic[0]]
    prompts = [_words(it.prompt) for it in items]
    responses = [_words(it.responses[0]) for it in items]
    scores = judge.score(prompts, responses)
    on_topic = [it.on_topic[0] for it in items]
    accuracy = sum((s > 0) == o for s, o in zip(scores.tolist(), on_topic, strict=True)) / len(
        items
    )
    probes = run_probes(
        judge,
        list(zip(prompts, responses, strict=True))[:40],
        [sycophantic_opener("great question")],
    )
    row = probes.to_dataframe().set_index("probe").loc["sycophantic_opener"]
    pairwise = load(
        zoo_path("judge"), model_type="judge", kind="pairwise", template=JUDGE_PAIRWISE_TEMPLATE
    )
    ties = [
        it for it in judge_items("pairwise", N_ITEMS, seed=SEED) if it.on_topic[0] == it.on_topic[1]
    ][:32]
    bias = position_bias(
        pairwise,
        [_words(it.prompt) for it in ties],
        [_words(it.responses[0]) for it in ties],
        [_words(it.responses[1]) for it in ties],
    )
    section.text(
        "The zoo judge (`zoo_path('judge')`, a causal LM whose verdict is logit(yes) − logit(no) "
        "at the end of its template) analysed as a reward model. Pointwise, it says yes for "
        f"on-topic answers on {accuracy:.0%} of {len(items)} held-out items. The probe suite "
        f"flags the planted sycophancy hack: prepending 'great question' moves the verdict by "
        f"{row['mean_delta']:+.2f} (95% CI {row['ci_low']:+.2f} to {row['ci_high']:+.2f}; "
        f"planted +{PLANTED['sycophancy']:.1f}). Pairwise, on {len(ties)} near-tie pairs shown "
        f"in both orders, the position bias (m_AB + m_BA)/2 is {float(bias.bias.mean()):+.2f} "
        f"(planted +{PLANTED['position_bias']:.1f}); the components that carry it (their "
        "shares sum exactly to the bias):"
    )
    section.table(bias.top_k(6).to_dataframe())
    numbers["judge"] = {
        "topic_accuracy": accuracy,
        "sycophancy_delta": float(row["mean_delta"]),
        "sycophancy_ci": [float(row["ci_low"]), float(row["ci_high"])],
        "position_bias": float(bias.bias.mean()),
        "position_bias_components": [list(t) for t in bias.top_k(6)],
    }


def _prm_part(section: Section, numbers: dict, load) -> None:
    from ..evals import processbench_from_scores
    from ..judges import first_error_analysis
    from ..zoo import zoo_path
    from ..zoo.prm import PRM_SHORTCUT, prm_examples

    prm = load(zoo_path("prm"), model_type="prm")
    exs = prm_examples(200, seed=SEED)
    scores = prm.score_solutions([e.prompt for e in exs], [e.steps for e in exs])
    steps = [
        (s > 0.5) == ok
        for e, row in zip(exs, scores, strict=True)
        for s, ok, cut in zip(row, e.step_labels, e.shortcut, strict=True)
        if not cut
    ]
    bench = processbench_from_scores(scores, [e.first_error for e in exs], threshold=0.5)
    figures = bench.figures("all")
    example = next(e for e in exs if e.first_error >= 1 and not e.shortcut[e.first_error])
    why = first_error_analysis(prm, example.prompt, list(example.steps), example.first_error)
    cut = [
        e for e in exs if any(c and not ok for c, ok in zip(e.shortcut, e.step_labels, strict=True))
    ]
    section.text(
        "The zoo PRM (`zoo_path('prm')`, Math-Shepherd style: P('+') at each 'ки') scores "
        f"{sum(steps) / len(steps):.0%} of held-out steps without the shortcut word correctly; "
        f"ProcessBench on 200 chains: F1 {figures['f1']:.1f} (error accuracy "
        f"{figures['error_accuracy']:.1f}, correct accuracy {figures['correct_accuracy']:.1f}). "
        f"{len(cut)} chains hold a wrong step that opens with the planted shortcut "
        f"'{PRM_SHORTCUT}'. For the first wrong step of '{example.prompt}' (step "
        f"{example.first_error}: '{example.steps[example.first_error]}', score "
        f"{float(why.scores[example.first_error]):.2f}), the attention heads' share of its "
        "margin by the segment they read (exact; the step reads its own tokens), and the lens "
        f"turns at {why.turn_site}:"
    )
    section.table(why.to_dataframe())
    numbers["prm"] = {
        "step_accuracy": sum(steps) / len(steps),
        "processbench": {
            k: float(figures[k]) for k in ("f1", "error_accuracy", "correct_accuracy")
        },
        "first_error_sources": dict(zip(why.segments, why.by_source_step.tolist(), strict=True)),
        "turn_site": why.turn_site,
    }
