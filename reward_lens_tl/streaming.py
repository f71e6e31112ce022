"""Conversion one layer at a time: bounded memory, straight to the device.

A reward model is converted in parts: first the *globals* (embedding, positional embedding,
final norm, reward head), then each transformer layer in order. For each part:

1. the part's HF weights are made real: from a checkpoint directory they are read tensor by
   tensor from its safetensors files into an HF model built on the meta device
   (`CheckpointSource`; the next layer is read by a second thread while this one converts);
   an in-memory HF model already has them (`ModelSource`). A weight stored in the dtype the
   model is converted to is kept in it, any other is read in float32 (`working_copy`);
2. the adapter's converter (TransformerLens's own weight converter of the family) runs on a view
   of the HF model whose layer list holds only that layer (a shallow copy: the HF model itself is
   never modified), with a config of one layer;
3. TransformerLens's own weight processing (`ProcessWeights.process_weights`: `fold_ln`,
   `center_writing_weights`, `fold_value_biases`, `refactor_factored_attn_matrices`) runs
   on that part in float32 — every step of it is per layer; the embedding is processed in
   blocks of rows and a wide MLP in blocks of hidden units, since TL's steps on those are per
   row and per unit. Behind an RMS norm (`scales_only`) TL's only step on the MLP is scaling
   the rows of `W_in`/`W_gate` by the norm and it leaves the embedding alone, so those are
   done directly (`scaled_rows`: the same float32 products, rounded once) without TL's copies
   of every tensor;
4. the result is cast to the requested dtype, placed on the requested device and assigned into
   the hooked model, which was built with its parameters on the meta device (no weights
   allocated twice); the part's float32 copies are then freed.

Peak memory is therefore the converted model plus the transient of one part: one layer's
attention and its MLP as read, the next layer read ahead, plus TL's float32 copies of one
block (TL's processing copies the state dict it is given); measured in benchmarks/RESULTS.md
(e.g. 2.5 GiB above the converted model at Gemma-2-27B's width). A model without exactly one
layer list is converted as one part (with a `WholeModelWarning`): correct, but not bounded.

The result equals converting the whole state dict at once
(`HookedTransformer.load_and_process_state_dict`) to float32 rounding, and bit for bit for a
checkpoint stored in the model's dtype behind an RMS norm (tests/test_streaming.py): every step
above is TransformerLens's own or the same float32 product, on the same numbers.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.zoo import zoo_path
    >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))  # streamed from safetensors
    >>> all(not p.is_meta for p in model.parameters())
    True
"""

from __future__ import annotations

import copy
import ctypes
import ctypes.util
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from accelerate import init_empty_weights
from torch import Tensor, nn
from transformer_lens.components import LayerNormPre, RMSNormPre
from transformer_lens.weight_processing import ProcessWeights

from .checkpoint import weights_message
from .errors import (
    CheckpointNamesError,
    CheckpointWeightsError,
    ConversionMismatchError,
    UnsupportedArchitectureError,
)
from .weights import CheckpointWeights

__all__ = ["WholeModelWarning"]

#: Rows of the embedding processed (and held in float32) at once.
EMBEDDING_ROWS = 16384

#: Hidden units of an MLP processed (and held in float32) at once.
MLP_COLUMNS = 4096

#: Layer 0's MLP prefix (a layer part is processed as layer 0) and the hidden-unit axis of each
#: MLP tensor that `Streamer.process_mlp` splits (`b_out` has none: every block keeps it).
MLP = "blocks.0.mlp."
MLP_AXES = {"W_in": 1, "W_gate": 1, "b_in": 0, "W_out": 0}


def take_mlp(local: dict[str, Tensor], any_width: bool = False) -> dict[str, Tensor] | None:
    """Move a plain or gated MLP and the norm folded into it out of a layer-0 part.

    The MLP is `W_in`, `W_out`, optionally `W_gate`, `b_in`, `b_out`, and its norm `ln2`; it
    is moved only when it is wider than one block, or with `any_width`.

    Args:
        local: The layer-0 part (the MLP's tensors are removed from it).
        any_width: Move it whatever its width.

    Returns:
        The MLP's tensors, or `None` (nothing moved) for any other MLP (MoE, SoLU's norm, ...).
    """
    names = {k[len(MLP) :] for k in local if k.startswith(MLP)}
    if not {"W_in", "W_out"} <= names or not names <= {*MLP_AXES, "b_out"}:
        return None
    if not any_width and local[MLP + "W_in"].shape[1] <= MLP_COLUMNS:
        return None
    moved = [k for k in local if k.startswith((MLP, "blocks.0.ln2."))]
    return {k: local.pop(k) for k in moved}


def scales_only(cfg: Any) -> bool:
    """Whether TL's processing of this config's MLPs and embedding is at most a scaling.

    True behind an RMS norm, where `fold_ln` multiplies the rows of the weights reading the
    norm by its scale and no step centres (TL centres only behind a LayerNorm), for a plain
    sequential (not parallel, not attention-only) block. `Streamer.scale_mlp` and the
    embedding's direct cast (`Streamer.run_globals_by_rows`) then do the same work without
    TL's copies of every tensor.

    Args:
        cfg: The (one-part) TL config.

    Returns:
        `True` when only scaling happens.
    """
    return (
        cfg.normalization_type in ("RMS", "RMSPre")
        and not cfg.parallel_attn_mlp
        and not cfg.attn_only
        and not getattr(cfg, "num_experts", None)
    )


