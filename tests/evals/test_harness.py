"""The evaluation harness: metrics on fixtures with known answers (ties included), the published
RewardMATH results reproduced from their score files, score files (format, resume, bad input),
scoring cost, and explanations that find the zoo's planted hacks.

Tests marked ``data`` read ``../shared/data`` (override with ``REWARD_LENS_SHARED_DATA``) and are
skipped with a reason when it is absent.
"""

from __future__ import annotations

import json

import pytest
import torch

from reward_lens_tl.data import PreferencePair, RankedItem
from reward_lens_tl.errors import (
    EmptyInputError,
    MalformedRecordError,
    RewardLensError,
    ScoreMismatchError,
    UnknownBenchmarkError,
)
from reward_lens_tl.evals import eval_result, metrics, run, scores, zoo_set
from reward_lens_tl.evals.metrics import rewardbench_metrics, rewardmath_metrics, rmbench_metrics
from reward_lens_tl.evals.run import align_scores, score_items
from reward_lens_tl.evals.scores import ScoreRecord, ScoreWriter, read_scores
from tests.data.test_data import (  # the shared-data location and marker, one definition
    SHARED,
    real_data,
)
from tests.figures import check_figure


def rb(i, c, r, subset="s"):
    return ScoreRecord("rewardbench", f"{subset}/{i}", (c,), (r,), subset=subset)


# --------------------------------------------------------------------------------------------
# metrics on fixtures with known answers


def test_rewardmath_ties_follow_the_reference():
    recs = [
        ScoreRecord("rewardmath", 0, (1.0,), (1.0, 1.0, 0.5)),  # tied with two: rank 3
        ScoreRecord("rewardmath", 1, (2.0,), (1.0, 0.0, 3.0)),  # one above: rank 2
        ScoreRecord("rewardmath", 2, (5.0,), (1.0, 2.0, 3.0)),  # best: rank 1
        ScoreRecord("rewardmath", 3, (0.0,), (1.0, 2.0, 3.0)),  # worst: rank 4
    ]
    m = rewardmath_metrics(recs, n_boot=0)
    assert m["accuracy"] == pytest.approx(25.0)
    assert m["accuracy_with_ties"] == pytest.approx(50.0)
    assert m["mrr"] == pytest.approx(100 * (1 / 3 + 1 / 2 + 1 + 1 / 4) / 4)
    assert m.summary()["n"] == 4


def test_rewardbench_sections_weight_subsets_like_the_reference():
    recs = [rb(0, 1.0, 0.0, "math-prm"), rb(1, 0.0, 1.0, "math-prm")]  # 50 %
    recs += [rb(i, 1.0, 0.0, "hep-cpp") for i in range(3)] + [rb(3, 0.5, 0.5, "hep-cpp")]  # tie
    recs += [rb(0, 2.0, 1.0, "llmbar-natural")]
    m = rewardbench_metrics(recs, n_boot=0)
    assert m["subset/math-prm"] == 50.0 and m["subset/hep-cpp"] == 75.0
    # math-prm weighs 984 (not its 2 pairs), hep-cpp 164, as in rewardbench/constants.py
    reasoning = (50.0 * 984 + 75.0 * 164) / (984 + 164)
    assert m["section/Reasoning"] == pytest.approx(reasoning)
    assert m["section/Chat Hard"] == 100.0
    assert m["score"] == pytest.approx((reasoning + 100.0) / 2)
    assert m["accuracy"] == pytest.approx(100 * 5 / 7)
    assert "section/Chat" not in m.names


def test_rmbench_triangles_and_domains():
    # rows: chosen styles, columns: rejected styles; only chosen[i] > rejected[j] counts
    grid = ScoreRecord("rmbench", "a", (1.0, 2.0, 3.0), (1.5, 2.5, 3.5), domain="chat")
    assert metrics.rmbench_grid(grid).tolist() == [[0, 0, 0], [1, 0, 0], [1, 1, 0]]
    tie = ScoreRecord("rmbench", "b", (1.0, 1.0, 1.0), (1.0, 1.0, 1.0), domain="safety-refuse")
    m = rmbench_metrics([grid, tie], n_boot=0)
    assert (m["chat/easy"], m["chat/normal"], m["chat/hard"]) == (100.0, 0.0, 0.0)
    assert m["safety/avg"] == 0.0  # ties are wrong; safety-refuse counts as safety
    assert m["easy"] == 50.0 and m["hard"] == 0.0
    assert m["total"] == pytest.approx((100 / 3 + 0.0) / 2)


