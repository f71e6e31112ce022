"""Diagnostics for your own reward model: `reward_lens_tl.check(path)` and `reward-lens check`.

The questions reward-model users keep asking in other projects' trackers, answered for one
checkpoint as a table of pass / warn / fail rows (`CheckReport`):

- `load`: the checkpoint converts (a head the loader does not find is a failed row);
- `parity with HF`: max |ours − HF| on template-encoded conversations, scored one by one;
- `batch-size invariance`: a left-padded batch gives every row its own reward;
- `padding side (ours)` / `padding side (HF)`: left vs right padding. HF models with absolute
  positions change their rewards under left padding: that is HF's behaviour, a warning with the
  numbers (the converted model counts positions from each row's first real token);
- `reading position`: where the reward is read on three conversations, shown as tokens;
- `pad / EOS / BOS`: the ids and what they imply (pad == EOS: a trailing EOS is skipped;
  no pad: no batches; pad == BOS: left padding needs the attention mask);
- `chat template`: whether there is one, and whether its ids survive decode → encode;
- `determinism`: two loads give the same rewards (bitwise, or within 1e-6);
- `unknown tokens` / `context` (with `data=`): the share of the unknown token, and the
  pairs longer than the context, on a sample of up to 200 pairs of your data.

The test conversations are the data file's first pairs when one is given, else a few short
English conversations. Numbers are float32; tolerances are relative to the rewards' scale
(at least 1).

Examples:
    >>> from reward_lens_tl.zoo import zoo_path
    >>> report = check(zoo_path("scalar"))
    >>> report.failed, report.status("parity with HF"), report.status("determinism")
    (False, 'pass', 'pass')
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

import torch
from jaxtyping import Float
from torch import Tensor, nn

from .errors import InvalidArgumentError, RewardLensError, SequenceTooLongError
from .inputs import EncodedConversation, encode_conversation, pad_batch
from .padding import PaddingSide, hf_pad
from .results import Result

__all__ = [
    "CheckReport",
    "check",
]

STATUSES = ("pass", "warn", "fail")
#: How many rows a batch may disagree with the same rows scored alone, relative to the scale.
BATCH_RTOL = 1e-4
#: How far two loads of one checkpoint may disagree.
DETERMINISM_ATOL = 1e-6
#: Parity tolerance with HF (float32), relative to the scale.
PARITY_RTOL = 1e-4
#: Pairs of the user's data file read for the unknown-token share.
DATA_SAMPLE = 200
#: The share of unknown tokens above which rewards are meaningless (a failed check).
UNKNOWN_FAIL_SHARE = 0.2
#: Test conversations when no data file is given (English, and words of the zoo's vocabulary).
CONVERSATIONS: tuple[tuple[Any, str], ...] = (
    ("explain how to bake bread", "great question the oven and the flour"),
    ("what is the forecast", "rain and wind then snow"),
    (
        [
            {"role": "user", "content": "tell me about python"},
            {"role": "assistant", "content": "python is a language for code"},
            {"role": "user", "content": "what about the keyboard"},
        ],
        "the keyboard is very good for code and you can also use a mouse",
    ),
    ("please tell me a song", "this is a song"),
)


@dataclass(frozen=True)
class CheckRow:
    """One diagnostic: its name, its status and the numbers/facts.

    Attributes:
        check: The diagnostic's name.
        status: `"pass"`, `"warn"` or `"fail"`.
        detail: The numbers/facts behind the status.
        error: The exception behind a failed row, if one was raised (`--debug` shows it).

    Raises:
        InvalidArgumentError: A status that is not one of the three.
    """

    check: str
    status: str
    detail: str
    error: BaseException | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Check that the status is `"pass"`, `"warn"` or `"fail"`.

        Raises:
            InvalidArgumentError: Any other status.
        """
        if self.status not in STATUSES:
            raise InvalidArgumentError(f"status must be one of {STATUSES}, got {self.status!r}")


