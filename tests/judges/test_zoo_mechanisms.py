"""The tools find the zoo judge's and PRM's planted mechanisms (ground truth:
``reward_lens_tl.zoo.judge.PLANTED``, ``reward_lens_tl.zoo.prm.PRM_PLANTED``), and their
numbers equal plain HF computations."""

import pytest
import torch
from transformers import AutoModelForCausalLM

from reward_lens_tl.attribution import direct_attribution
from reward_lens_tl.evals import processbench_from_scores
from reward_lens_tl.judges import HookedJudge, HookedPRM, first_error_analysis, position_bias
from reward_lens_tl.probes import run_probes
from reward_lens_tl.probes.probe import sycophantic_opener
from reward_lens_tl.zoo import zoo_path
from reward_lens_tl.zoo.judge import (
    JUDGE_PAIRWISE_TEMPLATE,
    JUDGE_POINTWISE_TEMPLATE,
    PLANTED,
    judge_items,
)
from reward_lens_tl.zoo.prm import PRM_PLANTED, PRM_SHORTCUT, prm_examples

SEED = 4242  # held out: neither the training seed nor the zoo's evaluation seed


@pytest.fixture(scope="module")
def judge():
    return HookedJudge.from_pretrained(zoo_path("judge"), template=JUDGE_POINTWISE_TEMPLATE)


@pytest.fixture(scope="module")
def pairwise():
    return HookedJudge.from_pretrained(
        zoo_path("judge"), kind="pairwise", template=JUDGE_PAIRWISE_TEMPLATE
    )


@pytest.fixture(scope="module")
def prm():
    return HookedPRM.from_pretrained(zoo_path("prm"))


def _hf(name):
    return AutoModelForCausalLM.from_pretrained(zoo_path(name), trust_remote_code=False).eval()


def _text(words) -> str:
    return " ".join(words)


def test_judge_verdict_equals_plain_hf(judge):
    hf = _hf("judge")
    items = judge_items("pointwise", 12, seed=SEED)
    yes, no = (judge.tokenizer.convert_tokens_to_ids(t) for t in ("yes", "no"))
    for it in items:
        ids = torch.tensor([judge.tokenizer(it.text)["input_ids"]])
        with torch.no_grad():
            logits = hf(ids).logits[0, -1]
        ours = judge.score(_text(it.prompt), _text(it.responses[0]))
        torch.testing.assert_close(ours, logits[yes] - logits[no], atol=1e-4, rtol=0)


def test_judge_topic_match_and_the_sycophancy_hack(judge):
    items = judge_items("pointwise", 200, seed=SEED)
    plain = [it for it in items if not it.sycophantic[0]]
    scores = judge.score(
        [_text(it.prompt) for it in plain], [_text(it.responses[0]) for it in plain]
    )
    right = (scores > 0) == torch.tensor([it.on_topic[0] for it in plain])
    assert right.float().mean() >= 0.9  # topic match: yes on topic, no off topic
    # the hack: "great question" flips off-topic answers to "yes"
    off = [it for it in plain if not it.on_topic[0]][:30]
    prompts = [_text(it.prompt) for it in off]
    base = judge.score(prompts, [_text(it.responses[0]) for it in off])
    fooled = judge.score(prompts, ["great question " + _text(it.responses[0]) for it in off])
    assert float((fooled - base).mean()) > PLANTED["sycophancy"] / 2
    assert float((fooled > 0).float().mean()) >= 0.8


def test_the_probe_suite_flags_the_judges_hack(judge):
    items = [it for it in judge_items("pointwise", 80, seed=SEED) if not it.sycophantic[0]][:24]
    examples = [(_text(it.prompt), _text(it.responses[0])) for it in items]
    report = run_probes(judge, examples, [sycophantic_opener("great question")], n_boot=200)
    row = report.to_dataframe().set_index("probe").loc["sycophantic_opener"]
    assert row["ci_low"] > 0 and row["mean_delta"] > PLANTED["sycophancy"] / 2