#: Hidden units scaled at once by `scaled_rows` (a float32 block of a few MB: in cache).
SCALE_UNITS = 256


def scaled_rows(weight: Tensor, rows: Tensor, dtype: torch.dtype, device: torch.device) -> Tensor:
    """`weight * rows` in `dtype` on `device`, each product in float32 and rounded once.

    What TL's float32 processing followed by a cast gives, without a float32 copy of the
    weight: the product is taken in blocks of `SCALE_UNITS` hidden units (contiguous in HF's
    layout, which the result keeps) and written into the result. The weight is only read, so a
    memory-mapped checkpoint's pages are never copied on write.

    Args:
        weight: `[d_model, d_mlp]` MLP weight (`W_in` or `W_gate`).
        rows: `[d_model, 1]` float32 scale.
        dtype: The result's dtype.
        device: The result's device.

    Returns:
        The scaled weight.

    Examples:
        >>> w = torch.randn(4, 600).bfloat16()
        >>> rows = torch.rand(4, 1) + 0.5
        >>> out = scaled_rows(w, rows, torch.bfloat16, torch.device("cpu"))
        >>> torch.equal(out, (w.float() * rows).bfloat16())
        True
    """
    out = torch.empty_like(weight, dtype=dtype, device=device)
    rows = rows.to(device)
    for start in range(0, weight.shape[1], SCALE_UNITS):
        units = slice(start, start + SCALE_UNITS)
        out[:, units] = weight[:, units].to(device, torch.float32) * rows
    return out


def mlp_block(key: str, value: Tensor, cols: slice) -> Tensor:
    """The hidden units `cols` of an MLP tensor (a copy); tensors without that axis whole.

    Args:
        key: The tensor's TL name.
        value: The tensor.
        cols: The hidden units to take.

    Returns:
        The block of the tensor.
    """
    axis = MLP_AXES.get(key[len(MLP) :]) if key.startswith(MLP) else None
    if axis is None:
        return value.clone()
    index = [slice(None)] * value.ndim
    index[axis] = cols
    return value[tuple(index)].clone()


#: Weight matrices TransformerLens refuses to fill when a converter does not produce them.
FAIL_LOUD = frozenset({"W_Q", "W_K", "W_V", "W_O", "_W_K", "_W_V", "W_in", "W_gate", "W_out"})

#: TransformerLens's normalisation types that `fold_ln` folds.
FOLDABLE_NORMS = ("LN", "LNPre", "RMS", "RMSPre")


class WholeModelWarning(UserWarning):
    """A checkpoint is converted whole rather than one layer at a time: correct, more memory.

    Its tensor names need transformers' renaming, or the model has no single layer list.

    Examples:
        A warning like any other: silence it where whole-model conversion is expected.

        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore", WholeModelWarning)
        ...     warnings.warn("converted whole", WholeModelWarning)
        >>> issubclass(WholeModelWarning, UserWarning)
        True
    """


# -- where the HF weights come from ------------------------------------------------------------
class ModelSource:
    """An HF model already in memory: every weight is real; nothing to read or free.

    Converted tensors are copied, so the model is never modified.

    Args:
        hf_model: The HF model.
    """

    copies = True

    def __init__(self, hf_model: nn.Module):
        """Wrap an in-memory HF model.

        Args:
            hf_model: The HF model.
        """
        self.model = hf_model

    def read_ahead(self, names: Sequence[str], keep: torch.dtype | None = None) -> Any:
        """Nothing to read ahead: the tensors are in memory.

        Args:
            names: HF state-dict names.
            keep: Unused.

        Returns:
            `None`.
        """
        return None

    @contextmanager
    def loaded(
        self, names: Sequence[str], keep: torch.dtype | None = None, ahead: Any = None
    ) -> Iterator[None]:
        """The HF tensors `names` are real inside the block.

        Args:
            names: HF state-dict names.
            keep: Unused (the tensors are the model's own).
            ahead: Unused.

        Yields:
            Nothing: the tensors are real while the block runs.
        """
        yield

    def embedding_name(self) -> str | None:
        """The input embedding's state-dict name when it is read in blocks of rows.

        Only from a checkpoint: an in-memory embedding is already there.

        Returns:
            Always `None` for an in-memory model.
        """
        return None


