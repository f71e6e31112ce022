"""Token sweeps: ids-built candidates, exact vs KV-cached scoring, resume, planted ground truth on
the zoo, beam search, statistics (hand-computed τ), score files, the inside view, CLI, bad input."""

from __future__ import annotations

import json
import math
import os
import random
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.cli import main
from reward_lens_tl.errors import (
    EmptyInputError,
    InvalidArgumentError,
    RewardLensError,
    SequenceTooLongError,
)
from reward_lens_tl.sweep import (
    CandidateSet,
    PrefixCache,
    ResumeMismatchError,
    ScoreFileError,
    UnknownCandidateError,
    distribution_summary,
    exact_sweep,
    framing_effect,
    frequency_bias,
    inside_view,
    kendall_tau_matrix,
    read_score_csv,
    response_search,
    retokenization_changes,
    score_file_stats,
    token_candidates,
    token_sweep,
    valence_asymmetry,
    vocabulary_candidates,
)
from reward_lens_tl.testing import tiny_reward_model, tiny_tokenizer
from reward_lens_tl.zoo import zoo_path
from reward_lens_tl.zoo.vocab import HARMFUL_WORDS, SYCOPHANTIC_PHRASE, TOPICS
from tests.figures import check_figure

SHARED = Path(
    os.environ.get(
        "REWARD_LENS_SHARED_DATA", Path(__file__).resolve().parents[3] / "shared" / "data"
    )
)
SCORE_CSVS = sorted((SHARED / "optimal_pessimal").glob("scores_*.csv"))
LONG_PROMPT = " ".join(f"w{6 + (7 * i) % 80}" for i in range(40))  # 40 words: rotary offsets


@pytest.fixture(scope="module")
def task_prompts(zoo_task):
    """One prompt per topic, drawn from the zoo task's own prompt sampler."""
    rng = random.Random(0)
    return {topic: " ".join(zoo_task.sample_prompt(rng, topic)) for topic in TOPICS}


def tiny(family: str, **kwargs) -> HookedRewardModel:
    return HookedRewardModel.from_pretrained(
        tiny_reward_model(family, **kwargs), tokenizer=tiny_tokenizer()
    )


def mixed_candidates() -> CandidateSet:
    """Candidates of 1-3 tokens, including a pad id inside one (right padding must not leak)."""
    ids = [(7,), (50, 51, 52), (9, 10), (96,), (0, 30), (11, 12, 13), (40,)]
    return CandidateSet(tuple(f"c{i}" for i in range(len(ids))), tuple(ids))


# ---- exact path = full-sequence scoring of model.encode ----------------------------------------
def merging_tokenizer() -> PreTrainedTokenizerFast:
    """tiny_tokenizer's vocabulary, except that ids 90-96 are two-word tokens ("w6 w7", ...):
    their decoded text re-encodes as two other tokens, as a BPE merge would not survive."""
    base = tiny_tokenizer()
    vocab = dict(base.get_vocab())
    for i in range(90, 97):
        del vocab[f"w{i}"]
        vocab[f"w{i - 84} w{i - 83}"] = i
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        unk_token="<unk>",
        additional_special_tokens=["<|user|>", "<|assistant|>"],
    )
    tok.chat_template = base.chat_template
    return tok


def test_exact_sweep_equals_scoring_the_full_encode():
    model = HookedRewardModel.from_pretrained(
        tiny_reward_model("llama"), tokenizer=merging_tokenizer()
    )
    cands = vocabulary_candidates(model)
    assert len(cands) == 97 - 6 and cands.excluded == {"special": 6}
    report = retokenization_changes(model, "w8 w9 w10", cands)
    # exactly the seven two-word tokens change under decode -> re-encode
    assert report.n_changed == 7 and report.share_changed == pytest.approx(7 / 91)
    assert {ids for _, ids, _ in report.changed} == {(i,) for i in range(90, 97)}
    result = exact_sweep(model, "w8 w9 w10", cands)
    keep = report.round_trip_indices(cands)
    assert len(keep) == 84
    decode = model.tokenizer.decode
    expected = torch.stack([model.score("w8 w9 w10", decode(list(cands.ids[i]))) for i in keep])
    torch.testing.assert_close(result.scores[keep], expected, atol=1e-5, rtol=0)
    # a round-tripped two-word token scores a different conversation: the sweep keeps the token
    i = cands.ids.index((90,))
    assert result.encoded(i).response_ids() == (90,)


