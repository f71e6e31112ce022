"""One result interface: every result object is a ``Result`` with a frame, a figure, its top
entries sorted by the value they show, and escaped HTML."""

import importlib
import inspect
import pkgutil

import matplotlib
import matplotlib.pyplot as plt
import pytest
import torch

import reward_lens_tl
from reward_lens_tl import HookedRewardModel
from reward_lens_tl.results import Result, TopK
from reward_lens_tl.zoo import zoo_path
from tests.figures import check_figure

matplotlib.use("Agg")


def _all_result_classes():
    for info in pkgutil.walk_packages(reward_lens_tl.__path__, "reward_lens_tl."):
        if ".zoo.models" in info.name or info.name.endswith("__main__"):
            continue
        importlib.import_module(info.name)
    seen, todo = set(), [Result]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
    return sorted(seen, key=lambda c: c.__qualname__)


def test_every_result_class_implements_the_protocol():
    classes = _all_result_classes()
    assert len(classes) >= 20
    for cls in classes:
        assert cls.to_dataframe is not Result.to_dataframe, cls
        assert callable(cls.plot) and callable(cls.top_k) and callable(cls._repr_html_), cls


def test_every_plot_takes_a_keyword_only_backend():
    """`plot` and every `plot_*` of every result: `backend=` after the others, by keyword only."""
    missing = []
    for cls in _all_result_classes():
        for name in dir(cls):
            if name != "plot" and not name.startswith("plot_"):
                continue
            method = getattr(cls, name)
            if not callable(method):
                continue
            parameter = inspect.signature(method).parameters.get("backend")
            if parameter is None or parameter.kind is not inspect.Parameter.KEYWORD_ONLY:
                missing.append(f"{cls.__module__}.{cls.__qualname__}.{name}")
    assert not missing, missing


@pytest.fixture(scope="module")
def model():
    return HookedRewardModel.from_pretrained(zoo_path("scalar"))


def _check_sorted(top):
    assert isinstance(top, TopK) and len(top) > 0
    values = [abs(v) for _, v in top]
    assert values == sorted(values, reverse=True)
    assert list(top.to_dataframe().columns)[0] == "label"


def test_top_k_sorts_by_the_value_it_shows(model):
    from reward_lens_tl.attribution import direct_attribution
    from reward_lens_tl.lens import reward_lens
    from reward_lens_tl.patching import activation_patching, atp_star

    chosen = model.encode("explain how to bake bread", "great question the oven and the flour")
    rejected = model.encode("explain how to bake bread", "the oven and the bomb")
    ids = torch.tensor([chosen.ids])
    attr = direct_attribution(model, ids)
    star = atp_star(model, chosen, rejected, site="resid_pre", alignment="end")
    patched = activation_patching(model, chosen, rejected, site="resid_pre", alignment="end")
    for result in (attr, reward_lens(model, ids), star, patched):
        _check_sorted(result.top_k(5))
        check_figure(result.plot(), static=result.plot(backend="matplotlib"))
        plt.close("all")
    shown = dict(star.top_k(100))
    effects = dict(zip(star.labels(), star.effects().tolist(), strict=True))
    assert all(abs(shown[label] - effects[label]) < 1e-6 for label in shown)
    _check_sorted(star.top_k(5, by="magnitude"))
    top_attr = dict(attr.top_k(3))
    for label, value in top_attr.items():
        assert abs(value - float(attr[label][0])) < 1e-6


def test_patch_figure_shows_the_values_with_the_tokens_on_its_columns(model):
    from reward_lens_tl.patching import activation_patching

    clean = model.encode("explain how to bake bread", "great question the oven and the flour")
    corrupted = model.encode("explain how to bake bread", "the oven and the bomb")
    result = activation_patching(model, clean, corrupted, site="resid_pre", alignment="end")
    fig = check_figure(
        result.plot(),
        static=result.plot(backend="matplotlib"),
        x_labels=["bomb→flour"],
        diverging=True,
    )
    torch.testing.assert_close(
        torch.tensor(fig.data[0].z, dtype=torch.float32), result.values.float().cpu()
    )


def test_html_is_escaped(model):
    from types import SimpleNamespace as Pair

    from reward_lens_tl.scoring import score_pairs

    pair = Pair(
        prompt="explain how to bake bread",
        chosen="the oven",
        rejected="the bomb",
        subset="<script>alert(1)</script>",
    )
    scores = score_pairs(model, [pair])
    page = scores._repr_html_()
    assert "<script>" not in page and "&lt;script&gt;" in page
    _check_sorted(scores.top_k(1))


def test_top_entries_put_nan_after_every_number_and_dir_lists_lazy_exports():
    import math

    import reward_lens_tl
    from reward_lens_tl.results import top_entries

    top = top_entries(["nan", "zero", "big"], [float("nan"), 0.0, -3.0], k=3)
    assert [label for label, _ in top] == ["big", "zero", "nan"]
    assert math.isnan(top[2][1])
    assert [label for label, _ in top_entries(["nan", "zero"], [float("nan"), 0.0], k=1)] == [
        "zero"
    ]
    assert {"HookedRewardModel", "pad_batch", "check"} <= set(dir(reward_lens_tl))