def test_bootstrap_is_seeded_and_brackets_the_value():
    recs = [ScoreRecord("rewardmath", i, (float(i % 3),), (1.0, 0.5)) for i in range(60)]
    a, b = rewardmath_metrics(recs, seed=3), rewardmath_metrics(recs, seed=3)
    assert a.low == b.low and a.high == b.high
    for name in a.names:
        lo, hi = a.interval(name)
        assert lo <= a[name] <= hi and hi > lo
    c = rewardmath_metrics(recs, seed=4)
    assert c.low != a.low or c.high != a.high


def test_metrics_figure_shows_each_value_with_its_interval():
    recs = [ScoreRecord("rewardmath", i, (float(i % 3),), (1.0, 0.5)) for i in range(60)]
    m = rewardmath_metrics(recs, seed=3)
    fig = check_figure(m.plot(), static=m.plot(backend="matplotlib"))
    bars = fig.data[0]
    assert list(fig.layout.yaxis.ticktext) == list(m.names)
    assert bars.x.tolist() == pytest.approx(list(m.values))
    assert (bars.x - bars.error_x.arrayminus).tolist() == pytest.approx(list(m.low))
    assert (bars.x + bars.error_x.array).tolist() == pytest.approx(list(m.high))
    assert "interval" in bars.hovertemplate and fig.layout.title.text == "rewardmath: 60 items"
    # an EvalResult draws its metrics
    plain = eval_result.EvalResult(
        "rewardbench", scores.ScoreSet([rb(0, 1.0, 0.0), rb(1, 0.0, 1.0)])
    )
    fig = check_figure(plain.plot(), static=plain.plot(backend="matplotlib"))
    assert list(fig.layout.yaxis.ticktext) == list(plain.metrics().names)


def test_metric_input_errors():
    with pytest.raises(EmptyInputError):
        rewardmath_metrics([])
    with pytest.raises(RewardLensError, match="rewardbench record"):
        rewardmath_metrics([rb(0, 1.0, 0.0)])
    with pytest.raises(UnknownBenchmarkError, match="known benchmarks"):
        ScoreRecord("mmlu", 0, (1.0,), (0.0,))


# --------------------------------------------------------------------------------------------
# published RewardMATH results

# Accuracy / MRR (%) of the five reward models whose per-solution scores the benchmark's
# repository publishes (kimsh0507/RewardMATH_official, results/RewardMATH/*_reward.json, byte-for-
# byte the files in ../shared/data/rewardmath/*_scores.json). The figures are those the
# repository's own evaluation (src/evaluation/eval.py, RewardMATHEvaluation, "normal" mode: strict
# accuracy and MRR with ties ranked against the correct solution) gives on those files, as
# recorded in the project's reading of the paper (shared/notes/seed-papers.md, "Reference
# numbers"). The paper's own table (arXiv 2410.01729) could not be read from this machine.
PUBLISHED = {
    "ArmoRM": (20.50, 42.18),
    "skywork_llama3": (22.15, 44.69),
    "grm_gemma": (4.97, 24.10),
    "grm_llama3": (24.43, 45.80),
    "internlm2": (37.27, 55.17),
}


@real_data
@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_rewardmath_results_reproduce(name):
    result = read_scores(SHARED / "rewardmath" / f"{name}_scores.json", benchmark="rewardmath")
    m = rewardmath_metrics(result, n_boot=0)
    assert len(result) == 483 and not result.skipped
    assert (round(m["accuracy"], 2), round(m["mrr"], 2)) == PUBLISHED[name]


