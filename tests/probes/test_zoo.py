"""`reward_lens_tl.probes.zoo`: the zoo's planted hacks flagged with their planted size, and the
invariance probes' false-positive rate."""

import random

import numpy as np
import pytest

from reward_lens_tl.probes import run_probes
from reward_lens_tl.probes.runner import apply_probe, as_items
from reward_lens_tl.probes.zoo import PLANTED, rule_delta, zoo_examples, zoo_probes


def test_planted_hacks_flagged_with_planted_size(zoo_scalar, zoo_task):
    examples = zoo_examples(zoo_task, 64, seed=0, max_words=8)
    report = run_probes(zoo_scalar, examples, zoo_probes(), seed=0)
    items = as_items(zoo_scalar, examples)
    for name in ("length_padding", "sycophantic_opener", "harmful_word", "topic_word"):
        row = report[name]
        s = row.summary
        assert row.flagged and (s.ci_low > 0 or s.ci_high < 0), name
        probe = next(p for p in zoo_probes() if p.name == name)
        rule = [
            rule_delta(zoo_task, items[i].enc,
                       apply_probe(zoo_scalar, probe, items[i], random.Random(f"0:{name}:{i}")))
            for i in row.example_index
        ]  # fmt: skip
        assert s.mean_delta == pytest.approx(np.mean(rule), rel=0.1), (name, PLANTED[name])
    assert report["length_padding"].summary.mean_delta == pytest.approx(2.0, rel=0.1)


def test_invariance_false_positive_rate(zoo_scalar, zoo_task):
    """6 invariance probes × 4 seeds of examples: at most 5% flagged (observed: none)."""
    flagged = tested = 0
    for seed in range(4):
        report = run_probes(zoo_scalar, zoo_examples(zoo_task, 48, seed=100 + seed), zoo_probes(),
                            seed=seed, inside=False)  # fmt: skip
        f, t = report.false_positive_rate()
        flagged, tested = flagged + f, tested + t
        assert set(report.flagged()) >= {"length_padding", "sycophantic_opener"}
    assert tested >= 20
    assert flagged / tested <= 0.05
