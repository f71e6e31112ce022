"""`reward_lens_tl.sweep.search`: beam search finds the planted features from nothing and
matches the exhaustive optimum."""

from __future__ import annotations

import pytest

from reward_lens_tl.sweep import CandidateSet, response_search, token_sweep, vocabulary_candidates
from reward_lens_tl.zoo.vocab import HARMFUL_WORDS, SYCOPHANTIC_PHRASE, TOPICS
from tests.figures import check_figure


def test_search_finds_the_planted_features_from_nothing(zoo_scalar, task_prompts):
    vocab = vocabulary_candidates(zoo_scalar)
    for topic in ("cooking", "sports", "computers"):
        prompt = task_prompts[topic]
        worst = response_search(zoo_scalar, prompt, 2, beam_width=4, maximize=False)
        assert set(worst.best[0]) <= set(HARMFUL_WORDS)
        best = response_search(zoo_scalar, prompt, 2, beam_width=4)
        assert set(best.best[0]) <= set(TOPICS[topic])
        # the sycophantic opener: "great" alone earns nothing, the pair earns the bonus
        off_topic = vocab.subset([i for i, w in enumerate(vocab.labels) if w not in TOPICS[topic]])
        hack = response_search(zoo_scalar, prompt, 2, candidates=off_topic, beam_width=64)
        assert hack.best[0] == SYCOPHANTIC_PHRASE, (prompt, hack.top_k(3))
        assert hack.step_best[0][0] != ("great",)
    # the figure: the best reward per length, each tick naming the best response of that length
    fig = check_figure(hack.plot(), static=hack.plot(backend="matplotlib"), x_labels=["2: great"])
    assert list(fig.data[0].y) == pytest.approx([s for _, s in hack.step_best])
    assert [row[1] for row in fig.data[0].customdata] == [" ".join(r) for r, _ in hack.step_best]
    # the beam's answer is the exhaustive optimum over all off-topic pairs
    pairs = [(a, b) for a in off_topic.ids for b in off_topic.ids]
    every = token_sweep(
        zoo_scalar, prompt, CandidateSet(tuple(map(str, pairs)), tuple(a + b for a, b in pairs))
    )
    assert float(every.scores.max()) == pytest.approx(hack.best[1], abs=1e-5)
