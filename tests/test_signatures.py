"""Typed, explicit entry points (issue 22, item 5).

Every public entry point of loading, the model and patching has an explicit keyword signature
(no ``**kwargs``), documents each parameter in its docstring, types ``model`` as a
``HookedRewardModel``, refuses a misspelt keyword with a ``TypeError`` before doing any work,
and where its return type depends on an argument declares ``@overload``\\ s that match what it
returns at run time.
"""

from __future__ import annotations

import inspect
import re
import typing

import pytest
import torch

from reward_lens_tl import patching
from reward_lens_tl.diagnostics import check
from reward_lens_tl.errors import ArgumentTypeError, RewardLensError
from reward_lens_tl.loading import convert_hf_model
from reward_lens_tl.model import RETURN_TYPES, HookedRewardModel, ReturnType, load_reward_model
from reward_lens_tl.patching.alignment import ALIGNMENTS, AlignmentKind
from reward_lens_tl.patching.grids import SITE_ALIASES, SITE_HOOKS, Site
from reward_lens_tl.patching.plan import MODES, MeanOver, Mode, PatchOptions
from reward_lens_tl.scoring import score_pairs
from reward_lens_tl.testing import random_batch, tiny_reward_model
from reward_lens_tl.token_view import token_attribution
from reward_lens_tl.tuned_lens import TunedRewardLens

#: name -> (entry point, a parameter it really has: the misspelt keyword is built from it)
ENTRY_POINTS = {
    "HookedRewardModel.from_pretrained": (HookedRewardModel.from_pretrained, "fold_ln"),
    "HookedRewardModel.from_pretrained_no_processing": (
        HookedRewardModel.from_pretrained_no_processing,
        "dtype",
    ),
    "HookedRewardModel.forward": (HookedRewardModel.forward, "attention_mask"),
    "HookedRewardModel.rewards": (HookedRewardModel.rewards, "attention_mask"),
    "HookedRewardModel.objective_rewards": (HookedRewardModel.objective_rewards, "grad"),
    "HookedRewardModel.encode": (HookedRewardModel.encode, "truncation"),
    "HookedRewardModel.score": (HookedRewardModel.score, "max_length"),
    "load_reward_model": (load_reward_model, "device"),
    "convert_hf_model": (convert_hf_model, "objective_names"),
    "activation_patching": (patching.activation_patching, "site"),
    "attribution_patching": (patching.attribution_patching, "alignment"),
    "atp_star": (patching.atp_star, "layers"),
    "atp_agreement": (patching.atp_agreement, "methods"),
    "atp_recall": (patching.atp_recall, "sites"),
    "agreement": (patching.agreement, "reference"),
    "compare_methods": (patching.compare_methods, "components"),
    "localization": (patching.localization, "objective"),
    "minimal_head_sets": (patching.minimal_head_sets, "threshold"),
    "causal_ground_truth": (patching.causal_ground_truth, "head_positions"),
    "score_pairs": (score_pairs, "batch_size"),
    "token_attribution": (token_attribution, "mode"),
    "TunedRewardLens.fit": (TunedRewardLens.fit, "heldout_fraction"),
    "check": (check, "tokenizer"),
}


def parameters(fn) -> dict[str, inspect.Parameter]:
    return {n: p for n, p in inspect.signature(fn).parameters.items() if n not in ("self", "cls")}


