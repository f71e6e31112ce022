"""How a process reward model reads a solution: its steps, their tags, a score per tag.

Internal but for `StepEncoding`: `PRMSteps` is a mixin of `reward_lens_tl.judges.HookedPRM`
(TransformerLens 3.9) and `reward_lens_tl.bridge.BridgePRM` (TransformerLens 4). It uses only the
backend protocol (`check_tokens`, `pool_positions`, a forward with `return_type="objectives"`,
`cfg`, the tokenizer), so a PRM writes, tags and scores steps the same way on both: every step's
score comes from one forward, read at the step tags.

Examples:
    >>> from reward_lens_tl.judges import HookedPRM
    >>> from reward_lens_tl.testing import tiny_causal_lm
    >>> hf, tok = tiny_causal_lm("llama")
    >>> prm = HookedPRM.from_pretrained(hf, tokenizer=tok, step_tag="w40", labels=("w41", "w42"))
    >>> isinstance(prm, PRMSteps), prm.steps_text(["w20", "w21 w22"])
    (True, 'w20 w40 w21 w22 w40')
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self, cast

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..errors import (
    ArgumentTypeError,
    EmptyInputError,
    InvalidArgumentError,
    StepSeparatorError,
)
from ..inputs import EncodedConversation, Prompt, Truncation
from .templates import PRM_TEMPLATE, render
from .verdict_score import VerdictScore, as_list, refuse_text_options, token_span

__all__ = ["StepEncoding"]


@dataclass(frozen=True)
class StepEncoding:
    """Token ids of PRM solutions with where each step is read.

    `ids`/`attention_mask` `[batch, pos]` (left padded; `ids` as `EncodedConversation.ids`),
    `step_positions` `[batch, n_steps]` (`-1` past a row's last step), `n_steps` per row.

    Args:
        ids: The token ids, `[batch, pos]`, left padded.
        attention_mask: The attention mask, `[batch, pos]`.
        step_positions: Where each step is read, `[batch, n_steps]` (`-1` past a row's last step).
        n_steps: The number of steps of each row.
        tag_offset: Step tags before each row's first step.

    Examples:
        >>> from reward_lens_tl.judges import HookedPRM
        >>> from reward_lens_tl.zoo import zoo_path
        >>> prm = HookedPRM.from_pretrained(zoo_path("prm"))
        >>> enc = prm.encode_steps(["what is 3 + 4", "what is 5 - 1 + 2"],
        ...                        [["3 + 4 = 7"], ["5 - 1 = 4", "4 + 2 = 6"]])
        >>> enc.ids.shape, enc.n_steps, enc.tag_offset
        (torch.Size([2, 19]), (1, 2), (0, 0))
        >>> enc.step_positions.tolist()  # left padded, so both rows end at position 18
        [[18, -1], [12, 18]]
        >>> [[round(x, 2) for x in row] for row in prm.rewards(enc).tolist()]
        [[0.93, nan], [0.92, 0.95]]
    """

    ids: Int[Tensor, "batch pos"]
    attention_mask: Int[Tensor, "batch pos"]
    step_positions: Int[Tensor, "batch n_steps"]
    n_steps: tuple[int, ...]
    #: Step tags before each row's first step (the prompt or template holds the tag); a step
    #: view of row `b`'s step `k` is `prm.step(tag_offset[b] + k)` (or a negative index).
    tag_offset: tuple[int, ...] = ()


class PRMSteps(VerdictScore):
    """A PRM's step side: write, tag, encode and score steps (a mixin; module docstring).

    `rewards(ids)` gives the step scores `[batch, n_steps]`; as a reward model (what the
    package's analyses read) its reward is the **last** step's margin, and `prm.step(k)` is
    the same model read at step `k`.

    Attributes:
        kind: `"token"`, `"value"` or `"classifier"`.
        template: The solution's template, with `{prompt}` and `{steps}`.
        step_format: How each step is written, with `{step}` and `{tag}`.
        step_separator: What joins the formatted steps.
        step_tag: The token that ends each step.
        step_tag_id: The step tag's id.
        labels: The two label tokens of a `"token"` PRM.
        reading_step: Which step the reward-model face reads (`-1`: the last one).
        transform: `"sigmoid"` or `None` (the raw margin).
        chat: Whether solutions are written with the tokenizer's chat template.
        system: The system turn of a chat-template solution.
    """

    if TYPE_CHECKING:  # provided by the backend's reward-model class

        def check_tokens(self, input_ids: Any, attention_mask: Any = None) -> Tensor: ...

        def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

    kind: str = "token"
    template: str = PRM_TEMPLATE
    step_format: str = "{step} {tag}"
    step_separator: str = " "
    step_tag: str | int = "ки"
    step_tag_id: int | None = None
    labels: tuple[str | int, ...] = ()
    #: Which step the reward-model face reads (`-1`: the last one).
    reading_step: int = -1
    #: `"sigmoid"` (the default for all kinds; a two-label softmax is a sigmoid of the
    #: margin) or `None` (the raw value-head output).
    transform: str | None = "sigmoid"
    chat: bool = False
    system: str | None = None

    # -- where steps are read ----------------------------------------------------------------
    def step_positions(
        self, input_ids: Int[Tensor, "batch pos"], attention_mask: Tensor | None = None
    ) -> Int[Tensor, "batch n_steps"]:
        """Positions of the step tags in each row, `-1` past a row's last step.

        A row without a tag is refused.

        Args:
            input_ids: The token ids, `[batch, pos]`.
            attention_mask: The attention mask.

        Returns:
            The step positions, `[batch, n_steps]`.

        Raises:
            InvalidArgumentError: When the PRM has no step tag id.
            StepSeparatorError: When a row holds no step tag.
        """
        tokens = self.check_tokens(input_ids, attention_mask)
        if self.step_tag_id is None:
            raise InvalidArgumentError("this PRM has no step tag id (load it with from_pretrained)")
        is_tag = tokens == self.step_tag_id
        if attention_mask is not None:
            is_tag &= attention_mask.to(tokens.device).bool()
        counts = is_tag.sum(1)
        if bool((counts == 0).any()):
            rows = (counts == 0).nonzero().flatten().tolist()
            raise StepSeparatorError(
                f"rows {rows} hold no step tag {self.step_tag!r} (id {self.step_tag_id}); every "
                "step must end with it (prm.encode_steps writes it)"
            )
        n = int(counts.max())
        out = torch.full((tokens.shape[0], n), -1, dtype=torch.long, device=tokens.device)
        for row in range(tokens.shape[0]):
            found = is_tag[row].nonzero().flatten()
            out[row, : found.numel()] = found
        return out

    def pool_positions(self, tokens, attention_mask=None, positions=None):
        """The positions the reward is read at: the step tags of the step this view reads.

        Args:
            tokens: The token ids, `[batch, pos]`.
            attention_mask: The attention mask.
            positions: Explicit positions (default the read step's tags).

        Returns:
            The positions read, one per row.

        Raises:
            StepSeparatorError: When the read step does not exist in a row.
        """
        if positions is None and self.step_tag_id is not None:
            steps = self.step_positions(tokens, attention_mask)
            counts = (steps >= 0).sum(1)
            k = self.reading_step
            idx = counts + k if k < 0 else torch.full_like(counts, k)
            bad = (idx < 0) | (idx >= counts)
            if bool(bad.any()):
                raise StepSeparatorError(
                    f"step {k} does not exist in rows {bad.nonzero().flatten().tolist()} (they "
                    f"hold {counts[bad].tolist()} step tags)"
                )
            positions = steps[torch.arange(steps.shape[0], device=steps.device), idx]
        return cast(Any, super()).pool_positions(tokens, attention_mask, positions)

    def check_reading_position(self, tokens, attention_mask=None) -> None:
        """Warn when a step view is read before the last step.

        `[:, -1]` is the last step's tag, not this step's, so TL idioms on the last position warn
        with what to read instead.

        Args:
            tokens: The token ids, `[batch, pos]`.
            attention_mask: The attention mask.
        """
        from ..padding import ReadingPositionWarning, _user_stacklevel, warnings_silenced

        last = self.reading_step < 0
        if last or self.step_tag_id is None or warnings_silenced():
            return cast(Any, super()).check_reading_position(tokens, attention_mask)
        warnings.warn(
            f"this PRM is read at step {self.reading_step}, not at position -1 (the last step's "
            "tag): read cache.reward_positions, pos_slice='reward', prm.step_positions(ids)"
            f"[:, {self.reading_step}] or prm.step_margins(ids)",
            ReadingPositionWarning,
            stacklevel=_user_stacklevel(),
        )

    def step(self, k: int) -> Self:
        """This PRM read at step `k` (negative `k` counts from the last: `-1` is the last step).

        The same modules and hooks, only the reading position differs, so any analysis of the
        package runs on one step. Steps are counted over the row's step tags: when the prompt holds
        the tag too, add `StepEncoding.tag_offset` (or count from the end).

        Args:
            k: The step to read.

        Returns:
            A view of this PRM read at step `k`.

        Raises:
            ArgumentTypeError: When `k` is not an int.
        """
        if not isinstance(k, int) or isinstance(k, bool):
            raise ArgumentTypeError(f"step must be an int, got {k!r}")
        view = copy.copy(self)
        view.reading_step = k
        return view

    def step_margins(
        self,
        input_ids: Int[Tensor, "batch pos"],
        attention_mask: Tensor | None = None,
        step_positions: Tensor | None = None,
    ) -> Float[Tensor, "batch n_steps"]:
        """Each step's margin (the analyses' reward, before `transform`), from one forward.

        `nan` past a row's last step.

        Args:
            input_ids: The token ids, `[batch, pos]`.
            attention_mask: The attention mask.
            step_positions: Where each step is read (default the step tags).

        Returns:
            The margins, `[batch, n_steps]`.
        """
        steps = (
            self.step_positions(input_ids, attention_mask)
            if step_positions is None
            else step_positions
        )
        from ..padding import reading_position_known

        with torch.no_grad(), reading_position_known():  # each step is read at its own tag
            per_pos = self(input_ids, return_type="objectives", attention_mask=attention_mask)
            rows = torch.arange(steps.shape[0], device=steps.device)[:, None]
            pooled = per_pos[rows, steps.clamp(min=0)]  # [batch, n_steps, n_out]
            margins = self.score_from(pooled).float()
        return margins.masked_fill(steps < 0, float("nan"))

    def rewards(
        self,
        input_ids: Int[Tensor, "batch pos"] | StepEncoding,
        attention_mask: Int[Tensor, "batch pos"] | None = None,
        *,
        pool_positions: Int[Tensor, " batch"] | None = None,
        grad: bool = False,
        step_positions: Int[Tensor, "batch n_steps"] | None = None,
    ) -> Float[Tensor, "batch n_steps"]:
        """Step scores `[batch, n_steps]` at the step tags (or `step_positions`), from one forward.

        `nan` past a row's last step. The reward every analysis reads (one step's):
        `pooled_rewards`.

        Args:
            input_ids: The token ids, or a `StepEncoding` (its mask and step positions are used).
            attention_mask: The attention mask.
            pool_positions: Read row `b` at `pool_positions[b]` only (one step per row: the
                scores are `[batch, 1]`).
            grad: Refused: PRM step scores are computed without gradients.
            step_positions: Where each step is read (default the step tags).

        Returns:
            The step scores, `[batch, n_steps]`.

        Raises:
            InvalidArgumentError: When `grad=True`, or both `pool_positions` and `step_positions`
                are given.
        """
        if isinstance(input_ids, StepEncoding):
            enc = input_ids
            input_ids, attention_mask = enc.ids, enc.attention_mask
            step_positions = enc.step_positions if step_positions is None else step_positions
        if grad:
            raise InvalidArgumentError(
                "PRM step scores are computed without gradients; use step(k)"
            )
        if pool_positions is not None:
            if step_positions is not None:
                raise InvalidArgumentError("pass pool_positions or step_positions, not both")
            step_positions = pool_positions[:, None]
        return self.transformed(self.step_margins(input_ids, attention_mask, step_positions))

    def transformed(self, margins: Tensor) -> Tensor:
        """Step scores from step margins (`transform`).

        Args:
            margins: The step margins.

        Returns:
            The step scores.
        """
        return torch.sigmoid(margins) if self.transform == "sigmoid" else margins

    # -- text ------------------------------------------------------------------------------
    def steps_text(self, steps: Sequence[str]) -> str:
        """The steps as the PRM reads them.

        Each is formatted by `step_format` with its tag, joined by `step_separator` (a step that
        holds the tag is refused).

        Args:
            steps: The steps.

        Returns:
            The steps' text.

        Raises:
            StepSeparatorError: When `steps` is not a non-empty list or a step holds the tag.
            ArgumentTypeError: When a step is not a string.
            EmptyInputError: When a step is empty or whitespace only.
        """
        if isinstance(steps, str) or not isinstance(steps, Sequence) or not steps:
            raise StepSeparatorError("steps must be a non-empty list of strings (one per step)")
        tag_text = self._tag_text()
        for i, step in enumerate(steps):
            if not isinstance(step, str):
                raise ArgumentTypeError(f"steps[{i}] must be a string, got {type(step).__name__}")
            if not step.strip():
                raise EmptyInputError(
                    f"steps[{i}] is empty{' (whitespace only)' if step else ''}: its tag would "
                    "be scored on the previous steps' text alone. Drop the empty step or merge "
                    "it into its neighbour"
                )
            if tag_text and tag_text.strip() and tag_text in step:
                raise StepSeparatorError(f"steps[{i}] contains the step tag {tag_text!r}: {step!r}")
        return self.step_separator.join(
            self.step_format.format(step=s, tag=tag_text) for s in steps
        )

    def render_steps(self, prompt: str, steps: Sequence[str]) -> str:
        """The PRM's input text: `template` with `{prompt}` and `steps_text`.

        With `chat=True`: the tokenizer's chat template, the steps as the assistant's turn.

        Args:
            prompt: The prompt.
            steps: The steps.

        Returns:
            The rendered solution.
        """
        body = self.steps_text(steps)
        if not self.chat:
            return render(self.template, "prm", prompt=prompt, steps=body)
        system = [{"role": "system", "content": self.system}] if self.system is not None else []
        turns = [{"role": "user", "content": prompt}, {"role": "assistant", "content": body}]
        return self._require_tokenizer().apply_chat_template(system + turns, tokenize=False)

    def token_ids_of(self, text: str) -> list[int]:
        """The ids of a rendered solution (special tokens added unless a chat template wrote them).

        Args:
            text: The rendered solution.

        Returns:
            The token ids.
        """
        return self.tokenize(text, not self.chat)[0]

    def encode_steps(
        self, prompt: str | Sequence[str], steps: Sequence[str] | Sequence[Sequence[str]]
    ) -> StepEncoding:
        """Ids of one solution or a batch, with `.step_positions`.

        `steps` is a list of strings for one solution, or lists of those for a batch. Refused when
        the tags do not give one position per step.

        Args:
            prompt: A prompt or a list of prompts.
            steps: One solution's steps, or a list of solutions.

        Returns:
            The encoded solutions.

        Raises:
            InvalidArgumentError: When the numbers of prompts and solutions differ.
            StepSeparatorError: When the tokenizer merges a step tag with its neighbours.
        """
        prompts, single = as_list(prompt, "prompt")
        solutions = cast(list[Sequence[str]], [steps] if single else list(steps))
        if len(solutions) != len(prompts):
            raise InvalidArgumentError(f"{len(prompts)} prompts for {len(solutions)} solutions")
        rows = [
            self.token_ids_of(self.render_steps(p, s))
            for p, s in zip(prompts, solutions, strict=True)
        ]
        ids, mask = self.pad_rows(rows)
        ids, mask = ids.to(self.cfg.device), mask.to(self.cfg.device)
        tags = self.step_positions(ids, mask)
        counts = (tags >= 0).sum(1).tolist()
        n_steps = [len(sol) for sol in solutions]
        for i, (n, want) in enumerate(zip(counts, n_steps, strict=True)):
            if n < want:
                raise StepSeparatorError(
                    f"solution {i} has {want} steps but its text holds {n} step tags "
                    f"{self.step_tag!r}: the tokenizer merges the tag with its neighbours; "
                    "change step_format (e.g. a space before the tag)"
                )
        # the steps' tags are each row's last ones (the prompt may hold the tag as well)
        positions = torch.full((len(rows), max(n_steps)), -1, dtype=torch.long, device=ids.device)
        for i, (n, want) in enumerate(zip(counts, n_steps, strict=True)):
            positions[i, :want] = tags[i, n - want : n]
        offsets = tuple(int(n - want) for n, want in zip(counts, n_steps, strict=True))
        return StepEncoding(ids, mask, positions, tuple(n_steps), offsets)

    def encode(
        self,
        prompt: Prompt,
        response: str,
        *,
        max_length: int | None = None,
        truncation: Truncation = "error",
        use_chat_template: bool | None = None,
    ) -> EncodedConversation:
        """`(prompt, response)` as a solution, with the response's span marked.

        So pair scoring, probes, sweeps and token views run on a PRM as on a reward model (read at
        the last step's tag). A response written with step tags is those steps (`split_steps`);
        otherwise it is one step. Several steps as a list: `encode_steps`.

        Args:
            prompt: The prompt (a string).
            response: The response.
            max_length: Refused: a solution is never cut.
            truncation: Accepted for the reward-model signature.
            use_chat_template: Refused: whether the PRM writes a chat template is its `chat`.

        Returns:
            The encoded conversation.

        Raises:
            InvalidArgumentError: When `max_length` or `use_chat_template` is given.
            ArgumentTypeError: When the prompt or response is not a string.
        """
        refuse_text_options("a PRM's", max_length, use_chat_template)
        if not isinstance(response, str) or not isinstance(prompt, str):
            raise ArgumentTypeError("a PRM encodes a prompt and a response given as strings")
        steps = self.split_steps(response)
        text = self.render_steps(prompt, steps)
        body = self.steps_text(steps)
        head, _, _ = self.step_format.partition("{step}")
        tail = self.step_format.partition("{step}")[2].format(tag=self._tag_text())
        start = text.rindex(body) + len(head.format(tag=self._tag_text()))
        end = text.rindex(body) + len(body) - len(tail)  # the last tag stays outside
        ids, offsets = self.tokenize(text, not self.chat, offsets=True)
        first, last = token_span(offsets, start, end)
        return EncodedConversation(ids=tuple(ids), response_start=first, response_end=last)

    def score(
        self,
        prompt: Prompt,
        response: str,
        *,
        max_length: int | None = None,
        truncation: Truncation = "error",
        use_chat_template: bool | None = None,
    ) -> Tensor:
        """The score of `response`'s last step (`split_steps`) as a solution to `prompt`.

        A 0-d tensor; every step's: `step_rewards`.

        Args:
            prompt: The prompt (a string).
            response: The response, with its step tags.
            max_length: Refused, as by `encode`.
            truncation: Accepted for the reward-model signature.
            use_chat_template: Refused, as by `encode`.

        Returns:
            The last step's score (a 0-d tensor).
        """
        refuse_text_options("a PRM's", max_length, use_chat_template)
        return self.step_rewards(cast(str, prompt), self.split_steps(response))[-1]

    def split_steps(self, response: str) -> list[str]:
        """The steps of a solution written as text with its step tags (one step when it has none).

        `"3 + 4 = 7 ки 7 + 2 = 9 ки"` → `["3 + 4 = 7", "7 + 2 = 9"]`.

        Args:
            response: The solution's text.

        Returns:
            The steps.
        """
        tag = self._tag_text()
        if not tag.strip() or tag not in response:
            return [response]
        steps = [part.strip() for part in response.split(tag)]
        return [s for s in steps if s] or [response]

    def _tag_text(self) -> str:
        if isinstance(self.step_tag, str):
            return self.step_tag
        return self._require_tokenizer().decode([self.step_tag])

    def body_start(self, prompt: str, steps: Sequence[str]) -> int:
        """Index of the first token of the steps in the ids of one solution.

        The tokens before it are the prompt's and the template's; found from the tokenizer's
        character offsets.

        Args:
            prompt: The prompt.
            steps: The steps.

        Returns:
            The index of the steps' first token.
        """
        text = self.render_steps(prompt, steps)
        _, offsets = self.tokenize(text, not self.chat, offsets=True)
        return token_span(offsets, text.rindex(self.steps_text(steps)), len(text))[0]

    def score_solutions(
        self,
        prompts: Sequence[str],
        solutions: Sequence[Sequence[str]],
        batch_size: int = 16,
    ) -> list[list[float]]:
        """Every step's score of many solutions (`batch_size` per forward), one list per solution.

        What ProcessBench and RewardMATH score files hold
        (`reward_lens_tl.evals.processbench_from_scores`).

        Args:
            prompts: The prompts.
            solutions: The solutions, each a list of steps.
            batch_size: Solutions per forward.

        Returns:
            One list of step scores per solution.

        Raises:
            InvalidArgumentError: When `batch_size` is not a positive int or the numbers of prompts
                and solutions differ.
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidArgumentError(f"batch_size must be a positive int, got {batch_size!r}")
        prompts, solutions = list(prompts), list(solutions)
        if len(prompts) != len(solutions):
            raise InvalidArgumentError(f"{len(prompts)} prompts for {len(solutions)} solutions")
        out: list[list[float]] = []
        for start in range(0, len(prompts), batch_size):
            chunk = slice(start, start + batch_size)
            enc = self.encode_steps(prompts[chunk], [list(s) for s in solutions[chunk]])
            scores = self.rewards(enc)
            out += [row[:n].tolist() for row, n in zip(scores.cpu(), enc.n_steps, strict=True)]
        return out

    def step_rewards(self, prompt: str, steps: Sequence[str]) -> Float[Tensor, " n_steps"]:
        """One score per step of one solution, from one forward.

        Args:
            prompt: The prompt.
            steps: The steps.

        Returns:
            The step scores, `[n_steps]`.
        """
        enc = self.encode_steps(prompt, steps)
        return self.rewards(enc)[0]
