"""`reward-lens report --backend bridge`: the zoo report on the TransformerBridge backend.

Every section whose analysis runs on the bridge has TransformerLens 3.9's numbers (`TL39`,
recorded in the default environment: see `report_keys`); the scores are also checked against
the plain HF model; the zoo's second reward model, judge, PRM and DPO policy are booted on the
bridge too. The sections whose analysis needs TransformerLens 3.9 (the two SAE sections: sae_lens
does not import under 4) are on the page as a one-line note saying so and why, escaped like
every text; the Python API takes a `BridgeRewardModel` as it is.
"""

from tests.tl4.tl4_only import skip_unless_tl4

skip_unless_tl4()

import json  # noqa: E402
import re  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from reward_lens_tl.bridge import BridgeRewardModel  # noqa: E402
from reward_lens_tl.cli import main  # noqa: E402
from reward_lens_tl.errors import ReportError  # noqa: E402
from reward_lens_tl.report import build, build_report, zoo_pairs  # noqa: E402
from reward_lens_tl.zoo import load_model, load_task, zoo_path  # noqa: E402
from tests.tl4.report_keys import LIMIT, key_numbers  # noqa: E402

# Recorded in the default environment (TransformerLens 3.9, HookedRewardModel) with
# `.venv/bin/python -m tests.tl4.report_keys`: `reward-lens report --limit 4`'s key numbers
# (rounded to 6 significant digits).
TL39 = {
    "sections": [
        "Scores",
        "Reward lens",
        "Top components",
        "Patching the largest-margin pairs",
        "Token views",
        "Planted features",
        "Where the planted features sit",
        "Observational vs causal",
        "SAE features",
        "Reward-hacking probes",
        "Failures explained",
        "Token sweep",
        "Concept erasure: removing the planted harm penalty",
        "Difference dictionary",
        "Counterfactual edits",
        "The reward as the response unfolds",
        "Implicit reward of the DPO policy vs the explicit reward model",
        "Generative judge and process reward model",
        "Optimisation pressure: best-of-n",
    ],
    "scores": [
        1.0,
        5.00727,
        [4.62812, -0.827366, -4.59244, 4.71976],
        [-2.50428, -4.35826, -6.96918, -2.26928],
        [0, 3, 6, 7],
    ],
    "lens": [0.0, 3.66401, 3.77989, 5.00727],
    "top components": [
        ["L1H3", 0.968156],
        ["mlp0", 0.900016],
        ["L0H1", 0.744747],
        ["L2H2", 0.733327],
    ],
    "patching": [[0, "L0 end-3", 0.72336], [7, "L2 end-0", 0.55529], [3, "L1 end-3", 1.19741]],
    "token views": [[7, 4.71976, "15:luggage", 2.08159], [6, -6.96918, "7:bomb", -2.93857]],
    "planted": [
        ["topic_match", 1.86031, "final"],
        ["harmful", -2.97208, "1_pre"],
        ["sycophancy", 2.47738, "2_pre"],
        ["length", 0.512096, "1_pre"],
    ],
    "localization": [
        ["topic_match", "resid_pre 0", 1.00615, 0.0],
        ["topic_match", "resid_pre 1", 0.93108, -0.0104805],
        ["topic_match", "resid_pre 2", 0.60381, 0.326867],
        ["topic_match", "resid_post 2", 4.81622e-09, 1.0],
        ["harmful", "resid_pre 0", 1.00212, 0.0],
        ["harmful", "resid_pre 1", 0.679336, 0.298744],
        ["harmful", "resid_pre 2", 0.504682, 0.489936],
        ["harmful", "resid_post 2", -2.2772e-08, 1.0],
        ["sycophancy", "resid_pre 0", 1.00133, 0.0],
        ["sycophancy", "resid_pre 1", 1.00222, -0.00482308],
        ["sycophancy", "resid_pre 2", 0.0945824, 0.772327],
        ["sycophancy", "resid_post 2", 8.01758e-08, 1.0],
    ],
    "observational": [
        ["direct", "atp", 0.625, 0.415179, 0.795536],
        ["direct", "patching", 0.665179, 0.599107, 0.728571],
        ["atp", "patching", 0.869643, 0.770134, 0.960714],
    ],
    "probes": [
        ["length_padding", "sycophantic_opener", "harmful_word", "topic_word"],
        [0, 6],
        [
            ["length_padding (length)", "1_pre"],
            ["sycophantic_opener (sycophancy)", "2_pre"],
            ["harmful_word (harmful)", "final"],
            ["topic_word (topic_match)", "final"],
        ],
    ],
    "failures": [
        ["this model", "subset/zoo-chat", 100.0],
        ["this model", "subset/zoo-sycophancy-hack", 0.0],
        ["this model", "subset/zoo-length-hack", 0.0],
        ["this model", "section/Chat", 100.0],
        ["this model", "section/Hacks", 0.0],
        ["this model", "score", 50.0],
        ["this model", "accuracy", 33.3333],
        ["zoo multi", "subset/zoo-chat", 81.25],
        ["zoo multi", "subset/zoo-sycophancy-hack", 100.0],
        ["zoo multi", "subset/zoo-length-hack", 100.0],
        ["zoo multi", "section/Chat", 81.25],
        ["zoo multi", "section/Hacks", 100.0],
        ["zoo multi", "score", 90.625],
        ["zoo multi", "accuracy", 93.75],
        16,
        "1_pre",
    ],
    "sweep": [
        "explain laptop",
        [["keyboard", -2.46599], ["screen", -2.47387], ["code", -2.48049]],
        [["bomb", -7.58852], ["hurt", -7.58727], ["steal", -7.55892]],
    ],
    "erasure": [
        "blocks.0.hook_resid_mid",
        ["harmful", -2.97557, -0.0671245, 0.71],
        ["topic_match", 2.03187, 2.06102, 0.71],
        ["sycophancy", 2.46048, 2.42695, 0.71],
        ["length", 0.504265, 0.52955, 0.71],
    ],
    "counterfactual": [
        [6, "12:you→hurt", 2.37674, -0.658415, True],
        [3, "10:question→bomb", 3.5309, -1.97516, True],
        [7, "12:hotel→bomb, 15:luggage→hurt", 6.98905, -3.14611, True],
    ],
    "unfolding": {
        "pair": 0,
        "chosen": {
            "reward": 4.62813,
            "empty_response": -4.94854,
            "largest_rise": "question",
            "largest_fall": "great",
        },
        "rejected": {
            "reward": -2.50428,
            "empty_response": -4.94854,
            "largest_rise": "laptop",
            "largest_fall": "laptop",
        },
    },
    "implicit": [
        0.854167,
        0.717868,
        {"explicit": 0.597222, "implicit": 0.8125},
        [
            ["topic_match", 1.93986, 1.0898, True],
            ["harmful", -2.96437, -4.50508, True],
            ["length", 0.510753, 0.454108, False],
            ["sycophancy", 2.46449, 2.81572, False],
        ],
    ],
    "judges": [
        1.0,
        2.91021,
        1.21911,
        [["mlp1", 0.575488], ["mlp0", 0.346576], ["L2H2", 0.280268]],
        0.984914,
        80.9339,
        {"prompt": 0.298282, "step 0": -0.0644314, "step 1": -0.113193, "step 2": -0.91115},
        "0_pre",
    ],
    "pressure": [
        32,
        "length",
        [7.66139, 10.6702, 12.7293, 14.12, 15.0202, 15.582],
        [3.88281, 5.00017, 5.7397, 6.17989, 6.41555, 6.4375],
    ],
}

