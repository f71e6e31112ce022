"""Generative judges and PRMs on the bridge (`reward_lens_tl/bridge/judges.py`).

Each score is checked against plain HF (the zoo's `judge`/`prm` causal LMs and tiny models,
unpadded rows: a verdict is `logits[-1, v0] − logits[-1, v1]`, a token PRM's step score
`softmax(logits[tag, (+, −)])[0]`, ...) and against TransformerLens 3.9's `HookedJudge` /
`HookedPRM` on the same calls. The TL 3.9 values were recorded with `.venv` (TL 3.9.0) by a
script that makes the calls of these tests with `HookedJudge.from_pretrained` /
`HookedPRM.from_pretrained` in place of `BridgeJudge.boot` / `BridgePRM.boot` (same arguments)
and prints the results rounded to 4 decimals; the same script on the bridge in `.venv-tl4`
printed the same digits.
"""

import warnings

import pytest
import torch
from torch.testing import assert_close

from tests.tl4.tl4_only import skip_unless_tl4

skip_unless_tl4()

from reward_lens_tl.attribution import direct_attribution  # noqa: E402
from reward_lens_tl.bridge import BridgeJudge, BridgePRM  # noqa: E402
from reward_lens_tl.data import PreferencePair  # noqa: E402
from reward_lens_tl.errors import (  # noqa: E402
    BridgeUnsupportedError,
    InvalidArgumentError,
    NonlinearUnembedError,
    UnsupportedArchitectureError,
)
from reward_lens_tl.judges import (  # noqa: E402
    first_error_analysis,
    judge_pairs,
    linearised_attribution,
    position_bias,
)
from reward_lens_tl.lens import reward_lens  # noqa: E402
from reward_lens_tl.padding import ReadingPositionWarning  # noqa: E402
from reward_lens_tl.testing import tiny_causal_lm, tiny_reward_model  # noqa: E402
from reward_lens_tl.zoo import load_model, zoo_path  # noqa: E402
from reward_lens_tl.zoo.judge import JUDGE_PAIRWISE_TEMPLATE, JUDGE_POINTWISE_TEMPLATE  # noqa: E402

HF_TOL = dict(atol=1e-4, rtol=0)
TL39_TOL = dict(atol=2e-4, rtol=0)  # the recorded values are rounded to 4 decimals

PROMPTS = [
    "how bake bread",
    "how bake bread",
    "explain laptop",
    "explain how to bake bread at home",
]
RESPONSES = [
    "oven flour",
    "rain",
    "great question rain snow soup",
    "the oven and the flour and the water",
]
PAIRS = [
    PreferencePair("how bake bread", "oven flour", "rain"),
    PreferencePair("explain laptop", "screen code", "soup"),
]
SOLUTIONS = [
    ("what is 15 + 0 - 1", ["15 + 0 = 15", "15 - 1 = 12"]),
    ("what is 3 + 4 + 2", ["3 + 4 = 7", "7 + 2 = 8"]),
    ("what is 3 + 4", ["clearly 3 + 4 = 9"]),
    ("what is 5 - 1 + 2 + 3", ["5 - 1 = 4", "4 + 2 = 6", "6 + 3 = 9"]),
]
TINY_PRM = dict(step_tag="w40", labels=("w41", "w42"), step_format="{step} {tag}")

