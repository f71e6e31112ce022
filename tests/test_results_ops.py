"""Row operations of every result: ``take(rows)`` and ``concat(parts)`` carry every field.

For each result class with per-example rows, a real instance (from the zoo models) is cut
into parts and joined back, and must equal the original field by field; ``take`` must equal
the same analysis run on just those rows. Aggregate classes say why they have no rows, and
joining results of different analyses is refused.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import sys
from collections.abc import Callable

import pytest
import torch

import reward_lens_tl
from reward_lens_tl.attribution import AttributionResult, direct_attribution, pair_attribution
from reward_lens_tl.contrast import encode_contrast
from reward_lens_tl.errors import InvalidArgumentError
from reward_lens_tl.implicit import (
    implicit_attribution,
    implicit_lens,
    pair_implicit_attribution,
    pair_implicit_lens,
)
from reward_lens_tl.inputs import as_encoded, pad_batch
from reward_lens_tl.lens import pair_lens, reward_lens
from reward_lens_tl.results import (
    NoExampleAxisError,
    Result,
    ResultFieldError,
    ResultMismatchError,
    check_result_shapes,
    join_pairs,
    split_pair,
)
from reward_lens_tl.sae import (
    atp_check,
    concept_projection,
    concept_vectors_from_sets,
    feature_attribution,
    feature_steering,
    latent_ablation,
    latent_attribution_patching,
    max_activating_contexts,
    pair_feature_attribution,
    splice_report,
)
from reward_lens_tl.sae.attribution import final_residual_hook
from reward_lens_tl.sae.sae_results import GroundTruthReport
from reward_lens_tl.sae.testing import random_topk_sae

ROWS = [3, 1]  # a subset, out of order: take keeps the order asked for
TOL = dict(rtol=1e-5, atol=1e-5)  # the same rows in another batch: float rounding only


def _all_result_classes() -> list[type]:
    """Every subclass of ``Result`` the package defines (every module imported first; classes
    a docstring example defines while it runs live elsewhere and are left out)."""
    for info in pkgutil.walk_packages(reward_lens_tl.__path__, "reward_lens_tl."):
        if ".zoo.models" not in info.name and not info.name.endswith("__main__"):
            importlib.import_module(info.name)
    seen, todo = set(), [Result]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
    return sorted((c for c in seen if _defined_in_package(c)), key=lambda c: c.__qualname__)


def _defined_in_package(cls: type) -> bool:
    """Whether ``cls`` is reachable by its qualified name in its module (a doctest's class runs
    with a copy of the module's globals: it carries the module's name but is not in it)."""
    obj: object = sys.modules.get(cls.__module__)
    for part in cls.__qualname__.split("."):
        obj = getattr(obj, part, None)
    return obj is cls


# -- comparing two results field by field -------------------------------------------------------
def assert_same(a: Result, b: Result, exact: bool = True, skip: tuple[str, ...] = ()) -> None:
    """Every dataclass field of ``a`` equals ``b``'s (nested results compared the same way)."""
    assert type(a) is type(b)
    for f in dataclasses.fields(a):
        if f.name in skip:
            continue
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, Result):
            assert_same(x, y, exact)
        elif isinstance(x, torch.Tensor):
            tol = dict(rtol=0.0, atol=0.0) if exact else TOL
            torch.testing.assert_close(x, y, **tol, msg=lambda m, n=f.name: f"{n}: {m}")
        else:
            both_nan = isinstance(x, float) and isinstance(y, float) and x != x and y != y
            assert x == y or both_nan, f"{type(a).__name__}.{f.name}: {x!r} != {y!r}"


def check_round_trip(result: Result, n: int) -> None:
    """Parts of ``result`` (its first rows, the rest) joined back equal it exactly, and no
    per-example field is left out of ``take``."""
    assert result.example_count() == n
    parts = [result.take(slice(0, 1)), result.take(slice(1, None))]
    assert [p.example_count() for p in parts] == [1, n - 1]
    assert_same(type(result).concat(parts), result)
    assert_same(type(result).concat([result.take(list(range(n)))]), result)


