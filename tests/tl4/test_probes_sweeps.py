"""The probe suite and the token sweeps on the bridge (`BridgeRewardModel`), unchanged.

Every number is checked against plain HF scoring of each sequence alone (rewards, probe deltas,
sweep scores) and against TransformerLens 3.9's `HookedRewardModel` on the zoo's scalar model.
The TL 3.9 values were recorded with `.venv` (TL 3.9.0) by a script that runs the calls below on
`HookedRewardModel.from_pretrained(zoo_path("scalar"))` and prints each value rounded to 5
decimals (the same script on the bridge in `.venv-tl4` differs by at most 1e-5). Where TL 3.9's
speed path needs its own internals (the sweeps' key/value cache), the bridge declares it lacks
the capability and the plain path runs (`reward_lens_tl.capabilities`); what cannot run is
refused with `BridgeUnsupportedError`. Divergence-aware patching runs through
`reward_lens_tl.patching` on the bridge.
"""

import math
import random

import pytest
import torch
from torch.testing import assert_close

from tests.tl4.tl4_only import skip_unless_tl4

skip_unless_tl4()

from reward_lens_tl import sweep  # noqa: E402
from reward_lens_tl.bridge import BridgeRewardModel  # noqa: E402
from reward_lens_tl.data import PairSet, PreferencePair  # noqa: E402
from reward_lens_tl.errors import BridgeUnsupportedError  # noqa: E402
from reward_lens_tl.inputs import EncodedConversation  # noqa: E402
from reward_lens_tl.probes import run_probes  # noqa: E402
from reward_lens_tl.probes.conflict import reward_term_conflict  # noqa: E402
from reward_lens_tl.probes.divergence import (  # noqa: E402
    divergence_aware_patching,
    natural_states,
)
from reward_lens_tl.probes.runner import apply_probe, as_items  # noqa: E402
from reward_lens_tl.probes.zoo import zoo_examples, zoo_probes  # noqa: E402
from reward_lens_tl.sweep.cached import prefix_scorer  # noqa: E402
from reward_lens_tl.testing import tiny_reward_model, tiny_tokenizer  # noqa: E402
from reward_lens_tl.zoo import load_model, load_task, zoo_path  # noqa: E402

PROMPT = "how bake bread"
WORDS = ["great question", "soup", "the bomb", "a", "bread"]

