"""TransformerLens idioms on a reward model: right answers or typed errors, never wrong numbers.

A TL notebook calls `model.to_tokens(text)`, `model.generate(...)`, `loss_fn`,
`tokens_to_residual_directions("word")` and `utils.test_prompt`. On a reward model these
either mean something else or nothing. `RewardModelIdioms` (mixed into
`HookedRewardModel`) gives each the reward-model meaning or a
`NotForRewardModelsError` that says what to use instead:

- `to_tokens((prompt, response))` / `to_tokens([(p, r), ...])`: the conversation's ids
  with the chat template (BOS, headers, EOS), left padded; a bare string is refused;
- `to_str_tokens((prompt, response))`: the tokens of that conversation;
- `generate`, `loss_fn`: refused (a reward model has no next-token distribution);
- `tokens_to_residual_directions(i)`: the reward head's column `i` (objective `i`; `0` for
  a scalar head) or an objective's name; vocabulary text is refused.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.zoo import zoo_path
    >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    >>> model.to_tokens(("explain how to bake bread", "the oven")).shape
    torch.Size([1, 13])
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import torch
from jaxtyping import Float, Int
from torch import Tensor

from .errors import (
    AlignmentError,
    AmbiguousObjectiveError,
    InvalidArgumentError,
    NotForRewardModelsError,
    RewardLensError,
    SequenceTooLongError,
)
from .indices import check_index

_TEXT = (
    "a reward model scores a conversation, not a text: use model.to_tokens((prompt, response)), "
    "model.encode(prompt, response) (an EncodedConversation with the chat template, BOS and EOS) "
    "or model.score(prompt, response)"
)


if TYPE_CHECKING:
    from transformer_lens import HookedTransformer

    from .inputs import EncodedConversation

    _Host = HookedTransformer  # what the mixin is mixed into, for the type checker
else:
    _Host = object


class RewardModelIdioms(_Host):
    """TL's tokenisation and LM utilities, answered the reward-model way.

    A mixin of `HookedRewardModel`: its methods are called on a loaded model.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.errors import NotForRewardModelsError
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> ids = model.to_tokens([("tell a song", "the melody"), ("explain how to bake", "flour")])
        >>> ids.shape, ids[:, -1].tolist() == [model.eos_token_id] * 2  # left padded
        (torch.Size([2, 11]), True)
        >>> model.to_str_tokens(("tell a song", "the melody"))[:4]
        ['<bos>', '<|user|>', 'tell', 'a']
        >>> bool((model.tokens_to_residual_directions(0) == model.W_U[:, 0]).all())
        True
        >>> try:
        ...     model.to_tokens("tell a song")  # a bare text has no chat template
        ... except NotForRewardModelsError as err:
        ...     print(str(err)[:56])
        to_tokens got text. a reward model scores a conversation
    """

    if TYPE_CHECKING:  # provided by HookedRewardModel
        pad_token_id: int | None

        def encode(
            self, prompt: Any, response: str, *, truncation: Any = "error"
        ) -> EncodedConversation:
            """Encode one conversation (see `HookedRewardModel.encode`)."""
            ...

        def _require_tokenizer(self) -> Any: ...

    @property
    def W_R(self) -> Float[Tensor, "d_model n_objectives"]:
        """The reward head (alias of `W_U`).

        After `fold_ln` it includes the final norm's weight, so it is the direction read from the
        *normalised* residual.
        """
        return self.W_U

    @property
    def b_R(self) -> Float[Tensor, " n_objectives"]:
        """The reward head's bias (alias of `b_U`; zeros for a head without one)."""
        b: Tensor | None = self.b_U  # None on the bridge for a head without a bias
        return b if b is not None else self.W_U.new_zeros(self.W_U.shape[1])

    @property
    def w_r(self) -> Float[Tensor, " d_model"]:
        """The reward direction of a scalar head, `W_R[:, 0]`.

        Raises:
            RewardLensError: A head with several objectives.
        """
        model: Any = self  # `n_objectives` and `objective_names` come from the model class
        if not model.is_scalar:
            raise RewardLensError(
                f"w_r is defined for scalar heads; this model has {model.n_objectives} "
                f"objectives {model.objective_names}: use W_R[:, i] or reward_direction(...)"
            )
        return self.W_U[:, 0]

    def to_tokens(
        self, input, prepend_bos=None, padding_side=None, move_to_device=True, truncate=True
    ) -> Int[Tensor, "batch pos"]:
        """Ids of `(prompt, response)` (or a list of them) through the chat template.

        They are **left** padded after each row's first token (the default,
        `model.tokenizer.padding_side == "left"`), so `[:, 0]` is every row's first token and
        `[:, -1]` its reading position (see `reward_lens_tl.padding`); the forward infers the mask
        from the pad ids.

        A conversation longer than the context is never cut silently: TL's `truncate=True`
        (the default) and `False` raise `SequenceTooLongError`, which names the modes; pass
        one to cut by it (`"right"`: the end of the response, `"left"`: the oldest prompt
        content, `"both"`; the template's fixed parts, end-of-turn and EOS, always stay, see
        `encode_conversation`). A bare string or list of strings is refused: without the
        template, the reward changes.
        `padding_side="right"` is honoured (and the forward then warns that `-1` is a pad
        in the shorter rows).

        Args:
            input: A `(prompt, response)` pair or a list of them.
            prepend_bos: Accepted for TL compatibility and ignored: the chat template decides
                whether BOS comes first.
            padding_side: `"left"` or `"right"`; `None` is the model's default
                (`model.tokenizer.padding_side`, `"left"` unless loaded with
                `default_padding_side="right"`).
            move_to_device: Move the ids to `cfg.device`.
            truncate: `True`/`False` (TL's flag): raise `SequenceTooLongError` for a
                conversation longer than the context; `"right"`, `"left"` or `"both"`: cut it
                by that mode.

        Returns:
            The padded ids, `[batch, pos]`.

        Raises:
            NotForRewardModelsError: `input` is text or a list of texts, not pairs.
            SequenceTooLongError: A conversation does not fit and no mode was named.
            InvalidArgumentError: An unknown `truncate`.

        Examples:
            >>> from reward_lens_tl import HookedRewardModel
            >>> from reward_lens_tl.zoo import zoo_path
            >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
            >>> ids = model.to_tokens([("tell a song", "the melody"), ("why", "so")])
            >>> ids.shape, model.tokenizer.padding_side
            (torch.Size([2, 11]), 'left')
            >>> model.to_str_tokens(ids[1])[:4]   # pads after the first token: both ends real
            ['<bos>', '<pad>', '<pad>', '<pad>']
            >>> model.to_str_tokens(ids[1])[-1] == model.to_str_tokens(ids[0])[-1] == "<eos>"
            True
            >>> model.to_tokens(("tell a song", "the " * 100), truncate="right").shape  # to n_ctx
            torch.Size([1, 64])
        """
        from .inputs import pad_batch

        pairs = self._conversations(input, "to_tokens")
        if isinstance(truncate, bool):  # TL's flag: a reward model never truncates unasked
            mode = "error"
        elif truncate in ("left", "right", "both"):
            mode = truncate
        else:
            raise InvalidArgumentError(
                f"truncate must be True/False or a truncation mode 'left', 'right' or 'both', "
                f"got {truncate!r}"
            )
        try:
            encoded = [self.encode(p, r, truncation=mode) for p, r in pairs]
        except SequenceTooLongError as err:
            if mode != "error":
                raise
            raise SequenceTooLongError(
                f"{err}. In to_tokens, name the mode: model.to_tokens(..., truncate='right') "
                "(the end of the response), 'left' (the oldest prompt content) or 'both'; a "
                "reward model is never cut unasked (its reading token would move)"
            ) from None
        side = padding_side or getattr(self.tokenizer, "padding_side", None) or "left"
        ids, _ = pad_batch(encoded, self.pad_token_id, cast(Any, side))
        return ids.to(self.cfg.device) if move_to_device else ids

    def to_str_tokens(self, input, prepend_bos=None, padding_side=None):
        """TL's `to_str_tokens`.

        A `(prompt, response)` pair gives the tokens of its encoded conversation (template, BOS,
        EOS); ids (a tensor or list of ints) are converted as TL does; a bare string is refused (see
        `to_tokens`).

        Args:
            input: A `(prompt, response)` pair, a list of pairs, or token ids.
            prepend_bos: Passed to TL for token ids; ignored for pairs (the template decides).
            padding_side: Passed to TL for token ids; ignored for pairs.

        Returns:
            The token strings (a list of lists for a list of pairs).

        Raises:
            NotForRewardModelsError: `input` is a bare string.

        Examples:
            >>> from reward_lens_tl import HookedRewardModel
            >>> from reward_lens_tl.zoo import zoo_path
            >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
            >>> model.to_str_tokens(("why", "so"))
            ['<bos>', '<|user|>', 'why', '<|end|>', '<|assistant|>', 'so', '<|end|>', '<eos>']
        """
        if _is_pair(input):
            ids = list(self.encode(*input).ids)
            return self._require_tokenizer().convert_ids_to_tokens(ids)
        if isinstance(input, str):
            raise NotForRewardModelsError(f"to_str_tokens got text. {_TEXT}")
        if isinstance(input, list) and input and all(_is_pair(p) for p in input):
            return [self.to_str_tokens(p) for p in input]
        return super().to_str_tokens(input, prepend_bos=prepend_bos, padding_side=padding_side)

    def _conversations(self, input, where: str) -> list:
        if isinstance(input, str) or (
            isinstance(input, list) and input and all(isinstance(x, str) for x in input)
        ):
            raise NotForRewardModelsError(f"{where} got text. {_TEXT}")
        pairs = [input] if _is_pair(input) else list(input)
        if not pairs or not all(_is_pair(p) for p in pairs):
            raise NotForRewardModelsError(f"{where} expects (prompt, response) pairs. {_TEXT}")
        return pairs

    def generate(self, *args, **kwargs):
        """Refused: a reward model has no next-token distribution to sample from."""
        raise NotForRewardModelsError(
            "generate() needs a language-model head; a reward model's unembed is its reward head "
            "(generation would append pad id 0 forever). Generate with the policy model, then "
            "score the text with model.score(prompt, response)"
        )

    def loss_fn(self, *args, **kwargs):
        """Refused: there is no language-model loss on a reward head."""
        raise NotForRewardModelsError(
            "a reward model has no language-model loss; for a preference loss use the margins of "
            "reward_lens_tl.scoring.score_pairs (Bradley-Terry: -logsigmoid(margin))"
        )

    def tokens_to_residual_directions(self, tokens) -> Float[Tensor, "... d_model"]:
        """The reward head's direction for objective `tokens`: `W_R[:, i]`.

        `tokens` is an index, `0` for a scalar head, or an objective name. Vocabulary tokens (other
        strings) have no direction here. On a gated ArmoRM-style head, whose reward (the gated
        score) has a direction that depends on the input, an index is ambiguous and refused: name
        the objective, or use `model.score_direction(ids)`.

        Args:
            tokens: An objective index (an int or a tensor of indices) or an objective name.

        Returns:
            The direction, `[d_model]` (with the index tensor's shape in front for a tensor).

        Raises:
            NotForRewardModelsError: `tokens` is vocabulary text or out-of-range indices.
            AmbiguousObjectiveError: An index on a gated head.

        Examples:
            >>> from reward_lens_tl import HookedRewardModel
            >>> from reward_lens_tl.zoo import zoo_path
            >>> model = HookedRewardModel.from_pretrained(zoo_path("multi"))
            >>> model.objective_names
            ('helpfulness', 'harmlessness', 'verbosity')
            >>> direction = model.tokens_to_residual_directions("harmlessness")
            >>> direction.shape, bool((direction == model.W_U[:, 1]).all())
            (torch.Size([64]), True)
        """
        names = tuple(getattr(self, "objective_names", ()))
        if isinstance(tokens, str):
            if tokens in names and len(names) > 1:
                return self.W_U[:, names.index(tokens)]
            raise NotForRewardModelsError(
                f"{tokens!r} is text; a reward model has no vocabulary unembed. The direction "
                "read by the reward is model.W_R[:, objective] (model.w_r for a scalar head): "
                "pass an objective index, e.g. tokens_to_residual_directions(0)"
                + (f", or an objective name from {names}" if len(names) > 1 else "")
            )
        if getattr(self, "gating", None) is not None:
            raise AmbiguousObjectiveError(
                f"tokens_to_residual_directions({tokens!r}) on a gated head: the model's reward "
                "is the gated score, whose direction depends on the input "
                "(model.score_direction(ids), or cache.residual_stack_to_reward(stack)); for one "
                f"objective pass its name, one of {names}"
            )
        n = self.cfg.d_vocab_out
        if isinstance(tokens, Tensor) and tokens.numel() > 1:
            idx = tokens.long()
            if bool(((idx < 0) | (idx >= n)).any()):
                raise NotForRewardModelsError(
                    f"objective indices {tokens.unique().tolist()} outside [0, {n}): these look "
                    "like vocabulary ids; a reward head has one column per objective"
                )
            return self.W_U[:, idx].movedim(0, -1)
        index = int(tokens.item()) if isinstance(tokens, Tensor) else tokens
        return self.W_U[:, check_index(index, n, "objective index")]

    def to_single_token(self, string: str) -> int:
        """Refused.

        Vocabulary tokens have no reward-head column (used by TL's `logit_attrs` and `test_prompt`).

        Args:
            string: The text TL would look up in the vocabulary.

        Raises:
            NotForRewardModelsError: Always.
        """
        raise NotForRewardModelsError(
            f"to_single_token({string!r}): a reward model's outputs are objectives, not "
            "vocabulary tokens; pass an objective index (0 for a scalar head)"
        )