@pytest.mark.parametrize("name", list(ENTRY_POINTS))
def test_explicit_documented_signature(name):
    fn, _ = ENTRY_POINTS[name]
    params = parameters(fn)
    variadic = [n for n, p in params.items() if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    declared = declared_options(fn)  # `**options: Unpack[SomeTypedDict]`: its keys are named
    assert variadic == ([] if declared is None else ["options"]), f"{name} takes {variadic}"
    params = {n: p for n, p in params.items() if n not in variadic}
    params.update(dict.fromkeys(declared or ()))
    doc = inspect.getdoc(fn) or ""
    # documented: an entry of the Google-style ``Args:`` section, or the name as a code span
    undocumented = [
        n
        for n in params
        if not re.search(rf"^\s+{re.escape(n)}( \([^)]*\))?:", doc, flags=re.M)
        and not re.search(rf"`{{1,2}}{re.escape(n)}(=[^`]*)?`{{1,2}}", doc)
    ]
    assert undocumented == [], f"{name} does not document {undocumented}"
    if "model" in params:
        assert params["model"].annotation == "HookedRewardModel", name


def declared_options(fn) -> tuple[str, ...] | None:
    """The keys of the `TypedDict` a `**options: Unpack[...]` parameter declares, if any."""
    params = inspect.signature(fn).parameters
    if "options" not in params or params["options"].kind != inspect.Parameter.VAR_KEYWORD:
        return None
    local = {"HookedRewardModel": HookedRewardModel}
    hints = typing.get_type_hints(inspect.unwrap(fn), localns=local)
    (options,) = typing.get_args(hints["options"])
    return tuple(options.__annotations__)


@pytest.mark.parametrize("name", list(ENTRY_POINTS))
def test_a_misspelt_keyword_is_a_type_error(name):
    """Refused at call time, before any work: the required arguments are placeholders that
    would fail if the body ran."""
    fn, real = ENTRY_POINTS[name]
    params = parameters(fn)
    required = [
        None
        for p in params.values()
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    self_arg = [None] if "self" in inspect.signature(fn).parameters else []
    typo = real + "s"
    assert typo not in params and typo not in (declared_options(fn) or ())
    with pytest.raises(TypeError, match=rf"'{typo}'") as info:
        fn(*self_arg, *required, **{typo: 1})
    if getattr(fn, "__wrapped__", None) is not None:  # checked: typed, with the closest name
        assert isinstance(info.value, (ArgumentTypeError, RewardLensError))
        assert f"Did you mean {real!r}" in str(info.value)


def test_checked_signatures_are_the_functions_own():
    """The keyword check wraps the function without hiding its signature or docstring."""
    for fn in (patching.activation_patching, HookedRewardModel.from_pretrained, convert_hf_model):
        inner = inspect.unwrap(fn)
        assert inner is not fn
        assert parameters(fn) == parameters(inner)
        assert fn.__doc__ == inner.__doc__ and "{" not in fn.__doc__.split(">>>")[0]


def test_literal_types_match_the_runtime_lists():
    assert typing.get_args(Mode) == MODES
    assert typing.get_args(AlignmentKind) == ALIGNMENTS
    assert typing.get_args(MeanOver) == ("token", "position")
    assert set(typing.get_args(Site)) == set(SITE_HOOKS) | set(SITE_ALIASES)
    literal, none = typing.get_args(ReturnType)
    assert none is type(None) and set(typing.get_args(literal)) | {None} == set(RETURN_TYPES)
    hints = typing.get_type_hints(PatchOptions)
    assert hints["mode"] == Mode and hints["mean_over"] == MeanOver
    assert hints["alignment"] == AlignmentKind


@pytest.fixture(scope="module")
def llama():
    return HookedRewardModel.from_pretrained(tiny_reward_model("llama"))


def overload_return(overload) -> type:
    hints = typing.get_type_hints(overload, localns={"HookedRewardModel": HookedRewardModel})
    return hints["return"]


def test_activation_patching_overloads_match_what_it_returns(llama):
    ids, _ = random_batch(2, [9, 7], low=6)
    clean, corrupted = ids[0], ids[1]
    overloads = typing.get_overloads(inspect.unwrap(patching.activation_patching))
    assert len(overloads) == 2
    calls = {
        "Site": lambda: patching.activation_patching(llama, clean, corrupted, site="z"),
        "tuple[Site, ...] | list[Site]": lambda: patching.activation_patching(
            llama, clean, corrupted, site=("z", "mlp_out")
        ),
    }
    single = multi = None
    for overload in overloads:
        site = inspect.signature(overload).parameters["site"]
        result = calls[site.annotation]()
        assert isinstance(result, overload_return(overload)), (overload, type(result))
        if site is not None and site.annotation == "Site":
            single = result
        elif site is not None:
            multi = result
    assert isinstance(single, patching.PatchResult)
    assert not isinstance(single, patching.MultiSitePatchResult)
    assert isinstance(multi, patching.MultiSitePatchResult)
    assert set(multi.results) == {"z", "mlp_out"}
    # the multi-site sweep is the single-site one, site by site
    torch.testing.assert_close(multi.results["z"].values, single.values)


def test_the_options_are_the_same_sweep_by_keyword_or_by_dict(llama):
    ids, _ = random_batch(2, [8, 8], low=6)
    options: PatchOptions = {"alignment": "exact", "layers": [1], "mode": "noising"}
    by_keywords = patching.attribution_patching(
        llama, ids[0], ids[1], site="resid_pre", alignment="exact", layers=[1], mode="noising"
    )
    by_dict = patching.attribution_patching(llama, ids[0], ids[1], site="resid_pre", **options)
    torch.testing.assert_close(by_keywords.values, by_dict.values)
    with pytest.raises(RewardLensError, match=r"unknown keyword 'request'"):
        patching.attribution_patching(llama, ids[0], ids[1], request=options)
