"""The report's section on optimisation pressure: the zoo DPO policy's best-of-n ladder.

Internal (no public names): a section of `reward_lens_tl.report` (registered by `.sections`).

On the zoo (`reward-lens report` with no pair file) the report draws 32 responses per prompt
from the zoo's DPO policy for 24 held-out prompts, and reads the best-of-n ladder
(`reward_lens_tl.pressure.best_of_n`) of the zoo's scalar reward model off them: proxy
and gold reward against √KL, and the planted features the selection pushes. The training-time
monitor (a reward model trained under `RewardLensCallback`,
GRPO runs against the scalar model and a control) takes minutes, so it lives in
`notebooks/09_reward_hacking_in_training.ipynb`. Numbers go to `ctx["numbers"]["pressure"]`.

Examples:
    >>> pressure_section({}) is None  # not on the zoo: no section
    True
"""

from __future__ import annotations

from .page import Section, format_cell, zoo_only

__all__: list[str] = []

N_PROMPTS = 24
N_MAX = 32
SEED = 0


def _num(value) -> str:
    return format_cell(float(value))


@zoo_only
def pressure_section(ctx) -> Section:
    """The optimisation pressure section (module docstring).

    {zoo_section}
    """
    from ..pressure import best_of_n
    from ..pressure.training import zoo_prompts
    from ..pressure.zoo import zoo_gold
    from ..zoo import zoo_path
    from .backends import load_reward_model

    scalar = ctx.get("load_model", load_reward_model)(zoo_path("scalar"))  # the report's backend
    ladder = best_of_n(
        "policy", scalar, zoo_prompts(N_PROMPTS), n_max=N_MAX, gold=zoo_gold, seed=SEED
    )
    frame = ladder.to_dataframe()
    peak = frame.loc[frame["gold"].idxmax()]
    first = ladder.exploited_first(among=("sycophancy", "length"))
    section = Section("Optimisation pressure: best-of-n")
    section.text(
        f"The zoo's DPO policy sampled {N_MAX} times for each of {N_PROMPTS} held-out prompts; "
        "every rung n reads the best-of-n choice of the scalar reward model off the same "
        "samples (the average over every n-subset), with KL(best-of-n ‖ policy) = log n − "
        "(n−1)/n. Gold is the task user's reward (on-topic words up to four, harm, nothing for "
        f"length, −2.5 for the flattering opener). Gold peaks at n = {int(peak['n'])} "
        f"({_num(peak['gold'])}) and is {_num(frame['gold'].iloc[-1])} at n = {N_MAX}, while "
        f"the proxy rises from {_num(frame['proxy'].iloc[0])} to "
        f"{_num(frame['proxy'].iloc[-1])}. The planted hack the selection pushes first: "
        f"{first or 'none (no feature rises significantly)'}. The training-time view (the "
        "monitor inside TRL, onset alarms and a control run) is notebook 09."
    )
    section.table(frame)
    section.figure(ladder.plot(), "proxy and gold reward of best-of-n against sqrt KL", "bon")
    ctx["numbers"]["pressure"] = {
        "ladder": frame.to_dict(orient="list"),
        "gold_peak_n": int(peak["n"]),
        "exploited_first": first,
    }
    return section