# -- inputs ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def examples(zoo_task):
    return zoo_task.examples(4, seed=5)


@pytest.fixture(scope="module")
def contrast(zoo_task):
    return zoo_task.contrast_pairs("harmful", 4, seed=2)


def _batch(model, examples, rows=None):
    chosen = examples if rows is None else [examples[i] for i in rows]
    ids, mask = pad_batch([list(ex.input_ids) for ex in chosen], model.pad_token_id)
    return ids.to(model.cfg.device), mask.to(model.cfg.device)


def _rows_of(ids, mask, rows):
    """The same rows of a left-padded batch, at the same width (so source positions agree)."""
    return ids[rows], mask[rows]


# -- per-example classes ------------------------------------------------------------------------
def _explicit(model, examples, analysis: Callable) -> tuple[Result, Result]:
    """``analysis`` of 4 sequences, and of ``ROWS`` of them alone."""
    ids, mask = _batch(model, examples)
    return analysis(ids, mask), analysis(*_rows_of(ids, mask, ROWS))


def test_attribution_with_sources_and_neurons(zoo_scalar, examples):
    full, rows = _explicit(
        zoo_scalar,
        examples,
        lambda i, m: direct_attribution(zoo_scalar, i, m, sources=True, neurons=True),
    )
    assert full.sources is not None and full.neurons is not None and full.components
    check_round_trip(full, 4)
    assert_same(full.take(ROWS), rows, exact=False)  # sources and components carried too


def test_reward_lens(zoo_scalar, examples):
    full, rows = _explicit(zoo_scalar, examples, lambda i, m: reward_lens(zoo_scalar, i, m))
    check_round_trip(full, 4)
    assert_same(full.take(ROWS), rows, exact=False)


def test_pair_results_keep_their_input_indices(zoo_scalar, contrast):
    pairs = [encode_contrast(p) for p in contrast]
    for run in (pair_attribution, pair_lens):
        full = run(zoo_scalar, pairs, batch_size=3)
        check_round_trip(full, 4)
        part = full.take([1, 2])
        alone = run(zoo_scalar, pairs[1:3], batch_size=3)
        assert part.indices == (1, 2) and alone.indices == (0, 1)
        assert_same(part, alone, exact=False, skip=("indices",))


def test_pair_scores(zoo_scalar, contrast):
    from reward_lens_tl.scoring import score_pairs

    pairs = [encode_contrast(p) for p in contrast]
    full = score_pairs(zoo_scalar, pairs, batch_size=3)
    check_round_trip(full, 4)
    part, alone = full.take([1, 2]), score_pairs(zoo_scalar, pairs[1:3], batch_size=3)
    assert part.indices == (1, 2) and alone.indices == (0, 1)
    assert_same(part, alone, exact=False, skip=("indices",))


def test_implicit_results(zoo_implicit, examples, contrast):
    encs = [as_encoded(ex) for ex in examples]
    for analysis in (implicit_attribution, implicit_lens):
        full = analysis(zoo_implicit, *_implicit_batch(zoo_implicit, encs))
        check_round_trip(full, 4)
        alone = analysis(zoo_implicit, *_implicit_batch(zoo_implicit, [encs[i] for i in ROWS]))
        part = full.take(ROWS)
        if analysis is implicit_lens:  # alone, the rows are padded to their own width
            part = _padded_like(part, alone.token_values.shape[-1])
        assert_same(part, alone, exact=False)
    for run in (pair_implicit_attribution, pair_implicit_lens):
        full = run(zoo_implicit, contrast, batch_size=3)
        check_round_trip(full, 4)
        assert_same(full.take([1, 2]), run(zoo_implicit, contrast[1:3]), exact=False)


def _implicit_batch(irm, encs):
    ids, attention, response = irm.batch(encs)
    return ids, response, attention