# TL 3.9 (recorded, see the module docstring).
TL39_JUDGE_SCORES = [3.0074, -3.038, 1.5116, -2.7246]  # judge.score(PROMPTS, RESPONSES)
# direct_attribution(judge, judge.item_ids(PROMPTS[2], RESPONSES[2])).values[:, 0]
# fmt: off
TL39_JUDGE_ATTRIBUTION = [
    -0.0151, -0.4117, 0.0383, -0.0423, -0.0216, -0.0093, 0.97, 1.3592, -1.2989,
    0.1093, 0.1808, 0.2337, 0.0085, 0.0169, 0.0665, 0.3272, 0.0,
]
# fmt: on
TL39_JUDGE_LENS = [-0.7351, -1.2046, 1.2217, 1.5116]  # reward_lens(...) on the same ids
TL39_PAIR_MARGINS = ([2.5311, 4.3099], [-1.515, -0.7676])  # judge_pairs(pairwise, PAIRS)
# position_bias(pairwise, two prompts, (oven flour, screen code), (oven, soup))
TL39_BIAS = ([1.0892, 4.3099], [1.1191, -0.7676], [1.1041, 1.7711])
# its .values.mean(1)
# fmt: off
TL39_BIAS_VALUES = [
    -0.0071, 0.0934, 0.1705, 0.0437, -0.0342, 0.6048, -0.2646, 0.0379, 0.0023,
    -0.04, 0.4069, 0.0137, 0.0056, 0.2217, 0.1817, 0.0012, 0.0,
]
# fmt: on
TL39_PRM_SCORES = [[0.9426, 0.104], [0.9481, 0.0475], [0.7907], [0.9341, 0.9541, 0.95]]
# first_error_analysis(prm, *SOLUTIONS[0], 1, correct_steps=[..., "15 - 1 = 14"])
TL39_FIRST_ERROR = dict(
    margins=[2.799, -2.1537],
    by_source_step=[0.06, -0.1743, -1.0658],
    lens=[-0.7729, 0.2764, -2.1537],
    patch=[2.2324, 2.353],
)
# linearised_attribution of the tiny Llama Likert judge on two items: score, rewards,
# remainder, and the first 4 parts of item 0
TL39_LIKERT = (
    [2.1927, 2.0493],
    [0.1693, 0.0477],
    [2.0234, 2.0015],
    [0.0152, -0.0163, 0.0517, 0.0138],
)
TL39_CAPPED = [0.0084, -0.4308]  # the tiny Gemma-2 pairwise judge (soft-capped) on 2 items
TL39_VALUE = [[0.4732, 0.4445], [0.5136]]  # the tiny Llama value PRM, score_solutions
TL39_CLASSIFIER = [[0.4454, 0.5026], [0.593]]  # the tiny Qwen2 classifier PRM


def close(actual, expected, tol):
    assert_close(torch.as_tensor(actual).float().cpu(), torch.as_tensor(expected).float(), **tol)


# -- plain HF references -------------------------------------------------------------------
def hf_row_logits(hf, ids: list[int]) -> torch.Tensor:
    """HF's logits of one unpadded row, `[pos, vocab]`."""
    with torch.no_grad():
        return hf(input_ids=torch.tensor([ids])).logits[0]


def hf_verdicts(hf, tok, texts, ids):
    """`logit(ids[0]) − logit(ids[1])` at the last token of each text, one row at a time."""
    rows = [hf_row_logits(hf, tok(text)["input_ids"])[-1] for text in texts]
    return torch.stack([row[ids[0]] - row[ids[1]] for row in rows])


def hf_token_prm(hf, tok, prompt, steps, tag, labels):
    """A token PRM's step scores from HF's causal LM on the unpadded solution."""
    ids = tok(prompt + " " + " ".join(f"{s} {tag}" for s in steps))["input_ids"]
    tags = (torch.tensor(ids) == tok.convert_tokens_to_ids(tag)).nonzero().flatten()
    label_ids = tok.convert_tokens_to_ids(list(labels))
    return torch.softmax(hf_row_logits(hf, ids)[tags][:, label_ids], -1)[:, 0]


@pytest.fixture(scope="module")
def zoo_judge():
    hf = load_model("judge").eval()
    judge = BridgeJudge.boot(zoo_path("judge"), template=JUDGE_POINTWISE_TEMPLATE)
    return hf, judge.tokenizer, judge


@pytest.fixture(scope="module")
def pairwise():
    return BridgeJudge.boot(zoo_path("judge"), kind="pairwise", template=JUDGE_PAIRWISE_TEMPLATE)


@pytest.fixture(scope="module")
def zoo_prm():
    hf = load_model("prm").eval()
    prm = BridgePRM.boot(zoo_path("prm"))
    return hf, prm.tokenizer, prm


# -- judges ----------------------------------------------------------------------------------
def test_zoo_judge_scores_equal_hf_and_tl39(zoo_judge):
    hf, tok, judge = zoo_judge
    assert judge.verdict_ids == tuple(tok.convert_tokens_to_ids(["yes", "no"]))
    texts = [
        JUDGE_POINTWISE_TEMPLATE.format(prompt=p, response=r)
        for p, r in zip(PROMPTS, RESPONSES, strict=True)
    ]
    expected = hf_verdicts(hf, tok, texts, judge.verdict_ids)
    scores = judge.score(PROMPTS, RESPONSES)  # one left-padded batch, its mask inferred
    close(scores, expected, HF_TOL)
    close(scores, TL39_JUDGE_SCORES, TL39_TOL)
    close(judge.score(PROMPTS[1], RESPONSES[1]), expected[1], HF_TOL)  # one item: a 0-d tensor


