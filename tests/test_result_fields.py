"""Run-time checks of result fields (`reward_lens_tl.results.check_fields`).

beartype checks each field against its jaxtyping annotation, with one shape memo per result, so
a dimension name binds one size across the fields; a mismatch is a `ResultFieldError` naming
the field, what it got, and the shapes of the fields before it. The checks are the libraries'
own: the package holds no `exec` or `eval` call (tests/test_structure.py).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
import torch
from jaxtyping import Float, Int
from torch import Tensor

import reward_lens_tl
from reward_lens_tl.errors import RewardLensError
from reward_lens_tl.results import Result, ResultFieldError, check_fields, check_result_shapes

if TYPE_CHECKING:
    from matplotlib.axes import Axes  # unresolvable at run time: the field is not checked

PACKAGE = Path(reward_lens_tl.__file__).parent


@dataclasses.dataclass(frozen=True)
class Scores(Result):
    values: Float[Tensor, "label example"]
    rewards: Float[Tensor, " example"]
    ids: Int[np.ndarray, " example"]
    labels: tuple[str, ...]
    figure: Axes | None = None

    def to_dataframe(self):
        return None


def scores(**changes) -> Scores:
    fields = {
        "values": torch.zeros(2, 3),
        "rewards": torch.ones(3),
        "ids": np.arange(3),
        "labels": ("a", "b"),
        **changes,
    }
    return Scores(**fields)


@pytest.fixture(autouse=True)
def checks_on():
    previous = check_result_shapes(True)
    yield
    check_result_shapes(previous)


def test_a_well_formed_result_passes():
    check_fields(scores())
    check_fields(scores(figure="not axes"))  # annotated with a type-checking-only name


@pytest.mark.parametrize(
    ("changes", "field", "got"),
    [
        ({"rewards": torch.ones(4)}, "rewards", "float32 tensor of shape (4,)"),
        ({"rewards": torch.ones(3, dtype=torch.int64)}, "rewards", "int64 tensor of shape (3,)"),
        ({"values": torch.zeros(2, 3, 1)}, "values", "float32 tensor of shape (2, 3, 1)"),
        ({"ids": np.arange(3.0)}, "ids", "float64 array of shape (3,)"),
        ({"labels": ["a", "b"]}, "labels", "list"),
    ],
)
def test_a_wrong_field_is_a_typed_error_naming_it(changes, field, got):
    with pytest.raises(ResultFieldError) as caught:
        scores(**changes)
    assert isinstance(caught.value, RewardLensError)
    lines = str(caught.value).splitlines()
    assert lines[0].startswith(f"Scores.{field} does not match its annotation ")
    assert lines[1] == f"got: {got}"


def test_the_message_shows_the_shapes_that_bound_the_dimensions():
    with pytest.raises(ResultFieldError) as caught:
        scores(rewards=torch.ones(4))
    assert str(caught.value).splitlines()[2] == (
        "fields before it (their dimension names are shared): values float32 tensor of shape (2, 3)"
    )


def test_checks_off_build_anything():
    check_result_shapes(False)
    assert scores(rewards=torch.ones(4)).rewards.shape == (4,)