# TL 3.9 (recorded, see the module docstring). run_probes(model, zoo_examples(task, 12, seed=0,
# max_words=8), zoo_probes()[:5], seed=0): the report's columns and the cascade.
TL39_PROBES = {
    "mean_delta": [2.04308, 2.58259, -2.52762, 2.32823, math.nan],
    "ci_low": [1.98443, 2.04236, -2.58455, 2.0036, math.nan],
    "ci_high": [2.09978, 3.1209, -2.46387, 2.54787, math.nan],
}
TL39_ONSETS = {
    "length_padding": "1_pre",
    "sycophantic_opener": "2_pre",
    "harmful_word": "final",
    "topic_word": "final",
}
TL39_CASCADE_MEAN = {
    "length_padding": [0.0, 3.0816, 1.95458, 2.04308],
    "sycophantic_opener": [0.0, 1.57169, 2.31355, 2.58259],
    "harmful_word": [0.0, -1.66881, -1.6965, -2.52762],
    "topic_word": [0.0, 0.89334, 1.33888, 2.32823],
}
# run_probes on 12 preference pairs (`_pairs`), zoo_probes()[:2], inside=False: distortion().
TL39_DISTORTION = {
    "index": [0.55773, 0.82298],
    "ci_low": [0.41622, 0.52426],
    "ci_high": [1.27027, 2.03841],
    "flip_share": [0.25, 0.33333],
}
# reward_term_conflict(model, task.examples(6, 3) ids, directions=`_directions`).
TL39_CONFLICT_TOP = [("L0H0 (a/b)", 0.06852), ("L1H1 (a/b)", 0.02964), ("L2H1 (a/b)", 0.02772)]
TL39_CONFLICT_VALUES = [
    [-0.84121, -0.15419, -0.81854, -0.37843, -0.63637, -0.38084],
    [-0.878, -1.53749, -0.8278, -0.99377, -0.90294, -1.02886],
]
# token_sweep(model, PROMPT) (TL 3.9: the key/value-cached path): 115 candidates, their mean and
# every twelfth one's score.
TL39_SWEEP_MEAN = -4.34713
TL39_SWEEP = {
    "the": -4.36771,
    "also": -4.37128,
    "explain": -4.3587,
    "soup": -2.29981,
    "wind": -4.4675,
    "league": -4.41035,
    "singer": -4.38251,
    "asteroid": -4.36148,
    "hotel": -4.10367,
    "code": -4.41123,
}
TL39_WORDS = [-1.46573, -2.29981, -6.86461, -4.38466, -2.35272]  # token_sweep(model, PROMPT, WORDS)
# inside_view(model, token_sweep(model, PROMPT, WORDS), k=2)
TL39_INSIDE_TOP = [("L1H2", -0.10332), ("L2H3", -0.10038), ("L2H2", -0.08338), ("L1H3", 0.0758)]
TL39_INSIDE_BASELINE = -3.47351
TL39_INSIDE_LENS = [
    [-1.21576, -1.35663, -0.00045, -1.46573],
    [-1.21576, -1.9497, -1.76946, -2.29981],
    [-1.21576, -3.09607, -4.2566, -6.86461],
    [-1.21576, -1.98605, -2.73142, -4.38466],
]
# natural_states(model, task.examples(20, 11) ids, [HOOK]): shrinkage, calibration[::25].
TL39_NATURAL = (0.01895, [2.6357, 3.5972, 4.1638, 5.0859, 6.5837, 7.6275, 13.1299])
HOOK = "blocks.1.hook_resid_pre"
# divergence_aware_patching(model, ..., natural=task.examples(20, 11) ids): zero-ablating each
# MLP's output of model.encode(PROMPT, "soup oven flour") (distance, percentile), and denoising
# resid_pre on task.contrast_pairs("topic_match", 1, seed=7)[0], by_position=False (distance).
TL39_ZERO_MLP = ([15.1632, 12.3582, 10.9407], [90.0, 87.059, 84.706])
TL39_DENOISE = [15.4277, 10.6242, 10.5846]


@pytest.fixture(scope="module")
def zoo():
    return BridgeRewardModel.boot(zoo_path("scalar"))


@pytest.fixture(scope="module")
def hf():
    return load_model("scalar")


@pytest.fixture(scope="module")
def task():
    return load_task().task


def hf_alone(hf, sequences, column=0):
    """Plain HF: each sequence alone (no padding), read at its last token."""
    with torch.no_grad():
        return torch.stack(
            [hf(input_ids=torch.tensor([list(s)])).logits[0, column] for s in sequences]
        )


def _pairs(task):
    rng, pairs = random.Random(4), []
    for _ in range(12):
        a, b = task.response_pair(rng, 1, 8)
        hi, lo = (a, b) if a.score >= b.score else (b, a)
        prompt = " ".join(a.prompt)
        pairs.append(PreferencePair(prompt, " ".join(hi.response), " ".join(lo.response)))
    return PairSet(pairs)


def _directions(d_model):
    steps = torch.arange(d_model)
    return {"a": torch.cos(steps * 0.7), "b": torch.sin(steps * 1.3)}


