"""Direct attribution along the reward direction, exact: parts + head bias = reward.

The final residual at the reward position is a sum of components: the token (and position)
embeddings, every attention head's output, every MLP's output, and the blocks' output biases.
With the final norm's scale frozen at the value the model used, the read-out is linear
(`reward_lens_tl.readout`), so each component's contribution is `c · u` and they sum to
the reward exactly. Post-norm architectures (Gemma-2) freeze each sublayer's post-norm scale
the same way, which keeps per-head contributions exact there too.

Head contributions can be split by source position (attention pattern × value, exact), and MLP
contributions by neuron.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.testing import tiny_reward_model, random_batch
    >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("gemma2"))
    >>> ids, mask = random_batch(2, [9, 6])
    >>> attr = direct_attribution(model, ids, mask)
    >>> attr.labels[:3], bool(attr.completeness_error() < 1e-4)
    (('embed', 'L0H0', 'L0H1'), True)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, overload

import einops
import torch
from jaxtyping import Float, Int
from torch import Tensor

from .components import Component
from .errors import InvalidArgumentError, RewardLensError, UsageError
from .pair_batches import OnError, SkippedPair, pair_index_columns
from .plotting import SIGNED, Backend, render
from .readout import Objective, ReadoutRun, gather_positions, run_readout, wide
from .results import (
    PAIR_RUN_DOC,
    MarginResult,
    Result,
    TopK,
    axes,
    bar_chart,
    run_pair_batches,
    tidy_frame,
    top_entries,
)
from .signatures import pasted_docs

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from .model import HookedRewardModel

__all__ = ["direct_attribution", "pair_attribution"]


@dataclass(frozen=True)
class AttributionResult(Result):
    """Contributions `values [component, example]` with their `labels`.

    `values.sum(0) + head_bias == rewards` (see `completeness_error`). Optional
    `sources [layer, head, example, src_pos]` and `neurons [layer, example, d_mlp]`.
    """

    example_axes = axes(values=1, head_bias=0, rewards=0, sources=2, neurons=1)

    values: Float[Tensor, "component example"]
    labels: tuple[str, ...]
    head_bias: Float[Tensor, " example"]
    rewards: Float[Tensor, " example"]
    sources: Float[Tensor, "layer head example src"] | None = None
    neurons: Float[Tensor, "layer example d_mlp"] | None = None
    #: What each row is (kind, layer, head); its `tl_label` is TransformerLens's name.
    components: tuple[Component, ...] = ()

    def __post_init__(self):
        """Check that values, labels and components agree in number."""
        if self.values.shape[0] != len(self.labels):
            raise InvalidArgumentError(
                f"{self.values.shape[0]} values for {len(self.labels)} labels"
            )
        if self.components and len(self.components) != len(self.labels):
            raise InvalidArgumentError(
                f"{len(self.components)} components for {len(self.labels)} labels"
            )
        super().__post_init__()

    @property
    def tl_labels(self) -> tuple[str, ...]:
        """TransformerLens's names for the rows (`0_attn_out`, `L0H1`, ...)."""
        return tuple(c.tl_label for c in self.components)

    def total(self) -> Float[Tensor, " example"]:
        """Sum of the parts plus the head bias, per example (the reconstructed reward).

        Returns:
            The reconstructed reward of each example.
        """
        return self.values.sum(0) + self.head_bias

    def completeness_error(self) -> float:
        """Maximum |Σ parts + head bias − reward| (≤ 1e-4 in float32)."""
        return float((self.total() - self.rewards).abs().max())

    def __getitem__(self, label: str) -> Tensor:
        """Values of the component `label`."""
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
        """Per-head values arranged `[layer, head, example]` (needs head-level labels)."""
        rows: dict[int, list[Tensor]] = {}
        for component, v in zip(self.components, self.values, strict=True):
            if component.kind == "head" and component.layer is not None:
                rows.setdefault(component.layer, []).append(v)
        if not rows:
            raise RewardLensError("no per-head components: run with heads=True")
        return torch.stack([torch.stack(rows[layer]) for layer in sorted(rows)])

    def top_k(self, k: int = 10, example: int | None = None) -> TopK:
        """The `k` components with the largest |contribution| to one `example` or to the mean.

        The mean over examples is taken with `example=None`; the result is `[(label, signed value)]`
        sorted by |value|.
        """
        vals = self.values[:, example] if example is not None else self.values.mean(1)
        return top_entries(self.labels, vals.tolist(), k, "contribution")

    def to_dataframe(self):
        """The contributions as a tidy frame (one row per component and example)."""
        return tidy_frame(self.values, self.labels, "component", "contribution")

    def plot(self, ax: Axes | None = None, k: int = 15, *, backend: Backend | None = None) -> Any:
        """Bars of the top-`k` components by |mean contribution|, red below 0, blue above.

        Hover shows each component and its exact mean contribution.

        Args:
            ax: Matplotlib axes to draw the static form on.
            k: How many components.
            backend: `"plotly"` or `"matplotlib"` (see `reward_lens_tl.plotting`).

        Returns:
            The figure (not shown).
        """
        n = self.values.shape[1]
        fig = bar_chart(
            self.top_k(k),
            f"contribution to the reward (mean over {n} example{'s' * (n != 1)})",
            colors=SIGNED,
            title=f"direct attribution: the top {min(k, len(self.labels))} components",
        )
        return render(fig, backend, ax)