#: TransformerLens's language-model metrics, which read `logits` as a vocabulary distribution.
LM_UTILITIES = ("lm_cross_entropy_loss", "lm_accuracy")
_LM_MODULES = (
    "transformer_lens.utils",
    "transformer_lens.utilities",
    "transformer_lens.utilities.lm_utils",
)


def guard_lm_utilities() -> None:
    """Make TL's `lm_cross_entropy_loss` / `lm_accuracy` refuse a reward model's outputs.

    `transformer_lens.utils.lm_cross_entropy_loss` / `lm_accuracy` raise a typed error with a
    pointer instead of raising an index error or returning a meaningless accuracy. Every other input
    goes to TransformerLens's function unchanged; the wrapper is installed once, on import of
    `reward_lens_tl.model` (TransformerLens 3) or of `reward_lens_tl.bridge.reward_model`
    (TransformerLens 4, which has no `transformer_lens.utils`).
    """
    for module in _importable(_LM_MODULES):
        for name in LM_UTILITIES:
            fn = getattr(module, name, None)
            if fn is not None and not getattr(fn, "_reward_lens_guard", False):
                setattr(module, name, _guarded(fn, name))
    for module in _importable(_MASK_MODULES):
        fn = getattr(module, "get_attention_mask", None)
        if fn is not None and not getattr(fn, "_reward_lens_guard", False):
            setattr(module, "get_attention_mask", _layout_aware_mask(fn))  # noqa: B010


