"""The two backends side by side: TransformerLens 3.9's `HookedRewardModel`, 4.3's bridge.

Each backend lives in its own environment (sae_lens pins TransformerLens < 4), so a driver
(``python benchmarks/bench_backends.py``, any of the two environments) writes the checkpoints
once and runs each environment's python as worker processes, alternating the backends round by
round (``.venv`` / ``.venv-tl4`` first in turn). Every figure is a ratio against plain HF
measured **in the same process** (fresh-process figures: in a fresh HF process of the same
environment, run next to it) (1 thread, the compared methods interleaved, medians), with
the 1-minute load average at the time it was taken and its parity: the largest |ours − HF| of
what the figure computes.

- boot, fresh process (one process per backend per round, another for HF in the same
  environment; peak memory needs a process of its own): import time, then
  `HookedRewardModel.from_pretrained(dir)` / `BridgeRewardModel.boot(dir)` + one reward against
  HF's `from_pretrained(dir)` + one forward; peak RSS (`VmHWM`) and its rise above the RSS after
  `import torch`. Parity: that first reward against HF's (loaded after the peak was read).
- boot, warm: the same, repeated in one process (imports and first-call costs paid).
- reward: a batch of 4 × 128 tokens against HF's forward. Parity: the rewards.
- cache: `run_with_cache` of every hook (4 × 128) against HF with hidden states. Parity: the
  rewards and every layer's `hook_resid_pre` against HF's hidden states.
- patching: TransformerLens's own `patching.get_act_patch_resid_pre` (one forward per cell) of
  the reward, one corrupted token, against the same cells patched into HF's forward with a
  pre-hook on each decoder layer (and a plain HF forward, for "forwards per cell"): every cell
  (4 layers × 64) at 64 tokens; at 512 tokens 4 layers × 9 positions (TL's ``index_df``), so
  per cell. Parity: the patched rewards.

Models (random Llama-shaped classifiers, float32, safetensors in a temporary directory):
8 layers, d512, vocabulary 32k (`bench_peers.py`'s) for boot, reward and cache; 4 layers, d256
for patching.

Usage:
    .venv/bin/python benchmarks/bench_backends.py [--rounds 2] [--boot-rounds 3] [--json F]
    .venv/bin/python benchmarks/bench_backends.py --table-from F   # the table again
    <env>/bin/python benchmarks/bench_backends.py --worker measure|boot-ours|boot-hf --models D
"""

from __future__ import annotations

import time

START = time.perf_counter()  # before the heavy imports: a fresh worker's import time

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

os.environ.setdefault("TQDM_DISABLE", "1")  # TransformerLens's patching loops draw a bar
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
VOCAB = 32000
ENVS = {"TL 3.9 HookedRewardModel": ".venv", "TL 4.3 bridge (BridgeRewardModel)": ".venv-tl4"}
BIG = dict(
    hidden_size=512,
    intermediate_size=1376,
    num_hidden_layers=8,
    num_attention_heads=8,
    num_key_value_heads=8,
    head_dim=64,
    max_position_embeddings=1024,
)
PATCH = dict(BIG, hidden_size=256, intermediate_size=688, num_hidden_layers=4)
PATCH.update(num_attention_heads=4, num_key_value_heads=4)
RESULT = "RESULT "


# ---------------------------------------------------------------- worker side


def bridge_backend() -> bool:
    import importlib.metadata

    return int(importlib.metadata.version("transformer-lens").split(".")[0]) >= 4


def checkpoint(root: Path, name: str, config: dict) -> Path:
    """A random Llama reward model saved as safetensors (with a pad token), and its path."""
    from reward_lens_tl.testing import tiny_reward_model

    hf = tiny_reward_model("llama", vocab_size=VOCAB, **config)
    hf.config.pad_token_id = 0
    path = root / name
    hf.save_pretrained(path, safe_serialization=True)
    return path


def load_hf(path: Path):
    import transformers

    return transformers.AutoModelForSequenceClassification.from_pretrained(
        path, local_files_only=True, trust_remote_code=False, attn_implementation="sdpa"
    ).eval()