def _padded_like(lens, width: int):
    """``lens`` with its per-token values cut to the last ``width`` positions (the batch is
    left padded: the columns cut hold padding only, whose values are 0)."""
    cut = lens.token_values.shape[-1] - width
    assert bool((lens.token_values[..., :cut] == 0).all())
    tokens = tuple(row[cut:] for row in lens.tokens)
    return dataclasses.replace(lens, token_values=lens.token_values[..., cut:], tokens=tokens)


def test_sae_results(zoo_scalar, examples, contrast):
    sae = random_topk_sae(zoo_scalar, final_residual_hook(zoo_scalar), d_sae=64, k=4)
    mid = random_topk_sae(zoo_scalar, "blocks.0.hook_resid_post", d_sae=64, k=4)
    for analysis in (
        lambda i, m: feature_attribution(zoo_scalar, sae, i, m),
        lambda i, m: latent_attribution_patching(zoo_scalar, mid, i, m),
        lambda i, m: latent_ablation(zoo_scalar, mid, i, m, [0, 5, 9]),
        lambda i, m: feature_steering(zoo_scalar, mid, i, m, feature=3, coefficients=[0, 2]),
    ):
        full, rows = _explicit(zoo_scalar, examples, analysis)
        check_round_trip(full, 4)
        assert_same(full.take(ROWS), rows, exact=False)
    # AtPCheck: its features are chosen on all rows; the rows' estimate and ablation alone
    ids, mask = _batch(zoo_scalar, examples)
    check = atp_check(zoo_scalar, mid, ids, mask, k=3)
    check_round_trip(check, 4)
    sub = _rows_of(ids, mask, ROWS)
    features = list(check.features)
    estimate = latent_attribution_patching(zoo_scalar, mid, *sub).values[features]
    actual = latent_ablation(zoo_scalar, mid, *sub, features).values
    torch.testing.assert_close(check.take(ROWS).estimate, estimate, **TOL)
    torch.testing.assert_close(check.take(ROWS).actual, actual, **TOL)
    pairs = pair_feature_attribution(zoo_scalar, sae, contrast, batch_size=3)
    check_round_trip(pairs, 4)
    assert_same(pairs.take([1, 2]), pair_feature_attribution(zoo_scalar, sae, contrast[1:3]), False)


def test_projection_effect(zoo_scalar, examples):
    vector = torch.randn(zoo_scalar.cfg.d_model)
    site = "blocks.1.hook_resid_post"
    full, rows = _explicit(
        zoo_scalar, examples, lambda i, m: concept_projection(zoo_scalar, vector, site, i, m)
    )
    check_round_trip(full, 4)
    assert_same(full.take(ROWS), rows, exact=False)


def test_judge_results():
    from reward_lens_tl.data import PreferencePair
    from reward_lens_tl.judges import (
        HookedJudge,
        judge_pairs,
        linearised_attribution,
        position_bias,
    )
    from reward_lens_tl.testing import tiny_causal_lm

    hf, tok = tiny_causal_lm("llama")
    likert = HookedJudge.from_pretrained(
        hf,
        kind="likert",
        tokenizer=tok,
        verdict=("w10", "w11", "w12"),
        template="{prompt} {response} w9",
    )
    pairwise = HookedJudge.from_pretrained(
        hf, kind="pairwise", tokenizer=tok, verdict=("w10", "w11"),
        template="{prompt} w8 {response_a} w8 {response_b} w9",
    )  # fmt: skip
    prompts = ["w12 w13", "w14", "w15 w16 w17", "w18"]
    first, second = ["w20 w21", "w22", "w23", "w24 w25 w26"], ["w30", "w31 w32", "w33", "w34"]
    ids = likert.item_ids(prompts, first)
    full = linearised_attribution(likert, ids, sources=True)
    check_round_trip(full, 4)
    rows = linearised_attribution(likert, ids[ROWS], sources=True)
    assert_same(full.take(ROWS), rows, exact=False)
    bias = position_bias(pairwise, prompts, first, second)
    check_round_trip(bias, 4)
    sub = [prompts[i] for i in ROWS], [first[i] for i in ROWS], [second[i] for i in ROWS]
    assert_same(bias.take(ROWS), position_bias(pairwise, *sub), exact=False)
    pairs = [
        PreferencePair(p, a, b, subset=str(i))
        for i, (p, a, b) in enumerate(zip(prompts, first, second, strict=True))
    ]
    scores = judge_pairs(pairwise, pairs)
    check_round_trip(scores, 4)
    assert_same(scores.take(ROWS), judge_pairs(pairwise, [pairs[i] for i in ROWS]), exact=False)


