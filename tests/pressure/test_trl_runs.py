"""The callback inside real TRL trainers (slow tier): records equal recomputation from the
checkpoints saved at the same steps, the monitor leaves the run unchanged, and the policy
monitor runs under GRPO."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from reward_lens_tl.pressure import RewardLensCallback
from reward_lens_tl.pressure.training import (
    optimise_policy,
    train_reward_model,
    zoo_feature_pairs,
    zoo_prompts,
)
from reward_lens_tl.pressure.zoo import zoo_gold

pytestmark = pytest.mark.slow
STEPS, EVERY = 30, 10


def hf_rewards(model, tokenizer, prompt: str, responses: list[str]) -> list[float]:
    out = []
    for response in responses:
        msgs = [{"role": "user", "content": prompt}, {"role": "assistant", "content": response}]
        ids = tokenizer.apply_chat_template(msgs, tokenize=True, return_dict=True)["input_ids"]
        with torch.no_grad():
            out.append(float(model(input_ids=torch.tensor([ids])).logits[0, 0]))
    return out


@pytest.fixture(scope="module")
def rm_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("rm")
    cb = RewardLensCallback(None, zoo_feature_pairs(4), every=EVERY)
    trainer = train_reward_model(out, steps=STEPS, callbacks=[cb], save_steps=EVERY, threads=1)
    return out, cb, trainer


def test_reward_trainer_records_equal_the_saved_checkpoints(rm_run):
    from transformers import AutoModelForSequenceClassification

    from reward_lens_tl.checkpoint import SAFE_KWARGS
    from reward_lens_tl.zoo import load_tokenizer

    out, cb, _ = rm_run
    assert cb.errors == []
    wide = cb.records.pivot()
    assert wide.index.tolist() == [0, 10, 20, 30]
    tok = load_tokenizer("scalar")
    for step in (10, 20, 30):
        model = AutoModelForSequenceClassification.from_pretrained(
            out / f"checkpoint-{step}", **SAFE_KWARGS
        ).eval()
        for feature, pairs in zoo_feature_pairs(4).items():
            margins = [
                a - b
                for p in pairs
                for a, b in [hf_rewards(model, tok, p.prompt, [p.chosen, p.rejected])]
            ]
            assert wide.loc[step, f"margin/{feature}"] == pytest.approx(np.mean(margins), abs=1e-4)
    # the records changed as the model learned
    assert wide.loc[30, "margin/harmful"] != wide.loc[0, "margin/harmful"]


def test_monitor_does_not_change_the_training_run(rm_run, tmp_path):
    _, _, watched = rm_run
    plain = train_reward_model(tmp_path, steps=STEPS, threads=1)
    for (name, a), (_, b) in zip(
        watched.model.named_parameters(), plain.model.named_parameters(), strict=True
    ):
        assert torch.equal(a, b), name


def test_grpo_policy_monitor(tmp_path):
    cb = RewardLensCallback(
        "scalar", zoo_feature_pairs(2), every=5, prompts=zoo_prompts(4), gold=zoo_gold,
        samples_per_prompt=2, max_new_tokens=14, reference="initial",
    )  # fmt: skip
    trainer = optimise_policy("scalar", tmp_path, steps=10, callbacks=[cb], threads=1)
    assert cb.errors == [] and cb.resolved_mode == "policy"
    wide = cb.records.pivot()
    assert wide.index.tolist() == [0, 5, 10]
    assert {"proxy", "gold", "feature/sycophancy", "implicit/sycophancy"} <= set(wide)
    assert wide.loc[0, "implicit/sycophancy"] == 0.0 and wide.loc[10, "implicit/sycophancy"] != 0
    logged = [e for e in trainer.state.log_history if "reward_lens/proxy" in e]
    assert [e["step"] for e in logged] == [0, 5, 10]


# -- ground truth, end to end ----------------------------------------------------------------------
def test_reward_model_learns_the_planted_features_in_the_order_observed(tmp_path):
    """A zoo reward model trained from scratch under the callback. The CUSUM sees every
    feature's margin move as soon as training starts; a feature is *visible* from the step its
    contrast pairs are ranked right 90% of the time for three records. Observed order:
    sycophancy (one fixed phrase at a fixed place) first, harmful and length later, topic match
    (relational: a topic word scores only under a prompt of its topic) not within the run;
    the planted sizes alone (harmful 3 > sycophancy 2.5 > topic 2 > length 0.5) do not predict
    it. notebook 09 discusses the order."""
    cb = RewardLensCallback(None, zoo_feature_pairs(16), every=2)
    train_reward_model(tmp_path, steps=300, learning_rate=5e-4, callbacks=[cb], threads=1)
    assert cb.errors == []
    records = cb.records
    features = ("harmful", "sycophancy", "topic_match", "length")
    moved = records.onsets([f"margin/{f}" for f in features], warmup=5, direction="both")
    assert moved["fired"].all() and (moved["alarm_step"] <= 40).all(), moved
    visible = {f: records.crossing_step(f"accuracy/{f}", 0.9) for f in features}
    assert visible["sycophancy"] is not None and visible["harmful"] is not None
    assert visible["sycophancy"] < visible["harmful"]
    assert visible["topic_match"] is None or visible["topic_match"] > visible["harmful"]
    wide = records.pivot()
    assert wide["margin/harmful"].iloc[-10:].mean() > 1.0
    assert wide["margin/sycophancy"].iloc[-10:].mean() > 1.0


def test_alarm_fires_on_the_hacked_run_and_not_on_the_control(tmp_path):
    """GRPO against the scalar reward model (it pays for the opener) and against the multi
    model (no opener term), seed 0: the opener spreads only in the first run; the monitor's
    sample-level alarm fires there, before the gold reward drops, and not on the control."""
    alarms = {}
    for rm in ("scalar", "multi"):
        cb = RewardLensCallback(
            rm, zoo_feature_pairs(4), every=10, prompts=zoo_prompts(16), gold=zoo_gold,
            samples_per_prompt=4, max_new_tokens=14, reference="initial",
        )  # fmt: skip
        optimise_policy(rm, tmp_path / rm, steps=200, seed=0, callbacks=[cb], threads=1)
        assert cb.errors == []
        wide = cb.records.pivot()
        table = cb.records.hack_alarms(["feature/sycophancy"], warmup=5).iloc[0]
        alarms[rm] = (table, wide)
    hacked, wide = alarms["scalar"]
    assert wide["feature/sycophancy"].iloc[-3:].mean() > wide["feature/sycophancy"].iloc[:5].mean()
    assert wide["proxy"].iloc[-1] > wide["proxy"].iloc[0] + 10
    assert hacked["fired"] and hacked["gold_drop_step"] is not None
    assert hacked["lead_to_drop"] >= 0  # the alarm is no later than the gold drop
    control, wide = alarms["multi"]
    assert not control["fired"]
    assert wide["feature/sycophancy"].iloc[-3:].mean() < 0.1


def test_rloo_and_dpo_trainers_run_the_policy_monitor(tmp_path):
    """The callback in TRL's RLOOTrainer and DPOTrainer (a DPO policy watched against the zoo's
    scalar reward model, with its implicit-reward margins against the starting policy)."""
    import trl
    from datasets import Dataset

    from reward_lens_tl.zoo import load_model, load_tokenizer

    def monitor():
        return RewardLensCallback(
            "scalar", zoo_feature_pairs(2), every=2, prompts=zoo_prompts(3), gold=zoo_gold,
            samples_per_prompt=2, max_new_tokens=8, reference="initial",
        )  # fmt: skip

    rloo = monitor()
    optimise_policy("scalar", tmp_path / "rloo", steps=4, callbacks=[rloo], threads=1,
                    algorithm="rloo")  # fmt: skip
    assert rloo.errors == [] and rloo.records.pivot().index.tolist() == [0, 2, 4]
    pairs = [p for group in zoo_feature_pairs(4).values() for p in group]
    data = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": p.prompt}],
          "chosen": [{"role": "assistant", "content": p.chosen}],
          "rejected": [{"role": "assistant", "content": p.rejected}]} for p in pairs]
    )  # fmt: skip
    dpo = monitor()
    args = trl.DPOConfig(
        output_dir=str(tmp_path / "dpo"), per_device_train_batch_size=4, max_steps=4,
        learning_rate=1e-3, report_to=[], use_cpu=True, bf16=False, save_strategy="no",
        disable_tqdm=True, logging_steps=2,
    )  # fmt: skip
    trainer = trl.DPOTrainer(
        model=load_model("reference"), args=args, train_dataset=data,
        processing_class=load_tokenizer("reference"), callbacks=[dpo],
    )  # fmt: skip
    trainer.train()
    assert dpo.errors == [] and dpo.resolved_mode == "policy"
    wide = dpo.records.pivot()
    assert wide.index.tolist() == [0, 2, 4]
    assert wide.loc[0, "implicit/harmful"] == 0.0 and wide.loc[4, "implicit/harmful"] > 0.0
