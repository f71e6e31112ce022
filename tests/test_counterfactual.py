"""Counterfactual edits: exact re-scoring, the search's contract, and planted ground truth."""

from __future__ import annotations

import pytest
import torch

from reward_lens_tl.contrast import as_contrast_pair
from reward_lens_tl.counterfactual import (
    CounterfactualEdit,
    counterfactual_edits,
    random_edit_baseline,
)
from reward_lens_tl.errors import (
    ArgumentTypeError,
    EmptyInputError,
    InvalidArgumentError,
    NoExampleAxisError,
)
from reward_lens_tl.inputs import EncodedConversation
from reward_lens_tl.sweep import PrefixCache
from reward_lens_tl.sweep.candidates import vocabulary_candidates
from reward_lens_tl.zoo.task import prompt_topic
from reward_lens_tl.zoo.vocab import HARMFUL_WORDS
from tests.figures import check_figure

PROMPT = "explain how to bake bread"


def _reward(model, ids) -> float:
    return float(model.rewards(torch.tensor([list(ids)]))[0])


def _pair(task, feature, n, seed=11):
    """Zoo contrast pairs as `(edited, base)`: the side carrying the feature is edited."""
    return [(ex, as_contrast_pair(ex)) for ex in task.contrast_pairs(feature, n, seed=seed)]


def _not_harmful(model):
    harm = set(model.tokenizer.convert_tokens_to_ids(list(HARMFUL_WORDS)))
    return [c[0] for c in vocabulary_candidates(model).ids if c[0] not in harm]


def _check_exact(model, result: CounterfactualEdit, other_ids=None):
    """Every reported number equals `model.rewards` of the ids it names."""
    assert result.reward_before == pytest.approx(_reward(model, result.original.ids), abs=1e-5)
    assert result.reward_after == pytest.approx(_reward(model, result.edited.ids), abs=1e-5)
    # the edited ids are the original with exactly the listed edits applied
    ids = list(result.original.ids)
    for e in result.edits:
        assert result.original.response_start <= e.position < result.original.suffix_start(2)
        assert ids[e.position] == e.old_id
        ids[e.position] = -1 if e.new_id is None else e.new_id
    assert tuple(i for i in ids if i != -1) == result.edited.ids
    assert result.edited.prompt_ids() == result.original.prompt_ids()
    assert result.edited.suffix_ids() == result.original.suffix_ids()
    if other_ids is not None:
        assert result.other_reward == pytest.approx(_reward(model, other_ids), abs=1e-5)


def test_prefix_cache_scores_equal_model_rewards(zoo_scalar):
    enc = zoo_scalar.encode(PROMPT, "the oven and the bomb flour")
    cache = PrefixCache.build(zoo_scalar, enc.prompt_ids())
    conts = [enc.ids[enc.response_start :], (43, 38) + enc.suffix_ids(), enc.suffix_ids()]
    full = [enc.prompt_ids() + c for c in conts]
    got = cache.score(conts)
    want = torch.tensor([_reward(zoo_scalar, f) for f in full])
    assert torch.allclose(got, want, atol=1e-4)


def test_flip_of_either_side_is_exact_and_reverses_the_margin(zoo_scalar):
    chosen = zoo_scalar.encode(PROMPT, "great question the oven and the flour")
    rejected = zoo_scalar.encode(PROMPT, "the oven and the bomb")
    for side, edited, other in (("chosen", chosen, rejected), ("rejected", rejected, chosen)):
        result = counterfactual_edits(zoo_scalar, (chosen, rejected), side=side)
        assert result.original == edited and result.side == side
        _check_exact(zoo_scalar, result, other.ids)
        margin = _reward(zoo_scalar, chosen.ids) - _reward(zoo_scalar, rejected.ids)
        assert result.margin_before == pytest.approx(margin, abs=1e-5)
        assert margin > 0 and result.found and result.flipped and result.margin_after < 0
        # the step rewards re-score every prefix of the edit list
        assert result.step_rewards[-1] == result.reward_after
        frame = result.to_dataframe()
        assert frame["delta"].sum() == pytest.approx(result.reward_after - result.reward_before)


def test_single_response_target_and_not_found(zoo_scalar):
    reply = zoo_scalar.encode(PROMPT, "the oven and the bomb")
    up = counterfactual_edits(zoo_scalar, reply, target=2.0)
    _check_exact(zoo_scalar, up)
    assert up.found and not up.flipped and up.reward_after - up.reward_before >= 2.0
    down = counterfactual_edits(zoo_scalar, reply, target=-1.0, proposer="gradient")
    _check_exact(zoo_scalar, down)
    assert down.found and down.reward_after - down.reward_before <= -1.0
    # unreachable within one edit of the two given candidates: found=False, still exact
    far = counterfactual_edits(zoo_scalar, reply, target=100.0, max_edits=1, substitutes=[7, 8])
    _check_exact(zoo_scalar, far)
    assert not far.found and len(far.edits) == 1
    assert far.reward_after - far.reward_before < 100.0