@dataclass(frozen=True)
class PairAttribution(MarginResult):
    """Attribution of each pair's chosen and rejected response.

    `.margin` is their difference (frame, figure and top entries are the margin's). Example `j` is
    input pair `indices[j]` (source `records[j]`); pairs skipped with `on_error="skip"` are listed
    in `skipped`.
    """

    example_axes = axes(chosen=0, rejected=0, indices=0, records=0)

    chosen: AttributionResult
    rejected: AttributionResult
    indices: tuple[int, ...] = ()
    records: tuple[int | None, ...] = ()
    skipped: tuple[SkippedPair, ...] = ()

    def to_dataframe(self):
        """The margin's frame, with each row's input pair `index` and source `record`."""
        return pair_index_columns(self.margin.to_dataframe(), self.indices, self.records)


def attribution_hook_names(model, heads: bool, sources: bool, neurons: bool) -> list[str]:
    """Hook names a direct attribution run must cache.

    Args:
        model: The hooked reward model.
        heads: Split attention into heads (`hook_z`) instead of `hook_attn_out`.
        sources: Also cache what is needed to split heads by source token.
        neurons: Also cache MLP neuron activations.

    Returns:
        The hook names.
    """
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


@dataclass(frozen=True)
class Reading:
    """Where and along what each row's residual is read, for `decompose`.

    `unit [batch, read, d_model]` is the read-out direction divided by the final norm's
    frozen scale at each read position (times any per-position weight), so that a component
    whose output there is `c` contributes `Σ_read c · unit`. `positions [batch, read]`
    says where; `None` means the first `read` positions of every row. A reward is read at
    one position per row (`attribution_from_run`); an implicit reward at every predicting
    position, weighted by the response mask (`reward_lens_tl.implicit.attribution`).
    """

    unit: Float[Tensor, "batch read d_model"]
    positions: Int[Tensor, "batch read"] | None = None

    def at(self, act: Float[Tensor, "batch pos ..."]) -> Float[Tensor, "batch read ..."]:
        """`act` at the read positions."""
        if self.positions is None:
            return act[:, : self.unit.shape[1]]
        rows = torch.arange(act.shape[0], device=act.device)[:, None]
        return act[rows, self.positions.to(act.device)]

    def along(self, act: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, " batch"]:
        """`Σ_read act · unit` per row."""
        return (self.at(act) * self.unit).sum((-1, -2))


