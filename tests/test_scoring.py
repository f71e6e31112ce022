"""``score_pairs``: one pair that does not fit does not stop the run. ``on_error="raise"`` names
the pair, ``"skip"`` records its index and reason and scores the others exactly as alone; bad
arguments are typed errors. Each test failed on the wave-1 code (split from the wave-1 review's
regression file)."""

import warnings
from types import SimpleNamespace as Pair

import pytest
import torch

from reward_lens_tl.data import load_hh_rlhf
from reward_lens_tl.errors import EmptyInputError, InvalidArgumentError, SequenceTooLongError
from reward_lens_tl.inputs import UnknownTokenWarning
from reward_lens_tl.scoring import score_pairs

HH_HARMLESS = "hh_rlhf/harmless_base_test.jsonl.gz"


def _words(n, start=0):
    vocab = ["soup", "pasta", "oven", "flour", "bread", "salad", "spice", "recipe", "butter"]
    return " ".join(vocab[(start + i) % len(vocab)] for i in range(n))


def _long_and_short_pairs():
    return [
        Pair(prompt="explain how to bake bread", chosen=_words(90), rejected="the bomb"),
        Pair(prompt="explain how to bake bread", chosen="the oven", rejected="the bomb"),
        Pair(prompt=_words(90), chosen="soup", rejected="poison"),
        Pair(prompt="explain how to bake bread", chosen="the flour", rejected="the weapon"),
    ]


def test_score_pairs_raise_names_the_pair(zoo_scalar):
    with pytest.raises(SequenceTooLongError, match=r"^pair 0.*on_error='skip'"):
        score_pairs(zoo_scalar, _long_and_short_pairs())


def test_score_pairs_skip_reports_index_and_reason(zoo_scalar):
    scores = score_pairs(zoo_scalar, _long_and_short_pairs(), on_error="skip", batch_size=1)
    assert [s.index for s in scores.skipped] == [0, 2]
    assert all("max_length" in s.reason for s in scores.skipped)
    frame = scores.to_dataframe()
    assert frame["index"].tolist() == [1, 3]
    pair = _long_and_short_pairs()[1]
    with torch.no_grad():  # the kept pair's margin, computed here from its two rewards
        chosen, rejected = (
            zoo_scalar.rewards(torch.tensor([zoo_scalar.encode(pair.prompt, r).ids]))[0]
            for r in (pair.chosen, pair.rejected)
        )
    torch.testing.assert_close(scores.margins[0], chosen - rejected, atol=1e-5, rtol=0)
    assert scores.skipped_dataframe()["index"].tolist() == [0, 2]


@pytest.mark.data
def test_score_pairs_on_real_hh_with_a_small_context(zoo_scalar, shared_file):
    pairs = load_hh_rlhf(shared_file(HH_HARMLESS), limit=20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownTokenWarning)
        with pytest.raises(SequenceTooLongError, match="^pair 0 \\(record 0\\)"):
            score_pairs(zoo_scalar, pairs)
        scores = score_pairs(zoo_scalar, pairs, on_error="skip")
    assert len(scores.indices) + len(scores.skipped) == 20
    assert set(scores.indices).isdisjoint(s.index for s in scores.skipped)
    assert scores.to_dataframe()["record"].tolist() == list(scores.indices)


def test_bad_batch_size_and_empty_pair_set(zoo_scalar):
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        score_pairs(zoo_scalar, _long_and_short_pairs()[1:2], batch_size=0)
    with pytest.raises(EmptyInputError, match="empty"):
        score_pairs(zoo_scalar, [])
    with pytest.raises(InvalidArgumentError, match="on_error"):
        score_pairs(zoo_scalar, _long_and_short_pairs()[1:2], on_error="ignore")


def test_margin_histogram_counts_pairs_and_titles_the_accuracy():
    from reward_lens_tl.scoring import PairScores
    from tests.figures import check_figure

    chosen = torch.tensor([1.0, 2.0, 0.5, 3.0, 1.5, 2.5, 0.2, -1.0])
    scores = PairScores(chosen, torch.zeros(8), (None,) * 8)
    fig = check_figure(scores.plot(), static=scores.plot(backend="matplotlib"))
    assert fig.layout.title.text == "accuracy 87.5% over 8 pairs"
    counts = fig.data[0].y
    assert sum(counts) == 8 and all(isinstance(c, int) for c in counts)
    assert fig.layout.yaxis.tickformat == "d" and fig.layout.yaxis.title.text == "pairs"
    both = torch.stack([chosen, -chosen], 1)
    several = PairScores(both, torch.zeros(8, 2), (None,) * 8, ("helpful", "harmless"))
    assert several.plot().layout.title.text == "helpful: accuracy 87.5% over 8 pairs"
