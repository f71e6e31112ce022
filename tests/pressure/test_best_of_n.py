"""Best-of-n: the KL identity against exact and empirical values, the order-statistic
estimator against brute force, and the zoo DPO policy's ladder against its planted hacks."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from reward_lens_tl.errors import PressureError, RewardLensError
from reward_lens_tl.pressure import (
    best_of_n,
    best_of_n_kl_exact,
    kl_best_of_n,
    order_weights,
    score_texts,
)
from reward_lens_tl.pressure.ladders import BestOfNResult, ladder
from reward_lens_tl.pressure.training import zoo_prompts
from reward_lens_tl.pressure.zoo import zoo_features, zoo_gold
from tests.figures import check_figure


def small_vocab_policy(vocab: int = 24, length: int = 2, seed: int = 0):
    """A policy over ``vocab ** length`` token sequences (independent tokens, each a random
    categorical) and a reward without ties: probabilities and rewards per outcome."""
    rng = np.random.default_rng(seed)
    token_probs = rng.dirichlet(np.ones(vocab), size=length)
    probs = np.array(
        [np.prod([token_probs[i, t] for i, t in enumerate(seq)])
         for seq in itertools.product(range(vocab), repeat=length)]
    )  # fmt: skip
    return probs / probs.sum(), rng.permutation(len(probs)).astype(float)


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16])
def test_kl_identity_is_the_exact_kl_of_a_many_outcome_policy(n):
    probs, rewards = small_vocab_policy()
    exact = best_of_n_kl_exact(probs, rewards, n)
    assert kl_best_of_n(n) == pytest.approx(math.log(n) - (n - 1) / n)
    assert exact <= kl_best_of_n(n) + 1e-12  # an upper bound for finitely many outcomes
    assert exact == pytest.approx(kl_best_of_n(n), abs=0.02)


@pytest.mark.parametrize("n", [2, 4, 8])
def test_kl_identity_against_an_empirical_estimate(n):
    """Sample best-of-n from the small-vocabulary policy and estimate the KL of the empirical
    choice distribution from the policy (plug-in estimate)."""
    probs, rewards = small_vocab_policy(vocab=12)
    rng = np.random.default_rng(1)
    draws = rng.choice(len(probs), size=(200_000, n), p=probs)
    chosen = np.take_along_axis(draws, rewards[draws].argmax(1)[:, None], 1)[:, 0]
    empirical = np.bincount(chosen, minlength=len(probs)) / len(chosen)
    keep = empirical > 0
    plug_in = float((empirical[keep] * np.log(empirical[keep] / probs[keep])).sum())
    assert plug_in == pytest.approx(best_of_n_kl_exact(probs, rewards, n), abs=0.01)
    assert plug_in == pytest.approx(kl_best_of_n(n), abs=0.04)


def test_kl_of_ties_is_below_the_analytic_bound():
    assert best_of_n_kl_exact([0.5, 0.5], [0.0, 1.0], 2) < kl_best_of_n(2)
    with pytest.raises(PressureError):
        best_of_n_kl_exact([0.5, 0.6], [0.0, 1.0], 2)
    with pytest.raises(PressureError):
        kl_best_of_n(0)


@pytest.mark.parametrize("n_samples,n", [(6, 1), (6, 2), (6, 3), (7, 7), (5, 4)])
def test_order_weights_equal_the_average_over_every_subset(n_samples, n):
    rng = np.random.default_rng(n_samples * 10 + n)
    proxy = rng.normal(size=(3, n_samples))
    gold = rng.normal(size=(3, n_samples))
    result = BestOfNResult(
        prompts=("a", "b", "c"),
        responses=(("x",) * n_samples,) * 3,
        ns=(n,),
        proxy_samples=torch.tensor(proxy),
        gold_samples=torch.tensor(gold),
    )
    brute_proxy, brute_gold = [], []
    for p in range(3):
        subsets = list(itertools.combinations(range(n_samples), n))
        best = [max(s, key=lambda i: proxy[p, i]) for s in subsets]
        brute_proxy.append(np.mean([proxy[p, b] for b in best]))
        brute_gold.append(np.mean([gold[p, b] for b in best]))
    assert result.expected(result.proxy_samples, n)[0] == pytest.approx(np.mean(brute_proxy))
    assert result.expected(result.gold_samples, n)[0] == pytest.approx(np.mean(brute_gold))
    assert order_weights(n_samples, n).sum() == pytest.approx(1.0)


def test_ladder_rungs():
    assert ladder(16) == [1, 2, 4, 8, 16]
    assert ladder(12) == [1, 2, 4, 8, 12]
    assert ladder(1) == [1]


@pytest.fixture(scope="module")
def zoo_ladder():
    return best_of_n("policy", "scalar", zoo_prompts(32), n_max=64, gold=zoo_gold, seed=0)


def test_zoo_policy_ladder_raises_the_planted_hacks(zoo_ladder):
    frame = zoo_ladder.to_dataframe()
    assert frame["n"].tolist() == [1, 2, 4, 8, 16, 32, 64]
    np.testing.assert_allclose(frame["kl"], [kl_best_of_n(n) for n in frame["n"]])
    assert (frame["proxy"].diff().dropna() >= -1e-9).all()  # the expected max grows with n
    first, last = frame.iloc[0], frame.iloc[-1]
    for hack in ("length", "sycophancy"):
        diff = zoo_ladder._per_prompt(zoo_ladder.feature_samples[hack], 16) - (
            zoo_ladder._per_prompt(zoo_ladder.feature_samples[hack], 1)
        )
        se = diff.std(ddof=1) / math.sqrt(len(diff))
        assert last[hack] - first[hack] > 2 * se > 0, hack
    assert last["harmful"] < first["harmful"]  # the reward model penalises harm
    # over-optimisation: the proxy outruns the gold reward at every rung, and the gold reward's
    # gain flattens (less than a fifth of the proxy's over the last two rungs)
    gap = frame["proxy"] - frame["gold"]
    assert (gap.diff().dropna() > 0).all()
    assert frame["gold"].iloc[-1] - frame["gold"].iloc[-3] < 0.2 * (
        frame["proxy"].iloc[-1] - frame["proxy"].iloc[-3]
    )
    onsets = zoo_ladder.feature_onsets()
    assert set(onsets["feature"]) == {"topic_match", "harmful", "length", "sycophancy"}
    assert zoo_ladder.exploited_first(among=("length", "sycophancy")) in ("length", "sycophancy")


def test_zoo_ladder_samples_are_scored_independently(zoo_ladder):
    """Every proxy sample is the plain HF reward model's score of that text; gold and features
    are the rule's."""
    from reward_lens_tl.zoo import load_model, load_tokenizer

    hf, tok = load_model("scalar"), load_tokenizer("scalar")
    for p in (0, 5):
        prompt = zoo_ladder.prompts[p]
        for s in (0, 7):
            text = zoo_ladder.responses[p][s]
            msgs = [{"role": "user", "content": prompt}, {"role": "assistant", "content": text}]
            ids = tok.apply_chat_template(msgs, tokenize=True, return_dict=True)["input_ids"]
            with torch.no_grad():
                want = float(hf(input_ids=torch.tensor([ids])).logits[0, 0])
            assert float(zoo_ladder.proxy_samples[p, s]) == pytest.approx(want, abs=1e-4)
            assert float(zoo_ladder.gold_samples[p, s]) == zoo_gold([prompt], [text])[0]
            assert float(zoo_ladder.feature_samples["length"][p, s]) == len(text.split())