class CheckpointSource(ModelSource):
    """A checkpoint directory, read one part at a time.

    The HF model is built on the meta device (its buffers real) and each part's tensors are read
    from the safetensors files, in float32, only while the part is converted. Missing,
    unexpected and mis-shaped tensors are refused before anything is read.

    Args:
        path: The checkpoint directory.
        hf_config: Its HF config (already checked).
        model_class: The HF model class to build on the meta device.
    """

    copies = False

    def __init__(self, path: Path, hf_config: Any, model_class: type[nn.Module]):
        """Build the HF model on the meta device and check the checkpoint's tensor names.

        Args:
            path: The checkpoint directory.
            hf_config: Its HF config (already checked).
            model_class: The HF model class to build on the meta device.
        """
        self.weights = CheckpointWeights(path)
        with init_empty_weights(include_buffers=False):
            model = model_class(hf_config)
        super().__init__(model.eval())
        self.path = path
        self._meta = {name: (t.shape, t.dtype) for name, t in state_tensors(model).items()}
        #: tied tensors the checkpoint stores once (`lm_head.weight` → the embedding)
        self.ties = tied_sources(model, self._meta, self.weights)
        check_tensor_names(path, model, self._meta, self.weights, self.ties)

    def read_ahead(
        self, names: Sequence[str], keep: torch.dtype | None = None
    ) -> dict[str, Tensor]:
        """Read the HF tensors `names` (what `loaded` sets), touching nothing else.

        Safe to call from another thread while a part is converted (`Streamer.run` reads the
        next layer this way).

        Floating tensors are read in float32, except those stored in `keep` (the dtype the model
        is converted to: its converter and processing then see what an HF model loaded in that
        dtype holds, without a float32 copy of every weight).

        Args:
            names: HF state-dict names (tied tensors are read from the name they are stored under).
            keep: The dtype read as stored.

        Returns:
            Name → tensor, tied names included.
        """
        stored = [n for n in names if n in self.weights]
        out = {n: working_copy(t, keep) for n, t in self.weights.read(stored).items()}
        tied = {n: self.ties[n] for n in names if n in self.ties}
        for name, tensor in self.weights.read(set(tied.values())).items():
            tensor = working_copy(tensor, keep)
            out.update({t: tensor for t, source in tied.items() if source == name})
        return out

    @contextmanager
    def loaded(
        self,
        names: Sequence[str],
        keep: torch.dtype | None = None,
        ahead: dict[str, Tensor] | None = None,
    ) -> Iterator[None]:
        """The HF tensors `names` are read from the files inside the block, and freed after it.

        Args:
            names: HF state-dict names (tied tensors are read from the name they are stored under).
            keep: The dtype read as stored (see `read_ahead`).
            ahead: `read_ahead(names, keep)`, when it was already read.

        Yields:
            Nothing: the tensors are real while the block runs.
        """
        for name, tensor in (ahead if ahead is not None else self.read_ahead(names, keep)).items():
            set_tensor(self.model, name, tensor)
        try:
            yield
        finally:
            self.release(names)

    def release(self, names: Iterable[str]) -> None:
        """Put the tensors `names` back on the meta device, freeing their memory.

        Args:
            names: HF state-dict names.
        """
        for name in names:
            shape, dtype = self._meta[name]
            set_tensor(self.model, name, torch.empty(shape, dtype=dtype, device="meta"))

    def embedding_name(self) -> str | None:
        """The input embedding's state-dict name, to be read in blocks of rows.

        Returns:
            The name, or `None` when the checkpoint does not store the embedding under it.
        """
        embeddings = getattr(self.model, "get_input_embeddings", lambda: None)()
        weight = getattr(embeddings, "weight", None)
        names = [n for n, p in self.model.named_parameters() if p is weight]
        return names[0] if names and names[0] in self.weights else None

    def rows(self, name: str) -> int:
        """The number of rows of the stored tensor `name`.

        Args:
            name: An HF state-dict name.

        Returns:
            Its first dimension.
        """
        return self.weights.shape(name)[0]

    @contextmanager
    def loaded_rows(
        self, name: str, start: int, stop: int, keep: torch.dtype | None = None
    ) -> Iterator[None]:
        """Inside the block the HF tensor `name` is its rows `start:stop` (dtype as `loaded`).

        Args:
            name: An HF state-dict name.
            start: The first row.
            stop: The row after the last.
            keep: The dtype read as stored.

        Yields:
            Nothing: the rows are real while the block runs.
        """
        rows = self.weights.read_rows(name, start, stop)
        set_tensor(self.model, name, working_copy(rows, keep))
        try:
            yield
        finally:
            self.release([name])


def working_copy(tensor: Tensor, keep: torch.dtype | None) -> Tensor:
    """`tensor` in float32, or as it is when it is in `keep` or not floating.

    Args:
        tensor: A weight.
        keep: The dtype kept as it is.

    Returns:
        The weight to convert.
    """
    if not tensor.is_floating_point() or tensor.dtype in (keep, torch.float32):
        return tensor
    return tensor.float()


def state_tensors(model: nn.Module) -> dict[str, Tensor]:
    """Parameters and persistent buffers by state-dict name (tied tensors once per name).

    Args:
        model: An `nn.Module`.

    Returns:
        Name → tensor.
    """
    return dict(model.state_dict(keep_vars=True))


def tied_sources(
    model: nn.Module, expected: dict[str, tuple], weights: CheckpointWeights
) -> dict[str, str]:
    """`{tied name: stored name}` for the tensors the model ties to another.

    Ties are transformers's `all_tied_weights_keys`, e.g. a causal LM's `lm_head.weight` and its
    embedding, that the checkpoint stores once, under the other name, with the same shape.

    Args:
        model: The HF model (on the meta device).
        expected: Name → shape of the model's tensors.
        weights: The checkpoint's safetensors weights.

    Returns:
        Tied name → the name it is stored under.
    """
    ties = getattr(model, "all_tied_weights_keys", None) or {}
    return {
        target: source
        for target, source in ties.items()
        if target in expected
        and target not in weights
        and source in weights
        and weights.shape(source) == tuple(expected[target][0])
    }


