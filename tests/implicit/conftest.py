"""Shared by the implicit-reward tests: the zoo's DPO policy and reference (as an
`ImplicitRewardModel` and as Hugging Face models), zoo examples, tiny causal LMs of every
family, and the implicit reward computed with plain PyTorch."""

import pytest
import torch
import transformers

from reward_lens_tl.implicit import ImplicitRewardModel
from reward_lens_tl.inputs import EncodedConversation
from reward_lens_tl.testing import perturb_, tiny_config
from reward_lens_tl.zoo import load_model, load_task, zoo_path

__all__ = ["FAMILIES", "plain_implicit", "tiny_causal"]


FAMILIES = {
    "llama": "LlamaForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "mistral": "MistralForCausalLM",
    "gemma2": "Gemma2ForCausalLM",
    "gpt2": "GPT2LMHeadModel",
}


@pytest.fixture(scope="module")
def irm():
    return ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))


@pytest.fixture(scope="module")
def hf_pair():
    return load_model("policy"), load_model("reference")


@pytest.fixture(scope="module")
def examples():
    return load_task().task.examples(12, seed=3)


def tiny_causal(family: str, seed: int = 0):
    cfg = tiny_config(family)
    cfg.architectures = [FAMILIES[family]]
    torch.manual_seed(seed)
    return perturb_(getattr(transformers, FAMILIES[family])(cfg), seed=seed).eval()


def plain_implicit(policy, reference, enc: EncodedConversation, beta: float, end: int) -> float:
    """β Σ_{t in [response_start, end)} (log π − log π_ref)(ids[t]) from HF logits, one
    unpadded sequence at a time."""
    ids = torch.tensor([enc.ids])
    total = 0.0
    with torch.no_grad():
        lp = policy(input_ids=ids).logits[0].log_softmax(-1)
        lr = reference(input_ids=ids).logits[0].log_softmax(-1)
    for t in range(enc.response_start, end):
        total += float(lp[t - 1, enc.ids[t]] - lr[t - 1, enc.ids[t]])
    return beta * total