def load_ours(path: Path):
    if bridge_backend():
        from reward_lens_tl.bridge import BridgeRewardModel

        return BridgeRewardModel.boot(path)
    from reward_lens_tl import HookedRewardModel

    return HookedRewardModel.from_pretrained(path, n_ctx=1024)


def rewards(model, ids):
    """The reward of each (unpadded) row."""
    return model.rewards(ids).reshape(len(ids), -1)[:, 0]


def ids_of(batch: int, length: int, seed: int = 0):
    import torch

    gen = torch.Generator().manual_seed(seed)
    return torch.randint(10, VOCAB, (batch, length), generator=gen)


def vm_kib(field: str) -> int:
    """A ``/proc/self/status`` memory field (``VmHWM``, ``VmRSS``) in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def load1() -> float:
    return os.getloadavg()[0]


def boot_fresh(models: Path, who: str) -> dict:
    """Import, boot and run once in this fresh process; time, peak RSS and parity."""
    import torch

    rss_torch = vm_kib("VmRSS")
    if who == "ours" and bridge_backend():
        from reward_lens_tl.bridge import BridgeRewardModel  # noqa: F401
    elif who == "ours":
        from reward_lens_tl import HookedRewardModel  # noqa: F401
    import transformers  # noqa: F401

    imported, rss_imports = time.perf_counter(), vm_kib("VmRSS")
    torch.set_num_threads(1)
    ids = ids_of(2, 64)
    with torch.no_grad():
        if who == "ours":
            model = load_ours(models / "big")
            out = rewards(model, ids)
        else:
            model = load_hf(models / "big")
            out = model(ids).logits[:, 0]
    booted, peak = time.perf_counter(), vm_kib("VmHWM")
    parity = None
    if who == "ours":
        with torch.no_grad():
            parity = float((out - load_hf(models / "big")(ids).logits[:, 0]).abs().max())
    return dict(import_s=imported - START, boot_s=booted - imported, peak_kib=peak,
                rise_kib=peak - rss_torch, imports_kib=rss_imports - rss_torch, parity=parity,
                load=load1())  # fmt: skip


def timed(fns: dict, repeats: int, warmup: int = 1) -> dict:
    """Interleaved medians (seconds) and the load average when they were taken."""
    from timing import interleaved_median

    median, _ = interleaved_median(fns, repeats=repeats, warmup=warmup)
    return dict(median, load=load1())


def figure(t: dict, ours: str, hf: str, parity: float | None) -> dict:
    return dict(ours_s=t[ours], hf_s=t[hf], ratio=t[ours] / t[hf], parity=parity, load=t["load"])


def hf_patched(hf, corrupted, clean_hidden, cells):
    """The reward of ``corrupted`` with each (layer, pos) of HF's residual stream patched."""
    import torch

    values = []
    for layer, pos in cells:

        def patch(module, args, kwargs, layer=layer, pos=pos):
            hidden = args[0] if args else kwargs["hidden_states"]
            hidden[:, pos] = clean_hidden[layer][:, pos]  # in place, as TL's setter

        handle = hf.model.layers[layer].register_forward_pre_hook(patch, with_kwargs=True)
        try:
            values.append(hf(corrupted).logits[0, 0])
        finally:
            handle.remove()
    return torch.stack(values)