def test_probe_report_gives_plain_hf_deltas_and_tl39_numbers(zoo, hf, task):
    examples = zoo_examples(task, 12, seed=0, max_words=8)
    probes = zoo_probes()[:5]
    report = run_probes(zoo, examples, probes, seed=0)
    items = as_items(zoo, examples)
    assert_close(
        report.original_rewards, hf_alone(hf, [it.enc.ids for it in items]), atol=1e-5, rtol=0
    )
    for probe, row in zip(
        probes, report.rows, strict=True
    ):  # each delta: HF(edited) - HF(original)
        edited = [
            apply_probe(zoo, probe, items[i], random.Random(f"0:{probe.name}:{i}")).ids
            for i in row.example_index
        ]
        original = [items[i].enc.ids for i in row.example_index]
        expected = hf_alone(hf, edited) - hf_alone(hf, original)
        assert_close(torch.as_tensor(row.deltas).float(), expected, atol=1e-4, rtol=0)
    frame = report.to_dataframe()
    for column, values in TL39_PROBES.items():
        got = torch.tensor(frame[column].tolist())
        assert_close(got, torch.tensor(values), atol=1e-4, rtol=0, equal_nan=True)
    assert report.cascade.onsets() == TL39_ONSETS
    for cascade in report.cascade.probes:
        got = torch.tensor(cascade.mean.tolist())
        assert_close(got, torch.tensor(TL39_CASCADE_MEAN[cascade.probe]), atol=1e-4, rtol=0)
        assert cascade.completeness_error() < 1e-4  # component deltas + bias = reward delta


def test_distortion_on_pairs_gives_tl39_numbers(zoo, task):
    report = run_probes(zoo, _pairs(task), zoo_probes()[:2], seed=0, inside=False)
    frame = report.distortion().to_dataframe()
    for column, values in TL39_DISTORTION.items():
        assert_close(torch.tensor(frame[column].tolist()), torch.tensor(values), atol=1e-4, rtol=0)


def test_reward_term_conflict_gives_tl39_numbers(zoo, task):
    ids = [e.input_ids for e in task.examples(6, 3)]
    conflict = reward_term_conflict(zoo, ids, directions=_directions(zoo.cfg.d_model))
    assert conflict.completeness_error() < 1e-4
    assert_close(conflict.values, torch.tensor(TL39_CONFLICT_VALUES), atol=1e-4, rtol=0)
    top = conflict.top_k(3)
    assert [k for k, _ in top] == [k for k, _ in TL39_CONFLICT_TOP]
    assert_close(
        torch.tensor([v for _, v in top]),
        torch.tensor([v for _, v in TL39_CONFLICT_TOP]),
        atol=1e-4,
        rtol=0,
    )


def test_token_sweep_scores_each_full_sequence_as_plain_hf(zoo, hf):
    result = sweep.token_sweep(zoo, PROMPT)  # method="cached" asked: no KV cache here
    assert result.method == "exact" and len(result) == 115
    full = [result.encoded(i).ids for i in range(len(result))]
    with torch.no_grad():  # single-token candidates: one length, one unpadded HF batch
        expected = hf(input_ids=torch.tensor(full)).logits[:, 0]
    assert_close(result.scores, expected, atol=1e-5, rtol=0)
    assert result.mean == pytest.approx(TL39_SWEEP_MEAN, abs=1e-4)
    got = torch.tensor([float(result.scores[result.labels.index(k)]) for k in TL39_SWEEP])
    assert_close(got, torch.tensor(list(TL39_SWEEP.values())), atol=1e-4, rtol=0)
    assert torch.equal(sweep.exact_sweep(zoo, PROMPT).scores, result.scores)


def test_word_sweep_and_resume_give_plain_hf_and_tl39_numbers(zoo, hf, tmp_path):
    result = sweep.token_sweep(zoo, PROMPT, WORDS)  # several lengths: a left-padded batch
    expected = hf_alone(hf, [result.encoded(i).ids for i in range(len(WORDS))])
    assert_close(result.scores, expected, atol=1e-5, rtol=0)
    assert_close(result.scores, torch.tensor(TL39_WORDS), atol=1e-4, rtol=0)
    log = tmp_path / "sweep.jsonl"
    first = sweep.token_sweep(zoo, PROMPT, WORDS, chunk_size=2, resume=log)
    assert len(log.read_text().splitlines()) == 1 + 3  # the header and three chunks
    again = sweep.token_sweep(zoo, PROMPT, WORDS, chunk_size=2, resume=log)
    assert torch.equal(again.scores, first.scores)
    assert_close(first.scores, result.scores, atol=1e-6, rtol=0)


