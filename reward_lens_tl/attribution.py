"""Direct attribution along the reward direction, exact: parts + head bias = reward.

The final residual at the reward position is a sum of components: the token (and position)
embeddings, every attention head's output, every MLP's output, and the blocks' output biases.
With the final norm's scale frozen at the value the model used, the read-out is linear
(:mod:`reward_lens_tl.readout`), so each component's contribution is ``c · u`` and they sum to
the reward exactly. Post-norm architectures (Gemma-2) freeze each sublayer's post-norm scale
the same way, which keeps per-head contributions exact there too.

Head contributions can be split by source position (attention pattern × value, exact), and MLP
contributions by neuron.

>>> from reward_lens_tl import HookedRewardModel
>>> from reward_lens_tl.testing import tiny_reward_model, random_batch
>>> model = HookedRewardModel.from_pretrained(tiny_reward_model("gemma2"))
>>> ids, mask = random_batch(2, [9, 6])
>>> attr = direct_attribution(model, ids, mask)
>>> attr.labels[:3], bool(attr.completeness_error() < 1e-4)
(('embed', 'L0H0', 'L0H1'), True)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import einops
import torch
from jaxtyping import Float
from torch import Tensor

from reward_lens_tl.errors import InvalidArgumentError

from .components import Component
from .errors import RewardLensError
from .pairs import OnError, SkippedPair, finished_chunks, map_pair_batches, pair_index_columns
from .readout import Objective, ReadoutRun, gather_positions, run_readout, wide
from .results import MarginResult, Result, TopK, new_axes, tidy_frame, top_entries


@dataclass(frozen=True)
class AttributionResult(Result):
    """Contributions ``values [component, example]`` with their ``labels``.

    ``values.sum(0) + head_bias == rewards`` (see :meth:`completeness_error`). Optional
    ``sources [layer, head, example, src_pos]`` and ``neurons [layer, example, d_mlp]``.
    """

    values: Float[Tensor, "component example"]
    labels: tuple[str, ...]
    head_bias: Float[Tensor, " example"]
    rewards: Float[Tensor, " example"]
    sources: Float[Tensor, "layer head example src"] | None = None
    neurons: Float[Tensor, "layer example d_mlp"] | None = None
    #: What each row is (kind, layer, head); its ``tl_label`` is TransformerLens's name.
    components: tuple[Component, ...] = ()

    def __post_init__(self):
        if self.values.shape[0] != len(self.labels):
            raise InvalidArgumentError(
                f"{self.values.shape[0]} values for {len(self.labels)} labels"
            )
        if self.components and len(self.components) != len(self.labels):
            raise InvalidArgumentError(
                f"{len(self.components)} components for {len(self.labels)} labels"
            )

    @property
    def tl_labels(self) -> tuple[str, ...]:
        """TransformerLens's names for the rows (``0_attn_out``, ``L0H1``, ...)."""
        return tuple(c.tl_label for c in self.components)

    def total(self) -> Float[Tensor, " example"]:
        return self.values.sum(0) + self.head_bias

    def completeness_error(self) -> float:
        """max |Σ parts + head bias − reward| (≤ 1e-4 in float32)."""
        return float((self.total() - self.rewards).abs().max())

    def __getitem__(self, label: str) -> Tensor:
        return self.values[self.labels.index(label)]

    def __sub__(self, other: AttributionResult) -> AttributionResult:
        """Difference of two attributions (e.g. chosen − rejected = margin attribution)."""
        if self.labels != other.labels:
            raise InvalidArgumentError("attributions of different components cannot be subtracted")
        return AttributionResult(
            values=self.values - other.values,
            labels=self.labels,
            components=self.components,
            head_bias=self.head_bias - other.head_bias,
            rewards=self.rewards - other.rewards,
            neurons=None
            if self.neurons is None or other.neurons is None
            else self.neurons - other.neurons,
        )

    def head_matrix(self) -> Float[Tensor, "layer head example"]:
        """Per-head values arranged ``[layer, head, example]`` (needs head-level labels)."""
        rows: dict[int, list[Tensor]] = {}
        for component, v in zip(self.components, self.values, strict=True):
            if component.kind == "head":
                rows.setdefault(component.layer, []).append(v)
        if not rows:
            raise RewardLensError("no per-head components: run with heads=True")
        return torch.stack([torch.stack(rows[layer]) for layer in sorted(rows)])

    def top_k(self, k: int = 10, example: int | None = None) -> TopK:
        """The ``k`` components with the largest |contribution| to one ``example``, or to the
        mean over examples (``example=None``), as ``[(label, signed value)]`` sorted by
        |value|."""
        vals = self.values[:, example] if example is not None else self.values.mean(1)
        return top_entries(self.labels, vals.tolist(), k, "contribution")

    def to_dataframe(self):
        return tidy_frame(self.values, self.labels, "component", "contribution")

    def plot(self, ax=None, k: int = 15):
        """Bar chart of the top-``k`` components (mean over examples); returns the figure."""
        fig, ax = new_axes(ax, figsize=(6, 0.25 * k + 1))
        top = self.top_k(k)[::-1]
        ax.barh(
            [label for label, _ in top],
            [v for _, v in top],
            color=["#c00000" if v < 0 else "#4472c4" for _, v in top],
        )
        ax.axvline(0, color="k", lw=0.5)
        ax.set_xlabel("contribution to the reward (mean over examples)")
        fig.tight_layout()
        return fig