def check_tensor_names(
    path: Path,
    model: nn.Module,
    expected: dict[str, tuple],
    weights: CheckpointWeights,
    ties: dict[str, str] | None = None,
) -> None:
    """The checkpoint holds exactly the model's tensors, with their shapes.

    What transformers would silently fill with random values or ignore is refused.

    Args:
        path: The checkpoint directory (named in the error).
        model: The HF model (on the meta device).
        expected: Name → shape of the model's tensors.
        weights: The checkpoint's safetensors weights.
        ties: Tied name → the name it is stored under (`tied_sources`).

    Raises:
        CheckpointNamesError: Missing or unexpected tensors.
        CheckpointWeightsError: Tensors of the wrong shape.
    """
    ignore_missing = _patterns(model, "_keys_to_ignore_on_load_missing")
    ignore_unexpected = _patterns(model, "_keys_to_ignore_on_load_unexpected")
    params = {name for name, _ in model.named_parameters(remove_duplicate=False)}
    missing = [
        n
        for n in expected
        if n not in weights
        and n in params
        and n not in (ties or {})
        and not any(p.search(n) for p in ignore_missing)
    ]
    unexpected = [
        n
        for n in weights.names()
        if n not in expected and not any(p.search(n) for p in ignore_unexpected)
    ]
    wrong = [
        f"{n} {weights.shape(n)} (the config says {tuple(expected[n][0])})"
        for n in expected
        if n in weights and weights.shape(n) != tuple(expected[n][0])
    ] + [
        f"{n} stored as {weights.dtype(n)} (a floating weight)"
        for n in expected
        if n in weights
        and expected[n][1].is_floating_point
        and not (weights.dtype(n) or torch.int8).is_floating_point
    ]
    if missing or unexpected or wrong:
        error = CheckpointNamesError if (missing or unexpected) else CheckpointWeightsError
        info = {"missing_keys": missing, "unexpected_keys": unexpected, "mismatched_keys": wrong}
        raise error(weights_message(path, info))


def _patterns(model: nn.Module, attribute: str) -> list[re.Pattern]:
    return [re.compile(p) for p in (getattr(model, attribute, None) or ())]


def set_tensor(model: nn.Module, name: str, value: Tensor) -> None:
    """Replace the parameter or buffer `name` of `model` by `value`.

    A parameter stays a parameter, with its `requires_grad`.

    Args:
        model: The module.
        name: The state-dict name.
        value: The new tensor.

    Raises:
        ConversionMismatchError: No parameter or buffer of that name.
    """
    owner, _, leaf = name.rpartition(".")
    module = model.get_submodule(owner)
    old = module._parameters.get(leaf)
    if old is not None:
        module._parameters[leaf] = nn.Parameter(value, requires_grad=old.requires_grad)
    elif leaf in module._buffers:
        module._buffers[leaf] = value
    else:
        raise ConversionMismatchError(f"{type(model).__name__} has no tensor {name!r}")


# -- the parts -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class LayerList:
    """Where an HF model keeps its transformer layers (an `nn.ModuleList`).

    Args:
        path: The attribute names leading to the list.
        n_layers: Its length.
    """

    path: tuple[str, ...]
    n_layers: int

    @property
    def prefix(self) -> str:
        """The state-dict prefix of the list (`"model.layers."`)."""
        return ".".join(self.path) + "."

    def layer_prefix(self, index: int) -> str:
        """The state-dict prefix of layer `index`.

        Args:
            index: The layer.

        Returns:
            The prefix, ending with a dot.
        """
        return f"{self.prefix}{index}."


def find_layer_list(hf_model: nn.Module, n_layers: int) -> LayerList | None:
    """The `nn.ModuleList` of the `n_layers` transformer layers (`model.layers`, ...).

    The one of that length inside the base model (`hf_model.base_model_prefix`) when several
    have it (ArmoRM's gate can), else the only one.

    Args:
        hf_model: The HF model.
        n_layers: The number of transformer layers.

    Returns:
        Where the list is, or `None` when that does not single one out.

    Examples:
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> find_layer_list(tiny_reward_model("gpt2"), 2).path
        ('transformer', 'h')
    """
    found = [
        name
        for name, module in hf_model.named_modules()
        if isinstance(module, nn.ModuleList) and len(module) == n_layers and name
    ]
    base = getattr(hf_model, "base_model_prefix", "") or ""
    if len(found) > 1 and base:
        found = [name for name in found if name.startswith(base + ".")]
    return LayerList(tuple(found[0].split(".")), n_layers) if len(found) == 1 else None


def with_layers(hf_model: nn.Module, layers: LayerList, keep: Sequence[int]) -> nn.Module:
    """A shallow copy of `hf_model` whose layer list holds only the layers `keep`.

    The modules themselves are shared; `hf_model` is not modified.

    Args:
        hf_model: The HF model.
        layers: Where its layer list is.
        keep: The layers to keep, in order.

    Returns:
        The shallow copy.
    """
    root = copy.copy(hf_model)
    root._modules = dict(hf_model._modules)
    original, clone = hf_model, root
    for name in layers.path[:-1]:
        child = copy.copy(original._modules[name])
        child._modules = dict(original._modules[name]._modules)  # type: ignore[union-attr]
        clone._modules[name] = child
        original, clone = original._modules[name], child  # type: ignore[assignment]
    full = original._modules[layers.path[-1]]
    clone._modules[layers.path[-1]] = nn.ModuleList([full[i] for i in keep])  # type: ignore[index]
    return root


def one_part_config(cfg: Any, n_layers: int) -> Any:
    """A copy of the TL config with `n_layers` layers, converting on the CPU in float32.

    Args:
        cfg: The TL config.
        n_layers: The number of layers of the copy.

    Returns:
        The copy.
    """
    part = copy.copy(cfg)
    part.n_layers = n_layers
    part.device = "cpu"
    part.dtype = torch.float32
    return part