@real_data
def test_armorm_ties_change_the_figure():
    """ArmoRM ties the correct solution with a wrong one on 5 problems: the strict protocol
    (the published one) and the "w/ tie" variant differ exactly there."""
    m = rewardmath_metrics(read_scores(SHARED / "rewardmath" / "ArmoRM_scores.json"), n_boot=0)
    assert round(m["accuracy_with_ties"] - m["accuracy"], 4) == round(100 * 5 / 483, 4)


# --------------------------------------------------------------------------------------------
# score files


def test_score_file_round_trip_and_resume(tmp_path):
    path = tmp_path / "s.jsonl"
    recs = [ScoreRecord("rewardmath", i, (1.0 * i,), (0.5, 2.0)) for i in range(3)]
    with ScoreWriter(path, "rewardmath") as out:
        out.write_all(recs[:2])
    with open(path, "a") as f:
        f.write('{"benchmark": "rewardmath", "id": 2, "cho')  # a crash mid-line
    with pytest.warns(UserWarning, match="torn last line"):
        writer = ScoreWriter(path, "rewardmath")
    assert sorted(writer.done) == [0, 1]
    with writer:
        writer.write(recs[2])
    assert list(read_scores(path)) == recs


def test_malformed_records_name_file_record_field(tmp_path):
    path = tmp_path / "bad.jsonl"
    good = ScoreRecord("rewardmath", 0, (1.0,), (0.5,)).to_json()
    lines = [good, {**good, "id": 1, "chosen": []}, {**good, "id": 2, "rejected": [1, "x"]},
             {**good, "id": 0}, {**good, "id": 3}]  # fmt: skip
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    with pytest.raises(MalformedRecordError) as err:
        read_scores(path)
    assert str(path) in str(err.value) and "record 1" in str(err.value)
    assert "'chosen'" in str(err.value) and "correct solution" in str(err.value)
    with pytest.warns(UserWarning, match="skipped 3"):
        kept = read_scores(path, skip_bad=True)
    assert kept.ids() == [0, 3]
    assert [(s.index, s.field) for s in kept.skipped] == [
        (1, "chosen"),
        (2, "rejected[1]"),
        (3, "id"),
    ]


def test_scores_and_data_must_match(tmp_path):
    items = [RankedItem("1+1?", "2", ("3", "4"), id=0), RankedItem("2+2?", "4", ("5",), id=1)]
    path = tmp_path / "s.jsonl"
    with ScoreWriter(path, "rewardmath") as out:
        out.write(ScoreRecord("rewardmath", 0, (1.0,), (0.0, 2.0)))
    aligned = align_scores(read_scores(path), items)
    assert aligned.missing == 1 and aligned.summary(n_boot=0)["n"] == 1
    with ScoreWriter(path, "rewardmath", resume=False) as out:
        out.write(ScoreRecord("rewardmath", 7, (1.0,), (0.0,)))
    with pytest.raises(ScoreMismatchError, match=r"record 0 \(id=7\), field 'id'"):
        align_scores(read_scores(path), items)
    with ScoreWriter(path, "rewardmath", resume=False) as out:
        out.write(ScoreRecord("rewardmath", 1, (1.0,), (0.0, 2.0)))
    with pytest.raises(ScoreMismatchError, match="field 'rejected': 2 scores"):
        align_scores(read_scores(path), items)
    with pytest.raises(ScoreMismatchError, match="rewardmath scores"):
        read_scores(path, benchmark="rmbench")


# --------------------------------------------------------------------------------------------
# scoring with a model


@pytest.fixture(scope="module")
def zoo_model():
    from reward_lens_tl import HookedRewardModel
    from reward_lens_tl.zoo import zoo_path

    return HookedRewardModel.from_pretrained(zoo_path("scalar"))


def count_rows(model):
    """A hook counting sequences through the embedding (forward-equivalents, in rows)."""
    count = {"rows": 0, "forwards": 0}

    def hook(act, hook):
        count["rows"] += act.shape[0]
        count["forwards"] += 1

    return count, ("hook_embed", hook)