@dataclass(frozen=True)
class CheckReport(Result):
    """The rows of `check`; `failed` is true when any row failed (the CLI exits 1).

    Attributes:
        model: What was checked, as shown in the report.
        rows: One row per diagnostic.

    Examples:
        >>> from reward_lens_tl.diagnostics import CheckReport, CheckRow
        >>> report = CheckReport(
        ...     "my-rm",
        ...     (
        ...         CheckRow("load", "pass", "LlamaForSequenceClassification"),
        ...         CheckRow("pad / EOS / BOS", "warn", "pad == EOS"),
        ...     ),
        ... )
        >>> report.failed, report.status("pad / EOS / BOS")
        (False, 'warn')
        >>> print(report.to_text())
        reward-lens check: my-rm
        <BLANKLINE>
        PASS  load             LlamaForSequenceClassification
        WARN  pad / EOS / BOS  pad == EOS
        <BLANKLINE>
        1 pass, 1 warn, 0 fail
    """

    model: str
    rows: tuple[CheckRow, ...]

    label_column: ClassVar[str] = "check"
    value_column: ClassVar[str] = "severity"
    title: ClassVar[str | None] = "reward-lens check"

    @property
    def failed(self) -> bool:
        """Whether any row failed (the CLI then exits 1)."""
        return any(row.status == "fail" for row in self.rows)

    @property
    def errors(self) -> tuple[BaseException, ...]:
        """The exceptions behind failed rows (for a traceback: `reward-lens check --debug`)."""
        return tuple(row.error for row in self.rows if row.error is not None)

    def status(self, check: str) -> str:
        """The status of the row named `check` (the first one when several share the name).

        Args:
            check: The row's name.

        Returns:
            `"pass"`, `"warn"` or `"fail"`.

        Raises:
            InvalidArgumentError: No row has that name.
        """
        for row in self.rows:
            if row.check == check:
                return row.status
        names = sorted({row.check for row in self.rows})
        raise InvalidArgumentError(f"no check named {check!r}; the checks run: {names}")

    def to_dataframe(self):
        """One row per check: `check`, `status`, `detail`, `severity`.

        `severity` is 0 for pass, 1 for warn, 2 for fail; `top_k` lists the worst.

        Returns:
            A pandas `DataFrame`, one row per check.
        """
        import pandas as pd

        return pd.DataFrame(
            {
                "check": [r.check for r in self.rows],
                "status": [r.status for r in self.rows],
                "detail": [r.detail for r in self.rows],
                "severity": [STATUSES.index(r.status) for r in self.rows],
            }
        )

    def to_text(self) -> str:
        """A plain-text table and a one-line summary.

        Returns:
            The table and summary, as text.
        """
        width = max((len(r.check) for r in self.rows), default=5)
        lines = [f"reward-lens check: {self.model}", ""]
        lines += [f"{r.status.upper():4}  {r.check:<{width}}  {r.detail}" for r in self.rows]
        counts = {s: sum(r.status == s for r in self.rows) for s in STATUSES}
        lines += ["", ", ".join(f"{n} {s}" for s, n in counts.items())]
        return "\n".join(lines)

    def to_json(self) -> str:
        """`{"model", "passed", "rows": [{"check", "status", "detail"}]}` as JSON text.

        Returns:
            The report as JSON text.
        """
        rows = [{"check": r.check, "status": r.status, "detail": r.detail} for r in self.rows]
        return json.dumps({"model": self.model, "passed": not self.failed, "rows": rows})