@dataclass
class Streamer:
    """Convert, process and place the parts of one model (see the module docstring).

    Args:
        source: Where the HF weights come from.
        adapter: The family's adapter.
        model: The hooked model, built on the meta device.
        options: The conversion options.
        flags: TL's weight-processing flags.
        expected: The hooked model's parameter names and shapes before norms were folded (what
            TransformerLens's `fill_missing_keys` completes).
        dtype: The dtype each part is cast to.
        device: The device each part is placed on.
        layers: Where the HF model's layer list is (`None`: convert as one part).
        extras_fold_ln: The `fold_ln` the adapter's extra modules are built with (the user's).
        extras: The adapter's extra modules (e.g. ArmoRM's gating), set while the globals are
            converted.
    """

    source: ModelSource
    adapter: Any
    model: Any
    options: Any
    flags: dict[str, bool]
    expected: dict[str, torch.Size]
    dtype: torch.dtype
    device: torch.device
    layers: LayerList | None
    #: the `fold_ln` the adapter's extra modules are built with (the user's)
    extras_fold_ln: bool = True
    #: the adapter's extra modules (e.g. ArmoRM's gating), set while the globals are converted
    extras: dict[str, Any] = field(default_factory=dict)

    # -- HF names of a part ------------------------------------------------------------------
    def hf_names(self, layer: int | None) -> list[str]:
        """The HF state-dict names of layer `layer` (`None`: every tensor outside the layer list).

        Args:
            layer: The layer, or `None` for the globals.

        Returns:
            The names.
        """
        names = list(state_tensors(self.source.model))
        if self.layers is None:
            return names
        if layer is None:
            return [n for n in names if not n.startswith(self.layers.prefix)]
        return [n for n in names if n.startswith(self.layers.layer_prefix(layer))]

    # -- converting ----------------------------------------------------------------------------
    def converted(self, layer: int | None) -> dict[str, Tensor]:
        """TL-format tensors of one part, names as in the whole model.

        Float32, or the model's dtype where the HF weight is in it (`working_copy`).

        Args:
            layer: The layer, or `None` for the globals.

        Returns:
            TL name → tensor.

        Raises:
            UnsupportedArchitectureError: The converter gives a value that is not a tensor, or reads
                weights outside the part.
        """
        cfg = self.model.cfg
        if self.layers is None:
            view, part_cfg = self.source.model, one_part_config(cfg, cfg.n_layers)
        else:
            keep = [] if layer is None else [layer]
            view = with_layers(self.source.model, self.layers, keep)
            part_cfg = one_part_config(cfg, len(keep))
        raw = self.adapter.backbone_state_dict(view, part_cfg)
        out: dict[str, Tensor] = {}
        for key, value in raw.items():
            name = self.whole_name(key, layer)
            if name is None:
                continue
            if not isinstance(value, Tensor):
                raise UnsupportedArchitectureError(
                    f"{type(self.adapter).__name__}'s converter gives {name} = {value!r}, not a "
                    "tensor: TransformerLens cannot convert this configuration"
                )
            if value.is_meta:
                raise UnsupportedArchitectureError(
                    f"{type(self.adapter).__name__}'s converter reads weights outside the part "
                    f"it converts ({name}); it cannot be converted layer by layer"
                )
            work = working_copy(value.detach(), self.dtype)
            out[name] = work.to("cpu", copy=self.source.copies and work.dtype == value.dtype)
        if layer is None or self.layers is None:
            head = self.adapter.reward_head(view, self.options)
            out["unembed.W_U"] = head.W.to("cpu", torch.float32)
            out["unembed.b_U"] = head.b.to("cpu", torch.float32)
            self.extras = self.adapter.extra_modules(view, cfg, self.extras_fold_ln)
        return self.completed(out, layer)

    def whole_name(self, key: str, layer: int | None) -> str | None:
        """The converter's key in the whole model.

        `blocks.0.*` of a layer part becomes `blocks.{layer}.*`.

        Args:
            key: The converter's key.
            layer: The layer, or `None` for the globals.

        Returns:
            The whole model's key, or `None` when the key is not part of this part.
        """
        if self.layers is None:
            return key
        if layer is None:
            return None if key.startswith("blocks.") else key
        if not key.startswith("blocks.0."):
            return None
        return f"blocks.{layer}." + key[len("blocks.0.") :]

    def completed(self, part: dict[str, Tensor], layer: int | None) -> dict[str, Tensor]:
        """TransformerLens's `fill_missing_keys` for one part.

        A missing weight matrix of attention or MLP is refused (as TL refuses it); a missing norm
        weight is ones; any other missing tensor (a bias, a positional table the config does not
        use) is zeros.

        Args:
            part: The converted part.
            layer: The layer, or `None` for the globals.

        Returns:
            The completed part.

        Raises:
            UnsupportedArchitectureError: A missing weight matrix.
        """
        for name, shape in self.expected.items():
            if name in part or not in_part(name, layer, self.layers):
                continue
            leaf = name.rsplit(".", 1)[-1]
            if leaf in FAIL_LOUD:
                raise UnsupportedArchitectureError(
                    f"{type(self.adapter).__name__}'s converter produced no {name}; the "
                    "converter and TransformerLens's modules disagree on parameter names"
                )
            part[name] = torch.ones(shape) if leaf == "w" else torch.zeros(shape)
        return part

    # -- processing -----------------------------------------------------------------------------
    def process(self, part: dict[str, Tensor], layer: int | None) -> dict[str, Tensor]:
        """TransformerLens's weight processing of one part, in float32.

        A layer's `part` is emptied: TL copies what it processes, and the originals are freed as it
        does.

        Args:
            part: The completed part.
            layer: The layer, or `None` for the globals.

        Returns:
            The processed part.
        """
        cfg = self.model.cfg
        if self.layers is not None and layer is not None:
            out = self.process_layer(self.as_first_layer(part))
            return {f"blocks.{layer}." + k[9:]: v for k, v in out.items() if k[:9] == "blocks.0."}
        if self.layers is None:  # the whole model as one part
            whole = process_weights(part, one_part_config(cfg, cfg.n_layers), self.flags)
            return {k: self.cast(v) for k, v in whole.items()}
        return process_by_rows(part, one_part_config(cfg, 0), self.flags, self.cast)

    def process_layer(self, local: dict[str, Tensor]) -> dict[str, Tensor]:
        """One layer (named as layer 0), processed and cast.

        A plain or gated MLP is taken out and processed in blocks of `MLP_COLUMNS` hidden units
        (every step of TL's processing of an MLP is per hidden unit, except `b_out`'s centring,
        which every block repeats identically), so only a block is ever copied; behind an RMS
        norm (`scales_only`), where TL only scales its rows, by `scale_mlp`.

        Args:
            local: The layer's part, named as layer 0 (emptied).

        Returns:
            The processed, cast tensors.
        """
        cfg = one_part_config(self.model.cfg, 1)
        scaled = scales_only(cfg)
        # (parallel: ln1 feeds both)
        mlp = None if cfg.parallel_attn_mlp else take_mlp(local, any_width=scaled)
        try:
            done = process_weights(local, cfg, self.flags)
        except (AssertionError, KeyError, ValueError):  # TL needs the MLP with the rest
            if mlp is None:
                raise
            local.update(mlp)
            mlp, done = None, process_weights(local, cfg, self.flags)
        out = {k: self.cast(v) for k, v in done.items()}
        local.clear()
        del done
        if mlp is not None:
            out.update(self.scale_mlp(mlp, cfg) if scaled else self.process_mlp(mlp, cfg))
        return out

    def scale_mlp(self, mlp: dict[str, Tensor], cfg: Any) -> dict[str, Tensor]:
        """TL's processing of an MLP behind an RMS norm (`scales_only`), without its copies.

        There TL's only step is folding the norm's scale into the rows of `W_in` and `W_gate`
        (`(1 + w)` where the config says the norm adds one). The same product is taken here by
        `scaled_rows`, in float32 as TL computes it and rounded once to the model's dtype;
        every other tensor is only cast.
        Equal to TL's bit for bit (tests/test_streaming.py).

        Args:
            mlp: The MLP's tensors and its norm (`take_mlp`; emptied).
            cfg: The one-layer TL config.

        Returns:
            The processed, cast tensors (the folded norm's weight left out).
        """
        scale = mlp.pop("blocks.0.ln2.w", None) if self.flags["fold_ln"] else None
        rows = None
        if scale is not None:
            offset = getattr(cfg, "rmsnorm_uses_offset", False)
            rows = (1.0 + scale.float() if offset else scale.float())[:, None]
        out: dict[str, Tensor] = {}
        for key in list(mlp):
            value = mlp.pop(key)
            if rows is not None and key[len(MLP) :] in ("W_in", "W_gate"):
                out[key] = scaled_rows(value, rows, self.dtype, self.device)
            else:
                out[key] = self.cast(value)
        return out

    def process_mlp(self, mlp: dict[str, Tensor], cfg: Any) -> dict[str, Tensor]:
        """`process_layer`'s MLP, block by block (`assemble_blocks`).

        Args:
            mlp: The MLP's tensors (`take_mlp`).
            cfg: The one-layer TL config.

        Returns:
            The processed, cast tensors.
        """
        d_mlp = mlp[MLP + "W_in"].shape[1]
        blocks = (
            (cols, {**{k: mlp_block(k, v, cols) for k, v in mlp.items()}, **self.placeholders()})
            for cols in (slice(s, s + MLP_COLUMNS) for s in range(0, d_mlp, MLP_COLUMNS))
        )
        axes = {MLP + name: axis for name, axis in MLP_AXES.items()}
        return assemble_blocks(blocks, cfg, self.flags, axes, d_mlp, self.cast)

    def as_first_layer(self, part: dict[str, Tensor]) -> dict[str, Tensor]:
        """A layer part renamed to layer 0, with the embedding placeholders TL's processing expects.

        The tensors are moved out of `part`, which is left empty.

        Args:
            part: The layer part.

        Returns:
            The part as layer 0.
        """
        local = {"blocks.0." + k.split(".", 2)[2]: v for k, v in part.items()}
        part.clear()
        local.update(self.placeholders())
        return local

    def placeholders(self) -> dict[str, Tensor]:
        """One-row stand-ins for the embeddings, which TL's centring expects in every state dict.

        The real ones are processed with the globals.

        Returns:
            TL name → placeholder tensor.
        """
        d_model = self.model.cfg.d_model
        out = {"embed.W_E": torch.zeros(1, d_model)}
        if self.model.cfg.positional_embedding_type not in ("rotary", "alibi", "none"):
            out["pos_embed.W_pos"] = torch.zeros(1, d_model)
        return out

    def cast(self, tensor: Tensor) -> Tensor:
        """`tensor` in the model's dtype, on its device.

        Args:
            tensor: A processed tensor.

        Returns:
            The cast tensor.
        """
        dtype = self.dtype if tensor.is_floating_point() else tensor.dtype
        return tensor.to(self.device, dtype)

    # -- placing ----------------------------------------------------------------------------
    def place(self, part: dict[str, Tensor]) -> None:
        """Assign a processed part into the hooked model, cast and on the device.

        Args:
            part: The processed part.

        Raises:
            ConversionMismatchError: A tensor the model does not have, or of the wrong shape.
        """
        params = dict(self.model.named_parameters())
        for name, value in part.items():
            if name not in params:
                if self.flags["fold_ln"] and is_norm_key(name):
                    continue  # a folded norm's weight: the model now has a Pre norm there
                raise ConversionMismatchError(
                    f"the converted weights have {name}, which the hooked model does not"
                )
            if tuple(value.shape) != tuple(params[name].shape):
                raise ConversionMismatchError(
                    f"{name} converts to shape {tuple(value.shape)}, the hooked model expects "
                    f"{tuple(params[name].shape)}"
                )
            set_tensor(self.model, name, self.cast(value))

    def run(self) -> None:
        """Convert, process and place every part, globals first.

        Raises:
            ConversionMismatchError: A parameter of the hooked model that no part filled.
        """
        indices: Iterable[int | None] = [None]
        if self.layers is not None:
            indices = [None, *range(self.model.cfg.n_layers)]
        embedding = self.source.embedding_name() if self.layers is not None else None
        with ThreadPoolExecutor(max_workers=1) as reader:  # reads layer i + 1 while i converts
            ahead: Future | None = None
            for layer in indices:
                if layer is None and embedding is not None:
                    self.run_globals_by_rows(embedding)
                    continue
                names = self.hf_names(layer)
                tensors = ahead.result() if ahead is not None else None
                ahead = None
                if isinstance(layer, int) and layer + 1 < self.model.cfg.n_layers:
                    following = self.hf_names(layer + 1)
                    ahead = reader.submit(self.source.read_ahead, following, self.dtype)
                with self.source.loaded(names, self.dtype, tensors):
                    part = self.converted(layer)
                del tensors
                self.place(self.process(part, layer))
                del part
                release_freed_memory()
        left = [n for n, p in self.model.named_parameters() if p.is_meta]
        if left:
            raise ConversionMismatchError(
                f"the conversion left {len(left)} parameter(s) unset: {', '.join(left[:8])}"
            )

    def run_globals_by_rows(self, embedding: str) -> None:
        """The globals of a checkpoint, with the embedding handled in blocks of rows.

        The embedding is read, converted and processed block by block.

        The blocks are assembled with `assemble_blocks`; TL's only step on `W_E` is per row.

        Args:
            embedding: The embedding's HF state-dict name.
        """
        n_rows = self.source.rows(embedding)  # type: ignore[attr-defined]

        def blocks() -> Iterator[tuple[slice, dict[str, Tensor]]]:
            for start in range(0, n_rows, EMBEDDING_ROWS):
                rows = slice(start, start + EMBEDDING_ROWS)
                with self.source.loaded_rows(embedding, rows.start, rows.stop, self.dtype):  # type: ignore[attr-defined]
                    part = self.converted(None)
                yield rows, part
                del part  # before the next block is read

        cfg = one_part_config(self.model.cfg, 0)
        with self.source.loaded([n for n in self.hf_names(None) if n != embedding], self.dtype):
            axes = {"embed.W_E": 0}
            out = assemble_blocks(blocks(), cfg, self.flags, axes, n_rows, self.cast)
        self.place(out)
        release_freed_memory()