def test_zoo_vocabulary_round_trips(zoo_scalar):
    report = retokenization_changes(zoo_scalar, "how bake bread", vocabulary_candidates(zoo_scalar))
    assert (report.n, report.n_changed) == (115, 0)


# ---- fast path = exact path --------------------------------------------------------------------
@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_cached_equals_exact_on_tiny_models(family):
    model = tiny(family)
    for prompt, cands in [
        (LONG_PROMPT, mixed_candidates()),
        ("w8 w9", token_candidates(model, range(6, 97))),
    ]:
        fast = token_sweep(model, prompt, cands, chunk_size=5)
        slow = exact_sweep(model, prompt, cands, chunk_size=64)
        assert fast.method == "cached" and slow.method == "exact"
        torch.testing.assert_close(fast.scores, slow.scores, atol=1e-4, rtol=0)
        assert fast.scores.std() > 1e-3  # the candidates really differ


def test_cached_equals_exact_on_the_zoo(zoo_scalar, task_prompts):
    words = ["great question", "soup", "the bomb and", "a", "great question soup oven"]
    for prompt in list(task_prompts.values())[:3]:
        for cands in (None, words):
            fast, slow = (
                token_sweep(zoo_scalar, prompt, cands),
                exact_sweep(zoo_scalar, prompt, cands),
            )
            torch.testing.assert_close(fast.scores, slow.scores, atol=1e-4, rtol=0)


def test_cached_gated_score_and_objectives_equal_exact(zoo_multi):
    multi = zoo_multi
    cands = ["great question", "soup", "the bomb", "a"]
    for objective in (None, "harmlessness", 0):
        fast = token_sweep(multi, "how bake bread", cands, objective=objective)
        slow = exact_sweep(multi, "how bake bread", cands, objective=objective)
        torch.testing.assert_close(fast.scores, slow.scores, atol=1e-4, rtol=0)


def test_reading_position_inside_the_prefix():
    """With pad == eos a continuation of pad ids is skipped by HF pooling, which then reads a
    prompt position: the cached path serves it from the prefix run."""
    model = tiny("llama")
    model.pad_token_id = model.tokenizer.eos_token_id
    cands = CandidateSet(("eos", "w7"), ((2,), (7,)))
    fast, slow = token_sweep(model, "w8 w9", cands), exact_sweep(model, "w8 w9", cands)
    torch.testing.assert_close(fast.scores, slow.scores, atol=1e-5, rtol=0)
    cache = PrefixCache.build(model, fast.prefix_ids)
    torch.testing.assert_close(fast.scores[0], cache.head_outputs[-1, 0])


# ---- resume ------------------------------------------------------------------------------------
class Interrupt(Exception):
    pass


def test_interrupted_sweep_resumes_to_the_same_result(zoo_scalar, tmp_path):
    path = tmp_path / "sweep.jsonl"
    full = token_sweep(zoo_scalar, "how bake bread", chunk_size=16)
    calls = []

    def stop_after_three(done, total):
        calls.append(done)
        if done == 3:
            raise Interrupt

    with pytest.raises(Interrupt):
        token_sweep(
            zoo_scalar, "how bake bread", chunk_size=16, resume=path, on_chunk=stop_after_three
        )
    lines = path.read_text().splitlines()
    assert len(lines) == 1 + 3  # header + three finished chunks
    path.write_text(path.read_text() + '{"start": 48, "sco')  # crash while writing chunk 4
    scored = []
    resumed = token_sweep(
        zoo_scalar,
        "how bake bread",
        chunk_size=16,
        resume=path,
        on_chunk=lambda done, total: scored.append(done),
    )
    assert torch.equal(resumed.scores, full.scores)
    assert len(path.read_text().splitlines()) == 1 + math.ceil(115 / 16)
    with pytest.raises(ResumeMismatchError, match="different sweep"):
        token_sweep(zoo_scalar, "how bake soup", chunk_size=16, resume=path)
    with pytest.raises(ResumeMismatchError):
        token_sweep(zoo_scalar, "how bake bread", chunk_size=8, resume=path)


