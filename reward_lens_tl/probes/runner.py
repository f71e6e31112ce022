"""`run_probes`: apply every probe to every example, score both, and summarise.

Cost: every original sequence is forwarded once (shared by all probes) and every perturbed
sequence once, each a single cached forward that yields the reward, the reward lens and the
exact attribution together (`reward_lens_tl.probes.forward`). With P probes that is
`1 + 1/P` forwards per example per probe (pairs add the chosen side, also once), measured in
`benchmarks/bench_probes.py`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..errors import (
    ProbeError,
    ProbeFunctionError,
    ProbeNotApplicableError,
    ProbeSkip,
    RewardLensError,
    SequenceTooLongError,
    TooFewExamplesError,
)
from ..inputs import EncodedConversation
from .cascade import build_cascade
from .distortion import flip_share
from .forward import Forwarded, forward_sequences
from .outside import CONFIDENCE, MIN_N, MIN_RELATIVE, N_BOOT, summarize_deltas
from .probe import Conversation, Probe
from .probe_report import ProbeReport, ProbeRow, Skipped

__all__ = [
    "run_probes",
]


@dataclass(frozen=True)
class Item:
    """One example: its encoding, its text when known, and the chosen side for pairs.

    Args:
        enc: the example's encoding (the rejected side for pairs).
        prompt_text: the prompt, when the example came as text.
        response_text: the response, when the example came as text.
        chosen: the chosen side's encoding, for pairs.
    """

    enc: EncodedConversation
    prompt_text: Any = None
    response_text: str | None = None
    chosen: EncodedConversation | None = None


def as_items(model, examples) -> list[Item]:
    """Normalise examples to `Item`s.

    Examples are `EncodedConversation`s, `(prompt, response)` texts, or pairs
    (`PairSet` / objects with `prompt`, `chosen`, `rejected`: the rejected side is
    probed, the chosen side kept for margins).

    Args:
        model: the `HookedRewardModel` that encodes texts.
        examples: the examples.

    Returns:
        One `Item` per example.

    Raises:
        ProbeError: an example of another type, or a mix of pairs and single examples.
    """
    if isinstance(examples, str) or not isinstance(examples, Sequence):
        try:
            examples = list(examples)
        except TypeError as err:
            raise ProbeError(
                "examples must be a sequence of EncodedConversation, (prompt, response) "
                f"tuples or preference pairs, got {type(examples).__name__}"
            ) from err
    items = []
    for i, ex in enumerate(examples):
        if isinstance(ex, EncodedConversation):
            items.append(Item(ex))
        elif isinstance(ex, tuple) and len(ex) == 2 and isinstance(ex[1], str):
            items.append(Item(model.encode(ex[0], ex[1]), ex[0], ex[1]))
        elif all(hasattr(ex, a) for a in ("prompt", "chosen", "rejected")):
            rejected = model.encode(ex.prompt, ex.rejected)
            chosen = model.encode(ex.prompt, ex.chosen)
            items.append(Item(rejected, ex.prompt, ex.rejected, chosen))
        else:
            raise ProbeError(
                f"example {i} is a {type(ex).__name__}; expected an EncodedConversation, a "
                "(prompt, response) tuple of texts, or a preference pair"
            )
    if items and len({it.chosen is None for it in items}) > 1:
        raise ProbeError("mix of preference pairs and single examples; run them separately")
    return items


def _check_probes(probes) -> list[Probe]:
    probes = [probes] if isinstance(probes, Probe) else list(probes)
    if not probes:
        raise ProbeError("no probes given")
    bad = [type(p).__name__ for p in probes if not isinstance(p, Probe)]
    if bad:
        raise ProbeError(f"probes must be Probe objects, got {bad}")
    names = [p.name for p in probes]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ProbeError(f"probe names must be unique; repeated: {dupes}")
    return probes


def _chosen_sides(items: Sequence[Item]) -> list[EncodedConversation]:
    """The chosen side of every item (all are preference pairs: checked by `as_items`)."""
    chosen = [it.chosen for it in items if it.chosen is not None]
    if len(chosen) != len(items):
        raise ProbeError("mix of preference pairs and single examples; run them separately")
    return chosen


def apply_probe(
    model, probe: Probe, item: Item, rng: random.Random, index: int | None = None
) -> EncodedConversation:
    """The perturbed encoding of `item` under `probe`.

    Args:
        model: the `HookedRewardModel`.
        probe: the probe to apply.
        item: the example.
        rng: the seeded random generator of the probe's random choices.
        index: the example's index (named in errors).

    Returns:
        The perturbed `EncodedConversation`.

    Raises:
        ProbeNotApplicableError: the probe does not apply to this example (its `reason` is
            what `report.skipped` lists): the edit raised `ProbeSkip`, changed nothing, or
            left the context or the vocabulary, or the library refused the edit (`refusal`:
            that `RewardLensError`, e.g. the re-encoded text does not fit).
        ProbeFunctionError: any other failure of the edit function, naming the probe and the
            example `index`.

    Examples:
        >>> import random
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.probes import Probe, ProbeNotApplicableError
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> item = as_items(model, [("explain how to bake bread", "the oven")])[0]
        >>> opener = Probe.insert("great question", at="response_start", name="opener")
        >>> edited = apply_probe(model, opener, item, random.Random(0))
        >>> model.tokenizer.convert_ids_to_tokens(list(edited.ids))[-6:]
        ['great', 'question', 'the', 'oven', '<|end|>', '<eos>']
        >>> same = Probe("same", lambda conv: conv.with_response(conv.response))
        >>> try:
        ...     apply_probe(model, same, item, random.Random(0))
        ... except ProbeNotApplicableError as err:
        ...     print(err.reason)
        the edit changes nothing (same token ids)
    """
    conv = Conversation.from_encoded(
        item.enc,
        model.eos_token_id,
        tokenizer=model.tokenizer,
        prompt_text=item.prompt_text,
        response_text=item.response_text,
        encode=model.encode if model.tokenizer is not None else None,
        rng=rng,
    )
    try:
        new = probe.edit(conv)
    except ProbeSkip as skip:
        raise ProbeNotApplicableError(str(skip.reason)) from skip
    except ProbeError as err:  # the probe broke its contract (e.g. returned a string)
        raise ProbeFunctionError.wrap(probe.name, index, err) from err
    except RewardLensError as err:  # a library refusal, e.g. the re-encoded text > n_ctx
        raise ProbeNotApplicableError(f"{type(err).__name__}: {err}", refusal=err) from err
    except Exception as err:  # noqa: BLE001 - a bug in the probe: surfaced, named
        raise ProbeFunctionError.wrap(probe.name, index, err) from err
    check_applies(model, item, new)
    return new


def check_applies(model, item: Item, new: EncodedConversation) -> None:
    """Check that an edited sequence can be scored as a change of `item`.

    Args:
        model: the `HookedRewardModel`.
        item: the original example.
        new: the edited sequence.

    Raises:
        ProbeNotApplicableError: the edited sequence has the same ids, is longer than the
            context, or has ids outside the vocabulary.
    """
    if new.ids == item.enc.ids:
        raise ProbeNotApplicableError("the edit changes nothing (same token ids)")
    if len(new.ids) > model.cfg.n_ctx:
        raise ProbeNotApplicableError(
            f"the edited sequence has {len(new.ids)} tokens, more than n_ctx={model.cfg.n_ctx}"
        )
    if min(new.ids) < 0 or max(new.ids) >= model.cfg.d_vocab:
        raise ProbeNotApplicableError(
            f"the edit produced token ids outside the vocabulary [0, {model.cfg.d_vocab})"
        )


def check_not_all_refused(
    probe: Probe, skips: Sequence[ProbeNotApplicableError], n_items: int
) -> None:
    """Fail a probe that the library refused on every example (other than for length).

    Such a probe is broken, not inapplicable.

    Args:
        probe: the probe.
        skips: the probe's skips.
        n_items: the number of examples.

    Raises:
        ProbeFunctionError: every example was refused (with the first refusal).
    """
    refused = [s.refusal for s in skips if s.refusal is not None]
    if n_items and len(refused) == n_items:
        if not all(isinstance(r, SequenceTooLongError) for r in refused):
            raise ProbeFunctionError.wrap(probe.name, 0, refused[0]) from refused[0]


def run_probes(
    model,
    examples,
    probes,
    *,
    seed: int = 0,
    inside: bool = True,
    objective=None,
    batch_size: int = 32,
    min_n: int = MIN_N,
    min_relative: float = MIN_RELATIVE,
    n_boot: int = N_BOOT,
    confidence: float = CONFIDENCE,
) -> ProbeReport:
    """Apply `probes` to `examples` and report reward deltas per probe.

    The flag rule and the statistics: `reward_lens_tl.probes.outside`. Probes that do
    not apply to an example are listed in `report.skipped` with the reason; a probe whose
    edit function fails raises `reward_lens_tl.errors.ProbeFunctionError`
    (rules: `reward_lens_tl.probes.probe`).

    Args:
        model: the `HookedRewardModel`.
        examples: `EncodedConversation`s, `(prompt, response)` texts, or a `PairSet`
            (the rejected responses are probed; the report then has preference-flip rates
            and the distortion index).
        probes: a `Probe` or a sequence of them (unique names).
        seed: seeds the probes' random choices and the bootstrap.
        inside: `True` adds the cascade (per-layer reward-lens deltas and exact attribution
            of each delta) from the same forward passes.
        objective: picks a head column of a multi-objective model (default: the model's
            reward, e.g. the gated score).
        batch_size: sequences per forward.
        min_n: the fewest examples a probe statistic needs.
        min_relative: the flag rule's smallest mean delta relative to the natural spread.
        n_boot: bootstrap resamples.
        confidence: the confidence level of the intervals.

    Returns:
        The `ProbeReport`.

    Raises:
        ProbeError: no probes, objects that are not probes, or repeated names.
        TooFewExamplesError: fewer than `min_n` examples.
        ProbeFunctionError: a probe's edit function fails.

    Examples:
        The zoo's reward model on 12 conversations of its task, with its four planted-feature
        probes (the labels pay +2.0 for the four filler words `length_padding` appends) and a
        filler swap the labels ignore (it applies to 7 of them, too few for a statistic):

        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.probes import run_probes
        >>> from reward_lens_tl.probes.zoo import zoo_examples, zoo_probes
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> examples = zoo_examples(load_task().task, 12, seed=0, max_words=8)
        >>> report = run_probes(model, examples, zoo_probes()[:5], seed=0)
        >>> report.to_dataframe()[["probe", "n", "n_skipped", "mean_delta", "flagged"]].round(2)
                        probe   n  n_skipped  mean_delta  flagged
        0      length_padding  12          0        2.04     True
        1  sycophantic_opener  12          0        2.58     True
        2        harmful_word  12          0       -2.53     True
        3          topic_word  12          0        2.33     True
        4         filler_swap   7          5         NaN    False

        The inside view: the site of each flagged probe's onset, where the reward token carries
        most of its delta:

        >>> report.cascade.onsets()
        {'length_padding': '1_pre', 'sycophantic_opener': '2_pre', 'harmful_word': 'final',
         'topic_word': 'final'}
    """
    probes = _check_probes(probes)
    items = as_items(model, examples)
    if len(items) < min_n:
        raise TooFewExamplesError(
            f"{len(items)} examples, fewer than the {min_n} a probe statistic needs; add "
            "examples (or lower min_n knowingly)"
        )
    with torch.no_grad():
        base = forward_sequences(
            model, [it.enc for it in items], objective=objective, inside=inside,
            batch_size=batch_size,
        )  # fmt: skip
        chosen = None
        if items[0].chosen is not None:
            chosen = forward_sequences(
                model, _chosen_sides(items), objective=objective, inside=False,
                batch_size=batch_size,
            ).rewards  # fmt: skip
        edited, skipped, applied = [], [], {}
        for probe in probes:
            rows, skips = [], []
            for i, item in enumerate(items):
                rng = random.Random(f"{seed}:{probe.name}:{i}")
                try:
                    edited.append(apply_probe(model, probe, item, rng, index=i))
                except ProbeNotApplicableError as skip:
                    skips.append(skip)
                    skipped.append(Skipped(probe.name, i, skip.reason))
                else:
                    rows.append(i)
            check_not_all_refused(probe, skips, len(items))
            applied[probe.name] = rows
        pert = forward_sequences(
            model, edited, objective=objective, inside=inside, batch_size=batch_size
        ) if edited else None  # fmt: skip
    natural_sd = float(base.rewards.double().std()) if len(items) > 1 else float("nan")
    report_rows, offset, per_probe = [], 0, {}
    for probe in probes:
        idx = applied[probe.name]
        sl = slice(offset, offset + len(idx))
        offset += len(idx)
        delta = np.zeros(0)
        if pert is not None and idx:  # a probe applied somewhere: the perturbed run exists
            delta = (pert.rewards[sl] - base.rewards[idx]).numpy()
        per_probe[probe.name] = (idx, sl)
        report_rows.append(
            _row(probe, idx, delta, natural_sd, chosen, base, pert, sl, seed, min_n,
                 min_relative, n_boot, confidence)
        )  # fmt: skip
    cascade = None
    if inside and pert is not None:
        cascade = build_cascade(probes, per_probe, base, pert, seed=seed, min_n=min_n)
    n_forward = base.n_forward + (pert.n_forward if pert else 0)
    n_forward += 0 if chosen is None else len(items)
    return ProbeReport(
        rows=tuple(report_rows),
        skipped=tuple(skipped),
        n_examples=len(items),
        original_rewards=base.rewards,
        chosen_rewards=chosen,
        natural_sd=natural_sd,
        cascade=cascade,
        n_forward=n_forward,
        settings={"seed": seed, "min_n": min_n, "min_relative": min_relative,
                  "confidence": confidence, "n_boot": n_boot},
    )  # fmt: skip


def _row(probe, idx, delta, natural_sd, chosen, base: Forwarded, pert, sl, seed, min_n,
         min_relative, n_boot, confidence) -> ProbeRow:  # fmt: skip
    flips = None
    if chosen is not None and len(idx):
        flips = flip_share(chosen[idx] - base.rewards[idx], chosen[idx] - pert.rewards[sl])
    try:
        summary = summarize_deltas(
            delta, natural_sd=natural_sd, seed=seed, min_n=min_n, min_relative=min_relative,
            n_boot=n_boot, confidence=confidence,
        )  # fmt: skip
        note = ""
    except TooFewExamplesError as err:
        summary, note = None, str(err)
    return ProbeRow(
        probe=probe.name, kind=probe.kind, example_index=tuple(idx), deltas=delta,
        summary=summary, flip_rate=flips, note=note,
    )  # fmt: skip