def test_erasure_result(zoo_scalar, contrast):
    from reward_lens_tl.erasure import concept_erasure, random_eraser

    eraser = random_eraser(zoo_scalar, hook="blocks.1.hook_resid_pre")
    result = concept_erasure(zoo_scalar, eraser, contrast, n_boot=20)
    check_round_trip(result, 4)
    rows = concept_erasure(zoo_scalar, eraser, [contrast[i] for i in ROWS], n_boot=20)
    assert_same(result.take(ROWS), rows, exact=False)


def test_difference_dictionary(zoo_scalar, contrast):
    from reward_lens_tl.sae import DIFFERENCE_SITE, difference_dictionary

    sae = random_topk_sae(zoo_scalar, DIFFERENCE_SITE, d_sae=32, k=4)
    result = difference_dictionary(zoo_scalar, sae, contrast)
    check_round_trip(result, 4)
    rows = difference_dictionary(zoo_scalar, sae, [contrast[i] for i in ROWS])
    assert_same(result.take(ROWS), rows, exact=False)


# -- every class: declared rows are tested here, the others say why they have none ---------------
TESTED = {
    "AttributionResult",
    "PairAttribution",
    "RewardLensResult",
    "PairLensResult",
    "ImplicitAttribution",
    "PairImplicitAttribution",
    "ImplicitLensResult",
    "FeatureAttribution",
    "PairFeatureAttribution",
    "FeatureEffects",
    "AtPCheck",
    "SteeringCurve",
    "ProjectionEffect",
    "Failures",
    "PairScores",
    "LinearisedAttribution",
    "PositionBiasResult",
    "PairwiseJudgeScores",
    "ErasureResult",
    "DifferenceDictionary",
}


def test_every_class_with_rows_is_round_tripped_here_and_the_others_refuse():
    for cls in _all_result_classes():
        if cls.example_axes is not None and not dataclasses.is_dataclass(cls):
            continue  # a base with fields only in its subclasses (MarginResult)
        if cls.example_axes is not None:
            assert cls.__name__ in TESTED, f"{cls.__qualname__} declares rows: round-trip it here"
            fields = {f.name for f in dataclasses.fields(cls)}
            assert set(cls.example_axes) <= fields, cls
        else:
            with pytest.raises(NoExampleAxisError, match=cls.__name__):
                cls.concat([])
    assert TESTED <= {c.__name__ for c in _all_result_classes() if c.example_axes is not None}


def test_aggregates_say_why_they_have_no_rows(zoo_scalar, examples):
    ids, mask = _batch(zoo_scalar, examples)
    sae = random_topk_sae(zoo_scalar, "blocks.0.hook_resid_post", d_sae=64, k=4)
    seqs = [list(ex.input_ids) for ex in examples]
    aggregates = {
        "measured over every token": splice_report(zoo_scalar, sae, ids, mask),
        "means over every example": concept_vectors_from_sets(
            zoo_scalar, seqs[:2], [-1, -1], seqs[2:], [-1, -1]
        ),
        "ranking contexts": max_activating_contexts(zoo_scalar, sae, [(ids, mask)], features=[1]),
        "planted features": GroundTruthReport(rows=()),
    }
    for reason, result in aggregates.items():
        with pytest.raises(NoExampleAxisError, match=reason):
            result.take([0])


