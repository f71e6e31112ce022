"""Ours beside the peers a user would pick instead, on the same inputs, agreement checked first.

The standing comparison of issue 39. Model: a random Llama-shaped sequence classifier (8 layers,
d_model 512, 8 heads of 64, MLP 1376, vocabulary 32,000, float32, HF's SDPA attention),
converted with ``HookedRewardModel.from_pretrained``; CPU, ``--threads`` (default 1), methods
interleaved round by round, medians of ``--repeats`` rounds. Every row first checks that ours
and the peer give the same numbers (the ``agreement`` column), then times them.

Rows:

- **reward**: ``model.rewards(ids)`` against HF's forward (``logits``), batch 4 × ``--lengths``.
- **residual cache**: ``run_with_cache(ids, names_filter=…hook_resid_post)`` against HF's
  ``output_hidden_states=True``, 4 × 1,024.
- **full cache**: the TransformerLens user's default ``run_with_cache(ids)`` (every hook) against
  HF's hidden states, 4 × 1,024, with gradients off (TL's notebooks start with
  ``torch.set_grad_enabled(False)``) and on (TL's default: the output keeps its autograd graph;
  HF likewise): time, and memory in fresh processes (peak RSS above the process's level after
  building the model, sampled every 2 ms, against the bytes of the tensors the cache returns,
  counted once per storage). TransformerLens 4's bridge cannot be
  installed beside TL 3.9 and sae_lens; its figure is the issue's, not re-measured.
- **patching**: ``activation_patching`` of ``resid_pre`` (every layer × position) of one pair
  of ``--patch-lengths`` tokens against TransformerLens's own ``get_act_patch_resid_pre``
  (one forward per cell) and, where importable, nnsight (one trace per layer, the positions as
  batch rows), both timed on every ``--tl-stride``-th position and extrapolated to the grid.
- **token sweep**: ``token_sweep`` (``method="cached"``) against ``method="exact"`` on
  ``bench_sweep.py``'s shape; on the zoo's ``scalar`` model against one plain HF batch of every
  full sequence (the zoo's prompt, and a 48-word one).
- **loading** (``--loading``; writes a 2.3 GiB checkpoint to ``/tmp/rl_ckpt`` once):
  ``bench_real_size.py --memory`` on the Llama-3.2-1B shape in bf16.
- **CLI start**: ``reward-lens --help`` against a bare interpreter.

``--write`` puts the table into ``benchmarks/RESULTS.md`` between the markers
``<!-- bench_peers:start -->`` / ``<!-- bench_peers:end -->`` (with the date, load average and
threads); ``make bench`` runs this file with ``--write --loading --repeats 3``.
Usage: python benchmarks/bench_peers.py [--threads 1] [--repeats 5] [--write] [--loading]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
from datetime import date
from functools import partial
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")  # TL's patching prints a bar per cell

import torch  # noqa: E402

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from timing import interleaved_median  # noqa: E402

from reward_lens_tl import HookedRewardModel  # noqa: E402
from reward_lens_tl.testing import tiny_reward_model  # noqa: E402

VOCAB = 32000
START, END = "<!-- bench_peers:start -->", "<!-- bench_peers:end -->"
RESULTS = HERE / "RESULTS.md"


def build():
    """``(hf, ours)``: the 8-layer d512 Llama-shaped classifier (random weights)."""
    hf = tiny_reward_model(
        "llama",
        vocab_size=VOCAB,
        hidden_size=512,
        intermediate_size=1376,
        num_hidden_layers=8,
        num_attention_heads=8,
        num_key_value_heads=8,
        head_dim=64,
        max_position_embeddings=4096,
    )
    hf.config._attn_implementation = "sdpa"
    return hf.eval(), HookedRewardModel.from_pretrained(hf, n_ctx=4096)


def ids_of(batch: int, length: int, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(10, VOCAB, (batch, length), generator=gen)


def row(operation, ours, peer, ratio, agreement, note="") -> dict:
    return dict(
        operation=operation, ours=ours, peer=peer, ratio=ratio, agreement=agreement, note=note
    )


def ms(t: float) -> str:
    return f"{t * 1e3:.0f} ms" if t < 10 else f"{t:.1f} s"


def check(name: str, error: float, tol: float) -> str:
    if not error <= tol:
        raise SystemExit(f"{name}: ours and the peer disagree by {error:.2e} (> {tol:.0e})")
    return f"{error:.1e}"


# -- reward and caches ----------------------------------------------------------------------
def reward_rows(hf, model, lengths, repeats) -> list[dict]:
    out = []
    for length in lengths:
        ids = ids_of(4, length)
        with torch.no_grad():
            err = float((model.rewards(ids) - hf(input_ids=ids).logits[:, 0]).abs().max())
            best, _ = interleaved_median(
                {"hf": partial(hf, input_ids=ids), "ours": partial(model.rewards, ids)}, repeats
            )
        out.append(
            row(
                f"reward, 4 × {length:,}",
                ms(best["ours"]),
                f"HF (SDPA): {ms(best['hf'])}",
                best["ours"] / best["hf"],
                check("reward", err, 1e-4),
            )
        )
    return out


def cache_rows(hf, model, repeats, length=1024) -> list[dict]:
    """The residual cache and the full cache, in TL notebooks' mode (gradients off) and with
    gradients on (TL's default: the output keeps its graph); HF in the same mode."""
    ids = ids_of(4, length)
    resid = [f"blocks.{i}.hook_resid_post" for i in range(model.cfg.n_layers)]

    def hf_hidden():
        return hf(input_ids=ids, output_hidden_states=True).hidden_states

    with torch.no_grad():
        hidden = hf_hidden()
        scale = max(1.0, max(float(h.abs().max()) for h in hidden))  # rounding grows with it
        _, cache = model.run_with_cache(ids, names_filter=resid)
        err = max(float((cache[n] - hidden[i + 1]).abs().max()) for i, n in enumerate(resid[:-1]))
        _, full = model.run_with_cache(ids)
        err_full = max(
            float((full[n] - hidden[i + 1]).abs().max()) for i, n in enumerate(resid[:-1])
        )
        del cache, full
        best, _ = interleaved_median(
            {
                "hf": hf_hidden,
                "resid": lambda: model.run_with_cache(ids, names_filter=resid),
                "full": lambda: model.run_with_cache(ids),
            },
            max(3, repeats - 2),
        )
    with torch.enable_grad():
        grad, _ = interleaved_median(
            {"hf": hf_hidden, "full": lambda: model.run_with_cache(ids)}, max(3, repeats - 2)
        )
    full_name = f"default `run_with_cache(ids)` (every hook), 4 × {length:,}"
    return [
        row(
            f"cache of every layer's residual, 4 × {length:,}",
            ms(best["resid"]),
            f"HF, hidden states: {ms(best['hf'])}",
            best["resid"] / best["hf"],
            check("residual cache", err, 1e-5 * scale),
            "gradients off",
        ),
        row(
            full_name,
            ms(best["full"]),
            f"HF, hidden states: {ms(best['hf'])}",
            best["full"] / best["hf"],
            check("full cache", err_full, 1e-5 * scale),
            "gradients off (`torch.set_grad_enabled(False)`, as TL's notebooks); target ≤ 2×",
        ),
        row(
            full_name,
            ms(grad["full"]),
            f"HF, hidden states: {ms(grad['hf'])}",
            grad["full"] / grad["hf"],
            "as above",
            "gradients on (TL's default: the output keeps its graph), HF likewise",
        ),
    ]


def rss_gib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**30


def held_gib(tensors) -> float:
    """Bytes of `tensors`, each storage counted once (a cache names some tensors twice)."""
    seen, total = set(), 0
    for t in tensors:
        storage = t.untyped_storage()
        if storage.data_ptr() not in seen:
            seen.add(storage.data_ptr())
            total += storage.nbytes()
    return total / 2**30


def memory_child(job: str, length: int, grad: bool) -> None:
    """In a fresh process: peak RSS above the level after building, and the bytes returned."""
    torch.set_num_threads(1)
    torch.set_grad_enabled(grad)
    hf, model = build()
    ids = ids_of(4, length)
    base, peak, stop = rss_gib(), [0.0], threading.Event()

    def sample():
        while not stop.wait(0.002):
            peak[0] = max(peak[0], rss_gib() - base)

    sampler = threading.Thread(target=sample)
    sampler.start()
    if job == "ours":
        _, cache = model.run_with_cache(ids)
        held = held_gib(cache.values())
    else:
        hidden = hf(input_ids=ids, output_hidden_states=True).hidden_states
        held = held_gib(hidden)
    stop.set()
    sampler.join()
    peak[0] = max(peak[0], rss_gib() - base)
    print("@@" + json.dumps({"peak_gib": peak[0], "held_gib": held}), flush=True)


def memory_rows(length=1024) -> list[dict]:
    out = []
    for grad in (False, True):
        got = {}
        for job in ("hf", "ours"):
            argv = [sys.executable, __file__, "--child", job, "--tokens", str(length)]
            argv += ["--grad"] if grad else []
            text = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
            got[job] = json.loads(text.strip().splitlines()[-1][2:])
        ours, hf = got["ours"], got["hf"]
        over = ours["peak_gib"] - ours["held_gib"]
        out.append(
            row(
                f"default `run_with_cache(ids)`, memory, 4 × {length:,}",
                f"peak {ours['peak_gib']:.2f} GiB for {ours['held_gib']:.2f} GiB cached "
                f"({over:+.2f} GiB)",
                f"HF, hidden states: peak {hf['peak_gib']:.2f} GiB for {hf['held_gib']:.2f} GiB",
                ours["peak_gib"] / ours["held_gib"],
                "-",
                ("gradients on: the graph holds more; " if grad else "gradients off; ")
                + "target ≤ cached + one layer; ratio = peak / cached",
            )
        )
    return out


# -- patching --------------------------------------------------------------------------------
def patching_rows(hf, model, lengths, stride, repeats) -> list[dict]:
    from bench_patching import tl_subset

    try:
        from nnsight import NNsight
    except ImportError:
        NNsight = None
    out = []
    for length in lengths:
        clean, corrupted = ids_of(1, length, 1)[0], ids_of(1, length, 2)[0]
        n_layers = model.cfg.n_layers

        ours = partial(ours_patching, model, clean, corrupted)
        values = ours()  # [layer, pos]: the patched reward
        tl_run, index, full = tl_subset(model, clean, corrupted, "resid_pre", stride)
        tl_values = tl_run()
        ref = values[index["l"].tolist(), index["p"].tolist()]
        err = float((torch.as_tensor(tl_values) - ref).abs().max())
        fns = {"ours": ours, "tl": tl_run}
        nn_err = None
        if NNsight is not None:
            positions = list(range(0, length, stride))
            nn_run = partial(
                nnsight_patching, NNsight(hf), hf, clean, corrupted, n_layers, positions
            )
            nn_err = float((nn_run() - values[:, positions]).abs().max())
            fns["nnsight"] = nn_run
        best, _ = interleaved_median(fns, max(1, repeats - 2), warmup=0)  # (checked: warm)
        tl_whole = best["tl"] * full / len(index)
        if "nnsight" in best:  # timed on the same positions as TL, extrapolated alike
            best["nnsight"] *= full / len(index)
        peer = f"TL `get_act_patch_resid_pre`: {ms(tl_whole)} (×{tl_whole / best['ours']:.1f})"
        agreement = f"TL {check('patching vs TL', err, 1e-4)}"
        if nn_err is not None:
            slower = best["nnsight"] / best["ours"]
            peer += f"; nnsight, batched rows: {ms(best['nnsight'])} (×{slower:.1f})"
            agreement += f", nnsight {check('patching vs nnsight', nn_err, 1e-4)}"
        out.append(
            row(
                f"patching, resid_pre, {n_layers} × {length} cells",
                ms(best["ours"]),
                peer,
                best["ours"] / min([tl_whole] + ([best["nnsight"]] if "nnsight" in best else [])),
                agreement,
                f"peers timed on every {stride}th position, extrapolated",
            )
        )
    return out


def ours_patching(model, clean, corrupted):
    from reward_lens_tl.patching import activation_patching

    return activation_patching(
        model, clean, corrupted, site="resid_pre", alignment="exact", metric=lambda r: r
    ).values


def nnsight_patching(nn_model, hf, clean, corrupted, n_layers, positions):
    """nnsight's batched form: per layer one trace whose rows patch one position each."""
    with torch.no_grad():
        hidden = hf(input_ids=clean[None], output_hidden_states=True).hidden_states
    rows = torch.arange(len(positions))
    cols = torch.as_tensor(positions)
    results = []
    for layer in range(n_layers):
        with torch.no_grad(), nn_model.trace(corrupted[None].expand(len(positions), -1)):
            h = nn_model.model.layers[layer].input
            h[rows, cols] = hidden[layer][0, cols]
            results.append(nn_model.output.logits[:, 0].save())
    return torch.stack([torch.as_tensor(r) for r in results])


# -- token sweep -----------------------------------------------------------------------------
def sweep_rows(repeats) -> list[dict]:
    import bench_sweep

    from reward_lens_tl.sweep import token_candidates, token_sweep, vocabulary_candidates
    from reward_lens_tl.sweep.candidates import sweep_frame
    from reward_lens_tl.zoo import load_model, zoo_path

    model = bench_sweep.build()
    cands = token_candidates(model, range(6, 6 + 128))

    def sweep(method):
        return token_sweep(
            model, bench_sweep.PROMPT, cands, method=method, chunk_size=64, progress=False
        ).scores

    err = float((sweep("cached") - sweep("exact")).abs().max())
    best, _ = interleaved_median(
        {"exact": lambda: sweep("exact"), "cached": lambda: sweep("cached")}, max(3, repeats - 2)
    )
    out = [
        row(
            "token sweep, `bench_sweep.py` shape (128 candidates, 63-token prompt)",
            ms(best["cached"]),
            f"ours, exact scoring: {ms(best['exact'])}",
            best["cached"] / best["exact"],
            check("sweep", err, 1e-4),
            f"speed-up {best['exact'] / best['cached']:.1f}× (target ≥ 20×; bound ≈ 26×)",
        )
    ]
    zoo, hf = HookedRewardModel.from_pretrained(zoo_path("scalar")), load_model("scalar")
    zoo_cands = vocabulary_candidates(zoo)
    words = sorted(w for w in zoo.tokenizer.get_vocab() if w.isalpha())
    for prompt in ("how bake bread", " ".join(words[i % len(words)] for i in range(48))):
        frame = sweep_frame(zoo, prompt)
        pre, suf = list(frame.prompt_ids()), list(frame.suffix_ids())
        full = torch.tensor([pre + list(c) + suf for c in zoo_cands.ids])

        def hf_batch(full=full):
            with torch.no_grad():
                return hf(input_ids=full).logits[:, 0]

        def cached(prompt=prompt):
            return token_sweep(zoo, prompt, zoo_cands, progress=False).scores

        err = float((hf_batch() - cached()).abs().max())
        best, _ = interleaved_median({"hf": hf_batch, "ours": cached}, repeats + 2)
        bound = full.shape[1] / (full.shape[1] - len(pre))
        out.append(
            row(
                f"token sweep, zoo `scalar`, {len(zoo_cands)} candidates, prompt {len(pre)} tokens",
                ms(best["ours"]),
                f"one HF batch of the {full.shape[1]}-token sequences: {ms(best['hf'])}",
                best["ours"] / best["hf"],
                check("zoo sweep", err, 1e-4),
                f"token-count bound {bound:.1f}×",
            )
        )
    return out


# -- loading and start-up --------------------------------------------------------------------
def loading_row() -> dict:
    out = subprocess.run(
        [sys.executable, str(HERE / "bench_real_size.py"), "--memory", "--shape", "1b"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    cells = [c.strip() for c in out.strip().splitlines()[-1].strip("|").split("|")]
    # | shape | params | size | HF load | HF load + read | ours | mem ratio | time ratio | ...
    return row(
        "loading a Llama-3.2-1B-shaped bf16 checkpoint",
        cells[5],
        f"HF load + read: {cells[4]}; HF load alone: {cells[3]} (memory-mapped)",
        float(cells[7].strip("*×")),
        "weights bit-equal (tests/test_streaming.py)",
        f"time ratio; peak memory {cells[6]} HF's load alone (target ≤ 2× time)",
    )


def cli_row(repeats) -> dict:
    exe = Path(sys.executable).parent / "reward-lens"

    def run(argv):
        return lambda: subprocess.run(argv, capture_output=True, check=True)

    best, _ = interleaved_median(
        {"bare": run([sys.executable, "-c", "pass"]), "help": run([str(exe), "--help"])}, repeats
    )
    return row(
        "`reward-lens --help`",
        ms(best["help"]),
        f"bare interpreter: {ms(best['bare'])}",
        best["help"] / best["bare"],
        "-",
    )


def table(rows: list[dict], threads: int) -> str:
    load = os.getloadavg()
    lines = [
        f"Measured {date.today()}, CPU, {threads} thread(s), load average {load[0]:.1f} / "
        f"{load[1]:.1f} (1 / 5 min), medians of interleaved rounds "
        f"(`python benchmarks/bench_peers.py {' '.join(sys.argv[1:])}`).",
        "",
        "| operation | ours | peer | ours / peer | agreement (max \\|Δ\\|) | note |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['operation']} | {r['ours']} | {r['peer']} | **{r['ratio']:.2f}×** | "
            f"{r['agreement']} | {r['note']} |"
        )
    return "\n".join(lines)


def write_results(text: str) -> None:
    doc = RESULTS.read_text()
    block = f"{START}\n{text}\n{END}"
    if START in doc and END in doc:
        doc = doc[: doc.index(START)] + block + doc[doc.index(END) + len(END) :]
    else:
        doc = (
            doc.rstrip()
            + "\n\n## Against the peers (issue 39) — `bench_peers.py`\n\n"
            + block
            + "\n"
        )
    RESULTS.write_text(doc)


def main(argv=None) -> str:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 1024])
    parser.add_argument("--patch-lengths", type=int, nargs="+", default=[64, 512])
    parser.add_argument("--tl-stride", type=int, default=16)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--loading", action="store_true")
    parser.add_argument("--child", choices=["ours", "hf"], help=argparse.SUPPRESS)
    parser.add_argument("--tokens", type=int, default=1024, help=argparse.SUPPRESS)
    parser.add_argument("--grad", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        memory_child(args.child, args.tokens, args.grad)
        return ""
    torch.set_num_threads(args.threads)
    hf, model = build()
    rows = reward_rows(hf, model, args.lengths, args.repeats)
    rows += cache_rows(hf, model, args.repeats)
    rows += memory_rows()
    rows += patching_rows(hf, model, args.patch_lengths, args.tl_stride, args.repeats)
    rows += sweep_rows(args.repeats)
    if args.loading:
        rows.append(loading_row())
    rows.append(cli_row(args.repeats))
    text = table(rows, args.threads)
    print(text)
    if args.write:
        write_results(text)
    return text


if __name__ == "__main__":
    main()