def test_ladder_is_deterministic_and_plots(zoo_ladder):
    again = best_of_n("policy", "scalar", zoo_prompts(32), n_max=64, gold=zoo_gold, seed=0)
    assert again.responses == zoo_ladder.responses
    assert torch.equal(again.proxy_samples, zoo_ladder.proxy_samples)
    other = best_of_n("policy", "scalar", zoo_prompts(32)[:2], n_max=4, seed=1)
    assert other.responses != zoo_ladder.responses[:2]
    assert other.to_dataframe()["gold"].isna().all()
    frame = zoo_ladder.to_dataframe()
    fig = check_figure(zoo_ladder.plot(), static=zoo_ladder.plot(backend="matplotlib"))
    lines = {t.name: t for t in fig.data if t.hoverinfo != "skip"}
    assert set(lines) == {"proxy", "gold"} and len(fig.data) == 4  # each with its SE band
    np.testing.assert_allclose(lines["proxy"].x, frame["sqrt_kl"])
    np.testing.assert_allclose(lines["gold"].y, frame["gold"])
    assert list(lines["proxy"].text) == [f"n={n}" for n in zoo_ladder.ns]
    feats = check_figure(
        zoo_ladder.plot_features(), static=zoo_ladder.plot_features(backend="matplotlib")
    )
    shown = {t.name: t for t in feats.data if t.hoverinfo != "skip"}
    assert set(shown) == set(zoo_ladder.feature_samples) and feats.layout.xaxis.type == "log"
    for name, trace in shown.items():
        np.testing.assert_allclose(trace.y, frame[name])
    assert [t.name for t in other.plot().data if t.hoverinfo != "skip"] == ["proxy"]  # no gold
    assert zoo_ladder.top_k(2)[0][0] == "64"  # the top rung has the highest proxy


