"""Generative judges and process reward models on TransformerLens 4's bridge.

`BridgeJudge` and `BridgePRM` are `HookedJudge` and `HookedPRM` (TransformerLens 3.9) on the
TransformerBridge backend: the same options (`kind`, `verdict`, `template`, `step_tag`,
`labels`, ...), the same text side (`reward_lens_tl.judges.judge_text`,
`reward_lens_tl.judges.prm_steps`: templates, verdict and step tags, one forward for every step)
and the same scores from the head outputs (`reward_lens_tl.judges.verdict_score`). The bridge's
unembed is the judge's head (`verdict_boot`): the verdict difference, a Gemma-2 judge's two
logits (capped by the score), a Likert judge's grade logits, a PRM's label difference, value head
or classifier hidden units. So the read-out analyses (`reward_lens_tl.lens`,
`reward_lens_tl.attribution`), `reward_lens_tl.judges`' own (`linearised_attribution`,
`position_bias`, `judge_pairs`, `first_error_analysis`) and activation patching run on them with
TransformerLens 3.9's numbers (tests/tl4/test_judges_prm.py).

As on `HookedRewardModel`, a padded batch given without a mask gets one from the pad id
(`infer_attention_mask`): `judge.score` pads its items after their first token.

Examples:
    >>> from reward_lens_tl.bridge import BridgeJudge
    >>> from reward_lens_tl.zoo import zoo_path
    >>> from reward_lens_tl.zoo.judge import JUDGE_POINTWISE_TEMPLATE
    >>> judge = BridgeJudge.boot(zoo_path("judge"), template=JUDGE_POINTWISE_TEMPLATE)
    >>> [round(float(s), 3) for s in judge.score(["how bake bread"] * 2, ["oven flour", "rain"])]
    [3.007, -3.038]
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Self

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from ..errors import BridgeUnsupportedError, RewardLensError
from ..judges.head_spec import (
    DEFAULT_VERDICT,
    HeadChoice,
    check_judge_kind,
    check_prm_kind,
    hidden_names,
    judge_choice,
    prm_choice,
    resolve_source,
)
from ..judges.judge_text import JudgeText
from ..judges.prm_steps import PRMSteps
from ..judges.templates import PRM_TEMPLATE
from ..judges.verdict_score import VerdictScore
from ..padding import hf_last_non_pad, hf_pad, reading_position_known
from .reward_model import BridgeRewardModel
from .verdict_boot import boot_verdict_bridge, load_verdict_model, verdict_stand_in
from .windows import sliding_window

__all__ = ["BridgeJudge", "BridgePRM"]

#: `reward_lens_tl.hub.resolve_checkpoint`'s options, accepted by `boot`.
HUB_OPTIONS = ("revision", "cache_dir", "token", "local_files_only")


class _BridgeVerdict(VerdictScore, BridgeRewardModel):
    """`BridgeRewardModel` with a judge's or PRM's head: its names, reading rule and score."""

    #: The head outputs' names (the verdict tokens, a classifier's hidden units); set at boot.
    head_names: tuple[str, ...] = ()
    #: A classifier PRM's last layer (after the ReLU), applied by the score; `None` otherwise.
    head_out: Any = None

    @classmethod
    def _boot(
        cls, source: Any, tokenizer: Any, choice: HeadChoice, options: dict[str, Any]
    ) -> Self:
        """The judge or PRM of `choice` on `source` (an HF model, or a resolved directory)."""
        if isinstance(source, nn.Module):
            name = str(getattr(source, "name_or_path", "") or type(source).__name__)
            hf_model, own = source, False
        else:
            from ..checkpoint import load_config

            hf_model, name, own = load_verdict_model(source, load_config(source)), str(source), True
        stand_in, head_out = verdict_stand_in(hf_model, choice.spec, copy_backbone=not own)
        bridge = boot_verdict_bridge(stand_in, tokenizer, name, **options)
        model = cls(bridge)
        if head_out is not None:
            model.head_out = head_out.to(model.bridge.cfg.device)
        wide = choice.spec.source == "classifier"
        model.head_names = hidden_names(model.n_objectives) if wide else choice.spec.names
        return choice.apply(model)

    @property
    def objective_names(self) -> tuple[str, ...]:
        """The head outputs' names (as `HookedJudge`/`HookedPRM` name them)."""
        return self.head_names

    @property
    def pad_token_id(self) -> int | None:
        """The pad id: the config's, else the tokenizer's (as `HookedJudge`'s)."""
        pad = super().pad_token_id
        return pad if pad is not None else getattr(self.tokenizer, "pad_token_id", None)

    def pad_rows(
        self, rows: list[list[int]], padding_side: str = "left"
    ) -> tuple[Int[Tensor, "batch pos"], Int[Tensor, "batch pos"]]:
        """Pad id rows as `HookedJudge` does, but HF's way on a sliding-window model.

        HF counts an attention window over the columns, pads included, so this library's layout
        (pads after each row's first token) would move a window over them (`BridgeRewardModel`
        refuses it); left-padded HF's way (every pad first) the rows read exactly as alone.

        Args:
            rows: The token id rows.
            padding_side: Which side to pad (`"left"` by default).

        Returns:
            `(input_ids, attention_mask)`, both `[batch, pos]`.
        """
        window = sliding_window(self.bridge)
        if padding_side != "left" or window is None or self.pad_token_id is None:
            return super().pad_rows(rows, padding_side)
        return hf_pad(rows, self.pad_token_id, "left")

    def _require_tokenizer(self) -> Any:
        if self.tokenizer is None:
            raise RewardLensError("this judge has no tokenizer: boot it with tokenizer=")
        return self.tokenizer

    def pool_positions(
        self,
        tokens: Int[Tensor, "batch pos"],
        attention_mask: Tensor | None = None,
        positions: Any = None,
    ) -> Int[Tensor, " batch"]:
        """Where each row is read: its last token that is not the pad id (or `positions`).

        Without a pad id the rows are unpadded: the last column (`HookedJudge`'s rule).

        Args:
            tokens: The token ids, `[batch, pos]`.
            attention_mask: Unused (the rule reads ids only).
            positions: One position per row, or `None`.

        Returns:
            One position per row.
        """
        if positions is not None:
            return super().pool_positions(tokens, attention_mask, positions)
        if self.pad_token_id is None:
            return torch.full((tokens.shape[0],), tokens.shape[1] - 1, device=tokens.device)
        return hf_last_non_pad(tokens, self.pad_token_id)

    def forward(
        self,
        input: Tensor,
        *,
        return_type: str | None = "logits",
        attention_mask: Tensor | None = None,
        **kwargs: Any,
    ) -> Tensor:
        """`BridgeRewardModel.forward` with the judge's score.

        `"reward"`: the score (`score_from` of the pooled head outputs); `"objectives"`: the head
        outputs at every position; otherwise the score at every position `[batch, pos, 1]` for
        a non-linear score (as `HookedJudge`), the head outputs for a linear one.

        Args:
            input: Token ids `[batch, pos]`, or with `start_at_layer` a block's input residual.
            return_type: As above.
            attention_mask: `[batch, pos]` (`None`: inferred from the pad ids).
            **kwargs: `BridgeRewardModel.forward`'s (`start_at_layer`, `pool_positions`, ...).

        Returns:
            As `return_type` says.
        """
        scored = self.scored_head and return_type != "objectives"
        out = super().forward(
            input, return_type=return_type, attention_mask=attention_mask, **kwargs
        )
        return self._scored(out, return_type, kwargs) if scored else out

    def _scored(self, out: Tensor, return_type: str | None, kwargs: dict) -> Tensor:
        if return_type == "reward":
            return self.score_from(out if out.dim() > 1 else out[:, None])
        if kwargs.get("stop_at_layer") is not None:
            return out
        return self.score_from(out)[..., None]

    def run_with_cache(
        self,
        input_ids: Int[Tensor, "batch pos"],
        *,
        attention_mask: Tensor | None = None,
        return_type: str | None = "logits",
        names_filter: Any = None,
        **kwargs: Any,
    ) -> tuple[Tensor, Any]:
        """`BridgeRewardModel.run_with_cache` with the judge's score (as `forward`).

        `hook_reward` holds the pooled head outputs, as on `HookedJudge`.

        Args:
            input_ids: Token ids `[batch, pos]`.
            attention_mask: `[batch, pos]` (`None`: inferred from the pad id).
            return_type: As `forward`'s.
            names_filter: The hook names to cache.
            **kwargs: Passed to the bridge.

        Returns:
            `(output, cache)`.
        """
        # the pooled reward is read where the model reads it: no `[:, -1]` to warn about (as
        # `HookedRewardModel`, which warns for per-position outputs only)
        known = reading_position_known() if return_type == "reward" else contextlib.nullcontext()
        with known:
            out, cache = super().run_with_cache(
                input_ids,
                attention_mask=attention_mask,
                return_type=return_type,
                names_filter=names_filter,
                **kwargs,
            )
        if not self.scored_head or return_type == "objectives":
            return out, cache
        if return_type == "reward":
            return self.score_from(cache["hook_reward"]), cache
        return self._scored(out, return_type, kwargs), cache

    def pooled_rewards(
        self, input_ids: Int[Tensor, "batch pos"], attention_mask: Tensor | None = None
    ) -> Float[Tensor, " batch"]:
        """The reward every analysis reads: the score where the model is read (a PRM: one step).

        Args:
            input_ids: Token ids `[batch, pos]`.
            attention_mask: `[batch, pos]`, or `None`.

        Returns:
            The rewards, `[batch]`.
        """
        return BridgeRewardModel.rewards(self, input_ids, attention_mask)