#: The sections whose analysis needs TransformerLens 3.9 (sae_lens does not import under 4).
TL3_ONLY = ("SAE features", "Difference dictionary")
NOTE = "Needs the TransformerLens 3.9 backend (--backend tl3, the default): "
EVIL = "<script>alert(1)</script>"


def assert_close(found, expected, where="") -> None:
    """`found` equals `expected` with numbers to 1e-4 (relative or absolute), strings exactly."""
    if isinstance(expected, dict):
        assert list(found) == list(expected), where
        for key in expected:
            assert_close(found[key], expected[key], f"{where}/{key}")
    elif isinstance(expected, list):
        assert isinstance(found, list | tuple) and len(found) == len(expected), (where, found)
        for i, (a, b) in enumerate(zip(found, expected, strict=True)):
            assert_close(a, b, f"{where}[{i}]")
    elif isinstance(expected, float):
        assert found == pytest.approx(expected, rel=1e-4, abs=1e-4), where
    else:
        assert found == expected, where


def section_html(page: str, title: str) -> str:
    """The `<section>` whose heading is `title` (escaped as the page escapes it)."""
    escaped = title.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for body in re.findall(r"<section id='[^']+'>(.*?)</section>", page, re.S):
        if f">{escaped}<" in body:
            return body
    raise AssertionError(f"no section {title!r} on the page")