# -- refusals ----------------------------------------------------------------------------------
def test_joining_different_analyses_is_refused(zoo_scalar, examples):
    ids, mask = _batch(zoo_scalar, examples)
    heads = direct_attribution(zoo_scalar, ids, mask)
    layers = direct_attribution(zoo_scalar, ids, mask, heads=False)
    with pytest.raises(ResultMismatchError, match="AttributionResult.labels"):
        AttributionResult.concat([heads, layers])
    wide = direct_attribution(zoo_scalar, ids, mask, sources=True)
    narrow = direct_attribution(zoo_scalar, *_batch(zoo_scalar, examples, [1]), sources=True)
    if wide.sources.shape[-1] != narrow.sources.shape[-1]:
        with pytest.raises(ResultMismatchError, match="sources"):
            AttributionResult.concat([wide, narrow])
    with pytest.raises(ResultMismatchError, match="neurons"):  # recorded in one part only
        AttributionResult.concat([heads, direct_attribution(zoo_scalar, ids, mask, neurons=True)])
    with pytest.raises(InvalidArgumentError, match="row 4"):
        heads.take([4])
    with pytest.raises(InvalidArgumentError, match="8 rows"):
        split_pair(heads, 4)
    chosen, rejected = join_pairs([split_pair(heads, 2)])
    assert_same(AttributionResult.concat([chosen, rejected]), heads)
    assert isinstance(NoExampleAxisError("x"), reward_lens_tl.errors.RewardLensError)


def test_shape_checks_catch_a_wrong_field(zoo_scalar, examples):
    result = direct_attribution(zoo_scalar, *_batch(zoo_scalar, examples))
    previous = check_result_shapes(True)
    try:
        with pytest.raises(ResultFieldError, match="rewards"):
            dataclasses.replace(result, rewards=result.rewards[:3])  # 3 rewards, 4 examples
        with pytest.raises(ResultFieldError, match="values"):
            dataclasses.replace(result, values=result.values[:, :, None])
    finally:
        check_result_shapes(previous)


def test_failure_explanation_keeps_every_field_of_its_attributions(zoo_scalar):
    """explain_failures splits and joins its chunks with take/concat: the margin keeps its
    components (TransformerLens names included), as a direct attribution of the pairs has."""
    from reward_lens_tl.data import RankedItem
    from reward_lens_tl.evals.run import score_items

    items = [
        RankedItem("how bake bread", "soup", ("great question the soup", "rain"), id=i)
        for i in range(3)
    ]
    result = score_items(zoo_scalar, items, progress=False)
    explanation = result.failures().explain(zoo_scalar, reference=None, batch_size=2)
    margin = explanation.margin
    assert len(explanation.comparisons) == 3  # two chunks joined
    direct = pair_attribution(zoo_scalar, result.failures().pairs()).margin
    assert margin.components and margin.components == direct.components
    assert margin.tl_labels == direct.tl_labels
    torch.testing.assert_close(margin.values, direct.values, **TOL)
    torch.testing.assert_close(explanation.lens.margins[-1], margin.rewards, **TOL)


def test_eval_failures(zoo_scalar):
    from reward_lens_tl.data import RankedItem
    from reward_lens_tl.evals.run import score_items

    answers = ["soup", "bread", "soup oven", "oven"]
    items = [
        RankedItem("how bake bread", a, (f"great question the {a}", "rain"), id=i)
        for i, a in enumerate(answers)
    ]
    failures = score_items(zoo_scalar, items, progress=False).failures()
    assert len(failures) >= 3
    check_round_trip(failures, len(failures))
    part = failures.take([2, 0])
    ids = [c.item_id for c in part]
    alone = score_items(zoo_scalar, [items[i] for i in ids], progress=False).failures()
    assert [c.item_id for c in alone] == ids
    for a, b in zip(part, alone, strict=True):
        assert (a.chosen_score, a.rejected_score) == pytest.approx(
            (b.chosen_score, b.rejected_score), abs=1e-5
        )