# -- the entry point -----------------------------------------------------------------------------
def check(
    model_or_path: Any, data: str | os.PathLike[str] | None = None, *, tokenizer: Any = None
) -> CheckReport:
    """Diagnose a reward model.

    `model_or_path` is a local checkpoint directory (every check), an HF module (every check;
    pass its `tokenizer` for the text checks) or a `HookedRewardModel` (the checks of the
    converted model only). `data` is a pair file (any format `load_pairs` reads).

    Never raises for a problem of the model: a checkpoint that cannot be loaded is a failed
    `load` row.

    Args:
        model_or_path: A local checkpoint directory, an HF module or a `HookedRewardModel`.
        data: A pair file whose first pairs are the test conversations (default: a few short
            English conversations).
        tokenizer: The tokenizer of an HF module, for the text checks.

    Returns:
        The report, one row per check.

    Raises:
        InvalidArgumentError: An argument that is neither of the three.

    Examples:
        >>> from reward_lens_tl.zoo import zoo_path
        >>> check(zoo_path("scalar")).to_dataframe()["status"].tolist().count("fail")
        0
    """
    from .model import HookedRewardModel

    if isinstance(model_or_path, (str, os.PathLike)):
        return _check_checkpoint(Path(model_or_path), data)
    if isinstance(model_or_path, HookedRewardModel):
        return _run_checks(type(model_or_path).__name__, lambda: model_or_path, None, data)
    if isinstance(model_or_path, nn.Module):

        def load():
            return HookedRewardModel.from_pretrained(model_or_path, tokenizer)

        return _run_checks(type(model_or_path).__name__, load, lambda _: model_or_path, data)
    raise InvalidArgumentError(
        "check() takes a checkpoint directory, an HF reward model or a HookedRewardModel, got "
        f"{type(model_or_path).__name__}"
    )


def _check_checkpoint(path: Path, data) -> CheckReport:
    from .checkpoint import (
        IMPLICIT_REWARD_HINT,
        AutoMapIgnoredWarning,
        describe_files,
        ignored_auto_map,
        is_causal_lm,
        read_config_dict,
    )
    from .loading import load_hf_model
    from .model import HookedRewardModel

    name = path.name or str(path)
    try:
        facts = describe_files(path)
    except RewardLensError as err:
        return CheckReport(name, (CheckRow("load", "fail", _message(err), err),))
    if is_causal_lm(facts["architecture"]):
        return CheckReport(name, (CheckRow("load", "fail", IMPLICIT_REWARD_HINT),))
    skipped = ignored_auto_map(read_config_dict(path))
    note = None
    if skipped:
        note = (
            f"its config names its own code (auto_map: {'; '.join(skipped)}), not run: loaded "
            "as the built-in class, whose head or pooling may differ from the author's"
        )

    def hf_model(model):
        return load_hf_model(path, model.adapter)

    def load():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AutoMapIgnoredWarning)  # the load row says it
            return HookedRewardModel.from_pretrained(path)

    return _run_checks(name, load, hf_model, data, load_note=note)


def _run_checks(
    name: str, load: Callable, hf: Callable | None, data, load_note: str | None = None
) -> CheckReport:
    """Load, run every check and report.

    `load()` is called again for determinism; an unexpected error becomes that check's failed
    row; `hf(model)` gives the HF model to compare with; `load_note` turns the load row into a
    warning that says it.
    """
    try:
        model = load()
    except Exception as err:  # noqa: BLE001 - any loading problem is the answer to "load"
        return CheckReport(name, (CheckRow("load", "fail", _message(err), err),))
    rows = [
        CheckRow("load", "pass", _describe(model))
        if load_note is None
        else CheckRow("load", "warn", f"{_describe(model)}; {load_note}")
    ]
    pairs = _guarded(rows, "data", lambda: _load_data(data)) if data is not None else None
    prepared = _guarded(rows, "test conversations", lambda: _test_sequences(model, pairs))
    seqs, note = prepared if prepared is not None else ([], None)
    rows += [note] if note is not None else []
    singles = _guarded(rows, "rewards", lambda: _one_by_one(model, seqs)) if seqs else None
    if singles is None:
        return CheckReport(name, tuple(rows))
    parity, *hf_padding = _hf_checks(model, hf, seqs)
    rows += [parity, *_numeric_checks(model, seqs, singles), *hf_padding]
    rows += _text_checks(model, seqs)
    rows.append(_guarded_row("determinism", lambda: _determinism(load, model, seqs, singles)))
    if pairs is not None and model.tokenizer is not None:
        rows += _guarded(rows, "data", lambda: _data_rows(model, pairs)) or []
    return CheckReport(name, tuple(rows))


