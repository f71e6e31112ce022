"""Activation patching and attribution patching for reward models.

The patched quantity is the reward (or a metric of it), read at each sequence's reward-reading
token. Three layers of tools, cheapest last:

- `activation_patching`: the real thing, batched and exact (values equal
  `transformer_lens.patching`'s on the same inputs); modes `denoising`, `noising`,
  `mean` and `zero`; sites `resid_pre/mid/post`, `attn_out`, `mlp_out`, heads
  (`z`) and `q`/`k`/`v`, by layer, position and head.
- `attribution_patching` / `atp_star`: first-order estimates of the same grids in
  about three forward passes (AtP), with the QK fix and GradDrop of AtP*.
- `atp_agreement`, `agreement`, `compare_methods`: how well the estimates and
  direct attribution agree with patching, per pair and over a pair set.
- `causal_ground_truth` (`mechanisms`): where the zoo's planted features sit per
  layer, the smallest head set restoring their effect, and whether AtP finds the same cells.

Each sweep is a pipeline: `plan` resolves the request (the keywords of `PatchOptions`,
declared once) into plans, data only; `runner` runs them on the model; `metrics` scores the
patched runs; the result is a `PatchResult`.

Clean and corrupted inputs may differ in length; `alignment` says how positions are
paired (`"end"`, `"prefix"`, `"exact"`). Every function takes `fwd_hooks` (your own
interventions, active in every forward pass) and leaves no hook behind, even when it raises.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.testing import tiny_reward_model, random_batch
    >>> model = HookedRewardModel.from_pretrained(tiny_reward_model("llama"))
    >>> ids, _ = random_batch(2, [10, 8], low=6)   # left padded; each run drops its padding
    >>> patched = activation_patching(model, ids[0], ids[1], site="resid_pre", alignment="end")
    >>> estimate = attribution_patching(model, ids[0], ids[1], site="resid_pre")
    >>> patched.shape == estimate.shape == (2, 8)
    True
"""

from ..errors import AlignmentError, PatchingError, UnsupportedModelError
from .activation import activation_patching
from .alignment import Alignment, Run, align, as_run
from .atp import atp_star, attribution_patching
from .compare import (
    Agreement,
    AgreementReport,
    MethodComparison,
    agreement,
    atp_agreement,
    compare_methods,
)
from .grids import Grid, make_grid
from .mechanisms import (
    CausalGroundTruth,
    HeadSets,
    Localization,
    atp_recall,
    causal_ground_truth,
    localization,
    minimal_head_sets,
)
from .metrics import margin_fraction, reward_change
from .patch_results import MultiSitePatchResult, PatchResult
from .plan import PatchOptions
from .runner import chunk_memory_bytes

__all__ = [
    "PatchOptions",
    "Agreement",
    "AgreementReport",
    "CausalGroundTruth",
    "HeadSets",
    "Localization",
    "Alignment",
    "AlignmentError",
    "Grid",
    "MethodComparison",
    "MultiSitePatchResult",
    "PatchResult",
    "PatchingError",
    "Run",
    "UnsupportedModelError",
    "activation_patching",
    "agreement",
    "align",
    "as_run",
    "atp_agreement",
    "atp_recall",
    "atp_star",
    "attribution_patching",
    "causal_ground_truth",
    "chunk_memory_bytes",
    "compare_methods",
    "localization",
    "make_grid",
    "margin_fraction",
    "minimal_head_sets",
    "reward_change",
]