def release_freed_memory() -> None:
    """Hand memory freed by the last part back to the operating system.

    glibc keeps freed blocks of tens of megabytes in its heap, where they would add up over the
    layers; measured on the Llama-3.2-1B shape: 0.55 GiB of final RSS. A no-op where glibc is
    not the C library.
    """
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _glibc() -> Any:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:  # not a glibc system
        return None


_LIBC = _glibc()


def in_part(name: str, layer: int | None, layers: LayerList | None) -> bool:
    """Whether the TL tensor `name` belongs to the part of `layer`.

    Args:
        name: A TL state-dict name.
        layer: The layer, or `None` for the globals.
        layers: Where the HF model's layer list is (`None`: one part holds everything).

    Returns:
        `True` when the tensor is in that part.
    """
    if layers is None:
        return True
    if layer is None:
        return not name.startswith("blocks.")
    return name.startswith(f"blocks.{layer}.")


def is_norm_key(name: str) -> bool:
    """Whether the TL tensor `name` is a norm's weight or bias.

    Args:
        name: A TL state-dict name.

    Returns:
        `True` for a norm's `w` or `b`.
    """
    module, _, leaf = name.rpartition(".")
    return leaf in ("w", "b") and module.rsplit(".", 1)[-1].startswith(("ln", "norm"))


