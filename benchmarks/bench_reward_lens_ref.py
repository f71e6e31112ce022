"""Whole-component patching against the reference library reward-lens 1.0.0, on its own sweep.

reward-lens's ``ActivationPatcher.patch_all_components(prompt, preferred, dispreferred,
mode)`` patches every layer's attention output and MLP output at all positions, one forward
per component, after two cached forwards. Ours is one call over both sites,
``activation_patching(model, preferred_ids, dispreferred_ids, site=("attn_out", "mlp_out"),
mode=..., alignment="exact")`` (shared clean and corrupted runs), and, for reference, the
two single-site calls it replaces. Both sides use the same HF model (a Llama-style
``LlamaForSequenceClassification`` with random weights, built locally) and the same token
ids (reward-lens's own tokenisation of the conversation; chosen and rejected responses have
the same length, so position ``p`` pairs with ``p`` on both sides and the values must agree:
reward-lens's effect is ``r_preferred − r_patched`` for noising and
``r_patched − r_dispreferred`` for denoising, computed here from our patched rewards).

reward-lens is never a dependency of this project. The benchmark imports it from
``--reward-lens-path`` (default ``/tmp/rlpkg``; install with
``pip install --no-deps --target /tmp/rlpkg reward_lens-1.0.0-py3-none-any.whl``; it needs
only numpy, torch, transformers, tqdm and matplotlib, which are installed here) and skips the
comparison with a message when it is not importable.

Target (issue 16): ours ≥ 2× faster than reward-lens 1.0.0, identical values.
Usage: python benchmarks/bench_reward_lens_ref.py [--layers 4] [--d-model 256] [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TQDM_DISABLE", "1")

import torch  # noqa: E402

from reward_lens_tl import HookedRewardModel  # noqa: E402
from reward_lens_tl.patching import activation_patching  # noqa: E402
from reward_lens_tl.testing import tiny_reward_model, tiny_tokenizer  # noqa: E402

SITES = ("attn_out", "mlp_out")


def import_reward_lens(path: str):
    if path and os.path.isdir(path) and path not in sys.path:
        sys.path.append(path)
    try:
        from reward_lens.model import RewardModel
        from reward_lens.model_adapters import get_adapter
        from reward_lens.patching import ActivationPatcher
    except ImportError as err:
        return None, f"reward-lens is not importable ({err}); comparison skipped"
    return (RewardModel, get_adapter, ActivationPatcher), None


def texts(prompt_words: int, response_words: int, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)

    def words(n):
        return " ".join(f"w{int(i)}" for i in torch.randint(6, 97, (n,), generator=gen))

    return words(prompt_words), words(response_words), words(response_words)


def ours(model, preferred, dispreferred, mode, together: bool):
    args = (preferred, dispreferred) if mode == "noising" else (preferred, dispreferred)
    kw = dict(mode=mode, alignment="exact")
    if together:
        result = activation_patching(model, *args, site=SITES, **kw)
        return {s: result[s] for s in SITES}
    return {s: activation_patching(model, *args, site=s, **kw) for s in SITES}


def effects_from_ours(results, mode: str) -> torch.Tensor:
    """reward-lens's effect per component, in its order (attn_L0, mlp_L0, attn_L1, …)."""
    attn, mlp = results["attn_out"], results["mlp_out"]
    # noising patches the preferred (clean) run; denoising the dispreferred (corrupted) one
    if mode == "noising":
        r_w = attn.target_reward
        per_site = [r_w - attn.rewards, r_w - mlp.rewards]
    else:
        r_l = attn.target_reward
        per_site = [attn.rewards - r_l, mlp.rewards - r_l]
    return torch.stack(per_site, 1).reshape(-1)


def main(argv=None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4, help="decoder layers")
    parser.add_argument("--d-model", type=int, default=256, help="hidden size")
    parser.add_argument("--prompt-words", type=int, default=48)
    parser.add_argument("--response-words", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=7, help="interleaved rounds")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--reward-lens-path", default="/tmp/rlpkg")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    ref, why = import_reward_lens(args.reward_lens_path)
    if ref is None:
        print(why)
        return why
    RewardModel, get_adapter, ActivationPatcher = ref
    d = args.d_model
    hf = tiny_reward_model(
        "llama",
        num_hidden_layers=args.layers,
        hidden_size=d,
        intermediate_size=int(2.6875 * d),
        num_attention_heads=max(4, d // 64),
        num_key_value_heads=max(4, d // 64),
        head_dim=d // max(4, d // 64),
        max_position_embeddings=512,
    )
    tok = tiny_tokenizer()
    rm = RewardModel(model=hf, tokenizer=tok, adapter=get_adapter(hf, "llama"), device="cpu")
    patcher = ActivationPatcher(rm)
    model = HookedRewardModel.from_pretrained(hf, tokenizer=tok)
    prompt, preferred, dispreferred = texts(args.prompt_words, args.response_words)
    ids_w = rm.tokenize_conversation(prompt, preferred)["input_ids"][0]
    ids_l = rm.tokenize_conversation(prompt, dispreferred)["input_ids"][0]
    assert ids_w.shape == ids_l.shape, "chosen and rejected must tokenise to the same length"

    lines = [
        f"reward-lens 1.0.0 `patch_all_components` vs ours; {args.layers}L d{d} Llama-style, "
        f"{len(ids_w)} tokens (shared prompt + response), fp32, {args.threads} thread(s), "
        f"{args.repeats} interleaved rounds, load average {os.getloadavg()[0]:.1f}",
        "",
        "| mode | method | median (ms) | speed-up vs reward-lens (median) | spread | "
        "max abs(effect diff) |",
        "|---|---|---|---|---|---|",
    ]
    for mode in ("noising", "denoising"):

        def reference(mode=mode):
            return patcher.patch_all_components(
                prompt, preferred, dispreferred, mode=mode, show_progress=False
            )

        fns = {
            "reward-lens 1.0.0": reference,
            "ours, one call (attn_out + mlp_out)": lambda mode=mode: ours(
                model, ids_w, ids_l, mode, True
            ),
            "ours, two calls": lambda mode=mode: ours(model, ids_w, ids_l, mode, False),
        }
        with torch.no_grad():
            ref_effects = torch.tensor(reference().patch_effects, dtype=torch.float32)
            errs = {
                name: float((effects_from_ours(fn(), mode) - ref_effects).abs().max())
                for name, fn in fns.items()
                if name != "reward-lens 1.0.0"
            }
            errs["reward-lens 1.0.0"] = 0.0
            times = {name: [] for name in fns}
            for _ in range(args.repeats):
                for name, fn in fns.items():
                    t0 = time.perf_counter()
                    fn()
                    times[name].append(time.perf_counter() - t0)
        base = times["reward-lens 1.0.0"]
        for name, ts in times.items():
            speedups = [b / t for t, b in zip(ts, base, strict=True)]
            lines.append(
                f"| {mode} | {name} | {statistics.median(ts) * 1e3:.1f} | "
                f"**{statistics.median(speedups):.2f}×** | "
                f"{min(speedups):.2f}–{max(speedups):.2f} | {errs[name]:.1e} |"
            )
    text = "\n".join(lines)
    print(text)
    return text


if __name__ == "__main__":
    main()