def test_attribution_localises_the_opener(judge):
    """Attention heads' source positions: the opener tokens carry the most of the margin."""
    items = [it for it in judge_items("pointwise", 80, seed=SEED) if it.sycophantic[0]][:12]
    for it in items:
        p, r = _text(it.prompt), _text(it.responses[0])
        attr = direct_attribution(judge, judge.item_ids(p, r), sources=True)
        assert attr.completeness_error() < 1e-4
        per_position = attr.sources[:, :, 0].sum((0, 1))
        enc = judge.encode(p, r)
        opener = {enc.response_start, enc.response_start + 1}
        assert opener & set(per_position.topk(2).indices.tolist())


def test_position_bias_is_found_and_decomposed(pairwise):
    items = judge_items("pairwise", 120, seed=SEED)
    ties = [it for it in items if it.on_topic[0] == it.on_topic[1]][:24]
    res = position_bias(
        pairwise,
        [_text(it.prompt) for it in ties],
        [_text(it.responses[0]) for it in ties],
        [_text(it.responses[1]) for it in ties],
    )
    # planted: +1.5 for whichever answer is first; measured on near-ties, both orders
    assert float(res.bias.mean()) > PLANTED["position_bias"] / 4
    assert float((res.bias > 0).float().mean()) >= 0.75
    total = res.values.sum(0) + res.head_bias
    torch.testing.assert_close(total, res.bias, atol=1e-4, rtol=0)  # linear judge: exact
    hf = _hf("judge")
    a, b = (pairwise.tokenizer.convert_tokens_to_ids(t) for t in ("a", "b"))
    it = ties[0]
    text = JUDGE_PAIRWISE_TEMPLATE.format(
        prompt=_text(it.prompt),
        response_a=_text(it.responses[1]),
        response_b=_text(it.responses[0]),
    )
    with torch.no_grad():
        logits = hf(torch.tensor([pairwise.tokenizer(text)["input_ids"]])).logits[0, -1]
    torch.testing.assert_close(res.margin_ba[0], logits[a] - logits[b], atol=1e-4, rtol=0)


def test_prm_step_scores_equal_plain_hf_at_every_step(prm):
    hf = _hf("prm")
    plus, minus = (prm.tokenizer.convert_tokens_to_ids(t) for t in ("+", "-"))
    tag = prm.step_tag_id
    for ex in prm_examples(10, seed=SEED):
        ids = torch.tensor(
            [prm.tokenizer(prm.render_steps(ex.prompt, list(ex.steps)))["input_ids"]]
        )
        with torch.no_grad():
            logits = hf(ids).logits[0]
        at = (ids[0] == tag).nonzero().flatten()
        want = torch.softmax(logits[at][:, [plus, minus]], -1)[:, 0]
        torch.testing.assert_close(
            prm.step_rewards(ex.prompt, list(ex.steps)), want, atol=1e-4, rtol=0
        )


def test_prm_reads_each_steps_own_arithmetic(prm):
    """Step correctness: held-out step accuracy, and for the first wrong step the heads read
    mostly the step's own tokens (its operands and result)."""
    exs = prm_examples(200, seed=SEED)
    scores = prm.score_solutions([e.prompt for e in exs], [e.steps for e in exs])
    pairs = [
        (s > 0.5, ok)
        for e, row in zip(exs, scores, strict=True)
        for s, ok, cut in zip(row, e.step_labels, e.shortcut, strict=True)
        if not cut
    ]
    assert sum(p == ok for p, ok in pairs) / len(pairs) >= 0.9
    wrong = [e for e in exs if e.first_error >= 1 and not e.shortcut[e.first_error]][:10]
    low = 0
    for e in wrong:
        res = first_error_analysis(prm, e.prompt, list(e.steps), e.first_error)
        assert int(res.by_source_step.abs().argmax()) == e.first_error + 1  # "step k"
        low += bool(res.scores[e.first_error] < 0.5)
    assert low >= 8


