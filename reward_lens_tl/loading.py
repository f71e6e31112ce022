"""Conversion: an HF reward model (in memory, a directory or a hub id) → a `HookedRewardModel`.

More precisely, into the pieces of a `HookedRewardModel`. The steps are the same for every
family; the adapter supplies what differs:

1. check every option (`plan_conversion`): typed errors before anything is read;
2. resolve the input: a hub id to a cached snapshot (`.hub`: config, tokenizer and
   safetensors only); a directory is read as untrusted input (`.checkpoint`: config
   checked before transformers sees it, safetensors only, no remote code, missing or
   unexpected tensors refused); an in-memory model is used as it is and never modified;
3. plan: the adapter builds the TL config; the reward head's size and objective names are read
   (from the meta-device HF model of a checkpoint: no weight is read yet).

`load_planned` then converts one layer at a time into the class it is given (`build_model`,
`stream_weights`; `.streaming`: TL's converter and TL's weight processing per part, in float32,
`center_unembed` always off; each part cast and placed on the device), after an optional check
of a truncated copy against HF (`verify_plan`). `HookedRewardModel.from_pretrained` (and
`load_reward_model`, its function form) drives these steps with the class the adapter asks for;
`convert_hf_model` keeps the whole-model conversion (the HF model and its float32 state dict)
as the reference. This module does not import the model module (the model imports it and
passes its classes in), so there is no import cycle.

**The options are declared once**: `adapters.ConversionOptions` (a `TypedDict`; `LoadOptions`
adds `verify`) types every entry point's `**options`, `OPTION_DEFAULTS` holds the defaults,
`OPTIONS_DOC` documents them and `with_options_doc` / `spelled_out` show them in each entry
point's docstring and signature.

**TransformerLens's keywords.** Every keyword of TL's `HookedTransformer.from_pretrained` is
an option of `convert_hf_model` (and of `from_pretrained` / `load_reward_model`),
either honoured with TL's meaning or refused with a typed error that says why and what to do
(`check_no_op_keywords`): `fold_ln`, `center_writing_weights`, `fold_value_biases`,
`dtype` (a `torch.dtype` or TL's strings `"float32"`, `"bf16"`, ...; `torch_dtype` is an
alias), `device`, `n_ctx`, `tokenizer` are honoured, and so is
`refactor_factored_attn_matrices=True` for models without rotary embeddings (TL cannot refactor
a rotary QK circuit: refused there). `center_unembed=True` is refused (a one-column head would
become zero; several objectives would be mixed). The others are accepted at the value that means
"nothing to do" (`n_devices=1`, `move_to_device=True`, `first_n_layers=None`,
`checkpoint_index=None`, `default_prepend_bos=None`, ...) and refused otherwise. A keyword
that is not an option at all (a typo) is refused with the closest option named, as an
`UnknownKeywordError` (a `TypeError`, as Python raises for an unknown keyword;
`checked_keywords`).

Examples:
    >>> from reward_lens_tl.testing import tiny_reward_model
    >>> conversion = convert_hf_model(tiny_reward_model("gpt2"))
    >>> conversion.cfg.d_vocab_out, conversion.adapter.model_kind
    (1, 'scalar')
"""

from __future__ import annotations

import copy
import difflib
import inspect
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, TypedDict, TypeVar, Unpack, cast

import torch
from accelerate import init_empty_weights
from torch import Tensor, nn

from .adapters import ConversionOptions, RewardModelAdapter, adapter_for
from .adapters.base import pad_token_id_of
from .checkpoint import checkpoint_tokenizer, load_config
from .errors import (
    ArgumentTypeError,
    CheckpointNamesError,
    ConversionMismatchError,
    InvalidArgumentError,
    NotForRewardModelsError,
    RewardLensError,
    UnknownKeywordError,
    UnsafeCheckpointError,
    UnsupportedArchitectureError,
)
from .signatures import P, R, checked_keywords, pasted_docs, spelled_out
from .streaming import (
    CheckpointSource,
    ModelSource,
    Streamer,
    WholeModelWarning,
    find_layer_list,
    foldable,
    state_tensors,
    use_pre_norms,
    with_layers,
)
from .weights import check_finite as check_finite_tensor

__all__ = [
    "OPTIONS_DOC",
    "OPTION_DEFAULTS",
    "Conversion",
    "ConversionPlan",
    "HookedModel",
    "LoadOptions",
    "ModelFacts",
    "NO_PROCESSING",
    "build_model",
    "convert_hf_model",
    "load_hf_model",
    "load_planned",
    "plan_conversion",
    "reload_weights",
    "stream_weights",
    "verify_parity",
    "verify_plan",
]


@dataclass
class Conversion:
    """Everything needed to build the hooked model.

    Config, float32 state dict (head included) and the facts the model keeps (pad/EOS ids,
    objective names, tokenizer, extra modules).

    Args:
        hf_model: The HF model, loaded whole (the reference conversion keeps it).
        adapter: The family's adapter.
        cfg: The TL config.
        state_dict: The float32 TL state dict, head included.
        objective_names: The reward objectives' names.
        pad_token_id: The pad id.
        eos_token_id: The EOS id.
        bos_token_id: The BOS id.
        tokenizer: The tokenizer the model keeps.
        fold_flags: TL's weight-processing flags, as the adapter resolved them.
        extras: The adapter's extra modules (e.g. ArmoRM's gating).
        dtype: The dtype the model is cast to after folding (`dtype=` / `torch_dtype=`,
            resolved).

    Examples:
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> conversion = convert_hf_model(tiny_reward_model("gpt2"))
        >>> conversion.objective_names, tuple(conversion.state_dict["unembed.W_U"].shape)
        (('reward',), (64, 1))
    """

    #: the HF model, loaded whole (the reference conversion keeps it)
    hf_model: nn.Module | None
    adapter: RewardModelAdapter
    cfg: Any
    state_dict: dict[str, Tensor]
    objective_names: tuple[str, ...]
    pad_token_id: int | None
    eos_token_id: int | None
    bos_token_id: int | None
    tokenizer: Any
    fold_flags: dict[str, bool]
    extras: dict[str, Any]
    #: the dtype the model is cast to after folding (`dtype=` / `torch_dtype=`, resolved)
    dtype: torch.dtype = torch.float32


class LoadOptions(ConversionOptions, total=False):
    """The conversion options plus `verify`: the options of the entry points that build the model.

    `HookedRewardModel.from_pretrained`, `from_pretrained_no_processing` and
    `load_reward_model` take `**options: Unpack[LoadOptions]`; `convert_hf_model`, which builds
    no model, takes `ConversionOptions`.

    Examples:
        >>> options = LoadOptions(fold_ln=False, verify=True)
        >>> sorted(options)
        ['fold_ln', 'verify']
    """

    verify: bool | None