def test_inside_view_gives_tl39_numbers(zoo):
    result = sweep.token_sweep(zoo, PROMPT, WORDS)
    view = sweep.inside_view(zoo, result, k=2)
    assert view.candidates == ("great question", "soup", "the bomb", "a")
    assert view.completeness_error() < 1e-4  # sums to reward - baseline mean
    assert view.baseline_reward == pytest.approx(TL39_INSIDE_BASELINE, abs=1e-4)
    assert view.baseline_reward == pytest.approx(result.mean, abs=1e-5)
    top = view.top_k(4)
    assert [k for k, _ in top] == [k for k, _ in TL39_INSIDE_TOP]
    assert_close(
        torch.tensor([v for _, v in top]),
        torch.tensor([v for _, v in TL39_INSIDE_TOP]),
        atol=1e-4,
        rtol=0,
    )
    assert_close(view.lens.values.T, torch.tensor(TL39_INSIDE_LENS), atol=1e-4, rtol=0)


def test_response_search_finds_tl39_responses_with_plain_hf_rewards(zoo, hf):
    worst = sweep.response_search(zoo, PROMPT, 2, beam_width=4, maximize=False)
    assert worst.best[0] == ("weapon", "hurt")  # TL 3.9's
    assert worst.best[1] == pytest.approx(-9.92894, abs=1e-4)
    frame = zoo.encode(PROMPT, "weapon hurt")
    assert worst.best[1] == pytest.approx(float(hf_alone(hf, [frame.ids])[0]), abs=1e-5)
    words = ["great", "question", "the", "bomb", "a"]
    best = sweep.response_search(zoo, PROMPT, 2, candidates=words, beam_width=2)
    assert best.best[0] == ("great", "question")
    assert_close(best.scores, torch.tensor([-1.46573, -3.84571]), atol=1e-4, rtol=0)


def test_natural_states_give_tl39_numbers(zoo, task):
    ids = [e.input_ids for e in task.examples(20, 11)]
    states = natural_states(zoo, ids, [HOOK])[HOOK]
    shrinkage, calibration = TL39_NATURAL
    assert states.shrinkage == pytest.approx(shrinkage, abs=1e-4)
    got = torch.tensor(states.calibration[::25].tolist(), dtype=torch.float32)
    assert_close(got, torch.tensor(calibration), atol=1e-3, rtol=0)


def test_divergence_aware_patching_gives_tl39_numbers(zoo, task):
    natural = [e.input_ids for e in task.examples(20, 11)]
    enc = zoo.encode(PROMPT, "soup oven flour")
    zeroed = divergence_aware_patching(zoo, enc, natural=natural, site="mlp_out", mode="zero")
    distance, percentile = TL39_ZERO_MLP
    assert_close(zeroed.distance, torch.tensor(distance), atol=1e-3, rtol=0)
    assert_close(zeroed.percentile, torch.tensor(percentile), atol=1e-2, rtol=0)
    pair = task.contrast_pairs("topic_match", 1, seed=7)[0]
    clean = EncodedConversation(pair.edited.input_ids, pair.edited.response_start)
    corrupted = EncodedConversation(pair.base.input_ids, pair.base.response_start)
    denoised = divergence_aware_patching(
        zoo, clean, corrupted, natural=natural, site="resid_pre", alignment="exact",
        by_position=False,
    )  # fmt: skip
    assert_close(denoised.distance, torch.tensor(TL39_DENOISE), atol=1e-3, rtol=0)
    assert denoised.ood_share() == 0.0  # patched states are natural clean states


