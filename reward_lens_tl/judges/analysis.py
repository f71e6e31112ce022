"""Analyses that only judges and PRMs have: the linearised score, position bias, first wrong step.

The three analyses: the linearised score, position bias, and what drives a PRM's first wrong
step.

**Linearised attribution** (`linearised_attribution`). A Likert judge's expected grade
`E = Σ_k g_k softmax(l)_k`, a soft-capped verdict difference and a classifier PRM's margin are
functions `s(l)` of the head outputs `l` (each exactly linear in the residual). Their
first-order term at the actual point, `Σ_k ∂s/∂l_k · l_k`, is linear, so it decomposes exactly
over components (`parts + head_bias`); the rest of the score is reported as `remainder =
s − (parts + head_bias)`. For the classifier PRM the gradient is the ReLU pattern times the
last layer's margin row, so with the pattern frozen (as the final norm's scale is frozen) the
first-order term *is* the margin minus the last layer's bias difference: the remainder is that
constant. For a Likert judge the remainder is the curvature of the softmax and is not constant.

**Position bias** (`position_bias`). A pairwise judge scores `(A, B)` and `(B, A)`; an
unbiased judge gives `m(A, B) = −m(B, A)`. The bias `(m(A, B) + m(B, A)) / 2` is a sum of
the two runs' attributions, so it is decomposed exactly over components.

**First wrong step** (`first_error_analysis`). For step `k` of a PRM solution: the
step's margin split by which earlier step each attention head reads from (source positions,
exact), the lens at every layer (where the score turns), and optionally activation patching of
the step from a correct solution into the wrong one (one layer at a time, at the step's tokens).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from jaxtyping import Float
from torch import Tensor

from ..attribution import (
    AttributionResult,
    attribution_from_run,
    attribution_hook_names,
    direct_attribution,
)
from ..errors import ArgumentTypeError, InvalidArgumentError, ShapeMismatchError
from ..lens import RewardLensResult, lens_sites, reward_lens
from ..readout import Readout, ReadoutRun, effective_head, gather_positions, is_centred, run_readout
from ..results import Result, axes, tidy_frame, top_entries

if TYPE_CHECKING:  # either backend's judge or PRM (hooked_judges needs TransformerLens 3.9)
    from ..bridge.judges import BridgeJudge, BridgePRM
    from .hooked_judges import HookedJudge, HookedPRM

__all__ = [
    "LinearisedAttribution",
    "PositionBiasResult",
    "StepErrorAnalysis",
    "first_error_analysis",
    "linearised_attribution",
    "position_bias",
    "step_segments",
]


@dataclass(frozen=True)
class LinearisedAttribution(AttributionResult):
    """An `AttributionResult` of a score's first-order term, with the score and the remainder.

    `rewards` is that term: `values.sum(0) + head_bias == rewards` exactly; `score` is the score
    itself and `remainder = score − rewards`.

    Attributes:
        values: Each component's share of the first-order term, `[component, example]`.
        labels: The components' names.
        head_bias: The head bias's share of the first-order term, `[example]`.
        rewards: The first-order term, `values.sum(0) + head_bias`, `[example]`.
        sources: Each head's share split by source position, `[layer, head, example, src]`
            (with `sources=True`, else `None`).
        neurons: Each MLP neuron's share, `[layer, example, d_mlp]` (or `None`).
        components: What each row is (kind, layer, head).
        score: The score itself, `[example]`.
        remainder: `score − rewards`, `[example]`.

    Examples:
        A Likert judge's expected grade is not linear in its grade logits: the parts sum to
        the first-order term, and the remainder makes up the score.

        >>> from reward_lens_tl.judges import HookedJudge, linearised_attribution
        >>> from reward_lens_tl.testing import tiny_causal_lm
        >>> hf, tok = tiny_causal_lm("llama")
        >>> judge = HookedJudge.from_pretrained(
        ...     hf, kind="likert", tokenizer=tok, verdict=("w10", "w11", "w12"),
        ...     template="{prompt} {response} w9")
        >>> attr = linearised_attribution(judge, judge.item_ids(["w12 w13", "w14"], ["w20", "w21"]))
        >>> attr.values.shape, attr.labels[:3]
        (torch.Size([12, 2]), ('embed', 'L0H0', 'L0H1'))
        >>> [round(x, 3) for x in attr.score.tolist()]
        [2.196, 2.046]
        >>> bool(((attr.values.sum(0) + attr.head_bias) - attr.rewards).abs().max() < 1e-5)
        True
        >>> bool(((attr.rewards + attr.remainder) - attr.score).abs().max() < 1e-5)
        True
    """

    example_axes = axes(
        values=1, head_bias=0, rewards=0, sources=2, neurons=1, score=0, remainder=0
    )

    score: Float[Tensor, " example"] | None = None
    remainder: Float[Tensor, " example"] | None = None


def score_gradient(model, pooled: Float[Tensor, "batch n_out"]) -> Float[Tensor, "batch n_out"]:
    """`∂score/∂(head outputs)` at `pooled`, per example (the score is per row).

    Args:
        model: The judge or PRM.
        pooled: The head outputs, `[batch, n_out]`.

    Returns:
        The gradient, `[batch, n_out]`.
    """
    x = pooled.detach().float().requires_grad_(True)
    with torch.enable_grad():
        (grad,) = torch.autograd.grad(model.score_from(x).sum(), x)
    return grad


def linearised_attribution(
    model,
    input_ids: Tensor,
    attention_mask: Tensor | None = None,
    *,
    heads: bool = True,
    sources: bool = False,
    positions: Sequence[int] | Tensor | None = None,
) -> LinearisedAttribution:
    """Exact attribution of the first-order term of a non-linear score, with the remainder.

    See the module docstring; on a linear head it is `direct_attribution` with a zero remainder.

    Args:
        model: The judge or PRM.
        input_ids: The token ids, `[batch, pos]`.
        attention_mask: The attention mask.
        heads: Whether to split attention layers into heads.
        sources: Whether to split heads by source position.
        positions: The positions read (default the model's reading positions).

    Returns:
        The attribution of the first-order term, with `score` and `remainder`.

    Examples:
        >>> from reward_lens_tl.judges import HookedJudge
        >>> from reward_lens_tl.testing import tiny_causal_lm
        >>> hf, tok = tiny_causal_lm("llama")
        >>> judge = HookedJudge.from_pretrained(
        ...     hf, kind="likert", tokenizer=tok, verdict=("w10", "w11", "w12"),
        ...     template="{prompt} {response} w9")
        >>> attr = linearised_attribution(judge, judge.item_ids("w12 w13", "w20"))
        >>> total = attr.rewards + attr.remainder
        >>> bool(attr.completeness_error() < 1e-5), bool((total - attr.score).abs().max() < 1e-5)
        (True, True)
    """
    names = attribution_hook_names(model, heads, sources, False) + ["unembed.hook_out"]
    col = 0 if model.n_objectives > 1 or getattr(model, "scored_head", False) else None
    run = run_readout(model, input_ids, attention_mask, names, objective=col, positions=positions)
    pooled = gather_positions(run.cache["unembed.hook_out"], run.positions).float()
    grad = score_gradient(model, pooled) if model.scored_head else torch.ones_like(pooled)
    W, b = effective_head(model)
    read = Readout(direction=grad @ W.float().T, bias=grad @ b.float(), centred=is_centred(model))
    first_order = (grad * pooled).sum(-1)
    score = model.score_from(pooled).float() if model.scored_head else pooled[:, 0]
    base = attribution_from_run(
        model,
        ReadoutRun(run.rewards, run.cache, run.positions, read, first_order),
        heads=heads,
        sources=sources,
    )
    fields = {
        f: getattr(base, f)
        for f in ("values", "labels", "head_bias", "rewards", "sources", "neurons", "components")
    }
    score = score.detach().cpu()
    return LinearisedAttribution(**fields, score=score, remainder=score - base.rewards)


def _attribute(model, ids: Tensor, **kwargs) -> AttributionResult:
    if getattr(model, "scored_head", False):
        return linearised_attribution(model, ids, **kwargs)
    return direct_attribution(model, ids, **kwargs)


# -- position bias -----------------------------------------------------------------------------
@dataclass(frozen=True)
class PositionBiasResult(Result):
    """Margins in both orders and the position bias decomposed over components.

    `margin_ab`/`margin_ba` `[example]`: the judge's reward for `(A, B)` and `(B, A)`;
    `bias = (margin_ab + margin_ba) / 2` (positive: the first answer is preferred);
    `values [component, example]`: each component's share of the bias, `values.sum(0) +
    head_bias == bias_linear` (`bias` itself for a linear head).

    Args:
        margin_ab: The judge's reward for `(A, B)`, `[example]`.
        margin_ba: The judge's reward for `(B, A)`, `[example]`.
        bias: `(margin_ab + margin_ba) / 2`, `[example]`.
        values: Each component's share of the bias, `[component, example]`.
        labels: The components' names.
        head_bias: The head bias's share, `[example]`.
        bias_linear: The linear part of the bias, `[example]`.

    Examples:
        The zoo's judge has a planted position bias (+1.5 for whichever answer comes first):
        with two on-topic answers it prefers the first in both orders.

        >>> from reward_lens_tl.judges import HookedJudge, position_bias
        >>> from reward_lens_tl.zoo import zoo_path
        >>> from reward_lens_tl.zoo.judge import JUDGE_PAIRWISE_TEMPLATE
        >>> judge = HookedJudge.from_pretrained(
        ...     zoo_path("judge"), kind="pairwise", template=JUDGE_PAIRWISE_TEMPLATE)
        >>> res = position_bias(judge, ["how bake bread"], ["oven flour"], ["oven"])
        >>> [round(float(m), 2) for m in (res.margin_ab[0], res.margin_ba[0], res.bias[0])]
        [1.09, 1.12, 1.1]
        >>> res.consistent.tolist()
        [False]
        >>> bool(((res.values.sum(0) + res.head_bias) - res.bias_linear).abs().max() < 1e-5)
        True
    """

    example_axes = axes(margin_ab=0, margin_ba=0, bias=0, values=1, head_bias=0, bias_linear=0)
    value_column = "bias"

    margin_ab: Float[Tensor, " example"]
    margin_ba: Float[Tensor, " example"]
    bias: Float[Tensor, " example"]
    values: Float[Tensor, "component example"]
    labels: tuple[str, ...]
    head_bias: Float[Tensor, " example"]
    bias_linear: Float[Tensor, " example"]

    @property
    def consistent(self) -> Tensor:
        """Whether the verdict flips with the order (`sign(m_AB) == −sign(m_BA)`)."""
        return torch.sign(self.margin_ab) == -torch.sign(self.margin_ba)

    def to_dataframe(self):
        """The bias shares as a tidy data frame, one row per component and example.

        Returns:
            The data frame.
        """
        return tidy_frame(self.values, self.labels, "component", "bias")

    def top_k(self, k: int = 10):
        """Components carrying the most position bias (mean over examples, by |value|).

        Args:
            k: How many components.

        Returns:
            The top components.
        """
        return top_entries(self.labels, self.values.mean(1).tolist(), k, "mean bias share")


def position_bias(
    judge: HookedJudge | BridgeJudge,
    prompts: str | Sequence[str],
    responses_a: str | Sequence[str],
    responses_b: str | Sequence[str],
) -> PositionBiasResult:
    """Score every pair in both orders and decompose the position bias (module docstring).

    Args:
        judge: A pairwise judge (`HookedJudge`, or `reward_lens_tl.bridge.BridgeJudge`).
        prompts: A prompt or a list of prompts.
        responses_a: The first answers.
        responses_b: The second answers.

    Returns:
        The margins in both orders and the decomposed bias.

    Raises:
        InvalidArgumentError: When `judge` is not a pairwise judge.

    Examples:
        >>> from reward_lens_tl.judges import HookedJudge
        >>> from reward_lens_tl.testing import tiny_causal_lm
        >>> hf, tok = tiny_causal_lm("qwen2")
        >>> judge = HookedJudge.from_pretrained(
        ...     hf, kind="pairwise", tokenizer=tok, verdict=("w10", "w11"),
        ...     template="{prompt} w8 {response_a} w8 {response_b} w9")
        >>> res = position_bias(judge, ["w12"], ["w20 w21"], ["w30"])
        >>> bool(((res.values.sum(0) + res.head_bias) - res.bias_linear).abs().max() < 1e-5)
        True
    """
    if getattr(judge, "kind", None) != "pairwise":
        raise InvalidArgumentError(
            "position_bias needs a pairwise HookedJudge (kind='pairwise'; on TransformerLens 4 a "
            "pairwise BridgeJudge)"
        )
    ab = judge.item_ids(prompts, responses_a, responses_b)
    ba = judge.item_ids(prompts, responses_b, responses_a)
    first, second = _attribute(judge, ab), _attribute(judge, ba)
    m_ab, m_ba = _score_of(first), _score_of(second)
    return PositionBiasResult(
        margin_ab=m_ab,
        margin_ba=m_ba,
        bias=(m_ab + m_ba) / 2,
        values=(first.values + second.values) / 2,
        labels=first.labels,
        head_bias=(first.head_bias + second.head_bias) / 2,
        bias_linear=(first.rewards + second.rewards) / 2,
    )


def _score_of(attr: AttributionResult) -> Tensor:
    score = getattr(attr, "score", None)
    return attr.rewards if score is None else score


# -- a PRM's first wrong step ------------------------------------------------------------------
@dataclass(frozen=True)
class StepErrorAnalysis(Result):
    """What drives one step's score in one PRM solution.

    `margins [n_steps]`/`scores [n_steps]`: every step's margin and score (one forward);
    `by_source_step [segment]`: the step's margin from attention heads, split by the segment
    each head reads from (`"prompt"`, `"step 0"` …; exact: heads' total), and
    `head_sources [layer, head, segment]` the same per head; `lens`: the step's margin read
    at every layer, and `turn_layer` the first site after which the lens keeps the final sign;
    `patch`: the step's margin in the wrong solution after patching the residual stream of
    the step's own tokens (not its tag) from the correct solution, entering each layer
    (`resid_pre`; `None` without a correct solution): high at layer `l` means the tag has
    not yet read the step's content before layer `l`.

    Args:
        step: The step analysed.
        margins: Every step's margin, `[n_steps]`.
        scores: Every step's score, `[n_steps]`.
        segments: The segments' names.
        by_source_step: The step's margin from attention heads by source segment.
        head_sources: The same per head, `[layer, head, segment]`.
        lens: The step's margin read at every layer.
        turn_site: The first site after which the lens keeps the final sign.
        patch: The step's margin after patching each layer, `[layer]` (or `None`).

    Examples:
        Step 1 of this solution is wrong (15 − 1 is not 12): the zoo PRM scores it low, and the
        heads' share of its margin comes mostly from the step's own tokens.

        >>> from reward_lens_tl.judges import HookedPRM, first_error_analysis
        >>> from reward_lens_tl.zoo import zoo_path
        >>> prm = HookedPRM.from_pretrained(zoo_path("prm"))
        >>> res = first_error_analysis(prm, "what is 15 + 0 - 1", ["15 + 0 = 15", "15 - 1 = 12"], 1)
        >>> [round(x, 3) for x in res.scores.tolist()]
        [0.943, 0.104]
        >>> res.segments, [round(x, 2) for x in res.by_source_step.tolist()]
        (('prompt', 'step 0', 'step 1'), [0.06, -0.17, -1.07])
        >>> res.lens.labels, res.turn_site, res.patch is None
        (('0_pre', '1_pre', 'final'), 'final', True)
    """

    step: int
    margins: Float[Tensor, " n_steps"]
    scores: Float[Tensor, " n_steps"]
    segments: tuple[str, ...]
    by_source_step: Float[Tensor, " segment"]
    head_sources: Float[Tensor, "layer head segment"]
    lens: RewardLensResult
    turn_site: str
    patch: Float[Tensor, " layer"] | None = None
    value_column = "margin"

    def to_dataframe(self):
        """The margin by source segment as a data frame.

        Returns:
            The data frame.
        """
        import pandas as pd

        return pd.DataFrame({"source": list(self.segments), "margin": self.by_source_step.tolist()})

    def top_k(self, k: int = 10):
        """The source segments carrying the most margin.

        Args:
            k: How many segments.

        Returns:
            The top segments.
        """
        return top_entries(self.segments, self.by_source_step.tolist(), k, "margin from heads")


def step_segments(
    step_positions: Sequence[int], length: int, prompt_tokens: int
) -> tuple[tuple[str, ...], Tensor]:
    """`(names, segment index of every position)` of one unpadded row.

    `"prompt"` (the first `prompt_tokens` tokens), then `"step i"`: the tokens after step
    `i − 1`'s tag up to and including step `i`'s tag (anything after the last tag counts as the
    last step).

    Args:
        step_positions: The positions of the step tags.
        length: The row's length.
        prompt_tokens: The number of the prompt's tokens.

    Returns:
        The segment names and the segment index of every position.

    Examples:
        >>> names, seg = step_segments([3, 5], 7, 2)
        >>> names, seg.tolist()
        (('prompt', 'step 0', 'step 1'), [0, 0, 1, 1, 2, 2, 2])
    """
    bounds = [int(p) for p in step_positions if int(p) >= 0]
    seg = torch.zeros(length, dtype=torch.long)
    start = prompt_tokens
    for i, tag in enumerate(bounds):
        seg[start : tag + 1] = i + 1
        start = tag + 1
    seg[start:] = len(bounds)
    return ("prompt", *(f"step {i}" for i in range(len(bounds)))), seg


def first_error_analysis(
    prm: HookedPRM | BridgePRM,
    prompt: str,
    steps: Sequence[str],
    step: int,
    *,
    correct_steps: Sequence[str] | None = None,
) -> StepErrorAnalysis:
    """Analyse step `step` of one solution (module docstring).

    Args:
        prm: The PRM (`HookedPRM`, or `reward_lens_tl.bridge.BridgePRM`).
        prompt: The prompt.
        steps: The solution's steps.
        step: The step to analyse.
        correct_steps: The same solution with that step correct and the same number of tokens,
            to patch from.

    Returns:
        What drives the step's score.

    Raises:
        ArgumentTypeError: When `step` is not an int.
        InvalidArgumentError: When `step` is out of range.

    Examples:
        Patching the wrong step's tokens from the corrected solution (15 − 1 = 14, as many
        tokens) entering layer 0 gives the corrected step's margin: positive where the wrong
        step's is negative.

        >>> from reward_lens_tl.judges import HookedPRM
        >>> from reward_lens_tl.zoo import zoo_path
        >>> prm = HookedPRM.from_pretrained(zoo_path("prm"))
        >>> res = first_error_analysis(prm, "what is 15 + 0 - 1", ["15 + 0 = 15", "15 - 1 = 12"],
        ...                            1, correct_steps=["15 + 0 = 15", "15 - 1 = 14"])
        >>> round(float(res.margins[1]), 2), [round(x, 2) for x in res.patch.tolist()]
        (-2.15, [2.23, 2.35])
        >>> right = prm.encode_steps("what is 15 + 0 - 1", ["15 + 0 = 15", "15 - 1 = 14"])
        >>> round(float(prm.step_margins(right.ids)[0, 1]), 2)
        2.23
    """
    if isinstance(step, bool) or not isinstance(step, int):
        raise ArgumentTypeError(f"step must be an int, got {step!r}")
    enc = prm.encode_steps(prompt, steps)
    n = enc.n_steps[0]
    if not 0 <= step < n:
        raise InvalidArgumentError(f"step must be in [0, {n}), got {step}")
    at = prm.step(enc.tag_offset[0] + step)  # the prompt may hold step tags too
    ids, mask = enc.ids, enc.attention_mask
    margins = prm.step_margins(ids, mask, enc.step_positions)[0]
    scores = prm.transformed(margins)
    attr = _attribute(at, ids, sources=True)
    assert attr.sources is not None
    names, seg = step_segments(
        enc.step_positions[0].tolist(), ids.shape[1], prm.body_start(prompt, steps)
    )
    keep = step + 2  # the prompt and steps 0..step: later steps are not visible to step
    one_hot = torch.nn.functional.one_hot(seg, len(names)).float()[:, :keep]
    head_sources = attr.sources[:, :, 0] @ one_hot  # [layer, head, segment]
    names = names[:keep]
    lens = _lens(at, ids, mask)
    turn = _turn_site(lens)
    patch = (
        _patch_step(prm, step, enc, prompt, correct_steps) if correct_steps is not None else None
    )
    return StepErrorAnalysis(
        step=step,
        margins=margins.cpu(),
        scores=scores.cpu(),
        segments=tuple(names),
        by_source_step=head_sources.sum((0, 1)),
        head_sources=head_sources,
        lens=lens,
        turn_site=turn,
        patch=patch,
    )


def _lens(model, ids: Tensor, mask: Tensor) -> RewardLensResult:
    """The step's reward read at every layer.

    The linear lens, or for a non-linear score the whole head (final norm recomputed, head,
    score) applied to each layer's residual.
    """
    if not getattr(model, "scored_head", False):
        return reward_lens(model, ids, mask)
    sites = lens_sites(model, "layer")
    with torch.no_grad():
        rewards, cache = model.run_with_cache(
            ids, attention_mask=mask, return_type="reward", names_filter=[n for _, n in sites]
        )
        pos = model.pool_positions(ids, mask)
        values = []
        for _, name in sites:
            resid = gather_positions(cache[name], pos)[:, None]
            normed = model.ln_final(resid) if model.cfg.normalization_type else resid
            values.append(model.score_from(model.unembed(normed)[:, 0]).float().cpu())
    labels = tuple(label for label, _ in sites)
    return RewardLensResult(torch.stack(values), labels, rewards.float().cpu(), "recompute")


def _turn_site(lens: RewardLensResult) -> str:
    values = lens.values[:, 0]
    final = torch.sign(values[-1])
    same = torch.sign(values) == final
    idx = len(values) - 1
    while idx > 0 and bool(same[idx - 1]):
        idx -= 1
    return lens.labels[idx]


def _patch_step(prm: HookedPRM | BridgePRM, step: int, wrong, prompt: str, correct_steps) -> Tensor:
    from ..patching import activation_patching

    right = prm.encode_steps(prompt, correct_steps)
    if right.ids.shape != wrong.ids.shape:
        raise ShapeMismatchError(
            "the correct solution must have the same number of tokens as the wrong one "
            f"({right.ids.shape[1]} vs {wrong.ids.shape[1]}) to patch a step across"
        )
    tag = int(wrong.step_positions[0, step])
    prev = (
        int(wrong.step_positions[0, step - 1]) + 1
        if step > 0
        else prm.body_start(prompt, correct_steps)
    )
    positions = list(range(prev, tag))  # the step's own tokens; its tag reads them
    if not positions:
        raise InvalidArgumentError(f"step {step} has no tokens before its tag to patch")
    view: Any = prm.step(wrong.tag_offset[0] + step)  # either backend's PRM
    res = activation_patching(view, right.ids, wrong.ids, positions=positions, by_position=False)
    assert res.rewards is not None  # activation patching records the patched rewards
    return res.rewards.detach().float().cpu().reshape(-1)
