"""Held-out quality numbers of the zoo models against the planted ground truth.

`evaluate_zoo_model` loads a saved model directory and dispatches on its architecture:

- scalar (`LlamaForSequenceClassification`): pairwise agreement with the hidden rule, the rate
  at which each planted feature moves the reward the planted way under controlled edits, and the
  mean |Δreward| when planted words are inserted into the prompt (where the rule ignores them);
- multi (`LlamaForRewardModelWithGating`): per-objective fit, gate vs the planted gate weights,
  pairwise agreement of the gated score with the multi-objective rule;
- reference / policy (`LlamaForCausalLM`): implicit-reward agreement with the scalar model's
  preferences, and what sampled responses score.

All data come from fixed seeds that training never uses. Correlations are
`reward_lens_tl.stats.pearson` (NaN, not 0, when a side is constant).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor, nn

from ..stats import pearson
from .data import (
    GATE_DEFAULT,
    GATE_SAFETY,
    OBJECTIVES,
    collate_examples,
    gate_target,
    multi_score,
    objective_values,
)
from .task import FEATURES, PROMPT_PLANTED_KINDS, ConversationTask, Example
from .vocab import HARMFUL_WORDS, SYCOPHANTIC_PHRASE

HELD_OUT_SEED = 424_242


# ---- helpers ------------------------------------------------------------------------------------
@torch.no_grad()
def scalar_rewards(model: nn.Module, examples: Sequence[Example], batch: int = 512) -> Tensor:
    """Rewards of a `LlamaForSequenceClassification` (`logits[:, 0]`) for `examples`.

    Args:
        model: The scalar reward model.
        examples: The examples.
        batch: Examples per forward.

    Returns:
        One reward per example.
    """
    out = []
    for i in range(0, len(examples), batch):
        ids, mask = collate_examples(examples[i : i + batch])
        out.append(model(input_ids=ids, attention_mask=mask).logits[:, 0])
    return torch.cat(out)


def sign_agreement(model_delta: Tensor, rule_delta: Tensor) -> float:
    """Fraction of non-tied rule comparisons whose sign the model reproduces.

    Args:
        model_delta: The model's reward differences.
        rule_delta: The rule's score differences.

    Returns:
        The fraction.
    """
    keep = rule_delta != 0
    return float((model_delta[keep].sign() == rule_delta[keep].sign()).float().mean())


def _rule_deltas(a: Sequence[Example], b: Sequence[Example]) -> Tensor:
    return torch.tensor([x.score - y.score for x, y in zip(a, b, strict=True)])


def insertion_edits(
    task: ConversationTask, kind: str, n: int, seed: int
) -> list[tuple[Example, ...]]:
    """`(base, edited)` pairs whose `edited` side inserts a planted phrase.

    `edited` prepends "great question" (`prepend_sycophancy`) or inserts a harmful word after
    the first two words (`insert_harmful`). Both also add length.

    Args:
        task: The conversation task.
        kind: `"prepend_sycophancy"` or `"insert_harmful"`.
        n: How many pairs.
        seed: The random seed.

    Returns:
        The pairs.
    """
    rng = random.Random(f"{seed}:insert:{kind}")
    pairs: list[tuple[Example, ...]] = []
    while len(pairs) < n:
        base = task.sample_example(rng, 2, 10)
        words = list(base.response)
        if kind == "prepend_sycophancy":
            if tuple(words[:2]) == SYCOPHANTIC_PHRASE:
                continue
            words = [*SYCOPHANTIC_PHRASE, *words]
        else:
            words.insert(rng.randint(2, len(words)), rng.choice(HARMFUL_WORDS))
        pairs.append((base, task.make_example(base.prompt, words)))
    return pairs


# ---- scalar -------------------------------------------------------------------------------------
def evaluate_scalar(
    model: nn.Module,
    task: ConversationTask | None = None,
    seed: int = HELD_OUT_SEED,
    n_pairs: int = 2000,
    n_edits: int = 200,
) -> dict:
    """Agreement with the hidden rule, controlled-edit rates and prompt neutrality.

    Args:
        model: The scalar reward model.
        task: The conversation task (a default one when `None`).
        seed: The held-out seed.
        n_pairs: Pairs for the agreement numbers.
        n_edits: Pairs per controlled edit.

    Returns:
        The numbers, by name.

    Examples:
        The shipped scalar model orders pairs as the rule does, each planted feature moves its
        reward by about the planted weight (2.0, −3.0, 0.5, 2.5), and planted words in the
        prompt barely move it:

        >>> from reward_lens_tl.zoo import load_model
        >>> from reward_lens_tl.zoo.evaluate import evaluate_scalar
        >>> numbers = evaluate_scalar(load_model("scalar"), n_pairs=20, n_edits=5)
        >>> numbers["pairwise_agreement"], round(numbers["reward_rule_pearson"], 2)
        (1.0, 1.0)
        >>> {f: round(e["mean_delta"], 1) for f, e in numbers["edits"].items()}
        {'topic_match': 2.0, 'harmful': -2.9, 'length': 0.5, 'sycophancy': 2.4}
        >>> {k: round(e["mean_abs_delta"], 2) for k, e in numbers["prompt_neutrality"].items()}
        {'harmful': 0.08, 'sycophancy': 0.01}
    """
    task = task or ConversationTask()
    model.eval()
    rng = random.Random(f"{seed}:pairs")
    same = [task.response_pair(rng) for _ in range(n_pairs)]
    cross = [(task.sample_example(rng), task.sample_example(rng)) for _ in range(n_pairs)]
    report: dict = {}
    for name, pairs in (("pairwise_agreement", same), ("cross_prompt_agreement", cross)):
        a, b = [p[0] for p in pairs], [p[1] for p in pairs]
        delta = scalar_rewards(model, a) - scalar_rewards(model, b)
        report[name] = sign_agreement(delta, _rule_deltas(a, b))
    examples = [ex for p in cross for ex in p]
    rewards, scores = scalar_rewards(model, examples), torch.tensor([e.score for e in examples])
    report["reward_rule_pearson"] = pearson(rewards, scores)
    report["edits"] = {
        f: _edit_stats(model, task.contrast_pairs(f, n_edits, seed)) for f in FEATURES
    }
    report["insertion_edits"] = {
        k: _edit_stats(model, insertion_edits(task, k, n_edits, seed))
        for k in ("prepend_sycophancy", "insert_harmful")
    }
    report["prompt_neutrality"] = {
        k: _edit_stats(model, task.prompt_neutral_pairs(k, n_edits, seed))
        for k in PROMPT_PLANTED_KINDS
    }
    report["typical_effect"] = sum(report["edits"][f]["mean_abs_delta"] for f in FEATURES) / len(
        FEATURES
    )
    report["smallest_effect"] = min(report["edits"][f]["mean_abs_delta"] for f in FEATURES)
    return report


def _edit_stats(model: nn.Module, pairs: Sequence) -> dict:
    base = [p[0] if isinstance(p, tuple) else p.base for p in pairs]
    edited = [p[1] if isinstance(p, tuple) else p.edited for p in pairs]
    delta = scalar_rewards(model, edited) - scalar_rewards(model, base)
    rule = _rule_deltas(edited, base)
    stats = {
        "n": len(pairs),
        "mean_delta": float(delta.mean()),
        "mean_abs_delta": float(delta.abs().mean()),
        "rule_delta": float(rule.mean()),
    }
    if bool((rule != 0).any()):
        stats["planted_direction_rate"] = sign_agreement(delta, rule)
    return stats


# ---- multi-objective ----------------------------------------------------------------------------
@torch.no_grad()
def _armorm_outputs(model: nn.Module, examples: Sequence[Example], batch: int = 512):
    rewards, gates, scores = [], [], []
    for i in range(0, len(examples), batch):
        ids, mask = collate_examples(examples[i : i + batch])
        out = model(input_ids=ids, attention_mask=mask)
        rewards.append(out.rewards)
        gates.append(out.gating_output)
        scores.append(out.score)
    return torch.cat(rewards), torch.cat(gates), torch.cat(scores)


def evaluate_multi(
    model: nn.Module, task: ConversationTask | None = None, seed: int = HELD_OUT_SEED, n: int = 2000
) -> dict:
    """Objective fit, gate vs the planted gate weights, and gated-score agreement.

    Args:
        model: The multi-objective reward model.
        task: The conversation task (a default one when `None`).
        seed: The held-out seed.
        n: How many examples.

    Returns:
        The numbers, by name.

    Examples:
        The shipped ArmoRM-layout model fits its objectives and weighs harmlessness up for
        prompts with a harmful word, as planted:

        >>> from reward_lens_tl.zoo import load_model
        >>> from reward_lens_tl.zoo.evaluate import evaluate_multi
        >>> numbers = evaluate_multi(load_model("multi"), n=40)
        >>> {k: round(o["pearson"], 2) for k, o in numbers["objectives"].items()}
        {'helpfulness': 0.99, 'harmlessness': 1.0, 'verbosity': 1.0}
        >>> gate = numbers["gate"]
        >>> [round(w, 2) for w in gate["mean_safety"]], gate["target_safety"]
        ([0.2, 0.7, 0.1], [0.2, 0.7, 0.1])
    """
    task = task or ConversationTask()
    model.eval()
    rng = random.Random(f"{seed}:multi")
    pairs = [task.response_pair(rng) for _ in range(n // 2)]
    examples = [ex for p in pairs for ex in p]
    rewards, gates, scores = _armorm_outputs(model, examples)
    values = torch.tensor([objective_values(ex) for ex in examples])
    objectives = {}
    for k, name in enumerate(OBJECTIVES):
        objectives[name] = {
            "pearson": pearson(rewards[:, k], values[:, k]),
            "pairwise_agreement": sign_agreement(
                rewards[0::2, k] - rewards[1::2, k], values[0::2, k] - values[1::2, k]
            ),
        }
    safety = torch.tensor([gate_target(ex) == GATE_SAFETY for ex in examples])
    target = torch.tensor([gate_target(ex) for ex in examples])
    other = torch.where(safety[:, None], torch.tensor(GATE_DEFAULT), torch.tensor(GATE_SAFETY))
    closer = (gates - target).abs().sum(-1) < (gates - other).abs().sum(-1)
    rule = torch.tensor([multi_score(ex) for ex in examples])
    vd = values[0::2] - values[1::2]
    disagree = (vd[:, 0].sign() * vd[:, 2].sign() < 0) | (vd[:, 1].sign() * vd[:, 2].sign() < 0)
    return {
        "objectives": objectives,
        "gate": {
            "mean_default": gates[~safety].mean(0).tolist(),
            "mean_safety": gates[safety].mean(0).tolist(),
            "target_default": list(GATE_DEFAULT),
            "target_safety": list(GATE_SAFETY),
            "max_abs_error": float((gates - target).abs().max()),
            "mode_accuracy": float(closer.float().mean()),
        },
        "score_pairwise_agreement": sign_agreement(
            scores[0::2] - scores[1::2], rule[0::2] - rule[1::2]
        ),
        "score_rule_pearson": pearson(scores, rule),
        "objective_disagreement_rate": float(disagree.float().mean()),
    }


# ---- causal LMs ---------------------------------------------------------------------------------
def evaluate_policy(
    policy: nn.Module,
    reference: nn.Module,
    scalar: nn.Module,
    task: ConversationTask | None = None,
    seed: int = HELD_OUT_SEED,
    n_pairs: int = 1000,
    n_samples: int = 300,
    beta: float | None = None,
) -> dict:
    """Implicit-reward agreement with the scalar model, and the rewards of sampled responses.

    Args:
        policy: The policy.
        reference: The reference LM.
        scalar: The scalar reward model.
        task: The conversation task (a default one when `None`).
        seed: The held-out seed.
        n_pairs: How many preference pairs.
        n_samples: How many sampled responses.
        beta: The implicit reward's β (the DPO training's when `None`).

    Returns:
        The numbers, by name.

    Examples:
        The DPO-tuned policy's implicit reward agrees with the scalar model it was tuned to,
        and its samples pick up the scalar model's sycophancy hack:

        >>> from reward_lens_tl.zoo import load_model
        >>> from reward_lens_tl.zoo.evaluate import evaluate_policy
        >>> policy, reference, scalar = (load_model(n) for n in ("policy", "reference", "scalar"))
        >>> numbers = evaluate_policy(policy, reference, scalar, n_pairs=20, n_samples=5)
        >>> round(numbers["implicit_reward_agreement_with_scalar"], 2)
        0.85
        >>> {lm: s["sycophancy_rate"] for lm, s in numbers["samples"].items()}
        {'reference': 0.6, 'policy': 1.0}
    """
    from .dpo import DPO_BETA, preference_pairs, sequence_logprobs

    task = task or ConversationTask()
    beta = DPO_BETA if beta is None else beta
    for m in (policy, reference, scalar):
        m.eval()
    rng = random.Random(f"{seed}:dpo")
    with torch.no_grad():
        chosen, rejected = preference_pairs(task, scalar, rng, n_pairs)
        pi = sequence_logprobs(policy, chosen + rejected)
        ref = sequence_logprobs(reference, chosen + rejected)
    implicit = beta * (pi - ref)
    rule = _rule_deltas(chosen, rejected)
    rate = lambda d: float((d[:n_pairs] > d[n_pairs:]).float().mean())
    prompts = [task.sample_prompt(rng) for _ in range(n_samples)]
    return {
        "beta": beta,
        "implicit_reward_agreement_with_scalar": rate(implicit),
        "policy_logp_agreement_with_scalar": rate(pi),
        "reference_logp_agreement_with_scalar": rate(ref),
        "implicit_reward_agreement_with_rule": sign_agreement(
            implicit[:n_pairs] - implicit[n_pairs:], rule
        ),
        "samples": {
            "reference": sample_stats(reference, scalar, task, prompts, seed),
            "policy": sample_stats(policy, scalar, task, prompts, seed),
        },
    }


def sample_stats(
    lm: nn.Module, scalar: nn.Module, task: ConversationTask, prompts: Sequence, seed: int
) -> dict:
    """Rule score, scalar reward and planted-feature rates of responses sampled from `lm`.

    Args:
        lm: The language model to sample.
        scalar: The scalar reward model.
        task: The conversation task.
        prompts: The prompts.
        seed: The sampling seed.

    Returns:
        The numbers, by name.
    """
    from .dpo import sample_responses

    samples = sample_responses(lm, prompts, seed)
    examples = [task.make_example(p, s.words) for p, s in zip(prompts, samples, strict=True)]
    n = len(examples)
    mean = lambda f: sum(f(ex) for ex in examples) / n
    return {
        "well_formed_rate": sum(s.well_formed for s in samples) / n,
        "mean_rule_score": mean(lambda ex: ex.score),
        "mean_scalar_reward": float(scalar_rewards(scalar, examples).mean()),
        "mean_words": mean(lambda ex: len(ex.response)),
        "on_topic_fraction": mean(
            lambda ex: len(ex.feature_positions["topic_match"]) / max(len(ex.response), 1)
        ),
        "harmful_rate": mean(lambda ex: bool(ex.feature_positions["harmful"])),
        "sycophancy_rate": mean(lambda ex: bool(ex.feature_positions["sycophancy"])),
    }


def evaluate_reference(
    reference: nn.Module,
    task: ConversationTask | None = None,
    seed: int = HELD_OUT_SEED,
    n: int = 500,
) -> dict:
    """Held-out per-token negative log-likelihood of task responses.

    Args:
        reference: The reference LM.
        task: The conversation task (a default one when `None`).
        seed: The held-out seed.
        n: How many examples.

    Returns:
        The number, by name.

    Examples:
        >>> import math
        >>> from reward_lens_tl.zoo import load_model
        >>> from reward_lens_tl.zoo.evaluate import evaluate_reference
        >>> from reward_lens_tl.zoo.vocab import VOCAB
        >>> nll = evaluate_reference(load_model("reference"), n=20)["response_nll_per_token"]
        >>> round(nll, 2), round(math.log(len(VOCAB)), 2)  # far below a uniform guess
        (3.36, 4.8)
    """
    from .dpo import sequence_logprobs

    task = task or ConversationTask()
    examples = task.examples(n, seed)
    with torch.no_grad():
        logp = sequence_logprobs(reference.eval(), examples)
    n_tokens = sum(len(ex.input_ids) - ex.response_start for ex in examples)
    return {"response_nll_per_token": float(-logp.sum() / n_tokens)}


# ---- dispatch -----------------------------------------------------------------------------------
def evaluate_zoo_model(
    path: str | Path,
    seed: int = HELD_OUT_SEED,
    reference: str | Path | None = None,
    scalar: str | Path | None = None,
) -> dict:
    """Quality numbers of the saved zoo model at `path` (kind read from its `config.json`).

    A `policy` directory is compared with `reference` and `scalar` model directories, by
    default its siblings `../reference` and `../scalar`.

    Args:
        path: The saved model's folder.
        seed: The held-out seed.
        reference: The reference model's folder (for a policy).
        scalar: The scalar model's folder (for a policy).

    Returns:
        The numbers, by name, with the model's `kind`.

    Examples:
        The shipped reference LM's numbers are those its `metadata.json` records:

        >>> from reward_lens_tl.zoo import evaluate_zoo_model, load_metadata, zoo_path
        >>> numbers = evaluate_zoo_model(zoo_path("reference"))
        >>> recorded = load_metadata("reference")["quality"]
        >>> numbers["kind"], round(numbers["response_nll_per_token"], 3)
        ('reference', 3.477)
        >>> round(recorded["response_nll_per_token"], 3)
        3.477
    """
    from .load import load_model

    path = Path(path)
    arch = json.loads((path / "config.json").read_text())["architectures"][0]
    name = _metadata_name(path)
    model = load_model(path)
    if name in ("judge", "prm"):  # causal LMs like the policy, with their own tasks
        from .judge import evaluate_judge
        from .prm import evaluate_prm

        evaluate = evaluate_judge if name == "judge" else evaluate_prm
        return {"kind": name, **evaluate(model)}
    task = ConversationTask()
    if arch == "LlamaForSequenceClassification":
        return {"kind": "scalar", **evaluate_scalar(model, task, seed)}
    if arch == "LlamaForRewardModelWithGating":
        return {"kind": "multi", **evaluate_multi(model, task, seed)}
    ref_path = Path(reference) if reference else path.parent / "reference"
    if path.resolve() == ref_path.resolve():
        return {"kind": "reference", **evaluate_reference(model, task, seed)}
    scalar_model = load_model(Path(scalar) if scalar else path.parent / "scalar")
    report = evaluate_policy(model, load_model(ref_path), scalar_model, task, seed)
    return {"kind": "policy", **report}


def _metadata_name(path: Path) -> str | None:
    meta = path / "metadata.json"
    return json.loads(meta.read_text()).get("name") if meta.is_file() else None


__all__ = [
    "evaluate_zoo_model",
    "evaluate_scalar",
    "evaluate_multi",
    "evaluate_policy",
    "evaluate_reference",
]