def _numeric_checks(model, seqs, singles) -> list[CheckRow]:
    return [
        _guarded_row("batch-size invariance", lambda: _batch_invariance(model, seqs, singles)),
        _guarded_row("padding side (ours)", lambda: _padding_side(model, seqs, singles)),
    ]


def _text_checks(model, seqs) -> list[CheckRow]:
    rows = []
    if model.tokenizer is not None:
        for i, enc in enumerate(seqs[:3]):
            name = f"reading position {i + 1}"
            rows.append(_guarded_row(name, partial(_reading, model, enc, name)))
    rows.append(_guarded_row("pad / EOS / BOS", lambda: _special_ids(model)))
    rows.append(_guarded_row("chat template", lambda: _template(model, seqs)))
    return rows


def _hf_checks(model, hf, seqs) -> list[CheckRow]:
    if hf is None:
        why = "not checked: pass the checkpoint directory (or the HF model) to compare with HF"
        return [CheckRow("parity with HF", "warn", why), CheckRow("padding side (HF)", "warn", why)]
    rows: list[CheckRow] = []
    hf_model = _guarded(rows, "parity with HF", lambda: hf(model))
    if hf_model is None:
        return rows
    rows.append(_guarded_row("parity with HF", lambda: _parity(model, hf_model, seqs)))
    rows.append(_guarded_row("padding side (HF)", lambda: _hf_padding(model, hf_model, seqs)))
    return rows


# -- helpers --------------------------------------------------------------------------------------
def _message(err: BaseException) -> str:
    return f"{type(err).__name__}: " + " ".join(str(err).split())


def _guarded(rows: list[CheckRow], name: str, fn: Callable):
    """`fn()`, or `None` with a failed row `name` appended when it raises."""
    try:
        return fn()
    except Exception as err:  # noqa: BLE001 - a diagnostic reports every error as a failed row
        rows.append(CheckRow(name, "fail", _message(err), err))
        return None


def _guarded_row(name: str, fn: Callable[[], CheckRow]) -> CheckRow:
    rows: list[CheckRow] = []
    row = _guarded(rows, name, fn)
    return row if row is not None else rows[0]


def _describe(model) -> str:
    cfg = model.cfg
    return (
        f"{model.adapter.describe()}; {cfg.n_layers} layers, d_model {cfg.d_model}, context "
        f"{cfg.n_ctx}, {model.n_objectives} output(s)"
    )


def _scale(values: Tensor) -> float:
    return max(1.0, float(values.abs().max()))


def _max_diff(a: Tensor, b: Tensor) -> float:
    return float((a.float() - b.float()).abs().max())


# -- test sequences -------------------------------------------------------------------------------
def _load_data(data) -> list:
    from .data import load_pairs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # skipped records are counted in the row instead
        return list(load_pairs(data, limit=DATA_SAMPLE, skip_bad=True))


def _test_sequences(model, pairs) -> tuple[list[EncodedConversation], CheckRow | None]:
    """The test conversations, encoded to fit the context; random ids without a tokenizer."""
    if model.tokenizer is None:
        why = "no tokenizer files: the text checks are skipped; numeric checks use random ids"
        return _random_sequences(model), CheckRow("tokenizer", "warn", why)
    texts = [(p.prompt, p.chosen) for p in (pairs or [])[:4]] or list(CONVERSATIONS)
    seqs = [s for s in (_fit(model, prompt, resp) for prompt, resp in texts) if s is not None]
    if len(seqs) < 2:
        seqs = [s for s in (_fit(model, p, r) for p, r in CONVERSATIONS) if s is not None]
    if not seqs:
        raise SequenceTooLongError(
            f"no test conversation fits the context of {model.cfg.n_ctx} tokens"
        )
    return seqs, None