@dataclass(frozen=True)
class PairAttribution(MarginResult):
    """Attribution of each pair's chosen and rejected response; ``.margin`` is their
    difference (frame, figure and top entries are the margin's). Example ``j`` is input pair
    ``indices[j]`` (source ``records[j]``); pairs skipped with ``on_error="skip"`` are listed
    in ``skipped``."""

    chosen: AttributionResult
    rejected: AttributionResult
    indices: tuple[int, ...] = ()
    records: tuple[int | None, ...] = ()
    skipped: tuple[SkippedPair, ...] = ()

    def to_dataframe(self):
        """The margin's frame, with each row's input pair ``index`` and source ``record``."""
        return pair_index_columns(self.margin.to_dataframe(), self.indices, self.records)


def attribution_hook_names(model, heads: bool, sources: bool, neurons: bool) -> list[str]:
    names = ["hook_embed"]
    if "hook_pos_embed" in model.hook_dict and model.cfg.positional_embedding_type == "standard":
        names.append("hook_pos_embed")
    for layer in range(model.cfg.n_layers):
        b = f"blocks.{layer}"
        names += [f"{b}.attn.hook_z" if heads else f"{b}.hook_attn_out", f"{b}.hook_mlp_out"]
        if model.cfg.use_normalization_before_and_after:
            names += [f"{b}.ln1_post.hook_scale", f"{b}.ln2_post.hook_scale"]
        if sources:
            names += [f"{b}.attn.hook_pattern", f"{b}.attn.hook_v"]
        if neurons:
            names.append(f"{b}.mlp.hook_post")
    return names


def _post_norm_unit(model, cache, layer: int, which: str, u: Tensor, pos: Tensor) -> Tensor:
    """``u`` seen from before a post-norm (``ln1_post``/``ln2_post``) with frozen scale."""
    if not model.cfg.use_normalization_before_and_after:
        return u
    norm = getattr(model.blocks[layer], which)
    scale = gather_positions(cache[f"blocks.{layer}.{which}.hook_scale"], pos)  # [batch, 1]
    return u * norm.w / scale