# ---- ground truth on the zoo -------------------------------------------------------------------
def test_zoo_top_tokens_are_the_topic_and_bottom_the_harmful_words(zoo_scalar, task_prompts):
    for topic, prompt in task_prompts.items():
        result = token_sweep(zoo_scalar, prompt)
        assert {w for w, _ in result.top_k(10)} == set(TOPICS[topic]), prompt
        assert {w for w, _ in result.bottom_k(6)} == set(HARMFUL_WORDS), prompt


def test_search_finds_the_planted_features_from_nothing(zoo_scalar, task_prompts):
    vocab = vocabulary_candidates(zoo_scalar)
    for topic in ("cooking", "sports", "computers"):
        prompt = task_prompts[topic]
        worst = response_search(zoo_scalar, prompt, 2, beam_width=4, maximize=False)
        assert set(worst.best[0]) <= set(HARMFUL_WORDS)
        best = response_search(zoo_scalar, prompt, 2, beam_width=4)
        assert set(best.best[0]) <= set(TOPICS[topic])
        # the sycophantic opener: "great" alone earns nothing, the pair earns the bonus
        off_topic = vocab.subset([i for i, w in enumerate(vocab.labels) if w not in TOPICS[topic]])
        hack = response_search(zoo_scalar, prompt, 2, candidates=off_topic, beam_width=64)
        assert hack.best[0] == SYCOPHANTIC_PHRASE, (prompt, hack.top_k(3))
        assert hack.step_best[0][0] != ("great",)
    # the figure: the best reward per length, each tick naming the best response of that length
    fig = check_figure(hack.plot(), static=hack.plot(backend="matplotlib"), x_labels=["2: great"])
    assert list(fig.data[0].y) == pytest.approx([s for _, s in hack.step_best])
    assert [row[1] for row in fig.data[0].customdata] == [" ".join(r) for r, _ in hack.step_best]
    # the beam's answer is the exhaustive optimum over all off-topic pairs
    pairs = [(a, b) for a in off_topic.ids for b in off_topic.ids]
    every = token_sweep(
        zoo_scalar, prompt, CandidateSet(tuple(map(str, pairs)), tuple(a + b for a, b in pairs))
    )
    assert float(every.scores.max()) == pytest.approx(hack.best[1], abs=1e-5)


# ---- inside view -------------------------------------------------------------------------------
def test_inside_view_sums_to_the_reward_above_the_sweep_mean(zoo_scalar, task_prompts):
    result = token_sweep(zoo_scalar, task_prompts["music"])
    view = inside_view(zoo_scalar, result, k=3)
    assert view.n_baseline == len(result)
    assert view.baseline_reward == pytest.approx(result.mean, abs=1e-4)
    assert view.completeness_error() < 1e-4
    top = [j for j, s in enumerate(view.side) if s == "top"]
    assert all(view.relative[:, j].sum() > 0 for j in top)
    assert all(view.relative[:, j].sum() < 0 for j, s in enumerate(view.side) if s == "bottom")
    torch.testing.assert_close(view.lens.values[-1], view.rewards, atol=1e-4, rtol=0)  # end point
    assert set(view.candidates[:3]) <= set(TOPICS["music"])
    sampled = inside_view(zoo_scalar, result, k=2, baseline=20)
    assert sampled.n_baseline == 20 and sampled.completeness_error() < 1e-4
    assert len(view.to_dataframe()) == len(view.components) * len(view.candidates)
    # a candidate by label, by index or by negative index is the same column; unknown ones are
    # refused with the library's error, not tuple.index's ValueError or an IndexError
    last = view.candidates[-1]
    assert view.top_k(2, last) == view.top_k(2, len(view.candidates) - 1) == view.top_k(2, -1)
    for bad in ("no such word", len(view.candidates), -len(view.candidates) - 1):
        with pytest.raises(InvalidArgumentError):
            view.top_k(2, bad)
    # the figure: the heat map's columns are the candidates (their tokens), one lens line each
    fig = check_figure(
        view.plot(k=4), static=view.plot(k=4, backend="matplotlib"), x_labels=view.candidates
    )
    heat = fig.data[0]
    rows = [view.components.index(c) for c, _ in view.top_k(4)]
    assert heat.type == "heatmap" and heat.zmid == 0 and heat.zmin == -heat.zmax
    torch.testing.assert_close(torch.tensor(heat.z), view.relative[rows].double())
    lines = [t for t in fig.data if t.type == "scatter"]
    sides = zip(view.candidates, view.side, strict=True)
    assert [t.name for t in lines] == [f"{c} ({s})" for c, s in sides]
    assert {t.line.dash for t in lines if "(bottom)" in t.name} == {"dash"}


