"""ProcessBench figures on hand-built samples whose answers are worked out in the comments.

The protocol (QwenLM/ProcessBench, ``code/run_eval.py``): per subset, accuracy on the erroneous
samples (prediction == index of the first wrong step), accuracy on the correct ones
(prediction == -1), and F1 = their harmonic mean; a PRM predicts the first step scored below the
threshold.
"""

from __future__ import annotations

import math

import pytest

from reward_lens_tl.errors import EmptyInputError, InvalidArgumentError, NoExampleAxisError
from reward_lens_tl.evals import (
    first_error_step,
    processbench_from_predictions,
    processbench_from_scores,
)
from tests.figures import check_figure

# sample: (step scores, label, subset); threshold 0.5; the PRM's prediction in the comment
SAMPLES = [
    ([0.9, 0.8, 0.3, 0.9], 2, "gsm8k"),  # predicts 2: right
    ([0.2, 0.9], 0, "gsm8k"),  # predicts 0: right
    ([0.9, 0.95], -1, "gsm8k"),  # predicts -1: right
    ([0.9, 0.4], -1, "gsm8k"),  # predicts 1: wrong (a correct solution flagged)
    ([0.9, 0.7, 0.1], 1, "gsm8k"),  # predicts 2: wrong (the error found a step late)
    ([0.1], 0, "math"),  # predicts 0: right
    ([0.6, 0.45], -1, "math"),  # predicts 1: wrong
]
# gsm8k: erroneous 2 of 3 right, correct 1 of 2; math: erroneous 1 of 1, correct 0 of 1
GSM8K = (100 * 2 / 3, 100 * 1 / 2)
MATH = (100.0, 0.0)


def _f1(a, b):  # the reference's formula
    return 2 * a * b / (a + b)


def _fixture(threshold=0.5):
    scores, labels, subsets = zip(*SAMPLES, strict=True)
    return processbench_from_scores(
        list(scores), list(labels), threshold=threshold, subsets=list(subsets)
    )


def test_prm_threshold_predictions_and_figures():
    result = _fixture()
    assert result.predictions == (2, 0, -1, 1, 2, 0, 1)
    assert result.matches == (True, True, True, False, False, True, False)
    gsm8k = result.figures("gsm8k")
    assert (gsm8k["n_error"], gsm8k["n_correct"]) == (3, 2)
    assert gsm8k["error_accuracy"] == pytest.approx(GSM8K[0])
    assert gsm8k["correct_accuracy"] == pytest.approx(GSM8K[1])
    assert gsm8k["f1"] == pytest.approx(_f1(*GSM8K))  # 57.142857...
    assert gsm8k["f1"] == pytest.approx(400 / 7)
    # one accuracy 0: the harmonic mean is 0
    assert result.figures("math") == {
        "n_error": 1,
        "n_correct": 1,
        "error_accuracy": 100.0,
        "correct_accuracy": 0.0,
        "f1": 0.0,
    }
    assert result.average_f1 == pytest.approx((400 / 7 + 0.0) / 2)
    frame = result.to_dataframe()
    assert frame["subset"].tolist() == ["gsm8k", "math"]
    assert frame["f1"].tolist() == pytest.approx([400 / 7, 0.0])
    assert result.top_k(1) == [("gsm8k", pytest.approx(400 / 7))]
    fig = check_figure(result.plot(), static=result.plot(backend="matplotlib"))
    assert list(fig.layout.yaxis.ticktext) == ["gsm8k", "math"]  # the F1 bars, largest first
    assert fig.data[0].x.tolist() == pytest.approx([400 / 7, 0.0])


def test_the_threshold_is_strict():
    assert first_error_step([0.9, 0.5, 0.49], 0.5) == 2  # 0.5 is not below 0.5
    assert first_error_step([0.5, 0.5], 0.5) == -1
    # a higher threshold flags earlier steps: every gsm8k sample now predicts step 0 or 1
    assert _fixture(threshold=0.95).predictions == (0, 0, 0, 0, 0, 0, 0)


def test_all_right_all_wrong_and_all_correct_samples():
    labels = [2, 0, -1, -1]
    perfect = processbench_from_predictions([2, 0, -1, -1], labels)
    assert perfect.figures("all")["f1"] == 100.0 and perfect.subset_names() == ["all"]
    wrong = processbench_from_predictions([1, -1, 0, None], labels)  # None: no answer
    f = wrong.figures("all")
    assert (f["error_accuracy"], f["correct_accuracy"], f["f1"]) == (0.0, 0.0, 0.0)
    # only correct samples: no erroneous one to be right about, so that accuracy and F1 are NaN
    only_correct = processbench_from_scores([[0.9], [0.2]], [-1, -1], threshold=0.5)
    f = only_correct.figures("all")
    assert f["n_error"] == 0 and f["correct_accuracy"] == 50.0
    assert math.isnan(f["error_accuracy"]) and math.isnan(f["f1"])


def test_direct_predictions_of_a_critic():
    result = processbench_from_predictions(
        [3, None, -1, 0, -1],
        [3, 1, -1, 0, 2],
        subsets=["math", "math", "math", "omnimath", "omnimath"],
    )
    assert result.threshold is None
    math_ = result.figures("math")  # erroneous: 3 right, None wrong; correct: -1 right
    assert (math_["error_accuracy"], math_["correct_accuracy"]) == (50.0, 100.0)
    assert math_["f1"] == pytest.approx(_f1(50.0, 100.0))
    omni = result.figures("omnimath")  # erroneous 1 of 2 right; no correct sample
    assert omni["error_accuracy"] == 50.0 and math.isnan(omni["f1"])
    assert math.isnan(result.average_f1)


def test_figures_are_per_subset_not_per_row():
    with pytest.raises(NoExampleAxisError, match="per subset"):
        _fixture().take([0])


@pytest.mark.parametrize(
    ("steps", "labels", "threshold", "match"),
    [
        ([[0.9, 0.1]], [2], 0.5, r"labels\[0\] is 2, but sample 0 has 2 step scores"),
        ([[0.9], []], [0, -1], 0.5, r"step_scores\[1\] is empty"),
        ([[0.9, math.nan]], [0], 0.5, r"step_scores\[0\]\[1\] must be a finite number"),
        ([[0.9, "x"]], [0], 0.5, r"step_scores\[0\]\[1\]"),
        ([[0.9]], [0, 1], 0.5, "one label per sample"),
        ([[0.9]], [-2], 0.5, r"labels\[0\] must be an int >= -1"),
        ([[0.9]], [True], 0.5, r"labels\[0\]"),
        ([[0.9]], [0], math.nan, "threshold must be finite"),
    ],
)
def test_bad_scores_are_named(steps, labels, threshold, match):
    with pytest.raises(InvalidArgumentError, match=match):
        processbench_from_scores(steps, labels, threshold=threshold)


def test_bad_predictions_are_named():
    with pytest.raises(InvalidArgumentError, match=r"predictions\[1\]"):
        processbench_from_predictions([1, "2"], [1, 2])
    with pytest.raises(InvalidArgumentError, match="one subset name"):
        processbench_from_predictions([1], [1], subsets=["a", "b"])
    with pytest.raises(InvalidArgumentError, match="no subset 'olympiadbench'"):
        _fixture().figures("olympiadbench")


def test_no_samples():
    with pytest.raises(EmptyInputError):
        processbench_from_predictions([], [])
