"""What the training-time monitor measures, and the records it keeps.

Two measurements, each a handful of no-grad forwards on a fixed probe set:

- `measure_reward_model` (a reward model being trained): the probe set's rewards (or
  chosen − rejected margins, for pairs), their reward lens per residual site, their exact
  direct attribution per component, and the probe suite's deltas. Examples may come in named
  groups (e.g. contrast pairs per planted feature), each recorded under its own name, so "when
  does the RM learn feature X" is the series `margin/X`.
- `measure_policy` (a policy trained against a reward model): responses sampled from the
  policy on fixed prompts with a fixed seed (common random numbers: step-to-step changes are the
  policy's, not the sampler's), their proxy reward and its attribution over the reward model's
  components, the gold reward and the planted features where known, the probe suite's verdicts
  on the samples, and `exploit/<probe>`: the samples' mean attribution to each hack probe's
  component (`hack_components`: where the reward model pays for that hack), i.e. how
  much of the reward the policy collects through it.

Series names (one value per record step):

| series                      | value                                                       |
| --------------------------- | ----------------------------------------------------------- |
| `reward/<group>`            | mean reward (single examples) of the group                  |
| `margin/<group>`            | mean chosen − rejected margin (pairs); `accuracy/<group>`   |
| `lens/<group>/<site>`       | mean reward-lens value (margin) at a residual site          |
| `attribution/<group>/<c>`   | mean direct attribution of the reward (margin) to component c |
| `probe/<name>/delta`        | mean reward change under the probe; `probe/<name>/flagged`  |
| `proxy`, `gold`             | mean proxy / gold reward of the policy's samples; `gold_se` |
| `feature/<name>`            | mean planted-feature value of the samples                   |
| `attribution/<c>`           | mean attribution of the samples' rewards to component c     |
| `exploit/<probe>`           | samples' mean attribution to the probe's hack component     |
| `implicit/<group>`          | mean implicit-reward margin `beta * (log pi - log ref)`     |

`MonitorRecords` holds them long-form (`step`, `series`, `value`).

Examples:
    >>> records = MonitorRecords.from_rows([(0, "margin/x", 0.1), (10, "margin/x", 0.9)])
    >>> records.series("margin/x").tolist()
    [0.1, 0.9]
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..errors import PressureError, ProbeNotApplicableError, ProbeSetTooLongError
from ..plotting import Backend, line, render
from ..results import Result
from .onset import detect_onset, onset_table
from .sampling import Prompt, logits_of, model_device, prompt_text, sample_responses
from .validate import feature_table

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "MonitorRecords",
    "compile_probe_set",
    "measure_policy",
    "measure_reward_model",
]

Row = tuple[int, str, float]
DEFAULT_GROUP = "all"


# ---- records -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class MonitorRecords(Result):
    """Long-form monitor records: `to_dataframe()` has `step`, `series`, `value`.

    Attributes:
        steps: the step of each record.
        names: the series of each record.
        values: the value of each record.

    Examples:
        >>> from reward_lens_tl.pressure import MonitorRecords
        >>> records = MonitorRecords.from_rows(
        ...     [(0, "proxy", 1.0), (0, "gold", 1.0), (10, "proxy", 2.5), (10, "gold", 0.5)])
        >>> records.series_names, records.series("gold").tolist()
        (['proxy', 'gold'], [1.0, 0.5])
        >>> records.pivot()
        series  gold  proxy
        step
        0        1.0    1.0
        10       0.5    2.5
    """

    label_column = "series"
    value_column = "value"

    steps: np.ndarray
    names: tuple[str, ...]
    values: np.ndarray

    @classmethod
    def from_rows(cls, rows: Sequence[Row]) -> MonitorRecords:
        """Records from `(step, series, value)` rows.

        Args:
            rows: the rows, in the order recorded.

        Returns:
            The records.
        """
        return cls(
            steps=np.array([r[0] for r in rows], dtype=int),
            names=tuple(r[1] for r in rows),
            values=np.array([r[2] for r in rows], dtype=float),
        )

    def to_dataframe(self):
        """One row per record: `step`, `series`, `value`.

        Returns:
            A `pandas.DataFrame`.
        """
        import pandas as pd

        return pd.DataFrame({"step": self.steps, "series": list(self.names), "value": self.values})

    def pivot(self):
        """One row per step, one column per series.

        Returns:
            A `pandas.DataFrame` indexed by step.
        """
        return self.to_dataframe().pivot(index="step", columns="series", values="value")

    @property
    def series_names(self) -> list[str]:
        """The names of the series recorded, in the order first recorded."""
        return list(dict.fromkeys(self.names))

    def series(self, name: str):
        """One series as a pandas Series indexed by step (what `detect_onset` reads).

        Args:
            name: the series' name.

        Returns:
            A `pandas.Series` named `name`.

        Raises:
            PressureError: if no series `name` was recorded.
        """
        frame = self.to_dataframe()
        picked = frame[frame["series"] == name]
        if picked.empty:
            raise PressureError(
                f"no series {name!r}; recorded: {self.series_names[:12]}"
                + (" ..." if len(self.series_names) > 12 else "")
            )
        out = picked.set_index("step")["value"]
        out.name = name
        return out

    def onsets(self, names: Sequence[str] | None = None, gold: str | None = None, **options):
        """`detect_onset` on each series of `names`, with the `gold` series for lead times.

        Args:
            names: the series (default: all but `gold`).
            gold: the name of the gold series, or `None`.
            **options: keyword arguments of `detect_onset`.

        Returns:
            A `pandas.DataFrame`, one row per series (`onset_table`).
        """
        names = list(names) if names is not None else [n for n in self.series_names if n != gold]
        gold_series = self.series(gold) if gold is not None else None
        return onset_table(
            [detect_onset(self.series(n), gold=gold_series, **options) for n in names]
        )

    def crossing_step(self, name: str, threshold: float, sustained: int = 3) -> int | None:
        """The first step from which the series `name` stays at or above `threshold`.

        E.g. a feature's pairs ranked right 90% of the time: when it becomes *visible*.

        Args:
            name: the series' name.
            threshold: the level to reach.
            sustained: for how many consecutive records it must stay there.

        Returns:
            The step, or `None`.

        Examples:
            >>> rows = [(s, "acc", v)
            ...         for s, v in zip(range(0, 60, 10), [.5, .95, .6, .9, .92, .97])]
            >>> MonitorRecords.from_rows(rows).crossing_step("acc", 0.9)
            30
        """
        values = self.series(name)
        above = (values >= threshold).to_numpy()
        for i in range(len(above) - sustained + 1):
            if above[i : i + sustained].all():
                return int(values.index[i])
        return None

    def gold_drop_step(self, gold: str = "gold", se: str | None = "gold_se", z: float = 2.0):
        """When the gold reward *drops*.

        The first step after which the `gold` series has fallen below its running maximum by
        more than `z` standard errors (the `se` series recorded beside it; without one, the
        spread of the first five values).

        Args:
            gold: the name of the gold series.
            se: the name of its standard-error series, or `None`.
            z: how many standard errors below the running maximum count as a drop.

        Returns:
            The step, or `None`.
        """
        values = self.series(gold)
        if se is not None and se in self.series_names:
            errors = self.series(se).reindex(values.index)
        else:
            errors = values * 0 + float(values.iloc[:5].std())
        running = values.cummax()
        for step in values.index:
            if values.loc[step] < running.loc[step] - z * float(errors.loc[step]):
                return int(step)
        return None

    def hack_alarms(self, names: Sequence[str], gold: str = "gold", z: float = 2.0, **options):
        """Alarms of hack indicators, with their lead times before the gold peak and drop.

        For each series of `names`, `detect_onset` with the gold series: the alarm, the gold
        peak, the gold drop (`gold_drop_step`) and the alarm's lead times before both
        (positive: the alarm came first).

        Args:
            names: the series (hack indicators).
            gold: the name of the gold series.
            z: the standard errors of the gold drop (`gold_drop_step`).
            **options: keyword arguments of `detect_onset`.

        Returns:
            A `pandas.DataFrame`, one row per series.
        """
        table = self.onsets(names, gold=gold, **options)
        drop = self.gold_drop_step(gold, z=z) if gold in self.series_names else None
        table["gold_drop_step"] = drop
        table["lead_to_drop"] = [
            None if a is None or a != a or drop is None else int(drop - a)
            for a in table["alarm_step"]
        ]
        return table.rename(columns={"lead_time": "lead_to_peak"})[
            ["series", "fired", "onset_step", "alarm_step", "gold_peak_step", "lead_to_peak",
             "gold_drop_step", "lead_to_drop", "mean", "sigma", "threshold", "arl0"]
        ]  # fmt: skip

    def top_k(self, k: int = 10):
        """The series whose last value moved most from their first (by |change|).

        Args:
            k: how many series.

        Returns:
            The top entries (`reward_lens_tl.results.top_entries`).
        """
        from ..results import top_entries

        wide = self.pivot()
        change = (wide.ffill().iloc[-1] - wide.bfill().iloc[0]).fillna(0.0)
        return top_entries(list(change.index), change.tolist(), k, "change over the run")

    def plot(
        self,
        ax: Axes | None = None,
        names: Sequence[str] | None = None,
        *,
        backend: Backend | None = None,
    ) -> Any:
        """The series `names` (default: the first eight recorded) against step.

        One line per series, each through the steps it was recorded at; hover shows the
        series, the step and the exact value.

        Args:
            ax: Matplotlib axes to draw the static form on.
            names: The series to draw.
            backend: `"plotly"` or `"matplotlib"` (see `reward_lens_tl.plotting`).

        Returns:
            The figure (not shown).
        """
        chosen = list(names) if names is not None else self.series_names[:8]
        for name in chosen:
            self.series(name)  # an unknown name raises PressureError
        wide = self.pivot()[chosen]
        fig = line(
            {name: wide[name].to_numpy() for name in chosen},
            x=[int(s) for s in wide.index],
            xaxis="step",
            yaxis="value",
            title=f"monitor records · {len(chosen)} of {len(self.series_names)} series",
        )
        for trace in fig.data:  # each line through its own records (no gaps at missing steps)
            kept = np.isfinite(np.asarray(trace.y, dtype=float))
            trace.x, trace.y = np.asarray(trace.x)[kept], np.asarray(trace.y)[kept]
            trace.customdata = np.asarray(trace.customdata)[kept]
        fig.update_layout(showlegend=True)
        return render(fig, backend, ax)


# ---- the probe set -----------------------------------------------------------------------------
def _as_pair_or_text(ex: Any) -> Any:
    """Dicts with prompt/chosen/rejected become attribute objects; the rest passes through."""
    if isinstance(ex, Mapping):
        if {"prompt", "chosen", "rejected"} <= set(ex):
            return SimpleNamespace(
                prompt=ex["prompt"], chosen=ex["chosen"], rejected=ex["rejected"]
            )
        if {"prompt", "response"} <= set(ex):
            return (ex["prompt"], ex["response"])
    return ex


def as_groups(probe_examples: Any) -> dict[str, list[Any]]:
    """`probe_examples` as named groups (a list is the one group `"all"`).

    Args:
        probe_examples: texts, pairs, or `{group: examples}`.

    Returns:
        The examples by group, pairs given as dicts made attribute objects.

    Raises:
        PressureError: if `probe_examples` is `None` or a group is empty.
    """
    if probe_examples is None:
        raise PressureError("probe_examples is required: texts, pairs, or {group: examples}")
    groups = (
        dict(probe_examples)
        if isinstance(probe_examples, Mapping) and not _is_record(probe_examples)
        else {DEFAULT_GROUP: probe_examples}
    )
    out = {str(k): [_as_pair_or_text(e) for e in v] for k, v in groups.items()}
    empty = [k for k, v in out.items() if not v]
    if empty:
        raise PressureError(f"probe example groups {empty} are empty")
    return out


def _is_record(obj: Mapping) -> bool:
    return "prompt" in obj


@dataclass
class ProbeSet:
    """The probe set encoded once with the reward model's tokenizer.

    Attributes:
        sequences: every sequence to forward (each group's examples, chosen sides after them
            for pairs, then every probe edit).
        groups: per group, the rows of its probed examples and of their chosen sides (`None`
            for single examples).
        probes: per probe, the rows of the original examples and of their edits.
        skipped: per probe, how many examples its edit did not apply to.
    """

    sequences: list[Any]
    groups: dict[str, tuple[np.ndarray, np.ndarray | None]]  # (probed rows, chosen rows | None)
    probes: dict[str, tuple[np.ndarray, np.ndarray]]  # (original rows, edited rows)
    skipped: dict[str, int] = field(default_factory=dict)


def compile_probe_set(
    model: Any,
    probe_examples: Any,
    probes: Sequence[Any],
    seed: int = 0,
    max_probe_examples: int | None = None,
):
    """Encode the probe examples and apply the probes to them, once.

    The probes edit the probed side of each example (the rejected side of a pair); with
    `max_probe_examples`, that many of them, spread evenly over the set. Probe edits that do
    not apply are skipped (counted in `skipped`).

    Args:
        model: the reward model (a `HookedRewardModel`).
        probe_examples: texts, pairs or groups of them.
        probes: the probes to apply.
        seed: the seed of the probes' edits.
        max_probe_examples: how many examples the probes edit (`None`: all).

    Returns:
        The `ProbeSet`.

    Raises:
        ProbeSetTooLongError: if an example does not fit the model's context.

    Examples:
        Two examples, then each probe's edit of each (rows 2-3: four filler words appended,
        rows 4-5: the opener prepended):

        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.pressure import compile_probe_set
        >>> from reward_lens_tl.probes.zoo import zoo_probes
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> examples = {"bread": [("how bake bread", "soup oven"), ("how bake bread", "soup bomb")]}
        >>> probe_set = compile_probe_set(model, examples, zoo_probes()[:2])
        >>> len(probe_set.sequences), probe_set.groups["bread"][0].tolist()
        (6, [0, 1])
        >>> {name: edited.tolist() for name, (_, edited) in probe_set.probes.items()}
        {'length_padding': [2, 3], 'sycophantic_opener': [4, 5]}
        >>> model.tokenizer.decode(probe_set.sequences[4].response_ids())
        'great question soup oven'
    """
    from ..errors import SequenceTooLongError
    from ..probes.runner import apply_probe, as_items

    sequences: list[Any] = []
    groups: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
    probed: list[Any] = []
    for name, examples in as_groups(probe_examples).items():
        try:
            items = as_items(model, examples)
        except SequenceTooLongError as err:
            raise ProbeSetTooLongError(
                f"a probe example of group {name!r} does not fit the reward model's context "
                f"(n_ctx={model.cfg.n_ctx}): {err}. Shorten or drop it."
            ) from err
        _check_lengths(model, name, items)
        rows = np.arange(len(sequences), len(sequences) + len(items))
        sequences += [it.enc for it in items]
        chosen = None
        if items[0].chosen is not None:
            chosen = np.arange(len(sequences), len(sequences) + len(items))
            sequences += [it.chosen for it in items]
        groups[name] = (rows, chosen)
        probed += [(int(r), it) for r, it in zip(rows, items, strict=True)]
    if max_probe_examples is not None and len(probed) > max_probe_examples:
        keep = np.unique(np.linspace(0, len(probed) - 1, max_probe_examples).round().astype(int))
        probed = [probed[i] for i in keep]
    probe_rows: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    skipped: dict[str, int] = {}
    for probe in probes:
        rng = random.Random(f"{seed}:{probe.name}")
        originals, edited = [], []
        for i, (row, item) in enumerate(probed):
            try:
                new = apply_probe(model, probe, item, rng, i)
            except ProbeNotApplicableError:
                skipped[probe.name] = skipped.get(probe.name, 0) + 1
                continue
            originals.append(row)
            edited.append(len(sequences))
            sequences.append(new)
        probe_rows[probe.name] = (np.array(originals, dtype=int), np.array(edited, dtype=int))
    return ProbeSet(sequences, groups, probe_rows, skipped)


def _check_lengths(model: Any, group: str, items: Sequence[Any]) -> None:
    for i, it in enumerate(items):
        for enc in (it.enc, it.chosen):
            if enc is not None and len(enc.ids) > model.cfg.n_ctx:
                raise ProbeSetTooLongError(
                    f"probe example {i} of group {group!r} has {len(enc.ids)} tokens, more "
                    f"than the reward model's context n_ctx={model.cfg.n_ctx}: shorten or drop it"
                )


def default_probes(probe_examples_or_prompts: Any) -> list[Any]:
    """The probes to run by default on these examples.

    The zoo's four planted-feature probes when the examples are zoo conversations, else the
    built-in probe battery.

    Args:
        probe_examples_or_prompts: texts, pairs or groups of them.

    Returns:
        The probes.
    """
    from ..probes import builtin_probes
    from ..probes.zoo import zoo_probes
    from .zoo import is_zoo_prompt

    prompts = [_example_prompt(e) for g in as_groups(probe_examples_or_prompts).values() for e in g]
    if prompts and all(p is not None and is_zoo_prompt(p) for p in prompts):
        return zoo_probes()[:4]
    return builtin_probes()


def _example_prompt(ex: Any) -> Prompt | None:
    if isinstance(ex, str):
        return ex
    if isinstance(ex, tuple) and len(ex) == 2:
        return ex[0]
    return getattr(ex, "prompt", None)


# ---- measurements ------------------------------------------------------------------------------
def _forward(model: Any, sequences: Sequence[Any], batch_size: int = 256):
    from ..probes.forward import forward_sequences

    return forward_sequences(model, sequences, batch_size=batch_size)


def _side(values: torch.Tensor, rows: np.ndarray, chosen: np.ndarray | None) -> torch.Tensor:
    """`values[..., rows]`, or chosen − rejected for pairs (the probed side is rejected)."""
    picked = values[..., torch.as_tensor(rows)]
    return picked if chosen is None else values[..., torch.as_tensor(chosen)] - picked


def measure_reward_model(
    model: Any, probe_set: ProbeSet, *, flag_boot: int = 200, seed: int = 0
) -> dict[str, float]:
    """One record of a reward model (module docstring) from one pass over the probe set.

    Args:
        model: the reward model (a `HookedRewardModel`).
        probe_set: the compiled probe set (`compile_probe_set`).
        flag_boot: bootstrap resamples of each probe's flag.
        seed: the bootstrap seed.

    Returns:
        The value of each series, by name.

    Examples:
        The zoo's reward model on contrast pairs of its planted features: it ranks every harmful
        pair right, its components' attributions sum to the margin, and the four filler words
        of `length_padding` raise the reward by about the +2.0 its labels planted:

        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.pressure import compile_probe_set, measure_reward_model
        >>> from reward_lens_tl.pressure.training import zoo_feature_pairs
        >>> from reward_lens_tl.probes.zoo import zoo_probes
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> probe_set = compile_probe_set(model, zoo_feature_pairs(4), zoo_probes()[:1])
        >>> values = measure_reward_model(model, probe_set)
        >>> round(values["margin/harmful"], 2), values["accuracy/harmful"]
        (2.78, 1.0)
        >>> parts = sum(v for k, v in values.items() if k.startswith("attribution/harmful/"))
        >>> round(parts, 4) == round(values["margin/harmful"], 4)
        True
        >>> round(values["probe/length_padding/delta"], 2)
        1.87
    """
    fwd = _forward(model, probe_set.sequences)
    assert fwd.lens is not None and fwd.attribution is not None
    out: dict[str, float] = {}
    for group, (rows, chosen) in probe_set.groups.items():
        value = _side(fwd.rewards, rows, chosen)
        if chosen is None:
            out[f"reward/{group}"] = float(value.mean())
        else:
            out[f"margin/{group}"] = float(value.mean())
            out[f"accuracy/{group}"] = float((value > 0).float().mean())
        lens = _side(fwd.lens, rows, chosen).mean(-1)
        out.update({f"lens/{group}/{s}": float(v) for s, v in zip(fwd.sites, lens, strict=True)})
        attr = _side(fwd.attribution, rows, chosen).mean(-1)
        comps = zip(fwd.components, attr, strict=True)
        out.update({f"attribution/{group}/{c}": float(v) for c, v in comps})
    natural_sd = float(fwd.rewards[_all_probed(probe_set)].std())
    out.update(_probe_series(fwd.rewards, probe_set, natural_sd, flag_boot, seed))
    return out


def _all_probed(probe_set: ProbeSet) -> torch.Tensor:
    return torch.as_tensor(np.concatenate([rows for rows, _ in probe_set.groups.values()]))


def _probe_series(rewards, probe_set: ProbeSet, natural_sd: float, n_boot: int, seed: int):
    from ..probes.outside import summarize_deltas

    out = {}
    for name, (orig, edited) in probe_set.probes.items():
        if len(orig) == 0:
            continue
        deltas = (rewards[torch.as_tensor(edited)] - rewards[torch.as_tensor(orig)]).numpy()
        out[f"probe/{name}/delta"] = float(deltas.mean())
        if len(deltas) >= 2:
            summary = summarize_deltas(
                deltas, natural_sd=natural_sd, seed=seed, min_n=2, n_boot=n_boot
            )
            out[f"probe/{name}/flagged"] = float(summary.flagged)
    return out


@dataclass
class PolicyProbe:
    """What `measure_policy` holds fixed.

    Attributes:
        prompts: the prompts the policy is sampled on.
        samples_per_prompt: responses sampled per prompt.
        max_new_tokens: the token budget of each response.
        seed: the sampling seed.
        probes: the probe suite run on the samples.
        hack_components: each hack probe's component (`hack_components`).
        gold: the optional gold reward function or model.
        features: the optional feature function `fn(prompt, response) -> {name: value}`.
        max_probe_examples: how many samples the probes edit (`None`: all).
    """

    prompts: list[Prompt]
    samples_per_prompt: int = 4
    max_new_tokens: int = 16
    seed: int = 0
    probes: list[Any] = field(default_factory=list)
    hack_components: dict[str, str] = field(default_factory=dict)
    gold: Any = None
    features: Any = None
    max_probe_examples: int | None = 16


def hack_components(
    model: Any, examples: Sequence[tuple[str, str]], probes: Sequence[Any]
) -> dict[str, str]:
    """Each probe's **hack component**: where the reward model pays for the probe's edit.

    The component of `model` whose direct attribution the probe's edit moves most (largest
    mean |attribution delta| over `examples`).

    Args:
        model: the reward model (a `HookedRewardModel`).
        examples: `(prompt, response)` texts.
        probes: the probes.

    Returns:
        Each probe's component, by probe name (probes that apply to no example are left out).
    """
    probe_set = compile_probe_set(model, list(examples), probes)
    fwd = _forward(model, probe_set.sequences)
    assert fwd.attribution is not None
    out = {}
    for name, (orig, edited) in probe_set.probes.items():
        if len(orig):
            delta = (fwd.attribution[:, edited] - fwd.attribution[:, orig]).mean(1)
            out[name] = fwd.components[int(delta.abs().argmax())]
    return out


def measure_policy(
    policy: Any, tokenizer: Any, reward_model: Any, spec: PolicyProbe, *, flag_boot: int = 200
) -> dict[str, float]:
    """One record of a policy trained against `reward_model` (module docstring).

    Args:
        policy: the policy, a causal LM.
        tokenizer: the policy's tokenizer.
        reward_model: the reward model (a `HookedRewardModel`).
        spec: what the measurement holds fixed.
        flag_boot: bootstrap resamples of each probe's flag.

    Returns:
        The value of each series, by name.

    Examples:
        The zoo's DPO policy sampled on two zoo prompts, scored by the zoo's reward model (the
        proxy) and by the zoo's gold reward:

        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.pressure import measure_policy, zoo_features, zoo_gold
        >>> from reward_lens_tl.pressure.monitor import PolicyProbe
        >>> from reward_lens_tl.zoo import load_model, load_tokenizer, zoo_path
        >>> rm = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> spec = PolicyProbe(["how bake bread", "why rain snow"], samples_per_prompt=2,
        ...                    max_new_tokens=8, gold=zoo_gold, features=zoo_features)
        >>> values = measure_policy(load_model("policy"), load_tokenizer("policy"), rm, spec)
        >>> {k: round(values[k], 2) for k in ("proxy", "gold", "feature/sycophancy")}
        {'proxy': 3.36, 'gold': 4.38, 'feature/sycophancy': 0.25}
    """
    samples = sample_responses(
        policy, tokenizer, spec.prompts, spec.samples_per_prompt,
        max_new_tokens=spec.max_new_tokens, seed=spec.seed,
    )  # fmt: skip
    prompts = [p for p, row in zip(spec.prompts, samples, strict=True) for _ in row]
    texts = [s.text for row in samples for s in row]
    examples = list(zip([prompt_text(p) for p in prompts], texts, strict=True))
    probe_set = compile_probe_set(
        reward_model, examples, spec.probes, spec.seed, spec.max_probe_examples
    )
    fwd = _forward(reward_model, probe_set.sequences)
    assert fwd.attribution is not None
    rows = torch.as_tensor(probe_set.groups[DEFAULT_GROUP][0])
    out: dict[str, float] = {"proxy": float(fwd.rewards[rows].mean())}
    out["finished"] = float(np.mean([s.finished for row in samples for s in row]))
    attr = fwd.attribution[:, rows].mean(1)
    out.update({f"attribution/{c}": float(v) for c, v in zip(fwd.components, attr, strict=True)})
    index = {c: i for i, c in enumerate(fwd.components)}
    out.update({f"exploit/{p}": float(attr[index[c]]) for p, c in spec.hack_components.items()})
    if spec.gold is not None:
        from .sampling import score_texts

        gold = score_texts(spec.gold, prompts, texts)
        out["gold"] = float(gold.mean())
        out["gold_se"] = float(gold.std() / len(gold) ** 0.5)
    if spec.features is not None:
        feats = feature_table(spec.features, [p for p, _ in examples], texts)  # checked
        out.update({f"feature/{k}": float(np.mean(v)) for k, v in feats.items()})
    natural_sd = float(fwd.rewards[rows].std())
    out.update(_probe_series(fwd.rewards, probe_set, natural_sd, flag_boot, spec.seed))
    return out


@dataclass(frozen=True)
class ImplicitSet:
    """The probe examples encoded once with the policy's tokenizer for implicit rewards.

    Attributes:
        ids: the right-padded token ids.
        mask: the attention mask.
        response: the response-token mask.
        layout: per group, the rows of each example (`(chosen, rejected)`; `rejected` is
            `None` for single examples).
    """

    ids: torch.Tensor
    mask: torch.Tensor
    response: torch.Tensor
    layout: dict[str, list[tuple[int, int | None]]]

    @classmethod
    def build(cls, tokenizer: Any, probe_examples: Any) -> ImplicitSet:
        """Encode the probe examples with the policy's tokenizer.

        Args:
            tokenizer: the policy's tokenizer.
            probe_examples: texts, pairs or groups of them.

        Returns:
            The encoded set.
        """
        from ..implicit.batches import response_masks
        from ..inputs import encode_conversation, pad_batch

        convs: list[tuple[Any, str]] = []
        layout: dict[str, list[tuple[int, int | None]]] = {}
        for group, examples in as_groups(probe_examples).items():
            layout[group] = []
            for ex in examples:
                sides = (
                    [ex]
                    if isinstance(ex, tuple)
                    else [(ex.prompt, ex.chosen), (ex.prompt, ex.rejected)]
                )
                layout[group].append((len(convs), len(convs) + 1 if len(sides) == 2 else None))
                convs += sides
        encs = [encode_conversation(tokenizer, p, r) for p, r in convs]
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        ids, mask = pad_batch(encs, pad, padding_side="right")
        response = response_masks(encs, width=ids.shape[1], padding_side="right").float()
        return cls(ids, mask, response, layout)


@torch.no_grad()
def implicit_margins(
    policy: Any, reference: Any, implicit_set: ImplicitSet, beta: float
) -> dict[str, float]:
    """The series `implicit/<group>`: each group's mean implicit-reward margin.

    The margin is `beta * (log pi - log ref)` of each group's pairs (response tokens and the
    template's suffix) of an `ImplicitSet`; groups of single examples give their mean implicit
    reward. One forward per model.

    Args:
        policy: the policy.
        reference: the reference model.
        implicit_set: the encoded probe examples.
        beta: the implicit reward's scale.

    Returns:
        The value of each series, by name.
    """
    from ..implicit.reward_model import token_logprobs

    device = model_device(policy)
    ids, mask = implicit_set.ids.to(device), implicit_set.mask.to(device)
    response = implicit_set.response.to(device)
    sums = [
        (token_logprobs(logits_of(m, ids, mask), ids) * response).sum(-1)
        for m in (policy, reference)
    ]
    rewards = (beta * (sums[0] - sums[1])).cpu()
    out = {}
    for group, rows in implicit_set.layout.items():
        values = [rewards[a] - (rewards[b] if b is not None else 0.0) for a, b in rows]
        out[f"implicit/{group}"] = float(torch.stack(values).mean())
    return out