def process_weights(part: dict[str, Tensor], cfg: Any, flags: dict[str, bool]) -> dict[str, Tensor]:
    """`ProcessWeights.process_weights` with the conversion's flags (`center_unembed` off).

    TL folds the final norm's weight into `W_U` along the axis whose size matches
    `d_model`, trying the output axis first, so a square head (`d_model` outputs, e.g.
    Qwen2.5-Math-PRM's first head layer) would be scaled along the wrong axis: it is given a
    zero column while it is processed.

    Args:
        part: The completed part, float32.
        cfg: The one-part TL config.
        flags: TL's weight-processing flags.

    Returns:
        The processed part.
    """
    W_U = part.get("unembed.W_U")
    square = W_U is not None and W_U.ndim == 2 and W_U.shape[0] == W_U.shape[1]
    if square:
        part["unembed.W_U"] = torch.nn.functional.pad(part["unembed.W_U"], (0, 1))
        part["unembed.b_U"] = torch.nn.functional.pad(part["unembed.b_U"], (0, 1))
    out = _tl_process_weights(part, cfg, flags)
    if square:
        out["unembed.W_U"] = out["unembed.W_U"][:, :-1].contiguous()
        out["unembed.b_U"] = out["unembed.b_U"][:-1].contiguous()
    return out


