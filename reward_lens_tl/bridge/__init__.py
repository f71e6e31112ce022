"""Reward models on TransformerLens 4's `TransformerBridge` (the second backend; issue 41).

TransformerLens 4 replaced `HookedTransformer` with `TransformerBridge`, which wraps the HF
model itself. `boot_reward_bridge` boots a reward model of a supported family (Llama, Mistral,
Qwen2, Qwen3, Gemma-2, GPT-2, and ArmoRM's gated multi-objective head) through the bridge with
the reward head as the unembed, so the bridge's logits are the reward at every position and
`run_with_cache`, the legacy hook names, `start_at_layer` and TransformerLens's `patching` run
on rewards; `bridge_rewards` reads the reward where HF reads it, and `hook_resid_mid` edits
reach the residual stream (`residual`). `BridgeRewardModel` gives the bridge the protocol the
package's analyses are written against (a gated model gets `GatedBridgeRewardModel`): the
lens, direct attribution (Gemma-2's post-norms included, `post_norms`), batched activation
patching and AtP, probes, token sweeps and counterfactual edits run on it unchanged, with the
same numbers as on `HookedRewardModel`. What needs TransformerLens 3.9's internals (the prefix
key-value cache, the AtP* QK fix, SAEs while sae_lens cannot import) is declared by the model
(`reward_lens_tl.capabilities`) and either falls back to an exact plain path or is refused with
a typed error. The default backend stays `HookedRewardModel` on TransformerLens 3.9 with
sae_lens; this one needs the second environment (`requirements-tl4.txt`, `make test-tl4`).
Generative judges and process reward models boot as `BridgeJudge` and `BridgePRM` (`judges`),
with `HookedJudge`'s and `HookedPRM`'s options, and `reward_lens_tl.judges`' analyses run on them.
A DPO policy and its reference boot as `BridgeCausalLM`s (`boot_causal_lm`, `implicit`), on which
`reward_lens_tl.implicit`'s reward, lens, attribution and feature fits run unchanged.

The names are loaded on first use, so `reward_lens_tl.bridge.versions` (the version checks)
imports under either TransformerLens line.

Examples:
    >>> from reward_lens_tl.bridge import boot_reward_bridge, bridge_rewards
    >>> from reward_lens_tl.zoo import zoo_path
    >>> bridge = boot_reward_bridge(zoo_path("scalar"))
    >>> ids = bridge.tokenizer.apply_chat_template(
    ...     [{"role": "user", "content": "how bake bread"},
    ...      {"role": "assistant", "content": "soup bomb"}], return_tensors="pt",
    ...     return_dict=False)
    >>> round(bridge_rewards(bridge, ids).tolist()[0], 2)
    -4.84
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

_EXPORTS = {
    "BRIDGE_ARCHITECTURES": "families",
    "BridgeCausalLM": "implicit",
    "BridgeJudge": "judges",
    "BridgePRM": "judges",
    "BridgeRewardModel": "reward_model",
    "GatedBridgeRewardModel": "gated",
    "boot_reward_bridge": "boot",
    "boot_causal_lm": "implicit",
    "bridge_rewards": "boot",
    "reward_positions": "boot",
    "require_bridge": "versions",
    "require_sae_lens": "versions",
    "transformer_lens_version": "versions",
}

__all__ = [
    "BRIDGE_ARCHITECTURES",
    "BridgeCausalLM",
    "BridgeJudge",
    "BridgePRM",
    "BridgeRewardModel",
    "GatedBridgeRewardModel",
    "boot_causal_lm",
    "boot_reward_bridge",
    "bridge_rewards",
    "require_bridge",
    "require_sae_lens",
    "reward_positions",
    "transformer_lens_version",
]

if TYPE_CHECKING:  # pragma: no cover
    from .boot import boot_reward_bridge, bridge_rewards, reward_positions
    from .families import BRIDGE_ARCHITECTURES
    from .gated import GatedBridgeRewardModel
    from .implicit import BridgeCausalLM, boot_causal_lm
    from .judges import BridgeJudge, BridgePRM
    from .reward_model import BridgeRewardModel
    from .versions import require_bridge, require_sae_lens, transformer_lens_version

# Lazy exports, listed by dir() so tab completion in Jupyter finds them.
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