@dataclass(frozen=True)
class Parts:
    """What `decompose` returns.

    The components, their contributions `values [component, batch]`, and the optional source and
    neuron splits.
    """

    components: tuple[Component, ...]
    values: Float[Tensor, "component batch"]
    sources: Float[Tensor, "layer head batch src"] | None
    neurons: Float[Tensor, "layer batch d_mlp"] | None


def _post_norm_unit(model, cache, layer: int, which: str, reading: Reading) -> Tensor:
    """The unit seen from before a post-norm (`ln1_post`/`ln2_post`) with frozen scale."""
    if not model.cfg.use_normalization_before_and_after:
        return reading.unit
    norm = getattr(model.blocks[layer], which)
    scale = reading.at(cache[f"blocks.{layer}.{which}.hook_scale"])  # [batch, read, 1]
    return reading.unit * norm.w / scale


def _bias_along(bias: Tensor | None, unit: Float[Tensor, "batch read d_model"]) -> Tensor:
    """An output bias read along `unit` (summed over read positions); a missing bias is 0.

    TransformerLens 3.9 keeps a zero `b_O` for a model without one; TransformerLens 4's bridge
    has `None` there.
    """
    if bias is None:
        return torch.zeros(unit.shape[0], device=unit.device, dtype=unit.dtype)
    return (bias * unit).sum((-1, -2))


def decompose(
    model,
    cache,
    reading: Reading,
    *,
    heads: bool = True,
    sources: bool = False,
    neurons: bool = False,
    split_bias: bool = False,
) -> Parts:
    """The decomposition walk shared by every direct attribution.

    The residual read along `reading` split exactly into embeddings, heads (or attention layers),
    MLPs and block output biases (the cache must hold `attribution_hook_names`). `sources` needs one
    read position per row.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.testing import tiny_reward_model, random_batch
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> ids, mask = random_batch(2, [7, 4])
        >>> _, cache = model.run_with_cache(ids, attention_mask=mask)
        >>> u = torch.zeros(2, 1, model.cfg.d_model)  # a zero direction: every part is 0
        >>> with torch.no_grad():
        ...     parts = decompose(model, cache, Reading(u), heads=False)
        >>> [c.label for c in parts.components], float(parts.values.abs().sum())
        (['embed', 'attn0', 'mlp0', 'attn1', 'mlp1', 'bias'], 0.0)
    """
    if sources and reading.unit.shape[1] != 1:
        raise InvalidArgumentError("sources=True needs one read position per row")
    u = reading.unit
    values, components, source_rows, neuron_rows = [], [], [], []

    def add(component: Component, value: Tensor) -> None:
        components.append(component)
        values.append(value)

    add(Component("embed"), reading.along(cache["hook_embed"]))
    if "hook_pos_embed" in cache:
        add(Component("pos_embed"), reading.along(cache["hook_pos_embed"]))
    bias = torch.zeros(u.shape[0], device=u.device, dtype=u.dtype)
    for layer in range(model.cfg.n_layers):
        block = model.blocks[layer]
        u_attn = _post_norm_unit(model, cache, layer, "ln1_post", reading)
        u_mlp = _post_norm_unit(model, cache, layer, "ln2_post", reading)
        attn_bias = _bias_along(block.attn.b_O, u_attn)
        # a mixture of experts on the bridge has no `b_out` (its experts' biases, if any, stay
        # in the MLP's part: the parts still add up)
        mlp_bias = _bias_along(getattr(block.mlp, "b_out", None), u_mlp)
        bias = bias + attn_bias + mlp_bias
        if split_bias:
            add(Component("attn_bias", layer), attn_bias)
        if heads:
            z = reading.at(cache[f"blocks.{layer}.attn.hook_z"])  # [batch, read, head, e]
            per_head = einops.einsum(
                wide(z), wide(block.attn.W_O), u_attn, "b r h e, h e d, b r d -> h b"
            )
            for h in range(model.cfg.n_heads):
                add(Component("head", layer, h), per_head[h])
            if sources:
                if reading.positions is None:
                    raise UsageError("sources=True needs explicit read positions (Reading)")
                pos = reading.positions[:, 0]
                source_rows.append(_head_sources(model, cache, layer, pos, u_attn[:, 0]))
        else:
            attn_out = reading.along(cache[f"blocks.{layer}.hook_attn_out"])
            add(Component("attn", layer), attn_out - attn_bias)
        mlp_out = reading.along(cache[f"blocks.{layer}.hook_mlp_out"])
        add(Component("mlp", layer), mlp_out - mlp_bias)
        if split_bias:
            add(Component("mlp_bias", layer), mlp_bias)
        if neurons:
            if getattr(block.mlp, "W_out", None) is None:
                raise UsageError(
                    f"per-neuron attribution needs a dense MLP; layer {layer}'s has no W_out "
                    "(a mixture of experts): use neurons=False"
                )
            post = reading.at(cache[f"blocks.{layer}.mlp.hook_post"])  # [batch, read, d_mlp]
            neuron_rows.append(
                einops.einsum(wide(post), wide(block.mlp.W_out), u_mlp, "b r n, n d, b r d -> b n")
            )
    if not split_bias:
        add(Component("bias"), bias)
    return Parts(
        components=tuple(components),
        values=torch.stack(values),
        sources=torch.stack(source_rows) if sources else None,
        neurons=torch.stack(neuron_rows) if neurons else None,
    )


