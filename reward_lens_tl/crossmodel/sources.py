"""Reward-like models behind one small interface, so any two can be compared.

A *source* scores encoded conversations and, for a chunk of preference pairs, returns in one go
everything the comparison needs (`SourceRun`): rewards, the lens margin per site, the
component attribution of the margin and the residual representation per layer (for CKA).

- `ExplicitReward`: a `reward_lens_tl.model.HookedRewardModel` (`objective=`
  picks one objective of a multi-objective head; default: the model's reward / gated score);
  representation = the residual at the reward-reading position;
- `ImplicitReward`: an `reward_lens_tl.implicit.ImplicitRewardModel`;
  representation = the policy's residual averaged over the positions that predict response
  tokens.

`fwd_hooks` make a variant of a model without copying it (an ablation, a steering vector).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from ..attribution import direct_attribution
from ..errors import ArgumentTypeError, EmptyInputError, PreEncodedPairsError
from ..implicit.attribution import implicit_attribution
from ..implicit.batches import predicting_mask
from ..implicit.lens import implicit_lens
from ..implicit.reward_model import ImplicitRewardModel
from ..inputs import EncodedConversation, pad_batch
from ..lens import lens_sites, reward_lens
from ..pair_batches import encoded_pair
from ..readout import gather_positions

__all__ = [
    "ExplicitReward",
    "ImplicitReward",
    "SourceRun",
    "as_source",
    "run_on_pairs",
]


@dataclass(frozen=True)
class SourceRun:
    """One source's results on a pair set (pairs `i` = 0..n−1).

    Args:
        name: the source's name.
        chosen: the chosen responses' rewards `[n]`.
        rejected: the rejected responses' rewards `[n]`.
        lens_labels: the lens sites.
        lens_margins: the lens margin `[site, n]`.
        attribution_labels: the attributed components.
        attribution_margins: the margin attribution `[component, n]`.
        representations: site label -> `[2 m, d]` residuals (chosen rows, then rejected).
        backbone: the backbone's signature (see `backbone_signature`).

    Examples:
        >>> from reward_lens_tl.crossmodel import ImplicitReward, run_on_pairs
        >>> from reward_lens_tl.implicit import ImplicitRewardModel
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> irm = ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))
        >>> pairs = load_task().task.contrast_pairs("sycophancy", 3, seed=0)  # edited: chosen
        >>> run = run_on_pairs(ImplicitReward(irm), pairs)
        >>> run.name, [round(m, 3) for m in run.margins.tolist()]  # chosen − rejected
        ('implicit', [0.735, 0.554, 0.379])
        >>> run.lens_labels, [round(m, 3) for m in run.lens_margins[-1].tolist()]  # final: margin
        (('0_pre', '1_pre', 'final'), [0.735, 0.554, 0.379])
        >>> {site: tuple(r.shape) for site, r in run.representations.items()}  # 3 + 3 responses
        {'0_pre': (6, 64), '1_pre': (6, 64), 'final': (6, 64)}
    """

    name: str
    chosen: Tensor  # [n]
    rejected: Tensor  # [n]
    lens_labels: tuple[str, ...]
    lens_margins: Tensor  # [site, n]
    attribution_labels: tuple[str, ...]
    attribution_margins: Tensor  # [component, n]
    representations: dict[str, Tensor]  # site label -> [2 m, d] (chosen rows, then rejected)
    backbone: tuple

    @property
    def margins(self) -> Tensor:
        """The margins `chosen − rejected` `[n]`."""
        return self.chosen - self.rejected


def backbone_signature(cfg) -> tuple:
    """The shape of a backbone: `(n_layers, d_model, n_heads, d_head, d_mlp)`.

    Args:
        cfg: a model's config.

    Returns:
        The signature.
    """
    return (cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.d_head, cfg.d_mlp)


class _Capture:
    """Forward hooks storing a per-example summary of the residual at the lens sites."""

    def __init__(self, sites: Sequence[tuple[str, str]], reduce: Callable[[Tensor], Tensor]):
        self.sites, self.reduce = sites, reduce
        self.store: dict[str, Tensor] = {}  # site label -> reduced residual

    def hooks(self):
        def make(label):
            def hook(act, hook):
                self.store[label] = self.reduce(act).detach().float().cpu()

            return hook

        return [(name, make(label)) for label, name in self.sites]


class _PairEncoder:
    """What both sources share: a preference pair encoded as their model reads it."""

    model: Any

    def encode_pair(self, pair) -> tuple[EncodedConversation, EncodedConversation]:
        """Encode one preference pair with the model's tokenizer and template.

        Args:
            pair: a preference pair, as text or token ids.

        Returns:
            The encoded `(chosen, rejected)` conversations.
        """
        return encoded_pair(self.model, pair)


@dataclass
class ExplicitReward(_PairEncoder):
    """A `HookedRewardModel` as a comparison source.

    Args:
        model: the `HookedRewardModel`.
        objective: one objective of a multi-objective head (default: the model's reward /
            gated score).
        name: the source's name (default: `"explicit"` or the objective).
        fwd_hooks: hooks that make a variant of the model (an ablation, a steering vector).

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.crossmodel import ExplicitReward
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> multi = HookedRewardModel.from_pretrained(zoo_path("multi"))
        >>> harmless = ExplicitReward(multi, "harmlessness")  # one objective of the head
        >>> harmless.name, harmless.backbone  # (n_layers, d_model, n_heads, d_head, d_mlp)
        ('harmlessness', (3, 64, 4, 16, 128))
        >>> pair = load_task().task.contrast_pairs("harmful", 1, seed=0)[0]
        >>> edited, base = harmless.encode_pair(pair)  # a harmful word edited in
        >>> [round(r, 3) for r in harmless.rewards([edited, base]).tolist()]
        [-2.949, 0.01]
    """

    model: Any
    objective: Any = None
    name: str | None = None
    fwd_hooks: Sequence = field(default_factory=tuple)

    def __post_init__(self):
        """Name the source after its objective when no name is given."""
        if self.name is None:
            self.name = "explicit" if self.objective is None else str(self.objective)

    def _batch(self, encs):
        ids, mask = pad_batch(encs, self.model.pad_token_id)
        return ids.to(self.model.cfg.device), mask.to(self.model.cfg.device)

    def rewards(self, encodings: Sequence[EncodedConversation], batch_size: int = 32) -> Tensor:
        """The rewards of encoded conversations.

        Args:
            encodings: the encoded conversations.
            batch_size: conversations per forward.

        Returns:
            The rewards `[len(encodings)]`.
        """
        out = []
        for start in range(0, len(encodings), batch_size):
            ids, mask = self._batch(encodings[start : start + batch_size])
            lens = reward_lens(
                self.model, ids, mask, objective=self.objective, fwd_hooks=list(self.fwd_hooks)
            )
            out.append(lens.rewards)
        return torch.cat(out)

    def run_chunk(self, encs: list[EncodedConversation], keep_reps: bool):
        """Rewards, lens, attribution and (optionally) residual summaries of one chunk.

        Args:
            encs: the chunk's encoded conversations.
            keep_reps: capture the residual representations.

        Returns:
            `(rewards, lens values, lens labels, attribution values, attribution labels,
            representations)`.
        """
        ids, mask = self._batch(encs)
        model = self.model
        pos = model.pool_positions(model.check_tokens(ids, mask), mask)
        capture = _Capture(lens_sites(model, "layer"), lambda act: gather_positions(act, pos))
        hooks = [*self.fwd_hooks, *(capture.hooks() if keep_reps else [])]
        lens = reward_lens(model, ids, mask, objective=self.objective, fwd_hooks=hooks)
        attr = direct_attribution(
            model, ids, mask, objective=self.objective, fwd_hooks=list(self.fwd_hooks)
        )
        return lens.rewards, lens.values, lens.labels, attr.values, attr.labels, capture.store

    @property
    def backbone(self) -> tuple:
        """The backbone's signature (see `backbone_signature`)."""
        return backbone_signature(self.model.cfg)