def test_the_key_value_cache_is_refused_with_what_to_use(zoo):
    prefix = zoo.encode(PROMPT, "soup").prompt_ids()
    with pytest.raises(BridgeUnsupportedError, match="ExactScorer"):
        sweep.PrefixCache.build(zoo, prefix)
    assert prefix_scorer(zoo, prefix).method == "exact"  # what token_sweep picks


@pytest.mark.parametrize("family", ["llama", "gpt2", "qwen3"])
def test_multi_objective_head_sweeps_and_conflict_equal_plain_hf(family, tmp_path):
    hf = tiny_reward_model(family, num_labels=3)
    hf.save_pretrained(tmp_path, safe_serialization=True)
    tiny_tokenizer().save_pretrained(tmp_path)
    model = BridgeRewardModel.boot(tmp_path)
    result = sweep.token_sweep(model, "w10 w11", ["w7", "w8 w9", "w20 w21 w22"], objective=1)
    expected = hf_alone(hf, [result.encoded(i).ids for i in range(3)], column=1)
    assert_close(result.scores, expected, atol=1e-5, rtol=0)
    sequences = [(1, 5, 6, 7, 8, 9), (1, 10, 11, 12), (1, 13, 14, 15, 16, 17, 18, 19)]
    conflict = reward_term_conflict(model, sequences)  # the three objectives as terms
    assert conflict.completeness_error() < 1e-4
    alone = torch.stack([hf_alone(hf, sequences, column=c) for c in range(3)])
    assert_close(conflict.values, alone, atol=1e-5, rtol=0)


# The zoo's ArmoRM-style model (`multi`, `GatedBridgeRewardModel` on the bridge), recorded from TL
# 3.9's `HookedArmoRM` as above: token_sweep(model, PROMPT, WORDS, objective=...) for the gated
# score and for "harmlessness"; run_probes(model, zoo_examples(task, 12, seed=0, max_words=8),
# zoo_probes()[:3], seed=0) mean deltas; reward_term_conflict(model, task.examples(6, 3) ids).
TL39_GATED_SWEEP = {
    None: [0.23208, 1.0253, -0.7743, 0.07967, 1.06101],
    "harmlessness": [-0.00034, 0.00906, -3.04656, -0.02894, 0.0129],
}
TL39_GATED_PROBES = [0.34786, 0.1665, -1.2352]
TL39_GATED_CONFLICT = [0.55835, 0.50907, 0.50907]  # top_k(3); the top one is mlp2's


def test_gated_head_sweeps_probes_and_conflict_equal_hf_and_tl39(task):
    hf = load_model("multi").eval()
    model = BridgeRewardModel.boot(zoo_path("multi"))
    for objective, recorded in TL39_GATED_SWEEP.items():
        result = sweep.token_sweep(model, PROMPT, WORDS, objective=objective)
        with torch.no_grad():
            outs = [hf(input_ids=torch.tensor([result.encoded(i).ids])) for i in range(len(WORDS))]
        expected = torch.cat([o.score if objective is None else o.rewards[:, 1] for o in outs])
        assert_close(result.scores, expected.float(), atol=1e-5, rtol=0)
        assert_close(result.scores, torch.tensor(recorded), atol=1e-4, rtol=0)
    report = run_probes(model, zoo_examples(task, 12, seed=0, max_words=8), zoo_probes()[:3])
    got = torch.tensor(report.to_dataframe()["mean_delta"].tolist())
    assert_close(got, torch.tensor(TL39_GATED_PROBES), atol=1e-4, rtol=0)
    assert all(c.completeness_error() < 1e-4 for c in report.cascade.probes)
    conflict = reward_term_conflict(model, [e.input_ids for e in task.examples(6, 3)])
    assert conflict.completeness_error() < 1e-4
    top = conflict.top_k(3)
    assert top[0][0] == "mlp2 (helpfulness/harmlessness)"
    assert_close(
        torch.tensor([v for _, v in top]), torch.tensor(TL39_GATED_CONFLICT), atol=1e-4, rtol=0
    )
