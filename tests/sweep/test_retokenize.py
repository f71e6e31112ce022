"""`reward_lens_tl.sweep.retokenize`: the zoo's vocabulary round-trips through decode and encode."""

from __future__ import annotations

from reward_lens_tl.sweep import retokenization_changes, vocabulary_candidates


def test_zoo_vocabulary_round_trips(zoo_scalar):
    report = retokenization_changes(zoo_scalar, "how bake bread", vocabulary_candidates(zoo_scalar))
    assert (report.n, report.n_changed) == (115, 0)