def test_smallest_size_is_the_first_reaching_size(zoo_scalar):
    """No single edit among the candidates flips when the search needed two (checked by brute
    force with `model.rewards`)."""
    chosen = zoo_scalar.encode(PROMPT, "great question the oven flour")
    rejected = zoo_scalar.encode(PROMPT, "the oven flour")
    subs = [7, 8, 9]  # "the", "a", "and": neutral words, so one edit cannot do it
    result = counterfactual_edits(
        zoo_scalar,
        (chosen, rejected),
        substitutes=subs,
        n_positions=20,
        n_substitutes=3,
        max_edits=6,
    )
    _check_exact(zoo_scalar, result, rejected.ids)
    assert result.found
    other = _reward(zoo_scalar, rejected.ids)
    start, end = chosen.response_start, chosen.suffix_start()
    singles = []
    for p in range(start, end):
        for new in [*subs, None]:
            ids = list(chosen.ids)
            ids[p] = -1 if new is None else new
            singles.append(_reward(zoo_scalar, [i for i in ids if i != -1]))
    assert len(result.edits) > 1  # this pair needs two: and indeed no single edit flips it
    assert min(singles) >= other


def test_inputs_views_and_errors(zoo_scalar, zoo_task):
    ex = zoo_task.contrast_pairs("harmful", 1, seed=3)[0]
    from_example = counterfactual_edits(zoo_scalar, ex)  # ExamplePair: edited plays chosen
    assert from_example.original == as_contrast_pair(ex).edited
    text = counterfactual_edits(zoo_scalar, (PROMPT, "the bomb"), target=1.0)
    assert text.original == zoo_scalar.encode(PROMPT, "the bomb")
    html = counterfactual_edits(zoo_scalar, (PROMPT, "the <b>bomb</b> & oven"), target=1.0).to_html(
        include_script=False
    )
    assert "<b>bomb</b>" not in html and "CircuitsVis.ColoredTokens" in html
    assert "before: reward" in html and "after: reward" in html
    # the before view's tokens are text once (an escaped "&lt;bos&gt;" would show as typed)
    edited_html = from_example.to_html(include_script=False)
    assert "\\u003c\\u2060bos\\u003e" in edited_html  # "<bos>", as JSON in the page
    assert "lt;" not in edited_html
    label = from_example.edits[0].label
    assert from_example.top_k(1)[0][0] == label
    fig = from_example.plot()
    check_figure(
        fig,
        static=from_example.plot(backend="matplotlib"),
        x_labels=[f"[{from_example.edits[0].old_token}→"],
    )
    edited_bars = [w for w in fig.data[0].marker.line.width if w]
    assert len(edited_bars) == len(from_example.edits)
    with pytest.raises(NoExampleAxisError, match="CounterfactualEdit"):
        CounterfactualEdit.concat([])
    pair = (zoo_scalar.encode(PROMPT, "the oven"), zoo_scalar.encode(PROMPT, "the bomb"))
    reply = pair[0]
    for kwargs, error in (
        (dict(side="middle"), InvalidArgumentError),
        (dict(target=1.0), InvalidArgumentError),
        (dict(proposer="magic"), InvalidArgumentError),
        (dict(max_edits=0), InvalidArgumentError),
        (dict(substitutes=[10**6]), InvalidArgumentError),
        (dict(substitutes=[]), EmptyInputError),
    ):
        with pytest.raises(error):
            counterfactual_edits(zoo_scalar, pair, **kwargs)
    with pytest.raises(InvalidArgumentError, match="target"):
        counterfactual_edits(zoo_scalar, reply)
    with pytest.raises(InvalidArgumentError, match="side"):
        counterfactual_edits(zoo_scalar, reply, side="chosen", target=1.0)
    empty = EncodedConversation(
        reply.prompt_ids() + reply.suffix_ids(), reply.response_start, reply.response_start
    )
    with pytest.raises(EmptyInputError, match="no tokens"):
        counterfactual_edits(zoo_scalar, empty, target=1.0)
    with pytest.raises(ArgumentTypeError):
        counterfactual_edits(zoo_scalar, 3.5, target=1.0)