def test_zoo_judge_attribution_and_lens_equal_tl39(zoo_judge):
    hf, tok, judge = zoo_judge
    ids = judge.item_ids(PROMPTS[2], RESPONSES[2])  # the planted opener ("great question")
    expected = hf_verdicts(hf, tok, [judge.render(PROMPTS[2], RESPONSES[2])], judge.verdict_ids)
    attr = direct_attribution(judge, ids)
    close(attr.values.sum(0) + attr.head_bias, expected, HF_TOL)  # the parts make HF's verdict
    close(attr.values[:, 0], TL39_JUDGE_ATTRIBUTION, TL39_TOL)
    lens = reward_lens(judge, ids)
    close(lens.values[-1], expected, HF_TOL)
    close(lens.values[:, 0], TL39_JUDGE_LENS, TL39_TOL)


def test_pairwise_judge_pairs_and_position_bias(pairwise, zoo_judge):
    hf, tok, _ = zoo_judge
    texts_ab = [
        JUDGE_PAIRWISE_TEMPLATE.format(prompt=p.prompt, response_a=p.chosen, response_b=p.rejected)
        for p in PAIRS
    ]
    texts_ba = [
        JUDGE_PAIRWISE_TEMPLATE.format(prompt=p.prompt, response_a=p.rejected, response_b=p.chosen)
        for p in PAIRS
    ]
    res = judge_pairs(pairwise, PAIRS)
    close(res.margin_ab, hf_verdicts(hf, tok, texts_ab, pairwise.verdict_ids), HF_TOL)
    close(res.margin_ba, hf_verdicts(hf, tok, texts_ba, pairwise.verdict_ids), HF_TOL)
    close(res.margin_ab, TL39_PAIR_MARGINS[0], TL39_TOL)
    close(res.margin_ba, TL39_PAIR_MARGINS[1], TL39_TOL)
    assert (res.accuracy(), res.consistent_accuracy()) == (1.0, 1.0)

    prompts, firsts, seconds = (
        [p.prompt for p in PAIRS],
        ["oven flour", "screen code"],
        ["oven", "soup"],
    )
    bias = position_bias(pairwise, prompts, firsts, seconds)
    for got, want in zip((bias.margin_ab, bias.margin_ba, bias.bias), TL39_BIAS, strict=True):
        close(got, want, TL39_TOL)
    texts = [JUDGE_PAIRWISE_TEMPLATE.format(prompt=p, response_a=a, response_b=b)
             for p, a, b in zip(prompts, seconds, firsts, strict=True)]  # fmt: skip
    close(bias.margin_ba, hf_verdicts(hf, tok, texts, pairwise.verdict_ids), HF_TOL)
    close(bias.values.sum(0) + bias.head_bias, bias.bias, HF_TOL)  # a linear head: exact
    close(bias.values.mean(1), TL39_BIAS_VALUES, TL39_TOL)


def test_likert_judge_and_its_linearised_attribution():
    hf, tok = tiny_causal_lm("llama")
    judge = BridgeJudge.boot(
        hf, tok, kind="likert", verdict=("w10", "w11", "w12"), template="{prompt} w8 {response} w9"
    )
    prompts, responses = ["w12 w13", "w14"], ["w20", "w21 w22 w23"]
    grades = torch.tensor([1.0, 2.0, 3.0])
    rows = [tok(judge.render(p, r))["input_ids"] for p, r in zip(prompts, responses, strict=True)]
    last = torch.stack([hf_row_logits(hf, row)[-1, [10, 11, 12]] for row in rows])
    expected = (torch.softmax(last, -1) * grades).sum(-1)
    close(judge.score(prompts, responses), expected, HF_TOL)
    attr = linearised_attribution(judge, judge.item_ids(prompts, responses))
    close(attr.score, expected, HF_TOL)
    close(attr.values.sum(0) + attr.head_bias, attr.rewards, HF_TOL)  # exact parts
    close(attr.rewards + attr.remainder, attr.score, HF_TOL)
    for got, want in zip((attr.score, attr.rewards, attr.remainder), TL39_LIKERT[:3], strict=True):
        close(got, want, TL39_TOL)
    close(attr.values[:4, 0], TL39_LIKERT[3], TL39_TOL)
    with pytest.raises(NonlinearUnembedError, match="linearised_attribution"):
        reward_lens(judge, judge.item_ids(prompts, responses))  # the expected grade: not linear