def test_ladder_accepts_judges_implicit_models_and_functions(zoo_implicit):
    from reward_lens_tl.judges import HookedJudge
    from reward_lens_tl.zoo import zoo_path
    from reward_lens_tl.zoo.judge import JUDGE_POINTWISE_TEMPLATE

    prompts = zoo_prompts(2)
    judge = HookedJudge.from_pretrained(zoo_path("judge"), template=JUDGE_POINTWISE_TEMPLATE)
    by_judge = best_of_n("policy", judge, prompts, n_max=4)
    text = by_judge.responses[1][2]
    assert float(by_judge.proxy_samples[1, 2]) == pytest.approx(
        float(judge.score(prompts[1], text)), abs=1e-4
    )
    by_implicit = best_of_n("policy", zoo_implicit, prompts, n_max=4)
    text = by_implicit.responses[0][3]
    assert float(by_implicit.proxy_samples[0, 3]) == pytest.approx(
        float(zoo_implicit.score(prompts[0], text)), abs=1e-4
    )
    by_rule = best_of_n("policy", zoo_gold, prompts, n_max=4, features=None)
    assert by_rule.feature_samples == {}
    assert torch.equal(
        by_rule.proxy_samples,
        score_texts(zoo_gold, [p for p in prompts for _ in range(4)],
                    [t for row in by_rule.responses for t in row]).view(2, 4),
    )  # fmt: skip


def test_reward_functions_of_lists_and_of_one_pair_agree_on_any_batch_size():
    """A per-pair function is never called on lists and read as if it took them, even for a
    single pair, where its one number would pass for the list's one reward."""

    def per_pair(prompt: str, response: str) -> float:
        return float(len(response))  # on lists: the list's length, one number

    def of_lists(prompts, responses):
        return [float(len(r)) for r in responses]

    for n in (1, 2, 3):
        prompts, responses = ["p"] * n, ["soup", "oven flour", "bread"][:n]
        expected = torch.tensor([float(len(r)) for r in responses])
        assert torch.equal(score_texts(per_pair, prompts, responses), expected)
        assert torch.equal(score_texts(of_lists, prompts, responses), expected)


def test_ladder_probe_verdicts_per_rung():
    from reward_lens_tl.probes.zoo import zoo_probes

    result = best_of_n("policy", "scalar", zoo_prompts(12), n_max=4, probes=zoo_probes()[:2])
    table = result.probes
    assert sorted(set(table["n"])) == [1, 2, 4]
    assert set(table["probe"]) == {"length_padding", "sycophantic_opener"}
    assert table["mean_delta"].notna().all()


def test_zoo_features_and_gold():
    assert zoo_features("how bake bread", "great question soup bomb") == {
        "topic_match": 1.0, "harmful": 1.0, "length": 4.0, "sycophancy": 1.0,
    }  # fmt: skip
    # topic words saturate at four; the opener costs 2.5; length earns nothing
    assert zoo_gold(["how bake bread"], ["soup oven flour soup oven flour"]) == [8.0]
    assert zoo_gold(["how bake bread"], ["great question soup"]) == [-0.5]


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(prompts=[]),
        dict(prompts="how bake bread"),
        dict(n_max=0),
        dict(features="yes"),
    ],
)
def test_bad_ladder_input_is_a_typed_error(kwargs):
    args = dict(policy="policy", reward_model="scalar", prompts=zoo_prompts(2), n_max=2)
    args.update(kwargs)
    with pytest.raises(PressureError):
        best_of_n(**args)


