"""The causal-LM pair of the zoo: a reference LM and a DPO policy tuned to a reward model.

Internal (no public names): used by `reward_lens_tl.zoo.train` for the policy and reference.

- `reference`: a `LlamaForCausalLM` fine-tuned on task conversations (loss on the response
  tokens, i.e. the response words, the closing `<|end|>` and `<eos>`);
- `policy`: the reference tuned by DPO on response pairs labelled by the scalar reward model, so
  its implicit reward `beta * (log pi(y|x) - log ref(y|x))` inherits the planted features.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import LlamaConfig, LlamaForCausalLM

from .data import collate, collate_examples
from .loop import ModelShape, TrainConfig, train_model
from .task import ConversationTask, Example, conversation_tokens
from .vocab import END, EOS, ID_TO_TOKEN, SPECIAL_TOKENS, VOCAB

__all__: list[str] = []

LM_SHAPE = ModelShape(num_hidden_layers=2)
REFERENCE_TRAIN = TrainConfig(curriculum=((12, 600),), batch=64, lr=3e-3, warmup=50)
POLICY_TRAIN = TrainConfig(curriculum=((12, 300),), batch=32, lr=5e-4, warmup=20)
DPO_BETA = 0.1


def lm_config(shape: ModelShape = LM_SHAPE) -> LlamaConfig:
    """The causal LMs' `LlamaConfig` (tied embeddings).

    Args:
        shape: The model's shape.

    Returns:
        The configuration.
    """
    cfg = LlamaConfig(**{**shape.llama_kwargs(), "tie_word_embeddings": True})
    cfg.architectures = ["LlamaForCausalLM"]
    return cfg


def response_mask(examples: Sequence[Example], width: int) -> Tensor:
    """1 on each example's response tokens (response words, `<|end|>`, `<eos>`).

    Args:
        examples: The examples.
        width: The padded width.

    Returns:
        The mask, `[example, width]`.
    """
    mask = torch.zeros((len(examples), width))
    for row, ex in enumerate(examples):
        mask[row, ex.response_start : len(ex.input_ids)] = 1.0
    return mask


def sequence_logprobs(model: nn.Module, examples: Sequence[Example]) -> Tensor:
    """`log p(response | prompt)` summed over the response tokens, one value per example.

    Args:
        model: The causal LM.
        examples: The examples.

    Returns:
        The log-probabilities.
    """
    ids, mask = collate_examples(examples)
    logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1]
    token_logp = logits.log_softmax(-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    return (token_logp * response_mask(examples, ids.shape[1])[:, 1:]).sum(-1)


def dpo_loss(
    pi_chosen: Tensor, pi_rejected: Tensor, ref_chosen: Tensor, ref_rejected: Tensor, beta: float
) -> Tensor:
    """`-log sigmoid(beta * ((pi_c - ref_c) - (pi_r - ref_r)))`, averaged.

    Args:
        pi_chosen: The policy's log-probs of the chosen responses.
        pi_rejected: The policy's log-probs of the rejected responses.
        ref_chosen: The reference's log-probs of the chosen responses.
        ref_rejected: The reference's log-probs of the rejected responses.
        beta: The DPO temperature.

    Returns:
        The mean loss.
    """
    margin = (pi_chosen - ref_chosen) - (pi_rejected - ref_rejected)
    return -F.logsigmoid(beta * margin).mean()


def train_reference(
    task: ConversationTask, seed: int = 0, cfg: TrainConfig = REFERENCE_TRAIN
) -> tuple[LlamaForCausalLM, list[float]]:
    """Supervised fine-tuning on sampled task conversations.

    Args:
        task: The conversation task.
        seed: The random seed.
        cfg: The training configuration.

    Returns:
        The reference LM and its per-step losses.
    """

    def loss(model: LlamaForCausalLM, rng: random.Random, max_words: int) -> Tensor:
        examples = [task.sample_example(rng, 1, max_words) for _ in range(cfg.batch)]
        n_tokens = sum(len(ex.input_ids) - ex.response_start for ex in examples)
        return -sequence_logprobs(model, examples).sum() / n_tokens

    return train_model("reference", seed, cfg, lambda: LlamaForCausalLM(lm_config()), loss)


@torch.no_grad()
def scalar_rewards(scalar: nn.Module, examples: Sequence[Example]) -> Tensor:
    """The scalar reward model's rewards of `examples`.

    Args:
        scalar: The scalar reward model.
        examples: The examples.

    Returns:
        One reward per example.
    """
    ids, mask = collate_examples(examples)
    return scalar(input_ids=ids, attention_mask=mask).logits.squeeze(-1)


def preference_pairs(
    task: ConversationTask, scalar: nn.Module, rng: random.Random, n: int, max_words: int = 12
) -> tuple[list[Example], list[Example]]:
    """`n` same-prompt response pairs ordered `(chosen, rejected)` by the scalar model.

    Args:
        task: The conversation task.
        scalar: The scalar reward model.
        rng: The random generator.
        n: How many pairs.
        max_words: The most response words.

    Returns:
        The chosen and the rejected examples.
    """
    pairs = [task.response_pair(rng, 1, max_words) for _ in range(n)]
    r = scalar_rewards(scalar, [ex for p in pairs for ex in p]).view(n, 2)
    chosen = [p[0] if bool(r[i, 0] >= r[i, 1]) else p[1] for i, p in enumerate(pairs)]
    rejected = [p[1] if bool(r[i, 0] >= r[i, 1]) else p[0] for i, p in enumerate(pairs)]
    return chosen, rejected


def train_policy(
    task: ConversationTask,
    reference: LlamaForCausalLM,
    scalar: nn.Module,
    seed: int = 0,
    cfg: TrainConfig = POLICY_TRAIN,
    beta: float = DPO_BETA,
) -> tuple[LlamaForCausalLM, list[float]]:
    """DPO from `reference` on pairs labelled by the `scalar` reward model.

    Args:
        task: The conversation task.
        reference: The reference LM (the policy starts as a copy).
        scalar: The scalar reward model.
        seed: The random seed.
        cfg: The training configuration.
        beta: The DPO temperature.

    Returns:
        The policy and its per-step losses.
    """
    reference.eval()

    def loss(policy: LlamaForCausalLM, rng: random.Random, max_words: int) -> Tensor:
        chosen, rejected = preference_pairs(task, scalar, rng, cfg.batch, max_words)
        with torch.no_grad():
            ref = sequence_logprobs(reference, chosen + rejected)
        pi = sequence_logprobs(policy, chosen + rejected)
        n = len(chosen)
        return dpo_loss(pi[:n], pi[n:], ref[:n], ref[n:], beta)

    return train_model("policy", seed, cfg, lambda: copy.deepcopy(reference), loss)


@dataclass(frozen=True)
class Sample:
    """A sampled response: its words, and whether it ended properly (`<|end|> <eos>`).

    Args:
        words: The response's words.
        well_formed: Whether it ended with `<|end|> <eos>` and no other special token.
    """

    words: tuple[str, ...]
    well_formed: bool


@torch.no_grad()
def sample_responses(
    model: nn.Module,
    prompts: Sequence[Sequence[str]],
    seed: int,
    max_new_tokens: int = 16,
) -> list[Sample]:
    """Ancestral sampling after each prompt's assistant header (a simple, cache-free loop).

    Args:
        model: The causal LM.
        prompts: The prompts' words.
        seed: The sampling seed.
        max_new_tokens: The most tokens per response.

    Returns:
        One sample per prompt.
    """
    gen = torch.Generator().manual_seed(seed)
    seqs = [[VOCAB[t] for t in conversation_tokens(p, [])[:-2]] for p in prompts]
    starts = [len(s) for s in seqs]
    done = [False] * len(seqs)
    for _ in range(max_new_tokens):
        ids, mask = collate(seqs)
        logits = model(input_ids=ids, attention_mask=mask).logits
        last = logits[torch.arange(len(seqs)), mask.sum(-1) - 1]
        nxt = torch.multinomial(last.softmax(-1), 1, generator=gen).squeeze(-1).tolist()
        for i, tok in enumerate(nxt):
            if not done[i]:
                seqs[i].append(tok)
                done[i] = tok == VOCAB[EOS]
        if all(done):
            break
    out = []
    for seq, start in zip(seqs, starts, strict=True):
        toks = [ID_TO_TOKEN[t] for t in seq[start:]]
        words = tuple(t for t in toks if t not in SPECIAL_TOKENS)
        ok = toks[-2:] == [END, EOS] and len(words) == len(toks) - 2
        out.append(Sample(words, ok))
    return out
