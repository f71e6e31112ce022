"""The reward as the response unfolds: every prefix's reward against scoring it on its own.

Ground truth: each prefix `prompt + response[:t] + suffix` re-scored by `model.rewards` alone
(exactness, ≤ 1e-4, on the zoo scalar and multi models, a PRM and tiny Llama / GPT-2 / Gemma-2),
the planted rule of the zoo (harmful −3, on-topic +2, every word +0.5), and a PRM's own per-step
outputs (`prm.rewards`).
"""

from __future__ import annotations

import statistics

import pytest
import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.errors import EmptyInputError, InvalidArgumentError
from reward_lens_tl.inputs import EncodedConversation
from reward_lens_tl.testing import tiny_reward_model
from reward_lens_tl.token_view import token_attribution
from reward_lens_tl.unfolding import RewardCurve, reward_unfolding
from reward_lens_tl.zoo import zoo_path
from tests.figures import check_figure

PAIR = ("explain how to bake bread", "the bomb oven flour very great")


def prefix_rows(enc: EncodedConversation, eos: int | None) -> list[tuple[int, ...]]:
    p, e = enc.response_start, enc.suffix_start(eos)
    return [enc.ids[: p + t] + enc.ids[e:] for t in range(e - p + 1)]


def alone(model, rows, column=None) -> torch.Tensor:
    """Each row scored on its own (no padding, no cache): the ground truth."""
    out = []
    for row in rows:
        ids = torch.tensor([row])
        if column is None:
            out.append(float(model.pooled_rewards(ids)[0]))
        else:
            out.append(float(model.objective_rewards(ids)[0, column]))
    return torch.tensor(out)


@pytest.fixture(scope="module")
def prm():
    from reward_lens_tl.judges import HookedPRM

    return HookedPRM.from_pretrained(zoo_path("prm"))


def test_every_prefix_equals_scoring_it_alone_on_the_zoo(zoo_scalar):
    enc = zoo_scalar.encode(*PAIR)
    curve = reward_unfolding(zoo_scalar, enc, batch_size=3)  # chunks of 3 rows
    truth = alone(zoo_scalar, prefix_rows(enc, zoo_scalar.eos_token_id))
    assert curve.method == "cached" and len(curve.prefix_rewards) == 7
    assert (curve.prefix_rewards - truth).abs().max() < 1e-4
    full = float(zoo_scalar.rewards(torch.tensor([enc.ids]))[0])
    assert abs(curve.reward - full) < 1e-4 and curve.reward == float(curve.prefix_rewards[-1])
    # the attribution beside it is token_attribution's, slot t holding token p - 1 + t
    view = token_attribution(zoo_scalar, enc)
    p = enc.response_start
    assert torch.allclose(curve.attribution, view.values[p - 1 : p + 6], atol=1e-6)
    assert curve.token_view is not None and abs(curve.token_view.reward - full) < 1e-4
    assert curve.tokens == ("<|assistant|>", "the", "bomb", "oven", "flour", "very", "great")
    # reading positions: the last token of each prefix (its <eos>)
    assert curve.reading_positions.tolist() == [len(r) - 1 for r in prefix_rows(enc, 2)]
    naive = reward_unfolding(zoo_scalar, enc, attribution=False, method="naive")
    assert naive.method == "naive" and (naive.prefix_rewards - truth).abs().max() < 1e-4
    assert naive.reading_positions.tolist() == curve.reading_positions.tolist()


def test_input_forms_agree(zoo_scalar):
    enc = zoo_scalar.encode(*PAIR)
    by_text = reward_unfolding(zoo_scalar, PAIR, attribution=False)
    by_ids = reward_unfolding(zoo_scalar, (torch.tensor([enc.ids]), enc.response_start))
    # ids without spans: only a trailing EOS closes them, so <|end|> is a response token
    assert by_ids.tokens == (*by_text.tokens, "<|end|>")
    assert by_ids.reward == pytest.approx(by_text.reward, abs=1e-5)
    spans = EncodedConversation(enc.ids, enc.response_start, response_end=len(enc) - 2)
    assert torch.equal(reward_unfolding(zoo_scalar, spans).prefix_rewards, by_text.prefix_rewards)
    jumps = by_text.jumps()
    assert torch.allclose(jumps, by_text.prefix_rewards[1:] - by_text.prefix_rewards[:-1])
    top = by_text.top_k(6)
    assert [abs(v) for _, v in top] == sorted((abs(v) for v in jumps.tolist()), reverse=True)
    assert min(top, key=lambda lv: lv[1])[0] == "10:bomb"  # the harmful word: the only fall
    frame = by_text.to_dataframe()
    assert len(frame) == 7 and frame["jump"].iloc[2] == pytest.approx(float(jumps[1]))
    assert frame["prefix_reward"].tolist() == pytest.approx(by_text.prefix_rewards.tolist())