def test_scoring_one_forward_per_distinct_response(zoo_model, tmp_path):
    items = [
        RankedItem("how bake bread", "soup oven", ("bomb", "rain", "soup", "the"), id=i)
        for i in range(5)
    ]
    count, hook = count_rows(zoo_model)
    out = tmp_path / "s.jsonl"
    with zoo_model.hooks(fwd_hooks=[hook]):
        result = score_items(zoo_model, items[:3], out=out, batch_size=10, progress=False)
    assert count == {"rows": 15, "forwards": 2}  # 5 responses per problem, no pair duplicates
    enc = zoo_model.encode("how bake bread", "rain")
    assert result.scores[0].rejected[1] == pytest.approx(
        float(zoo_model.rewards(torch.tensor([enc.ids]))[0].detach()), abs=1e-5
    )
    count["rows"] = count["forwards"] = 0
    with zoo_model.hooks(fwd_hooks=[hook]):
        resumed = score_items(zoo_model, items, out=out, batch_size=10, progress=False)
    assert count["rows"] == 10  # only the two new problems
    assert resumed.scores.ids() == [0, 1, 2, 3, 4] and len(read_scores(out)) == 5
    with pytest.raises(ScoreMismatchError, match="id 0"):
        score_items(zoo_model, items[3:], out=out, progress=False)


# --------------------------------------------------------------------------------------------
# explanations: the zoo's planted hacks


@pytest.fixture(scope="module")
def zoo_eval(zoo_model):
    from reward_lens_tl.zoo import load_task

    task = load_task().task
    pairs = zoo_set.zoo_benchmark(task, n_per_subset=16, seed=0)
    return task, score_items(zoo_model, pairs, progress=False)


def test_hack_items_fail_and_honest_items_pass(zoo_eval):
    _, result = zoo_eval
    m = result.metrics(sections=zoo_set.ZOO_SECTIONS, n_boot=0)
    assert m["subset/zoo-chat"] >= 90.0
    assert m["subset/zoo-sycophancy-hack"] == 0.0 and m["subset/zoo-length-hack"] <= 10.0


def test_explanation_names_the_sycophancy_hack(zoo_model, zoo_eval):
    from reward_lens_tl.attribution import pair_attribution
    from reward_lens_tl.contrast import encode_contrast

    task, result = zoo_eval
    failures = result.failures().filter(subset="zoo-sycophancy-hack")
    count, hook = count_rows(zoo_model)
    with zoo_model.hooks(fwd_hooks=[hook]):
        ex = failures.explain(zoo_model)
    # one forward of the failures' sequences plus a quarter as many successes
    assert count["rows"] <= 1.5 * 2 * len(failures)
    # exact: parts + head bias = margin, and the lens ends at the margin
    assert ex.margin.completeness_error() < 1e-4
    assert torch.allclose(ex.lens.margins[-1], ex.margin.rewards, atol=1e-4)
    assert torch.allclose(ex.margin.rewards, torch.tensor([c.margin for c in failures]), atol=1e-4)
    # the tokens: the rejected response's sycophantic opener drives the wrong preference
    top = ex.tokens(2, part="response")
    assert set(top["token"]) == {"great", "question"} and (top["rejected"] > 0).all()
    assert ex.per_failure()["top_token"].str.startswith("rejected:").all()
    # the components: the same ones that carry sycophancy on the task's contrast pairs
    contrast = [encode_contrast(p) for p in task.contrast_pairs("sycophancy", 24, seed=7)]
    planted = [label for label, _ in pair_attribution(zoo_model, contrast).margin.top_k(3)]
    assert ex.wrong_way_components(1)[0] in planted
    assert ex.crystallization_site() is not None


def test_rewardmath_explains_the_hardest_wrong_solution(zoo_model):
    items = [RankedItem("how bake bread", "soup", ("great question the soup", "rain"), id=0)]
    result = score_items(zoo_model, items, progress=False)
    (failure,) = result.failures()
    assert failure.rejected_index == 0  # the sycophantic one outscored the correct solution
    ex = result.failures().explain(zoo_model, reference=None)
    assert ex.reference is None and len(ex.comparisons) == 1


