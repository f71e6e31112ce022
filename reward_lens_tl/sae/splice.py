"""Splicing SAEs into a reward model through sae_lens, with hook names checked first.

``HookedRewardModel`` subclasses sae_lens's ``HookedSAETransformer``, so ``add_sae``,
``run_with_cache_with_saes`` and the ``saes()`` context manager work unchanged. Two sae_lens
behaviours are tightened here: a hook name that does not exist raises
:class:`~reward_lens_tl.sae.errors.SAEHookError` (sae_lens only logs a warning and skips the SAE),
and every SAE is checked to be attached after splicing.

With the error term on, the spliced model computes exactly the original reward (the SAE's
output is its reconstruction plus ``x − x̂``); without it, the reward is that of the
reconstruction, and :func:`splice_report` measures how far it moves.

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

import torch
from jaxtyping import Float
from sae_lens import SAE
from torch import Tensor

from ..results import Result, TopK, top_entries
from .activations import check_hook
from .errors import SAEHookError, SAESiteError


def sae_hook_name(sae: SAE) -> str:
    """The hook an SAE reads (``cfg.metadata.hook_name``)."""
    name = sae.cfg.metadata.hook_name
    if not name:
        raise SAESiteError(
            "this SAE has no hook name (cfg.metadata.hook_name); set it to the model hook it "
            "was trained on, e.g. sae.cfg.metadata.hook_name = 'blocks.1.hook_resid_post'"
        )
    return name


def check_saes(model, saes: Sequence[SAE]) -> None:
    """Each SAE's hook exists on ``model`` (or already has an SAE) and has the right width."""
    for sae in saes:
        name = sae_hook_name(sae)
        if name in model.acts_to_saes:
            continue
        check_hook(model, name)
        out = sae.cfg.metadata.hook_name_out
        if out and out != name:
            check_hook(model, out)
        if "resid" in name and sae.cfg.d_in != model.cfg.d_model:
            raise SAESiteError(
                f"SAE for {name} has d_in={sae.cfg.d_in} but the residual stream has "
                f"d_model={model.cfg.d_model}: was it trained on another model?"
            )


def _as_list(saes: SAE | Sequence[SAE]) -> list[SAE]:
    return [saes] if isinstance(saes, SAE) else list(saes)


@contextmanager
def spliced(model, saes: SAE | Sequence[SAE], use_error_term: bool = True) -> Iterator:
    """Attach ``saes`` for the duration of the block (sae_lens's ``model.saes``), checked.

    Previously attached SAEs are restored afterwards, even if the block raises.
    """
    saes = _as_list(saes)
    check_saes(model, saes)
    with model.saes(saes=saes, use_error_term=use_error_term):
        missing = [sae_hook_name(s) for s in saes if sae_hook_name(s) not in model.acts_to_saes]
        if missing:
            raise SAEHookError(f"sae_lens did not attach SAEs at {missing}")
        yield model


def add_sae(model, sae: SAE, use_error_term: bool = True) -> None:
    """``model.add_sae`` (permanent until ``model.reset_saes()``), with the hook checked."""
    check_saes(model, [sae])
    model.add_sae(sae, use_error_term=use_error_term)
    if sae_hook_name(sae) not in model.acts_to_saes:
        raise SAEHookError(f"sae_lens did not attach the SAE at {sae_hook_name(sae)}")


def run_with_cache_with_saes(
    model, *args, saes: SAE | Sequence[SAE], use_error_term: bool = True, **kwargs
):
    """sae_lens's ``run_with_cache_with_saes`` with hook names checked (and the error term on
    by default: the cache then describes the model's own computation)."""
    saes = _as_list(saes)
    check_saes(model, saes)
    return model.run_with_cache_with_saes(*args, saes=saes, use_error_term=use_error_term, **kwargs)


@dataclass(frozen=True)
class SpliceReport(Result):
    """Rewards of the original model and with an SAE spliced in, per example."""

    hook_name: str
    original: Float[Tensor, " example"]
    with_error_term: Float[Tensor, " example"]
    reconstruction: Float[Tensor, " example"]  # spliced without the error term
    fvu: float  # at the hook, over non-padding tokens
    l0: float

    @property
    def max_error_with_error_term(self) -> float:
        """max |reward(spliced with error) − reward| (0 up to float rounding)."""
        return float((self.with_error_term - self.original).abs().max())

    @property
    def reconstruction_error(self) -> Float[Tensor, " example"]:
        """reward(reconstruction) − reward, per example."""
        return self.reconstruction - self.original

    def summary(self) -> dict[str, float]:
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
        """Examples whose reward the reconstruction (no error term) changes most."""
        labels = [f"example {i}" for i in range(len(self.original))]
        return top_entries(labels, self.reconstruction_error.tolist(), k, "reconstruction error")

    def to_dataframe(self):
        import pandas as pd

        return pd.DataFrame(
            {
                "original": self.original.numpy(),
                "with_error_term": self.with_error_term.numpy(),
                "reconstruction": self.reconstruction.numpy(),
                "reconstruction_error": self.reconstruction_error.numpy(),
            }
        )

    def plot(self, ax=None):
        """Reward of the reconstruction against the original reward; returns the figure."""
        from ..results import new_axes

        fig, ax = new_axes(ax, figsize=(4, 4))
        ax.scatter(self.original, self.reconstruction, s=10, label="without error term")
        ax.scatter(self.original, self.with_error_term, s=4, label="with error term")
        lo, hi = float(self.original.min()), float(self.original.max())
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.5)
        ax.set_xlabel("reward")
        ax.set_ylabel("reward with the SAE spliced in")
        ax.set_title(self.hook_name, fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        return fig


def splice_report(model, sae: SAE, input_ids: Tensor, attention_mask: Tensor | None = None):
    """How splicing ``sae`` changes the reward, with and without its error term."""
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