@dataclass
class ImplicitReward(_PairEncoder):
    """An `ImplicitRewardModel` as a comparison source (components: the policy's).

    Args:
        model: the `ImplicitRewardModel`.
        name: the source's name.
        fwd_hooks: hooks that make a variant of the model (an ablation, a steering vector).

    Examples:
        >>> from reward_lens_tl.crossmodel import ImplicitReward
        >>> from reward_lens_tl.implicit import ImplicitRewardModel
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> irm = ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))
        >>> source = ImplicitReward(irm)
        >>> source.name, source.backbone  # the policy's (n_layers, d_model, n_heads, d_head, d_mlp)
        ('implicit', (2, 64, 4, 16, 128))
        >>> pair = load_task().task.contrast_pairs("harmful", 1, seed=0)[0]
        >>> encodings = list(source.encode_pair(pair))  # (edited, base)
        >>> [round(r, 3) for r in source.rewards(encodings).tolist()]  # the implicit rewards
        [-0.511, -0.286]
    """

    model: ImplicitRewardModel
    name: str | None = "implicit"
    fwd_hooks: Sequence = field(default_factory=tuple)

    def rewards(self, encodings: Sequence[EncodedConversation], batch_size: int = 32) -> Tensor:
        """The rewards of encoded conversations.

        Args:
            encodings: the encoded conversations.
            batch_size: conversations per forward.

        Returns:
            The rewards `[len(encodings)]`.
        """
        return self.model.score_encodings(
            list(encodings), batch_size, fwd_hooks=list(self.fwd_hooks)
        )

    def run_chunk(self, encs: list[EncodedConversation], keep_reps: bool):
        """Rewards, lens, attribution and (optionally) residual summaries of one chunk.

        Args:
            encs: the chunk's encoded conversations.
            keep_reps: capture the residual representations.

        Returns:
            `(rewards, lens values, lens labels, attribution values, attribution labels,
            representations)`.
        """
        model = self.model
        ids, attention, resp = model.batch(encs)
        predicting = predicting_mask(resp)
        weights = (predicting / predicting.sum(1, keepdim=True).clamp_min(1)).to(ids.device)

        def mean_over_response(act):
            return (act * weights[..., None].to(act.dtype)).sum(1)

        capture = _Capture(lens_sites(model.policy, "layer"), mean_over_response)
        hooks = [*self.fwd_hooks, *(capture.hooks() if keep_reps else [])]
        lens = implicit_lens(model, ids, resp, attention, fwd_hooks=hooks)
        attr = implicit_attribution(model, ids, resp, attention, fwd_hooks=list(self.fwd_hooks))
        return lens.rewards, lens.values, lens.labels, attr.values, attr.labels, capture.store

    @property
    def backbone(self) -> tuple:
        """The backbone's signature (see `backbone_signature`)."""
        return backbone_signature(self.model.policy.cfg)


