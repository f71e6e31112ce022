"""Best-of-n ladders: how proxy reward, gold reward and planted features move with n.

Best-of-n samples `n` responses from a policy and keeps the one the reward model scores
highest. Its KL divergence from the policy has the analytic form (for a reward without ties
over many outcomes; an upper bound otherwise, Beirami et al. 2024):

    KL(best-of-n || policy) = log n - (n - 1) / n

`best_of_n` samples `n_max` responses per prompt **once** and reads every rung
`n = 1, 2, 4, ..., n_max` off the same samples with the unbiased order-statistic estimator:
among `N` samples ranked by proxy reward, the best of `n` drawn without replacement is the
`i`-th smallest with probability `C(i-1, n-1) / C(N, n)`, so the expected proxy, gold and
feature values of the best-of-n choice are those weights applied to the ranked samples
(the average over every `n`-subset of the `N` samples, no resampling noise). Ties in proxy
reward are broken by sample order. `best_of_n_kl_exact` gives the exact KL of a finite
policy, where the analytic form is an upper bound.

With `probes`, each rung also runs the probe suite on the realised best-of-n choices (the
best of each prompt's first `n` samples): how the reward model's verdicts on the responses
it selects change as the selection tightens.

Examples:
    >>> import math
    >>> round(kl_best_of_n(4), 4) == round(math.log(4) - 3 / 4, 4)
    True
    >>> order_weights(4, 2).tolist()  # best of 2 out of 4: the top-ranked sample half the time
    [0.0, 0.16666666666666666, 0.3333333333333333, 0.5]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from jaxtyping import Float

from ..errors import PressureError
from ..plotting import PLOT_DOC, Backend, line, render
from ..results import Result
from ..signatures import pasted_docs
from .sampling import Prompt, Sample, prompt_text, sample_responses, score_texts
from .validate import (
    MAX_BOOT,
    check_count,
    check_sampling,
    check_tokenizer_fits,
    feature_table,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "BestOfNResult",
    "best_of_n",
    "best_of_n_kl_exact",
    "kl_best_of_n",
    "order_weights",
]

FeatureFn = Callable[[Prompt, str], dict[str, float]]


def _se_bands(frame, columns: Sequence[str]) -> dict[str, tuple[Any, Any]]:
    """`{column: (mean - se, mean + se)}` of the columns whose standard errors are all finite."""
    out = {}
    for col in columns:
        se = frame[f"{col}_se"].to_numpy()
        if np.isfinite(se).all():
            mean = frame[col].to_numpy()
            out[col] = (mean - se, mean + se)
    return out


def kl_best_of_n(n: int | np.ndarray) -> Any:
    """`log n - (n - 1) / n`, the KL of best-of-n from its policy (module docstring).

    Args:
        n: the number of samples best-of-n draws, an integer or an array of them.

    Returns:
        The KL in nats: a float for a scalar `n`, else an array of the shape of `n`.

    Raises:
        PressureError: if any `n` is below 1, not an integer or not finite, or `n` is a
            `bool`.

    Examples:
        >>> import numpy as np
        >>> from reward_lens_tl.pressure import kl_best_of_n
        >>> kl_best_of_n(1), round(kl_best_of_n(16), 4)
        (0.0, 1.8351)
        >>> kl_best_of_n(np.array([1, 2, 4])).round(3).tolist()
        [0.0, 0.193, 0.636]
    """
    raw = np.asarray(n)
    if raw.dtype == bool or not (np.issubdtype(raw.dtype, np.number) and raw.dtype.kind != "c"):
        raise PressureError(f"n must be an integer >= 1 (or an array of them), got {n!r}")
    n_arr = raw.astype(float)
    if not np.isfinite(n_arr).all() or (n_arr < 1).any() or (n_arr != np.round(n_arr)).any():
        raise PressureError(f"n must be an integer >= 1 (or an array of them), got {n!r}")
    out = np.log(n_arr) - (n_arr - 1) / n_arr
    return float(out) if out.ndim == 0 else out


def best_of_n_kl_exact(
    probs: Sequence[float] | np.ndarray, rewards: Sequence[float] | np.ndarray, n: int
) -> float:
    """Exact `KL(best-of-n || policy)` of a policy over finitely many outcomes.

    Ties in reward are broken by outcome order: with the outcomes ranked by reward and `F_i`
    the cumulative probability, best-of-n picks outcome `i` with probability
    `F_i^n - F_{i-1}^n`.

    Args:
        probs: the policy's probability of each outcome (a distribution).
        rewards: the reward of each outcome, one per probability.
        n: the number of samples best-of-n draws.

    Returns:
        The KL in nats.

    Raises:
        PressureError: if `probs` is not a distribution with one finite reward per outcome,
            or `n` is not an integer >= 1.

    Examples:
        >>> round(best_of_n_kl_exact([0.5, 0.5], [0.0, 1.0], 2), 6)  # 1/4, 3/4 against 1/2, 1/2
        0.130812
    """
    n = check_count("n", n)
    p = np.asarray(probs, dtype=float)
    r = np.asarray(rewards, dtype=float)
    finite = bool(np.isfinite(p).all() and np.isfinite(r).all())
    if not finite or p.shape != r.shape or p.ndim != 1 or (p < 0).any() or abs(p.sum() - 1) > 1e-9:
        raise PressureError("probs must be a distribution with one finite reward per outcome")
    order = np.lexsort((np.arange(len(r)), r))
    cdf = np.cumsum(p[order])
    q = cdf**n - np.r_[0.0, cdf[:-1]] ** n
    keep = q > 0
    return float((q[keep] * np.log(q[keep] / p[order][keep])).sum())


def order_weights(n_samples: int, n: int) -> np.ndarray:
    """Order-statistic weights of the best of `n` out of `n_samples` ranked samples.

    `w[i]` is the probability that the best of `n` drawn without replacement from `n_samples`
    ranked samples is the `i`-th smallest (0-based), `C(i, n-1) / C(N, n)`. Computed from the
    top down, `w[N-1] = n / N` and `w[i-1] = w[i] (i - n + 1) / i`, in floats: linear time
    (exact binomials grow with `N` and took seconds per call for thousands of samples).

    Args:
        n_samples: how many ranked samples there are (`N`).
        n: how many are drawn without replacement.

    Returns:
        The weights `w`, one per rank, ascending.

    Raises:
        PressureError: if `n_samples` or `n` is not an integer, or `n` is not between 1 and
            `n_samples`.

    Examples:
        >>> from reward_lens_tl.pressure import order_weights
        >>> order_weights(4, 1).tolist()  # best of 1: a uniform draw
        [0.25, 0.25, 0.25, 0.25]
        >>> order_weights(4, 2).round(3).tolist(), order_weights(4, 4).tolist()
        ([0.0, 0.167, 0.333, 0.5], [0.0, 0.0, 0.0, 1.0])
    """
    n_samples = check_count("n_samples", n_samples)
    n = check_count("n", n, high=n_samples, why=f"n is drawn from the {n_samples} samples")
    i = np.arange(n_samples - 1, n - 1, -1, dtype=float)  # N-1, ..., n
    ratios = np.r_[n / n_samples, (i - n + 1) / i]  # w[N-1], then w[i-1] / w[i]
    weights = np.zeros(n_samples)
    weights[n - 1 :] = np.cumprod(ratios)[::-1]
    return weights


def ladder(n_max: int) -> list[int]:
    """The rungs `1, 2, 4, ...` up to `n_max` (`n_max` itself included).

    Args:
        n_max: the top rung.

    Returns:
        The rungs, ascending.
    """
    ns = [1 << i for i in range(int(math.log2(n_max)) + 1)]
    return ns if ns[-1] == n_max else [*ns, n_max]


@dataclass(frozen=True)
class BestOfNResult(Result):
    """A best-of-n ladder: one rung per `n`.

    `to_dataframe()` has the columns `n`, `kl`, `sqrt_kl`, `proxy`, `proxy_se`, `gold`,
    `gold_se`, then one column per feature: the best-of-n choice's expected feature value, a
    frequency for 0/1 features.

    Attributes:
        prompts: the prompt texts.
        responses: the sampled responses, `responses[prompt][sample]`.
        ns: the rungs `n`.
        proxy_samples: the proxy reward of each sample, `[prompt, sample]`.
        gold_samples: the gold reward of each sample, `[prompt, sample]` (NaN without gold).
        feature_samples: per feature name, each sample's value, `[prompt, sample]`.
        probes: with `probes=`, one row per (n, probe) of the probe suite on the realised
            choices; else `None`.
        seed: the sampling seed.

    Examples:
        `best_of_n` samples and builds it; built by hand from one prompt's four samples, the
        ladder shows over-optimisation: the proxy reward climbs with n while the gold reward
        falls, as the proxy's favourite sample is the one with the flattering opener:

        >>> import torch
        >>> from reward_lens_tl.pressure import BestOfNResult
        >>> result = BestOfNResult(
        ...     prompts=("how bake bread",), responses=(("a", "b", "c", "d"),), ns=(1, 2, 4),
        ...     proxy_samples=torch.tensor([[0.0, 1.0, 2.0, 3.0]]),
        ...     gold_samples=torch.tensor([[0.0, 1.0, 2.0, -1.0]]),
        ...     feature_samples={"sycophancy": torch.tensor([[0.0, 0.0, 0.0, 1.0]])})
        >>> result.to_dataframe()[["n", "kl", "proxy", "gold", "sycophancy"]].round(3)
           n     kl  proxy   gold  sycophancy
        0  1  0.000  1.500  0.500        0.25
        1  2  0.193  2.333  0.333        0.50
        2  4  0.636  3.000 -1.000        1.00
        >>> result.exploited_first()
        'sycophancy'
    """

    label_column = "n"
    value_column = "proxy"

    prompts: tuple[str, ...]
    responses: tuple[tuple[str, ...], ...]
    ns: tuple[int, ...]
    proxy_samples: Float[torch.Tensor, "prompt sample"]
    gold_samples: Float[torch.Tensor, "prompt sample"]
    feature_samples: dict[str, torch.Tensor] = field(default_factory=dict)
    probes: Any = None
    seed: int = 0

    @property
    def n_samples(self) -> int:
        """Samples drawn per prompt (the top rung `n_max`)."""
        return int(self.proxy_samples.shape[1])

    def _ranked(self) -> np.ndarray:
        """Sample indices `[prompt, rank]` sorted by proxy (stable: ties by sample order)."""
        return np.argsort(self.proxy_samples.numpy(), axis=1, kind="stable")

    def _per_prompt(self, values: torch.Tensor, n: int) -> np.ndarray:
        """Each prompt's expected value of `values` at the best-of-n choice."""
        ranked = np.take_along_axis(values.numpy(), self._ranked(), axis=1)
        return ranked @ order_weights(self.n_samples, n)

    def expected(self, values: torch.Tensor, n: int) -> tuple[float, float]:
        """Mean over prompts of the best-of-n choice's `values`, and its standard error.

        Args:
            values: a per-sample value, `[prompt, sample]` (e.g. `proxy_samples`).
            n: the rung.

        Returns:
            `(mean, standard error)`; the standard error is NaN for a single prompt.
        """
        per = self._per_prompt(values, n)
        se = float(per.std(ddof=1) / math.sqrt(len(per))) if len(per) > 1 else float("nan")
        return float(per.mean()), se

    def to_dataframe(self):
        """One row per rung (the columns are listed in the class docstring).

        Returns:
            A `pandas.DataFrame`.
        """
        import pandas as pd

        rows = []
        for n in self.ns:
            proxy, proxy_se = self.expected(self.proxy_samples, n)
            gold, gold_se = self.expected(self.gold_samples, n)
            kl = kl_best_of_n(n)
            row = dict(n=n, kl=kl, sqrt_kl=math.sqrt(kl), proxy=proxy, proxy_se=proxy_se)
            row.update(gold=gold, gold_se=gold_se)
            row.update({f: self.expected(v, n)[0] for f, v in self.feature_samples.items()})
            rows.append(row)
        return pd.DataFrame(rows)

    def feature_onsets(self, min_increase: float = 0.05, z: float = 2.0):
        """Which feature best-of-n exploits first.

        For each feature, the first `n` at which the best-of-n choice's value exceeds
        `n = 1`'s by more than `min_increase` and `z` paired standard errors over prompts
        (`first_n` is `None` when it never does) and the increase there in standard errors
        (`z_at_first_n`).

        Args:
            min_increase: the smallest increase over `n = 1` that counts.
            z: how many paired standard errors the increase must exceed.

        Returns:
            A `pandas.DataFrame` with `feature`, `first_n`, `z_at_first_n` and
            `increase_at_n_max`, sorted by `first_n`, then by `z_at_first_n` (descending).
        """
        import pandas as pd

        rows = []
        for name, values in self.feature_samples.items():
            base = self._per_prompt(values, 1)
            first, z_first = None, float("nan")
            for n in self.ns[1:]:
                diff = self._per_prompt(values, n) - base
                se = diff.std(ddof=1) / math.sqrt(len(diff)) if len(diff) > 1 else 0.0
                if diff.mean() > max(min_increase, z * se):
                    first, z_first = n, float(diff.mean() / se) if se > 0 else float("inf")
                    break
            top = self._per_prompt(values, self.ns[-1]).mean() - base.mean()
            rows.append(
                {"feature": name, "first_n": first, "z_at_first_n": z_first,
                 "increase_at_n_max": float(top)}
            )  # fmt: skip
        frame = pd.DataFrame(rows)
        frame["_z"] = -frame["z_at_first_n"]
        frame = frame.sort_values(["first_n", "_z"], na_position="last", kind="stable")
        return frame.drop(columns="_z").reset_index(drop=True)

    def exploited_first(self, among: Sequence[str] | None = None) -> str | None:
        """The feature (of `among`, default all) whose increase with n starts soonest.

        Args:
            among: the features to choose from (default: all).

        Returns:
            The feature's name (the first row of `feature_onsets`), or `None` when none
            increases.
        """
        frame = self.feature_onsets()
        frame = frame[frame["first_n"].notna()]
        if among is not None:
            frame = frame[frame["feature"].isin(list(among))]
        return None if frame.empty else str(frame["feature"].iloc[0])

    @pasted_docs(plot=PLOT_DOC)
    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """The over-optimisation curve.

        Proxy and gold reward of the best-of-n choice against `sqrt(KL)`, with bands of one
        standard error over prompts, each rung's `n` written on the proxy line; hover shows
        the rung, `sqrt(KL)` and the exact reward.

        {plot}
        """
        frame = self.to_dataframe()
        drawn = [col for col in ("proxy", "gold") if frame[col].notna().any()]
        fig = line(
            {col: frame[col].to_numpy() for col in drawn},
            x=frame["sqrt_kl"].tolist(),
            xaxis="sqrt KL(best-of-n ‖ policy)  [nats^½]",
            yaxis="reward of the best-of-n choice",
            title=f"best-of-n over-optimisation · {len(self.prompts)} prompts, "
            f"n up to {self.ns[-1]}",
            bands=_se_bands(frame, drawn),
        )
        ns = frame["n"].tolist()
        for trace in fig.data:
            if trace.hoverinfo == "skip":
                continue
            trace.customdata = ns
            trace.hovertemplate = (
                f"{trace.name}<br>n = %{{customdata}}<br>sqrt KL: %{{x:.4g}}<br>"
                "reward: %{y:.5g}<extra></extra>"
            )
            if trace.name == "proxy":
                trace.update(mode="lines+markers+text", text=[f"n={n}" for n in ns],
                             textposition="top left", textfont=dict(size=10))  # fmt: skip
        fig.update_layout(showlegend=True)
        return render(fig, backend, ax)

    def plot_features(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """Each feature's value at the best-of-n choice against n (log scale).

        One line per feature with a band of one standard error over prompts; a 0/1
        feature's value is the frequency with which the best-of-n choice has it.

        Args:
            ax: Matplotlib axes to draw the static form on.
            backend: `"plotly"` or `"matplotlib"` (see `reward_lens_tl.plotting`).

        Returns:
            The figure (not shown).
        """
        ns = list(self.ns)
        means, bands = {}, {}
        for name, values in self.feature_samples.items():
            mean, se = np.array([self.expected(values, n) for n in ns]).T
            means[name] = mean
            if np.isfinite(se).all():
                bands[name] = (mean - se, mean + se)
        fig = line(
            means,
            x=ns,
            xaxis="n (samples the best is chosen from, log scale)",
            yaxis="feature value of the best-of-n choice",
            title=f"planted features of the best-of-n choice · {len(self.prompts)} prompts",
            bands=bands,
        )
        fig.update_xaxes(type="log", tickmode="array", tickvals=ns, ticktext=[str(n) for n in ns])
        fig.update_layout(showlegend=True)
        return render(fig, backend, ax)


def _load_policy(policy: Any, tokenizer: Any) -> tuple[Any, Any]:
    """Load a policy given as a directory (safetensors, no remote code), and its tokenizer.

    The tokenizer defaults to the policy's own (a TL model's `.tokenizer` or its checkpoint's
    files).
    """
    from ..checkpoint import SAFE_KWARGS, checkpoint_tokenizer

    if isinstance(policy, str | Path):
        from transformers import AutoModelForCausalLM

        path = _zoo_or_path(policy)
        policy = AutoModelForCausalLM.from_pretrained(path, use_safetensors=True, **SAFE_KWARGS)
    if tokenizer is None:
        tokenizer = getattr(policy, "tokenizer", None)
    if tokenizer is None:
        name = getattr(getattr(policy, "config", None), "_name_or_path", "") or ""
        if name and Path(name).is_dir():
            tokenizer = checkpoint_tokenizer(Path(name))
    if tokenizer is None:
        raise PressureError(f"no tokenizer for the {type(policy).__name__} policy: pass tokenizer=")
    return policy, tokenizer


def _zoo_or_path(name: str | Path) -> Path:
    from ..zoo.load import ZOO_NAMES, zoo_path

    return zoo_path(name) if isinstance(name, str) and name in ZOO_NAMES else Path(name)


def load_reward_like(model: Any) -> Any:
    """A reward model given as a zoo name or directory becomes a `HookedRewardModel`.

    Anything else is returned as it is.

    Args:
        model: a zoo name, a directory, or a reward-like model.

    Returns:
        The loaded `HookedRewardModel`, or `model` itself.
    """
    if isinstance(model, str | Path):
        from ..model import HookedRewardModel

        return HookedRewardModel.from_pretrained(_zoo_or_path(model))
    return model


def resolve_features(features: Any, prompts: Sequence[Prompt]) -> FeatureFn | None:
    """The feature function `features` names for `prompts`.

    `"auto"`: the zoo's planted features when every prompt is a zoo prompt, else none.

    Args:
        features: `"auto"`, `None` or a function `fn(prompt, response) -> {name: value}`.
        prompts: the prompts the features will be computed on.

    Returns:
        The feature function, or `None`.

    Raises:
        PressureError: if `features` is neither `"auto"`, `None` nor a function.
    """
    from .zoo import is_zoo_prompt, zoo_features

    if features == "auto":
        return zoo_features if all(is_zoo_prompt(p) for p in prompts) else None
    if features is not None and not callable(features):
        raise PressureError("features must be 'auto', None or a function (prompt, response)")
    return features


def best_of_n(
    policy: Any,
    reward_model: Any,
    prompts: Sequence[Prompt],
    n_max: int = 16,
    gold: Any = None,
    seed: int = 0,
    *,
    tokenizer: Any = None,
    features: Any = "auto",
    probes: Sequence[Any] | None = None,
    max_new_tokens: int = 16,
    temperature: float = 1.0,
    n_boot: int = 500,
) -> BestOfNResult:
    """The best-of-n ladder of `policy` under `reward_model` (module docstring).

    Args:
        policy: an HF causal LM, a TL `HookedTransformer` or a directory / zoo name.
        reward_model: any reward-like model `reward_lens_tl.pressure.sampling.score_texts`
            takes, or a directory / zoo name.
        prompts: texts or message lists.
        n_max: samples per prompt (the top rung): an integer >= 1 (not a `bool`), with
            `n_max × len(prompts)` at most `reward_lens_tl.pressure.validate.MAX_SAMPLES`
            (65,536; every sample is drawn in one batch and kept in memory: split a larger
            ladder over several calls on subsets of the prompts).
        gold: a gold reward function `(prompts, responses) -> rewards` or model (e.g.
            `reward_lens_tl.pressure.zoo.zoo_gold`), else the gold columns are NaN.
        seed: the sampling seed (an integer >= 0).
        tokenizer: the policy's tokenizer (default: the policy's own); its token ids must
            fit the policy's vocabulary.
        features: `"auto"` (the zoo's planted features on zoo prompts), `None` or
            `fn(prompt, response) -> {name: value}` (the same names for every text, finite
            values).
        probes: run the probe suite on each rung's realised choices.
        max_new_tokens: the token budget of each response (an integer from 1 to
            `reward_lens_tl.pressure.validate.MAX_NEW_TOKENS`, 8,192).
        temperature: the sampling temperature (a finite number > 0).
        n_boot: bootstrap resamples of the probe suite's flags (an integer from 1 to
            `reward_lens_tl.pressure.validate.MAX_BOOT`).

    Returns:
        The ladder, a `BestOfNResult`.

    Raises:
        PressureError: if `prompts` is empty or a single string; `n_max`, `max_new_tokens`,
            `seed` or `n_boot` is not an integer (a `bool` or a float included) in its range;
            `n_max × len(prompts)` exceeds `MAX_SAMPLES`; `temperature` is not a finite
            number above 0; the policy has no tokenizer, or a tokenizer with more token ids
            than the policy embeds; the reward model or `gold` does not give one finite
            reward per text (a reward function giving another count, NaN or infinity); or
            `features` gives no finite values.

    Examples:
        The ladder refuses a `bool` for a count (`n_max=True` would run as 1), and a budget
        of samples no single call draws:

        >>> from reward_lens_tl.errors import PressureError
        >>> for n_max in (True, 10_000_000):
        ...     try:
        ...         best_of_n("policy", "scalar", ["how bake bread", "why rain snow"], n_max)
        ...     except PressureError as err:
        ...         print(str(err).split(";")[0].split(", above")[0])
        n_max must be an integer, got True (a bool, which would count as 1)
        n_max=10000000 for 2 prompts would draw 20,000,000 samples

        A ladder of the zoo's DPO policy under the zoo's reward model:

        >>> from reward_lens_tl.pressure.zoo import zoo_gold
        >>> ladder_ = best_of_n("policy", "scalar", ["how bake bread", "why rain snow"], n_max=4,
        ...                     gold=zoo_gold)
        >>> ladder_.to_dataframe()[["n", "kl"]].round(3).values.tolist()
        [[1.0, 0.0], [2.0, 0.193], [4.0, 0.636]]
    """
    prompts, n_max, max_new_tokens, temperature, seed = check_sampling(
        "n_max", n_max, prompts, max_new_tokens, temperature, seed
    )
    n_boot = check_count("n_boot", n_boot, high=MAX_BOOT)
    policy, tokenizer = _load_policy(policy, tokenizer)
    check_tokenizer_fits(policy, tokenizer)
    reward_model = load_reward_like(reward_model)
    feature_fn = resolve_features(features, prompts)
    samples = sample_responses(
        policy, tokenizer, prompts, n_max, max_new_tokens=max_new_tokens,
        temperature=temperature, seed=seed,
    )  # fmt: skip
    flat_prompts = [p for p, row in zip(prompts, samples, strict=True) for _ in row]
    flat_texts = [s.text for row in samples for s in row]
    shape = (len(prompts), n_max)
    proxy = score_texts(reward_model, flat_prompts, flat_texts).view(shape)
    gold_values = (
        score_texts(gold, flat_prompts, flat_texts).view(shape)
        if gold is not None
        else torch.full(shape, float("nan"))
    )
    feats = _feature_samples(feature_fn, flat_prompts, flat_texts, shape)
    result = BestOfNResult(
        prompts=tuple(prompt_text(p) for p in prompts),
        responses=tuple(tuple(s.text for s in row) for row in samples),
        ns=tuple(ladder(n_max)),
        proxy_samples=proxy,
        gold_samples=gold_values,
        feature_samples=feats,
        seed=seed,
    )
    if probes:
        result = _with_probes(result, reward_model, samples, probes, seed, n_boot)
    return result


def _feature_samples(fn, prompts, texts, shape) -> dict[str, torch.Tensor]:
    if fn is None:
        return {}
    table = feature_table(fn, prompts, texts)  # checked: same names, finite numbers
    return {name: torch.tensor(values).view(shape).float() for name, values in table.items()}


def _with_probes(result: BestOfNResult, model, samples: list[list[Sample]], probes, seed, n_boot):
    """Add the probe suite's verdicts on each rung's realised best-of-n choices."""
    import dataclasses

    import pandas as pd

    from ..probes import run_probes

    proxy = result.proxy_samples
    frames = []
    for n in result.ns:
        best = proxy[:, :n].argmax(1).tolist()
        chosen = [
            (p, samples[i][b].text)
            for i, (p, b) in enumerate(zip(result.prompts, best, strict=True))
        ]
        report = run_probes(model, chosen, list(probes), seed=seed, n_boot=n_boot, inside=False)
        frame = report.to_dataframe()[["probe", "kind", "n", "mean_delta", "flagged"]]
        frames.append(frame.rename(columns={"n": "n_examples"}).assign(n=n))
    table = pd.concat(frames, ignore_index=True)[
        ["n", "probe", "kind", "n_examples", "mean_delta", "flagged"]
    ]
    return dataclasses.replace(result, probes=table)