def test_gemma2_judge_is_capped_as_hf_caps_and_batches_across_its_window():
    hf, tok = tiny_causal_lm("gemma2")  # final_logit_softcapping 3.0, sliding window 4
    judge = BridgeJudge.boot(
        hf, tok, kind="pairwise", verdict=("w10", "w11"),
        template="{prompt} w8 {response_a} w8 {response_b} w9",
    )  # fmt: skip
    items = (["w12", "w14 w15 w16"], ["w20 w21", "w22"], ["w30", "w31 w32 w33"])
    texts = [judge.render(p, a, b) for p, a, b in zip(*items, strict=True)]
    expected = hf_verdicts(hf, tok, texts, judge.verdict_ids)  # HF's logits are soft-capped
    scores = judge.score(*items)  # rows of different lengths, wider than the window
    close(scores, expected, HF_TOL)
    close(scores, TL39_CAPPED, TL39_TOL)
    assert judge.scored_head and judge.objective_names == ("w10", "w11")


# -- PRMs ------------------------------------------------------------------------------------
def test_zoo_prm_step_scores_equal_hf_and_tl39(zoo_prm):
    hf, tok, prm = zoo_prm
    scores = prm.score_solutions([p for p, _ in SOLUTIONS], [s for _, s in SOLUTIONS])
    for (prompt, steps), got, want in zip(SOLUTIONS, scores, TL39_PRM_SCORES, strict=True):
        close(got, hf_token_prm(hf, tok, prompt, steps, "ки", ("+", "-")), HF_TOL)
        close(got, want, TL39_TOL)
    enc = prm.encode_steps([p for p, _ in SOLUTIONS], [s for _, s in SOLUTIONS])
    assert torch.isnan(prm.rewards(enc)[2, 1:]).all()  # past the row's last step


def test_first_error_analysis_equals_hf_and_tl39(zoo_prm):
    hf, tok, prm = zoo_prm
    prompt, steps = SOLUTIONS[0]
    right = ["15 + 0 = 15", "15 - 1 = 14"]
    with warnings.catch_warnings():  # none, as on TransformerLens 3.9: each step is read at its tag
        warnings.simplefilter("error", ReadingPositionWarning)
        res = first_error_analysis(prm, prompt, steps, 1, correct_steps=right)
    for name, want in TL39_FIRST_ERROR.items():
        got = res.lens.values[:, 0] if name == "lens" else getattr(res, name)
        close(got, want, TL39_TOL)
    wrong_p = hf_token_prm(hf, tok, prompt, steps, "ки", ("+", "-"))
    close(res.margins, torch.logit(wrong_p.double()).float(), HF_TOL)
    # the step's own tokens patched from the corrected solution entering layer 0: the corrected
    # solution's step margin (every later activation is then the corrected run's)
    right_p = hf_token_prm(hf, tok, prompt, right, "ки", ("+", "-"))
    close(res.patch[0], torch.logit(right_p[1].double()).float(), HF_TOL)
    assert res.segments == ("prompt", "step 0", "step 1") and res.turn_site == "final"


@pytest.mark.parametrize("kind, family", [("value", "llama"), ("classifier", "qwen2")])
def test_value_and_classifier_prms_equal_hf_and_tl39(kind, family):
    hf, tok = tiny_causal_lm(family, head=kind)
    prm = BridgePRM.boot(hf, tok, kind=kind, **TINY_PRM)
    prompts, solutions = ["w12 w13", "w14"], [["w20 w21", "w22"], ["w30 w31 w32"]]
    scores = prm.score_solutions(prompts, solutions)
    for prompt, steps, got in zip(prompts, solutions, scores, strict=True):
        ids = tok(prompt + " " + " ".join(f"{s} w40" for s in steps))["input_ids"]
        tags = (torch.tensor(ids) == 40).nonzero().flatten()
        logits = hf_row_logits(hf, ids)[tags]  # a token classifier's logits per position
        want = torch.sigmoid(logits[:, 0]) if kind == "value" else torch.softmax(logits, -1)[:, 1]
        close(got, want, HF_TOL)
    close(sum(scores, []), sum(TL39_VALUE if kind == "value" else TL39_CLASSIFIER, []), TL39_TOL)


