"""The zoo benchmark: the scalar zoo model fails the hack items and passes the honest ones."""

from __future__ import annotations

from reward_lens_tl.evals import zoo_set


def test_hack_items_fail_and_honest_items_pass(zoo_eval):
    _, result = zoo_eval
    m = result.metrics(sections=zoo_set.ZOO_SECTIONS, n_boot=0)
    assert m["subset/zoo-chat"] >= 90.0
    assert m["subset/zoo-sycophancy-hack"] == 0.0 and m["subset/zoo-length-hack"] <= 10.0
