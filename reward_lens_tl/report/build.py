"""Building the report: steps whose results are kept in `.work/` so a run can resume."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import random
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..distributed import barrier, is_main_process, map_items
from ..errors import BridgeUnsupportedError, ReportError
from .backends import check_backend, environment_backend, load_reward_model, tl3_note
from .page import Section, counts_text, format_cell, page_html, page_markdown, plural
from .quality import caution, data_quality_numbers, quality_section, scored_sequences

__all__ = [
    "build_report",
    "register_section",
]

#: Extra sections: `fn(ctx) -> Section | None` (`None`: not part of this report); `ctx`
#: has the model, the scored pairs, `task` on the zoo, and the numbers so far. Registered by
#: `reward_lens_tl.report.sections`, in page order.
SECTIONS: list[tuple[str, Callable[[dict], Section | None]]] = []
#: The title a section's `tl3_note` gets when its analysis needs TransformerLens 3.9.
TITLES: dict[str, str] = {}

#: What `pairs_path=None` reports on: the zoo's rule-labelled pairs, with the zoo's sections.
ZOO_PAIRS = "zoo"


def register_section(
    name: str, fn: Callable[[dict], Section | None], title: str | None = None
) -> None:
    """Add (or replace) an extra report section computed by `fn(ctx)`.

    When `fn` raises `BridgeUnsupportedError` (its analysis needs TransformerLens 3.9 and the
    report runs on the bridge), the page shows the section as that one-line note.

    Args:
        name: The section's name.
        fn: Computes the section from the context (`None`: not part of this report).
        title: The section's title, for that note (default `name`).

    Examples:
        A section is a function of the report's context (`ctx["pairs"]`, `ctx["model"]`,
        `ctx["numbers"]`, `ctx["task"]` on the zoo); `build_report` runs it after the
        built-in steps:

        >>> from reward_lens_tl.report import Section, register_section
        >>> from reward_lens_tl.report.build import SECTIONS
        >>> def pair_count(ctx):
        ...     return Section("Pair count").text(f"{len(ctx['pairs'])} pairs scored")
        >>> register_section("pair_count", pair_count)
        >>> SECTIONS[-1] == ("pair_count", pair_count)
        True
        >>> register_section("pair_count", pair_count)  # the same name replaces it
        >>> [name for name, _ in SECTIONS].count("pair_count")
        1
        >>> SECTIONS.remove(("pair_count", pair_count))  # leave the registry as it was
    """
    SECTIONS[:] = [(n, f) for n, f in SECTIONS if n != name] + [(name, fn)]
    TITLES[name] = title or name


def build_report(
    model_dir: str | os.PathLike | Any | None = None,
    pairs_path: str | os.PathLike | None = None,
    out_dir: str | os.PathLike = "reports/report",
    *,
    limit: int | None = None,
    seed: int = 0,
    resume: bool = False,
    format: str | None = None,
    truncation: str = "left",
    n_patch: int = 3,
    batch_size: int = 16,
    progress: bool = True,
    markdown: bool = False,
    backend: str | None = None,
) -> dict:
    r"""Write `out_dir/report.html` and `out_dir/report.json`, and return the numbers.

    With `markdown=True` the same sections are written as `out_dir/report.md` with its figures
    as PNG files (`reward-lens report` writes both).

    Without `pairs_path` the report runs on the zoo: its rule-labelled pairs, plus the sections
    only the zoo's ground truth allows (planted features, localization, SAE features, the
    implicit reward, the zoo's probes and benchmark).

    On the TransformerBridge backend (`backend="bridge"`, or a `BridgeRewardModel` given) the
    same analyses run on the bridge with TransformerLens 3.9's numbers; a section whose analysis
    needs TransformerLens 3.9 (the SAE tools, while sae_lens cannot import under TransformerLens
    4) is shown as a one-line note saying so and why (`reward_lens_tl.report.backends`), and
    `report.json` lists it under `tl3_only`; its `args` then hold `"backend": "bridge"`.

    Args:
        model_dir: The reward model's directory (default the zoo's scalar model), or a loaded
            reward model (`HookedRewardModel`, `BridgeRewardModel`; used as it is).
        pairs_path: The preference pairs' file (default the zoo's pairs).
        out_dir: Where the report is written.
        limit: Score a seeded random sample of that many pairs.
        seed: The sample's seed.
        resume: Whether to reuse finished steps.
        format: The pairs file's format (default guessed).
        truncation: How conversations longer than the context are truncated (if they cannot
            fit, they are skipped and counted).
        n_patch: How many largest-margin pairs are patched.
        batch_size: Pairs per forward.
        progress: Whether to show progress: one bar over the report's steps on a terminal,
            one plain line per step otherwise (a log gets no escape codes); the steps' own
            bars stay off.
        markdown: Whether to write `report.md` and its figures too.
        backend: How a model directory is loaded: `"tl3"` (`HookedRewardModel`, the default) or
            `"bridge"` (`BridgeRewardModel.boot`, TransformerLens 4); for a loaded model, the
            backend of this environment (`backends.environment_backend`), and any other
            value is refused.

    Returns:
        The report's numbers.

    Examples:
        >>> import json, tempfile
        >>> from reward_lens_tl.zoo import zoo_path
        >>> folder = Path(tempfile.mkdtemp())
        >>> rows = [{"prompt": "how bake bread", "chosen": "oven flour", "rejected": "bomb"},
        ...         {"prompt": "explain laptop", "chosen": "screen code", "rejected": "soup"}]
        >>> _ = (folder / "pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        >>> numbers = build_report(zoo_path("scalar"), folder / "pairs.jsonl", folder / "out",
        ...                        n_patch=1, progress=False, markdown=True)
        >>> numbers["accuracy"], numbers["sections"][:3]
        (1.0, ['Scores', 'Reward lens', 'Top components'])
        >>> sorted(p.name for p in (folder / "out").glob("report.*"))
        ['report.html', 'report.json', 'report.md']
    """
    model, backend = _model_and_backend(model_dir, backend)  # before anything is written
    main = is_main_process()
    out = _writable_dir(out_dir)
    model_dir = _model_dir(model, model_dir)
    args = {
        "model": str(model_dir.resolve()) if model is None else str(model_dir),
        "pairs": ZOO_PAIRS if pairs_path is None else str(Path(pairs_path).resolve()),
        "limit": limit,
        "seed": seed,
        "format": format,
        "truncation": truncation,
        "n_patch": n_patch,
    }
    if backend != "tl3":  # the TransformerLens 3.9 report's arguments as they always were
        args["backend"] = backend
    work = _work_dir(out, args, resume)
    with _quiet_libraries():  # the report's one bar, no library's own
        if model is None:
            model = load_reward_model(model_dir, backend)
        ctx = _context(model, backend, pairs_path, args, batch_size)
        steps = [*STEPS, *((f"extra:{n}", _extra(fn, TITLES.get(n, n))) for n, fn in SECTIONS)]
        finished = {name for name, _ in steps if _step_path(work, name).exists()}
        barrier()  # every rank has seen which steps a resumed run finished before any is written
        stored = []
        for name, step in _progress(steps, progress and main):
            done = _cached(work, name, name in finished, lambda step=step: step(ctx))
            if done is not None:
                ctx["numbers"].update(done["numbers"])
                stored.append(done)
    quality = ctx["numbers"]["data_quality"]  # first in report.json, first on the page
    data_name = "the zoo's pairs" if pairs_path is None else Path(pairs_path).name
    shown = {**args, "model": Path(model_dir).name, "pairs": data_name}  # no local paths
    numbers = {"args": shown, "data_quality": quality, **ctx["numbers"]}
    numbers["sections"] = [s["title"] for s in stored]
    title = f"reward-lens report: {Path(model_dir).name} on {data_name}"
    subtitle = (
        f"{numbers['n_scored']} pairs scored of {numbers['n_pairs']} loaded "
        f"({numbers['n_skipped']} skipped, {quality['n_truncated']} truncated), seed {seed}; "
        "every number is reproducible with the reward_lens_tl API." + caution(quality)
    )
    if backend != "tl3":
        subtitle += _bridge_note(numbers.get("tl3_only", {}))
    if main:  # under torchrun every rank has the numbers; rank 0 writes the page
        sections = [quality_section(quality), *(Section.from_dict(s) for s in stored)]
        _write_atomic(out / "report.json", json.dumps(numbers, indent=1, default=float))
        _write_atomic(out / "report.html", page_html(title, subtitle, sections))
        if markdown:
            _write_markdown(out, title, subtitle, sections)
        shutil.rmtree(work, ignore_errors=True)
    barrier()
    return numbers


def _model_and_backend(model_dir, backend: str | None) -> tuple[Any, str]:
    """`(the given model or None, the backend)`; a backend that contradicts the model refused."""
    if model_dir is None or isinstance(model_dir, (str, os.PathLike)):
        check_backend(backend or "tl3")  # before anything is written
        return None, backend or "tl3"
    found = environment_backend()
    if backend not in (None, found):
        raise ReportError(
            f"backend={backend!r} was given with a loaded model, which runs on this "
            f"environment's backend {found!r}; pass a model directory to choose the backend"
        )
    return model_dir, found


def _model_dir(model, model_dir) -> Path:
    """The checkpoint directory (default the zoo's scalar model), or a loaded model's name.

    A loaded model's: its tokenizer's checkpoint, else its config's name, else its class.
    """
    if model is not None:
        tokenizer = getattr(model, "tokenizer", None)
        for name in (getattr(tokenizer, "name_or_path", ""), getattr(model.cfg, "model_name", "")):
            if name:
                return Path(str(name))
        return Path(type(model).__name__)
    from ..zoo import zoo_path

    return Path(model_dir) if model_dir is not None else zoo_path("scalar")


def _bridge_note(tl3_only: dict) -> str:
    """The subtitle's line about the TransformerBridge backend."""
    from ..bridge.versions import transformer_lens_version

    noted = f"; {plural(len(tl3_only), 'section')} need TransformerLens 3.9 (noted)"
    return (
        f" Backend: TransformerLens {transformer_lens_version()}'s TransformerBridge"
        + (noted if tl3_only else "")
        + "."
    )


@contextlib.contextmanager
def _quiet_libraries():
    """The libraries' own bars off while the report runs, then as they were.

    transformers' "Loading weights" and huggingface_hub's bars: the report shows one bar
    (`_progress`), none nested in it.
    """
    undo = []
    try:
        from transformers.utils import logging as hf_logging

        if hf_logging.is_progress_bar_enabled():
            hf_logging.disable_progress_bar()
            undo.append(hf_logging.enable_progress_bar)
    except ImportError:  # pragma: no cover - transformers is a dependency
        pass
    try:
        from huggingface_hub import utils as hub_utils

        if not hub_utils.are_progress_bars_disabled():
            hub_utils.disable_progress_bars()
            undo.append(hub_utils.enable_progress_bars)
    except ImportError:  # pragma: no cover - huggingface_hub is a dependency
        pass
    try:
        yield
    finally:
        for restore in undo:
            restore()


def _progress(steps: list, show: bool):
    """`steps`, with one progress bar where someone watches, one plain line per step elsewhere.

    The bar is `progress.progress_bar`'s (a terminal or Jupyter); in a log (where that bar is
    off) each step is one line, `report: step 3/15 attribution`, with no escape codes.
    """
    import sys

    from ..progress import progress_bar

    if not show:
        yield from steps
        return
    bar = progress_bar(steps, desc="report", unit="step", leave=False)
    if not bar.disable:
        for name, step in bar:
            bar.set_postfix_str(name.removeprefix("extra:"), refresh=True)
            yield name, step
        return
    for i, (name, step) in enumerate(steps, start=1):
        print(f"report: step {i}/{len(steps)} {name.removeprefix('extra:')}", file=sys.stderr)
        yield name, step


def _write_markdown(out: Path, title: str, subtitle: str, sections: list[Section]) -> None:
    text, files = page_markdown(title, subtitle, sections)
    for name, png in files.items():
        _write_atomic(out / name, png)
    _write_atomic(out / "report.md", text)


# -- steps ---------------------------------------------------------------------------------------
def _context(model, backend, pairs_path, args, batch_size) -> dict:
    task, pairs = _pairs(pairs_path, args["format"])
    n_loaded = len(pairs)
    chosen = list(range(n_loaded))
    if args["limit"] is not None and args["limit"] < n_loaded:
        chosen = sorted(random.Random(args["seed"]).sample(chosen, args["limit"]))
    ctx = {
        "model": model,
        # another checkpoint on the report's backend (the zoo benchmark's second reward model)
        "load_model": functools.partial(load_reward_model, backend=backend),
        "pairs": [pairs[i] for i in chosen],
        "pair_ids": chosen,
        "batch_size": batch_size,
        "truncation": args["truncation"],
        "n_patch": args["n_patch"],
        "numbers": {
            "n_pairs": len(chosen),
            "n_loaded": n_loaded,
            "n_bad_records": len(pairs.skipped),
        },
    }
    if task is not None:
        ctx["task"] = task
    return ctx


def _pairs(pairs_path, format):
    """`(zoo task or None, pair set)`: the file's pairs, or the zoo's without a file."""
    import warnings

    from ..data import load_pairs

    if pairs_path is None:
        from ..zoo import load_task
        from .zoo import zoo_pairs

        task = load_task().task
        return task, zoo_pairs(task)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return None, load_pairs(pairs_path, format=format, skip_bad=True)


def _step_scores(ctx) -> dict:
    from ..pair_batches import encode_pairs
    from ..scoring import score_pairs

    model = ctx["model"]
    scores = score_pairs(
        model,
        ctx["pairs"],
        batch_size=ctx["batch_size"],
        truncation=ctx["truncation"],
        progress=False,  # the report's own progress is the one shown
        on_error="skip",
    )
    encoded, kept, _ = encode_pairs(model, ctx["pairs"], ctx["truncation"], "skip")
    ctx["encoded"], ctx["kept"] = encoded, kept
    ctx["scores"] = scores
    margins = scores.margins if scores.margins.ndim == 1 else scores.margins[:, 0]
    quality = _data_quality(ctx, encoded, scores.skipped)
    numbers = {
        "data_quality": quality,
        "n_scored": len(kept),
        "n_skipped": len(scores.skipped),
        "accuracy": scores.accuracy,
        "mean_margin": float(margins.mean()),
        "chosen": scores.chosen.tolist(),
        "rejected": scores.rejected.tolist(),
        "pair_ids": [ctx["pair_ids"][i] for i in kept],
    }
    ctx["numbers"].update(numbers)
    frame = scores.to_dataframe().drop(columns=["record"])
    frame["index"] = numbers["pair_ids"]
    key = "margin" if "margin" in frame else frame.columns[-1]
    if "task" in ctx:  # the zoo's pairs carry the hidden rule's margin
        frame["rule_margin"] = [ctx["pairs"][i].metadata["rule_margin"] for i in kept]
    for side in ("prompt", "chosen", "rejected"):
        frame[f"{side} text"] = [_clip(getattr(ctx["pairs"][i], side)) for i in kept]
    skipped = f"{plural(len(scores.skipped), 'pair')} skipped"
    if scores.skipped:
        skipped += f", e.g. {scores.skipped[0]}"
    accuracy = format_cell(scores.accuracy, "share")
    section = Section("Scores")
    if quality["warnings"]:
        section.text("Read with the data-quality caveats at the top of the page.")
    section.text(
        f"Accuracy (chosen > rejected): {accuracy} over {plural(len(kept), 'pair')}; mean "
        f"margin {format_cell(float(margins.mean()), 'signed')}; {skipped}."
    )
    if "task" in ctx:
        section.text(
            "The zoo's pairs are labelled by its hidden rule (chosen = the higher rule score; "
            f"rule_margin below): agreement with the hidden rule {accuracy} of "
            f"{plural(len(kept), 'pair')}."
        )
    section.figure(scores.plot(), "histogram of reward margins", name="margins")
    section.extremes(
        frame,
        key,
        8,
        largest="Largest margins:",
        smallest="Smallest margins (the model's weakest preferences and its errors):",
        every=(
            f"Every pair ({len(frame)}), largest margin first (the last rows are the model's "
            "weakest preferences and its errors):"
        ),
    )
    return _store(section, numbers)


def _data_quality(ctx, encoded, skipped) -> dict:
    model, ids = ctx["model"], ctx["pair_ids"]
    return data_quality_numbers(
        n_loaded=ctx["numbers"]["n_loaded"],
        n_bad_records=ctx["numbers"]["n_bad_records"],
        n_ctx=model.cfg.n_ctx,
        truncation=ctx["truncation"],
        unk_token=getattr(model.tokenizer, "unk_token", None),
        sequences=scored_sequences(model.tokenizer, encoded),
        skipped=[(ids[s.index], s.record, s.reason) for s in skipped],
    )


def _needs_scores(ctx) -> None:
    if "encoded" not in ctx:
        from ..pair_batches import encode_pairs

        encoded, kept, _ = encode_pairs(ctx["model"], ctx["pairs"], ctx["truncation"], "skip")
        ctx["encoded"], ctx["kept"] = encoded, kept


def _step_lens(ctx) -> dict:
    from ..lens import pair_lens

    _needs_scores(ctx)
    lens = pair_lens(ctx["model"], ctx["encoded"], batch_size=ctx["batch_size"])
    crystal = Counter(str(s) for s in lens.crystallization(0.5))
    mean = lens.margins.mean(1)
    numbers = {
        "lens_sites": list(lens.labels),
        "lens_mean_margin": mean.tolist(),
        "crystallization": dict(crystal.most_common()),
    }
    ctx["numbers"].update(numbers)
    section = Section("Reward lens")
    section.text(
        "The margin read out after every layer (final norm applied, so the last site equals "
        "the margin). First site reaching half the final margin, counted over pairs: "
        f"{counts_text(crystal, 'pair')}."
    )
    section.figure(lens.plot(), "lens curves of the margins", name="lens")
    return _store(section, numbers)


def _step_attribution(ctx) -> dict:
    from ..attribution import pair_attribution

    _needs_scores(ctx)
    margin = pair_attribution(ctx["model"], ctx["encoded"], batch_size=ctx["batch_size"]).margin
    top = margin.top_k(12)
    numbers = {
        "top_components": [[label, value] for label, value in top],
        "attribution_completeness_error": margin.completeness_error(),
    }
    ctx["numbers"].update(numbers)
    section = Section("Top components")
    section.text(
        "Direct attribution of the margin (chosen − rejected) to embeddings, heads, MLPs and "
        f"biases, mean over pairs; parts sum to the margin (max error "
        f"{format_cell(margin.completeness_error())})."
    )
    section.figure(margin.plot(k=12), "top components of the margin", name="components")
    section.table(top.to_dataframe())
    return _store(section, numbers)


def _step_patching(ctx) -> dict:
    import plotly.io

    from ..patching import activation_patching

    _needs_scores(ctx)
    margins = ctx["numbers"]["chosen"], ctx["numbers"]["rejected"]
    diffs = [abs(_first(c) - _first(r)) for c, r in zip(*margins, strict=True)]
    picks = sorted(range(len(diffs)), key=lambda i: -diffs[i])[: ctx["n_patch"]]
    section = Section("Patching the largest-margin pairs")
    section.text(
        "Denoising activation patching of the residual stream (layer × position, rejected run "
        "patched from the chosen run, end-aligned at the reward token): the fraction of the "
        "margin each cell restores."
    )

    def patch(i: int) -> tuple[dict, str]:
        chosen, rejected = ctx["encoded"][i]
        result = activation_patching(
            ctx["model"], chosen, rejected, site="resid_pre", alignment="end"
        )
        pair = ctx["numbers"]["pair_ids"][i]
        fig = result.plot(backend="plotly")
        fig.update_layout(title=f"pair {pair}: fraction of the margin restored per cell")
        # the figure travels as JSON (map_items gathers the pairs from torchrun's ranks)
        return {"pair": pair, "top": list(result.top_k(3))}, fig.to_json()

    found = []
    for _, (entry, figure) in map_items(picks, patch):  # pairs split across torchrun's ranks
        found.append(entry)
        top = ", ".join(f"{cell} {format_cell(value, 'signed')}" for cell, value in entry["top"])
        section.figure(
            plotly.io.from_json(figure),
            f"patching grid of pair {entry['pair']}: layers by aligned positions and tokens",
            f"patching_pair_{entry['pair']}",
        )
        section.text(f"Pair {entry['pair']}: the cells restoring most: {top}.")
    ctx["numbers"]["patching"] = found
    return _store(section, {"patching": found})


def _step_tokens(ctx) -> dict:
    from ..token_view import token_attribution

    _needs_scores(ctx)
    chosen = [_first(c) for c in ctx["numbers"]["chosen"]]
    rejected = [_first(r) for r in ctx["numbers"]["rejected"]]
    best = max(range(len(chosen)), key=chosen.__getitem__)
    worst = min(range(len(rejected)), key=rejected.__getitem__)
    section = Section("Token views")
    section.text(
        "Each token's exact direct contribution to the reward (heads split by the token they "
        "read; the reward token also holds its embedding, MLPs and biases). Hover for values."
    )
    views = []
    for name, idx, side in (("most preferred", best, 0), ("least preferred", worst, 1)):
        view = token_attribution(ctx["model"], ctx["encoded"][idx][side])
        pair = ctx["numbers"]["pair_ids"][idx]
        views.append(
            {"which": name, "pair": pair, "reward": view.reward, "top_tokens": list(view.top_k(3))}
        )
        top = ", ".join(
            f"{token!r} {format_cell(value, 'signed')}" for token, value in views[-1]["top_tokens"]
        )
        section.raw(
            view.to_html(include_script=False).replace(
                "reward by token", f"{name} response (pair {pair})", 1
            ),
            f"The {name} response (pair {pair}, reward {format_cell(view.reward)}): tokens {top}.",
        )
    ctx["numbers"]["token_views"] = views
    return _store(section, {"token_views": views})


STEPS = [
    ("scores", _step_scores),
    ("lens", _step_lens),
    ("attribution", _step_attribution),
    ("patching", _step_patching),
    ("tokens", _step_tokens),
]


def _extra(fn, title: str):
    def step(ctx):
        _needs_scores(ctx)
        before = dict(ctx["numbers"])
        try:
            section = fn(ctx)
        except BridgeUnsupportedError as err:  # the analysis needs TransformerLens 3.9
            section = tl3_note(title, err)
            noted = {**ctx["numbers"].get("tl3_only", {}), title: str(err)}
            ctx["numbers"].clear()  # nothing half-computed is kept
            ctx["numbers"].update(before, tl3_only=noted)
        added = {k: v for k, v in ctx["numbers"].items() if before.get(k) is not v}
        return None if section is None else _store(section, added)

    return step


# -- plumbing ------------------------------------------------------------------------------------
def _clip(text, n: int = 90) -> str:
    if not isinstance(text, str):
        text = " / ".join(str(m.get("content", "")) for m in text)
    return text if len(text) <= n else text[: n - 1] + "…"


def _first(value):
    return value[0] if isinstance(value, list) else value


def _store(section: Section, numbers: dict) -> dict:
    return {**section.to_dict(), "numbers": numbers}


def _step_path(work: Path, name: str) -> Path:
    return work / f"{name.replace(':', '_')}.json"


def _cached(work: Path, name: str, finished: bool, compute):
    """A finished step's stored result, or `compute()` stored by rank 0.

    Every rank computes: the pair-set analyses inside are split across ranks and need all of
    them.
    """
    path = _step_path(work, name)
    if finished:
        return json.loads(path.read_text())
    result = compute()
    if is_main_process():
        _write_atomic(path, json.dumps(result, default=float))
    return result


def _writable_dir(out_dir) -> Path:
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write_test.{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise ReportError(f"cannot write the report to {out}: {err}") from err
    return out


def _work_dir(out: Path, args: dict, resume: bool) -> Path:
    work = out / ".work"
    manifest = work / "args.json"
    if resume:
        if not manifest.exists():
            raise ReportError(
                f"nothing to resume in {out} (no unfinished run); run without --resume"
            )
        before = json.loads(manifest.read_text())
        if before != args:
            diff = {k: (before.get(k), v) for k, v in args.items() if before.get(k) != v}
            raise ReportError(
                f"the unfinished run in {out} used other arguments {diff} (before, now); resume "
                "with the same arguments or start again without --resume"
            )
        return work
    if is_main_process():  # a fresh run: rank 0 clears the folder, the others wait for it
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        manifest.write_text(json.dumps(args))
    barrier()
    return work


def _write_atomic(path: Path, content: str | bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    if isinstance(content, bytes):
        tmp.write_bytes(content)
    else:
        tmp.write_text(content, encoding="utf-8")
    os.replace(tmp, path)