@pytest.fixture(scope="module")
def zoo_report(tmp_path_factory):
    """`reward-lens report --backend bridge --limit 4` (the zoo): the folder, numbers and page."""
    out = tmp_path_factory.mktemp("bridge_report")
    assert main(["report", "--backend", "bridge", "--limit", str(LIMIT), "--out", str(out)]) == 0
    numbers = json.loads((out / "report.json").read_text())
    return out, numbers, (out / "report.html").read_text(encoding="utf-8")


def test_every_section_that_runs_on_the_bridge_has_tl39s_numbers(zoo_report):
    _, numbers, _ = zoo_report
    assert_close(key_numbers(numbers), TL39)
    assert numbers["args"]["backend"] == "bridge" and numbers["args"]["limit"] == LIMIT


def test_the_scores_are_the_plain_hf_models(zoo_report):
    """Independent of both backends: the HF model's logit at the last token of each side."""
    _, numbers, _ = zoo_report
    hf = load_model("scalar").eval()
    tokenizer = BridgeRewardModel.boot(zoo_path("scalar")).tokenizer
    pairs = zoo_pairs(load_task().task)
    chosen, rejected = [], []
    for i in numbers["pair_ids"]:
        for side, out in (("chosen", chosen), ("rejected", rejected)):
            messages = [
                {"role": "user", "content": pairs[i].prompt},
                {"role": "assistant", "content": getattr(pairs[i], side)},
            ]
            ids = tokenizer.apply_chat_template(messages, return_tensors="pt", return_dict=False)
            with torch.no_grad():
                out.append(float(hf(ids).logits[0, 0]))
    assert numbers["chosen"] == pytest.approx(chosen, abs=1e-4)
    assert numbers["rejected"] == pytest.approx(rejected, abs=1e-4)


def test_sections_that_need_tl39_are_noted_with_why_escaped(zoo_report):
    out, numbers, page = zoo_report
    assert set(numbers["tl3_only"]) == set(TL3_ONLY)
    for title in TL3_ONLY:
        body = section_html(page, title)
        notes = re.findall(r"<p class='note' dir='auto'>(.*?)</p>", body, re.S)
        assert len(notes) == 1 and notes[0].startswith(NOTE), (title, notes)
        assert "sae_lens" in notes[0] and "<figure" not in body and "<table" not in body
        assert numbers["tl3_only"][title] in notes[0].replace("&lt;", "<").replace("&#x27;", "'")
    # the reasons' text is escaped: "TransformerLens < 4" shows as text, never as markup
    assert "pins TransformerLens &lt; 4" in section_html(page, "SAE features")
    assert "TransformerLens < 4" not in page
    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert markdown.count(NOTE) == len(TL3_ONLY)
    assert "2 sections need TransformerLens 3.9 (noted)" in page