def _boot_options(hub: dict[str, Any], dtype, device, process_weights) -> dict[str, Any]:
    """The bridge's boot options; `from_pretrained`'s conversion options refused by name."""
    unsupported = sorted(set(hub) - set(HUB_OPTIONS))
    if unsupported:
        raise BridgeUnsupportedError(
            f"boot does not take {', '.join(unsupported)}: on the bridge the weights are "
            "processed as HookedJudge's and HookedPRM's defaults (process_weights=False keeps the "
            "raw HF weights), the checkpoint's context is kept and nothing is verified at load. "
            "Use the default backend (HookedJudge / HookedPRM, TransformerLens 3.9) for other "
            f"settings; boot's own options are dtype, device, process_weights and {HUB_OPTIONS}"
        )
    return dict(dtype=dtype, device=device, process_weights=process_weights)


class BridgeJudge(JudgeText, _BridgeVerdict):
    """A generative judge on the bridge: `HookedJudge`'s surface on TransformerLens 4.

    Boot one with `boot` (`HookedJudge.from_pretrained`'s options).

    Args:
        bridge: A bridge from `verdict_boot.boot_verdict_bridge` (`boot` builds it).

    Examples:
        >>> from reward_lens_tl.testing import tiny_causal_lm
        >>> hf, tok = tiny_causal_lm("llama")
        >>> judge = BridgeJudge.boot(hf, tok, kind="likert", verdict=("w10", "w11", "w12"),
        ...                          template="{prompt} w8 {response} w9")
        >>> ids = judge.item_ids("w12 w13", "w20")
        >>> logits = hf(ids).logits[0, -1, [10, 11, 12]]             # HF's causal LM
        >>> expected = (torch.softmax(logits, -1) * torch.tensor([1.0, 2.0, 3.0])).sum()
        >>> bool(torch.allclose(judge.score("w12 w13", "w20"), expected, atol=1e-5))
        True
        >>> judge.objective_names, judge.scored_head
        (('w10', 'w11', 'w12'), True)
    """

    @classmethod
    def boot(
        cls,
        path_or_model: nn.Module | str | Path,
        tokenizer: Any = None,
        *,
        kind: str = "pointwise",
        verdict: Any = DEFAULT_VERDICT,
        template: str | None = None,
        chat: bool = False,
        grades: Any = None,
        dtype: torch.dtype = torch.float32,
        device: str | torch.device | None = None,
        process_weights: bool = True,
        **hub: Any,
    ) -> Self:
        """Boot a judge from a directory, hub id or in-memory HF causal LM.

        Read as untrusted input (`reward_lens_tl.checkpoint`); an in-memory model is copied.

        Args:
            path_or_model: A checkpoint directory, a hub id or an HF causal LM.
            tokenizer: The tokenizer (required for an in-memory model; default the checkpoint's).
            kind: `"pointwise"`, `"pairwise"` or `"likert"` (`HookedJudge.from_pretrained`).
            verdict: The verdict tokens (left at `("Yes", "No")`: the kind's default).
            template: The template (default the kind's built-in).
            chat: Put the rendered text in a user turn of the tokenizer's chat template.
            grades: A Likert judge's grade per verdict token.
            dtype: The parameters' dtype.
            device: Where the bridge runs (`None`: the CPU).
            process_weights: Process the weights as `HookedJudge`'s are (`verdict_boot`).
            **hub: `revision`, `cache_dir`, `token`, `local_files_only` for a hub id.

        Returns:
            The judge.

        Raises:
            InvalidArgumentError: An unknown kind (and `HookedJudge.from_pretrained`'s
                refusals of its options).
            BridgeUnsupportedError: A conversion option of `from_pretrained` (`fold_ln`,
                `n_ctx`, `verify`, ...).
            UnsupportedArchitectureError: An architecture the bridge backend does not boot.
        """
        check_judge_kind(kind)
        options = _boot_options(hub, dtype, device, process_weights)
        source, tok, config = resolve_source(path_or_model, tokenizer, hub)
        choice = judge_choice(kind, verdict, template, chat, grades, tok, config)
        return cls._boot(source, tok, choice, options)

    def score(
        self,
        prompt: Any,
        response: Any,
        response_b: Any = None,
        **options: Any,
    ) -> Tensor:
        """The judge's reward for one item (a 0-d tensor) or a batch (`[batch]`).

        `HookedJudge.score` (`judge_text.JudgeText.score`).

        Args:
            prompt: A prompt or a list of prompts.
            response: A response or a list of responses (pairwise: answer A).
            response_b: Answer B of a pairwise judge, or a list of them.
            **options: `max_length`, `truncation`, `use_chat_template` (refused as there).

        Returns:
            The reward.
        """
        return JudgeText.score(self, prompt, response, response_b, **options)