def _importable(module_names: Sequence[str]) -> list[Any]:
    """The modules of `module_names` that import (TransformerLens 4 has no `utils` module)."""
    import importlib

    modules = []
    for module_name in module_names:
        try:
            modules.append(importlib.import_module(module_name))
        except ImportError:
            continue
    return modules


#: Where TransformerLens defines or re-exports `get_attention_mask`.
_MASK_MODULES = (
    "transformer_lens.utils",
    "transformer_lens.utilities",
    "transformer_lens.utilities.tokenize_utils",
)


def _layout_aware_mask(fn):
    """TL's `get_attention_mask`, reading this library's layout for a reward model's tokenizer.

    TL's left-padding rule masks only the pads before the first token; a batch of
    `model.to_tokens` keeps its first token at column 0 and its pads after it. For the tokenizer a
    `HookedRewardModel` keeps (marked by `padding.tokenizer_with_side`) and a left side, the mask
    is the library's own (`padding.padding_mask`); every other call is TL's, unchanged.
    """

    @functools.wraps(fn)
    def wrapper(tokenizer, tokens, prepend_bos=True, padding_side=None, *args, **kwargs):
        side = padding_side or getattr(tokenizer, "padding_side", None)
        if getattr(tokenizer, "_reward_lens_layout", False) and side == "left":
            from .padding import padding_mask

            bos = {getattr(tokenizer, "bos_token_id", None), *tokenizer._reward_lens_bos}
            mask = padding_mask(tokens, tokenizer.pad_token_id, bos)
            return torch.ones_like(tokens) if mask is None else mask.to(tokens.device)
        return fn(tokenizer, tokens, prepend_bos, padding_side, *args, **kwargs)

    wrapper._reward_lens_guard = True  # type: ignore[attr-defined]  # marks it as installed
    return wrapper


