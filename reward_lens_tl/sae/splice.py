"""Splicing SAEs into a reward model through sae_lens, with hook names checked first.

`HookedRewardModel` subclasses sae_lens's `HookedSAETransformer`, so `add_sae`,
`run_with_cache_with_saes` and the `saes()` context manager work unchanged. Two sae_lens
behaviours are tightened here: a hook name that does not exist raises
`SAEHookError` (sae_lens only logs a warning and skips the SAE),
and every SAE is checked to be attached after splicing.

With the error term on, the spliced model computes exactly the original reward (the SAE's
output is its reconstruction plus `x − x̂`); without it, the reward is that of the
reconstruction, and `splice_report` measures how far it moves.

**Special tokens.** sae_lens's `exclude_special_tokens` bypasses the SAE at the tokenizer's
structural special tokens (BOS, EOS, pad, SEP, decoder-start) or at a list of ids. A reward
model reads its reward at one of those (the EOS closing the chat template), so excluding it
makes the spliced reward ignore the SAE there while the cached latents still describe a
reconstruction: attributions from the cache no longer add up.
`check_special_token_exclusion` (called by `HookedRewardModel.add_sae`) refuses such an
exclusion and allows one that only touches tokens the reward is never read from (the BOS).

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.testing import tiny_reward_model, random_batch
    >>> from reward_lens_tl.sae.testing import random_topk_sae
    >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    >>> sae = random_topk_sae(model, "blocks.1.hook_resid_post")
    >>> ids, mask = random_batch(2, [9, 6])
    >>> report = splice_report(model, sae, ids, mask)
    >>> report.max_error_with_error_term < 1e-5, model.acts_to_saes
    (True, {})
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from jaxtyping import Float
from sae_lens import SAE
from sae_lens.util import get_special_token_ids
from torch import Tensor

from ..errors import InvalidArgumentError, SAEHookError, SAESiteError
from ..plotting import PLOT_DOC, Backend, render, scatter
from ..results import Result, TopK, top_entries
from ..signatures import pasted_docs
from ..stats import pearson
from .activations import check_hook
from .sae_results import short_site

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "add_sae",
    "run_with_cache_with_saes",
    "splice_report",
    "spliced",
]


def sae_hook_name(sae: SAE) -> str:
    """The hook an SAE reads (`cfg.metadata.hook_name`).

    Args:
        sae: The SAE.

    Returns:
        The hook name.

    Raises:
        SAESiteError: If the SAE has no hook name.
    """
    name = sae.cfg.metadata.hook_name
    if not name:
        raise SAESiteError(
            "this SAE has no hook name (cfg.metadata.hook_name); set it to the model hook it "
            "was trained on, e.g. sae.cfg.metadata.hook_name = 'blocks.1.hook_resid_post'"
        )
    return name


def check_saes(model, saes: Sequence[SAE]) -> None:
    """Each SAE's hook exists on `model` (or already has an SAE) and has the right width.

    Args:
        model: The reward model.
        saes: The SAEs to check.
    """
    for sae in saes:
        name = sae_hook_name(sae)
        if name in model.acts_to_saes:
            continue
        check_hook(model, name)
        out = sae.cfg.metadata.hook_name_out
        if out and out != name:
            check_hook(model, out)
        check_sae_width(model, sae)


#: Hook points by the width of their last axis (what an SAE reads), by the hook's own name.
_D_MODEL_HOOKS = (
    "hook_resid_pre", "hook_resid_mid", "hook_resid_post", "hook_attn_out", "hook_mlp_out",
    "hook_embed", "hook_pos_embed", "hook_normalized", "hook_attn_in", "hook_mlp_in",
    "hook_q_input", "hook_k_input", "hook_v_input", "hook_result",
)  # fmt: skip
_D_MLP_HOOKS = ("mlp.hook_pre", "mlp.hook_post", "mlp.hook_pre_linear")
_D_HEAD_HOOKS = ("hook_q", "hook_k", "hook_v", "hook_z", "hook_rot_q", "hook_rot_k")


def hook_width(model, hook_name: str, reshape_z: bool = False) -> tuple[str, int] | None:
    """The width of the axis an SAE reads at a hook.

    `(what, width)` of the last axis of `hook_name`'s activations, the axis an SAE
    reads (`hook_z` flattened to `n_heads*d_head` when `reshape_z`, as sae_lens's
    hook_z reshaping does), or `None` for a hook point this table does not know.

    Args:
        model: The reward model.
        hook_name: The hook point.
        reshape_z: Whether `hook_z` is flattened over heads.

    Returns:
        `(what, width)`, or `None`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.testing import tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> hook_width(model, "blocks.0.hook_resid_post"), hook_width(
        ...     model, "blocks.0.mlp.hook_post")
        (('d_model', 64), ('d_mlp', 128))
    """
    cfg, leaf = model.cfg, hook_name.rsplit(".", 1)[-1]
    if leaf == "hook_z" and reshape_z:
        return "n_heads*d_head", cfg.n_heads * cfg.d_head
    if leaf in _D_MODEL_HOOKS:
        return "d_model", cfg.d_model
    if hook_name.endswith(_D_MLP_HOOKS) and cfg.d_mlp:
        return "d_mlp", cfg.d_mlp
    if ".attn." in hook_name and leaf in _D_HEAD_HOOKS:
        return "d_head", cfg.d_head
    return None


def check_sae_width(model, sae: SAE) -> None:
    """Refuse an SAE whose width is not that of its hook's activations.

    Refuses (`SAESiteError`) an SAE whose `d_in` (or a
    transcoder's `d_out`) is not the width of its hook's activations, when
    `hook_width` knows that width; sae_lens would accept it and fail inside the next
    forward with a shape error. Called by `HookedRewardModel.add_sae`.

    Args:
        model: The reward model.
        sae: The SAE.

    Raises:
        SAESiteError: If a width does not match.
    """
    reshape_z = bool(getattr(sae, "hook_z_reshaping_mode", False)) or (
        getattr(sae.cfg, "reshape_activations", "none") == "hook_z"
    )
    checks = [(sae_hook_name(sae), "d_in", sae.cfg.d_in)]
    out = sae.cfg.metadata.hook_name_out
    if out and out != checks[0][0] and getattr(sae.cfg, "d_out", None) is not None:
        checks.append((out, "d_out", sae.cfg.d_out))
    for name, field_name, size in checks:
        known = hook_width(model, name, reshape_z)
        if known is not None and int(size) != known[1]:
            raise SAESiteError(
                f"the SAE for {name} has {field_name}={size}, but that hook's activations have "
                f"width {known[0]}={known[1]}: was it trained on another model or another hook "
                "point? Pass an SAE trained at this hook of this model"
            )


def check_special_token_exclusion(
    model, sae: SAE, exclude_special_tokens: Any = False
) -> bool | list[int]:
    """Check sae_lens's `exclude_special_tokens` against where `model` reads its reward.

    `True` excludes sae_lens's special ids (the tokenizer's BOS, EOS, pad, SEP and
    decoder-start ids); a list, tuple, set or tensor excludes those ids (returned as a list:
    sae_lens treats anything but a list as `True`). The exclusion is refused with
    `InvalidArgumentError` when it contains an id the reward is
    read at (`reading_token_ids`): there sae_lens would pass the original activation
    through, so the spliced reward would not be the SAE's, while the cache still holds latents
    (and, with the error term, a zero error) at that token. Excluding ids the reward is never
    read at (e.g. the BOS) is allowed. `None` means `False`.

    Args:
        model: The reward model.
        sae: The SAE to be spliced in.
        exclude_special_tokens: `True`, `False`, `None` or token ids.

    Returns:
        The value to hand to sae_lens (`False`, `True` or a list of ids).

    Raises:
        InvalidArgumentError: If the exclusion touches a token the reward is read at, or is
            not a valid value.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.zoo import zoo_path
        >>> from reward_lens_tl.sae.testing import random_topk_sae
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> sae = random_topk_sae(model, "blocks.2.hook_resid_post")
        >>> check_special_token_exclusion(model, sae, torch.tensor([model.bos_token_id]))
        [1]
        >>> check_special_token_exclusion(model, sae, True)
        Traceback (most recent call last):
        ...
        reward_lens_tl.errors.InvalidArgumentError: exclude_special_tokens=True would bypass ...
    """
    if exclude_special_tokens is None or exclude_special_tokens is False:
        return False
    if exclude_special_tokens is True:
        return _check_true(model, sae)
    excluded = _as_id_list(model, exclude_special_tokens)
    if not excluded:
        return False
    read = reading_token_ids(model)
    clash = sorted(set(excluded) & read)
    if clash:
        raise InvalidArgumentError(
            f"exclude_special_tokens={excluded} would bypass the SAE at {sae_hook_name(sae)} "
            f"on {_describe(model, clash)}, where this model reads its reward. "
            + _consequence(model, sorted(set(excluded) - read))
        )
    return excluded


def reading_token_ids(model) -> set[int]:
    """Token ids the reward can be read at (or, for a gated head, the gate).

    The EOS id(s) of the config and tokenizer (unless the EOS is also the pad id: HF's rule
    then never reads it), the token a conversation encoded with the chat template is read at
    (`model.encode("a", "b")` pooled by the model's own rule), and the first id of an
    ArmoRM-style gating pattern (where the gate reads the prompt).

    Args:
        model: The reward model.

    Returns:
        The token ids.
    """
    ids: set[int] = set()
    pad = model.pad_token_id
    tokenizer = getattr(model, "tokenizer", None)
    for eos in (model.eos_token_id, getattr(tokenizer, "eos_token_id", None)):
        for i in eos if isinstance(eos, (list, tuple)) else [eos]:
            if i is not None and int(i) != pad:
                ids.add(int(i))
    if tokenizer is not None:
        from ..inputs import encode_conversation

        try:  # model.encode without its unknown-token warning (which fires once per tokenizer)
            enc = encode_conversation(tokenizer, "a", "b", max_length=model.cfg.n_ctx)
            tokens = torch.tensor([list(enc.ids)])
            ids.add(int(tokens[0, model.pool_positions(tokens)[0]]))
        except Exception:  # noqa: BLE001 - a tokenizer that cannot encode: EOS ids only
            pass
    pattern = tuple(getattr(model, "gating_token_pattern", ()) or ())
    if pattern:
        ids.add(int(pattern[0]))
    return ids


def _check_true(model, sae: SAE) -> bool:
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        raise InvalidArgumentError(
            "exclude_special_tokens=True needs the model's tokenizer to know the special ids, "
            "and this model has none (sae_lens would only log a warning and exclude nothing). "
            "Pass the ids to exclude as a list, e.g. exclude_special_tokens=[bos_id], or load "
            "the model with tokenizer=..."
        )
    special = {int(i) for i in get_special_token_ids(tokenizer)}
    clash = sorted(special & reading_token_ids(model))
    if clash:
        raise InvalidArgumentError(
            f"exclude_special_tokens=True would bypass the SAE at {sae_hook_name(sae)} on every "
            f"special token {_describe(model, sorted(special))}, including "
            f"{_describe(model, clash)}, where this model reads its reward. "
            + _consequence(model, sorted(special - set(clash)))
        )
    return True


def _consequence(model, allowed: list[int]) -> str:
    bos = getattr(model, "bos_token_id", None)
    if not allowed and isinstance(bos, int) and bos not in reading_token_ids(model):
        allowed = [bos]
    hint = (
        f"exclude_special_tokens={allowed} ({_describe(model, allowed)}, never read)"
        if allowed
        else "exclude_special_tokens=[bos_id] (a token the reward is never read at)"
    )
    return (
        "sae_lens passes the original activation through at an excluded token, so the spliced "
        "reward would not be the SAE's reward, while the cache still holds the SAE's latents "
        "there (and, with the error term, a zero error): attributions computed from the cached "
        "latents would not add up to the reward. Pass exclude_special_tokens=False, or exclude "
        f"only tokens the reward is not read at, e.g. {hint}."
    )


def _as_id_list(model, value: Any) -> list[int]:
    if isinstance(value, Tensor):
        if value.dtype.is_floating_point or value.dtype == torch.bool:
            raise InvalidArgumentError(
                f"exclude_special_tokens must be True/False or token ids, got a {value.dtype} "
                "tensor"
            )
        value = value.flatten().tolist()
    if isinstance(value, (int, str)) or not isinstance(value, (list, tuple, set, frozenset)):
        raise InvalidArgumentError(
            "exclude_special_tokens must be True, False or a list of token ids (e.g. "
            f"[model.bos_token_id]), got {value!r}"
        )
    ids: list[int] = []
    for i in value:
        if isinstance(i, Tensor) and i.numel() == 1 and not i.is_floating_point():
            i = int(i)
        if isinstance(i, bool) or not isinstance(i, int):
            raise InvalidArgumentError(
                f"exclude_special_tokens must hold integer token ids, got {i!r} in {value!r}"
            )
        if not 0 <= i < model.cfg.d_vocab:
            raise InvalidArgumentError(
                f"exclude_special_tokens holds id {i}, outside the vocabulary "
                f"[0, {model.cfg.d_vocab})"
            )
        if i not in ids:
            ids.append(i)
    return ids


def _describe(model, ids: list[int]) -> str:
    tokenizer = getattr(model, "tokenizer", None)
    names = None
    if tokenizer is not None:
        try:
            names = tokenizer.convert_ids_to_tokens(list(ids))
        except Exception:  # noqa: BLE001 - ids are enough
            names = None
    if not names:
        return ", ".join(f"id {i}" for i in ids)
    return ", ".join(f"{n!r} (id {i})" for n, i in zip(names, ids, strict=True))


def _as_list(saes: SAE | Sequence[SAE]) -> list[SAE]:
    return [saes] if isinstance(saes, SAE) else list(saes)


@contextmanager
def spliced(model, saes: SAE | Sequence[SAE], use_error_term: bool = True) -> Iterator:
    """Attach `saes` for the duration of the block (sae_lens's `model.saes`), checked.

    Previously attached SAEs are restored afterwards, even if the block raises.

    Args:
        model: The reward model.
        saes: One SAE or several.
        use_error_term: Whether the SAEs add their error term.

    Yields:
        The model, with the SAEs attached.

    Raises:
        SAEHookError: If sae_lens did not attach an SAE.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import spliced
        >>> from reward_lens_tl.sae.testing import random_topk_sae
        >>> from reward_lens_tl.testing import random_batch, tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> sae = random_topk_sae(model, "blocks.1.hook_resid_post", d_sae=32, k=4)
        >>> ids, mask = random_batch(2, [9, 6])
        >>> clean = model.rewards(ids, mask)
        >>> with spliced(model, sae, use_error_term=False):  # the reconstruction's reward
        ...     change = model.rewards(ids, mask) - clean
        ...     print(list(model.acts_to_saes), change.round(decimals=3))
        ['blocks.1.hook_resid_post'] tensor([-0.9020, -0.6230])
        >>> model.acts_to_saes  # detached again
        {}
    """
    saes = _as_list(saes)
    check_saes(model, saes)
    with model.saes(saes=saes, use_error_term=use_error_term):
        missing = [sae_hook_name(s) for s in saes if sae_hook_name(s) not in model.acts_to_saes]
        if missing:
            raise SAEHookError(f"sae_lens did not attach SAEs at {missing}")
        yield model


def add_sae(model, sae: SAE, use_error_term: bool = True) -> None:
    """`model.add_sae` (permanent until `model.reset_saes()`), with the hook checked.

    Args:
        model: The reward model.
        sae: The SAE.
        use_error_term: Whether the SAE adds its error term.

    Raises:
        SAEHookError: If sae_lens did not attach the SAE.

    Examples:
        >>> import torch
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import add_sae
        >>> from reward_lens_tl.sae.testing import random_topk_sae
        >>> from reward_lens_tl.testing import random_batch, tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> sae = random_topk_sae(model, "blocks.1.hook_resid_post", d_sae=32, k=4)
        >>> ids, mask = random_batch(2, [9, 6])
        >>> clean = model.rewards(ids, mask)
        >>> add_sae(model, sae)  # with its error term: the reward does not change
        >>> list(model.acts_to_saes), torch.allclose(model.rewards(ids, mask), clean, atol=1e-5)
        (['blocks.1.hook_resid_post'], True)
        >>> model.reset_saes()
        >>> model.acts_to_saes
        {}
    """
    check_saes(model, [sae])
    model.add_sae(sae, use_error_term=use_error_term)
    if sae_hook_name(sae) not in model.acts_to_saes:
        raise SAEHookError(f"sae_lens did not attach the SAE at {sae_hook_name(sae)}")


def run_with_cache_with_saes(
    model, *args, saes: SAE | Sequence[SAE], use_error_term: bool = True, **kwargs
):
    """Run sae_lens's `run_with_cache_with_saes` with hook names checked.

    The error term is on by default: the cache then describes the model's own computation.

    Args:
        model: The reward model.
        *args: Passed on to sae_lens.
        saes: One SAE or several.
        use_error_term: Whether the SAEs add their error term.
        **kwargs: Passed on to sae_lens.

    Returns:
        The output and the activation cache.

    Examples:
        >>> import torch
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import run_with_cache_with_saes
        >>> from reward_lens_tl.sae.testing import random_topk_sae
        >>> from reward_lens_tl.testing import random_batch, tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> sae = random_topk_sae(model, "blocks.1.hook_resid_post", d_sae=32, k=4)
        >>> ids, mask = random_batch(2, [9, 6])
        >>> rewards, cache = run_with_cache_with_saes(
        ...     model, ids, attention_mask=mask, return_type="reward", saes=sae
        ... )
        >>> latents = cache["blocks.1.hook_resid_post.hook_sae_acts_post"]
        >>> latents.shape, torch.allclose(rewards, model.rewards(ids, mask), atol=1e-5)
        (torch.Size([2, 9, 32]), True)
        >>> bool(((latents > 0).sum(-1) == 4).all())  # TopK: k = 4 latents at every token
        True
    """
    saes = _as_list(saes)
    check_saes(model, saes)
    return model.run_with_cache_with_saes(*args, saes=saes, use_error_term=use_error_term, **kwargs)


@dataclass(frozen=True)
class SpliceReport(Result):
    """Rewards of the original model and with an SAE spliced in, per example.

    Attributes:
        hook_name: The hook the SAE reads.
        original: The original rewards.
        with_error_term: The rewards spliced with the error term.
        reconstruction: The rewards spliced without the error term.
        fvu: The fraction of variance unexplained at the hook, over non-padding tokens.
        l0: The mean number of active latents per token.
    """

    no_example_axis = (
        "fvu and l0 are measured over every token of the batch, so a subset of its rows would "
        "carry numbers of the other rows; run splice_report on the rows you want"
    )

    hook_name: str
    original: Float[Tensor, " example"]
    with_error_term: Float[Tensor, " example"]
    reconstruction: Float[Tensor, " example"]  # spliced without the error term
    fvu: float  # at the hook, over non-padding tokens
    l0: float

    @property
    def max_error_with_error_term(self) -> float:
        """Max |reward(spliced with error) − reward| (0 up to float rounding)."""
        return float((self.with_error_term - self.original).abs().max())

    @property
    def reconstruction_error(self) -> Float[Tensor, " example"]:
        """Reward(reconstruction) − reward, per example."""
        return self.reconstruction - self.original

    def summary(self) -> dict[str, float]:
        """The largest errors, the reward spread, FVU and L0."""
        err = self.reconstruction_error
        return {
            "max_error_with_error_term": self.max_error_with_error_term,
            "mean_abs_reconstruction_error": float(err.abs().mean()),
            "max_abs_reconstruction_error": float(err.abs().max()),
            "reward_std": float(self.original.std()) if self.original.numel() > 1 else 0.0,
            "fvu": self.fvu,
            "l0": self.l0,
        }

    def top_k(self, k: int = 5) -> TopK:
        """Examples whose reward the reconstruction (no error term) changes most.

        Args:
            k: How many examples.

        Returns:
            The labelled top entries.
        """
        labels = [f"example {i}" for i in range(len(self.original))]
        return top_entries(labels, self.reconstruction_error.tolist(), k, "reconstruction error")

    def to_dataframe(self):
        """One row per example: the three rewards and the reconstruction error."""
        import pandas as pd

        return pd.DataFrame(
            {
                "original": self.original.numpy(),
                "with_error_term": self.with_error_term.numpy(),
                "reconstruction": self.reconstruction.numpy(),
                "reconstruction_error": self.reconstruction_error.numpy(),
            }
        )

    @pasted_docs(plot=PLOT_DOC)
    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """The spliced rewards against the original reward, one point per example.

        Two series: spliced without the error term (the reconstruction) and with it (on the
        dashed line y = x up to float rounding). The title gives the correlation of the
        reconstruction's reward with the original reward.

        {plot}
        """
        examples = [f"example {i}" for i in range(len(self.original))]
        r = pearson(self.original.numpy(), self.reconstruction.numpy())
        fig = scatter(
            {
                "without error term": (self.original, self.reconstruction),
                "with error term": (self.original, self.with_error_term),
            },
            xaxis="reward",
            yaxis=f"reward, SAE spliced in at {short_site(self.hook_name)}",
            title=f"Spliced vs original reward · r = {r:#.3g} without error term",
            labels={"without error term": examples, "with error term": examples},
            diagonal=True,
        )
        return render(fig, backend, ax)


def splice_report(model, sae: SAE, input_ids: Tensor, attention_mask: Tensor | None = None):
    """How splicing `sae` changes the reward, with and without its error term.

    Args:
        model: The reward model.
        sae: The SAE.
        input_ids: The token ids, `[batch, pos]`.
        attention_mask: The attention mask, or `None` to infer it from padding.

    Returns:
        A `SpliceReport`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sae import splice_report
        >>> from reward_lens_tl.sae.testing import random_topk_sae
        >>> from reward_lens_tl.testing import random_batch, tiny_reward_model
        >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
        >>> sae = random_topk_sae(model, "blocks.1.hook_resid_post", d_sae=32, k=4)
        >>> ids, mask = random_batch(2, [9, 6])
        >>> report = splice_report(model, sae, ids, mask)  # an untrained SAE: a poor reconstruction
        >>> report.max_error_with_error_term < 1e-5, report.l0, round(report.fvu, 2)
        (True, 4.0, 2.14)
        >>> report.to_dataframe().round(3)
           original  with_error_term  reconstruction  reconstruction_error
        0     0.154            0.154          -0.749                -0.902
        1     0.688            0.688           0.065                -0.623
    """
    name = sae_hook_name(sae)
    check_saes(model, [sae])
    kwargs = dict(attention_mask=attention_mask, return_type="reward")
    with torch.no_grad():
        original = model(input_ids, **kwargs)
        with spliced(model, sae, use_error_term=True):
            exact, cache = model.run_with_cache(
                input_ids,
                names_filter=[
                    f"{name}.{h}"
                    for h in ("hook_sae_input", "hook_sae_acts_post", "hook_sae_recons")
                ],
                **kwargs,
            )
        with spliced(model, sae, use_error_term=False):
            recon = model(input_ids, **kwargs)
    mask = _token_mask(model, input_ids, attention_mask)
    x = cache[f"{name}.hook_sae_input"][mask]
    x_hat = cache[f"{name}.hook_sae_recons"][mask]
    acts = cache[f"{name}.hook_sae_acts_post"][mask]
    var = (x - x.mean(0)).pow(2).sum()
    return SpliceReport(
        hook_name=name,
        original=original.detach().float().cpu(),
        with_error_term=exact.detach().float().cpu(),
        reconstruction=recon.detach().float().cpu(),
        fvu=float((x - x_hat).pow(2).sum() / var.clamp_min(1e-12)),
        l0=float((acts != 0).sum(-1).float().mean()),
    )


def _token_mask(model, input_ids: Tensor, attention_mask: Tensor | None) -> Tensor:
    if attention_mask is not None:
        return attention_mask.bool()
    from .activations import _mask_from_pad

    return _mask_from_pad(model, model.check_tokens(input_ids)).bool()
