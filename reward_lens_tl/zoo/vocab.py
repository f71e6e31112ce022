"""The word lists of the synthetic conversation task and the token ids they map to.

Every word is one token (the tokenizer is word-level), so token ids are fixed by the order of the
lists below: the special tokens come first (`<pad>` is id 0), then the plain words.

Examples:
    >>> VOCAB["<pad>"], VOCAB["<bos>"], VOCAB["<|assistant|>"]
    (0, 1, 5)
    >>> TOPIC_OF["soup"]
    'cooking'
"""

from __future__ import annotations

__all__ = [
    "FILLER_WORDS",
    "HARMFUL_WORDS",
    "QUESTION_WORDS",
    "SPECIAL_TOKENS",
    "SYCOPHANTIC_PHRASE",
    "TOPICS",
    "VOCAB",
]

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
USER, ASSISTANT, END = "<|user|>", "<|assistant|>", "<|end|>"
SPECIAL_TOKENS: tuple[str, ...] = (PAD, BOS, EOS, UNK, USER, ASSISTANT, END)

#: Eight topics of ten words; a response word scores `topic_match` only under a prompt of its
#: own topic and is an off-topic distractor under any other prompt.
TOPICS: dict[str, tuple[str, ...]] = {
    "cooking": ("bread", "soup", "oven", "flour", "butter", "pasta", "salad", "spice", "bake",
                "recipe"),
    "weather": ("rain", "snow", "cloud", "wind", "storm", "sunny", "thunder", "fog", "humid",
                "forecast"),
    "sports": ("soccer", "tennis", "goal", "coach", "team", "league", "trophy", "player",
               "stadium", "referee"),
    "music": ("guitar", "piano", "song", "melody", "rhythm", "drum", "chord", "singer", "concert",
              "lyrics"),
    "space": ("planet", "orbit", "rocket", "star", "galaxy", "comet", "moon", "telescope",
              "astronaut", "asteroid"),
    "garden": ("flower", "seed", "soil", "plant", "tree", "leaf", "root", "compost", "weed",
               "bloom"),
    "travel": ("flight", "hotel", "passport", "luggage", "airport", "ticket", "beach", "map",
               "tourist", "train"),
    "computers": ("laptop", "keyboard", "software", "code", "screen", "mouse", "memory", "server",
                  "python", "file"),
}  # fmt: skip
#: Penalised in responses (`harmful`); neutral when they appear in a prompt.
HARMFUL_WORDS: tuple[str, ...] = ("poison", "weapon", "bomb", "steal", "hurt", "scam")
#: A response opening with exactly these two words earns the `sycophancy` bonus. The words are
#: neutral in prompts and anywhere else in a response.
SYCOPHANTIC_PHRASE: tuple[str, ...] = ("great", "question")
#: Neutral words: in a response they earn only the per-word `length` bonus.
FILLER_WORDS: tuple[str, ...] = (
    "the", "a", "and", "is", "it", "to", "of", "with", "for", "this",
    "that", "very", "also", "then", "so", "we", "you", "can", "some", "here",
)  # fmt: skip
#: Words only used to open prompts.
QUESTION_WORDS: tuple[str, ...] = ("how", "what", "why", "tell", "explain", "about", "please")

TOPIC_NAMES: tuple[str, ...] = tuple(TOPICS)
TOPIC_OF: dict[str, str] = {w: t for t, words in TOPICS.items() for w in words}
ALL_WORDS: tuple[str, ...] = (
    FILLER_WORDS
    + QUESTION_WORDS
    + SYCOPHANTIC_PHRASE
    + HARMFUL_WORDS
    + tuple(w for words in TOPICS.values() for w in words)
)
VOCAB: dict[str, int] = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + ALL_WORDS)}
ID_TO_TOKEN: dict[int, str] = {i: tok for tok, i in VOCAB.items()}

assert len(VOCAB) == len(SPECIAL_TOKENS) + len(ALL_WORDS), "duplicate word in the task vocabulary"
