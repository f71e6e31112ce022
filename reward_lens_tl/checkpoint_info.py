"""What `reward-lens info` reports about a checkpoint.

First what the files say (instant, nothing loaded), then, unless skipped, a conversion and a
parity check against HF.

Examples:
    >>> from reward_lens_tl.zoo import zoo_path
    >>> facts = describe_files(zoo_path("scalar"))
    >>> facts["architecture"], facts["padding side"], facts["context"]
    ('LlamaForSequenceClassification', 'right', 64)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .checkpoint import checkpoint_dir, read_config_dict, refuse_remote_code

#: Endings of HF architecture names of language models (no reward head of their own).
CAUSAL_LM_ENDINGS = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")
IMPLICIT_REWARD_HINT = (
    "a causal language model, not a reward model: it has no reward head, so no adapter applies. "
    "If it is a DPO policy, its implicit reward (beta x log-ratio to its reference model) is "
    "reward_lens_tl.implicit.ImplicitRewardModel.from_pretrained(policy_dir, reference_dir, "
    "beta=...)"
)


def describe_files(path: str | Path) -> dict[str, Any]:
    """Facts read from `config.json` and the tokenizer files, without loading weights.

    Args:
        path: The checkpoint's directory.

    Returns:
        The facts by name.
    """
    path = checkpoint_dir(path)
    config = read_config_dict(path)
    refuse_remote_code(config, path)
    tok = _json(path / "tokenizer_config.json")
    template = (path / "chat_template.jinja").is_file() or bool(tok.get("chat_template"))
    archs = config.get("architectures") or ["?"]
    pad = config.get("pad_token_id")
    n_labels = len(config.get("id2label") or {}) or config.get("num_labels", 1)
    facts = {
        "architecture": archs[0],
        "model type": config.get("model_type"),
        "layers": config.get("num_hidden_layers", config.get("n_layer")),
        "d_model": config.get("hidden_size", config.get("n_embd")),
        "context": config.get("max_position_embeddings", config.get("n_positions")),
        "vocabulary": config.get("vocab_size"),
        "outputs": config.get("num_objectives", n_labels),
        "pad token id": pad,
        "eos token id": config.get("eos_token_id"),
        "chat template": "yes (used by model.encode)" if template else "none: plain HH format",
        "padding side": tok.get("padding_side", "right (default)"),
        "pooling rule": pooling_rule(archs[0], pad, config.get("eos_token_id")),
        "weights": ", ".join(sorted(p.name for p in path.glob("*.safetensors"))) or "none",
    }
    if is_causal_lm(archs[0]):
        facts.update({"outputs": "vocabulary logits", "pooling rule": "none (no reward head)"})
        facts["note"] = IMPLICIT_REWARD_HINT
    return facts


def is_causal_lm(architecture: str) -> bool:
    """Whether an HF architecture name is a language model rather than a reward model.

    Args:
        architecture: The HF architecture name.

    Returns:
        Whether it is a language model.

    Examples:
        >>> is_causal_lm("LlamaForCausalLM"), is_causal_lm("LlamaForSequenceClassification")
        (True, False)
    """
    return architecture.endswith(CAUSAL_LM_ENDINGS)


def pooling_rule(architecture: str, pad: Any, eos: Any) -> str:
    """The HF model's rule for where the reward is read, in words.

    Args:
        architecture: The HF architecture name.
        pad: The pad token id.
        eos: The end-of-sequence token id.

    Returns:
        The rule.
    """
    if architecture == "LlamaForRewardModelWithGating":
        return f"token before the first pad id {pad} (ArmoRM)"
    if pad is None:
        return "last token (no pad id: batches of one only)"
    skip = " (pad == eos: a trailing EOS is skipped)" if pad == eos else ""
    return f"rightmost token that is not the pad id {pad}{skip}"


def _json(file: Path) -> dict:
    try:
        data = json.loads(file.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