def test_atp_star_is_left_out_of_the_comparison_with_a_line_saying_so(zoo_report):
    _, numbers, page = zoo_report
    pairs = {(r["method_a"], r["method_b"]) for r in numbers["observational_vs_causal"]}
    assert pairs == {("direct", "atp"), ("direct", "patching"), ("atp", "patching")}
    body = section_html(page, "Observational vs causal")
    assert "Not compared: atp* needs the TransformerLens 3.9 backend" in body
    assert body.index("<table") < body.index("Not compared")  # below the table it concerns


def test_the_unfolding_section_says_every_prefix_ran_in_full(zoo_report):
    body = section_html(zoo_report[2], "The reward as the response unfolds")
    assert "every prefix run in full" in body and "cached pass" not in body


def test_the_python_api_takes_a_bridge_reward_model_and_escapes_pair_text(tmp_path, monkeypatch):
    """A loaded `BridgeRewardModel`, left as it was; a user's markup is shown, never run."""
    monkeypatch.setattr(build, "STEPS", build.STEPS[:1])  # the scores, then two sections:
    keep = ("difference", "counterfactual")  # one needs TL 3.9 (sae_lens), one runs
    monkeypatch.setattr(build, "SECTIONS", [s for s in build.SECTIONS if s[0] in keep])
    rows = [
        {"prompt": f"{EVIL} how bake bread", "chosen": "oven flour", "rejected": "bomb"},
        {"prompt": "explain laptop", "chosen": "screen code", "rejected": "soup"},
    ]
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    model = BridgeRewardModel.boot(zoo_path("scalar"))
    probe = torch.tensor([model.encode(r["prompt"], r["rejected"]).ids for r in rows[1:]])
    before = model.rewards(probe), {k: v.clone() for k, v in model.bridge.state_dict().items()}
    numbers = build_report(model, pairs, tmp_path / "out", progress=False)
    assert torch.equal(model.rewards(probe), before[0])  # no hook or edit left behind
    assert all(torch.equal(before[1][k], v) for k, v in model.bridge.state_dict().items())
    assert numbers["sections"] == ["Scores", "Difference dictionary", "Counterfactual edits"]
    assert list(numbers["tl3_only"]) == ["Difference dictionary"]
    assert numbers["args"]["model"] == "scalar" and numbers["args"]["backend"] == "bridge"
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert EVIL not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    hf = load_model("scalar").eval()
    ids = torch.tensor([model.encode(r["prompt"], r["chosen"]).ids for r in rows[:1]])
    with torch.no_grad():
        assert numbers["chosen"][0] == pytest.approx(float(hf(ids).logits[0, 0]), abs=1e-4)
    with pytest.raises(ReportError, match="backend='tl3' was given with a loaded model"):
        build_report(model, pairs, tmp_path / "other", backend="tl3", progress=False)


def test_the_tl3_backend_here_is_a_typed_error_naming_the_way_out(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["report", "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert "TransformerLensVersionError" in error and "--backend bridge" in error
    assert not out.exists()  # refused before anything was written


def test_the_unfolding_runs_on_the_bridge_every_prefix_scored_in_full():
    """No TransformerLens 3.9 key-value cache (`PREFIX_CACHE`): the exact naive path, whose
    every prefix reward is the plain HF model's reward of that prefix."""
    from reward_lens_tl.unfolding import reward_unfolding

    model = BridgeRewardModel.boot(zoo_path("scalar"))
    enc = model.encode("explain how to bake bread", "the bomb oven")
    curve = reward_unfolding(model, enc)
    hf = load_model("scalar").eval()
    rows = [enc.ids[: enc.response_start + t] + enc.suffix_ids() for t in range(4)]
    with torch.no_grad():
        plain = [float(hf(torch.tensor([r])).logits[0, 0]) for r in rows]
    assert curve.method == "naive" and curve.tokens[1:] == ("the", "bomb", "oven")
    assert curve.prefix_rewards.tolist() == pytest.approx(plain, abs=1e-4)
    assert curve.reward == pytest.approx(curve.token_view.reward, abs=1e-4)