def as_source(obj: Any, name: str | None = None):
    """Wrap a model as a source (sources pass through; `name` renames).

    Args:
        obj: a model or a source.
        name: the source's name.

    Returns:
        The source.

    Raises:
        ArgumentTypeError: `obj` is neither a reward model nor a source.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.crossmodel import as_source
        >>> from reward_lens_tl.implicit import ImplicitRewardModel
        >>> from reward_lens_tl.zoo import zoo_path
        >>> scalar = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> irm = ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))
        >>> [(type(s).__name__, s.name) for s in (as_source(scalar), as_source(irm, "dpo"))]
        [('ExplicitReward', 'explicit'), ('ImplicitReward', 'dpo')]
        >>> source = as_source(scalar, "rm")
        >>> as_source(source) is source  # sources pass through
        True
    """
    if isinstance(obj, (ExplicitReward, ImplicitReward)):
        src = obj
    elif isinstance(obj, ImplicitRewardModel):
        src = ImplicitReward(obj)
    elif hasattr(obj, "objective_names") and hasattr(obj, "rewards"):
        src = ExplicitReward(obj)
    else:
        raise ArgumentTypeError(
            f"cannot compare a {type(obj).__name__}: pass a HookedRewardModel, an "
            "ImplicitRewardModel, or wrap one in ExplicitReward / ImplicitReward"
        )
    if name is not None:
        src.name = name
    return src


def is_text_pair(pair: Any) -> bool:
    """Whether each model encodes `pair` itself (an object with prompt/chosen/rejected text).

    The alternative is receiving token ids (encoded tuples, zoo examples and contrast pairs).

    Args:
        pair: a preference pair, in any form.

    Returns:
        Whether it is text.
    """
    if isinstance(pair, tuple) or (hasattr(pair, "edited") and hasattr(pair, "base")):
        return False
    return all(hasattr(pair, a) for a in ("prompt", "chosen", "rejected"))