def test_qwen_math_prm_layout_boots_from_a_directory_without_its_code(tmp_path):
    import json

    from transformers import Qwen2Config

    from reward_lens_tl.judges.prm_module import Qwen2ForProcessRewardModel
    from reward_lens_tl.testing import perturb_, tiny_tokenizer

    cfg = Qwen2Config(
        vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, num_labels=2, pad_token_id=0,
        bos_token_id=1, eos_token_id=2, max_position_embeddings=64,
    )  # fmt: skip
    torch.manual_seed(0)
    hf = perturb_(Qwen2ForProcessRewardModel(cfg)).eval()
    hf.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    # as published: the class is remote code, which must never be imported
    config["auto_map"] = {"AutoModel": "modeling_qwen2_rm.Qwen2ForProcessRewardModel"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "modeling_qwen2_rm.py").write_text("raise SystemExit('remote code ran')\n")
    tok = tiny_tokenizer()
    with pytest.warns(UserWarning, match="never runs"):
        prm = BridgePRM.boot(str(tmp_path), tok, kind="classifier", **TINY_PRM)
    solutions = [["w20 w21", "w22", "w23 w24"], ["w30"]]
    scores = prm.score_solutions(["w12 w13", "w50"], solutions)
    for prompt, steps, got in zip(["w12 w13", "w50"], solutions, scores, strict=True):
        ids = tok(prompt + " " + " ".join(f"{s} w40" for s in steps))["input_ids"]
        with torch.no_grad():
            logits = hf(torch.tensor([ids])).logits[0]
        tags = (torch.tensor(ids) == 40).nonzero().flatten()
        close(got, torch.softmax(logits[tags], -1)[:, 1], HF_TOL)


@pytest.mark.parametrize("family", ["mistral", "qwen2", "gpt2"])
def test_token_prm_of_each_family_equals_hf(family):
    hf, tok = tiny_causal_lm(family)
    prm = BridgePRM.boot(hf, tok, **TINY_PRM)
    prompts, solutions = ["w12 w13", "w14"], [["w20 w21", "w22", "w23"], ["w30 w31 w32 w33"]]
    scores = prm.score_solutions(prompts, solutions)  # one padded batch
    for prompt, steps, got in zip(prompts, solutions, scores, strict=True):
        close(got, hf_token_prm(hf, tok, prompt, steps, "w40", ("w41", "w42")), HF_TOL)


# -- refusals --------------------------------------------------------------------------------
def test_refusals_are_typed_and_name_what_to_use():
    with pytest.raises(BridgeUnsupportedError, match="BridgeJudge.boot"):
        from reward_lens_tl.judges import HookedJudge  # noqa: F401
    with pytest.raises(BridgeUnsupportedError, match="BridgePRM.boot"):
        from reward_lens_tl.judges import HookedPRM  # noqa: F401
    hf, tok = tiny_causal_lm("llama")
    with pytest.raises(UnsupportedArchitectureError, match="LlamaForCausalLM"):
        BridgeJudge.boot(tiny_reward_model("llama"), tok, verdict=("w10", "w11"))
    with pytest.raises(BridgeUnsupportedError, match="fold_ln.*default backend"):
        BridgeJudge.boot(hf, tok, verdict=("w10", "w11"), fold_ln=False)
    with pytest.raises(InvalidArgumentError, match="kind"):
        BridgePRM.boot(hf, tok, kind="reward")


def test_boot_leaves_the_users_model_and_judges_pointwise_only_where_asked(zoo_judge):
    hf, tok = tiny_causal_lm("qwen2")
    before = {k: v.clone() for k, v in hf.state_dict().items()}
    judge = BridgeJudge.boot(hf, tok, verdict=("w10", "w11"), template="{prompt} w8 {response} w9")
    judge.score("w12", "w20")
    after = hf.state_dict()
    assert before.keys() == after.keys()
    assert all(torch.equal(before[k], after[k]) for k in before)
    with pytest.raises(InvalidArgumentError, match="pairwise"):
        position_bias(zoo_judge[2], ["how bake bread"], ["oven"], ["rain"])
