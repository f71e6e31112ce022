"""The training monitor's overhead against the training step it watches (issue 26).

Two CPU runs of ``reward_lens_tl.pressure.training``, 1 thread, float32:

- reward-model training: TRL's ``RewardTrainer``, the zoo-shaped reward model from scratch,
  batch 32 pairs; the callback in its reward-model mode on the zoo's feature contrast pairs
  (4 features x 8 pairs) with the four planted-feature probes;
- policy optimisation: TRL's ``GRPOTrainer``, the zoo reference LM against the zoo's scalar
  reward model, 2 prompts x 8 generations a step; the callback in its policy mode (8 prompts x
  2 samples, gold, features, probes, implicit rewards against the initial policy).

Each run trains ``--steps`` steps without and with the callback (``every=10``), interleaved
``--repeats`` times; the overhead is ``(t_monitored - t_plain) / t_plain`` from the minimum of
each, plus the monitor's own time per record (measured inside the callback) as a fraction of
ten plain steps. Target: <= 10% at ``every=10``.
Usage: python benchmarks/bench_pressure.py [--steps N] [--repeats N]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import torch

from reward_lens_tl.pressure import RewardLensCallback
from reward_lens_tl.pressure.training import (
    optimise_policy,
    train_reward_model,
    zoo_feature_pairs,
    zoo_prompts,
)
from reward_lens_tl.pressure.zoo import zoo_gold

EVERY = 10


class Timed(RewardLensCallback):
    """The callback, timing each of its records."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.record_seconds: list[float] = []

    def _record(self, state, model):
        t0 = time.perf_counter()
        super()._record(state, model)
        self.record_seconds.append(time.perf_counter() - t0)


def reward_model_callback():
    return Timed(None, zoo_feature_pairs(8), every=EVERY)


def policy_callback():
    return Timed(
        "scalar", zoo_feature_pairs(2), every=EVERY, prompts=zoo_prompts(8), gold=zoo_gold,
        samples_per_prompt=2, max_new_tokens=14, reference="initial",
    )  # fmt: skip


def run(kind: str, steps: int, callback) -> float:
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        cbs = [callback] if callback is not None else []
        if kind == "reward_model":
            train_reward_model(out, steps=steps, callbacks=cbs, threads=1)
        else:
            optimise_policy("scalar", out, steps=steps, callbacks=cbs, threads=1)
        return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"load average: {os.getloadavg()}")
    for kind, make in (("reward_model", reward_model_callback), ("policy", policy_callback)):
        plain, watched, per_record = [], [], []
        for _ in range(args.repeats):
            plain.append(run(kind, args.steps, None))
            cb = make()
            watched.append(run(kind, args.steps, cb))
            assert not cb.errors, cb.errors
            per_record += cb.record_seconds[1:]  # the first record includes set-up
        step = min(plain) / args.steps
        overhead = (min(watched) - min(plain)) / min(plain)
        record = sorted(per_record)[len(per_record) // 2]
        print(
            f"{kind}: plain {min(plain):.2f} s ({step * 1e3:.1f} ms/step), monitored "
            f"{min(watched):.2f} s: overhead {overhead:+.1%}; one record {record * 1e3:.1f} ms "
            f"(median) = {record / (EVERY * step):.1%} of {EVERY} plain steps"
        )


if __name__ == "__main__":
    main()