def check_shared_tokenizer(sources: Sequence, pairs: Sequence) -> None:
    """Refuse pre-encoded pairs for sources whose vocabularies differ.

    Text pairs are always fine, since each model encodes them with its own tokenizer and
    template.

    Args:
        sources: the sources to compare.
        pairs: the pairs they will run on.

    Raises:
        PreEncodedPairsError: pairs are token ids and the vocabularies differ (naming the
            models).
    """
    encoded = [i for i, p in enumerate(pairs) if not is_text_pair(p)]
    if not encoded or len(sources) < 2:
        return
    keys = {s.name: _vocabulary_key(s) for s in sources}
    if any(vocab is None for _, vocab in keys.values()):  # no tokenizer: sizes only
        keys = {name: (size, None) for name, (size, _) in keys.items()}
    if len(set(keys.values())) > 1:
        sizes = {name: key[0] for name, key in keys.items()}
        raise PreEncodedPairsError(
            f"pairs {encoded[:5]} are token ids, but the models' tokenizers differ (vocabulary "
            f"sizes {sizes}): the same ids are different words for each model. Pass the pairs "
            "as text, objects with prompt/chosen/rejected (e.g. reward_lens_tl.data pair sets), "
            "so that each model encodes them with its own tokenizer"
        )


def _vocabulary_key(source) -> tuple:
    """`(d_vocab, vocabulary)` of a source's model.

    The vocabulary is `None` for a model without tokenizer (then only the size can be
    compared).
    """
    model = source.model
    cfg = model.cfg if hasattr(model, "cfg") else model.policy.cfg
    tokenizer = getattr(model, "tokenizer", None)
    vocab = None
    if tokenizer is not None:
        vocab = tuple(sorted(tokenizer.get_vocab().items()))
    return (cfg.d_vocab, vocab)


def run_on_pairs(
    source, pairs: Sequence, batch_size: int = 16, max_rep_pairs: int = 256
) -> SourceRun:
    """Run `source` once over `pairs`, streamed.

    Each chunk is encoded, run and reduced to per-pair numbers written into arrays allocated
    once, so memory is bounded by `batch_size` (plus the representations of at most
    `max_rep_pairs` pairs kept for CKA), not by the number of pairs.

    Args:
        source: the source to run.
        pairs: the preference pairs.
        batch_size: pairs per chunk.
        max_rep_pairs: how many pairs keep residual representations.

    Returns:
        The source's run.

    Raises:
        EmptyInputError: there are no pairs.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.zoo import load_task, zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> pairs = load_task().task.contrast_pairs("harmful", 4, seed=0)  # edited plays chosen
        >>> run = run_on_pairs(ExplicitReward(model), pairs)
        >>> tuple(run.lens_margins.shape) == (len(run.lens_labels), 4), bool(
        ...     (run.margins < 0).all())
        (True, True)
    """
    pairs = list(pairs)
    if not pairs:
        raise EmptyInputError("no pairs given; a comparison needs at least one pair")
    n_total, n_reps = len(pairs), min(max_rep_pairs, len(pairs))
    out: dict[str, Tensor] = {}
    reps: dict[str, Tensor] = {}
    with torch.no_grad():
        for start in range(0, n_total, batch_size):
            chunk = [source.encode_pair(p) for p in pairs[start : start + batch_size]]
            encs, n = [c for c, _ in chunk] + [r for _, r in chunk], len(chunk)
            keep = max(0, min(n, n_reps - start))
            rewards, lens, lens_labels, attr, attr_labels, store = source.run_chunk(encs, keep > 0)
            if not out:
                out = {
                    "c": torch.empty(n_total),
                    "r": torch.empty(n_total),
                    "lens": torch.empty(lens.shape[0], n_total),
                    "attr": torch.empty(attr.shape[0], n_total),
                }
            rows = slice(start, start + n)
            out["c"][rows], out["r"][rows] = rewards[:n], rewards[n:]
            out["lens"][:, rows] = lens[:, :n] - lens[:, n:]
            out["attr"][:, rows] = attr[:, :n] - attr[:, n:]
            for label, act in store.items():
                if label not in reps:
                    reps[label] = torch.empty(2 * n_reps, act.shape[-1])
                reps[label][start : start + keep] = act[:keep]
                reps[label][n_reps + start : n_reps + start + keep] = act[n : n + keep]
    return SourceRun(
        name=source.name,
        chosen=out["c"],
        rejected=out["r"],
        lens_labels=tuple(lens_labels),
        lens_margins=out["lens"],
        attribution_labels=tuple(attr_labels),
        attribution_margins=out["attr"],
        representations=reps,
        backbone=(*source.backbone, tuple(attr_labels)),
    )