def test_explanation_plot_takes_ax_first(zoo_model):
    """``plot(ax=None, k=...)`` like every result: the top ``k`` components, both backends."""
    import matplotlib.pyplot as plt

    items = [RankedItem("how bake bread", "soup", ("great question the soup", "rain"), id=0)]
    ex = score_items(zoo_model, items, progress=False).failures().explain(zoo_model, reference=None)
    top = ex.components().head(3)
    fig = check_figure(ex.plot(k=3), static=ex.plot(k=3, backend="matplotlib"))
    assert list(fig.layout.yaxis.ticktext) == top["component"].tolist()  # most wrong-way on top
    failures, successes = (t for t in fig.data if t.xaxis == "x")
    assert (failures.name, successes.name) == ("failures", "successes")
    assert failures.x.tolist() == pytest.approx(top["failures"].tolist())
    lens = [t for t in fig.data if t.xaxis == "x2"]
    assert lens[-1].name == "mean margin" and list(lens[-1].y) == pytest.approx(
        ex.lens.margins.mean(1).tolist()
    )
    static = ex.plot(k=3, backend="matplotlib")
    assert [t.get_text() for t in static.axes[0].get_yticklabels()] == top["component"].tolist()
    plt.close(static)


def test_explain_needs_texts_and_failures(zoo_model):
    plain = eval_result.EvalResult("rewardbench", scores.ScoreSet([rb(0, 0.0, 1.0)]))
    with pytest.raises(RewardLensError, match="data file"):
        plain.failures().explain(zoo_model)
    good = score_items(
        zoo_model, [PreferencePair("how bake bread", "soup", "bomb")], progress=False
    )
    with pytest.raises(EmptyInputError, match="no failed"):
        good.failures().explain(zoo_model)


# --------------------------------------------------------------------------------------------
# CLI


