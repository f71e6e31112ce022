"""`ImplicitRewardModel`: the reward a DPO policy carries relative to its reference.

`r(x, y) = β · Σ_t [log π(y_t | x, y_<t) − log π_ref(y_t | x, y_<t)]`, summed over the
*response* tokens only (an explicit response-token mask; the prompt never counts). Whether the
template's suffix after the response content (end-of-turn, EOS) counts is `include_suffix`;
the default `True` is what the zoo's DPO training summed (`zoo.dpo.response_mask`: response
words, `<|end|>` and `<eos>`), and what TRL's DPO does with a chat template.

Policy and reference are TransformerLens models with a vocabulary unembed (load local HF
checkpoints with `reward_lens_tl.implicit.loading.load_causal_lm`, or pass any
`HookedTransformer`), or on TransformerLens 4 bridges (`reward_lens_tl.bridge.boot_causal_lm`);
`from_pretrained` loads both on the installed line's backend. A chunk of N sequences costs two
forwards: one policy, one reference.

Examples:
    >>> import torch
    >>> from reward_lens_tl.zoo import zoo_path
    >>> irm = ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))
    >>> irm.beta
    0.1
    >>> enc = irm.encode("how bake bread", "great question soup")
    >>> ids, attention, response = irm.batch([enc])
    >>> response.tolist()  # response words, <|end|>, <eos>
    [[0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1]]
    >>> irm.rewards(ids, response, attention).shape
    torch.Size([1])
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..errors import (
    EmptyResponseMaskError,
    InvalidArgumentError,
    ShapeMismatchError,
    TokenOutOfVocabError,
    VocabularyMismatchError,
)
from ..inputs import EncodedConversation, as_encoded, encode_conversation
from .batches import Batch, batch_encodings, pair_chunks

__all__ = ["ImplicitRewardModel", "token_logprobs"]


def token_logprobs(
    logits: Float[Tensor, "batch pos vocab"], ids: Int[Tensor, "batch pos"]
) -> Float[Tensor, "batch pos"]:
    """`log p(ids[t] | ids[<t])` at position `t` (0 at `t = 0`), in float32.

    Args:
        logits: The model's logits.
        ids: The token ids.

    Returns:
        The log-probability of each taken token.

    Examples:
        >>> import torch
        >>> from reward_lens_tl.implicit import token_logprobs
        >>> logits = torch.zeros(1, 3, 4)  # uniform over 4 tokens: log(1/4) = -1.3863
        >>> [round(x, 4) for x in token_logprobs(logits, torch.tensor([[2, 0, 3]]))[0].tolist()]
        [0.0, -1.3863, -1.3863]
    """
    logp = logits[:, :-1].float().log_softmax(-1).gather(-1, ids[:, 1:, None])[..., 0]
    return torch.cat([torch.zeros_like(logp[:, :1]), logp], 1)


def check_same_vocabulary(policy: Any, reference: Any) -> None:
    """Raise `VocabularyMismatchError` unless both use one vocabulary and tokenizer.

    Args:
        policy: The policy.
        reference: The reference model.

    Raises:
        VocabularyMismatchError: When the vocabularies or tokenizers differ.
    """
    for attr in ("d_vocab", "d_vocab_out"):
        a, b = getattr(policy.cfg, attr), getattr(reference.cfg, attr)
        if a != b:
            raise VocabularyMismatchError(
                f"policy has {attr}={a} but reference has {attr}={b}: an implicit reward compares "
                "the two models' log-probs of the same token ids, so both must share one "
                "tokenizer and vocabulary (use the reference the policy was trained from)"
            )
    tok_p, tok_r = getattr(policy, "tokenizer", None), getattr(reference, "tokenizer", None)
    if tok_p is None or tok_r is None:
        return
    vp, vr = tok_p.get_vocab(), tok_r.get_vocab()
    if vp != vr:
        diff = sorted(set(vp.items()) ^ set(vr.items()))[:5]
        raise VocabularyMismatchError(
            f"policy and reference tokenizers differ ({len(vp)} vs {len(vr)} entries; first "
            f"differing (token, id): {diff}): the same ids would be different text for the two "
            "models. Load both with the policy's tokenizer only if they really share it"
        )


def check_beta(beta: Any) -> float:
    """`beta` as a float, checked to be a finite number > 0.

    `inf` would turn every zero log-ratio into NaN, and a bool is no temperature.

    Args:
        beta: The DPO temperature.

    Returns:
        `beta` as a float.

    Raises:
        InvalidArgumentError: Unless `beta` is a finite number > 0.

    Examples:
        >>> check_beta(0.1)
        0.1
    """
    try:
        value = None if isinstance(beta, (bool, str)) else float(beta)
    except (TypeError, ValueError):
        value = None
    if value is None or not math.isfinite(value) or value <= 0:
        raise InvalidArgumentError(
            f"beta must be a finite number > 0 (the DPO temperature the policy was trained "
            f"with, e.g. 0.1), got {beta!r}"
        )
    return value


def metadata_beta(path: str | Path | None) -> float | None:
    """`beta` recorded in a checkpoint's `metadata.json` (the zoo writes it), if any.

    Args:
        path: The checkpoint's folder (or an in-memory model, which records none).

    Returns:
        The recorded `beta`, or `None`.
    """
    if path is None or isinstance(path, torch.nn.Module):
        return None
    meta = Path(path) / "metadata.json"
    if not meta.is_file():
        return None
    beta = json.loads(meta.read_text()).get("beta")
    return None if beta is None else float(beta)


class ImplicitRewardModel:
    """A DPO policy's implicit reward (see the module docstring).

    Analyses of the policy's components (`.attribution`, `.lens`, `.fit`) run hooks on
    `policy`.

    Args:
        policy: The policy, a TL model with the same vocabulary as `reference`.
        reference: The reference model.
        beta: The DPO temperature.
        include_suffix: Whether the template's suffix after the response content counts.
        tokenizer: The tokenizer; defaults to the policy's.

    Raises:
        InvalidArgumentError: When `beta` is not a finite number > 0.
        VocabularyMismatchError: When policy and reference use different vocabularies.

    Examples:
        >>> from reward_lens_tl.implicit import ImplicitRewardModel
        >>> from reward_lens_tl.zoo import zoo_path
        >>> irm = ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))
        >>> irm.beta  # recorded in the zoo policy's metadata.json
        0.1
        >>> ids, attention, response = irm.batch([irm.encode("how bake bread", "great soup")])
        >>> pol, ref = irm.log_ratios(ids, response, attention)
        >>> reward = irm.score("how bake bread", "great soup")
        >>> round(float(reward), 3), round(float(0.1 * (pol - ref).sum()), 3)  # β Σ log-ratio
        (-2.707, -2.707)
        >>> hot = ImplicitRewardModel(irm.policy, irm.reference, beta=0.5)  # same models, 5 × β
        >>> round(float(hot.score("how bake bread", "great soup") / reward), 3)
        5.0
    """

    def __init__(
        self,
        policy: Any,
        reference: Any,
        beta: float,
        *,
        include_suffix: bool = True,
        tokenizer: Any = None,
    ):
        """Build the implicit reward model (see the class docstring)."""
        beta = check_beta(beta)
        check_same_vocabulary(policy, reference)
        self.policy = policy
        self.reference = reference
        self.beta = beta
        self.include_suffix = include_suffix
        self.tokenizer = tokenizer if tokenizer is not None else getattr(policy, "tokenizer", None)
        self.pad_token_id = getattr(policy, "pad_token_id", None)
        if self.pad_token_id is None and self.tokenizer is not None:
            self.pad_token_id = self.tokenizer.pad_token_id
        self.eos_token_id = getattr(policy, "eos_token_id", None)

    @classmethod
    def from_pretrained(
        cls, policy, reference, beta: float | None = None, tokenizer=None, **kwargs
    ) -> ImplicitRewardModel:
        """From local HF causal-LM directories (or in-memory HF models).

        Each is loaded on the installed TransformerLens line's backend (`loading.load_policy_lm`):
        `load_causal_lm` on 3.9, the bridge's `boot_causal_lm` on 4.

        Args:
            policy: The policy's folder or HF model.
            reference: The reference's folder or HF model.
            beta: The DPO temperature; defaults to the policy's `metadata.json` value (the zoo
                records it); otherwise it is required.
            tokenizer: The tokenizer; defaults to the policy's.
            **kwargs: `include_suffix`, and options of the loader (`load_causal_lm`, or
                `reward_lens_tl.bridge.boot_causal_lm` on TransformerLens 4).

        Returns:
            The implicit reward model.

        Raises:
            InvalidArgumentError: When `beta` is neither given nor recorded.
        """
        from .loading import load_policy_lm

        beta = beta if beta is not None else metadata_beta(policy)
        if beta is None:
            raise InvalidArgumentError(
                "beta is not recorded with this policy: pass beta= (the DPO temperature it was "
                "trained with)"
            )
        include_suffix = kwargs.pop("include_suffix", True)
        return cls(
            load_policy_lm(policy, tokenizer, **kwargs),
            load_policy_lm(reference, tokenizer, **kwargs),
            beta,
            include_suffix=include_suffix,
            tokenizer=tokenizer,
        )

    @property
    def cfg(self):
        """The policy's config (the model whose components analyses look at)."""
        return self.policy.cfg

    # -- inputs ---------------------------------------------------------------------------
    def encode(self, prompt, response, **kwargs) -> EncodedConversation:
        """Token ids of one conversation with the policy's tokenizer and chat template.

        Args:
            prompt: The prompt.
            response: The response.
            **kwargs: Options of `reward_lens_tl.inputs.encode_conversation`.

        Returns:
            The encoded conversation.

        Raises:
            InvalidArgumentError: When there is no tokenizer.
        """
        if self.tokenizer is None:
            raise InvalidArgumentError("no tokenizer: pass tokenizer= or feed token ids")
        kwargs.setdefault("max_length", self.cfg.n_ctx)
        return encode_conversation(self.tokenizer, prompt, response, **kwargs)

    def batch(
        self, encodings: Sequence[EncodedConversation], include_suffix: bool | None = None
    ) -> Batch:
        """`(input_ids, attention_mask, response_mask)` on the policy's device.

        Args:
            encodings: `EncodedConversation`s or zoo `Example`s.
            include_suffix: Whether the suffix counts; defaults to the model's setting.

        Returns:
            The batch.
        """
        suffix = self.include_suffix if include_suffix is None else include_suffix
        encodings = [as_encoded(e) for e in encodings]
        return batch_encodings(
            encodings, self.pad_token_id, suffix, self.eos_token_id, self.cfg.device
        )

    def check_inputs(
        self, ids: Tensor, response_mask: Tensor, attention_mask: Tensor | None = None
    ) -> Int[Tensor, "batch pos"]:
        """Validate ids and masks; return the ids 2-D.

        Args:
            ids: The token ids.
            response_mask: The response-token mask.
            attention_mask: The attention mask.

        Returns:
            The ids, 2-D.

        Raises:
            ShapeMismatchError: When a mask's shape does not match the ids'.
            TokenOutOfVocabError: When an id is outside the vocabulary.
            EmptyResponseMaskError: When the response mask selects no token in a row, marks a
                first token or marks padding.
        """
        ids = ids[None] if ids.ndim == 1 else ids
        response_mask = response_mask[None] if response_mask.ndim == 1 else response_mask
        if response_mask.shape != ids.shape:
            raise ShapeMismatchError(
                f"response_mask {tuple(response_mask.shape)} does not match input_ids "
                f"{tuple(ids.shape)}"
            )
        if attention_mask is not None and attention_mask.shape[-2:] != ids.shape:
            raise ShapeMismatchError(
                f"attention_mask {tuple(attention_mask.shape)} does not match input_ids "
                f"{tuple(ids.shape)}"
            )
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.cfg.d_vocab):
            raise TokenOutOfVocabError(
                f"token ids outside the vocabulary [0, {self.cfg.d_vocab}); were they produced "
                "by a different tokenizer?"
            )
        counts = (response_mask != 0).sum(-1)
        if bool((counts == 0).any()):
            rows = (counts == 0).nonzero().flatten().tolist()
            raise EmptyResponseMaskError(
                f"the response mask selects no token in rows {rows}: their implicit reward would "
                "be 0 by construction. Mark the response tokens (batch()/response_masks() build "
                "the mask from EncodedConversation.response_start)"
            )
        if bool((response_mask[:, 0] != 0).any()):
            raise EmptyResponseMaskError(
                "the response mask marks position 0, which no token predicts; responses start "
                "after the prompt"
            )
        if attention_mask is not None and bool(
            ((response_mask != 0) & (attention_mask == 0)).any()
        ):
            raise EmptyResponseMaskError("the response mask marks padding (attention_mask 0)")
        if attention_mask is not None and attention_mask.numel() == ids.numel():
            real = attention_mask.reshape(ids.shape).to(response_mask.device) != 0
            first = real.long().argmax(-1)  # each row's first real token (after left padding)
            every_row = torch.arange(ids.shape[0], device=response_mask.device)
            if bool((response_mask[every_row, first] != 0).any()):
                raise EmptyResponseMaskError(
                    "the response mask marks a sequence's first token, which no token predicts; "
                    "responses start after the prompt"
                )
        return ids

    # -- rewards --------------------------------------------------------------------------
    def log_ratios(
        self,
        ids: Int[Tensor, "batch pos"],
        response_mask: Int[Tensor, "batch pos"],
        attention_mask: Int[Tensor, "batch pos"] | None = None,
        *,
        fwd_hooks: Sequence = (),
    ) -> tuple[Float[Tensor, "batch pos"], Float[Tensor, "batch pos"]]:
        """Per-token `(log π, log π_ref)` of the taken tokens, zero outside the mask.

        One forward each.

        Args:
            ids: The token ids.
            response_mask: The response-token mask.
            attention_mask: The attention mask.
            fwd_hooks: Forward hooks on the policy.

        Returns:
            The policy's and the reference's log-probabilities.
        """
        ids = self.check_inputs(ids, response_mask, attention_mask)
        keep = (response_mask != 0).float()
        with torch.no_grad(), self.policy.hooks(fwd_hooks=list(fwd_hooks)):
            pol = token_logprobs(self.policy(ids, attention_mask=attention_mask), ids)
        with torch.no_grad():
            ref = token_logprobs(self.reference(ids, attention_mask=attention_mask), ids)
        return pol * keep, ref * keep

    def token_rewards(
        self,
        ids: Int[Tensor, "batch pos"],
        response_mask: Int[Tensor, "batch pos"],
        attention_mask: Int[Tensor, "batch pos"] | None = None,
        **kwargs,
    ) -> Float[Tensor, "batch pos"]:
        """`β (log π − log π_ref)` of the token at each position (0 outside the mask).

        Args:
            ids: The token ids.
            response_mask: The response-token mask.
            attention_mask: The attention mask.
            **kwargs: Options of `log_ratios`.

        Returns:
            The per-token rewards.
        """
        pol, ref = self.log_ratios(ids, response_mask, attention_mask, **kwargs)
        return self.beta * (pol - ref)

    def rewards(
        self,
        ids: Int[Tensor, "batch pos"],
        response_mask: Int[Tensor, "batch pos"],
        attention_mask: Int[Tensor, "batch pos"] | None = None,
        **kwargs,
    ) -> Float[Tensor, " batch"]:
        """Implicit rewards `[batch]`: `token_rewards` summed over the response.

        Args:
            ids: The token ids.
            response_mask: The response-token mask.
            attention_mask: The attention mask.
            **kwargs: Options of `log_ratios`.

        Returns:
            The rewards.

        Raises:
            NonFiniteActivationError: When a reward is not finite (naming the model and row).
        """
        pol, ref = self.log_ratios(ids, response_mask, attention_mask, **kwargs)
        out = (self.beta * (pol - ref)).sum(-1)
        if not bool(torch.isfinite(out).all()):
            raise _non_finite_implicit(out, pol, ref)
        return out

    def score_encodings(
        self, encodings: Sequence[EncodedConversation], batch_size: int = 32, **kwargs
    ) -> Float[Tensor, " n"]:
        """Implicit rewards of many conversations, streamed `batch_size` at a time.

        Args:
            encodings: The conversations.
            batch_size: Conversations per forward.
            **kwargs: Options of `rewards`.

        Returns:
            The rewards.
        """
        out = []
        for start in range(0, len(encodings), batch_size):
            ids, attention, resp = self.batch(encodings[start : start + batch_size])
            out.append(self.rewards(ids, resp, attention, **kwargs).cpu())
        return torch.cat(out)

    def pair_rewards(
        self, pairs: Sequence, batch_size: int = 16, **kwargs
    ) -> tuple[Float[Tensor, " n"], Float[Tensor, " n"]]:
        """`(chosen, rejected)` implicit rewards of preference pairs.

        The pairs are in any form `reward_lens_tl.pair_batches.encoded_pair` reads;
        two forwards per chunk, memory bounded by `batch_size`.

        Args:
            pairs: The preference pairs.
            batch_size: Pairs per chunk.
            **kwargs: Options of `rewards`.

        Returns:
            The chosen and the rejected rewards.

        Examples:
            >>> from reward_lens_tl.implicit import ImplicitRewardModel
            >>> from reward_lens_tl.zoo import load_task, zoo_path
            >>> irm = ImplicitRewardModel.from_pretrained(zoo_path("policy"), zoo_path("reference"))
            >>> pairs = load_task().task.contrast_pairs("sycophancy", 4, seed=0)  # edited: chosen
            >>> chosen, rejected = irm.pair_rewards(pairs, batch_size=2)
            >>> [round(m, 3) for m in (chosen - rejected).tolist()]  # sycophancy rewarded
            [0.735, 0.554, 0.379, 0.945]
        """
        pairs = list(pairs)
        chosen, rejected = torch.empty(len(pairs)), torch.empty(len(pairs))
        done = 0
        for encs, n in pair_chunks(self, pairs, batch_size):
            ids, attention, resp = self.batch(encs)
            r = self.rewards(ids, resp, attention, **kwargs).cpu()
            chosen[done : done + n], rejected[done : done + n] = r[:n], r[n:]
            done += n
        return chosen, rejected

    def score(self, prompt, response, **kwargs) -> Tensor:
        """Implicit reward of one (prompt, response) pair, from text.

        Args:
            prompt: The prompt.
            response: The response.
            **kwargs: Options of `encode`.

        Returns:
            The reward.
        """
        ids, attention, resp = self.batch([self.encode(prompt, response, **kwargs)])
        return self.rewards(ids, resp, attention)[0]


def _non_finite_implicit(rewards: Tensor, pol: Tensor, ref: Tensor):
    """The error for implicit rewards that are not finite.

    It names the rows, and which model's log-probs are not finite first (policy or reference).
    """
    from ..errors import NonFiniteActivationError

    rows = (~torch.isfinite(rewards)).nonzero().flatten().tolist()
    culprits = [
        f"the {label}'s log-probs (first at row {int(bad[0, 0])}, position {int(bad[0, 1])})"
        for label, logp in (("policy", pol), ("reference", ref))
        if len(bad := (~torch.isfinite(logp)).nonzero())
    ]
    cause = " and ".join(culprits) + " are not finite" if culprits else "beta × log-ratio overflows"
    return NonFiniteActivationError(
        f"the implicit reward of row(s) {rows[:8]} is not finite: {cause}. "
        "A float16 model overflows beyond 65504: load policy and reference with "
        "dtype=torch.bfloat16 or torch.float32"
    )
