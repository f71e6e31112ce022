"""Shared by the cross-model tests: the zoo's scalar model, a copy with its harmful words
ablated, the implicit reward model, response pairs, and the scalar model compared with itself.

The zoo fixtures (``zoo_scalar``, ``zoo_implicit``) come from ``tests/conftest.py``.
"""

import copy
import random

import pytest
import torch

from reward_lens_tl.crossmodel import compare_models
from reward_lens_tl.zoo import load_task
from reward_lens_tl.zoo.vocab import FILLER_WORDS, HARMFUL_WORDS, VOCAB

__all__: list[str] = []  # fixtures only


@pytest.fixture(scope="module")
def scalar(zoo_scalar):
    return zoo_scalar


@pytest.fixture(scope="module")
def ablated(scalar):
    """A copy of the scalar model whose harmful words embed like an average filler word."""
    model = copy.deepcopy(scalar)
    with torch.no_grad():
        filler = model.W_E[[VOCAB[w] for w in FILLER_WORDS]].mean(0)
        model.W_E[[VOCAB[w] for w in HARMFUL_WORDS]] = filler
    return model


@pytest.fixture(scope="module")
def irm(zoo_implicit):
    return zoo_implicit


@pytest.fixture(scope="module")
def pairs():
    task, rng = load_task().task, random.Random(11)
    out = []
    while len(out) < 24:
        a, b = task.response_pair(rng, max_words=10)
        if a.score != b.score:
            out.append((a, b) if a.score > b.score else (b, a))
    return out


@pytest.fixture(scope="module")
def self_comparison(scalar, pairs):
    return compare_models({"a": scalar, "b": scalar}, pairs, n_boot=200, batch_size=8)