@pytest.mark.parametrize("objective", [None, "harmlessness", 2])
def test_multi_objective_and_gated_score(zoo_multi, objective):
    enc = zoo_multi.encode(*PAIR)
    curve = reward_unfolding(zoo_multi, enc, objective=objective, attribution=objective is None)
    column = None if objective is None else (1 if objective == "harmlessness" else 2)
    truth = alone(zoo_multi, prefix_rows(enc, zoo_multi.eos_token_id), column)
    assert (curve.prefix_rewards - truth).abs().max() < 1e-4
    assert curve.objective == (None if objective is None else zoo_multi.objective_names[column])


@pytest.mark.parametrize(
    ("family", "overrides"),
    [("llama", {}), ("gpt2", {}), ("gemma2", {}), ("gpt2", {"pad_token_id": 2})],
)
def test_tiny_families_exact(family, overrides):
    """Rotary (Llama), absolute positions (GPT-2), soft-capped sliding-window attention (Gemma-2:
    TL's own attention path) and a pooling rule that reads inside the cached part (GPT-2 with
    pad = EOS reads the token before the first pad)."""
    model = HookedRewardModel.from_pretrained(tiny_reward_model(family, **overrides))
    ids = (1, *range(5, 27), model.eos_token_id)
    enc = EncodedConversation(ids=ids, response_start=6)
    curve = reward_unfolding(model, enc, attribution=False, batch_size=5)
    truth = alone(model, prefix_rows(enc, model.eos_token_id))
    assert (curve.prefix_rewards - truth).abs().max() < 1e-4
    if overrides:  # read before the closing EOS: inside the cache
        assert curve.reading_positions.tolist() == [len(r) - 2 for r in prefix_rows(enc, 2)]


def test_hooked_model_takes_the_naive_path_and_honours_the_hook(zoo_scalar):
    enc = zoo_scalar.encode(*PAIR)

    def double(act, hook):
        return act * 2

    name = "blocks.1.hook_mlp_out"
    with zoo_scalar.hooks(fwd_hooks=[(name, double)]):
        curve = reward_unfolding(zoo_scalar, enc, attribution=False)
        truth = alone(zoo_scalar, prefix_rows(enc, zoo_scalar.eos_token_id))
    plain = reward_unfolding(zoo_scalar, enc, attribution=False)
    assert curve.method == "naive" and (curve.prefix_rewards - truth).abs().max() < 1e-4
    assert (curve.prefix_rewards - plain.prefix_rewards).abs().max() > 0.1


def test_prm_step_rewards_are_the_prms_own(prm):
    from reward_lens_tl.zoo import prm_examples

    for ex in prm_examples(4, seed=2):
        enc = prm.encode(ex.prompt, " ".join(f"{s} ки" for s in ex.steps))
        curve = reward_unfolding(prm, enc)
        own = prm.rewards(torch.tensor([enc.ids]))[0]
        assert curve.step_rewards is not None and curve.step_margins is not None
        assert len(curve.step_positions) == len(ex.steps)
        assert torch.allclose(curve.step_rewards, own, atol=1e-5)
        # each step's margin lies on the curve: the prefix that ends just before its tag
        assert torch.allclose(
            curve.prefix_rewards[curve.step_slots()], curve.step_margins, atol=1e-4
        )
        truth = alone(prm, prefix_rows(enc, None))
        assert (curve.prefix_rewards - truth).abs().max() < 1e-4
        naive = reward_unfolding(prm, enc, attribution=False, method="naive")
        assert naive.step_rewards is not None
        assert torch.allclose(naive.step_rewards, own, atol=1e-5)
        # a planted wrong step: its closing margin is negative
        for k, right in enumerate(ex.step_labels):
            if not right and not ex.shortcut[k]:
                assert float(curve.step_margins[k]) < 0


def test_planted_jumps_on_zoo_examples(zoo_scalar, zoo_task):
    """On 60 zoo conversations the jump at each word is its planted rule value.

    harmful −3 + 0.5, on-topic +2 + 0.5, filler +0.5 (measured medians −2.47, +2.49, +0.50), the
    largest fall of every response with a harmful word is on one, and the largest rise of every
    response with an on-topic word (and no harmful word or sycophantic opener) is on one.
    """
    jumps: dict[str, list[float]] = {"harmful": [], "topic_match": [], "filler": []}
    with_harm = hits = plain = rises = 0
    for ex in zoo_task.examples(60, seed=7):
        n = len(ex.input_ids)
        enc = EncodedConversation(ex.input_ids, ex.response_start, response_end=n - 2)
        step = reward_unfolding(zoo_scalar, enc, attribution=False).jumps()
        harm = set(ex.feature_positions.get("harmful", ()))
        topic = set(ex.feature_positions.get("topic_match", ()))
        other = set(ex.feature_positions.get("sycophancy", ()))
        for i, value in enumerate(step.tolist()):
            q = ex.response_start + i
            kind = "harmful" if q in harm else "topic_match" if q in topic else None
            if kind is None and q not in other:
                kind = "filler"
            if kind is not None:
                jumps[kind].append(value)
        if harm:
            with_harm += 1
            hits += (ex.response_start + int(step.argmin())) in harm
        elif topic and not other:
            plain += 1
            rises += (ex.response_start + int(step.argmax())) in topic
    assert with_harm >= 10 and hits == with_harm  # measured 18 / 18
    assert plain >= 10 and rises == plain  # on-topic, no harmful word, no opener: 22 / 22
    assert statistics.median(jumps["harmful"]) == pytest.approx(-2.5, abs=0.15)
    assert statistics.median(jumps["topic_match"]) == pytest.approx(2.5, abs=0.15)
    assert statistics.median(jumps["filler"]) == pytest.approx(0.5, abs=0.1)
    assert max(jumps["harmful"]) < 0 < min(jumps["topic_match"])