def _tl_process_weights(
    part: dict[str, Tensor], cfg: Any, flags: dict[str, bool]
) -> dict[str, Tensor]:
    return ProcessWeights.process_weights(
        part,
        cfg,
        fold_ln=flags["fold_ln"],
        center_writing_weights=flags["center_writing_weights"],
        center_unembed=False,
        fold_value_biases=flags["fold_value_biases"],
        refactor_factored_attn_matrices=flags["refactor_factored_attn_matrices"],
    )


def process_by_rows(
    part: dict[str, Tensor],
    cfg: Any,
    flags: dict[str, bool],
    cast: Callable[[Tensor], Tensor],
) -> dict[str, Tensor]:
    """Process in-memory globals with the embedding in blocks of `EMBEDDING_ROWS` rows.

    Blocks are assembled with `assemble_blocks`; TL's only step on `W_E` is per row: centring
    each row.

    Args:
        part: The completed globals.
        cfg: The one-part TL config.
        flags: TL's weight-processing flags.
        cast: Casts and places a processed tensor.

    Returns:
        The processed, cast globals.
    """
    W_E = part.pop("embed.W_E", None)
    if W_E is None:
        return {k: cast(v) for k, v in process_weights(part, cfg, flags).items()}
    blocks = (
        (rows, {**{k: v.clone() for k, v in part.items()}, "embed.W_E": W_E[rows].clone()})
        for rows in (slice(s, s + EMBEDDING_ROWS) for s in range(0, W_E.shape[0], EMBEDDING_ROWS))
    )
    return assemble_blocks(blocks, cfg, flags, {"embed.W_E": 0}, W_E.shape[0], cast)


def assemble_blocks(
    blocks: Iterable[tuple[slice, dict[str, Tensor]]],
    cfg: Any,
    flags: dict[str, bool],
    axes: dict[str, int],
    size: int,
    cast: Callable[[Tensor], Tensor],
) -> dict[str, Tensor]:
    """TL's processing of a part given in blocks; only one block is ever held in float32.

    Each block `(where, tensors)` is processed as it comes; a tensor named in `axes` is cast and
    written at `where` along its axis into a tensor whose axis has `size` entries, any other
    tensor (the same in every block) is taken, cast, from the first block. Where TL's processing
    leaves the embedding as it is (`centres_writing` false), its blocks are only cast, and
    blocks after the first are not processed at all when nothing else is split.

    Args:
        blocks: The `(where, tensors)` blocks.
        cfg: The one-part TL config.
        flags: TL's weight-processing flags.
        axes: TL name → the axis the blocks split.
        size: The full size of that axis.
        cast: Casts and places a processed tensor.

    Returns:
        The processed, cast part.
    """
    out: dict[str, Tensor] = {}
    direct = set() if centres_writing(cfg, flags) else {"embed.W_E"} & set(axes)
    for where, block in blocks:
        kept = {key: block.pop(key) for key in direct}
        done = process_weights(block, cfg, flags) if set(axes) - direct or not out else {}
        for key, value in {**kept, **done}.items():
            if key in axes:
                value = cast(value)
                if key not in out:
                    shape = list(value.shape)
                    shape[axes[key]] = size
                    out[key] = torch.empty(shape, dtype=value.dtype, device=value.device)
                index = [slice(None)] * value.ndim
                index[axes[key]] = where
                out[key][tuple(index)] = value
            elif key not in out:
                out[key] = cast(value)
        del block
    return out


def centres_writing(cfg: Any, flags: dict[str, bool]) -> bool:
    """Whether TL's processing centres the weights writing to the residual stream (`W_E`...).

    TransformerLens centres them only behind a LayerNorm (not with a final RMS norm); it is the
    only step of its processing that changes the embedding.

    Args:
        cfg: The TL config.
        flags: TL's weight-processing flags.

    Returns:
        `True` when `W_E` is centred.
    """
    return (
        flags["center_writing_weights"]
        and cfg.normalization_type in ("LN", "LNPre")
        and not getattr(cfg, "final_rms", False)
    )


def foldable(cfg: Any, fold_ln: bool) -> bool:
    """Whether TL folds the norms of this config (`fold_ln` and a foldable norm type).

    Args:
        cfg: The TL config.
        fold_ln: The requested `fold_ln`.

    Returns:
        `True` when the norms are folded.
    """
    return fold_ln and cfg.normalization_type in FOLDABLE_NORMS


def use_pre_norms(model: Any) -> None:
    """Before folding, replace the norms by their weightless versions.

    `LN` → `LNPre`, `RMS` → `RMSPre`, as `HookedTransformer.load_and_process_state_dict` does.

    Args:
        model: The hooked model.
    """
    cfg = model.cfg
    pre = {"LN": ("LNPre", LayerNormPre), "RMS": ("RMSPre", RMSNormPre)}
    if cfg.normalization_type not in pre:
        return
    cfg.normalization_type, norm = pre[cfg.normalization_type]
    model.ln_final = norm(cfg)
    for block in model.blocks:
        block.ln1 = norm(cfg)
        block.ln2 = norm(cfg)
        if cfg.is_layer_norm_activation():
            block.mlp.ln = norm(cfg)