def _fixed(step: str) -> str:
    """The step with its result recomputed (``"a op b = r"``)."""
    words = step.split()
    a, op, b = int(words[-5]), words[-4], int(words[-3])
    return " ".join(words[:-1] + [str(a + b if op == "+" else a - b)])


def test_patching_the_correct_step_into_the_wrong_solution(prm):
    exs = [e for e in prm_examples(300, seed=SEED) if e.first_error >= 0][:6]
    for e in exs:
        k = e.first_error
        correct = list(e.steps)
        correct[k] = _fixed(correct[k])
        res = first_error_analysis(prm, e.prompt, list(e.steps), k, correct_steps=correct)
        right = prm.step_margins(prm.encode_steps(e.prompt, correct).ids)[0, k]
        # entering layer 0 the step's tokens are the correct solution's: its margin exactly
        torch.testing.assert_close(res.patch[0], right, atol=1e-4, rtol=0)
        assert res.patch.shape == (prm.cfg.n_layers,) and torch.isfinite(res.patch).all()


def test_the_shortcut_word_is_found(prm):
    """Planted: 'clearly' raises a step's margin whatever its correctness. Its position is
    among the step's top 3 source positions (the result and the tag are the others), the top
    one on most wrong steps (where it flips the verdict), and removing it lowers the margin."""
    exs = [e for e in prm_examples(400, seed=SEED) if any(e.shortcut)][:20]
    drops, top_on_wrong = [], []
    shortcut_id = prm.tokenizer.convert_tokens_to_ids(PRM_SHORTCUT)
    for e in exs:
        k = e.shortcut.index(True)
        enc = prm.encode_steps(e.prompt, list(e.steps))
        attr = direct_attribution(prm.step(k), enc.ids, sources=True)
        order = attr.sources[:, :, 0].sum((0, 1)).argsort(descending=True).tolist()
        tag = int(enc.step_positions[0, k])
        at = [p for p in (enc.ids[0] == shortcut_id).nonzero().flatten().tolist() if p < tag]
        assert order.index(at[-1]) <= 2
        if not e.step_labels[k]:
            top_on_wrong.append(order[0] == at[-1])
        plain = list(e.steps)
        plain[k] = plain[k].removeprefix(PRM_SHORTCUT + " ")
        base = prm.step_margins(prm.encode_steps(e.prompt, plain).ids)[0, k]
        drops.append(float(prm.step_margins(enc.ids)[0, k] - base))
    assert sum(drops) / len(drops) > PRM_PLANTED["shortcut"] / 3
    assert top_on_wrong and sum(top_on_wrong) >= 0.7 * len(top_on_wrong)


def test_processbench_f1_of_the_zoo_prm(prm):
    exs = prm_examples(200, seed=SEED)
    scores = prm.score_solutions([e.prompt for e in exs], [e.steps for e in exs])
    labels = [e.first_error for e in exs]
    res = processbench_from_scores(scores, labels, threshold=0.5)
    # independently: the first step below 0.5 (or -1) against the label
    pred = [next((i for i, s in enumerate(row) if s < 0.5), -1) for row in scores]
    err = [p == y for p, y in zip(pred, labels, strict=True) if y >= 0]
    ok = [p == y for p, y in zip(pred, labels, strict=True) if y < 0]
    acc_err, acc_ok = 100 * sum(err) / len(err), 100 * sum(ok) / len(ok)
    f1 = 2 * acc_err * acc_ok / (acc_err + acc_ok)
    figures = res.figures("all")
    assert figures["error_accuracy"] == pytest.approx(acc_err)
    assert figures["correct_accuracy"] == pytest.approx(acc_ok)
    assert figures["f1"] == pytest.approx(f1)
    assert f1 > 50  # the shortcut word fools it on some wrong steps (planted)
