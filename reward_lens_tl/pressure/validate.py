"""Checks of what the pressure package is given: counts, reward functions, tokenizers.

Internal (no public names): used by `reward_lens_tl.pressure`'s ladders, monitor and sampling.

`best_of_n`, `sample_responses`, `score_texts` and `RewardLensCallback` run these checks on
their inputs before any work; each failure is a `reward_lens_tl.errors.PressureError` whose
message says what was wrong and what to pass instead.

- **Counts** (`n_max`, `samples_per_prompt`, `max_new_tokens`, `every`, bootstrap counts):
  a true integer (a `bool` or a float is refused, not read as a number), at least 1, and at
  most a documented bound.
- **The sample budget**: one call draws at most `MAX_SAMPLES` (65,536) samples,
  `n × prompts` (`best_of_n`'s `n_max`, the callback's `samples_per_prompt`). Every sample of
  a call is generated in one left-padded batch and kept in memory with its text, token ids and
  rewards; a larger ladder is several calls on subsets of the prompts.
- **Token budgets**: at most `MAX_NEW_TOKENS` (8,192) new tokens per response (each one is
  a forward of the whole batch).
- **Reward functions** must give exactly one finite number per text (a `bool` is read as
  1.0 / 0.0, e.g. a correctness check); **feature functions** one mapping of finite numbers
  per text, with the same names every time.
- **Tokenizer against policy**: a tokenizer whose token ids reach past the policy's
  vocabulary (its input embeddings) is refused up front, before a prompt or pad id indexes
  past the embedding matrix.

Examples:
    >>> from reward_lens_tl.errors import PressureError
    >>> from reward_lens_tl.pressure.validate import check_count, check_sample_budget
    >>> check_count("n_max", 16)
    16
    >>> try:
    ...     check_count("n_max", True)
    ... except PressureError as err:
    ...     print(str(err).split(";")[0])
    n_max must be an integer, got True (a bool, which would count as 1)
    >>> try:
    ...     check_sample_budget("n_max", 10_000_000, 2)
    ... except PressureError as err:
    ...     print(str(err).split(":")[0])
    n_max=10000000 for 2 prompts would draw 20,000,000 samples, above the limit of 65,536 per call
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..errors import PressureError, RewardLensError

__all__: list[str] = []

MAX_SAMPLES = 65_536
"""The most samples one call draws (`n × prompts`): they are generated in one batch."""

MAX_NEW_TOKENS = 8_192
"""The largest token budget of one sampled response."""

MAX_BOOT = 1_000_000
"""The most bootstrap resamples a probe verdict may ask for."""


def check_count(
    name: str, value: Any, *, low: int = 1, high: int | None = None, why: str = ""
) -> int:
    """`value` as an `int`, if it is a true integer in `[low, high]`.

    Args:
        name: the argument's name, for the message.
        value: what was given.
        low: the smallest valid value.
        high: the largest valid value (`None`: no bound).
        why: the reason for `high`, appended to the message.

    Returns:
        `value` as a Python `int`.

    Raises:
        PressureError: if `value` is a `bool`, not an integer (a float included) or outside
            `[low, high]`.

    Examples:
        >>> import numpy as np
        >>> from reward_lens_tl.pressure.validate import check_count
        >>> check_count("every", np.int64(5)), check_count("seed", 0, low=0)
        (5, 0)
        >>> try:
        ...     check_count("every", 2.0)
        ... except ValueError as err:
        ...     print(err)
        every must be an integer, got 2.0 (a float); pass an int, e.g. every=2
    """
    if isinstance(value, bool | np.bool_):
        raise PressureError(
            f"{name} must be an integer, got {bool(value)!r} (a bool, which would count as "
            f"{int(value)}); pass an int >= {low}"
        )
    if not isinstance(value, numbers.Integral):
        hint = f"an int >= {low}"
        real = float(value) if isinstance(value, numbers.Real) else math.nan
        if math.isfinite(real) and real.is_integer():
            hint = f"an int, e.g. {name}={int(real)}"
        raise PressureError(f"{name} must be an integer, got {_describe(value)}; pass {hint}")
    number = int(value)
    if number < low:
        raise PressureError(f"{name} must be >= {low}, got {number}")
    if high is not None and number > high:
        reason = f": {why}" if why else ""
        raise PressureError(f"{name}={number} is above the limit of {high:,}{reason}")
    return number


def check_positive(name: str, value: Any) -> float:
    """`value` as a `float`, if it is a finite real number above 0 (not a `bool`).

    Args:
        name: the argument's name, for the message.
        value: what was given.

    Returns:
        `value` as a Python `float`.

    Raises:
        PressureError: if `value` is a `bool`, not a real number, not finite or not above 0.

    Examples:
        >>> from reward_lens_tl.pressure.validate import check_positive
        >>> check_positive("temperature", 0.7)
        0.7
    """
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise PressureError(f"{name} must be a number > 0, got {value!r} ({type(value).__name__})")
    number = float(value)
    if not (math.isfinite(number) and number > 0):
        raise PressureError(f"{name} must be a finite number > 0, got {value!r}")
    return number


def check_prompts(prompts: Any, name: str = "prompts") -> list[Any]:
    """`prompts` as a list, if it is a non-empty sequence of prompts (not one string).

    Args:
        prompts: what was given.
        name: the argument's name, for the message.

    Returns:
        The prompts, a list.

    Raises:
        PressureError: if `prompts` is a string, not a sequence, or empty.

    Examples:
        >>> from reward_lens_tl.pressure.validate import check_prompts
        >>> check_prompts(("how bake bread",))
        ['how bake bread']
    """
    if isinstance(prompts, str | bytes) or not isinstance(prompts, Sequence) or not prompts:
        raise PressureError(
            f"{name} must be a non-empty list of prompts (texts or message lists), got "
            f"{_describe(prompts)}; wrap a single prompt in a list"
        )
    return list(prompts)


def check_sample_budget(name: str, n: int, n_prompts: int) -> None:
    """Refuse a call that would draw more than `MAX_SAMPLES` samples (`n × n_prompts`).

    Args:
        name: the per-prompt count's name (`n_max`, `samples_per_prompt`, `n`).
        n: samples per prompt.
        n_prompts: the number of prompts.

    Raises:
        PressureError: if `n * n_prompts` exceeds `MAX_SAMPLES`; the message gives the number.

    Examples:
        >>> from reward_lens_tl.pressure.validate import MAX_SAMPLES, check_sample_budget
        >>> check_sample_budget("n_max", 64, 32)  # 2,048 samples: fine
        >>> MAX_SAMPLES
        65536
    """
    total = n * n_prompts
    if total > MAX_SAMPLES:
        prompts = "prompt" if n_prompts == 1 else "prompts"
        raise PressureError(
            f"{name}={n} for {n_prompts} {prompts} would draw {total:,} samples, above the "
            f"limit of {MAX_SAMPLES:,} per call: every sample of a call is generated in one "
            f"batch and kept in memory (text, token ids, rewards); lower {name} or split the "
            "prompts over several calls"
        )


def check_max_new_tokens(max_new_tokens: Any) -> int:
    """`max_new_tokens` checked: an integer from 1 to `MAX_NEW_TOKENS`.

    Args:
        max_new_tokens: the token budget of each response.

    Returns:
        The budget.

    Raises:
        PressureError: if it is not an integer (a `bool` or a float included) in its range.

    Examples:
        >>> from reward_lens_tl.pressure.validate import check_max_new_tokens
        >>> check_max_new_tokens(16)
        16
    """
    return check_count(
        "max_new_tokens", max_new_tokens, high=MAX_NEW_TOKENS,
        why="each new token is a forward of the whole batch",
    )  # fmt: skip


def check_sampling(
    name: str, n: Any, prompts: Any, max_new_tokens: Any, temperature: Any, seed: Any
) -> tuple[list[Any], int, int, float, int]:
    """The arguments of a sampling call checked, in the order they are refused.

    The prompts, the per-prompt count `n` (named `name`) and the budget of samples it draws,
    `max_new_tokens`, `temperature` and `seed`.

    Args:
        name: the per-prompt count's name (`n_max`, `n`).
        n: samples per prompt.
        prompts: texts or message lists.
        max_new_tokens: the token budget of each response.
        temperature: the sampling temperature.
        seed: the sampling seed.

    Returns:
        `(prompts, n, max_new_tokens, temperature, seed)`, checked.

    Raises:
        PressureError: as `check_prompts`, `check_count`, `check_sample_budget` and
            `check_positive` raise.

    Examples:
        >>> from reward_lens_tl.pressure.validate import check_sampling
        >>> check_sampling("n", 4, ["how bake bread"], 16, 1.0, 0)
        (['how bake bread'], 4, 16, 1.0, 0)
    """
    prompts = check_prompts(prompts)
    n = check_count(name, n)
    check_sample_budget(name, n, len(prompts))
    max_new_tokens = check_max_new_tokens(max_new_tokens)
    temperature = check_positive("temperature", temperature)
    seed = check_count("seed", seed, low=0)
    return prompts, n, max_new_tokens, temperature, seed


# ---- tokenizer against policy ------------------------------------------------------------------
def policy_vocab_size(policy: Any) -> int | None:
    """How many token ids `policy` embeds, or `None` when it does not say.

    A TransformerLens model's `cfg.d_vocab`; an HF model's input embeddings
    (`get_input_embeddings().num_embeddings`), else its `config.vocab_size`.

    Args:
        policy: a causal LM.

    Returns:
        The vocabulary size, or `None`.

    Examples:
        >>> from reward_lens_tl.pressure.validate import policy_vocab_size
        >>> from reward_lens_tl.testing import tiny_causal_lm
        >>> policy_vocab_size(tiny_causal_lm("llama")[0])
        97
    """
    d_vocab = getattr(getattr(policy, "cfg", None), "d_vocab", None)
    if isinstance(d_vocab, int) and d_vocab > 0:
        return d_vocab
    get_embeddings = getattr(policy, "get_input_embeddings", None)
    if callable(get_embeddings):
        try:
            size = getattr(get_embeddings(), "num_embeddings", None)
        except (AttributeError, NotImplementedError):  # a model without input embeddings
            size = None
        if isinstance(size, int) and size > 0:
            return size
    size = getattr(getattr(policy, "config", None), "vocab_size", None)
    return size if isinstance(size, int) and size > 0 else None


def tokenizer_size(tokenizer: Any) -> int | None:
    """One past the largest token id `tokenizer` can produce, or `None` when it does not say.

    The larger of `len(tokenizer)` (added tokens included) and the largest id of its
    vocabulary plus one.

    Args:
        tokenizer: a tokenizer.

    Returns:
        The number of token ids, or `None`.

    Examples:
        >>> from reward_lens_tl.pressure.validate import tokenizer_size
        >>> from reward_lens_tl.testing import tiny_tokenizer
        >>> tokenizer_size(tiny_tokenizer()), tokenizer_size(tiny_tokenizer(200))
        (97, 200)
    """
    sizes = []
    try:
        sizes.append(int(len(tokenizer)))
    except TypeError:  # no __len__
        pass
    get_vocab = getattr(tokenizer, "get_vocab", None)
    if callable(get_vocab):
        vocab = get_vocab()
        ids = (
            [i for i in vocab.values() if isinstance(i, int)] if isinstance(vocab, Mapping) else []
        )
        if ids:
            sizes.append(max(ids) + 1)
    return max(sizes) if sizes else None


def check_tokenizer_fits(policy: Any, tokenizer: Any) -> None:
    """Refuse a tokenizer whose token ids reach past the policy's vocabulary.

    Such ids (in a prompt, or the pad id of a batch) would index past the policy's embedding
    matrix. A policy or tokenizer that does not say its size is let through.

    Args:
        policy: the causal LM (HF or TransformerLens).
        tokenizer: the tokenizer that encodes its prompts.

    Raises:
        PressureError: if the tokenizer has more token ids than the policy embeds; the
            message gives both sizes.

    Examples:
        >>> from reward_lens_tl.errors import PressureError
        >>> from reward_lens_tl.pressure.validate import check_tokenizer_fits
        >>> from reward_lens_tl.testing import tiny_causal_lm, tiny_tokenizer
        >>> policy, tokenizer = tiny_causal_lm("llama")
        >>> check_tokenizer_fits(policy, tokenizer)  # its own tokenizer: fine
        >>> try:
        ...     check_tokenizer_fits(policy, tiny_tokenizer(200))
        ... except PressureError as err:
        ...     print(str(err).split(":")[0])
        the tokenizer has 200 token ids but the LlamaForCausalLM policy embeds only 97
    """
    vocab, size = policy_vocab_size(policy), tokenizer_size(tokenizer)
    if vocab is None or size is None or size <= vocab:
        return
    raise PressureError(
        f"the tokenizer has {size} token ids but the {type(policy).__name__} policy embeds only "
        f"{vocab}: ids {vocab}..{size - 1} would index past its embedding matrix; pass the "
        "policy's own tokenizer (tokenizer=), or resize the policy's embeddings to the "
        "tokenizer (model.resize_token_embeddings(len(tokenizer)))"
    )


# ---- reward and feature functions --------------------------------------------------------------
def function_name(fn: Any) -> str:
    """A readable name of a function (its qualified name, else its type's name).

    Args:
        fn: a function or callable object.

    Returns:
        The name.

    Examples:
        >>> from reward_lens_tl.pressure.validate import function_name
        >>> from reward_lens_tl.pressure import zoo_gold
        >>> function_name(zoo_gold), function_name(lambda p, r: 0.0)
        ('zoo_gold', '<lambda>')
    """
    inner = getattr(fn, "func", None)  # functools.partial
    if inner is not None and callable(inner):
        return f"partial({function_name(inner)})"
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    return str(name) if name else type(fn).__name__


def as_numbers(raw: Any) -> Tensor | None:
    """`raw` as a flat float32 tensor on the CPU, or `None` when it is not numbers.

    Booleans are read as 1.0 / 0.0.

    Args:
        raw: what a reward function returned.

    Returns:
        The values, flat, or `None`.

    Examples:
        >>> from reward_lens_tl.pressure.validate import as_numbers
        >>> as_numbers([1, 2.5]).tolist(), as_numbers("soup")
        ([1.0, 2.5], None)
    """
    if raw is None or isinstance(raw, str | bytes | Mapping):
        return None
    try:
        values = torch.as_tensor(raw)
    except (TypeError, ValueError, RuntimeError):  # not numbers (or ragged)
        return None
    if values.dtype.is_complex:
        return None
    return values.reshape(-1).float().cpu()


def as_number(raw: Any) -> float | None:
    """`raw` as a `float` if it is one number (a `bool` is 1.0 / 0.0), else `None`.

    A list, even of one element, is not one number.

    Args:
        raw: what a function returned for one pair.

    Returns:
        The number, or `None`.

    Examples:
        >>> from reward_lens_tl.pressure.validate import as_number
        >>> as_number(2), as_number([2.0]), as_number("2")
        (2.0, None, None)
    """
    if isinstance(raw, numbers.Real | np.bool_):
        return float(raw)
    if isinstance(raw, Tensor | np.ndarray) and raw.ndim == 0:
        return as_number(raw.item())
    return None


def check_finite_rewards(
    values: Tensor, source: str, prompts: Sequence[Any], responses: Sequence[str]
) -> Tensor:
    """`values` if every one is finite.

    Args:
        values: the rewards, one per text.
        source: what gave them (e.g. `"reward function zoo_gold"`).
        prompts: the prompts, one per text.
        responses: the responses.

    Returns:
        `values`.

    Raises:
        PressureError: at the first NaN or infinite reward; the message names its index, its
            value, its text and how many are not finite.

    Examples:
        >>> import torch
        >>> from reward_lens_tl.errors import PressureError
        >>> from reward_lens_tl.pressure.validate import check_finite_rewards
        >>> try:
        ...     check_finite_rewards(torch.tensor([1.0, float("nan")]), "reward function f",
        ...                          ["p", "p"], ["a", "b"])
        ... except PressureError as err:
        ...     print(str(err).split(";")[0])
        reward function f gave nan for text 1 of 2 (prompt 'p', response 'b')
    """
    bad = (~torch.isfinite(values)).nonzero().flatten().tolist()
    if bad:
        i = bad[0]
        others = f"; {len(bad)} of the {len(values)} rewards are not finite" if len(bad) > 1 else ""
        raise PressureError(
            f"{source} gave {values[i].item()} for text {i} of {len(values)} (prompt "
            f"{_short(prompts[i])}, response {_short(responses[i])}){others}; a reward must be a "
            "finite number: map failures to a number in the function, or leave those texts out"
        )
    return values


def call_reward_fn(fn: Callable, prompts: list[str], responses: list[str]) -> Tensor:
    """A reward function's one finite reward per text, checked.

    Called on the lists (`fn(prompts, responses) -> one number per response`); when it does
    not take lists (it raises, gives one number or no numbers), it is called once per pair
    (`fn(prompt, response) -> one number`). A single pair is offered as a list of two copies,
    so that a per-pair function's one number is never read as a list's one reward.

    Args:
        fn: the reward function.
        prompts: the prompt texts, one per response.
        responses: the response texts.

    Returns:
        The rewards, a float32 tensor.

    Raises:
        PressureError: if the function gives another number of rewards than texts (on the
            lists, and no number per pair), something that is not a number, a NaN or infinite
            reward, or fails (the cause is chained); errors of this library it raises pass
            through.

    Examples:
        >>> from reward_lens_tl.errors import PressureError
        >>> from reward_lens_tl.pressure.validate import call_reward_fn
        >>> call_reward_fn(lambda p, r: float(len(r)), ["p", "p"], ["ab", "c"]).tolist()
        [2.0, 1.0]
        >>> try:
        ...     call_reward_fn(lambda ps, rs: [1.0, 2.0], ["p"] * 3, ["a", "b", "c"])
        ... except PressureError as err:
        ...     print(str(err).split(";")[0])
        reward function <lambda> gave 2 rewards for 3 texts
    """
    name = f"reward function {function_name(fn)}"
    n = len(prompts)
    times = 2 if n == 1 else 1
    offered = n * times
    try:
        raw = fn(prompts * times, responses * times)
    except Exception as err:  # noqa: BLE001 - maybe a per-pair function given lists
        on_lists = f"{name} raised {type(err).__name__} on the lists of {offered} texts ({err})"
    else:
        values = as_numbers(raw)
        if values is not None and len(values) == offered:
            return check_finite_rewards(values[:n], name, prompts, responses)
        if values is not None and len(values) != 1:
            twice = " (the one pair offered twice)" if times == 2 else ""
            raise PressureError(
                f"{name} gave {len(values)} rewards for {offered} texts{twice}; a reward function "
                "must return one finite number per text: fn(prompts, responses) -> a list as "
                "long as responses, or fn(prompt, response) -> a number"
            )
        on_lists = (
            f"{name} returned {_describe(raw)} for the lists of {offered} texts, not numbers"
            if values is None
            else f"{name} gave 1 reward for {offered} texts (called on the lists)"
        )
    usage = (
        "a reward function is fn(prompts, responses) -> one finite number per response, or "
        "fn(prompt, response) -> a number"
    )
    out = []
    for i, (prompt, response) in enumerate(zip(prompts, responses, strict=True)):
        try:
            value = fn(prompt, response)
        except RewardLensError:
            raise
        except Exception as err:
            raise PressureError(
                f"{on_lists}, and called on one pair it failed on text {i} of {n} (prompt "
                f"{_short(prompt)}, response {_short(response)}): {type(err).__name__}: {err}; "
                f"{usage}"
            ) from err
        number = as_number(value)
        if number is None:
            raise PressureError(
                f"{on_lists}, and called on one pair (text {i}) it returned {_describe(value)}, "
                f"not a number; {usage}"
            )
        out.append(number)
    return check_finite_rewards(torch.tensor(out, dtype=torch.float32), name, prompts, responses)


def feature_table(
    fn: Callable, prompts: Sequence[Any], responses: Sequence[str]
) -> dict[str, list[float]]:
    """A feature function's values, checked: `{name: one finite value per text}`.

    Args:
        fn: `fn(prompt, response) -> {name: value}` (a `bool` value is 1.0 / 0.0).
        prompts: the prompts, one per response.
        responses: the responses.

    Returns:
        Each feature's values, in text order.

    Raises:
        PressureError: if a call gives no mapping, other names than the first call, a value
            that is not a finite number, or fails (the cause is chained).

    Examples:
        >>> from reward_lens_tl.pressure.validate import feature_table
        >>> feature_table(lambda p, r: {"length": len(r.split())}, ["p", "p"], ["a b", "c"])
        {'length': [2.0, 1.0]}
    """
    name = f"feature function {function_name(fn)}"
    table: dict[str, list[float]] = {}
    for i, (prompt, response) in enumerate(zip(prompts, responses, strict=True)):
        where = f"text {i} (prompt {_short(prompt)}, response {_short(response)})"
        try:
            row = fn(prompt, response)
        except RewardLensError:
            raise
        except Exception as err:
            raise PressureError(f"{name} failed on {where}: {type(err).__name__}: {err}") from err
        if not isinstance(row, Mapping):
            raise PressureError(
                f"{name} returned {_describe(row)} for {where}; it must return a mapping "
                "{feature name: number}"
            )
        if i == 0:
            table = {str(k): [] for k in row}
        elif set(map(str, row)) != set(table):
            raise PressureError(
                f"{name} returned the features {sorted(map(str, row))} for {where}, but "
                f"{sorted(table)} for text 0; it must return the same names for every text"
            )
        for key, value in row.items():
            number = as_number(value)
            if number is None or not math.isfinite(number):
                raise PressureError(
                    f"{name} gave {key!r} = {_describe(value)} for {where}; a feature value "
                    "must be a finite number"
                )
            table[str(key)].append(number)
    return table


def _short(text: Any, limit: int = 40) -> str:
    text = repr(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(value: Any) -> str:
    """`value`'s repr (shortened) and its type, for messages."""
    kind = type(value).__name__
    article = "an" if kind[:1] in "aeiou" else "a"
    return f"{_short(value)} ({article} {kind})"