def test_random_baseline_is_exact_and_the_shortest_reaching_prefix(zoo_scalar):
    chosen = zoo_scalar.encode(PROMPT, "great question the oven and the flour")
    rejected = zoo_scalar.encode(PROMPT, "the oven")
    base = random_edit_baseline(zoo_scalar, (chosen, rejected), seed=4)
    _check_exact(zoo_scalar, base, rejected.ids)
    assert (
        base.proposer == "random" and base.n_scored == chosen.suffix_start() - chosen.response_start
    )
    other = _reward(zoo_scalar, rejected.ids)
    reached = [r < other for r in base.step_rewards]
    assert reached[:-1] == [False] * (len(reached) - 1)
    assert base.found == reached[-1]
    again = random_edit_baseline(zoo_scalar, (chosen, rejected), seed=4)
    assert again.edits == base.edits


def test_multi_objective_column_is_exact(zoo_multi):
    reply = zoo_multi.encode(PROMPT, "the oven and the bomb")
    result = counterfactual_edits(zoo_multi, reply, target=2.0, objective="harmlessness")
    col = zoo_multi.objective_names.index("harmlessness")

    def harmless(ids):
        return float(zoo_multi.objective_rewards(torch.tensor([list(ids)]))[0, col])

    assert result.found
    assert result.reward_before == pytest.approx(harmless(reply.ids), abs=1e-5)
    assert result.reward_after == pytest.approx(harmless(result.edited.ids), abs=1e-5)
    assert result.reward_after - result.reward_before >= 2.0
    assert "bomb" in {e.old_token for e in result.edits}  # the harmful word goes
    gated = counterfactual_edits(zoo_multi, reply, target=0.5)
    assert gated.reward_after == pytest.approx(
        float(zoo_multi.rewards(torch.tensor([list(gated.edited.ids)]))[0]), abs=1e-5
    )


def _ground_truth(model, task, feature, n, substitutes):
    rows = []
    for ex, cp in _pair(task, feature, n):
        found = counterfactual_edits(model, (cp.edited, cp.base), substitutes=substitutes)
        rand = random_edit_baseline(model, (cp.edited, cp.base), seed=0, substitutes=substitutes)
        planted = set(ex.edited.feature_positions[feature])
        rows.append(
            {
                "found": found,
                "flipped_by_model": (_reward(model, found.edited.ids) - _reward(model, cp.base.ids))
                * (_reward(model, cp.edited.ids) - _reward(model, cp.base.ids))
                < 0,
                "hit": bool(planted & set(found.positions)),
                "hit_any_planted": bool(
                    set().union(
                        *(set(v) for k, v in ex.edited.feature_positions.items() if k != "length")
                    )
                    & set(found.positions)
                ),
                "size": len(found.edits),
                # a random run that never flips needed more edits than the response has
                "random_size": len(rand.edits) + (not rand.found),
                "rule_flip": (
                    task.rule.score(
                        prompt_topic(ex.edited.prompt),
                        found.tokens_after[found.edited.response_start : found.edited.response_end],
                    )
                    - ex.base.score
                )
                * ex.rule_delta
                < 0,
            }
        )
    return rows


def _mean(rows, key):
    return sum(float(r[key]) for r in rows) / len(rows)


def test_ground_truth_harmful_small(zoo_scalar, zoo_task):
    rows = _ground_truth(zoo_scalar, zoo_task, "harmful", 12, None)
    assert all(r["found"].found and r["flipped_by_model"] for r in rows)
    assert _mean(rows, "hit") >= 0.9
    assert _mean(rows, "size") < _mean(rows, "random_size")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("feature", "key", "rate"),
    [
        ("harmful", "hit", 0.9),
        ("sycophancy", "hit", 0.9),
        ("topic_match", "hit_any_planted", 0.9),
        ("length", None, None),
    ],
)
def test_ground_truth_planted_positions(zoo_scalar, zoo_task, feature, key, rate):
    """50 contrast pairs per feature, the side with the feature edited; measured rates in
    /tmp notes: harmful and sycophancy edits hit the feature's tokens, topic_match edits hit a
    planted token (its own, or the sycophancy phrase both sides share: breaking it also flips
    the pair by the rule); length has no single planted word (every word carries it)."""
    subs = None if feature == "harmful" else _not_harmful(zoo_scalar)
    rows = _ground_truth(zoo_scalar, zoo_task, feature, 50, subs)
    assert all(r["found"].found and r["flipped_by_model"] for r in rows)
    if key is not None:
        assert _mean(rows, key) >= rate, _mean(rows, key)
    assert _mean(rows, "size") < _mean(rows, "random_size") - 2
    assert _mean(rows, "rule_flip") >= 0.6  # measured 0.72-0.88 (the rest: rule ties)