def _guarded(fn, name: str):
    @functools.wraps(fn)
    def wrapper(logits, tokens, *args, **kwargs):
        if _reads_reward_logits(logits, tokens):
            raise NotForRewardModelsError(
                f"utils.{name} reads logits as a next-token distribution over the vocabulary; a "
                "reward model's outputs are rewards (one column per objective). For a "
                "preference loss use -logsigmoid(margin) with the margins of "
                "reward_lens_tl.scoring.score_pairs; for accuracy, "
                "reward_lens_tl.evals (pairwise accuracy)"
            )
        return fn(logits, tokens, *args, **kwargs)

    wrapper._reward_lens_guard = True  # type: ignore[attr-defined]  # marks it as installed
    return wrapper


def _reads_reward_logits(logits, tokens) -> bool:
    if getattr(logits, "_reward_lens_outputs", False):
        return True
    return (
        isinstance(logits, Tensor)
        and isinstance(tokens, Tensor)
        and not tokens.dtype.is_floating_point
        and tokens.numel() > 0
        and int(tokens.max()) >= logits.shape[-1]
    )


def mark_reward_outputs(out):
    """Tag a forward's per-position outputs as rewards (read by the LM-utility guard)."""
    if isinstance(out, Tensor):
        out._reward_lens_outputs = True  # type: ignore[attr-defined]  # a marker on this tensor
    return out


