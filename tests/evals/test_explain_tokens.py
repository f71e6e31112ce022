"""Failure explanations read each row's own source tokens in a padded batch: the per-token
totals of a failure add up to the heads' share of its margin, whichever side is shorter."""

import re

import pytest

from reward_lens_tl.data import RankedItem
from reward_lens_tl.evals.run import score_items


@pytest.mark.parametrize(
    "chosen, rejected", [("soup", "great question the soup"), ("great question the soup", "rain")]
)
def test_token_totals_add_up_to_the_heads_share_of_the_margin(zoo_scalar, chosen, rejected):
    items = [RankedItem("how bake bread", "soup", (chosen, rejected), id=0)]
    result = score_items(zoo_scalar, items, progress=False)
    failures = result.failures()
    if len(failures.comparisons if hasattr(failures, "comparisons") else failures) == 0:
        pytest.skip("the zoo model ranks this pair right")
    explanation = failures.explain(zoo_scalar, reference=None)
    frame = explanation.margin.to_dataframe()
    label_col = "label" if "label" in frame else frame.columns[0]
    value_col = [c for c in frame.columns if c not in (label_col,)][-1]
    heads = frame[frame[label_col].astype(str).str.fullmatch(r"L\d+H\d+")]
    by_token = sum(t[-1] for t in explanation.token_totals)
    assert by_token == pytest.approx(float(heads[value_col].sum()), abs=1e-4)
    sides = {(t[1], t[3]) for t in explanation.token_totals if t[2] == 0}
    assert {s for s, _ in sides} == {"chosen", "rejected"}
    assert all(re.fullmatch(r"<bos>", tok) for _, tok in sides)  # token 0 is each row's BOS
