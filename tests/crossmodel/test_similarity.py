"""Similarity measures between models: Kendall's τ of two token sweeps."""

import pandas as pd
import pytest

from reward_lens_tl.crossmodel import (
    sweep_tau,
)
from reward_lens_tl.errors import EmptyInputError
from reward_lens_tl.zoo.vocab import FILLER_WORDS


def test_sweep_tau_of_a_model_with_itself(self_comparison, scalar):
    sweep = pd.Series({tok: float(i % 7) + 0.1 * i for i, tok in enumerate(FILLER_WORDS)})
    cmp = type(self_comparison)(self_comparison.runs, n_boot=50, sweeps={"a": sweep, "b": sweep})
    assert cmp.sweep_tau()["tau"].iloc[0] == pytest.approx(1.0)
    assert cmp.summary()["sweep_tau"].iloc[0] == pytest.approx(1.0)
    reversed_sweep = {k: -v for k, v in sweep.items()}
    assert sweep_tau(sweep, reversed_sweep)["tau"] == pytest.approx(-1.0)
    with pytest.raises(EmptyInputError, match="share 0"):
        sweep_tau({"x": 1.0}, {"y": 2.0})