#: Every option's default (`from_pretrained_no_processing` turns the three folds off).
OPTION_DEFAULTS: LoadOptions = {
    "fold_ln": True,
    "center_writing_weights": True,
    "fold_value_biases": True,
    "center_unembed": False,
    "refactor_factored_attn_matrices": False,
    "dtype": torch.float32,
    "torch_dtype": None,
    "device": None,
    "n_ctx": None,
    "objective_names": None,
    "adapter": None,
    "verify": None,
    "revision": None,
    "cache_dir": None,
    "token": None,
    "local_files_only": False,
    "hf_model": None,
    "n_devices": 1,
    "move_to_device": True,
    "first_n_layers": None,
    "checkpoint_index": None,
    "checkpoint_value": None,
    "checkpoint_label": None,
    "default_prepend_bos": None,
    "default_padding_side": None,
    "trust_remote_code": False,
    "load_in_8bit": False,
    "load_in_4bit": False,
    "use_safetensors": True,
}

#: What the model argument of every loading entry point is: the text after its name.
MODEL_DOC = """\
An HF sequence-classification model (used as it is, never modified), a local
    checkpoint directory, or a Hugging Face hub id (`"org/name"`: only `config.json`, the
    tokenizer files and the `*.safetensors` weights are fetched, never code or pickle files;
    `reward_lens_tl.hub`). A directory or hub snapshot is read as untrusted input
    (`reward_lens_tl.checkpoint`) and converted one layer at a time
    (`reward_lens_tl.streaming`): peak memory is the converted model plus one layer."""

#: The options shared by `convert_hf_model`, `load_reward_model` and
#: `HookedRewardModel.from_pretrained`: `Args:` entries pasted at `{options}`.
OPTIONS_DOC = """\
tokenizer: The tokenizer the model keeps (default: the checkpoint directory's own; none for
    an in-memory model).
fold_ln: TransformerLens's folding of each norm's weight into the next linear map (keeps
    parity; the final norm's weight then lives in `W_R`).
center_writing_weights: TransformerLens's centring of the weights that write to the
    residual stream (keeps parity).
fold_value_biases: TransformerLens's folding of the value biases into the output bias (keeps
    parity).
center_unembed: Must stay `False` (a one-column head would become zero; refused).
refactor_factored_attn_matrices: TransformerLens's refactoring of the QK and OV circuits
    (models without rotary embeddings or grouped-query attention; refused otherwise).
dtype: The converted model's dtype, a floating `torch.dtype` or one of TransformerLens's
    names (`"float32"`, `"bf16"`, `"float16"`, ...); folding always happens in float32
    first.
torch_dtype: An alias of `dtype` (both given: they must agree).
device: Where the converted model lives (`"cpu"`, `"cuda:0"`, a `torch.device`; default
    `None`: TransformerLens's choice, CUDA when available, else the CPU). Each layer is placed
    there as soon as it is converted, so a GPU model never exists whole in host memory; a
    device that does not exist or cannot hold `dtype` is refused before anything is read.
n_ctx: Context length (default: the checkpoint's, capped at 8192 to bound TransformerLens's
    rotary tables).
objective_names: Names for a multi-output head (required to accept `num_labels > 1` on a
    scalar family).
adapter: An adapter to use instead of the one looked up by architecture.
revision: For a hub id, the branch, tag or commit (`huggingface_hub.snapshot_download`'s
    meaning).
cache_dir: For a hub id, the hub cache directory.
token: For a hub id, the access token.
local_files_only: Resolve a hub id from the local cache only (so does `HF_HUB_OFFLINE=1`); a
    hub id that is not cached then raises an error that says how to fetch it.
hf_model: TransformerLens's way to pass a loaded model next to a name; here only the model
    given as `model_or_path` itself is accepted.
n_devices: TransformerLens keyword with nothing to do here: accepted at 1, refused (with why
    and what to do) otherwise. So are the next ones, at the values shown.
move_to_device: Accepted at `True`.
first_n_layers: Accepted at `None`.
checkpoint_index: Accepted at `None`.
checkpoint_value: Accepted at `None`.
checkpoint_label: Accepted at `None`.
default_prepend_bos: Accepted at `None` or `False`.
default_padding_side: Accepted at `None` or `"left"` (this library's layout: pads after each
    row's first token) or `"right"`: the side `model.to_tokens` pads by default and
    `model.tokenizer.padding_side` says (the model's own copy of the tokenizer).
trust_remote_code: Accepted at `False` (a checkpoint never runs code here).
load_in_8bit: Accepted at `False`.
load_in_4bit: Accepted at `False`.
use_safetensors: Accepted at `True` (weights are read from safetensors only)."""

#: What happens to any other keyword: `Raises:` entries pasted at `{unknown}`.
UNKNOWN_DOC = """\
InvalidArgumentError: A Hugging Face loading keyword (`device_map`, `force_download`, ...),
    refused before a checkpoint is read, with what to do instead.
UnknownKeywordError: Any other keyword (a typo; also a `TypeError`), refused before a
    checkpoint is read, naming the closest parameter."""


#: `verify`, an `Args:` entry pasted at `{verify}` in the entry points that build the model.
VERIFY_DOC = """\
verify: Check the conversion against HF's own forward on random tokens and raise
    `ConversionMismatchError` on disagreement (default: the adapter's choice, on for the
    generic adapter). From a checkpoint the check runs on a truncated copy, the first 2
    layers with the embedding, final norm and head, converted from the same files in float32
    and compared with HF restricted to the same layers, before the full model is built (cheap
    at 27B: the embedding twice plus 2 layers); an in-memory HF model is compared with the
    whole converted model."""


def with_options_doc(fn: Callable[P, R]) -> Callable[P, R]:
    """Paste the shared option texts into `fn`'s docstring.

    `{model}` becomes the entry of `fn`'s first parameter (`MODEL_DOC` under its name);
    `OPTIONS_DOC`, `UNKNOWN_DOC` and `VERIFY_DOC` go at `{options}`, `{unknown}` and
    `{verify}`.

    Args:
        fn: The function whose docstring holds the placeholders.

    Returns:
        `fn`, its docstring filled in.
    """
    first = next(n for n in inspect.signature(fn).parameters if n not in ("cls", "self"))
    return pasted_docs(
        model=f"{first}: {MODEL_DOC}", options=OPTIONS_DOC, unknown=UNKNOWN_DOC, verify=VERIFY_DOC
    )(fn)