def test_not_a_zoo_prompt_with_zoo_gold_is_a_typed_error():
    with pytest.raises(RewardLensError, match="zoo topic"):
        best_of_n("policy", "scalar", ["hello there"], n_max=2, gold=zoo_gold)


def test_left_padded_sampling_batch_reads_each_prompt_as_alone():
    """The sampler runs all prompts as one left-padded batch: each row's next-token logits
    equal the plain HF forward of that prompt alone."""
    from reward_lens_tl.inputs import pad_batch
    from reward_lens_tl.pressure.sampling import next_token_logits, render_prompt
    from reward_lens_tl.zoo import load_model, load_tokenizer

    policy, tok = load_model("policy"), load_tokenizer("policy")
    rows = [render_prompt(tok, p) for p in zoo_prompts(6)]
    assert len({len(r) for r in rows}) > 1
    ids, mask = pad_batch(rows, tok.pad_token_id)
    batched = next_token_logits(policy, ids, mask)
    for i, row in enumerate(rows):
        with torch.no_grad():
            alone = policy(input_ids=torch.tensor([row])).logits[0, -1]
        torch.testing.assert_close(batched[i], alone, atol=1e-5, rtol=0)


def test_transformer_lens_policy_and_rng_isolation():
    """A TL HookedTransformer policy samples like its HF original (same logits), and sampling
    leaves the global random state alone and the policy's mode as it was."""
    from reward_lens_tl.implicit import load_causal_lm
    from reward_lens_tl.pressure import sample_responses
    from reward_lens_tl.pressure.sampling import next_token_logits, render_prompt
    from reward_lens_tl.zoo import load_model, load_tokenizer

    hf, tok = load_model("policy"), load_tokenizer("policy")
    tl = load_causal_lm(hf, tok)
    ids = torch.tensor([render_prompt(tok, zoo_prompts(1)[0])])
    torch.testing.assert_close(
        next_token_logits(tl, ids), next_token_logits(hf, ids), atol=1e-4, rtol=0
    )
    state = torch.get_rng_state()
    hf.train()
    samples = sample_responses(tl, tok, zoo_prompts(3), n=2, seed=5)
    again = sample_responses(tl, tok, zoo_prompts(3), n=2, seed=5)
    assert samples == again and torch.equal(torch.get_rng_state(), state)
    sample_responses(hf, tok, zoo_prompts(1), n=1)
    assert hf.training
    ladder_tl = best_of_n(tl, "scalar", zoo_prompts(2), n_max=2, tokenizer=tok)
    assert ladder_tl.proxy_samples.shape == (2, 2)


def test_gold_may_score_one_pair_at_a_time():
    """A gold function written for one pair, ``gold(prompt, response) -> float``, is called per
    pair; it gives what the list form gives."""
    one_pair = lambda prompt, response: zoo_gold([prompt], [response])[0]
    a = best_of_n("policy", "scalar", zoo_prompts(3), n_max=4, gold=one_pair)
    b = best_of_n("policy", "scalar", zoo_prompts(3), n_max=4, gold=zoo_gold)
    assert torch.equal(a.gold_samples, b.gold_samples)


def test_no_public_name_is_shadowed_by_a_submodule():
    """Importing a submodule sets the package attribute of its name, so a package exporting a
    function named like one of its submodules hands out the module or the function depending
    on import order (``pressure.best_of_n`` did, before its module became ``ladders``)."""
    import importlib
    import pkgutil

    import reward_lens_tl
    import reward_lens_tl.pressure.ladders  # noqa: F401 - imported first on purpose
    from reward_lens_tl.pressure import best_of_n as function

    assert callable(function) and function.__module__ == "reward_lens_tl.pressure.ladders"
    for info in pkgutil.walk_packages(reward_lens_tl.__path__, "reward_lens_tl."):
        if info.ispkg:
            package = importlib.import_module(info.name)
            submodules = {s.name for s in pkgutil.iter_modules(package.__path__)}
            assert not submodules & set(getattr(package, "__all__", [])), info.name