def test_figure(zoo_scalar, prm):
    curve = reward_unfolding(zoo_scalar, PAIR)
    fig = check_figure(
        curve.plot(), static=curve.plot(backend="matplotlib"), x_labels=["bomb", "oven"]
    )
    kinds = [t.type for t in fig.data]
    assert kinds == ["bar", "scatter"]
    assert list(fig.data[1].y) == pytest.approx(curve.prefix_rewards.tolist())
    assert list(fig.data[0].y) == pytest.approx(curve.attribution.tolist())
    from reward_lens_tl.zoo import prm_examples

    ex = prm_examples(1, seed=2)[0]
    steps = reward_unfolding(prm, (ex.prompt, " ".join(f"{s} ки" for s in ex.steps)))
    fig = check_figure(steps.plot(), static=steps.plot(backend="matplotlib"))
    assert list(fig.data[2].y) == pytest.approx(steps.step_margins.tolist())


def test_bad_input_says_what_to_do(zoo_scalar):
    with pytest.raises(InvalidArgumentError, match="method"):
        reward_unfolding(zoo_scalar, PAIR, method="fast")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        reward_unfolding(zoo_scalar, PAIR, batch_size=0)
    with pytest.raises(InvalidArgumentError, match="EncodedConversation"):
        reward_unfolding(zoo_scalar, [1, 2, 3])  # type: ignore[arg-type]
    with pytest.raises(EmptyInputError, match="no token"):
        reward_unfolding(zoo_scalar, EncodedConversation((5, 6), 0, response_end=2))
    enc = zoo_scalar.encode(*PAIR)
    before = enc.ids
    reward_unfolding(zoo_scalar, enc, attribution=False)
    assert enc.ids == before


def test_result_round_trip(zoo_scalar):
    curve = reward_unfolding(zoo_scalar, PAIR, attribution=False)
    assert isinstance(curve, RewardCurve) and curve.attribution is None
    assert "attribution" in curve.to_dataframe() and curve.to_html()


def test_gate_read_inside_the_response(zoo_multi):
    """The gate is read at the last assistant header: a response holding one moves it for the
    prefixes that contain it (read from the cached run), not for the shorter ones."""
    enc = zoo_multi.encode(*PAIR)
    p, header = enc.response_start, tuple(zoo_multi.gating_token_pattern)
    ids = enc.ids[: p + 1] + header + enc.ids[p + 1 :]
    moved = EncodedConversation(ids, p, response_end=len(ids) - 2)
    curve = reward_unfolding(zoo_multi, moved, attribution=False)
    truth = alone(zoo_multi, prefix_rows(moved, zoo_multi.eos_token_id))
    assert (curve.prefix_rewards - truth).abs().max() < 1e-4
    gates = [int(zoo_multi.gate_positions(torch.tensor([r]))[0]) for r in prefix_rows(moved, 2)]
    assert len(set(gates)) == 2  # the gate position does move along the curve


def test_report_section_shows_the_pair_the_model_separates_most(zoo_scalar):
    from reward_lens_tl.data import PreferencePair
    from reward_lens_tl.report.unfolding import unfolding_section

    pairs = [
        PreferencePair("how bake bread", chosen="oven", rejected="soup"),
        PreferencePair("how bake bread", chosen="oven flour", rejected="the bomb"),
    ]
    chosen = [float(zoo_scalar.score(p.prompt, p.chosen)) for p in pairs]
    rejected = [float(zoo_scalar.score(p.prompt, p.rejected)) for p in pairs]
    numbers = {"chosen": chosen, "rejected": rejected}
    ctx = {"model": zoo_scalar, "pairs": pairs, "numbers": numbers, "kept": [0, 1]}
    section = unfolding_section(ctx)
    assert section is not None and [p["kind"] for p in section.parts].count("figure") == 2
    got = ctx["numbers"]["unfolding"]
    assert got["pair"] == 1  # the larger margin
    assert got["rejected"]["largest_fall"] == "bomb"
    assert got["chosen"]["reward"] == pytest.approx(chosen[1], abs=1e-4)
    assert unfolding_section({"model": zoo_scalar, "pairs": [], "numbers": {}}) is None