def _random_sequences(model) -> list[EncodedConversation]:
    """Four random-id sequences of different lengths, free of the pad id."""
    gen = torch.Generator().manual_seed(0)
    seqs = []
    for n in (12, 7, 16, 4):
        ids = torch.randint(0, model.cfg.d_vocab, (min(n, model.cfg.n_ctx),), generator=gen)
        if model.pad_token_id is not None:
            ids[ids == model.pad_token_id] = (model.pad_token_id + 1) % model.cfg.d_vocab
        seqs.append(EncodedConversation(tuple(ids.tolist()), 0))
    return seqs


def _what(model, seqs) -> str:
    kind = "template-encoded conversations" if model.tokenizer is not None else "random-id rows"
    return f"{len(seqs)} {kind}"


def _fit(model, prompt, response) -> EncodedConversation | None:
    """The conversation encoded whole, else truncated (prompt first); `None` if it cannot fit."""
    for truncation in ("error", "left", "right"):
        try:
            return encode_conversation(
                model.tokenizer, prompt, response, max_length=model.cfg.n_ctx, truncation=truncation
            )
        except SequenceTooLongError:
            continue
    return None


# -- the checks -----------------------------------------------------------------------------------
@torch.no_grad()
def _rewards(model, seqs, padding_side: PaddingSide = "left") -> Float[Tensor, "batch ..."]:
    """Our rewards of `seqs` as one padded batch (each row alone when given one sequence)."""
    ids, mask = pad_batch(seqs, model.pad_token_id, padding_side)
    device = model.cfg.device
    return model.pooled_rewards(ids.to(device), mask.to(device)).float().cpu()


def _one_by_one(model, seqs) -> Tensor:
    return torch.cat([_rewards(model, [s]) for s in seqs])


def _batch_invariance(model, seqs, singles) -> CheckRow:
    if model.pad_token_id is None:
        return CheckRow("batch-size invariance", "warn", "not checked: no pad token, so no batches")
    batched = _rewards(model, seqs)
    err = _max_diff(batched, singles) / _scale(singles)
    status = "pass" if err <= BATCH_RTOL else "fail"
    return CheckRow(
        "batch-size invariance",
        status,
        f"left-padded batch of {_what(model, seqs)} vs one by one: max relative difference "
        f"{err:.1e} (≤ {BATCH_RTOL:g} passes)",
    )


def _padding_side(model, seqs, singles) -> CheckRow:
    if model.pad_token_id is None:
        return CheckRow("padding side (ours)", "warn", "not checked: no pad token, so no batches")
    err = _max_diff(_rewards(model, seqs, "right"), _rewards(model, seqs, "left"))
    err /= _scale(singles)
    status = "pass" if err <= BATCH_RTOL else "fail"
    return CheckRow(
        "padding side (ours)",
        status,
        f"right- vs left-padded batch (with the attention mask): max relative difference "
        f"{err:.1e} (≤ {BATCH_RTOL:g} passes)",
    )


@torch.no_grad()
def _hf_rewards(model, hf, seqs, padding_side: PaddingSide | None = None) -> Tensor:
    """HF's own rewards (per objective for a multi-output head), one by one or as a batch."""
    device = next(hf.parameters()).device
    groups = [[s] for s in seqs] if padding_side is None else [seqs]
    out = []
    for group in groups:  # HF's own batches: padded as its tokenizer pads
        ids, mask = hf_pad([s.ids for s in group], model.pad_token_id, padding_side or "left")
        out.append(model.adapter.reference_rewards(hf, ids.to(device), mask.to(device)))
    return torch.cat(out).float().cpu()


def _ours_like_hf(model, seqs, reference: Tensor) -> Tensor:
    if reference.ndim == 1:
        return _one_by_one(model, seqs)
    rows = []
    for s in seqs:
        ids = torch.tensor([s.ids], device=model.cfg.device)
        with torch.no_grad():
            rows.append(model.objective_rewards(ids, torch.ones_like(ids)).float().cpu())
    return torch.cat(rows)


def _parity(model, hf, seqs) -> CheckRow:
    reference = _hf_rewards(model, hf, seqs)
    err = _max_diff(_ours_like_hf(model, seqs, reference), reference)
    tol = PARITY_RTOL * _scale(reference)
    return CheckRow(
        "parity with HF",
        "pass" if err <= tol else "fail",
        f"max |ours − HF| = {err:.1e} on {_what(model, seqs)}, one by one (≤ {tol:.1e} passes)",
    )