@overload
def _cpu(t: Tensor) -> Tensor: ...
@overload
def _cpu(t: None) -> None: ...
@overload
def _cpu(t: Tensor | None) -> Tensor | None: ...
def _cpu(t: Tensor | None) -> Tensor | None:
    return None if t is None else t.detach().float().cpu()


def direct_attribution(
    model: HookedRewardModel,
    input_ids: Int[Tensor, "batch pos"],
    attention_mask: Int[Tensor, "batch pos"] | None = None,
    *,
    heads: bool = True,
    sources: bool = False,
    neurons: bool = False,
    objective: Objective = None,
    positions: Sequence[int] | Tensor | None = None,
    split_bias: bool = False,
    fwd_hooks: Sequence[tuple[str, Callable[..., Any]]] = (),
) -> AttributionResult:
    """Decompose each example's reward into components (see the module docstring).

    Components: `embed` (and `pos_embed`), `L{l}H{h}` per head (or `attn{l}` with
    `heads=False`), `mlp{l}`, and `bias` (all blocks' output biases); the head's own
    bias is `head_bias`. `sources=True` adds `sources[l, h, example, src]` (summing to
    the head's value), `neurons=True` adds `neurons[l, example, n]` (summing to `mlp{l}`
    minus its output bias). `positions` reads at explicit positions instead of the reward
    position (the parts then sum to the per-position reward there); `split_bias` reports the
    biases per sublayer (`attn{l}.bias`, `mlp{l}.bias`) instead of one `bias`;
    `fwd_hooks` are the user's own interventions, active during the run.

    Args:
        model: The reward model.
        input_ids: Token ids, one conversation per row (padded on either side).
        attention_mask: `1` on real tokens; `None` infers it from the pad ids.
        heads: One part per attention head (`L{l}H{h}`); `False` gives one per layer
            (`attn{l}`).
        sources: Split each head's part by source position (`.sources`); needs `heads`.
        neurons: Split each MLP's part by neuron (`.neurons`).
        objective: One objective (name or index) of a multi-objective head; `None`
            decomposes the pooled reward.
        positions: Read at these positions (one per row) instead of the reward position.
        split_bias: Report the output biases per sublayer instead of one `bias` part.
        fwd_hooks: The user's own interventions (`(hook name, function)`), active during
            the run.

    Returns:
        The parts of every example; parts + head bias = reward.

    Raises:
        RewardLensError: When `sources=True` comes with `heads=False`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> ids = model.to_tokens(
        ...     [("how bake bread", "oven flour"), ("how bake bread", "the bomb")])
        >>> attr = direct_attribution(model, ids)
        >>> attr.labels[:4], bool(attr.completeness_error() < 1e-4)
        (('embed', 'L0H0', 'L0H1', 'L0H2'), True)
        >>> [label for label, _ in attr.top_k(2)]  # the two largest parts
        ['L1H3', 'L2H2']
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
    """`direct_attribution` of a run already made.

    Its cache must hold `attribution_hook_names`, so one forward pass can serve several analyses.
    """
    cache, pos, read = run.cache, run.positions, run.read
    u = read.unit(gather_positions(cache["ln_final.hook_scale"], pos)[:, 0])  # [batch, d_model]
    parts = decompose(
        model,
        cache,
        Reading(u[:, None], pos[:, None]),
        heads=heads,
        sources=sources,
        neurons=neurons,
        split_bias=split_bias,
    )
    return AttributionResult(
        values=_cpu(parts.values),
        labels=tuple(c.label for c in parts.components),
        components=parts.components,
        head_bias=_cpu(read.bias),
        rewards=_cpu(run.target),
        sources=_cpu(parts.sources),
        neurons=_cpu(parts.neurons),
    )


def _head_sources(model, cache, layer: int, pos: Tensor, u_attn: Tensor) -> Tensor:
    """`[head, batch, src]`: pattern(query=pool, src) × (v_src W_O · u)."""
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


@pasted_docs(pair_run=PAIR_RUN_DOC)
def pair_attribution(
    model: HookedRewardModel,
    pairs: Iterable[Any],
    *,
    batch_size: int = 16,
    truncation: str = "error",
    on_error: OnError = "raise",
    **kwargs: Any,
) -> PairAttribution:
    """Direct attribution of each pair's chosen and rejected response, streamed in chunks.

    Memory is bounded by `batch_size`; `pairs` may be any iterable; `.margin` decomposes the reward
    margins. `truncation` (`"error"`, `"left"`, `"right"`, `"both"`) applies to pairs given as text.
    A pair that cannot be encoded stops the run (`on_error="raise"`, the error names the pair) or is
    left out and listed in `.skipped` (`"skip"`); `.indices` says which input pair each example is.
    Runs split across processes under `torchrun` (`reward_lens_tl.distributed`).

    Args:
        {pair_run}
        **kwargs: Go to `direct_attribution` (`heads`, `neurons`, `objective`, ...; not
            `sources`).

    Returns:
        The attribution of the chosen and the rejected responses, and of the margins.

    Raises:
        RewardLensError: When `sources=True` is asked for.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.data import PreferencePair
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> pairs = [PreferencePair("how bake bread", "oven flour", "the bomb"),
        ...          PreferencePair("explain laptop", "screen code", "soup")]
        >>> margin = pair_attribution(model, pairs).margin
        >>> [round(r, 3) for r in margin.rewards.tolist()], [c for c, _ in margin.top_k(2)]
        ([7.11, 4.776], ['L2H3', 'L2H2'])

        A pair that cannot be encoded is skipped with `on_error="skip"`:

        >>> from reward_lens_tl.testing import tiny_reward_model, tiny_tokenizer
        >>> from types import SimpleNamespace as Pair
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"), tiny_tokenizer())
        >>> pairs = [Pair(prompt="w6", chosen=c, rejected="w8") for c in ("w7 " * 99, "w7")]
        >>> result = pair_attribution(model, pairs, on_error="skip")
        >>> result.indices, [s.index for s in result.skipped]
        ((1,), [0])
    """
    if kwargs.get("sources"):
        raise RewardLensError(
            "source positions differ between responses of different lengths; call "
            "direct_attribution(..., sources=True) on a pair's two sequences instead"
        )

    analysis = partial(
        direct_attribution, model, **kwargs
    )  # (ids, mask) of chosen rows then rejected rows
    return run_pair_batches(
        model,
        pairs,
        analysis,
        PairAttribution,
        batch_size=batch_size,
        truncation=truncation,
        on_error=on_error,
    )
