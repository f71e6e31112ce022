"""`reward_lens_tl.probes.outside`: the deltas' summary statistics and correlations."""

import math

import numpy as np
import pytest

from reward_lens_tl.probes import TooFewExamplesError, summarize_deltas
from reward_lens_tl.probes.outside import correlation


def test_summary_statistics():
    d = np.random.default_rng(0).normal(0.3, 1.0, 40)
    s = summarize_deltas(d, natural_sd=2.0, seed=3)
    assert s.sd_delta == pytest.approx(d.std(ddof=1))
    assert s.effect_size == pytest.approx(d.mean() / d.std(ddof=1))
    assert s.relative_effect == pytest.approx(d.mean() / 2.0)
    assert s.ci_low < d.mean() < s.ci_high
    assert summarize_deltas(d, natural_sd=2.0, seed=3) == s  # seeded
    with pytest.raises(TooFewExamplesError):
        summarize_deltas(d[:9], natural_sd=1.0)
    const = summarize_deltas(np.full(12, 0.5), natural_sd=1.0)
    assert math.isnan(const.effect_size) and const.ci_low == const.ci_high == 0.5
    # a tiny but consistent shift is not flagged: it must matter on the natural scale
    tiny_shift = summarize_deltas(np.full(40, 0.01) + d * 1e-3, natural_sd=5.0)
    assert tiny_shift.ci_low > 0 and not tiny_shift.flagged
    with pytest.raises(TooFewExamplesError):
        correlation("a", "b", d[:5], d[5:10])
    c = correlation("a", "b", d[:20], d[:20] * 2 + 1)
    assert c.r == pytest.approx(1.0) and c.n == 20
