r"""The study redone on published scores: read a score CSV and compute the statistics.

The CSV has a candidate column and one column per model, like
`../shared/data/optimal_pessimal/scores_*.csv`; the statistics need no model.

Empty cells are missing values (NaN); each statistic uses, per model or per pair of models, the
candidates that have values. A cell that is present but not a finite number (`oops`, `inf`)
is an error naming the file, row and column, and so is a candidate named twice (it would be
counted twice in every statistic).

Examples:
    >>> import io
    >>> csv = io.StringIO("name,m1,m2\nx,1,2\ny,2,1\nz,3,3\n")
    >>> score_file_stats(csv)["kendall_tau"]
    {'m1 | m2': 0.33333333333333337}
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import ScoreFileError
from .study_stats import check_score_frame, distribution_summary, kendall_tau_matrix, top_bottom

__all__ = [
    "read_score_csv",
    "score_file_stats",
]

CANDIDATE_COLUMN = "name"


def read_score_csv(source, candidate_column: str = CANDIDATE_COLUMN):
    r"""A frame indexed by candidate with one float column per model, in the file's order.

    Args:
        source: the CSV's path or an open text stream.
        candidate_column: the candidate column's name.

    Returns:
        The score frame.

    Raises:
        ScoreFileError: (naming the file, column and row) a missing file, a missing candidate
            column, no model column, a value that is not a finite number, or a candidate that
            appears twice.

    Examples:
        >>> import io
        >>> from reward_lens_tl.sweep import read_score_csv
        >>> frame = read_score_csv(io.StringIO("name,m1,m2\nx,1,2\ny,2,\nz,3,3\n"))
        >>> frame
               m1   m2
        name
        x     1.0  2.0
        y     2.0  NaN
        z     3.0  3.0

        An empty cell is a missing score; a cell that is not a number is an error:

        >>> from reward_lens_tl.sweep import ScoreFileError
        >>> try:
        ...     read_score_csv(io.StringIO("name,m1\nx,1\ny,oops\n"))
        ... except ScoreFileError as e:
        ...     print(e)
        column 'm1' of <stream> is not numeric: row 3 holds 'oops'; leave the cell empty for a
        missing score
    """
    import pandas as pd

    name = str(source) if isinstance(source, (str, Path)) else getattr(source, "name", "<stream>")
    try:
        raw = pd.read_csv(source, dtype=str, keep_default_na=False)
    except FileNotFoundError:
        raise ScoreFileError(f"score file {name} does not exist") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise ScoreFileError(f"{name} is not a readable CSV: {err}") from None
    if candidate_column not in raw.columns:
        raise ScoreFileError(
            f"{name} has no candidate column {candidate_column!r} (columns: "
            f"{list(raw.columns)[:12]}); pass candidate_column=/--candidate-column"
        )
    models = [c for c in raw.columns if c != candidate_column]
    if not models:
        raise ScoreFileError(f"{name} has no model columns besides {candidate_column!r}")
    frame = pd.DataFrame(index=pd.Index(raw[candidate_column], name=candidate_column))
    for col in models:
        frame[col] = _numeric_column(raw[col], name, col)
    check_score_frame(frame, name)  # repeated candidates, infinite cells
    return frame


def _numeric_column(cells, file: str, col: str) -> np.ndarray:
    """A column's values as floats (empty/NA cells as NaN); any other cell must be a number."""
    import pandas as pd

    cells = cells.str.strip()
    missing = cells.isin(["", "nan", "NaN", "NA", "null"])
    values = pd.to_numeric(cells.where(~missing), errors="coerce").to_numpy(dtype=float)
    bad = np.isnan(values) & ~missing.to_numpy()
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise ScoreFileError(
            f"column {col!r} of {file} is not numeric: row {row + 2} holds {cells.iloc[row]!r}; "
            "leave the cell empty for a missing score"
        )
    return values


def score_file_stats(source, candidate_column: str = CANDIDATE_COLUMN, k: int = 5) -> dict:
    r"""JSON-ready statistics of a score CSV.

    Missing values are dropped pairwise.

    Args:
        source: the CSV's path or an open text stream.
        candidate_column: the candidate column's name.
        k: how many top and bottom candidates per model.

    Returns:
        `models` (column order), `kendall_tau` (τ-b of every unordered pair once, keyed
        `"model a | model b"` with the file's names), `n_shared` per pair, and per model a
        `summary` (distribution, skew, kurtosis) and its `top`/`bottom` `k` candidates.

    Raises:
        ScoreFileError: the file cannot be read as a score table (see `read_score_csv`).

    Examples:
        Candidate `u` has no score from `m2`, so τ compares the three shared candidates:

        >>> import io
        >>> from reward_lens_tl.sweep import score_file_stats
        >>> csv = io.StringIO("name,m1,m2\nx,1,2\ny,2,1\nz,3,3\nu,4,\n")
        >>> stats = score_file_stats(csv, k=1)
        >>> stats["models"], stats["n_shared"], round(stats["kendall_tau"]["m1 | m2"], 4)
        (['m1', 'm2'], {'m1 | m2': 3}, 0.3333)
        >>> stats["top"], stats["bottom"], stats["summary"]["m1"]["mean"]
        ({'m1': ['u'], 'm2': ['z']}, {'m1': ['x'], 'm2': ['y']}, 2.5)
    """
    frame = read_score_csv(source, candidate_column)
    models = [str(c) for c in frame.columns]
    out: dict = {"models": models, "n_candidates": len(frame)}
    if len(models) > 1:
        taus = kendall_tau_matrix(frame)
        out["kendall_tau"] = {key: _json_float(v) for key, v in taus.pairs().items()}
        out["n_shared"] = {
            f"{a} | {b}": int(taus.n_shared[i, j])
            for i, a in enumerate(models)
            for j, b in enumerate(models)
            if i < j
        }
    else:
        out["kendall_tau"], out["n_shared"] = {}, {}
    out["summary"], out["top"], out["bottom"] = {}, {}, {}
    for m in models:
        col = frame[m]
        if col.notna().any():
            out["summary"][m] = {
                key: _json_float(v) for key, v in distribution_summary(col).items()
            }
            tb = top_bottom(col, k)
            out["top"][m] = tb[tb.side == "top"].candidate.tolist()
            out["bottom"][m] = tb[tb.side == "bottom"].candidate.tolist()
    return out


def _json_float(v):
    if isinstance(v, int | np.integer):  # a count stays an integer
        return int(v)
    v = float(v)
    return None if np.isnan(v) else v