def direct_attribution(
    model,
    input_ids: Tensor,
    attention_mask: Tensor | None = None,
    *,
    heads: bool = True,
    sources: bool = False,
    neurons: bool = False,
    objective: Objective = None,
    positions: Sequence[int] | Tensor | None = None,
    split_bias: bool = False,
    fwd_hooks: Sequence = (),
) -> AttributionResult:
    """Decompose each example's reward into components (see the module docstring).

    Components: ``embed`` (and ``pos_embed``), ``L{l}H{h}`` per head (or ``attn{l}`` with
    ``heads=False``), ``mlp{l}``, and ``bias`` (all blocks' output biases); the head's own
    bias is ``head_bias``. ``sources=True`` adds ``sources[l, h, example, src]`` (summing to
    the head's value), ``neurons=True`` adds ``neurons[l, example, n]`` (summing to ``mlp{l}``
    minus its output bias). ``positions`` reads at explicit positions instead of the reward
    position (the parts then sum to the per-position reward there); ``split_bias`` reports the
    biases per sublayer (``attn{l}.bias``, ``mlp{l}.bias``) instead of one ``bias``;
    ``fwd_hooks`` are the
    user's own interventions, active during the run.
    """
    if sources and not heads:
        raise RewardLensError("sources=True needs heads=True")
    run = run_readout(
        model,
        input_ids,
        attention_mask,
        attribution_hook_names(model, heads, sources, neurons),
        objective=objective,
        positions=positions,
        fwd_hooks=fwd_hooks,
    )
    return attribution_from_run(
        model, run, heads=heads, sources=sources, neurons=neurons, split_bias=split_bias
    )


def attribution_from_run(
    model,
    run: ReadoutRun,
    *,
    heads: bool = True,
    sources: bool = False,
    neurons: bool = False,
    split_bias: bool = False,
) -> AttributionResult:
    """:func:`direct_attribution` of a run already made (its cache must hold
    :func:`attribution_hook_names`), so one forward pass can serve several analyses."""
    cache, pos, read = run.cache, run.positions, run.read
    u = read.unit(gather_positions(cache["ln_final.hook_scale"], pos)[:, 0])  # [batch, d_model]

    values, components = [], []

    def add(component: Component, value: Tensor) -> None:
        components.append(component)
        values.append(value)

    add(Component("embed"), (gather_positions(cache["hook_embed"], pos) * u).sum(-1))
    if "hook_pos_embed" in cache:
        add(Component("pos_embed"), (gather_positions(cache["hook_pos_embed"], pos) * u).sum(-1))
    bias = torch.zeros_like(read.bias)
    source_rows, neuron_rows = [], []
    for layer in range(model.cfg.n_layers):
        block = model.blocks[layer]
        u_attn = _post_norm_unit(model, cache, layer, "ln1_post", u, pos)
        u_mlp = _post_norm_unit(model, cache, layer, "ln2_post", u, pos)
        attn_bias = (block.attn.b_O * u_attn).sum(-1)
        mlp_bias = (block.mlp.b_out * u_mlp).sum(-1)
        bias = bias + attn_bias + mlp_bias
        if split_bias:
            add(Component("attn_bias", layer), attn_bias)
        if heads:
            z = gather_positions(cache[f"blocks.{layer}.attn.hook_z"], pos)  # [batch, head, e]
            per_head = einops.einsum(
                wide(z), wide(block.attn.W_O), u_attn, "b h e, h e d, b d -> h b"
            )
            for h in range(model.cfg.n_heads):
                add(Component("head", layer, h), per_head[h])
            if sources:
                source_rows.append(_head_sources(model, cache, layer, pos, u_attn))
        else:
            attn_out = gather_positions(cache[f"blocks.{layer}.hook_attn_out"], pos)
            add(Component("attn", layer), (attn_out * u).sum(-1) - attn_bias)
        mlp_out = gather_positions(cache[f"blocks.{layer}.hook_mlp_out"], pos)
        add(Component("mlp", layer), (mlp_out * u).sum(-1) - mlp_bias)
        if split_bias:
            add(Component("mlp_bias", layer), mlp_bias)
        if neurons:
            post = gather_positions(cache[f"blocks.{layer}.mlp.hook_post"], pos)
            neuron_rows.append(
                einops.einsum(wide(post), wide(block.mlp.W_out), u_mlp, "b n, n d, b d -> b n")
            )
    if not split_bias:
        add(Component("bias"), bias)
    return AttributionResult(
        values=torch.stack(values).detach().float().cpu(),
        labels=tuple(c.label for c in components),
        components=tuple(components),
        head_bias=read.bias.detach().float().cpu(),
        rewards=run.target.detach().float().cpu(),
        sources=torch.stack(source_rows).detach().float().cpu() if sources else None,
        neurons=torch.stack(neuron_rows).float().cpu() if neurons else None,
    )


