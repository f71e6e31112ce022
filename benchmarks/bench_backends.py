"""The two backends side by side: TransformerLens 3.9's `HookedRewardModel`, 4.3's bridge.

Each backend lives in its own environment (sae_lens pins TransformerLens < 4), so this script
runs once per environment and measures its backend against HF's own model **in the same
process** (1 thread, interleaved medians); the two runs are compared through those ratios:

- boot: `HookedRewardModel.from_pretrained(dir)` / `boot_reward_bridge(dir)` against HF's
  `from_pretrained(dir)` + one forward (a fresh process each would add the imports to both);
- reward: a batch of 4 × 128 tokens, against HF's forward;
- cache: `run_with_cache` of every hook (4 × 128), against HF with hidden states;
- patching: TransformerLens's own `patching.get_act_patch_resid_pre` on the reward at 64 and
  512 tokens (one corrupted row; a 2-layer d128 model, so that the 512-token grid of
  2 × 512 forwards fits a benchmark), against HF's forward of the same ids;
- parity: the largest |reward − HF's| over the batch.

Models: a random Llama-shaped classifier (8 layers, d512, vocabulary 32k; `bench_peers.py`'s)
for boot, reward and cache; the 2-layer d128 one for patching. Written to a temporary directory
as safetensors checkpoints.

Usage (once per environment):
    .venv/bin/python benchmarks/bench_backends.py          # TransformerLens 3.9
    .venv-tl4/bin/python benchmarks/bench_backends.py      # TransformerLens 4.3 (make test-tl4)
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")  # TransformerLens's patching loops draw a bar

import torch  # noqa: E402
import transformers  # noqa: E402

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from timing import interleaved_median  # noqa: E402

from reward_lens_tl.testing import tiny_reward_model  # noqa: E402

TL = importlib.metadata.version("transformer-lens")
BRIDGE = int(TL.split(".")[0]) >= 4
VOCAB = 32000


def checkpoint(root: Path, name: str, **config) -> Path:
    """A random Llama reward model saved as safetensors (with a pad token), and its path."""
    hf = tiny_reward_model("llama", vocab_size=VOCAB, **config)
    hf.config.pad_token_id = 0
    path = root / name
    hf.save_pretrained(path, safe_serialization=True)
    return path


def load_hf(path: Path):
    return transformers.AutoModelForSequenceClassification.from_pretrained(
        path, local_files_only=True, trust_remote_code=False, attn_implementation="sdpa"
    ).eval()


def load_ours(path: Path):
    if BRIDGE:
        from reward_lens_tl.bridge import boot_reward_bridge

        return boot_reward_bridge(path)
    from reward_lens_tl import HookedRewardModel

    return HookedRewardModel.from_pretrained(path, n_ctx=1024)


def rewards(model, ids: torch.Tensor) -> torch.Tensor:
    """The reward of each unpadded row."""
    if BRIDGE:
        from reward_lens_tl.bridge import bridge_rewards

        return bridge_rewards(model, ids, torch.ones_like(ids)).reshape(len(ids), -1)[:, 0]
    return model.rewards(ids).reshape(len(ids), -1)[:, 0]


def ids_of(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(10, VOCAB, (batch, length), generator=gen)


@torch.no_grad()
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    from transformer_lens import patching

    root = Path(tempfile.mkdtemp())
    big = checkpoint(
        root,
        "llama8",
        hidden_size=512,
        intermediate_size=1376,
        num_hidden_layers=8,
        num_attention_heads=8,
        num_key_value_heads=8,
        head_dim=64,
        max_position_embeddings=1024,
    )
    small = checkpoint(
        root,
        "llama2",
        hidden_size=128,
        intermediate_size=344,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        head_dim=32,
        max_position_embeddings=1024,
    )
    backend = f"TL {TL} " + ("bridge" if BRIDGE else "HookedRewardModel")
    lines = [f"backend: {backend}; torch {torch.__version__}, 1 thread"]

    def boot_hf():
        load_hf(big)(ids_of(1, 8))

    boot, _ = interleaved_median({"ours": lambda: load_ours(big), "hf": boot_hf}, repeats=3)
    lines.append(f"boot: {boot['ours']:.2f} s vs HF load + forward {boot['hf']:.2f} s")

    hf, model = load_hf(big), load_ours(big)
    ids = ids_of(4, 128)
    parity = float((rewards(model, ids) - hf(ids).logits[:, 0]).abs().max())
    lines.append(f"parity: max |reward - HF| over 4 x 128 tokens = {parity:.1e}")
    t, _ = interleaved_median(
        {
            "ours": lambda: rewards(model, ids),
            "hf": lambda: hf(ids),
            "ours_cache": lambda: model.run_with_cache(ids),
            "hf_hidden": lambda: hf(ids, output_hidden_states=True),
        },
        repeats=args.repeats,
    )
    lines.append(
        f"reward 4 x 128: {t['ours'] * 1e3:.0f} ms = {t['ours'] / t['hf']:.2f}x HF; "
        f"run_with_cache (every hook): {t['ours_cache'] * 1e3:.0f} ms = "
        f"{t['ours_cache'] / t['hf_hidden']:.2f}x HF with hidden states"
    )

    hf_small, small_model = load_hf(small), load_ours(small)
    for length in (64, 512):
        clean, corrupted = ids_of(1, length, seed=1), ids_of(1, length, seed=1).clone()
        corrupted[0, length // 2] = 11
        _, clean_cache = small_model.run_with_cache(clean)

        def metric(out):
            return out[0, -1, 0]

        start = time.perf_counter()
        grid = patching.get_act_patch_resid_pre(small_model, corrupted, clean_cache, metric)
        elapsed = time.perf_counter() - start
        forward = interleaved_median({"hf": lambda c=corrupted: hf_small(c)}, repeats=3)[0]["hf"]
        lines.append(
            f"patching resid_pre, {length} tokens ({tuple(grid.shape)} grid): {elapsed:.1f} s = "
            f"{elapsed / forward:.0f} HF forwards of the same ids"
        )
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    lines.append(f"load average {load}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
