"""Shared pieces of result objects: tidy dataframes and figure helpers (never shown)."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor


def tidy_frame(values: Tensor, labels: Sequence[str], label_name: str, value_name: str):
    """``values [label, example]`` → one row per (label, example)."""
    import pandas as pd

    arr = values.detach().float().cpu().numpy()
    n_labels, n_examples = arr.shape
    return pd.DataFrame(
        {
            label_name: [labels[i] for i in range(n_labels) for _ in range(n_examples)],
            "example": [j for _ in range(n_labels) for j in range(n_examples)],
            value_name: arr.reshape(-1),
        }
    )


def new_axes(ax=None, figsize=(6, 3.5)):
    import matplotlib.pyplot as plt

    if ax is not None:
        return ax.figure, ax
    return plt.subplots(figsize=figsize)
