"""Non-finite values are caught where they start (issue 23, item 2): a reward that is NaN or
infinite names the first hook point whose output at the reading token is not finite; ``beta``
must be finite; a score CSV with an infinite cell names file, row and column, and the CLI's JSON
never holds the invalid tokens ``NaN``/``Infinity``."""

from __future__ import annotations

import json
import math
import re

import pytest
import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.cli import main
from reward_lens_tl.errors import InvalidArgumentError, RewardLensError
from reward_lens_tl.implicit import ImplicitRewardModel
from reward_lens_tl.model import NonFiniteActivationError
from reward_lens_tl.sweep import kendall_tau_matrix
from reward_lens_tl.sweep.cli import dumps
from reward_lens_tl.sweep.study_stats import distribution_summary
from reward_lens_tl.testing import random_batch, tiny_reward_model

#: Scale of layer 0's MLP up- and down-projections: finite in float32 (the next norm undoes
#: it), beyond float16's 65504 at the MLP's output.
OVERFLOW = 1e3


def overflowing_hf():
    hf = tiny_reward_model("llama")
    with torch.no_grad():
        hf.model.layers[0].mlp.up_proj.weight.mul_(OVERFLOW)
        hf.model.layers[0].mlp.down_proj.weight.mul_(OVERFLOW)
    return hf


def first_non_finite_hook(model, ids, mask) -> tuple[str, int, int, float]:
    """``(hook, row, position, value)``: the first hook point (in the order the forward fires
    them) whose output at some row's reading token is not finite, computed independently of
    the error path (TL's ``run_with_cache``)."""
    pos = model.pool_positions(ids, mask)
    with torch.no_grad():
        _, cache = model.run_with_cache(ids, attention_mask=mask, return_type=None)
    for name, act in cache.items():
        if name.endswith(("hook_attn_scores", "hook_pattern")) or act.ndim < 2:
            continue
        for row in range(ids.shape[0]):
            at = act[row, int(pos[row])]
            if not bool(torch.isfinite(at).all()):
                return name, row, int(pos[row]), float(at[~torch.isfinite(at)].reshape(-1)[0])
    raise AssertionError("the model did not overflow")


def test_float16_overflow_names_the_first_hook_at_the_reading_token():
    ids, mask = random_batch(2, [9, 6])
    fp32 = HookedRewardModel.from_pretrained(overflowing_hf())
    with torch.no_grad():
        assert bool(torch.isfinite(fp32.rewards(ids, mask)).all())  # the weights are fine
    fp16 = HookedRewardModel.from_pretrained(overflowing_hf(), dtype=torch.float16)
    name, row, pos, value = first_non_finite_hook(fp16, ids, mask)
    assert name.startswith("blocks.0.")  # the overflow starts in the scaled MLP
    with torch.no_grad(), pytest.raises(NonFiniteActivationError) as info:
        fp16.rewards(ids, mask)
    message = str(info.value)
    assert f"{name} at row {row}, position {pos} (the reading token) is {value}" in message
    assert "dtype=torch.bfloat16 or torch.float32" in message
    assert re.match(r"the reward of row\(s\) \[0, 1\] is (nan|inf|-inf)", message)
    assert isinstance(info.value, (RewardLensError, ValueError))


def test_a_hook_that_writes_inf_is_named_with_the_hook_and_the_row():
    model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    ids, mask = random_batch(3, [7, 9, 5])

    def poison_row_2(act, hook):
        act = act.clone()
        act[2, -1, 0] = float("inf")
        return act

    calls = []

    def count(act, hook):
        calls.append(hook.name)

    with torch.no_grad():
        with model.hooks([("blocks.0.hook_resid_post", count)]):  # finite: one forward, no rerun
            clean = model.rewards(ids, mask)
        assert calls == ["blocks.0.hook_resid_post"]
        with model.hooks([("blocks.1.hook_resid_mid", poison_row_2)]):
            with pytest.raises(NonFiniteActivationError) as info:
                model.rewards(ids, mask)
        message = str(info.value)
        assert "row(s) [2]" in message
        assert "blocks.1.hook_resid_mid at row 2, position 8 (the reading token) is inf" in message
        assert "a hook attached there edits it" in message
        # the error path left no hook behind; the model is unchanged
        assert all(not hp.fwd_hooks for hp in model.hook_dict.values())
        torch.testing.assert_close(model.rewards(ids, mask), clean)


def test_implicit_beta_must_be_finite_and_positive(zoo_implicit):
    irm = zoo_implicit
    for bad in (float("inf"), float("nan"), -0.1, 0, True, "0.1", None):
        with pytest.raises(InvalidArgumentError, match="finite number > 0"):
            ImplicitRewardModel(irm.policy, irm.reference, beta=bad)
    assert ImplicitRewardModel(irm.policy, irm.reference, beta=0.5).beta == 0.5


def test_implicit_reward_that_is_not_finite_names_the_policy(zoo_implicit):
    irm = zoo_implicit
    ids, attention, resp = irm.batch([irm.encode("how bake bread", "great question soup")])
    finite = irm.rewards(ids, resp, attention)
    assert bool(torch.isfinite(finite).all())

    def inf(act, hook):
        return act * float("inf")

    with pytest.raises(
        NonFiniteActivationError, match="row\\(s\\) \\[0\\].*the policy's log-probs"
    ):
        irm.rewards(ids, resp, attention, fwd_hooks=[("blocks.0.hook_resid_post", inf)])


# -- score CSVs and the CLI's JSON ----------------------------------------------------------
def test_sweep_stats_refuses_an_infinite_cell_naming_file_row_and_column(tmp_path, capsys):
    path = tmp_path / "scores.csv"
    path.write_text("name,m1,m2\nx,1,2\ny,2,inf\nz,3,1\nu,4,3\n")
    assert main(["sweep-stats", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # no JSON at all, let alone "Infinity"
    assert "scores.csv row 3, column 'm2' (candidate 'y') holds inf" in captured.err
    # the library refuses it too: τ would silently drop the row, the mean would be inf
    frame = {"m1": [1.0, 2.0, 3.0], "m2": [2.0, math.inf, 1.0]}
    import pandas as pd

    with pytest.raises(InvalidArgumentError, match="'m2' holds inf for candidate 'b'"):
        kendall_tau_matrix(pd.DataFrame(frame, index=["a", "b", "c"]))
    with pytest.raises(InvalidArgumentError, match="infinite"):
        distribution_summary(pd.Series([1.0, -math.inf], index=["a", "b"]))


def test_cli_json_is_strict():
    text = dumps({"std": float("nan"), "mean": 1.5, "top": [("a", float("inf"))]})
    assert json.loads(text) == {"std": None, "mean": 1.5, "top": [["a", None]]}
    assert "NaN" not in text and "Infinity" not in text
