"""Sampling responses from a policy, and scoring text with any reward-like model.

`sample_responses` draws `n` responses per prompt from a causal LM (an HF
`*ForCausalLM` or a TransformerLens `HookedTransformer`: anything whose forward returns
next-token logits, or an output with `.logits`) by ancestral sampling from its own seeded
`torch.Generator`, so a monitor that samples during training leaves the trainer's random
state untouched. Prompts are rendered with the tokenizer's chat template (a generation prompt
appended) when it has one.

`score_texts` scores `(prompt, response)` texts with whatever reward-like model it is
given, re-encoding the text with that model's own tokenizer and template:

- a `reward_lens_tl.model.HookedRewardModel` (judges and PRMs included): its pooled
  reward (the gated score for ArmoRM-style heads);
- an `reward_lens_tl.implicit.ImplicitRewardModel` (or anything with `encode` and
  `score_encodings`): its implicit rewards;
- a plain callable `fn(prompts, responses) -> rewards` (e.g. a rule, an API judge), or one
  scoring a single pair, `fn(prompt, response) -> reward` (called per pair when it does not
  take the lists). Its output is checked: exactly one finite number per text (a `bool` reads
  as 1.0 / 0.0), else a `reward_lens_tl.errors.PressureError` naming the function, the
  counts and the first bad text (`reward_lens_tl.pressure.validate`).

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.zoo import load_model, load_tokenizer, zoo_path
    >>> policy, tok = load_model("policy"), load_tokenizer("policy")
    >>> samples = sample_responses(policy, tok, ["how bake bread"], n=3, seed=0)
    >>> len(samples[0]), all(isinstance(s.text, str) for s in samples[0])
    (3, True)
    >>> rm = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    >>> score_texts(rm, ["how bake bread"], ["soup oven flour"]).shape
    torch.Size([1])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from ..errors import PressureError
from .validate import (
    call_reward_fn,
    check_count,
    check_finite_rewards,
    check_sampling,
    check_tokenizer_fits,
)

__all__ = ["Sample", "sample_responses", "score_texts"]

Prompt = str | Sequence[Mapping[str, str]]


@dataclass(frozen=True)
class Sample:
    """One sampled response.

    Attributes:
        text: the decoded response.
        ids: its token ids (the policy's tokenizer).
        finished: whether it ended with the end-of-sequence token within the token budget.

    Examples:
        >>> sample = Sample(text="great soup", ids=(5, 9), finished=True)
        >>> sample.text, len(sample.ids)
        ('great soup', 2)
    """

    text: str
    ids: tuple[int, ...]
    finished: bool


def prompt_text(prompt: Prompt) -> str:
    """The last user message of `prompt` (a string is its own text).

    Args:
        prompt: a text or a list of chat messages.

    Returns:
        The prompt's text.

    Raises:
        PressureError: if a prompt given as messages has no user message.
    """
    if isinstance(prompt, str):
        return prompt
    users = [m["content"] for m in prompt if m.get("role") == "user"]
    if not users:
        raise PressureError("a prompt given as messages needs a user message")
    return users[-1]


def render_prompt(tokenizer: Any, prompt: Prompt) -> list[int]:
    """Token ids of `prompt` ready for generation.

    The chat template with the generation prompt when the tokenizer has one, else the plain
    tokenization.

    Args:
        tokenizer: the policy's tokenizer.
        prompt: a text or a list of chat messages.

    Returns:
        The token ids.

    Raises:
        PressureError: if the prompt is given as messages and the tokenizer has no chat
            template.
    """
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    if getattr(tokenizer, "chat_template", None):
        out = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        ids = out["input_ids"] if isinstance(out, Mapping) else out
        return [int(i) for i in ids]
    if not isinstance(prompt, str):
        raise PressureError("this tokenizer has no chat template: pass prompts as text")
    return [int(i) for i in tokenizer(prompt)["input_ids"]]


def unwrapped_forward(model: Any) -> Any:
    """The model's forward outside accelerate's autocast wrapper (the model itself if none).

    Args:
        model: A module, possibly prepared by a trainer (`bf16=True` wraps its forward).

    Returns:
        A callable running the model in its stored precision.

    Examples:
        >>> from torch import nn
        >>> layer = nn.Linear(2, 2)
        >>> unwrapped_forward(layer) is layer
        True
    """
    if not hasattr(model, "__dict__"):
        return model
    return model.__dict__.get("_original_forward", model)


def mask_positions(attention_mask: Tensor) -> Tensor:
    """Position ids counted from each row's first real token (left padding gets 0).

    Args:
        attention_mask: `[batch, pos]`, 1 for real tokens.

    Returns:
        The position ids, `[batch, pos]`.

    Examples:
        >>> import torch
        >>> mask_positions(torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])).tolist()
        [[0, 0, 0, 1], [0, 1, 2, 3]]
    """
    return (attention_mask.cumsum(-1) - 1).clamp_min(0)


def logits_of(model: Any, ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
    """`model(ids)`'s logits (HF output or TL tensor), in the model's stored precision.

    A forward that accelerate wrapped in the trainer's autocast (`bf16=True`) is read through
    the original forward it keeps, so the monitor's numbers do not depend on the trainer's
    mixed precision. With a left-padded `attention_mask`, HF models get the position ids of
    the unpadded rows (TL models count positions from the mask themselves).

    Args:
        model: a causal LM (an HF `*ForCausalLM` or a TransformerLens `HookedTransformer`).
        ids: token ids, `[batch, pos]`.
        attention_mask: the left-padded attention mask, `[batch, pos]`, or `None`.

    Returns:
        The logits, `[batch, pos, vocab]`.

    Raises:
        PressureError: if the model does not return next-token logits.
    """
    forward = unwrapped_forward(model)
    if attention_mask is None:
        out = forward(ids)
    elif _is_hf(model):
        positions = mask_positions(attention_mask)
        out = forward(input_ids=ids, attention_mask=attention_mask, position_ids=positions)
    else:
        out = forward(ids, attention_mask=attention_mask)
    logits = out.logits if hasattr(out, "logits") else out
    if not isinstance(logits, Tensor) or logits.ndim != 3:
        raise PressureError(
            f"{type(model).__name__} did not return next-token logits [batch, pos, vocab]: "
            "pass a causal LM (an HF *ForCausalLM or a TransformerLens HookedTransformer)"
        )
    return logits


def _is_hf(model: Any) -> bool:
    return hasattr(model, "config") and not hasattr(model, "cfg")


def next_token_logits(
    policy: Any, ids: Tensor, attention_mask: Tensor | None = None
) -> Float[Tensor, "batch vocab"]:
    """Logits of the next token after each row of `ids` (left padded with `attention_mask`).

    Args:
        policy: a causal LM.
        ids: token ids, `[batch, pos]`.
        attention_mask: the left-padded attention mask, or `None`.

    Returns:
        The float32 logits, `[batch, vocab]`.
    """
    return logits_of(policy, ids, attention_mask)[:, -1].float()


def model_device(model: Any) -> torch.device:
    """The device of `model`'s first parameter (CPU for a parameterless callable).

    Args:
        model: a module or any callable.

    Returns:
        The device.
    """
    try:
        return next(model.parameters()).device
    except (AttributeError, StopIteration):
        return torch.device("cpu")


@torch.no_grad()
def sample_responses(
    policy: Any,
    tokenizer: Any,
    prompts: Sequence[Prompt],
    n: int,
    *,
    max_new_tokens: int = 16,
    temperature: float = 1.0,
    seed: int = 0,
) -> list[list[Sample]]:
    """`n` responses per prompt, sampled from the policy's own seeded generator.

    The policy's train/eval mode is restored. Every prompt's `n` rows run as one left-padded
    batch (HF models get position ids from the mask; a TL model runs one batch per prompt
    length, unpadded), so one call draws at most
    `reward_lens_tl.pressure.validate.MAX_SAMPLES` samples (`n × prompts`).

    Args:
        policy: a causal LM (an HF `*ForCausalLM` or a TransformerLens `HookedTransformer`).
        tokenizer: the policy's tokenizer.
        prompts: texts or message lists.
        n: responses per prompt.
        max_new_tokens: the token budget of each response (at most
            `reward_lens_tl.pressure.validate.MAX_NEW_TOKENS`).
        temperature: the sampling temperature.
        seed: the seed of the policy's own generator (an integer >= 0).

    Returns:
        The samples, `[prompt][sample]`.

    Raises:
        PressureError: if `prompts` is empty or one string; `n`, `max_new_tokens` or `seed` is
            not an integer (a `bool` or a float included) in its range; `n × prompts` exceeds
            `MAX_SAMPLES`; `temperature` is not a finite number above 0; or the tokenizer has
            more token ids than the policy embeds.

    Examples:
        Three samples of the zoo's DPO policy (`text` leaves special tokens out; `finished`:
        the end-of-sequence token came within the 16-token budget):

        >>> from reward_lens_tl.pressure import sample_responses
        >>> from reward_lens_tl.zoo import load_model, load_tokenizer
        >>> policy, tokenizer = load_model("policy"), load_tokenizer("policy")
        >>> samples = sample_responses(policy, tokenizer, ["how bake bread"], n=3, seed=0)
        >>> for sample in samples[0]:
        ...     print(sample.finished, sample.text)
        False pasta stadium please
        False butter
        True great question weed soup flour bake the butter butter recipe
        >>> samples == sample_responses(policy, tokenizer, ["how bake bread"], n=3, seed=0)
        True
    """
    prompts, n, max_new_tokens, temperature, seed = check_sampling(
        "n", n, prompts, max_new_tokens, temperature, seed
    )
    check_tokenizer_fits(policy, tokenizer)
    rendered = [render_prompt(tokenizer, p) for p in prompts]
    device = model_device(policy)
    gen = torch.Generator(device=device).manual_seed(seed)
    groups = (
        [list(range(len(rendered)))]
        if _is_hf(policy)
        else [
            [i for i, r in enumerate(rendered) if len(r) == k]
            for k in sorted({len(r) for r in rendered})
        ]
    )
    was_training = bool(getattr(policy, "training", False))
    if hasattr(policy, "eval"):
        policy.eval()
    out: list[list[Sample]] = [[] for _ in prompts]
    try:
        for group in groups:
            rows = [rendered[i] for i in group for _ in range(n)]
            samples = _sample_rows(
                policy, tokenizer, rows, max_new_tokens, temperature, gen, device
            )
            for j, i in enumerate(group):
                out[i] = samples[j * n : (j + 1) * n]
    finally:
        if was_training:
            policy.train()
    return out


def _sample_rows(policy, tokenizer, rows, max_new_tokens, temperature, gen, device):
    from ..padding import hf_pad

    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids, mask = hf_pad(rows, pad)  # every pad first, as a policy generates from
    ids, mask = ids.to(device), mask.to(device)
    step = _cached_steps(policy, ids, mask) if _is_hf(policy) else _full_steps(policy, ids, mask)
    eos = tokenizer.eos_token_id
    new: list[Tensor] = []
    done = torch.zeros(len(rows), dtype=torch.bool, device=device)
    logits = next(step)
    for _ in range(max_new_tokens):
        nxt = torch.multinomial((logits / temperature).softmax(-1), 1, generator=gen)
        new.append(nxt)
        done |= nxt[:, 0] == eos
        if bool(done.all()) or len(new) == max_new_tokens:
            break
        logits = step.send(nxt)
    out = []
    for row in torch.cat(new, 1).tolist():
        finished = eos in row
        row = row[: row.index(eos)] if finished else row
        text = tokenizer.decode(row, skip_special_tokens=True).strip()
        out.append(Sample(text, tuple(row), finished))
    return out


def _full_steps(policy, ids, mask):
    """Next-token logits, re-running the whole sequence each step (any causal LM)."""
    padded = bool((mask == 0).any())
    while True:
        nxt = yield next_token_logits(policy, ids, mask if padded else None)
        ids = torch.cat([ids, nxt], 1)
        mask = torch.cat([mask, torch.ones_like(nxt)], 1)


def _cached_steps(policy, ids, mask):
    """Next-token logits of an HF causal LM with its key-value cache.

    The same numbers as `_full_steps`, one token a step after the prompt.
    """
    import inspect

    forward = unwrapped_forward(policy)
    # transformers 5.24 renamed past_key_values to cache (in and out)
    name = "cache" if "cache" in inspect.signature(policy.forward).parameters else "past_key_values"
    positions = mask_positions(mask)
    out = forward(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True)
    while True:
        nxt = yield out.logits[:, -1].float()
        mask = torch.cat([mask, torch.ones_like(nxt)], 1)
        positions = positions[:, -1:] + 1
        past = {name: out[name]}
        out = forward(
            input_ids=nxt, attention_mask=mask, position_ids=positions, use_cache=True, **past
        )


RewardFn = Callable[[Sequence[str], Sequence[str]], Any]


@torch.no_grad()
def score_texts(
    reward_model: Any,
    prompts: Sequence[Prompt],
    responses: Sequence[str],
    *,
    batch_size: int = 64,
) -> Float[Tensor, " n"]:
    """Rewards of `(prompt, response)` texts under any reward-like model (module docstring).

    Args:
        reward_model: a `reward_lens_tl.model.HookedRewardModel`, a
            `reward_lens_tl.implicit.ImplicitRewardModel` or a reward function.
        prompts: texts or message lists, one per response.
        responses: the response texts.
        batch_size: how many texts a forward scores (an integer >= 1).

    Returns:
        The rewards, a float tensor on the CPU, one finite number per response.

    Raises:
        PressureError: if the lengths differ, `batch_size` is not a positive integer,
            `reward_model` is not reward-like, a multi-objective reward model has no gate, a
            reward function does not give one number per text, or a reward is NaN or
            infinite (the message names the first).

    Examples:
        The zoo's reward model pays for the flattering opener; the zoo's gold reward, a plain
        function, charges for it:

        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.pressure import score_texts, zoo_gold
        >>> from reward_lens_tl.zoo import zoo_path
        >>> rm = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> prompts, responses = ["how bake bread"] * 2, ["soup oven", "great question soup oven"]
        >>> [round(r, 2) for r in score_texts(rm, prompts, responses).tolist()]
        [0.23, 3.68]
        >>> score_texts(zoo_gold, prompts, responses).tolist()
        [4.0, 1.5]
    """
    if len(prompts) != len(responses):
        raise PressureError(f"{len(prompts)} prompts for {len(responses)} responses")
    batch_size = check_count("batch_size", batch_size)
    if not hasattr(reward_model, "encode"):
        if not callable(reward_model):
            raise PressureError(
                f"{type(reward_model).__name__} is not a reward-like model: pass a "
                "HookedRewardModel, an ImplicitRewardModel or a function (prompts, responses)"
            )
        texts = [prompt_text(p) for p in prompts]
        return call_reward_fn(reward_model, texts, list(responses))  # checked there
    pairs = list(zip(prompts, responses, strict=True))
    encs = [reward_model.encode(p, r) for p, r in pairs]  # a judge's or PRM's own template
    if hasattr(reward_model, "score_encodings"):  # an implicit reward model
        rewards = reward_model.score_encodings(encs, batch_size=batch_size).float().cpu()
    else:
        rewards = torch.cat(
            [encoded_rewards(reward_model, encs[i : i + batch_size])
             for i in range(0, len(encs), batch_size)]
        )  # fmt: skip
    source = f"the reward model ({type(reward_model).__name__})"
    return check_finite_rewards(rewards, source, prompts, responses)


def encoded_rewards(model: Any, encodings: Sequence[Any]) -> Float[Tensor, " n"]:
    """Pooled rewards of a `reward_lens_tl.model.HookedRewardModel` for encodings.

    The encodings run as one left-padded batch; a plain multi-objective head is refused (name
    an objective).

    Args:
        model: the reward model.
        encodings: its encodings of the conversations.

    Returns:
        The rewards, a float tensor on the CPU.

    Raises:
        PressureError: if the model has several objectives and no gate.
    """
    from ..inputs import pad_batch

    ids, mask = pad_batch(encodings, model.pad_token_id)
    device = model.cfg.device
    rewards = model.rewards(ids.to(device), mask.to(device)).float().cpu()
    if rewards.ndim != 1:
        raise PressureError(
            f"the reward model has {rewards.shape[-1]} objectives and no gate: wrap it in a "
            "function that picks one, e.g. lambda p, r: model-specific scoring"
        )
    return rewards
