"""The statistics of the optimal/pessimal-token study, on sweeps or on published score tables.

Every function takes scores as a `pandas.Series` indexed by candidate (a
`reward_lens_tl.sweep.SweepResult` is converted with `as_series`) or, for the
cross-model and cross-prompt comparisons, a `pandas.DataFrame` with one column per model
(or prompt) and one row per candidate. Missing values (NaN) are dropped pairwise: each
comparison uses the candidates both columns have. An infinite score is neither a number nor
missing: it is an error (`reward_lens_tl.errors.InvalidArgumentError`), and a score
file's repeated candidates or infinite cells are refused by `check_score_frame`.
Correlations are `reward_lens_tl.stats`'s (NaN where a column is constant).

Examples:
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"a": [1.0, 2, 3, 4], "b": [1.0, 3, 2, 4], "c": [4.0, 3, 2, 1]})
    >>> kendall_tau_matrix(frame).pairs()
    {'a | b': 0.6666666666666669, 'a | c': -1.0, 'b | c': -0.6666666666666669}
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import stats as sps

from ..errors import EmptyInputError, InvalidArgumentError
from ..plotting import PLOT_DOC, Backend, imshow, render
from ..results import Result, TopK, ranked
from ..signatures import pasted_docs
from ..stats import correlation_test, kendall, pearson, spearman

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "TauMatrix",
    "as_series",
    "distribution_summary",
    "framing_effect",
    "frequency_bias",
    "kendall_tau_matrix",
    "top_bottom",
    "valence_asymmetry",
]

#: Separator of the two column names in a pair key (`"model a | model b"`).
PAIR_SEPARATOR = " | "


def as_series(scores):
    """Scores as a float Series indexed by candidate (from a SweepResult, Series or mapping).

    Args:
        scores: a `SweepResult`, a `pandas.Series` or a mapping of candidate to score.

    Returns:
        The float `pandas.Series`.

    Raises:
        InvalidArgumentError: `scores` is of another type.

    Examples:
        >>> from reward_lens_tl.sweep import as_series
        >>> as_series({"soup": -2.3, "bomb": -7})
        soup   -2.3
        bomb   -7.0
        dtype: float64

        A `SweepResult` becomes its rewards, indexed by candidate label:

        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.sweep import token_sweep
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> as_series(token_sweep(model, "how bake bread", ["soup", "bomb"])).round(3)
        soup   -2.300
        bomb   -7.193
        Name: reward, dtype: float64
    """
    import pandas as pd

    from .sweep_result import SweepResult

    if isinstance(scores, SweepResult):
        return pd.Series(scores.scores.double().numpy(), index=list(scores.labels), name="reward")
    if isinstance(scores, pd.Series):
        return scores.astype(float)
    if isinstance(scores, Mapping):
        return pd.Series(dict(scores), dtype=float)
    raise InvalidArgumentError(
        f"scores must be a SweepResult, a pandas Series or a mapping, not {type(scores).__name__}"
    )


def _valid(series):
    s = as_series(series).dropna()
    if s.empty:
        raise EmptyInputError("no scores (every value is missing)")
    infinite = s[np.isinf(s.to_numpy())]
    if len(infinite):
        raise InvalidArgumentError(
            f"scores of {len(infinite)} candidate(s) are infinite, e.g. "
            f"{dict(list(infinite.items())[:5])}: a score is a number or missing (NaN); fix "
            "or drop them"
        )
    return s


def check_score_frame(frame, name: str = "<frame>") -> None:
    """Refuse a score table whose candidates repeat or that holds an infinite score.

    The table has candidates as rows and one column per model, as
    `reward_lens_tl.sweep.scorefile.read_score_csv` reads it; a repeated candidate would be
    counted twice. Errors name the file, the CSV row (header = row 1) and the column.

    Args:
        frame: the score table.
        name: the file's name, for the errors.

    Raises:
        ScoreFileError: a candidate repeats, or a cell is infinite.

    Examples:
        >>> import pandas as pd
        >>> check_score_frame(pd.DataFrame({"m": [1.0, float("nan")]}, index=["a", "b"]), "s.csv")
    """
    from ..errors import ScoreFileError

    index = frame.index
    if index.has_duplicates:
        dupes = list(dict.fromkeys(index[index.duplicated()]))
        rows = {str(d): [int(i) + 2 for i in np.flatnonzero(index == d)][:5] for d in dupes[:5]}
        raise ScoreFileError(
            f"{name} lists {len(dupes)} candidate(s) more than once ({rows} as name: CSV rows); "
            "each candidate must appear once, or it is counted again: remove the repeats"
        )
    values = frame.to_numpy(dtype=float)
    bad = np.argwhere(np.isinf(values))
    if len(bad):
        row, col = (int(i) for i in bad[0])
        raise ScoreFileError(
            f"{name} row {row + 2}, column {str(frame.columns[col])!r} (candidate "
            f"{str(index[row])!r}) holds {values[row, col]}, and {len(bad) - 1} more infinite "
            "cell(s): a score is a finite number or empty (missing); fix or empty those cells"
        )


def top_bottom(scores, k: int = 10):
    """The `k` highest and `k` lowest candidates.

    Args:
        scores: the scores (see `as_series`).
        k: how many on each side.

    Returns:
        A frame with `side` (`top` or `bottom`), `rank` (1 = most extreme), `candidate` and
        `score`.

    Examples:
        >>> import pandas as pd
        >>> from reward_lens_tl.sweep import top_bottom
        >>> top_bottom(pd.Series({"a": 1.0, "b": 2.0, "c": 3.0, "d": 10.0}), k=2)
             side  rank candidate  score
        0     top     1         d   10.0
        1     top     2         c    3.0
        2  bottom     1         a    1.0
        3  bottom     2         b    2.0
    """
    import pandas as pd

    s = _valid(scores).sort_values(ascending=False, kind="stable")
    top, bottom = s.head(k), s.iloc[::-1].head(k)
    return pd.DataFrame(
        {
            "side": ["top"] * len(top) + ["bottom"] * len(bottom),
            "rank": list(range(1, len(top) + 1)) + list(range(1, len(bottom) + 1)),
            "candidate": list(top.index) + list(bottom.index),
            "score": list(top.values) + list(bottom.values),
        }
    )


def distribution_summary(scores) -> dict[str, float]:
    """Summary statistics of the non-missing scores.

    Args:
        scores: the scores (see `as_series`).

    Returns:
        Count, mean, standard deviation (ddof=1), median, min, max, sample skewness
        (`scipy.stats.skew`) and excess kurtosis (`scipy.stats.kurtosis`, Fisher: a normal
        distribution has 0).

    Examples:
        One large score skews the distribution to the right:

        >>> import pandas as pd
        >>> from reward_lens_tl.sweep import distribution_summary
        >>> summary = distribution_summary(pd.Series({"a": 1.0, "b": 2.0, "c": 3.0, "d": 10.0}))
        >>> {key: round(value, 3) for key, value in summary.items()}
        {'n': 4, 'mean': 4.0, 'std': 4.082, 'median': 2.5, 'min': 1.0, 'max': 10.0,
         'skew': 1.018, 'kurtosis': -0.77}
    """
    v = _valid(scores).to_numpy()
    return {
        "n": int(v.size),
        "mean": float(v.mean()),
        "std": float(v.std(ddof=1)) if v.size > 1 else float("nan"),
        "median": float(np.median(v)),
        "min": float(v.min()),
        "max": float(v.max()),
        "skew": float(sps.skew(v)),
        "kurtosis": float(sps.kurtosis(v)),
    }


def valence_asymmetry(scores, positive: Iterable[str], negative: Iterable[str]) -> dict:
    """Positive/negative asymmetry against a user-supplied lexicon.

    With the median of all scores as the neutral reference: `positive_gain` = mean score of
    the positive words − median, `negative_loss` = median − mean score of the negative words,
    `asymmetry` = `negative_loss − positive_gain` (> 0: negative words are punished more
    than positive ones are rewarded) and `ratio` = loss / gain. `mann_whitney_p` tests
    positive > negative (one-sided). Lexicon words absent from the scores are counted in
    `missing` and ignored.

    Args:
        scores: the scores (see `as_series`).
        positive: the positive words.
        negative: the negative words.

    Returns:
        The statistics above, with `n_positive`, `n_negative` and `median`.

    Raises:
        EmptyInputError: no positive or no negative word is among the candidates.

    Examples:
        The median is 0.5; the positive words score 3.5 above it on average, the negative
        words 5.5 below it ("missing" is not a candidate):

        >>> import pandas as pd
        >>> from reward_lens_tl.sweep import valence_asymmetry
        >>> scores = pd.Series(
        ...     {"good": 3.0, "great": 5.0, "bad": -4.0, "awful": -6.0, "x": 0.0, "y": 1.0}
        ... )
        >>> out = valence_asymmetry(scores, ["good", "great", "missing"], ["bad", "awful"])
        >>> out["positive_gain"], out["negative_loss"], out["asymmetry"], out["missing"]
        (3.5, 5.5, 2.0, 1)
    """
    s = _valid(scores)
    pos_words, neg_words = list(dict.fromkeys(positive)), list(dict.fromkeys(negative))
    pos = s[s.index.isin(pos_words)]
    neg = s[s.index.isin(neg_words)]
    if pos.empty or neg.empty:
        raise EmptyInputError(
            f"the lexicon matches {len(pos)} positive and {len(neg)} negative candidates; both "
            "need at least one (candidate labels must match the lexicon's words exactly)"
        )
    median = float(s.median())
    gain, loss = float(pos.mean()) - median, median - float(neg.mean())
    return {
        "n_positive": len(pos),
        "n_negative": len(neg),
        "missing": len(pos_words) + len(neg_words) - len(pos) - len(neg),
        "median": median,
        "positive_gain": gain,
        "negative_loss": loss,
        "asymmetry": loss - gain,
        "ratio": loss / gain if gain != 0 else float("inf"),
        "mann_whitney_p": float(sps.mannwhitneyu(pos, neg, alternative="greater").pvalue),
    }


def frequency_bias(scores, counts: Mapping[str, float]) -> dict:
    """Rank correlation of the score with log frequency, from user-supplied counts.

    Args:
        scores: the scores (see `as_series`).
        counts: the candidates' counts (e.g. a corpus frequency list).

    Returns:
        Spearman ρ (and its p-value) over the candidates with a positive count, plus the
        Pearson correlation with `log(count)`.

    Raises:
        InvalidArgumentError: an infinite score or count.
        EmptyInputError: fewer than 3 candidates with a positive count.

    Examples:
        Four candidates have a positive count (`x` has none, `y` no count at all); by count
        they rank awful < good < bad < great, by score awful < bad < good < great:

        >>> import pandas as pd
        >>> from reward_lens_tl.sweep import frequency_bias
        >>> scores = pd.Series(
        ...     {"good": 3.0, "great": 5.0, "bad": -4.0, "awful": -6.0, "x": 0.0, "y": 1.0}
        ... )
        >>> counts = {"good": 10, "great": 100, "bad": 20, "awful": 0.5, "x": 0}
        >>> out = frequency_bias(scores, counts)
        >>> out["n"], round(out["spearman_rho"], 3), round(out["pearson_log"], 3)
        (4, 0.8, 0.754)
    """
    import pandas as pd

    s = _valid(scores)
    c = pd.Series(dict(counts), dtype=float)
    joined = pd.concat([s.rename("score"), c.rename("count")], axis=1, join="inner").dropna()
    if np.isinf(joined.to_numpy(dtype=float)).any():
        raise InvalidArgumentError("scores and counts must be finite (or missing)")
    joined = joined[joined["count"] > 0]
    if len(joined) < 3:
        raise EmptyInputError(
            f"only {len(joined)} candidates have a positive count; frequency bias needs >= 3"
        )
    log_f = np.log(joined["count"].to_numpy())
    rho = correlation_test(joined["score"], log_f, "spearman")
    return {
        "n": len(joined),
        "spearman_rho": rho.statistic,
        "spearman_p": rho.pvalue,
        "pearson_log": pearson(joined["score"], log_f),
    }


@dataclass(frozen=True)
class TauMatrix(Result):
    """Pairwise Kendall τ-b between columns (models or prompts) on their shared candidates.

    `tau[i, j]` and `n_shared[i, j]` (candidates where both columns have a value);
    the diagonal is 1. A column pair with fewer than two shared values (or a constant column)
    gives NaN.

    Args:
        names: the column names.
        tau: the τ-b matrix.
        n_shared: the number of shared candidates of each pair.

    Examples:
        Column `c` has no score for the last candidate, so its pairs share four:

        >>> import pandas as pd
        >>> from reward_lens_tl.sweep import kendall_tau_matrix
        >>> frame = pd.DataFrame(
        ...     {"a": [1.0, 2, 3, 4, 5], "b": [2.0, 1, 4, 3, 5], "c": [1.0, 1, 2, 3, None]}
        ... )
        >>> taus = kendall_tau_matrix(frame)
        >>> {pair: round(tau, 3) for pair, tau in taus.pairs().items()}
        {'a | b': 0.6, 'a | c': 0.913, 'b | c': 0.548}
        >>> taus.n_shared.tolist()
        [[5, 5, 4], [5, 5, 4], [4, 4, 4]]
        >>> taus.to_dataframe().round(3)
               a      b      c
        a  1.000  0.600  0.913
        b  0.600  1.000  0.548
        c  0.913  0.548  1.000
    """

    names: tuple[str, ...]
    tau: np.ndarray
    n_shared: np.ndarray

    def pairs(self) -> dict[str, float]:
        """Every unordered pair once, in column order: `{"a | b": τ}`."""
        out = {}
        for i, a in enumerate(self.names):
            for j in range(i + 1, len(self.names)):
                out[f"{a}{PAIR_SEPARATOR}{self.names[j]}"] = float(self.tau[i, j])
        return out

    def top_k(self, k: int = 10) -> TopK:
        """The `k` most concordant pairs, highest τ first (NaN last).

        Args:
            k: how many pairs.

        Returns:
            The `TopK` of pairs.
        """
        items = sorted(self.pairs().items(), key=lambda kv: -np.inf if np.isnan(kv[1]) else kv[1])
        return ranked(items[::-1][:k], "tau")

    def to_dataframe(self):
        """The τ matrix as a frame indexed by column name on both axes."""
        import pandas as pd

        return pd.DataFrame(self.tau, index=list(self.names), columns=list(self.names))

    @pasted_docs(plot=PLOT_DOC)
    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """Heat map of τ, a colour scale from −1 to 1 centred at 0, each cell's τ written in it.

        The axes carry the whole column names, less a prefix that every name shares up to a
        "/" (an organisation such as "Skywork/"), so no two names ever read alike. Hover
        shows both names, τ and the number of shared candidates.

        {plot}

        Examples:
            >>> import pandas as pd
            >>> frame = pd.DataFrame({"org/model-a": [1.0, 2, 3], "org/model-b": [1.0, 3, 2]})
            >>> fig = kendall_tau_matrix(frame).plot(backend="plotly")
            >>> list(fig.layout.xaxis.ticktext), fig.data[0].zmid
            (['model-a', 'model-b'], 0.0)
        """
        names, prefix = axis_names(self.names)
        m, longest = len(names), max(map(len, names))
        what = f"{m} models" if prefix == "" else f"{m} models of {prefix}"
        fig = imshow(
            self.tau,
            x=names,
            y=names,
            title=f"Kendall τ-b between the rankings of {what}",
            value_name="Kendall τ-b",
            midpoint=0.0,
            zmin=-1.0,
            zmax=1.0,
            text=True,
            width=int(min(1400, 40 + 6.5 * longest + max(360, 52 * m) + 120)),
            height=int(min(1400, 50 + max(300, 44 * m) + 40 + 6.5 * longest)),
        )
        full = np.array(self.names, dtype=object)
        trace = fig.data[0]
        trace.customdata = np.dstack(
            [np.tile(full, (m, 1)), np.tile(full[:, None], (1, m)), self.n_shared]
        )
        trace.hovertemplate = (
            "%{customdata[1]}<br>%{customdata[0]}<br>τ-b: %{z:.5g}"
            "<br>shared candidates: %{customdata[2]}<extra></extra>"
        )
        return render(fig, backend, ax)


def axis_names(names: Sequence[str]) -> tuple[list[str], str]:
    """Names for axis labels: whole, less the prefix up to a "/" that every name shares.

    Removing a prefix common to all of them never makes two names equal.

    Args:
        names: The (distinct) names.

    Returns:
        The shown names and the removed prefix (`""` when none).

    Examples:
        >>> axis_names(["Skywork/Reward-Gemma-2-27B", "Skywork/Reward-Gemma-2-27B-v0.2"])
        (['Reward-Gemma-2-27B', 'Reward-Gemma-2-27B-v0.2'], 'Skywork/')
        >>> axis_names(["Skywork/a", "nicolinho/b"])
        (['Skywork/a', 'nicolinho/b'], '')
    """
    names = [str(n) for n in names]
    cut = os.path.commonprefix(names).rfind("/") + 1 if len(names) > 1 else 0
    if cut == 0 or any(len(n) == cut for n in names):
        return names, ""
    return [n[cut:] for n in names], names[0][:cut]


def kendall_tau_matrix(frame) -> TauMatrix:
    """Kendall τ-b between every pair of columns of `frame` (rows: candidates).

    τ-b is `reward_lens_tl.stats.kendall`, which corrects for ties, on the rows where both
    columns are present (NaN dropped pairwise). An infinite value is an error (it is neither
    a score nor missing).

    Args:
        frame: the score table.

    Returns:
        The `TauMatrix`.

    Raises:
        InvalidArgumentError: fewer than two columns, or an infinite value.

    Examples:
        Of the 10 pairs of candidates, `a` and `b` order 8 alike and 2 oppositely:
        τ = (8 − 2) / 10.

        >>> import pandas as pd
        >>> from reward_lens_tl.sweep import kendall_tau_matrix
        >>> frame = pd.DataFrame({"a": [1.0, 2, 3, 4, 5], "b": [2.0, 1, 4, 3, 5]})
        >>> taus = kendall_tau_matrix(frame)
        >>> taus.names, round(float(taus.tau[0, 1]), 3), taus.pairs()
        (('a', 'b'), 0.6, {'a | b': 0.6})
    """
    names = tuple(str(c) for c in frame.columns)
    if len(names) < 2:
        raise InvalidArgumentError(f"need at least two columns to compare, got {list(names)}")
    values = frame.to_numpy(dtype=float)
    if np.isinf(values).any():
        row, col = (int(i) for i in np.argwhere(np.isinf(values))[0])
        raise InvalidArgumentError(
            f"column {names[col]!r} holds {values[row, col]} for candidate "
            f"{str(frame.index[row])!r}: τ would drop it without a word; scores must be finite "
            "or missing (NaN)"
        )
    m = len(names)
    tau, shared = np.eye(m), np.zeros((m, m), dtype=int)
    for i in range(m):
        shared[i, i] = int(np.isfinite(values[:, i]).sum())
        for j in range(i + 1, m):
            both = np.isfinite(values[:, i]) & np.isfinite(values[:, j])
            shared[i, j] = shared[j, i] = int(both.sum())
            tau[i, j] = tau[j, i] = kendall(values[:, i], values[:, j], nan_policy="omit")
    return TauMatrix(names=names, tau=tau, n_shared=shared)


def framing_effect(frame) -> dict:
    """How the ranking of the same candidates changes across prompts.

    Args:
        frame: the score table, one column per prompt.

    Returns:
        Pairwise Kendall τ-b and Spearman ρ on shared candidates, and the mean score shift
        (column b − column a) per pair, keyed `"prompt a | prompt b"`.

    Examples:
        Prompt `p2` raises every candidate by 1 and keeps the order; `p3` reverses it:

        >>> import pandas as pd
        >>> from reward_lens_tl.sweep import framing_effect
        >>> frame = pd.DataFrame(
        ...     {"p1": [1.0, 2, 3, 4], "p2": [2.0, 3, 4, 5], "p3": [4.0, 3, 2, 1]},
        ...     index=["soup", "bread", "oven", "bomb"],
        ... )
        >>> effect = framing_effect(frame)
        >>> effect["kendall_tau"]
        {'p1 | p2': 1.0, 'p1 | p3': -1.0, 'p2 | p3': -1.0}
        >>> effect["mean_shift"]
        {'p1 | p2': 1.0, 'p1 | p3': 0.0, 'p2 | p3': -1.0}
    """
    taus = kendall_tau_matrix(frame)
    rho, shift = {}, {}
    cols = list(frame.columns)
    for i, a in enumerate(cols):
        for b in cols[i + 1 :]:
            both = frame[[a, b]].dropna()
            key = f"{a}{PAIR_SEPARATOR}{b}"
            rho[key] = spearman(both[a], both[b])
            shift[key] = float((both[b] - both[a]).mean()) if len(both) else np.nan
    return {"kendall_tau": taus.pairs(), "spearman_rho": rho, "mean_shift": shift}