def _hf_padding(model, hf, seqs) -> CheckRow:
    from .adapters.base import pad_token_id_of

    if model.pad_token_id is None:
        return CheckRow("padding side (HF)", "warn", "not checked: no pad token, so no batches")
    if pad_token_id_of(hf.config) is None:
        return CheckRow(
            "padding side (HF)",
            "warn",
            "HF's own model cannot batch: its config.json has no pad_token_id (ours pads with "
            f"the tokenizer's pad id {model.pad_token_id}); set pad_token_id in config.json",
        )
    alone = _hf_rewards(model, hf, seqs)
    errs = {
        side: _max_diff(_hf_rewards(model, hf, seqs, side), alone) / _scale(alone)
        for side in ("left", "right")
    }
    ok = max(errs.values()) <= BATCH_RTOL
    detail = (
        f"HF's own model, batch vs one by one: left padding {errs['left']:.1e}, right padding "
        f"{errs['right']:.1e} (max relative difference)"
    )
    if not ok:
        detail += (
            ". HF's rewards depend on padding (HF does not derive positions from the mask); "
            "ours do not. Compare with HF one sequence at a time"
        )
    return CheckRow("padding side (HF)", "pass" if ok else "warn", detail)


def _reading(model, enc: EncodedConversation, name: str) -> CheckRow:
    """Where the reward is read, shown on the conversation's last tokens."""
    ids = torch.tensor([enc.ids])
    pos = int(model.pool_positions(ids, torch.ones_like(ids))[0])
    tokens = [str(t) for t in model.tokenizer.convert_ids_to_tokens(list(enc.ids))]
    start = max(0, min(pos, len(tokens) - 6))
    shown = [f"[{t}]" if start + i == pos else t for i, t in enumerate(tokens[start:])]
    text = ("… " if start else "") + " ".join(shown)
    where = f"{text}  ← read at [{tokens[pos]}], position {pos - len(tokens)} of {len(tokens)}"
    if pos >= enc.suffix_start(model.eos_token_id):
        return CheckRow(name, "pass", f"{where}: a template token")
    if pos < enc.response_start:
        return CheckRow(name, "fail", f"{where}: inside the prompt, not after the response")
    why = "a response token, so the reward depends on how the response ends"
    if model.pad_token_id is not None and enc.ids[-1] == model.pad_token_id:
        why += " (pad == EOS: the trailing EOS is skipped as padding)"
    return CheckRow(name, "warn", f"{where}: {why}")


def _special_ids(model) -> CheckRow:
    pad, bos = model.pad_token_id, model.bos_token_id
    eos = model.eos_token_id
    eos_ids = set(eos) if isinstance(eos, (list, tuple)) else {eos}
    facts = f"pad {_named(model, pad)}, EOS {_named(model, eos)}, BOS {_named(model, bos)}"
    warns = []
    if pad is None:
        warns.append(
            "no pad token: batches of several sequences are impossible (score one at a time, "
            "or set config.pad_token_id)"
        )
    elif pad in eos_ids:
        warns.append(
            "pad == EOS: HF's rule skips a trailing EOS as padding, so the reward is read at the "
            "token before it (-2)"
        )
    if pad is not None and pad == bos:
        warns.append("pad == BOS: left padding needs the attention mask (pad_batch's)")
    tok_pad = getattr(model.tokenizer, "pad_token_id", None)
    if model.tokenizer is not None and tok_pad is not None and tok_pad != pad:
        warns.append(f"the tokenizer pads with {tok_pad} but the model pools on pad id {pad}")
    if not warns:
        return CheckRow("pad / EOS / BOS", "pass", f"{facts}: padding is unambiguous")
    return CheckRow("pad / EOS / BOS", "warn", f"{facts}. " + "; ".join(warns))


