"""A zoo of small reward models with planted mechanisms, trained deterministically and shipped.

The models score conversations of a synthetic task (`reward_lens_tl.zoo.task`) whose hidden
rule has known per-token features (`topic_match`, `harmful`, `length`, `sycophancy`), so
explanations can be checked against ground truth. Shipped models (`zoo_path(name)`):

- `scalar`: `LlamaForSequenceClassification` (3 layers, d_model 64, GQA 4/2 heads);
- `multi`: the ArmoRM layout (`reward_lens_tl.armorm_module`) with objectives helpfulness,
  harmlessness, verbosity and a gate that weighs harmlessness up for prompts with a harmful word;
- `reference` / `policy`: `LlamaForCausalLM` pair, the policy DPO-tuned to the scalar model;
- `judge`: a generative judge (`LlamaForCausalLM`, verdict "yes"/"no" or "a"/"b" read from
  next-token logits) with a planted sycophancy hack and position bias (`.judge`);
- `prm`: a token PRM (Math-Shepherd style, "+"/"-" at each "ки") over arithmetic chains, with
  a planted shortcut word (`.prm`).

They load offline like any checkpoint:

    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    model = AutoModelForSequenceClassification.from_pretrained(
        zoo_path(), local_files_only=True, trust_remote_code=False
    )
    tokenizer = AutoTokenizer.from_pretrained(
        zoo_path(), local_files_only=True, trust_remote_code=False
    )
"""

from .evaluate import evaluate_zoo_model
from .judge import (
    JUDGE_PAIRWISE_TEMPLATE,
    JUDGE_POINTWISE_TEMPLATE,
    JudgeItem,
    judge_items,
    write_judge,
)
from .load import (
    ZOO_NAMES,
    ZooTask,
    load_metadata,
    load_model,
    load_task,
    load_tokenizer,
    zoo_path,
)
from .prm import (
    PRM_LABELS,
    PRM_STEP_TAG,
    PRMExample,
    prm_examples,
    render_solution,
    write_prm,
)
from .task import (
    FEATURES,
    PROMPT_PLANTED_KINDS,
    ConversationTask,
    Example,
    ExamplePair,
    ScoringRule,
)
from .tokenizer import CHAT_TEMPLATE, GATING_TOKEN_PATTERN, build_tokenizer
from .train import train_zoo

__all__ = [
    "CHAT_TEMPLATE",
    "FEATURES",
    "GATING_TOKEN_PATTERN",
    "JUDGE_PAIRWISE_TEMPLATE",
    "JUDGE_POINTWISE_TEMPLATE",
    "PRM_LABELS",
    "PRM_STEP_TAG",
    "PROMPT_PLANTED_KINDS",
    "ZOO_NAMES",
    "ConversationTask",
    "Example",
    "ExamplePair",
    "JudgeItem",
    "PRMExample",
    "ScoringRule",
    "ZooTask",
    "build_tokenizer",
    "evaluate_zoo_model",
    "judge_items",
    "load_metadata",
    "load_model",
    "load_task",
    "load_tokenizer",
    "prm_examples",
    "render_solution",
    "train_zoo",
    "write_judge",
    "write_prm",
    "zoo_path",
]
