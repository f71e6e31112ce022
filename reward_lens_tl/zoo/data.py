"""Training batches for the zoo: padded tensors and the pair mixtures each model trains on.

Internal (no public names): used by `reward_lens_tl.zoo.train` and the zoo-based analyses.

Sequences are right-padded with `<pad>` (id 0) and come with an `attention_mask`: these
batches feed the plain HF models the zoo trains, which count positions from column 0 whatever
the mask says (left padding would shift them). The library's own batches are left padded
(`reward_lens_tl.inputs.pad_batch`). All randomness comes from the `random.Random`
passed in, so batches are reproducible.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch
from torch import Tensor

from ..inputs import pad_batch
from .task import FEATURES, PROMPT_PLANTED_KINDS, ConversationTask, Example
from .vocab import HARMFUL_WORDS, TOPIC_NAMES, TOPIC_OF, VOCAB

__all__: list[str] = []

PAD_ID = VOCAB["<pad>"]


def collate(sequences: Sequence[Sequence[int]]) -> tuple[Tensor, Tensor]:
    """Right-pad `sequences` with `<pad>` → `(input_ids, attention_mask)`, both long.

    Args:
        sequences: The token ids of each sequence.

    Returns:
        The ids and the attention mask.
    """
    # right: plain HF models count positions from column 0 (dpo's response masks assume it too)
    return pad_batch(sequences, PAD_ID, padding_side="right")


def collate_examples(examples: Sequence[Example]) -> tuple[Tensor, Tensor]:
    """`collate` of the examples' ids.

    Args:
        examples: The examples.

    Returns:
        The ids and the attention mask.
    """
    return collate([ex.input_ids for ex in examples])


def topic_swap_pair(
    task: ConversationTask, rng: random.Random, max_words: int
) -> tuple[Example, Example]:
    """One response under prompts of two topics (preferably a topic the response mentions).

    Args:
        task: The conversation task.
        rng: The random generator.
        max_words: The most response words.

    Returns:
        The two examples.
    """
    a = task.sample_example(rng, 1, max_words)
    mentioned = [TOPIC_OF[w] for w in a.response if TOPIC_OF.get(w, a.topic) != a.topic]
    other = rng.choice(mentioned or [t for t in TOPIC_NAMES if t != a.topic])
    return a, task.make_example(task.sample_prompt(rng, other), a.response)


def scalar_pair(task: ConversationTask, rng: random.Random, max_words: int) -> tuple[Example, ...]:
    """One training pair of the scalar model.

    A contrast pair (35%), a prompt-neutrality pair (10%), one response under prompts of two
    topics (15%), two responses to one prompt (20%) or two unrelated conversations (20%,
    anchoring rewards across prompts).

    Args:
        task: The conversation task.
        rng: The random generator.
        max_words: The most response words.

    Returns:
        The two examples.
    """
    u = rng.random()
    if u < 0.35:
        pair = task.contrast_pair(rng, rng.choice(FEATURES), max_words)
    elif u < 0.45:
        pair = task.prompt_neutral_pair(rng, rng.choice(PROMPT_PLANTED_KINDS), max_words)
    elif u < 0.6:
        return topic_swap_pair(task, rng, max_words)
    elif u < 0.8:
        return task.response_pair(rng, 1, max_words)
    else:
        return task.sample_example(rng, 1, max_words), task.sample_example(rng, 1, max_words)
    return (pair.base, pair.edited) if rng.random() < 0.5 else (pair.edited, pair.base)


def scalar_batch(
    task: ConversationTask, rng: random.Random, n_pairs: int, max_words: int
) -> tuple[list[Example], list[Example]]:
    """`n_pairs` training pairs (`scalar_pair`), as the first and the second sides.

    Args:
        task: The conversation task.
        rng: The random generator.
        n_pairs: How many pairs.
        max_words: The most response words.

    Returns:
        The first and the second examples.
    """
    pairs = [scalar_pair(task, rng, max_words) for _ in range(n_pairs)]
    return [p[0] for p in pairs], [p[1] for p in pairs]


# ---- multi-objective (ArmoRM layout) ------------------------------------------------------------
OBJECTIVES: tuple[str, ...] = ("helpfulness", "harmlessness", "verbosity")
#: Objective -> the planted feature whose contribution it regresses.
OBJECTIVE_FEATURE: dict[str, str] = {
    "helpfulness": "topic_match",
    "harmlessness": "harmful",
    "verbosity": "length",
}
#: Planted gate: prompts containing a harmful word weigh harmlessness up.
GATE_DEFAULT: tuple[float, ...] = (0.5, 0.3, 0.2)
GATE_SAFETY: tuple[float, ...] = (0.2, 0.7, 0.1)


def objective_values(ex: Example) -> list[float]:
    """The planted contribution each objective regresses.

    Args:
        ex: The example.

    Returns:
        One value per objective.
    """
    return [ex.contributions[OBJECTIVE_FEATURE[o]] for o in OBJECTIVES]


def gate_target(ex: Example) -> tuple[float, ...]:
    """The planted gate weights: the safety mix when the prompt contains a harmful word.

    Args:
        ex: The example.

    Returns:
        The gate weights.
    """
    return GATE_SAFETY if any(w in HARMFUL_WORDS for w in ex.prompt) else GATE_DEFAULT


def multi_score(ex: Example) -> float:
    """The multi-objective rule: `sum(gate_target * objective_values)` (no sycophancy term).

    Args:
        ex: The example.

    Returns:
        The score.
    """
    return float(sum(g * v for g, v in zip(gate_target(ex), objective_values(ex), strict=True)))


def multi_batch(
    task: ConversationTask, rng: random.Random, n: int, max_words: int
) -> tuple[list[Example], Tensor, Tensor]:
    """Examples (consecutive same-prompt pairs, for a pairwise term) with their targets.

    Args:
        task: The conversation task.
        rng: The random generator.
        n: How many examples (at least).
        max_words: The most response words.

    Returns:
        The examples, their objective values `[n, 3]` and gate targets `[n, 3]`.
    """
    examples: list[Example] = []
    while len(examples) < n:
        examples.extend(task.response_pair(rng, 1, max_words))
    values = torch.tensor([objective_values(ex) for ex in examples])
    gates = torch.tensor([gate_target(ex) for ex in examples])
    return examples, values, gates