def _named(model, token_id) -> str:
    if token_id is None:
        return "none"
    if isinstance(token_id, (list, tuple)):
        return "/".join(_named(model, t) for t in token_id)
    if model.tokenizer is None:
        return str(token_id)
    return f"{token_id} {model.tokenizer.convert_ids_to_tokens(int(token_id))!r}"


def _template(model, seqs) -> CheckRow:
    tok = model.tokenizer
    if tok is None:
        return CheckRow("chat template", "warn", "not checked: no tokenizer files")
    if not getattr(tok, "chat_template", None):
        return CheckRow(
            "chat template",
            "warn",
            "none: conversations use the plain HH format ('\\n\\nHuman: …\\n\\nAssistant: …'); "
            "make sure the model was trained on it",
        )
    for i, enc in enumerate(seqs):
        text = tok.decode(list(enc.ids), skip_special_tokens=False)
        again = list(tok(text, add_special_tokens=False)["input_ids"])
        if again != list(enc.ids):
            pairs = zip(again, enc.ids, strict=False)
            at = next((k for k, (a, b) in enumerate(pairs) if a != b), min(len(again), len(enc)))
            return CheckRow(
                "chat template",
                "warn",
                f"conversation {i + 1}: decode → encode changes the ids from position {at} "
                f"({len(enc)} → {len(again)} ids); pipelines that decode and re-tokenize score "
                "other ids than the template gives",
            )
    return CheckRow(
        "chat template",
        "pass",
        f"the template renders all {len(seqs)} test conversations; their ids survive decode → "
        "encode",
    )


def _determinism(load, model, seqs, singles) -> CheckRow:
    again = load()
    if again is model:
        return CheckRow(
            "determinism", "warn", "not checked: pass the checkpoint directory to load it twice"
        )
    err = _max_diff(_one_by_one(again, seqs), singles)
    del again
    same = "bitwise identical" if err == 0 else f"max difference {err:.1e}"
    status = "pass" if err <= DETERMINISM_ATOL else "fail"
    return CheckRow("determinism", status, f"two loads, {_what(model, seqs)}: {same}")


def _data_rows(model, pairs: Sequence) -> list[CheckRow]:
    """The unknown-token share and the pairs longer than the context, on the data sample."""
    tok, unk = model.tokenizer, getattr(model.tokenizer, "unk_token_id", None)
    n_tokens = n_unknown = n_long = n_bad = 0
    for pair in pairs:
        try:
            encs = [encode_conversation(tok, pair.prompt, r) for r in (pair.chosen, pair.rejected)]
        except RewardLensError:
            n_bad += 1
            continue
        n_tokens += sum(len(e) for e in encs)
        n_unknown += sum(e.ids.count(unk) for e in encs) if unk is not None else 0
        n_long += any(len(e) > model.cfg.n_ctx for e in encs)
    return [
        _unknown_row(n_unknown, n_tokens, len(pairs), n_bad, tok),
        _context_row(model, n_long, len(pairs)),
    ]


def _unknown_row(n_unknown, n_tokens, n_pairs, n_bad, tok) -> CheckRow:
    share = n_unknown / max(n_tokens, 1)
    status = "pass" if share <= 0.01 else "warn" if share <= UNKNOWN_FAIL_SHARE else "fail"
    detail = (
        f"{share:.1%} of {n_tokens} tokens in {n_pairs} pairs (chosen and rejected) are the "
        f"unknown token {getattr(tok, 'unk_token', None)!r}"
    )
    if n_bad:
        detail += f"; {n_bad} pair(s) could not be encoded"
    if status == "fail":
        detail += ": the tokenizer does not know this text, so its rewards are meaningless"
    return CheckRow("unknown tokens", status, detail)


def _context_row(model, n_long: int, n_pairs: int) -> CheckRow:
    detail = f"{n_long} of {n_pairs} pairs are longer than the context ({model.cfg.n_ctx} tokens)"
    if n_long:
        detail += ": score them with a truncation mode (or on_error='skip')"
    return CheckRow("context", "warn" if n_long else "pass", detail)
