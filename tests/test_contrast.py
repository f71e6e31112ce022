"""``ContrastPair`` (``reward_lens_tl.contrast``) built from a user's own texts or ids, and the
ground-truth tools on such pairs: localisation, AtP recall, the observational report and the
causal report, whose default cannot miss a mechanism on the prompt side. Each test failed on
the wave-1 code (split from the wave-1 review's regression file)."""

import random

import pytest

from reward_lens_tl.contrast import ContrastPair
from reward_lens_tl.errors import InvalidArgumentError
from reward_lens_tl.observational import observational_ground_truth
from reward_lens_tl.patching import atp_recall, causal_ground_truth, localization
from reward_lens_tl.zoo.vocab import FILLER_WORDS, TOPICS


def _prompt_side_pairs(model, n=8, seed=0):
    """The prompt's topic word changes; the response (same tokens) only matches the edited
    topic. The lookup's query sits on the response words, not on the edited token."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        t_edit, t_base = rng.sample(sorted(TOPICS), 2)
        response = " ".join(rng.sample(TOPICS[t_edit], 3) + rng.sample(FILLER_WORDS, 2))
        base = model.encode(f"explain {rng.choice(TOPICS[t_base])}", response)
        edited = model.encode(f"explain {rng.choice(TOPICS[t_edit])}", response)
        pairs.append(
            ContrastPair.from_ids(
                base.ids, edited.ids, response_start=edited.response_start, feature="prompt_topic"
            )
        )
    return pairs


def test_contrast_pair_from_texts_and_ids(zoo_scalar):
    pair = ContrastPair.from_texts(
        zoo_scalar,
        "explain how to bake bread",
        "the oven and the flour",
        "the oven and the bomb",
        feature="my_harm",
    )
    assert pair.edited_positions == (pair.response_start + 4,) and pair.same_length
    edited_token = pair.edited.ids[pair.edited_positions[0]]
    assert zoo_scalar.tokenizer.convert_ids_to_tokens([edited_token]) == ["bomb"]
    insert = ContrastPair.from_ids([1, 5, 6, 2], [1, 5, 9, 6, 2], response_start=2)
    assert insert.edited_positions == (2,) and not insert.same_length
    with pytest.raises(InvalidArgumentError, match="at least one edited position"):
        ContrastPair.from_ids([1, 5, 2], [1, 5, 2], response_start=2)
    with pytest.raises(InvalidArgumentError, match="outside"):
        ContrastPair.from_ids([1, 5, 2], [1, 6, 2], response_start=2, edited_positions=[9])


def test_ground_truth_tools_accept_user_pairs(zoo_scalar):
    words = ["oven", "flour", "bread", "soup", "pasta", "salad", "spice", "butter"]
    pairs = [
        ContrastPair.from_texts(
            zoo_scalar,
            "explain how to bake bread",
            f"the {w} and the flour",
            f"the {w} and the {h}",
            feature="my_harm",
        )
        for w in words
        for h in ("bomb", "poison")
    ]
    table = localization(zoo_scalar, pairs)
    assert table.share("planted", "resid_pre 0") == 1.0  # the harmful word is the unit at L0
    rows = atp_recall(zoo_scalar, pairs[:4], sites=("z",))
    assert {r["method"] for r in rows} == {"atp", "atp*"} and all(r["pairs"] == 4 for r in rows)
    report = observational_ground_truth(zoo_scalar, pairs=pairs)
    finding = report["my_harm"]
    assert finding.completeness_error < 1e-4 and finding.mean_margin < -2.0
    assert finding.planted_source_share is not None


def test_causal_ground_truth_default_cannot_miss_a_prompt_side_mechanism(zoo_scalar):
    pairs = _prompt_side_pairs(zoo_scalar)
    assert all(p.edited_positions == (3,) for p in pairs)  # the prompt's topic word
    result = causal_ground_truth(zoo_scalar, pairs=pairs, k=3)
    assert result.head_sets.at == "all"
    assert result.head_sets.shared_set(0.9) is not None  # found with heads at every position
    assert result.head_sets_at_edit is not None and result.head_sets_at_edit.at == "planted"
    assert result.head_sets_at_edit.shared_set(0.9) is None  # nothing at the edited token