def _head_sources(model, cache, layer: int, pos: Tensor, u_attn: Tensor) -> Tensor:
    """``[head, batch, src]``: pattern(query=pool, src) × (v_src W_O · u)."""
    block = model.blocks[layer]
    pattern = cache[f"blocks.{layer}.attn.hook_pattern"]  # [batch, head, q, k]
    rows = torch.arange(pattern.shape[0], device=pattern.device)
    pattern = pattern[rows, :, pos]  # [batch, head, k]
    v = cache[f"blocks.{layer}.attn.hook_v"]  # [batch, k, kv_head, e]
    if v.shape[2] != model.cfg.n_heads:
        v = v.repeat_interleave(model.cfg.n_heads // v.shape[2], dim=2)
    wu = einops.einsum(wide(block.attn.W_O), u_attn, "h e d, b d -> b h e")  # d_model first
    vo = einops.einsum(wide(v), wu, "b k h e, b h e -> h b k")
    return wide(pattern).permute(1, 0, 2) * vo


def attribute_pairs(
    model,
    pairs: Iterable,
    *,
    batch_size: int = 16,
    truncation: str = "error",
    on_error: OnError = "raise",
    **kwargs,
) -> PairAttribution:
    """Direct attribution of each pair's chosen and rejected response, streamed in chunks
    (memory is bounded by ``batch_size``; ``pairs`` may be any iterable); ``.margin``
    decomposes the reward margins. ``truncation`` (``"error"``, ``"left"``, ``"right"``,
    ``"both"``) applies to pairs given as text. A pair that cannot be encoded stops the run
    (``on_error="raise"``, the error names the pair) or is left out and listed in ``.skipped``
    (``"skip"``); ``.indices`` says which input pair each example is. Runs split across
    processes under ``torchrun`` (:mod:`reward_lens_tl.distributed`).

    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.testing import tiny_reward_model, tiny_tokenizer
    >>> from types import SimpleNamespace as Pair
    >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"), tiny_tokenizer())
    >>> pairs = [Pair(prompt="w6", chosen=c, rejected="w8") for c in ("w7 " * 99, "w7")]
    >>> result = attribute_pairs(model, pairs, on_error="skip")
    >>> result.indices, [s.index for s in result.skipped]
    ((1,), [0])
    """
    if kwargs.get("sources"):
        raise RewardLensError(
            "source positions differ between responses of different lengths; call "
            "direct_attribution(..., sources=True) on a pair's two sequences instead"
        )

    def run(ids: Tensor, mask: Tensor, n: int) -> tuple[AttributionResult, AttributionResult]:
        result = direct_attribution(model, ids, mask, **kwargs)
        return _select(result, slice(0, n)), _select(result, slice(n, None))

    chunks = map_pair_batches(
        model, pairs, run, batch_size=batch_size, truncation=truncation, on_error=on_error
    )
    done, skipped = finished_chunks(chunks)
    return PairAttribution(
        chosen=_concat([c.output[0] for c in done]),
        rejected=_concat([c.output[1] for c in done]),
        indices=tuple(i for c in done for i in c.kept),
        records=tuple(r for c in done for r in c.records),
        skipped=skipped,
    )


def _select(result: AttributionResult, rows: slice) -> AttributionResult:
    return replace(
        result,
        values=result.values[:, rows],
        head_bias=result.head_bias[rows],
        rewards=result.rewards[rows],
        sources=None,
        neurons=None if result.neurons is None else result.neurons[:, rows],
    )


def _concat(parts: list[AttributionResult]) -> AttributionResult:
    first = parts[0]
    return AttributionResult(
        values=torch.cat([p.values for p in parts], 1),
        labels=first.labels,
        components=first.components,
        head_bias=torch.cat([p.head_bias for p in parts]),
        rewards=torch.cat([p.rewards for p in parts]),
        neurons=None if first.neurons is None else torch.cat([p.neurons for p in parts], 1),
    )