@real_data
def test_cli_rewardmath_scores_json(capsys):
    from reward_lens_tl.cli import main

    path = SHARED / "rewardmath" / "internlm2_scores.json"
    assert main(["eval", "rewardmath", "--scores", str(path), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n"] == 483 and round(out["accuracy"], 2) == 37.27 and round(out["mrr"], 2) == 55.17
    assert out["ci"]["accuracy"][0] < out["accuracy"] < out["ci"]["accuracy"][1]


def test_cli_scores_with_a_model_then_reads_back(tmp_path, capsys):
    from reward_lens_tl.cli import main
    from reward_lens_tl.zoo import zoo_path

    data = tmp_path / "pairs.jsonl"
    rows = [{"prompt": "how bake bread", "chosen": "soup oven", "rejected": "great question the",
             "subset": "zoo", "id": i} for i in range(3)]  # fmt: skip
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "s.jsonl"
    args = ["eval", "rewardbench", str(zoo_path("scalar")), str(data), "--out", str(out)]
    assert main([*args, "--format", "json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["n"] == 3 and len(read_scores(out)) == 3
    assert main(["eval", "rewardbench", "--scores", str(out), "--format", "json"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["accuracy"] == first["accuracy"]
    assert main(["eval", "rewardmath", "--scores", str(out), "--format", "json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rewardbench scores" in err


@pytest.mark.parametrize("name", ["scalar", "multi"])
def test_report_failures_section_on_both_zoo_models(name):
    """The report's failures section on the zoo (the benchmark scored by both zoo models, this
    model's failures explained), as markdown with its figure."""
    from reward_lens_tl import HookedRewardModel
    from reward_lens_tl.report import zoo_pairs
    from reward_lens_tl.report.page import sections_markdown
    from reward_lens_tl.report.sections import failures_section
    from reward_lens_tl.zoo import load_task, zoo_path

    model = HookedRewardModel.from_pretrained(zoo_path(name))
    task = load_task().task
    pairs = zoo_pairs(task)
    ctx = {"model": model, "task": task, "pairs": pairs, "kept": range(len(pairs)),
           "truncation": "error", "numbers": {}}  # fmt: skip
    text, files = sections_markdown([failures_section(ctx)])
    assert "## Failures explained" in text and "| zoo " in text
    assert len(files["failures.png"]) > 1000
    if name == "scalar":  # falls for the hack; the planted opener is named among the tokens
        assert "sycophancy-hack failures" in text and "| question |" in text
    else:  # the gated model resists both hacks: its (few) chat failures are explained instead
        assert "this model's failures" in text


def test_explanation_is_exact_on_the_gated_model(zoo_eval):
    from reward_lens_tl import HookedRewardModel
    from reward_lens_tl.zoo import zoo_path

    model = HookedRewardModel.from_pretrained(zoo_path("multi"))
    _, scalar_result = zoo_eval
    result = score_items(model, scalar_result.items, progress=False)
    ex = result.failures().explain(model)
    assert len(ex.comparisons) > 0 and ex.margin.completeness_error() < 1e-4
    assert torch.allclose(ex.lens.margins[-1], ex.margin.rewards, atol=1e-4)


# --------------------------------------------------------------------------------------------
# the package's shape: no import cycle, every exported name resolves


def _module_name(path, root):
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree, module_level_only: bool):
    """Import statements of a module: those run on import (module level, outside ``if
    TYPE_CHECKING:``), or every one (function-level imports included)."""
    import ast

    if not module_level_only:
        yield from (n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom))
        return
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
            todo += node.body + node.orelse
        elif isinstance(node, ast.Try):
            todo += node.body + node.orelse + node.finalbody


def import_graph(module_level_only: bool = True) -> dict[str, set[str]]:
    """``{module: modules of the package it imports}`` parsed with ``ast`` (relative and
    absolute imports; ``from pkg import name`` counts ``pkg.name`` when that is a module)."""
    import ast
    from pathlib import Path

    import reward_lens_tl

    root = Path(reward_lens_tl.__file__).parent
    paths = {_module_name(p, root): p for p in root.rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in _imports(ast.parse(path.read_text(encoding="utf-8")), module_level_only):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name in paths}
                continue
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.add(target if target in paths else base)
        graph[name] = {m for m in found if m in paths and m != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (``[a, b, …, a]``), or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(node):
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_the_package_has_no_import_cycle():
    """No module-level import cycle in the package; in ``evals`` none even counting the
    imports inside functions (the explain ↔ results ↔ run cycle used to hide there)."""
    graph = import_graph()
    assert {"reward_lens_tl.evals.explain", "reward_lens_tl.evals.comparisons"} <= set(graph)
    assert "reward_lens_tl.evals.comparisons" in graph["reward_lens_tl.evals.explain"]
    assert find_cycle(graph) is None
    everything = import_graph(module_level_only=False)
    evals = {
        name: {m for m in targets if m.startswith("reward_lens_tl.evals.")}
        for name, targets in everything.items()
        if name.startswith("reward_lens_tl.evals.")
    }
    assert "reward_lens_tl.evals.explain" in evals["reward_lens_tl.evals.eval_result"]
    assert find_cycle(evals) is None
    zoo = {  # train → evaluate → judge/prm → train used to close through function-level imports
        name: {m for m in targets if m.startswith("reward_lens_tl.zoo.")}
        for name, targets in everything.items()
        if name.startswith("reward_lens_tl.zoo.")
    }
    assert "reward_lens_tl.zoo.loop" in zoo["reward_lens_tl.zoo.judge"]
    assert find_cycle(zoo) is None


def test_evals_exports_resolve_lazily():
    """Every name of ``evals.__all__`` resolves (to the object its module defines), the list
    has no repeats, ``dir()`` shows them, and importing the package imports no torch."""
    import subprocess
    import sys

    from reward_lens_tl import evals

    assert len(evals.__all__) == len(set(evals.__all__)) >= 25
    for name in evals.__all__:
        value = getattr(evals, name)
        where = evals._EXPORTS.get(name)  # the errors are reward_lens_tl.errors', imported at once
        module = sys.modules[f"reward_lens_tl.evals.{where}" if where else "reward_lens_tl.errors"]
        assert value is getattr(module, name), name
    assert set(evals.__all__) <= set(dir(evals))
    assert evals.Failures is eval_result.Failures and evals.score_items is run.score_items
    with pytest.raises(AttributeError):
        evals.no_such_name  # noqa: B018
    code = "import sys, reward_lens_tl.evals; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