def _is_pair(x) -> bool:
    return (
        isinstance(x, (tuple, list))
        and len(x) == 2
        and isinstance(x[1], str)
        and (isinstance(x[0], str) or isinstance(x[0], Sequence))
    )


def check_patch_lengths(fwd_hooks, n_pos: int) -> None:
    """Refuse a hook that copies another run's activation of another length.

    Such hooks pass `clean_activation=`, as TransformerLens's `patching.get_act_patch_*` builds
    them: TL pairs position `p` with `p` (prefix-aligned), which is wrong for a
    chosen/rejected pair.

    Args:
        fwd_hooks: `(name, hook)` forward hooks.
        n_pos: This run's number of positions.

    Raises:
        AlignmentError: A clean activation of another length.
    """
    for name, fn in fwd_hooks:
        clean = fn.keywords.get("clean_activation") if isinstance(fn, functools.partial) else None
        if not isinstance(clean, Tensor) or clean.ndim < 2:
            continue
        pattern = isinstance(name, str) and name.endswith(("hook_pattern", "hook_attn_scores"))
        lengths = {int(clean.shape[2]), int(clean.shape[3])} if pattern else {int(clean.shape[1])}
        if lengths != {n_pos}:
            raise AlignmentError(
                f"patching {name!r}: the clean activation covers {sorted(lengths)} positions and "
                f"this run {n_pos}. TransformerLens's patching pairs position p with p, i.e. "
                "prefix-aligned, not at the reward token. Encode both in one batch, "
                "ids = model.to_tokens([(prompt, chosen), (prompt, rejected)]) (left padded: "
                "end-aligned), and patch ids[:1] into ids[1:]; or use "
                "reward_lens_tl.patching.activation_patching(model, clean, corrupted, "
                "alignment='end')"
            )


__all__ = ["RewardModelIdioms"]
