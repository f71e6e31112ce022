r"""Attribution patching: first-order estimates of every cell of a patching grid at once.

**AtP** (Nanda 2023; Syed et al. 2023) estimates the effect of patching activation `a` from
`a_target` to `a_source` as `∇_a metric · (a_source - a_target)`, with the gradient taken
in the target run. Every cell of a grid costs one source forward (cached, no gradient) and one
target forward + backward: about three forward-equivalents, whatever the grid's size.

**AtP\*** (Kramár et al. 2024) adds two fixes:

- *QK fix* (`qk_fix=True`): a softmax linearised at a saturated attention pattern has a
  near-zero gradient, so AtP misses patches that move attention. For cells whose patched value
  enters an attention layer's queries and keys directly, the pattern is recomputed exactly
  with the patched queries/keys (per head, with the model's own scaling, soft-cap, masks and
  rotary embedding) and only the step from the pattern onwards is linearised:

  `effect = ∂m/∂resid_mid · Δx  +  Σ_h Σ_ts ∂m/∂A_ts (A'_ts - A_ts)  +  ∂m/∂v · Δv`

  (skip path, exact-softmax pattern change, value path). It applies to `resid_pre` at
  layer `l` (attention `l`), `resid_post` and `mlp_out` at `l` (attention `l+1`),
  and `q`/`k` (their own attention: the row of the patched query, or the column of the
  patched key, renormalised in closed form). Other sites reach attention only through a
  nonlinearity (the MLP of their block) and keep the plain estimate; `by_position=False`
  cells sum their per-position estimates.
- *GradDrop* (`graddrop=True`): direct and indirect effects can cancel in the gradient.
  For each layer `ℓ` the estimate is recomputed with the gradient through layer `ℓ`'s
  attention and MLP outputs dropped (only the residual skip is kept), and the cell is scored
  by `magnitude = Σ_ℓ |estimate_ℓ| / (L - 1)`. The backward passes reuse the one target
  graph (one vector-Jacobian product from each layer's input down).

`values` is always the signed estimate of the metric (`baseline + estimate`, comparable
with activation patching); `magnitude` (GradDrop) ranks cells. Use the estimates as a
screen and verify the top cells with `activation_patching`
(`agreement` reports how well they agree).

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.testing import tiny_reward_model, random_batch
    >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    >>> ids, _ = random_batch(2, [9, 9], low=6)
    >>> est = attribution_patching(model, ids[0], ids[1], site="z", alignment="exact")
    >>> est.method, est.shape
    ('atp', (2, 4))
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Unpack

import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens.utilities.architectures import POST_NORM_ARCHITECTURES

from ..capabilities import TL_ATTENTION, supports
from ..errors import BridgeUnsupportedError, PatchingError, UnsupportedModelError
from ..signatures import checked_options, pasted_docs
from .alignment import PatchInput
from .grids import Site, hook_name, site_heads
from .metrics import check_metric_output, default_metric
from .patch_results import PatchResult
from .plan import REQUEST_DOC, PatchOptions, PatchPlan, make_plan
from .runner import PatchRunner, RewardReader

if TYPE_CHECKING:
    from ..model import HookedRewardModel

__all__ = ["atp_star", "attribution_patching"]

QK_SITES = frozenset({"resid_pre", "resid_post", "mlp_out", "q", "k"})
_LAYER = re.compile(r"^blocks\.(\d+)\.")


@checked_options(PatchOptions)
@pasted_docs(request=REQUEST_DOC)
def attribution_patching(
    model: HookedRewardModel,
    clean: PatchInput,
    corrupted: PatchInput | None = None,
    *,
    site: Site = "resid_pre",
    qk_fix: bool = False,
    graddrop: bool = False,
    **options: Unpack[PatchOptions],
) -> PatchResult:
    """AtP estimates for the grid `activation_patching` would sweep for the same request.

    The request is that of `activation_patching`, for one site (see the module docstring).
    The metric must be differentiable.

    Args:
        {request}
        qk_fix: recompute attention patterns exactly for patches that feed queries and keys
            (AtP*'s QK fix).
        graddrop: also score each cell with the gradient through each layer dropped
            (AtP*'s GradDrop, in `magnitude`).

    Returns:
        The estimated sweep: `values` is the estimated metric per cell, `method` is `"atp"`,
        `"atp+qk"`, `"atp+graddrop"` or `"atp*"`.

    Raises:
        PatchingError: if the request is invalid (several sites, an unknown mode, ...), the
            model has one layer and `graddrop=True`, or gradients are off
            (`torch.inference_mode`).
        UnsupportedModelError: if `qk_fix=True` and the model's attention is one the QK
            fix does not handle.
        UnknownKeywordError: for a keyword the function does not take (a `TypeError`).

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching import activation_patching, attribution_patching
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> clean = model.encode("explain how to bake bread", "the oven and the flour")
        >>> corrupted = model.encode("explain how to bake bread", "the oven and the bomb")
        >>> patched = activation_patching(model, clean, corrupted, site="mlp_out")
        >>> [round(v, 2) for v in patched.flat().tolist()]   # the real effect per layer
        [0.72, 0.06, 0.03]
        >>> est = attribution_patching(model, clean, corrupted, site="mlp_out")
        >>> [round(v, 2) for v in est.flat().tolist()]   # L0's patch moves attention: wrong sign
        [-0.18, 0.05, 0.03]
        >>> fixed = attribution_patching(model, clean, corrupted, site="mlp_out", qk_fix=True)
        >>> fixed.method, [round(v, 2) for v in fixed.flat().tolist()]
        ('atp+qk', [0.08, 0.06, 0.03])
    """
    runner = PatchRunner(model, options)
    plan = make_plan(model, clean, corrupted, site, options)
    if qk_fix:
        check_qk_fix_supported(model)
    if graddrop and model.cfg.n_layers < 2:
        raise PatchingError("GradDrop needs at least two layers")
    if torch.is_inference_mode_enabled():
        raise PatchingError("attribution patching needs gradients: leave torch.inference_mode")
    source, source_reward = runner.source_values(plan)
    names = captured_names(model, plan, qk_fix, graddrop)
    acts, reward = forward_with_graph(model, plan, runner.reader, names, runner.fwd_hooks)
    metric, name = runner.options["metric"], "custom"
    if metric is None:
        metric, name = default_metric(plan.mode, float(reward[0].detach()), source_reward)
    with torch.enable_grad():
        m = check_metric_output(metric(reward), 1)
        tensors = [acts[n] for n in names]
        raw = torch.autograd.grad(m.sum(), tensors, retain_graph=graddrop, allow_unused=True)
    grads = {
        n: torch.zeros_like(t) if g is None else g
        for n, t, g in zip(names, tensors, raw, strict=True)
    }
    estimate = Estimator(model, plan, acts, source, qk_fix)
    values = estimate(grads)
    magnitude = None
    if graddrop:
        total = torch.zeros_like(values)
        for layer in range(model.cfg.n_layers):
            total += estimate(dropped_layer_grads(acts, grads, layer)).abs()
        magnitude = total / (model.cfg.n_layers - 1)
    baseline = float(m[0].detach())
    method = {(False, False): "atp", (True, False): "atp+qk", (False, True): "atp+graddrop"}
    return PatchResult(
        values=(values + baseline).detach().float().cpu(),
        grid=plan.grid,
        site=plan.site,
        mode=plan.mode,
        method=method.get((qk_fix, graddrop), "atp*"),
        alignment=plan.alignment,
        metric_name=name,
        target_reward=float(reward[0].detach()),
        source_reward=source_reward,
        baseline=baseline,
        magnitude=None if magnitude is None else magnitude.detach().float().cpu(),
        position_tokens=plan.position_tokens,
    )


@checked_options(PatchOptions)
@pasted_docs(request=REQUEST_DOC)
def atp_star(
    model: HookedRewardModel,
    clean: PatchInput,
    corrupted: PatchInput | None = None,
    *,
    site: Site = "resid_pre",
    **options: Unpack[PatchOptions],
) -> PatchResult:
    """AtP* = `attribution_patching` with `qk_fix=True, graddrop=True`.

    Args:
        {request}

    Returns:
        The estimated sweep, with GradDrop's `magnitude` (rank cells by it:
        `top_k(by="magnitude")`).

    Raises:
        PatchingError: if the request is invalid, or the model has one layer.
        UnsupportedModelError: if the QK fix does not handle the model's attention.
        UnknownKeywordError: for a keyword the function does not take (a `TypeError`).

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.patching import atp_star
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> clean = model.encode("explain how to bake bread", "the oven and the flour")
        >>> corrupted = model.encode("explain how to bake bread", "the oven and the bomb")
        >>> star = atp_star(model, clean, corrupted, site="mlp_out")
        >>> star.method, [round(v, 2) for v in star.flat().tolist()]
        ('atp*', [0.08, 0.06, 0.03])
        >>> [(label, round(v, 2)) for label, v in star.top_k(2, by="magnitude")]
        [('L0', 0.16), ('L1', 0.07)]
    """
    return attribution_patching(
        model, clean, corrupted, site=site, qk_fix=True, graddrop=True, **options
    )


def check_qk_fix_supported(model) -> None:
    """Check that the AtP* QK fix handles the model's attention.

    Raises:
        UnsupportedModelError: if the model's attention is of a kind the QK fix does not
            handle.
    """
    if not supports(model, TL_ATTENTION):
        raise BridgeUnsupportedError(
            "the AtP* QK fix recomputes attention with TransformerLens 3.9's attention "
            "components, which this backend does not have; use qk_fix=False (plain AtP, "
            "GradDrop still works) or HookedRewardModel on TransformerLens 3.9"
        )
    cfg = model.cfg
    problems = {
        "split q/k/v inputs (use_attn_in / use_split_qkv_input)": cfg.use_attn_in
        or cfg.use_split_qkv_input,
        "parallel attention and MLP": cfg.parallel_attn_mlp,
        "post-norm blocks": cfg.original_architecture in POST_NORM_ARCHITECTURES,
        f"{cfg.positional_embedding_type} positions": cfg.positional_embedding_type
        not in ("standard", "rotary"),
        "attention sinks / log-n scaling": cfg.use_attention_sinks or cfg.use_logn_attn,
        "QK norm without rotary embeddings": cfg.use_qk_norm
        and cfg.positional_embedding_type != "rotary",
    }
    bad = [k for k, v in problems.items() if v]
    if bad:
        raise UnsupportedModelError(
            f"the AtP* QK fix does not handle {bad}; use qk_fix=False (plain AtP, GradDrop "
            "still works)"
        )


# -- the target forward with a graph -------------------------------------------------------
def attention_layer(model, site: str, layer: int) -> int | None:
    """The attention layer whose queries/keys a patch at `site`/`layer` feeds directly."""
    if site in ("resid_pre", "q", "k"):
        return layer
    if site in ("resid_post", "mlp_out") and layer + 1 < model.cfg.n_layers:
        return layer + 1
    return None


def attention_names(model, layer: int) -> dict[str, str]:
    """The hook names of attention layer `layer` that the QK fix reads, by role."""
    b = f"blocks.{layer}"
    rotary = model.cfg.positional_embedding_type == "rotary"
    return {
        "x": f"{b}.hook_resid_pre",
        "mid": f"{b}.hook_resid_mid",
        "scores": f"{b}.attn.hook_attn_scores",
        "pattern": f"{b}.attn.hook_pattern",
        "v": f"{b}.attn.hook_v",
        "q": f"{b}.attn.hook_rot_q" if rotary else f"{b}.attn.hook_q",
        "k": f"{b}.attn.hook_rot_k" if rotary else f"{b}.attn.hook_k",
    }


def captured_names(model, plan: PatchPlan, qk_fix: bool, graddrop: bool) -> list[str]:
    """The hook names whose activations (and gradients) the estimates need."""
    names = [plan.hook(layer) for layer in plan.grid.layers]
    if qk_fix and plan.site in QK_SITES:
        for layer in plan.grid.layers:
            a = attention_layer(model, plan.site, layer)
            if a is not None:
                names += attention_names(model, a).values()
    if graddrop:
        for layer in range(model.cfg.n_layers):
            names += [f"blocks.{layer}.hook_resid_pre", f"blocks.{layer}.hook_resid_post"]
    return list(dict.fromkeys(names))


def forward_with_graph(model, plan: PatchPlan, reader: RewardReader, names, fwd_hooks):
    """Run the target with gradients from the first block's input on, capturing activations.

    The weights need not require grad.

    Returns:
        The named activations and the reward `[1]`.
    """
    acts: dict[str, Tensor] = {}

    def root(act, hook):
        return act.detach().requires_grad_(True)

    def keep(name: str):
        def hook(act, hook):
            acts[name] = act  # by the name asked for (the bridge's hook.name is its own)
            return act  # returned: the tensor the rest of the forward uses (bridge aliases)

        return hook

    hooks = [("blocks.0.hook_resid_pre", root), *fwd_hooks, *[(n, keep(n)) for n in names]]
    with torch.enable_grad(), model.hooks(fwd_hooks=[*hooks, *reader.hooks()]):
        out = model(plan.target.batch(), return_type="reward")
        reward = reader.read(out)
    return acts, reward


def layer_of(name: str) -> int:
    """The layer of a `blocks.{layer}.…` hook name.

    Raises:
        PatchingError: if `name` is not a hook name inside a block.
    """
    found = _LAYER.match(name)
    if found is None:
        raise PatchingError(f"{name!r} is not a hook name inside a block")
    return int(found.group(1))


def dropped_layer_grads(acts: dict, grads: dict, drop: int) -> dict[str, Tensor]:
    """Gradients with the path through layer `drop`'s attention and MLP outputs removed.

    This is GradDrop: unchanged above it, the skip-only gradient at it, and below it the
    vector-Jacobian product of that skip-only gradient from the layer's input.
    """
    post = grads[f"blocks.{drop}.hook_resid_post"]
    out, below = {}, []
    for name, g in grads.items():
        layer = layer_of(name)
        if layer > drop:
            out[name] = g
        elif layer == drop:
            resid = name.endswith(("hook_resid_pre", "hook_resid_mid", "hook_resid_post"))
            out[name] = post if resid else torch.zeros_like(g)
        else:
            below.append(name)
    if below:
        with torch.enable_grad():
            vjp = torch.autograd.grad(
                acts[f"blocks.{drop}.hook_resid_pre"],
                [acts[n] for n in below],
                grad_outputs=post,
                retain_graph=True,
                allow_unused=True,
            )
        for name, g in zip(below, vjp, strict=True):
            out[name] = torch.zeros_like(grads[name]) if g is None else g
    return out


# -- estimates --------------------------------------------------------------------------------
class Estimator:
    """Per-cell estimates from one set of gradients (plain AtP or with the QK fix)."""

    def __init__(self, model, plan: PatchPlan, acts: dict, source: dict, qk_fix: bool):
        """Keep the target activations and the source values the estimates need."""
        self.model, self.plan, self.acts, self.source = model, plan, acts, source
        self.qk_fix = qk_fix and plan.site in QK_SITES
        self.pos = plan.alignment.target
        self._patched_qkv: dict[int, tuple] = {}

    @torch.no_grad()
    def __call__(self, grads: dict[str, Tensor]) -> Float[Tensor, "..."]:
        """The estimates of every cell of the grid from the gradients `grads`."""
        grid = self.plan.grid
        rows = []
        for layer in grid.layers:
            per_pos = self.per_position(layer, grads)  # [n] or [n, heads]
            if grid.heads is not None:
                per_pos = per_pos[:, list(grid.heads)]
            rows.append(per_pos if grid.by_position else per_pos.sum(0))
        return torch.stack(rows)

    def delta(self, layer: int) -> Tensor:
        """Source minus target activation at the aligned positions of `layer`."""
        act = self.acts[hook_name(self.plan.site, layer)][0].detach()
        src = self.source[layer].to(act.dtype)
        return src - act[self.pos]

    def per_position(self, layer: int, grads: dict) -> Tensor:
        """The estimate of each aligned position (and head) of `layer`."""
        site = self.plan.site
        g = grads[hook_name(site, layer)][0][self.pos]
        delta = self.delta(layer)
        a = attention_layer(self.model, site, layer) if self.qk_fix else None
        if a is None:
            return (g * delta).sum(-1)
        if site == "q":
            return self.query_fix(a, grads, delta)
        if site == "k":
            return self.key_fix(a, grads, delta)
        return self.residual_fix(a, grads, delta)

    # the three QK-fixed estimators ---------------------------------------------------------
    def residual_fix(self, a: int, grads: dict, dx: Tensor) -> Float[Tensor, " n"]:
        """Skip + exact pattern change (patched query row, patched key column) + values."""
        names = attention_names(self.model, a)
        x_new = self.acts[names["x"]][0].detach()[self.pos] + dx
        q_new, k_new, v_new = self.patched_qkv(a, x_new)
        skip = (grads[names["mid"]][0][self.pos] * dx).sum(-1)
        rows = self.row_effects(a, grads, q_new, k_new)
        cols = self.column_effects(a, grads, k_new, include_diagonal=False)
        v_old = self.acts[names["v"]][0].detach()[self.pos]
        values = (grads[names["v"]][0][self.pos] * (v_new - v_old)).sum((-1, -2))
        return skip + (rows + cols).sum(-1) + values

    def query_fix(self, a: int, grads: dict, dq: Tensor) -> Float[Tensor, "n head"]:
        """The QK-fixed estimate of patching the queries of attention `a` by `dq`."""
        attn = self.model.blocks[a].attn
        q_pre = self.acts[hook_name("q", a)][0].detach()[self.pos] + dq
        return self.row_effects(a, grads, self.rotate(attn, qk_norm(attn, q_pre, "q")), None)

    def key_fix(self, a: int, grads: dict, dk: Tensor) -> Float[Tensor, "n kv_head"]:
        """The QK-fixed estimate of patching the keys of attention `a` by `dk`."""
        attn = self.model.blocks[a].attn
        k_pre = self.acts[hook_name("k", a)][0].detach()[self.pos] + dk
        k_new = self.rotate(attn, qk_norm(attn, k_pre, "k"))
        per_query_head = self.column_effects(a, grads, k_new, include_diagonal=True)
        n_kv = site_heads(self.model.cfg, "k")
        return per_query_head.reshape(per_query_head.shape[0], n_kv, -1).sum(-1)

    # building blocks --------------------------------------------------------------------------
    def patched_qkv(self, a: int, x_new: Float[Tensor, "n d_model"]):
        """Rotated queries and keys and the values a patched residual would produce.

        They are those of attention `a` (cached: GradDrop reuses them for every dropped layer).
        """
        if a not in self._patched_qkv:
            block = self.model.blocks[a]
            normed = block.ln1(x_new[None])
            q, k, v = block.attn.calculate_qkv_matrices(normed, normed, normed)
            self._patched_qkv[a] = (
                self.rotate(block.attn, q[0]),
                self.rotate(block.attn, k[0]),
                v[0],
            )
        return self._patched_qkv[a]

    def rotate(self, attn, x: Float[Tensor, "n head d_head"]) -> Tensor:
        """Rotary embedding of `x[i]` at target position `pos[i]` (identity otherwise)."""
        if self.model.cfg.positional_embedding_type != "rotary":
            return x
        length = int(self.pos.max()) + 1
        buf = x.new_zeros(1, length, *x.shape[1:])
        buf[0, self.pos] = x
        return attn.apply_rotary(buf, 0, None)[0, self.pos]

    def attention_state(self, a: int, grads: dict):
        """Attention `a`'s scores, pattern, pattern gradient and (rotated) queries and keys."""
        names = attention_names(self.model, a)
        scores = self.acts[names["scores"]][0].detach()  # [head, q, k], masked with -inf
        pattern = self.acts[names["pattern"]][0].detach()
        g_pattern = grads[names["pattern"]][0]
        q = self.acts[names["q"]][0].detach()  # [pos, head, d_head] (rotated)
        k = self.acts[names["k"]][0].detach()
        return scores, pattern, g_pattern, q, k

    def row_effects(self, a, grads, q_new, k_new) -> Float[Tensor, "n head"]:
        """`Σ_s ∂m/∂A_ps (A'_ps - A_ps)` for the patched query at each position `p`.

        With the patched key at `s = p` when `k_new` is given.
        """
        attn = self.model.blocks[a].attn
        scores, pattern, g_pattern, _, k = self.attention_state(a, grads)
        new = attn.calculate_attention_scores(q_new[None], k[None])[0]  # [head, n, key]
        n = q_new.shape[0]
        if k_new is not None:
            diag = attn.calculate_attention_scores(q_new[:, None], k_new[:, None])  # [n,h,1,1]
            new[:, torch.arange(n), self.pos] = diag[:, :, 0, 0].T
        old = scores[:, self.pos]  # [head, n, key]
        new = torch.where(torch.isfinite(old), new, old)
        change = torch.softmax(new, -1) - pattern[:, self.pos]
        return (change * g_pattern[:, self.pos]).sum(-1).T

    def column_effects(self, a, grads, k_new, include_diagonal: bool) -> Float[Tensor, "n head"]:
        """`Σ_t Σ_s ∂m/∂A_ts (A'_ts - A_ts)` over the queries `t` that see a patched key at `p`.

        Each row is renormalised in closed form from its log-sum-exp.
        """
        attn = self.model.blocks[a].attn
        scores, pattern, g_pattern, q, _ = self.attention_state(a, grads)
        new = attn.calculate_attention_scores(q[None], k_new[None])[0]  # [head, query, n]
        old = scores[:, :, self.pos]
        a_old = pattern[:, :, self.pos]
        log_z = torch.logsumexp(scores, -1, keepdim=True)  # [head, query, 1]
        e = (new - log_z).clamp(max=60).exp()
        ratio = 1 / (1 - a_old + e)  # Z / Z'
        a_new = e * ratio
        g_old = g_pattern[:, :, self.pos]
        g_row = (g_pattern * pattern).sum(-1, keepdim=True)
        term = (ratio - 1) * (g_row - g_old * a_old) + g_old * (a_new - a_old)
        query = torch.arange(scores.shape[1], device=scores.device)[None, :, None]
        after = query >= self.pos[None, None] if include_diagonal else query > self.pos[None, None]
        valid = torch.isfinite(old) & after
        return torch.where(valid, term, torch.zeros_like(term)).sum(1).T


def qk_norm(attn, x: Float[Tensor, "n head d_head"], which: str) -> Tensor:
    """The model's QK norm (if any) applied to pre-norm queries/keys."""
    if not attn.cfg.use_qk_norm:
        return x
    return attn._apply_qk_norm(x[None], attn.q_norm if which == "q" else attn.k_norm)[0]


def positions_tensor(x: Sequence[int]) -> Int[Tensor, " n"]:
    """Positions as a `long` tensor."""
    return torch.as_tensor(list(x), dtype=torch.long)