#: `from_pretrained_no_processing`'s defaults where they differ from `OPTION_DEFAULTS`.
NO_PROCESSING: LoadOptions = {
    "fold_ln": False,
    "center_writing_weights": False,
    "fold_value_biases": False,
}


def loading_entry_point(
    *, verify: bool, defaults: LoadOptions | None = None
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorator for a loading entry point taking `**options` (`ConversionOptions`).

    Its docstring gets the shared texts (`with_options_doc`), its shown signature one keyword
    per option with its default (`spelled_out`), and a keyword that is no option the error of
    `unknown_keyword` (download keywords explained, closest options named), before any work.

    Args:
        verify: Whether the entry point takes `verify` (it builds the model).
        defaults: Defaults that differ from `OPTION_DEFAULTS` (e.g. `NO_PROCESSING`).

    Returns:
        The decorator.
    """
    every = {**OPTION_DEFAULTS, **(defaults or {})}
    shown = {k: v for k, v in every.items() if verify or k != "verify"}
    declared = {**ConversionOptions.__annotations__, **LoadOptions.__annotations__}
    hints = {k: getattr(v, "__forward_arg__", v) for k, v in declared.items()}  # as written
    checked = checked_keywords(lambda name, names: unknown_keyword(name))

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        return checked(spelled_out(shown, hints)(with_options_doc(fn)))

    return decorate


def requested(options: Mapping[str, Any]) -> dict[str, Any]:
    """Every option, as given or at its default (`OPTION_DEFAULTS`).

    Args:
        options: The options given.

    Returns:
        Option name → value, every option present.
    """
    return {**OPTION_DEFAULTS, **options}


@loading_entry_point(verify=False)
def convert_hf_model(
    model_or_path: nn.Module | str | Path,
    tokenizer: Any = None,
    **options: Unpack[ConversionOptions],
) -> Conversion:
    """Read and convert the whole model at once, without building the hooked model.

    The result holds the HF model (loaded whole from a checkpoint) and its float32
    TransformerLens state dict, before weight processing. This is the reference conversion, for
    inspecting small models and for tests; `load_reward_model` (`from_pretrained`) converts one
    layer at a time instead (`plan_conversion`, `reward_lens_tl.streaming`) and gives the same
    weights.

    Args:
        {model}
        {options}

    Returns:
        The `Conversion`.

    Raises:
        {unknown}

    Examples:
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> convert_hf_model(tiny_reward_model("gpt2"), fold_ln=False).fold_flags["fold_ln"]
        False
    """
    request = requested(options)
    plan = plan_conversion(model_or_path, tokenizer, request, whole=True)
    model, cfg, adapter = plan.source.model, plan.cfg, plan.adapter
    head = adapter.reward_head(model, plan.options)
    # on the CPU whatever device the HF model is on: TL folds on the state dict's devices
    state_dict = {
        k: v.detach().to("cpu", torch.float32, copy=True)
        for k, v in adapter.backbone_state_dict(model, cfg).items()
    }
    state_dict["unembed.W_U"] = head.W.to("cpu", torch.float32)
    state_dict["unembed.b_U"] = head.b.to("cpu", torch.float32)
    return Conversion(
        hf_model=model,
        adapter=adapter,
        cfg=cfg,
        state_dict=state_dict,
        objective_names=plan.objective_names,
        pad_token_id=plan.pad_token_id,
        eos_token_id=plan.eos_token_id,
        bos_token_id=plan.bos_token_id,
        tokenizer=plan.tokenizer,
        fold_flags=plan.fold_flags,
        extras=adapter.extra_modules(model, cfg, request["fold_ln"]),
        dtype=plan.dtype,
    )


@dataclass
class ConversionPlan:
    """Everything decided before any weight is converted.

    Where the HF weights come from (`ModelSource` or, for a checkpoint, `CheckpointSource`,
    whose HF model is on the meta device), the adapter, the TL config, the options and the facts
    the model keeps.

    Args:
        source: Where the HF weights come from.
        adapter: The family's adapter.
        hf_config: The HF config.
        cfg: The TL config.
        options: The conversion options.
        objective_names: The reward objectives' names.
        fold_flags: TL's weight-processing flags, as the adapter resolved them.
        dtype: The converted model's dtype.
        tokenizer: The tokenizer the model keeps.
        pad_token_id: The pad id.
        eos_token_id: The EOS id.
        bos_token_id: The BOS id.
        path: The checkpoint directory (`None` for an in-memory model).
        padding_side: The model's default padding side (`default_padding_side=`).

    Examples:
        >>> from reward_lens_tl.zoo import zoo_path
        >>> plan = plan_conversion(zoo_path("scalar"), None, requested({}))
        >>> type(plan.source).__name__, plan.cfg.n_layers, plan.dtype
        ('CheckpointSource', 3, torch.float32)
    """

    source: ModelSource
    adapter: RewardModelAdapter
    hf_config: Any
    cfg: Any
    options: ConversionOptions
    objective_names: tuple[str, ...]
    fold_flags: dict[str, bool]
    dtype: torch.dtype
    tokenizer: Any
    pad_token_id: int | None
    eos_token_id: int | None
    bos_token_id: int | None
    path: Path | None
    padding_side: Literal["left", "right"] = "left"


def plan_conversion(
    model_or_path: nn.Module | str | Path,
    tokenizer: Any,
    request: Mapping[str, Any],
    *,
    whole: bool = False,
) -> ConversionPlan:
    """Check a conversion request and plan it.

    Nothing is converted yet, and from a checkpoint only the config and the safetensors headers
    are read.

    Args:
        model_or_path: An HF model, a checkpoint directory or a hub id.
        tokenizer: The tokenizer the model keeps (default: the checkpoint's own).
        request: Every option (`requested`: as given or at its default).
        whole: Load the HF model whole instead.

    Returns:
        The `ConversionPlan`.

    Examples:
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> plan = plan_conversion(tiny_reward_model("gpt2"), None, requested({"n_ctx": 16}))
        >>> plan.cfg.n_ctx, plan.objective_names
        (16, ('reward',))
    """
    flags = {name: request[name] for name in BOOL_FLAGS}
    check_flags(flags)
    check_no_op_keywords({name: request[name] for name in TL_NO_OP_KEYWORDS})
    check_hf_model_keyword(model_or_path, request["hf_model"])
    dtype = resolve_dtypes(request["dtype"], request["torch_dtype"])
    device = check_device(request["device"], dtype)
    hub = {name: request[name] for name in HUB_OPTIONS}
    source, hf_config, path = resolve_source(model_or_path, request["adapter"], hub, whole)
    adapter = request["adapter"] or adapter_for(hf_config)
    if path is None or whole:
        check_finite(source.model)
    options = ConversionOptions(
        dtype=dtype,
        device=device,
        n_ctx=request["n_ctx"],
        objective_names=request["objective_names"],
    )
    head = adapter.reward_head(source.model, options)  # (on the meta device from a checkpoint)
    cfg = adapter.tl_config(hf_config, options, head.n_objectives)
    if request["refactor_factored_attn_matrices"]:
        check_refactor_supported(cfg)
    tokenizer = tokenizer if tokenizer is not None else checkpoint_tokenizer(path)
    requested = {k: v for k, v in flags.items() if k != "center_unembed"}
    return ConversionPlan(
        source=source,
        adapter=adapter,
        hf_config=hf_config,
        cfg=cfg,
        options=options,
        objective_names=head.objective_names,
        fold_flags=adapter.fold_options(requested),
        dtype=dtype,
        tokenizer=tokenizer,
        pad_token_id=resolve_pad_token_id(hf_config, tokenizer),
        eos_token_id=getattr(hf_config, "eos_token_id", None),
        bos_token_id=getattr(hf_config, "bos_token_id", None),
        path=path,
        padding_side=request.get("default_padding_side") or "left",
    )


#: The hub options, passed to `reward_lens_tl.hub.resolve_checkpoint`.
HUB_OPTIONS: tuple[str, ...] = ("revision", "cache_dir", "token", "local_files_only")


def check_device(device: str | torch.device | None, dtype: torch.dtype) -> str | None:
    """`device` as a string, after checking it exists and can hold `dtype`.

    The check comes before any weight is read.

    Args:
        device: The requested device.
        dtype: The converted model's dtype.

    Returns:
        The device as a string; `None` stays `None` (TransformerLens's choice).

    Raises:
        InvalidArgumentError: A device that does not exist here, or cannot hold `dtype`.
    """
    if device is None:
        return None
    try:
        where = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise InvalidArgumentError(
            f"device={device!r} is not a torch device ({err}); pass 'cpu', 'cuda', 'cuda:0', ..."
        ) from None
    if where.type == "meta":
        raise InvalidArgumentError(
            "device='meta' holds no values; pass the device the model should run on"
        )
    if where.type == "cuda" and dtype == torch.bfloat16 and torch.cuda.is_available():
        if not torch.cuda.is_bf16_supported():
            raise InvalidArgumentError(
                f"dtype=torch.bfloat16 is not supported by {torch.cuda.get_device_name(where)}; "
                "pass dtype=torch.float16 or torch.float32"
            )
    try:
        torch.empty(1, dtype=dtype, device=where)
    except (RuntimeError, AssertionError, TypeError) as err:
        raise InvalidArgumentError(
            f"device={device!r} cannot hold dtype={dtype} here ({err}). Pass a device this "
            "machine has (torch.cuda.is_available(), torch.cuda.device_count()) or device='cpu'"
        ) from None
    return str(device)


# -- TransformerLens's from_pretrained keywords ----------------------------------------------
#: The options of `from_pretrained` / `convert_hf_model` (`verify` is taken by
#: `load_reward_model` before conversion).
OPTIONS: tuple[str, ...] = (
    "tokenizer",
    "fold_ln",
    "center_writing_weights",
    "fold_value_biases",
    "center_unembed",
    "refactor_factored_attn_matrices",
    "dtype",
    "torch_dtype",
    "device",
    "n_ctx",
    "objective_names",
    "adapter",
    "revision",
    "cache_dir",
    "token",
    "local_files_only",
    "verify",
)

#: TL `from_pretrained` keywords without an option here: the value(s) accepted (they mean
#: "nothing to do", which is what happens) and why any other value is refused.
TL_NO_OP_KEYWORDS: dict[str, tuple[tuple[Any, ...], type[Exception], str]] = {
    "n_devices": (
        (1,),
        InvalidArgumentError,
        "splitting one model's layers over several devices is not supported. Load it on one "
        "device (device='cuda:0'); to use several GPUs, run pair-set analyses under torchrun "
        "(see reward_lens_tl.distributed)",
    ),
    "move_to_device": (
        (True,),
        InvalidArgumentError,
        "the converted model is always placed on `device`. To keep it on the CPU pass "
        "device='cpu' (and move it later with model.to(...))",
    ),
    "first_n_layers": (
        (None,),
        NotForRewardModelsError,
        "the reward head reads the last layer's residual stream, so a model cut after n layers "
        "does not compute this model's reward. To read earlier layers use "
        "model(ids, stop_at_layer=n), model.run_with_cache(...) or the reward lens "
        "(reward_lens_tl.lens.reward_lens)",
    ),
    "checkpoint_index": (
        (None,),
        InvalidArgumentError,
        "TL's training-checkpoint selection is for its own model names; reward-lens-tl loads "
        "exactly the checkpoint it is given: pass that checkpoint's directory (or HF model)",
    ),
    "checkpoint_value": (
        (None,),
        InvalidArgumentError,
        "TL's training-checkpoint selection is for its own model names; reward-lens-tl loads "
        "exactly the checkpoint it is given: pass that checkpoint's directory (or HF model)",
    ),
    "checkpoint_label": (
        (None,),
        InvalidArgumentError,
        "TL's training-checkpoint selection is for its own model names; reward-lens-tl loads "
        "exactly the checkpoint it is given: pass that checkpoint's directory (or HF model)",
    ),
    "default_prepend_bos": (
        (None, False),
        NotForRewardModelsError,
        "reward-lens-tl never prepends a BOS on its own: whether a conversation starts with one "
        "is the chat template's decision (model.encode(prompt, response), "
        "model.to_tokens((prompt, response))), and the reward depends on it. To score ids with "
        "a BOS, put it in the ids",
    ),
    "default_padding_side": (
        (None, "left", "right"),
        InvalidArgumentError,
        "model.to_tokens pads on the left after each row's first token by default (so [:, 0] "
        "is every row's first token and [:, -1] its reading token); 'right' pads after the "
        "last token",
    ),
    "trust_remote_code": (
        (False,),
        UnsafeCheckpointError,
        "reward-lens-tl never executes a checkpoint's remote code; supported architectures "
        "are converted from their weights (reward_lens_tl.adapters.supported_architectures())",
    ),
    "load_in_8bit": (
        (False,),
        InvalidArgumentError,
        "quantised weights are not supported (the weights are folded in float32); for a "
        "smaller model pass dtype=torch.bfloat16",
    ),
    "load_in_4bit": (
        (False,),
        InvalidArgumentError,
        "quantised weights are not supported (the weights are folded in float32); for a "
        "smaller model pass dtype=torch.bfloat16",
    ),
    "use_safetensors": (
        (True,),
        UnsafeCheckpointError,
        "reward-lens-tl only reads safetensors weights (pickle files can run code); convert "
        "the checkpoint to safetensors first",
    ),
}

#: HF hub / loader keywords TL forwards to `AutoModel.from_pretrained`: nothing here
#: downloads or dispatches, so they are refused with a pointer.
HF_LOADER_KEYWORDS: tuple[str, ...] = (
    "use_auth_token",
    "force_download",
    "proxies",
    "subfolder",
    "device_map",
    "low_cpu_mem_usage",
    "attn_implementation",
    "quantization_config",
    "output_loading_info",
)

BOOL_FLAGS: tuple[str, ...] = (
    "fold_ln",
    "center_writing_weights",
    "fold_value_biases",
    "center_unembed",
    "refactor_factored_attn_matrices",
)

#: TL's dtype strings (`HookedTransformer.DTYPE_FROM_STRING`).
DTYPE_NAMES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float16": torch.float16,
    "fp16": torch.float16,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
}


def check_flags(flags: dict[str, Any]) -> None:
    """The weight-processing flags are booleans, and `center_unembed` is off.

    Args:
        flags: Flag name → value.

    Raises:
        InvalidArgumentError: A flag that is not a boolean.
        NotForRewardModelsError: `center_unembed=True`.
    """
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise InvalidArgumentError(f"{name} must be True or False, got {value!r}")
    if flags.get("center_unembed"):
        raise NotForRewardModelsError(
            "center_unembed=True subtracts the mean over W_U's output columns, which is harmless "
            "for a language model only because softmax ignores a shift of all logits. A reward "
            "head has no softmax: with one column (a scalar reward) it sets W_R to zero, so every "
            "reward becomes b_R; with several objectives it subtracts their mean from each, "
            "mixing them. Pass center_unembed=False (fold_ln, center_writing_weights, "
            "fold_value_biases and refactor_factored_attn_matrices keep the reward exact)."
        )


def check_no_op_keywords(values: dict[str, Any]) -> None:
    """TransformerLens keywords without an option here are accepted only at their no-op values.

    The keywords are `TL_NO_OP_KEYWORDS`, accepted at the values that mean "nothing to do"; any
    other value raises the keyword's `RewardLensError` subclass, saying why and what to do.

    Args:
        values: Keyword → the value given.

    Raises:
        RewardLensError: A value other than the no-op ones (the keyword's subclass).
    """
    for name, value in values.items():
        allowed, error, why = TL_NO_OP_KEYWORDS[name]
        if not any(value is a or (type(value) is type(a) and value == a) for a in allowed):
            shown = " or ".join(repr(a) for a in allowed)
            raise error(f"{name}={value!r} is not supported: {why}. (Accepted: {shown}.)")


def check_hf_model_keyword(model_or_path: Any, hf_model: Any) -> None:
    """`hf_model=` is accepted only when it is the model given as `model_or_path`.

    Args:
        model_or_path: The model given.
        hf_model: TL's `hf_model=` keyword.

    Raises:
        InvalidArgumentError: Another model given as `hf_model`.
    """
    if hf_model is not None and hf_model is not model_or_path:
        raise InvalidArgumentError(
            "hf_model= is TL's way to pass an already-loaded model next to a model name; here "
            "the model itself is the first argument: "
            "HookedRewardModel.from_pretrained(hf_model, tokenizer=...) (a local checkpoint "
            "directory works too)"
        )


def resolve_dtypes(dtype: torch.dtype | str, torch_dtype: torch.dtype | str | None) -> torch.dtype:
    """The dtype asked for by `dtype` or its alias `torch_dtype` (both given: they agree).

    Args:
        dtype: The requested dtype.
        torch_dtype: Its alias, or `None`.

    Returns:
        The resolved `torch.dtype`.

    Raises:
        InvalidArgumentError: Both given, and they disagree.
    """
    if torch_dtype is None:
        return resolve_dtype(dtype)
    resolved = resolve_dtype(torch_dtype, "torch_dtype")
    if dtype not in (torch.float32, "float32") and resolve_dtype(dtype) != resolved:
        raise InvalidArgumentError(
            f"dtype={dtype!r} and torch_dtype={torch_dtype!r} disagree; pass only dtype"
        )
    return resolved


def unknown_keyword(name: str) -> RewardLensError:
    """The error for a keyword that is no option.

    A transformers loading keyword gets an `InvalidArgumentError` saying what to do instead,
    anything else an `UnknownKeywordError` with the closest options named.

    Args:
        name: The keyword given.

    Returns:
        The error (not raised).
    """
    if name in HF_LOADER_KEYWORDS:
        return InvalidArgumentError(
            f"{name}= is a transformers loading keyword that reward-lens-tl does not take: it "
            "reads the checkpoint itself (safetensors only, one layer at a time, placed on "
            "device=). Pass a hub id with revision= / cache_dir= / token= / "
            "local_files_only=, a local directory, or an HF model you loaded yourself"
        )
    if name == "verify":
        return UnknownKeywordError(
            "verify= is an option of from_pretrained / load_reward_model; convert_hf_model does "
            "not build the model: call verify_parity(model, hf_model, adapter) afterwards"
        )
    known = [*OPTIONS, *TL_NO_OP_KEYWORDS, "hf_model"]
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return UnknownKeywordError(
        f"from_pretrained got an unknown keyword {name!r}.{hint} Options: {', '.join(OPTIONS)}. "
        "TransformerLens keywords accepted at their no-op values: "
        f"{', '.join([*TL_NO_OP_KEYWORDS, 'hf_model'])}."
    )


def resolve_dtype(dtype: Any, name: str = "dtype") -> torch.dtype:
    """A floating `torch.dtype`, or one of TL's dtype strings (`"bf16"`, `"float16"`...).

    Args:
        dtype: The dtype or its name.
        name: The argument's name, for the error.

    Returns:
        The `torch.dtype`.

    Raises:
        InvalidArgumentError: Neither a floating dtype nor one of TL's names.
    """
    if isinstance(dtype, str) and dtype in DTYPE_NAMES:
        return DTYPE_NAMES[dtype]
    if isinstance(dtype, torch.dtype) and dtype.is_floating_point:
        return dtype
    raise InvalidArgumentError(
        f"{name} must be a floating torch.dtype (torch.float32, torch.bfloat16, ...) or one of "
        f"{sorted(DTYPE_NAMES)}, got {dtype!r}"
    )


def check_refactor_supported(cfg: Any) -> None:
    """TL's `refactor_factored_attn_matrices` needs a position-free QK circuit.

    That is no rotary embeddings, and one key/value head per query head.

    Args:
        cfg: The TL config.

    Raises:
        InvalidArgumentError: Rotary embeddings or grouped-query attention.
    """
    arch = getattr(cfg, "original_architecture", None) or "this model"
    if cfg.positional_embedding_type == "rotary":
        raise InvalidArgumentError(
            f"refactor_factored_attn_matrices=True is not possible for {arch}: it uses rotary "
            "position embeddings, so its QK circuit depends on the query and key positions and "
            "W_Q W_K^T cannot be refactored (TransformerLens asserts the same). Load with "
            "refactor_factored_attn_matrices=False; the position-free OV circuit is "
            "model.OV (a FactoredMatrix) either way"
        )
    if getattr(cfg, "n_key_value_heads", None) is not None:
        raise InvalidArgumentError(
            f"refactor_factored_attn_matrices=True is not supported for {arch}: it shares "
            "key/value heads between query heads (grouped-query attention), which TL's "
            "refactoring does not handle. Load with refactor_factored_attn_matrices=False"
        )


def resolve_source(
    model_or_path: Any,
    adapter: RewardModelAdapter | None,
    hub: dict[str, Any],
    whole: bool = False,
) -> tuple[ModelSource, Any, Path | None]:
    """`(source, hf_config, path)` of a model or a checkpoint.

    An in-memory model is used as it is (its config copied, with `architectures` filled in); a
    local directory / hub id is resolved to a checkpoint directory
    (`reward_lens_tl.hub.resolve_checkpoint`) whose config is checked before transformers reads
    it, and whose weights are then read one part at a time.

    Args:
        model_or_path: An HF model, a checkpoint directory or a hub id.
        adapter: Force an adapter instead of looking one up by architecture.
        hub: The hub options (`HUB_OPTIONS`).
        whole: Load the weights whole into the HF model, as `convert_hf_model` does.

    Returns:
        The source of the HF weights, the HF config, and the checkpoint directory (`None` for an
        in-memory model).

    Raises:
        ArgumentTypeError: Neither a model, a directory nor a hub id.
        InvalidArgumentError: Hub options given with an in-memory model.
        UnsafeCheckpointError: An unsupported architecture that ships remote code.
    """
    if isinstance(model_or_path, nn.Module):
        given = [f"{k}={v!r}" for k, v in hub.items() if k != "local_files_only" and v is not None]
        if given:
            raise InvalidArgumentError(
                f"{', '.join(given)} only apply to a hub id (from_pretrained('org/name', "
                "revision=...)); an in-memory HF model is converted as it is"
            )
        config: Any = copy.deepcopy(model_or_path.config)  # a transformers PretrainedConfig
        if not getattr(config, "architectures", None):
            config.architectures = [type(model_or_path).__name__]
        return ModelSource(model_or_path), config, None
    if isinstance(model_or_path, (str, os.PathLike)) and not isinstance(model_or_path, bytes):
        from .hub import resolve_checkpoint

        path = resolve_checkpoint(model_or_path, **hub)
    else:
        raise ArgumentTypeError(
            f"model_or_path must be an HF model, a checkpoint directory or a hub id "
            f"('org/name'), got {type(model_or_path).__name__}"
        )
    config = load_config(path)
    try:
        adapter = adapter or adapter_for(config)
    except UnsupportedArchitectureError as err:
        if getattr(config, "auto_map", None):
            raise UnsafeCheckpointError(
                f"{err} This checkpoint ships remote code (auto_map), which reward-lens-tl never "
                "executes."
            ) from None
        raise
    if whole:
        return ModelSource(adapter.load_hf(path, config)), config, path
    try:
        return CheckpointSource(path, config, adapter.model_class(config)), config, path
    except CheckpointNamesError as err:  # transformers may rename them (e.g. Mixtral's experts)
        model = adapter.load_hf(path, config)  # a truly broken checkpoint is refused here
        warnings.warn(
            f"{err} transformers maps these names when it loads, so the HF model was loaded "
            "whole (in float32) and converted from memory: about 4 bytes per parameter more "
            "than the layer-by-layer conversion",
            WholeModelWarning,
            stacklevel=4,
        )
        return ModelSource(model), config, path


def load_hf_model(path: str | Path, adapter: RewardModelAdapter | None = None) -> nn.Module:
    """The whole HF model of a local checkpoint directory, read as untrusted input.

    The reference side of parity checks; conversion itself streams instead.

    Args:
        path: The checkpoint directory.
        adapter: Force an adapter instead of looking one up by architecture.

    Returns:
        The HF model.

    Examples:
        >>> from reward_lens_tl.zoo import zoo_path
        >>> type(load_hf_model(zoo_path("scalar"))).__name__
        'LlamaForSequenceClassification'
    """
    hub = dict.fromkeys(HUB_OPTIONS)
    hub["local_files_only"] = True
    return resolve_source(Path(path), adapter, hub, whole=True)[0].model


def check_finite(hf_model: nn.Module) -> None:
    """Every floating parameter and buffer of an HF model is finite.

    The same check tensors read from files get (`reward_lens_tl.weights.check_finite`).

    Args:
        hf_model: The HF model.
    """
    for name, p in list(hf_model.named_parameters()) + list(hf_model.named_buffers()):
        if p.is_floating_point():
            check_finite_tensor(name, p.detach())


def resolve_pad_token_id(hf_config: Any, tokenizer: Any) -> int | None:
    """The pad id: the config's, else the tokenizer's.

    Args:
        hf_config: The HF config.
        tokenizer: The tokenizer, or `None`.

    Returns:
        The pad id, or `None`.
    """
    pad = pad_token_id_of(hf_config)
    if pad is None and tokenizer is not None:
        pad = getattr(tokenizer, "pad_token_id", None)
    return pad


@torch.no_grad()
def verify_parity(
    model,
    hf_model: nn.Module,
    adapter: RewardModelAdapter,
    *,
    seq_len: int = 12,
    atol: float | None = None,
) -> float:
    """Max |converted − HF| pooled reward on two random sequences; raise if above `atol`.

    Args:
        model: The converted `HookedRewardModel`.
        hf_model: The HF model.
        adapter: The family's adapter (its reference rewards).
        seq_len: The length of the random sequences.
        atol: The tolerance (default: 1e-3 in float32, else 5e-2).

    Returns:
        The largest difference.

    Raises:
        ConversionMismatchError: A difference above `atol`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.zoo import load_model
        >>> hf = load_model("scalar")
        >>> model = HookedRewardModel.from_pretrained(hf)
        >>> verify_parity(model, hf, model.adapter) < 1e-4
        True
    """
    gen = torch.Generator().manual_seed(0)
    pad = model.pad_token_id
    high = model.cfg.d_vocab
    ids = torch.randint(0, high, (2, min(seq_len, model.cfg.n_ctx)), generator=gen)
    if pad is not None:
        ids[ids == pad] = (pad + 1) % high
    pattern = list(getattr(model, "gating_token_pattern", ()))
    if pattern:  # a gated head needs its prompt-end marker (the assistant header) in the row
        mid = ids.shape[1] // 2
        ids[:, mid : mid + len(pattern)] = torch.tensor(pattern)
    hf_device = next(hf_model.parameters()).device  # the HF model may be on a GPU
    ref = adapter.reference_rewards(hf_model, ids.to(hf_device)).float()
    ours = model.objective_rewards(ids) if ref.ndim == 2 else model.rewards(ids)
    err = float((ours.float().cpu() - ref.cpu()).abs().max())
    tol = atol if atol is not None else (1e-3 if model.cfg.dtype == torch.float32 else 5e-2)
    if not err <= tol:
        raise ConversionMismatchError(
            f"converted model differs from HF by {err:.3g} (> {tol}) on random tokens; the "
            f"{type(adapter).__name__} mapping does not fit this checkpoint. Please report it."
        )
    return err


# -- building the hooked model ----------------------------------------------------------------
class ModelFacts(TypedDict, total=False):
    """The reward-model facts a hooked model is built with, besides its TL config.

    The keywords of `HookedRewardModel`'s constructor (which holds their defaults); its
    subclasses and `HookedModel` take them as `**facts: Unpack[ModelFacts]`.

    Attributes:
        adapter: The family's adapter (default: `LlamaAdapter`).
        pad_token_id: The pad id.
        eos_token_id: The EOS id.
        objective_names: The reward objectives' names.
        tokenizer: The tokenizer.
        bos_token_id: The BOS id.
        move_to_device: Move the model to `cfg.device` (TL's meaning).
        padding_side: How `to_tokens` pads by default (`"left"` or `"right"`).

    Examples:
        >>> facts = ModelFacts(pad_token_id=0, objective_names=("reward",))
        >>> sorted(facts)
        ['objective_names', 'pad_token_id']
    """

    adapter: RewardModelAdapter | None
    pad_token_id: int | None
    eos_token_id: int | None
    objective_names: Sequence[str]
    tokenizer: Any
    bos_token_id: int | None
    move_to_device: bool
    padding_side: Literal["left", "right"]


class HookedModel(Protocol):
    """What the loading functions need of the class they build (`HookedRewardModel`'s kinds).

    The model module passes its classes in (`load_planned(HookedArmoRM, plan)`), so this module
    never imports it.

    Args:
        cfg: The TL config.
        **facts: The reward-model facts (`ModelFacts`).

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> plan = plan_conversion(tiny_reward_model("gpt2"), None, requested({}))
        >>> model: HookedModel = build_model(HookedRewardModel, plan)
        >>> model.cfg.d_vocab_out
        1
    """

    cfg: Any
    tokenizer: Any

    def __init__(self, cfg: Any, **facts: Unpack[ModelFacts]) -> None:
        """Build the model from a TL config, with its reward-model facts."""

    def named_parameters(self) -> Iterator[tuple[str, nn.Parameter]]:
        """The parameters, by name."""
        ...

    def attach_extras(self, extras: dict[str, Any]) -> None:
        """Attach the adapter's extra modules (e.g. ArmoRM's gating).

        Args:
            extras: Name → module, as the adapter built them.
        """

    def setup(self) -> None:
        """TransformerLens's hook-point setup."""


#: The class built (a `HookedRewardModel` or one of its subclasses).
M = TypeVar("M", bound=HookedModel)


def load_planned(model_class: type[M], plan: ConversionPlan, verify: bool | None) -> M:
    """Build `model_class` from a plan, after the parity check `verify` asks for.

    Args:
        model_class: The class to build (the kind the plan's adapter asks for).
        plan: The conversion plan.
        verify: Check against HF first (`None`: the adapter's choice; see `VERIFY_DOC`).

    Returns:
        The converted model, in eval mode.

    Raises:
        ConversionMismatchError: The converted model and HF disagree.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.zoo import zoo_path
        >>> plan = plan_conversion(zoo_path("scalar"), None, requested({}))
        >>> load_planned(HookedRewardModel, plan, verify=True).cfg.n_layers
        3
    """
    verify = plan.adapter.verify_by_default if verify is None else verify
    if not isinstance(plan.source, CheckpointSource):
        model = build_model(model_class, plan)
        if verify:  # the HF model is in memory anyway: compare the whole converted model
            verify_parity(model, plan.source.model, plan.adapter)
        return model
    if verify:
        verify_plan(model_class, plan)
    return build_model(model_class, plan)


def build_model(
    model_class: type[M],
    plan: ConversionPlan,
    n_layers: int | None = None,
    dtype: torch.dtype | None = None,
    device: str | None = None,
) -> M:
    """Build the hooked model of a `ConversionPlan` and stream its weights in.

    The model is built with its parameters on the meta device, then the converted weights are
    streamed into it one layer at a time (`Streamer`), each cast to `dtype` and placed on
    `device` as it is converted.

    Args:
        model_class: The class to build.
        plan: The conversion plan.
        n_layers: Build only the first layers (for `verify_plan`'s truncated copy).
        dtype: The model's dtype (default: the plan's).
        device: The model's device (default: the plan's).

    Returns:
        The model, in eval mode.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> plan = plan_conversion(tiny_reward_model("gpt2"), None, requested({}))
        >>> build_model(HookedRewardModel, plan, n_layers=1).cfg.n_layers
        1
    """
    cfg = copy.copy(plan.cfg)
    cfg.n_layers = n_layers or cfg.n_layers
    if device is not None:
        cfg.device = device
    dtype = dtype or plan.dtype
    with init_empty_weights(include_buffers=False):
        model = model_class(
            cfg,
            adapter=plan.adapter,
            pad_token_id=plan.pad_token_id,
            eos_token_id=plan.eos_token_id,
            bos_token_id=plan.bos_token_id,
            objective_names=plan.objective_names,
            tokenizer=plan.tokenizer,
            padding_side=plan.padding_side,
            move_to_device=False,
        )
    fold = foldable(cfg, plan.fold_flags["fold_ln"])
    if fold:
        use_pre_norms(model)
    stream_weights(model, plan, dtype, warn_whole=True)
    if fold:
        model.setup()
    cast(nn.Module, model).eval()  # every HookedModel is a module
    return model


def stream_weights(
    model: HookedModel, plan: ConversionPlan, dtype: torch.dtype, warn_whole: bool = False
) -> None:
    """Convert the plan's weights into `model` (built for that plan), one layer at a time.

    Each is cast to `dtype` and placed on `model.cfg.device`.

    Args:
        model: The hooked model, built for the plan.
        plan: The conversion plan.
        dtype: The model's dtype.
        warn_whole: Warn when a checkpoint must be converted as one part.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.zoo import load_model
        >>> model = HookedRewardModel.from_pretrained(load_model("scalar"))
        >>> plan = plan_conversion(load_model("scalar"), None, requested({}))
        >>> stream_weights(model, plan, torch.float32)
        >>> model.cfg.dtype
        torch.float32
    """
    cfg = model.cfg
    device = torch.device(cast(str, cfg.device))
    fold = foldable(cfg, plan.fold_flags["fold_ln"])
    streamer = Streamer(
        source=plan.source,
        adapter=plan.adapter,
        model=model,
        options=plan.options,
        flags={**plan.fold_flags, "fold_ln": fold},
        expected={name: p.shape for name, p in model.named_parameters()},
        dtype=dtype,
        device=device,
        layers=find_layer_list(plan.source.model, plan.cfg.n_layers),
        extras_fold_ln=plan.fold_flags["fold_ln"],
    )
    if warn_whole and streamer.layers is None and isinstance(plan.source, CheckpointSource):
        warnings.warn(
            f"{type(plan.source.model).__name__} has no single list of {cfg.n_layers} layers, so "
            "it is converted as one part: correct, but the float32 copy of the whole model is "
            "not avoided",
            WholeModelWarning,
            stacklevel=4,
        )
    streamer.run()
    if streamer.extras:
        model.attach_extras(streamer.extras)  # before the cast: the gate is cast too
    nn.Module.to(cast(nn.Module, model), device=device, dtype=dtype)  # buffers and gate
    model.cfg.dtype = dtype


@torch.no_grad()
def reload_weights(model: M, hf_model: nn.Module) -> M:
    """Convert the current weights of `hf_model` into `model` in place and return it.

    What `HookedRewardModel.from_pretrained(hf_model, model.tokenizer)` gives, without building
    a new hooked model (a monitor re-reads a model being trained this way). `model` must have
    been converted from the same architecture with the default conversion options, in its
    current dtype and device; its hooks and SAEs are left as they are.

    Args:
        model: The hooked model to update.
        hf_model: The HF model whose weights are read.

    Returns:
        `model`, updated.

    Raises:
        ConversionMismatchError: An HF model of another shape.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.zoo import load_model
        >>> hf = load_model("scalar")
        >>> hooked = HookedRewardModel.from_pretrained(hf)
        >>> with torch.no_grad():
        ...     _ = hf.score.weight.mul_(2.0)
        >>> fresh = HookedRewardModel.from_pretrained(hf)
        >>> bool(torch.equal(reload_weights(hooked, hf).W_U, fresh.W_U))
        True
    """
    request = requested({"dtype": model.cfg.dtype, "device": model.cfg.device})
    plan = plan_conversion(hf_model, model.tokenizer, request)
    mismatch = [
        name
        for name in ("n_layers", "d_model", "n_heads", "d_vocab", "d_mlp", "d_vocab_out")
        if getattr(plan.cfg, name) != getattr(model.cfg, name)
    ]
    if mismatch:
        raise ConversionMismatchError(
            f"{type(hf_model).__name__} does not have the hooked model's shape ({mismatch}): "
            "convert it with HookedRewardModel.from_pretrained instead"
        )
    stream_weights(model, plan, model.cfg.dtype)
    return model


def verify_plan(model_class: type[HookedModel], plan: ConversionPlan, n_layers: int = 2) -> float:
    """Check the conversion against HF's own forward, cheaply at any size.

    An in-memory HF model is compared with the whole converted model (`verify_parity`). From a
    checkpoint, a *truncated copy* is compared instead: the first `n_layers` layers with the
    embedding, final norm and head (and gating), built by the same streaming conversion from the
    same files in float32 on the CPU, against the HF model restricted to the same layers (a view
    of the meta-device HF model with those tensors read in). It costs the embedding twice plus
    `n_layers` layers, and is freed before the full model is built.

    Args:
        model_class: The class the plan is built into.
        plan: The conversion plan.
        n_layers: The layers of the truncated copy.

    Returns:
        The largest difference.

    Raises:
        ConversionMismatchError: The converted model and HF disagree.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.zoo import zoo_path
        >>> plan = plan_conversion(zoo_path("scalar"), None, requested({}))
        >>> verify_plan(HookedRewardModel, plan) < 1e-4
        True
    """
    source = plan.source
    if not isinstance(source, CheckpointSource):
        model = build_model(model_class, plan)
        return verify_parity(model, source.model, plan.adapter)
    layers = find_layer_list(source.model, plan.cfg.n_layers)
    keep = list(range(min(n_layers, plan.cfg.n_layers))) if layers else None
    small = build_model(model_class, plan, len(keep) if keep else None, torch.float32, "cpu")
    names = [
        n
        for n in state_tensors(source.model)
        if layers is None
        or not n.startswith(layers.prefix)
        or any(n.startswith(layers.layer_prefix(i)) for i in keep or ())
    ]
    with source.loaded(names):
        view = with_layers(source.model, layers, keep) if layers and keep else source.model
        return verify_parity(small, view, plan.adapter)


def positional_tokenizer(args: tuple[Any, ...]) -> Any:
    """The tokenizer given by position after the model (TransformerLens's positional flags refused).

    `from_pretrained(model, tokenizer)` passes the tokenizer second; TransformerLens's
    `from_pretrained` takes `fold_ln`, `center_writing_weights`, ... there instead, which are
    keyword-only here.

    Args:
        args: The positional arguments after the model.

    Returns:
        The tokenizer (`None` when none was given).

    Raises:
        ArgumentTypeError: More than one positional argument after the model, or a boolean
            (TransformerLens's positional `fold_ln`).

    Examples:
        >>> positional_tokenizer(()) is None
        True
        >>> try:
        ...     positional_tokenizer((False,))
        ... except TypeError as err:
        ...     print(type(err).__name__)
        ArgumentTypeError
    """
    if len(args) > 1 or (args and isinstance(args[0], bool)):
        shown = ", ".join(repr(a) for a in args)
        raise ArgumentTypeError(
            f"from_pretrained takes the model and the tokenizer by position, got ({shown}) after "
            "the model; the other options (fold_ln, center_writing_weights, ...) are keyword-only "
            "here: from_pretrained(model, tokenizer, fold_ln=False)"
        )
    return args[0] if args else None