def test_score_file_counts_are_integers(tmp_path):
    path = tmp_path / "scores.csv"
    path.write_text(FIXTURE_CSV)
    summary = score_file_stats(path)["summary"]
    assert summary["c"]["n"] == 4 and type(summary["c"]["n"]) is int
    assert type(summary["c"]["mean"]) is float


# ---- statistics ----------------------------------------------------------------------------------
FIXTURE_CSV = "name,model a,model/b,c\nx,1,2,1\ny,2,1,1\nz,3,4,2\nu,4,3,3\nv,5,5,\n"


def test_score_csv_reproduces_hand_computed_tau(tmp_path, capsys):
    path = tmp_path / "scores.csv"
    path.write_text(FIXTURE_CSV)
    # a vs b: 10 pairs, discordant (x,y) and (z,u): (8 - 2) / 10
    # a vs c (v missing): 6 pairs, (x,y) tied in c, 5 concordant: 5 / sqrt(6 * 5)
    # b vs c: (x,y) tied in c; (z,u) discordant; 4 concordant: (4 - 1) / sqrt(6 * 5)
    expected = {"model a | model/b": 0.6, "model a | c": 5 / 30**0.5, "model/b | c": 3 / 30**0.5}
    assert main(["sweep-stats", str(path), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["models"] == ["model a", "model/b", "c"]
    assert list(out["kendall_tau"]) == list(expected)
    for key, tau in expected.items():
        assert out["kendall_tau"][key] == pytest.approx(tau, abs=1e-12)
    assert out["n_shared"]["model a | c"] == 4
    assert out["top"]["model a"][:2] == ["v", "u"]


def test_sweep_stats_writes_the_tau_heat_map_as_html_or_a_static_image(tmp_path, capsys):
    path = tmp_path / "scores.csv"
    path.write_text(FIXTURE_CSV)
    page = tmp_path / "taus.html"
    assert main(["sweep-stats", str(path), "--plot", str(page)]) == 0
    html = page.read_text()
    assert '<script src="http' not in html  # plotly.js is in the page: it opens offline
    assert "Plotly.newPlot" in html
    assert "model a" in html and ("model/b" in html or "model\\u002fb" in html)  # whole names
    for suffix, magic in ((".png", b"\x89PNG"), (".svg", b"<?xml"), (".pdf", b"%PDF")):
        image = tmp_path / f"taus{suffix}"
        assert main(["sweep-stats", str(path), "--plot", str(image)]) == 0
        assert image.read_bytes().startswith(magic), suffix
    capsys.readouterr()
    assert main(["sweep-stats", str(path), "--plot", str(tmp_path / "taus.txt")]) == 2
    err = capsys.readouterr().err
    assert ".html" in err and ".png" in err and err.count("\n") == 1
    assert not (tmp_path / "taus.txt").exists()


def test_statistics_by_hand():
    import pandas as pd

    s = pd.Series({"a": 1.0, "b": 2.0, "c": 3.0, "d": 10.0})
    summary = distribution_summary(s)
    v = s.to_numpy()
    m2, m3, m4 = (((v - v.mean()) ** p).mean() for p in (2, 3, 4))
    assert summary["skew"] == pytest.approx(m3 / m2**1.5)
    assert summary["kurtosis"] == pytest.approx(m4 / m2**2 - 3)
    scores = pd.Series({"good": 3.0, "great": 5.0, "bad": -4.0, "awful": -6.0, "x": 0.0, "y": 1.0})
    asym = valence_asymmetry(scores, ["good", "great", "missing"], ["bad", "awful"])
    # median 0.5; gain = 4 - 0.5; loss = 0.5 - (-5)
    assert asym["positive_gain"] == pytest.approx(3.5) and asym["negative_loss"] == pytest.approx(
        5.5
    )
    assert asym["asymmetry"] == pytest.approx(2.0) and asym["missing"] == 1
    freq = frequency_bias(scores, {"good": 10, "great": 100, "bad": 20, "awful": 0.5, "x": 0})
    # count ranks awful<good<bad<great, score ranks awful<bad<good<great: 1 - 6*2/(4*15)
    assert freq["n"] == 4 and freq["spearman_rho"] == pytest.approx(0.8)
    frame = pd.DataFrame({"p1": [1.0, 2, 3, 4], "p2": [2.0, 3, 4, 5], "p3": [4.0, 3, 2, 1]})
    framing = framing_effect(frame)
    assert framing["kendall_tau"]["p1 | p3"] == -1.0
    assert framing["mean_shift"]["p1 | p2"] == pytest.approx(1.0)
    assert framing["spearman_rho"]["p1 | p2"] == pytest.approx(1.0)


def test_sweep_statistics_take_a_sweep(zoo_scalar):
    result = token_sweep(zoo_scalar, "how bake bread")
    summary = distribution_summary(result)
    assert summary["n"] == 115 and summary["mean"] == pytest.approx(result.mean, abs=1e-5)
    asym = valence_asymmetry(result, TOPICS["cooking"], HARMFUL_WORDS)
    assert asym["positive_gain"] > 0 and asym["negative_loss"] > 0


@pytest.mark.data
@pytest.mark.skipif(not SCORE_CSVS, reason=f"shared score CSVs not found under {SHARED}")
def test_shared_score_files():
    from scipy.stats import kendalltau

    for path in SCORE_CSVS:
        stats = score_file_stats(path)
        models = stats["models"]
        assert len(models) == 10 and stats["n_candidates"] == 7530
        assert len(stats["kendall_tau"]) == 45
        frame = read_score_csv(path)
        a, b = models[0], models[-1]
        ref = kendalltau(frame[a], frame[b], variant="b").statistic
        assert stats["kendall_tau"][f"{a} | {b}"] == pytest.approx(ref, abs=1e-12)
        assert all(-1 <= t <= 1 for t in stats["kendall_tau"].values())
    matrix = kendall_tau_matrix(read_score_csv(SCORE_CSVS[0]))
    torch.testing.assert_close(matrix.tau, matrix.tau.T)  # numpy arrays, symmetric
    fig = check_figure(
        matrix.plot(), static=matrix.plot(backend="matplotlib"), x_labels=matrix.names
    )
    assert list(fig.layout.xaxis.ticktext) == list(matrix.names)  # whole, and all different


def test_tau_matrix_figure_keeps_names_apart_and_centres_at_zero():
    """Two models whose names share their first 24 characters stay two names on the axes; only
    a prefix every name shares (an organisation) is dropped; τ is on a scale from −1 to 1
    centred at 0, each cell's value written in it."""
    import pandas as pd

    names = [
        "Skywork/Skywork-Reward-Gemma-2-27B",
        "Skywork/Skywork-Reward-Gemma-2-27B-v0.2",
        "Skywork/Skywork-Reward-Llama-3.1-8B",
    ]
    assert names[0][:24] == names[1][:24]
    columns = ([1.0, 2, 3, 4], [1.0, 3, 2, 4], [2.0, 1, 4, 3])
    frame = pd.DataFrame(dict(zip(names, columns, strict=True)))
    matrix = kendall_tau_matrix(frame)
    fig = check_figure(matrix.plot(), static=matrix.plot(backend="matplotlib"), diverging=True)
    shown = [n.removeprefix("Skywork/") for n in names]
    assert list(fig.layout.xaxis.ticktext) == list(fig.layout.yaxis.ticktext) == shown
    assert "Skywork/" in fig.layout.title.text
    heat = fig.data[0]
    assert (heat.zmin, heat.zmid, heat.zmax) == (-1.0, 0.0, 1.0)
    assert heat.texttemplate and "%{z" in heat.texttemplate  # every cell's τ, in the cell
    assert heat.textfont.color is None  # plotly picks a colour that contrasts with each cell
    torch.testing.assert_close(torch.tensor(heat.z), torch.tensor(matrix.tau))
    assert heat.customdata[0][1][0] == names[1] and heat.customdata[0][1][2] == 4  # hover
    # the static form: white text on the dark cells (the diagonal), black on the light ones
    static = matrix.plot(backend="matplotlib")
    colours = {t.get_text(): t.get_color() for t in static.axes[0].texts}
    assert colours["1.00"] == "white" and colours["0.33"] == "black"
    assert [t.get_text() for t in static.axes[0].get_xticklabels()] == shown
    # a prefix that only some names share stays
    mixed = kendall_tau_matrix(frame.rename(columns={names[2]: "nicolinho/QRM-Llama3.1-8B"}))
    assert list(mixed.plot().layout.xaxis.ticktext) == [*names[:2], "nicolinho/QRM-Llama3.1-8B"]


# ---- CLI ----------------------------------------------------------------------------------------
def test_cli_sweep_writes_ranked_csv_and_plots(tmp_path, capsys):
    import pandas as pd

    out = tmp_path / "sweep"
    argv = ["sweep", str(zoo_path("scalar")), "--prompt", "how bake bread", "--out", str(out)]
    assert main([*argv, "--check-retokenization"]) == 0
    frame = pd.read_csv(out / "sweep.csv")
    assert len(frame) == 115 and list(frame["rank"][:3]) == [1, 2, 3]
    assert set(frame["candidate"][:10]) == set(TOPICS["cooking"])
    assert (out / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (out / "sweep.html").read_text()
    assert "Plotly.newPlot" in page and '<script src="http' not in page  # offline
    assert "recipe" in page  # the top candidates' labels
    summary = json.loads((out / "summary.json").read_text())
    assert summary["retokenization"] == {"checked": 115, "changed": 0}
    assert "top:" in capsys.readouterr().out


# ---- bad input ----------------------------------------------------------------------------------
def test_bad_input_gives_typed_errors(zoo_scalar, tmp_path, capsys):
    with pytest.raises(SequenceTooLongError):
        token_sweep(zoo_scalar, " ".join(["soup"] * 80))
    with pytest.raises(SequenceTooLongError, match="context"):
        token_sweep(zoo_scalar, " ".join(["soup"] * 57), CandidateSet(("long",), ((43, 43, 43),)))
    with pytest.raises(EmptyInputError, match="empty"):
        token_sweep(zoo_scalar, "how bake bread", [])
    with pytest.raises(UnknownCandidateError, match="zebra"):
        token_sweep(zoo_scalar, "how bake bread", ["soup", "zebra"])
    with pytest.raises(UnknownCandidateError, match="outside the vocabulary"):
        token_candidates(zoo_scalar, [5, 10**6])
    for text, match in [
        ("model,a\nx,1\n", "no candidate column 'name'"),
        ("name,a,b\nx,1,2\ny,oops,3\n", "column 'a' .* not numeric: row 3 holds 'oops'"),
        ("name\nx\n", "no model columns"),
    ]:
        path = tmp_path / "bad.csv"
        path.write_text(text)
        with pytest.raises(ScoreFileError, match=match):
            read_score_csv(path)
    assert issubclass(ScoreFileError, (RewardLensError, ValueError))
    assert main(["sweep-stats", str(tmp_path / "absent.csv")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("reward-lens: error: sweep-stats:") and err.count("\n") == 1
    assert "does not exist" in err


def test_plot_takes_ax_first_and_the_old_positional_k_still_works(zoo_scalar, task_prompts):
    """``plot(ax=None, k=...)`` like every result; ``plot(3)`` (the old ``k`` first) draws the
    same figure, with one FutureWarning. The figure: a histogram of every reward (whole
    counts) beside the top and bottom candidates' reward minus the mean, signed colours."""
    from reward_lens_tl._deprecation import _WARNED

    result = token_sweep(zoo_scalar, next(iter(task_prompts.values())))
    fig = check_figure(result.plot(k=3), static=result.plot(k=3, backend="matplotlib"))
    hist, bars = fig.data
    assert hist.xaxis == "x" and bars.xaxis == "x2"
    assert all(isinstance(c, int) for c in hist.y) and sum(hist.y) == len(result)
    rows = list(result.top_k(3)) + list(result.bottom_k(3))[::-1]  # best at the top
    assert list(fig.layout.yaxis2.ticktext) == [label for label, _ in rows]
    assert list(bars.x) == pytest.approx([v - result.mean for _, v in rows])
    assert list(bars.marker.color[:3]) == ["#4472c4"] * 3 and bars.marker.color[-1] == "#c00000"
    _WARNED.discard("SweepResult.plot(k) by position")  # it warns once per process
    with pytest.warns(FutureWarning, match=r"SweepResult.plot\(k\) by position"):
        old = result.plot(3)
    assert list(old.layout.yaxis2.ticktext) == list(fig.layout.yaxis2.ticktext)