def patching_figure(model, hf, length: int, positions, repeats: int) -> dict:
    """TL's `get_act_patch_resid_pre` on ``cells`` against the same cells patched into HF."""
    import pandas as pd
    from transformer_lens import patching

    clean = ids_of(1, length, seed=1)
    corrupted = clean.clone()
    corrupted[0, length // 2] = 11
    _, clean_cache = model.run_with_cache(clean, names_filter=lambda n: n.endswith("resid_pre"))
    clean_hidden = hf(clean, output_hidden_states=True).hidden_states
    cells = [(layer, pos) for layer in range(len(hf.model.layers)) for pos in positions]
    frame = pd.DataFrame(cells, columns=["layer", "pos"])

    def tl(frame=frame):
        return patching.get_act_patch_resid_pre(
            model, corrupted, clean_cache, lambda out: out[0, -1, 0],
            index_axis_names=None, index_df=frame,
        )  # fmt: skip

    grid, ref = tl(), hf_patched(hf, corrupted, clean_hidden, cells)  # also the warm-up
    parity = float((grid - ref).abs().max())
    t = timed(
        {
            "tl": tl,
            "hf_patch": lambda: hf_patched(hf, corrupted, clean_hidden, cells),
            "hf_forward": lambda: hf(corrupted),
        },
        repeats=repeats,
        warmup=0,
    )
    result = figure(t, "tl", "hf_patch", parity)
    result.update(cells=len(cells), per_cell_forwards=t["tl"] / len(cells) / t["hf_forward"])
    result["hf_per_cell_forwards"] = t["hf_patch"] / len(cells) / t["hf_forward"]
    return result


def batched_patching_figure(model, hf, length: int, positions, repeats: int) -> dict:
    """The package's `activation_patching` (`resid_pre`) on the same cells as HF's patch."""
    from reward_lens_tl.patching import activation_patching

    clean = ids_of(1, length, seed=1)
    corrupted = clean.clone()
    corrupted[0, length // 2] = 11
    clean_hidden = hf(clean, output_hidden_states=True).hidden_states
    cells = [(layer, pos) for layer in range(len(hf.model.layers)) for pos in positions]
    options = dict(site="resid_pre", mode="denoising", positions=list(positions))

    def ours():
        return activation_patching(model, clean[0], corrupted[0], **options)

    grid, ref = ours().rewards, hf_patched(hf, corrupted, clean_hidden, cells)  # also warm-up
    parity = float((grid.reshape(-1) - ref).abs().max())
    t = timed(
        {
            "ours": ours,
            "hf_patch": lambda: hf_patched(hf, corrupted, clean_hidden, cells),
            "hf_forward": lambda: hf(corrupted),
        },
        repeats=repeats,
        warmup=0,
    )
    result = figure(t, "ours", "hf_patch", parity)
    result.update(cells=len(cells), per_cell_forwards=t["ours"] / len(cells) / t["hf_forward"])
    return result


def cache_parity(model, hf, ids) -> float:
    """Rewards and every layer's resid_pre of a full `run_with_cache` against HF's."""
    out, cache = model.run_with_cache(ids, return_type="reward")
    ref = hf(ids, output_hidden_states=True)
    worst = float((out.reshape(len(ids), -1)[:, 0] - ref.logits[:, 0]).abs().max())
    for layer in range(len(hf.model.layers)):
        diff = cache[f"blocks.{layer}.hook_resid_pre"] - ref.hidden_states[layer]
        worst = max(worst, float(diff.abs().max()))
    return worst


def measure(models: Path, repeats: int, long_repeats: int) -> dict:
    """Every warm figure of one backend against HF in this process."""
    import torch

    torch.set_num_threads(1)
    torch.set_grad_enabled(False)
    big, small, probe = models / "big", models / "patch", ids_of(2, 64)
    results = {}

    first = rewards(load_ours(big), probe)
    boot_parity = float((first - load_hf(big)(probe).logits[:, 0]).abs().max())
    t = timed(
        {"ours": lambda: rewards(load_ours(big), probe), "hf": lambda: load_hf(big)(probe)}, 3
    )
    results["boot_warm"] = figure(t, "ours", "hf", boot_parity)

    hf, model, ids = load_hf(big), load_ours(big), ids_of(4, 128)
    parity = float((rewards(model, ids) - hf(ids).logits[:, 0]).abs().max())
    t = timed({"ours": lambda: rewards(model, ids), "hf": lambda: hf(ids)}, repeats)
    results["reward"] = figure(t, "ours", "hf", parity)
    parity = cache_parity(model, hf, ids)
    results["cache_hooks"] = len(model.run_with_cache(ids[:, :4])[1].keys())
    t = timed(
        {
            "ours": lambda: model.run_with_cache(ids),
            "hf": lambda: hf(ids, output_hidden_states=True),
        },
        repeats,
    )
    results["cache"] = figure(t, "ours", "hf", parity)
    del hf, model

    hf, model = load_hf(small), load_ours(small)
    results["patch64"] = patching_figure(model, hf, 64, range(64), repeats)
    positions = sorted({*range(0, 512, 512 // 6), 256, 511})
    results["patch512"] = patching_figure(model, hf, 512, positions, long_repeats)
    results["batched64"] = batched_patching_figure(model, hf, 64, range(64), repeats)
    results["batched512"] = batched_patching_figure(model, hf, 512, positions, long_repeats)
    return results


def worker(args) -> None:
    if args.worker == "measure":
        result = measure(Path(args.models), args.repeats, args.long_repeats)
    else:
        result = boot_fresh(Path(args.models), args.worker.removeprefix("boot-"))
    import importlib.metadata

    import torch

    result["versions"] = dict(
        tl=importlib.metadata.version("transformer-lens"), torch=torch.__version__
    )
    print(RESULT + json.dumps(result), flush=True)


# ---------------------------------------------------------------- driver side


def run_worker(env: str, task: str, models: Path, args) -> dict:
    python = ROOT / env / "bin" / "python"
    argv = [str(python), __file__, "--worker", task, "--models", str(models)]
    argv += ["--repeats", str(args.repeats), "--long-repeats", str(args.long_repeats)]
    child_env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TQDM_DISABLE="1",
                     PYTHONPATH=str(ROOT))  # fmt: skip
    done = subprocess.run(argv, env=child_env, cwd=ROOT, capture_output=True, text=True)
    lines = [x for x in done.stdout.splitlines() if x.startswith(RESULT)]
    if done.returncode or not lines:
        raise RuntimeError(f"{env} {task} failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1].removeprefix(RESULT))


def collect(args) -> dict:
    """Every worker run, backends alternating first round by round."""
    import torch

    torch.manual_seed(0)
    models = Path(tempfile.mkdtemp(prefix="bench_backends_"))
    try:
        checkpoint(models, "big", BIG)
        checkpoint(models, "patch", PATCH)
        return alternate(models, args)
    finally:
        shutil.rmtree(models, ignore_errors=True)


def alternate(models: Path, args) -> dict:
    """The worker runs of every backend, which goes first alternating round by round."""
    names = [n for n in ENVS if (ROOT / ENVS[n] / "bin" / "python").exists()]
    runs: dict = {n: {"boot-ours": [], "boot-hf": [], "measure": []} for n in names}
    for r in range(max(args.rounds, args.boot_rounds)):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            tasks = ["boot-ours", "boot-hf"] if r % 2 == 0 else ["boot-hf", "boot-ours"]
            tasks = tasks if r < args.boot_rounds else []
            for task in tasks + (["measure"] if r < args.rounds else []):
                runs[name][task].append(run_worker(ENVS[name], task, models, args))
                print(f"round {r}: {name} {task} done (load {load1():.2f})", file=sys.stderr)
    return runs


def med(values) -> float:
    return statistics.median(values)


def span(values, fmt: str = "{:.2f}") -> str:
    low, high = fmt.format(min(values)), fmt.format(max(values))
    return low if low == high else f"{low}–{high}"


def worst(values) -> str:
    return f"{max(values):.1e}"


def fresh_rows(runs: dict) -> list[tuple[str, ...]]:
    """Process start to first reward, and peak memory, of the fresh-process boots."""
    ours, hf = runs["boot-ours"], runs["boot-hf"]

    def total(x: dict) -> float:
        return x["import_s"] + x["boot_s"]

    first = [total(o) / total(h) for o, h in zip(ours, hf, strict=True)]
    peak = [o["peak_kib"] / h["peak_kib"] for o, h in zip(ours, hf, strict=True)]
    rise = [o["rise_kib"] / h["rise_kib"] for o, h in zip(ours, hf, strict=True)]
    loads, mib = span([x["load"] for x in ours + hf]), 1024
    return [
        ("first reward, fresh process (imports + boot + forward)",
         f"{med(total(o) for o in ours):.1f} s ({med(o['import_s'] for o in ours):.1f} s "
         f"imports) = {med(first):.2f}× HF", worst([o["parity"] for o in ours]), loads),
        ("peak RSS of that process (VmHWM)", f"{med(o['peak_kib'] for o in ours) / mib:,.0f} MiB"
         f" = {med(peak):.2f}× HF", "", loads),
        ("… above the RSS after `import torch`", f"{med(o['rise_kib'] for o in ours) / mib:,.0f}"
         f" MiB = {med(rise):.2f}× HF", "", loads),
    ]  # fmt: skip


def warm_rows(runs: list[dict]) -> list[tuple[str, ...]]:
    """The in-process figures of one backend, medians over its measure workers."""

    def cell(key: str, suffix: str = "") -> tuple[str, str, str]:
        figs = [r[key] for r in runs]
        text = f"{med(f['ours_s'] for f in figs) * 1e3:,.0f} ms = "
        text += f"{med(f['ratio'] for f in figs):.2f}× HF{suffix}"
        if "per_cell_forwards" in figs[0]:
            text += f"; {med(f['per_cell_forwards'] for f in figs):.2f} HF forwards per cell"
        return text, worst([f["parity"] for f in figs]), span([f["load"] for f in figs])

    cells = [runs[0][key]["cells"] for key in ("patch64", "patch512", "batched64", "batched512")]
    return [
        ("boot + first reward, warm (in-process)", *cell("boot_warm")),
        ("reward, 4 × 128", *cell("reward")),
        ("run_with_cache, every hook, 4 × 128",
         *cell("cache", f" with hidden states ({runs[0]['cache_hooks']} hooks)")),
        (f"TL patching resid_pre, 64 tokens ({cells[0]} cells)", *cell("patch64")),
        (f"TL patching resid_pre, 512 tokens ({cells[1]} cells)", *cell("patch512")),
        (f"batched patching resid_pre, 64 tokens ({cells[2]} cells)", *cell("batched64")),
        (f"batched patching resid_pre, 512 tokens ({cells[3]} cells)", *cell("batched512")),
    ]  # fmt: skip


def table(runs: dict) -> str:
    names = list(runs)
    per_backend = {n: fresh_rows(runs[n]) + warm_rows(runs[n]["measure"]) for n in names}
    header = "| figure | " + " | ".join(f"{n} | parity | load" for n in names) + " |"
    lines = [header, "|---" * (1 + 3 * len(names)) + "|"]
    for i, (label, *_) in enumerate(per_backend[names[0]]):
        cells = [" | ".join(per_backend[n][i][1:]) for n in names]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    hf_lines = []
    for n in names:
        m, ours, hf = runs[n]["measure"], runs[n]["boot-ours"], runs[n]["boot-hf"]
        hf_lines.append(
            f"{n}: versions {m[0]['versions']}; HF fresh: first reward "
            f"{med(h['import_s'] + h['boot_s'] for h in hf):.1f} s, peak "
            f"{med(h['peak_kib'] for h in hf) / 1024:,.0f} MiB; RSS the imports add above torch: "
            f"ours {med(o.get('imports_kib', 0) for o in ours) / 1024:,.0f} MiB, HF "
            f"{med(h.get('imports_kib', 0) for h in hf) / 1024:,.0f} MiB; HF's patched cell = "
            f"{med(r['patch64']['hf_per_cell_forwards'] for r in m):.2f} (64) / "
            f"{med(r['patch512']['hf_per_cell_forwards'] for r in m):.2f} (512) HF forwards"
        )
    return "\n".join(lines + [""] + hf_lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", choices=["measure", "boot-ours", "boot-hf"])
    parser.add_argument("--models", help="(worker) the checkpoints' directory")
    parser.add_argument("--rounds", type=int, default=2, help="measure workers per backend")
    parser.add_argument("--boot-rounds", type=int, default=3, help="fresh boots per backend")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds per figure")
    parser.add_argument("--long-repeats", type=int, default=1, help="the same at 512 tokens")
    parser.add_argument("--json", help="also write every worker's raw figures here")
    parser.add_argument("--table-from", help="print the table of an earlier --json file")
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    if args.table_from:
        print(table(json.loads(Path(args.table_from).read_text())))
        return
    runs = collect(args)
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))
    print(table(runs))
    print(f"\nload average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