class BridgePRM(PRMSteps, _BridgeVerdict):
    """A process reward model on the bridge: `HookedPRM`'s surface on TransformerLens 4.

    Boot one with `boot` (`HookedPRM.from_pretrained`'s options). `rewards(ids)` is every step's
    score `[batch, n_steps]`; as a reward model its reward is the last step's margin, and
    `prm.step(k)` reads step `k`.

    Args:
        bridge: A bridge from `verdict_boot.boot_verdict_bridge` (`boot` builds it).

    Examples:
        >>> from reward_lens_tl.zoo import zoo_path
        >>> prm = BridgePRM.boot(zoo_path("prm"))
        >>> [round(x, 3) for x in prm.step_rewards("what is 15 + 0 - 1",
        ...                                          ["15 + 0 = 15", "15 - 1 = 12"]).tolist()]
        [0.943, 0.104]
    """

    @classmethod
    def boot(
        cls,
        path_or_model: nn.Module | str | Path,
        tokenizer: Any = None,
        *,
        kind: str = "token",
        step_tag: str | int | None = None,
        labels: Any = ("+", "-"),
        template: str = PRM_TEMPLATE,
        chat: bool = False,
        system: str | None = None,
        step_format: str | None = None,
        step_separator: str = " ",
        transform: str | None = "sigmoid",
        dtype: torch.dtype = torch.float32,
        device: str | torch.device | None = None,
        process_weights: bool = True,
        **hub: Any,
    ) -> Self:
        """Boot a PRM from a directory, hub id or in-memory HF model.

        Args:
            path_or_model: A checkpoint directory, a hub id or an HF model (a causal LM, a
                `*ForTokenClassification`, or Qwen2.5-Math-PRM's layout).
            tokenizer: The tokenizer (required for an in-memory model; default the checkpoint's).
            kind: `"token"`, `"value"` or `"classifier"` (`HookedPRM.from_pretrained`).
            step_tag: The token that ends each step (default by kind).
            labels: The two label tokens of a `"token"` PRM.
            template: The solution's template, with `{prompt}` and `{steps}`.
            chat: Write the solution with the tokenizer's chat template.
            system: The system turn of a chat-template solution.
            step_format: How each step is written, with `{step}` and `{tag}` (default by kind).
            step_separator: What joins the formatted steps.
            transform: `"sigmoid"` or `None` (the raw margin).
            dtype: The parameters' dtype.
            device: Where the bridge runs (`None`: the CPU).
            process_weights: Process the weights as `HookedPRM`'s are (`verdict_boot`).
            **hub: `revision`, `cache_dir`, `token`, `local_files_only` for a hub id.

        Returns:
            The PRM.

        Raises:
            InvalidArgumentError: An unknown kind or transform (and `HookedPRM.from_pretrained`'s
                refusals of its options).
            BridgeUnsupportedError: A conversion option of `from_pretrained` (`fold_ln`,
                `n_ctx`, `verify`, ...).
            UnsupportedArchitectureError: An architecture the bridge backend does not boot.
        """
        check_prm_kind(kind)
        options = _boot_options(hub, dtype, device, process_weights)
        source, tok, config = resolve_source(path_or_model, tokenizer, hub)
        choice = prm_choice(
            kind,
            step_tag=step_tag,
            labels=labels,
            template=template,
            chat=chat,
            system=system,
            step_format=step_format,
            step_separator=step_separator,
            transform=transform,
            tokenizer=tok,
            config=config,
        )
        return cls._boot(source, tok, choice, options)

    def score(self, prompt: Any, response: str, **options: Any) -> Tensor:
        """The score of `response`'s last step as a solution to `prompt` (`HookedPRM.score`).

        Args:
            prompt: The prompt (a string).
            response: The response, with its step tags.
            **options: `max_length`, `truncation`, `use_chat_template` (refused as there).

        Returns:
            The last step's score (a 0-d tensor).
        """
        return PRMSteps.score(self, prompt, response, **options)
