"""`RewardLensCallback`: a `transformers.TrainerCallback` that watches reward mechanisms.

It watches them while a model trains (TRL's `RewardTrainer`, `GRPOTrainer`, `RLOOTrainer`,
`DPOTrainer`, or a plain `Trainer`).

Every `every` optimiser steps (and once before the first), on the main process, it runs
no-grad forwards on a fixed probe set (`reward_lens_tl.pressure.monitor` lists the
series) in one of two modes:

- `"reward_model"` (`reward_model=None`, or the very model the trainer trains): the
  trainer's model is converted to a `reward_lens_tl.model.HookedRewardModel` (a few
  milliseconds for a small model; the HF model is not modified) and
  `reward_lens_tl.pressure.monitor.measure_reward_model` records its lens, attribution
  and probe deltas on `probe_examples`: when does the RM learn each planted feature?
- `"policy"` (`reward_model` is another model): the trainer's model is a policy;
  `reward_lens_tl.pressure.monitor.measure_policy` samples it on fixed prompts and
  records the proxy and gold rewards, planted features, probe verdicts, the reward model's
  attribution of the rewards it gives, `exploit/<probe>` (the attribution to the component
  where the reward model pays for each hack probe, named in `callback.hack_components`) and
  (with `reference`) the
  policy's implicit-reward margins on `probe_examples`.

**Where the records go**: `callback.records` (a
`reward_lens_tl.pressure.monitor.MonitorRecords`: `to_dataframe()` with `step`,
`series`, `value`; `plot()`; `onsets()`) and `state.log_history` (one entry per record
step, keys `reward_lens/<series>`). Reporting callbacks (wandb, tensorboard) are called before
user callbacks, so to have them log the series too, put this callback first:
`trainer.callback_handler.callbacks.insert(0, callback)`; it then adds its latest headline
values (all but the per-site lens and per-component attribution series) to the next `logs`
the trainer emits.

**Tokenizers**: samples are text. The reward model reads them through its own tokenizer and
template, so a policy with a different tokenizer works; the callback says so once
(`callback.retokenizes`) and logs it. The policy's own tokenizer must fit the policy: one with
more token ids than the policy embeds is a set-up failure (below), never silent records.

**Errors never crash training**: a failure while setting up (a probe example longer than the
context, a trainer model this library cannot convert, a tokenizer larger than the policy's
vocabulary, more samples than `reward_lens_tl.pressure.validate.MAX_SAMPLES`) or while
measuring is logged through the `reward_lens_tl` logger and kept in `callback.errors` as
`(step, message)`; a set-up failure turns the monitor off. `on_error="stop"` asks the
trainer to stop instead, and `on_error="raise"` raises `reward_lens_tl.errors.MonitorFailedError`.

Cost: one conversion and one batched forward of the probe set per record (plus sampling in the
policy mode); `benchmarks/bench_pressure.py` measures it against a training step.

Examples:
    >>> from reward_lens_tl.pressure import RewardLensCallback
    >>> cb = RewardLensCallback(None, [("how bake bread", "soup oven")], every=10)
    >>> cb.every, cb.records.to_dataframe().columns.tolist()
    (10, ['step', 'series', 'value'])
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from typing import Any, Literal

import torch
from transformers import TrainerCallback

from ..errors import MonitorFailedError, PressureError, UnsupportedTrainerModelError
from .monitor import (
    DEFAULT_GROUP,
    ImplicitSet,
    MonitorRecords,
    PolicyProbe,
    as_groups,
    compile_probe_set,
    default_probes,
    hack_components,
    implicit_margins,
    measure_policy,
    measure_reward_model,
)
from .sampling import model_device, next_token_logits, render_prompt
from .validate import (
    MAX_BOOT,
    MAX_SAMPLES,
    check_count,
    check_max_new_tokens,
    check_positive,
    check_prompts,
    check_sample_budget,
    check_tokenizer_fits,
)

logger = logging.getLogger("reward_lens_tl")
OnError = Literal["log", "stop", "raise"]
Mode = Literal["auto", "reward_model", "policy"]
LOG_PREFIX = "reward_lens/"


class RewardLensCallback(TrainerCallback):
    """Records reward-model mechanisms during training (module docstring).

    Args:
        reward_model: `None` (monitor the reward model being trained) or the reward model a
            policy is trained against (a `HookedRewardModel`, a zoo name or directory, or any
            reward-like model `reward_lens_tl.pressure.sampling.score_texts` takes;
            attribution needs a `HookedRewardModel`).
        probe_examples: `(prompt, response)` texts, preference pairs
            (`prompt`/`chosen`/`rejected` objects or dicts), or `{group: examples}`.
        every: record every `every` optimiser steps (an integer >= 1, not a `bool`).
        mode: `"auto"` (`"reward_model"` when `reward_model` is `None` or the trainer's
            model, else `"policy"`), `"reward_model"` or `"policy"`.
        probes: `"auto"` (the zoo's planted-feature probes on zoo data, else the built-in
            battery), a list, or `None`.
        prompts: policy mode: the prompts to sample, a non-empty list (default: the probe
            examples' prompts).
        gold: policy mode: a gold reward function or model.
        features: policy mode: `"auto"`, `None` or a function
            `fn(prompt, response) -> {name: value}`.
        reference: policy mode: `"initial"` (a copy of the policy at the start) or a model,
            for implicit rewards.
        beta: policy mode: the implicit rewards' scale (a finite number > 0).
        samples_per_prompt: policy mode: responses sampled per prompt (an integer >= 1;
            `samples_per_prompt × prompts` at most
            `reward_lens_tl.pressure.validate.MAX_SAMPLES`, checked when the policy mode is
            set up).
        max_new_tokens: policy mode: the token budget of each response (an integer from 1
            to `reward_lens_tl.pressure.validate.MAX_NEW_TOKENS`).
        seed: the seed of the sampling and of the probes' edits (an integer >= 0).
        tokenizer: the trainer model's tokenizer (default: the trainer's `processing_class`);
            in policy mode its token ids must fit the policy's vocabulary.
        on_error: `"log"`, `"stop"` or `"raise"`.
        flag_boot: bootstrap resamples of each probe's flag (an integer from 1 to
            `reward_lens_tl.pressure.validate.MAX_BOOT`).
        max_probe_examples: how many probed examples the probe suite edits (spread over the
            set; an integer >= 1, or `None`: all).

    Examples:
        A trainer calls the callback's events; here they are called by hand at step 0 (no
        training), monitoring the zoo's reward model on contrast pairs of its planted features:

        >>> from transformers import TrainerControl, TrainerState
        >>> from reward_lens_tl.pressure import RewardLensCallback
        >>> from reward_lens_tl.pressure.training import zoo_feature_pairs
        >>> from reward_lens_tl.zoo import load_model, load_tokenizer
        >>> callback = RewardLensCallback(None, zoo_feature_pairs(4), every=5)
        >>> state, control = TrainerState(), TrainerControl()
        >>> _ = callback.on_train_begin(None, state, control, model=load_model("scalar"),
        ...                             processing_class=load_tokenizer("scalar"))
        >>> callback.resolved_mode, callback.errors
        ('reward_model', [])
        >>> record = callback.records.pivot().loc[0]  # the records at step 0
        >>> keys = ["margin/harmful", "accuracy/harmful", "probe/sycophantic_opener/delta"]
        >>> record[keys].round(2).tolist()
        [2.78, 1.0, 3.28]
        >>> state.log_history[0]["reward_lens/margin/harmful"] == float(record["margin/harmful"])
        True
    """

    def __init__(
        self,
        reward_model: Any = None,
        probe_examples: Any = None,
        every: int = 10,
        *,
        mode: Mode = "auto",
        probes: Any = "auto",
        prompts: Sequence[Any] | None = None,
        gold: Any = None,
        features: Any = "auto",
        reference: Any = None,
        beta: float = 0.1,
        samples_per_prompt: int = 4,
        max_new_tokens: int = 16,
        seed: int = 0,
        tokenizer: Any = None,
        on_error: OnError = "log",
        flag_boot: int = 200,
        max_probe_examples: int | None = 16,
    ):
        """Check the options and start with no records (the arguments are the class's).

        Raises:
            PressureError: if a count (`every`, `samples_per_prompt`, `max_new_tokens`,
                `seed`, `flag_boot`, `max_probe_examples`) is not an integer (a `bool` or a
                float included) in its range, `beta` is not a finite number above 0,
                `prompts` is empty or one string, `on_error` or `mode` is unknown, or
                `probe_examples` is missing or has an empty group.
        """
        every = check_count("every", every)
        samples_per_prompt = check_count(
            "samples_per_prompt", samples_per_prompt, high=MAX_SAMPLES,
            why="every record samples every prompt's responses in one batch",
        )  # fmt: skip
        max_new_tokens = check_max_new_tokens(max_new_tokens)
        seed = check_count("seed", seed, low=0)
        flag_boot = check_count("flag_boot", flag_boot, high=MAX_BOOT)
        if max_probe_examples is not None:
            max_probe_examples = check_count("max_probe_examples", max_probe_examples)
        beta = check_positive("beta", beta)
        if on_error not in ("log", "stop", "raise"):
            raise PressureError(f"on_error must be 'log', 'stop' or 'raise', got {on_error!r}")
        if mode not in ("auto", "reward_model", "policy"):
            raise PressureError(f"mode must be 'auto', 'reward_model' or 'policy', got {mode!r}")
        self.groups = as_groups(probe_examples)
        self.reward_model = reward_model
        self.every = every
        self.mode = mode
        self.probes = probes
        self.prompts = check_prompts(prompts) if prompts is not None else None
        self.gold = gold
        self.features = features
        self.reference = reference
        self.beta = beta
        self.samples_per_prompt = samples_per_prompt
        self.max_new_tokens = max_new_tokens
        self.seed = seed
        self.tokenizer = tokenizer
        self.on_error = on_error
        self.flag_boot = flag_boot
        self.max_probe_examples = max_probe_examples
        self.errors: list[tuple[int, str]] = []
        self.retokenizes = False
        self.hack_components: dict[str, str] = {}
        self.enabled = True
        self._rows: list[tuple[int, str, float]] = []
        self._pending: dict[str, float] = {}
        self._recorded: set[int] = set()
        self._hooked_model: Any = None  # the trainer's reward model, converted once
        self._hooked_current = False  # its weights are the trainer's (no step since converting)

    # -- results ---------------------------------------------------------------------------
    @property
    def records(self) -> MonitorRecords:
        """Everything recorded so far (`to_dataframe()`: `step`, `series`, `value`)."""
        return MonitorRecords.from_rows(self._rows)

    # -- trainer events --------------------------------------------------------------------
    def on_train_begin(self, args, state, control, model=None, processing_class=None, **kwargs):
        """Set the monitor up on the main process and take the first record.

        Args:
            args: the trainer's `TrainingArguments`.
            state: the trainer's `TrainerState`.
            control: the trainer's `TrainerControl`.
            model: the model being trained.
            processing_class: the trainer's tokenizer.
            **kwargs: the other objects the trainer passes (unused).

        Returns:
            `control`.
        """
        if not state.is_world_process_zero:
            self.enabled = False  # one monitor per run: the main process's
            return control
        if not self._guard(0, control, self._setup, model, processing_class, fatal=True):
            return control
        self._guard(state.global_step, control, self._record, state, model)
        return control

    def on_step_end(self, args, state, control, model=None, **kwargs):
        """Take a record every `every` optimiser steps.

        Args:
            args: the trainer's `TrainingArguments`.
            state: the trainer's `TrainerState`.
            control: the trainer's `TrainerControl`.
            model: the model being trained.
            **kwargs: the other objects the trainer passes (unused).

        Returns:
            `control`.
        """
        self._hooked_current = False  # a step has changed the trainer's weights
        if self.enabled and state.global_step % self.every == 0:
            self._guard(state.global_step, control, self._record, state, model)
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        """Add the latest record's headline series to the `logs` the trainer emits.

        Args:
            args: the trainer's `TrainingArguments`.
            state: the trainer's `TrainerState`.
            control: the trainer's `TrainerControl`.
            logs: the logs about to be emitted (updated in place).
            **kwargs: the other objects the trainer passes (unused).

        Returns:
            `control`.
        """
        if logs is not None and self._pending:
            headline = {k: v for k, v in self._pending.items() if is_headline(k)}
            logs.update({LOG_PREFIX + k: v for k, v in headline.items()})
            self._pending = {}
        return control

    # -- set-up and measurement ------------------------------------------------------------
    def _guard(self, step: int, control, fn, *args, fatal: bool = False) -> bool:
        """Run `fn` with the random state restored afterwards.

        The monitor must not change the run it watches. On failure, log it, keep it in
        `errors`, and act on `on_error`.
        """
        try:
            with torch.random.fork_rng(devices=_cuda_devices()):
                fn(*args)
            return True
        except Exception as err:  # noqa: BLE001 - a monitor must never crash training
            message = f"{type(err).__name__}: {err}"
            self.errors.append((step, message))
            if self.on_error == "raise":
                raise MonitorFailedError(f"reward-lens monitor at step {step}: {message}") from err
            what = "turned off" if fatal else "skipped this record"
            logger.warning("reward-lens monitor %s at step %d: %s", what, step, message)
            if fatal:
                self.enabled = False
            if self.on_error == "stop":
                control.should_training_stop = True
            return False

    def _setup(self, model, processing_class) -> None:
        if model is None:
            raise UnsupportedTrainerModelError("the trainer passed no model to the callback")
        tokenizer = self.tokenizer if self.tokenizer is not None else processing_class
        self._tokenizer = tokenizer
        mode = self.mode
        if mode == "auto":
            mode = "reward_model" if self.reward_model in (None, model) else "policy"
        self.resolved_mode = mode
        if mode == "reward_model":
            self._setup_reward_model(model, tokenizer)
        else:
            self._setup_policy(model, tokenizer)

    def _hooked(self, model, tokenizer):
        """The trainer's reward model as a `HookedRewardModel`.

        Converted once, then its weights re-read in place at every record after a training
        step (`reward_lens_tl.loading.reload_weights`).
        """
        from ..errors import UnsupportedArchitectureError
        from ..loading import reload_weights
        from ..model import HookedRewardModel

        if self._hooked_model is not None:
            if not self._hooked_current:
                reload_weights(self._hooked_model, model)
                self._hooked_current = True
            return self._hooked_model
        try:
            with torch.no_grad():
                self._hooked_model = HookedRewardModel.from_pretrained(
                    model, tokenizer, verify=False
                )
                self._hooked_current = True
                return self._hooked_model
        except UnsupportedArchitectureError as err:
            raise UnsupportedTrainerModelError(
                f"the trainer's {type(model).__name__} is not a reward model this library "
                f"converts ({err}); monitor a supported architecture, or pass the reward model "
                "a policy is trained against as reward_model="
            ) from err

    def _resolved_probes(self) -> list:
        if self.probes is None:
            return []
        return default_probes(self.groups) if self.probes == "auto" else list(self.probes)

    def _setup_reward_model(self, model, tokenizer) -> None:
        if tokenizer is None:
            raise PressureError("no tokenizer: pass tokenizer= or train with processing_class=")
        hooked = self._hooked(model, tokenizer)
        self._probe_set = compile_probe_set(
            hooked, self.groups, self._resolved_probes(), self.seed, self.max_probe_examples
        )

    def _setup_policy(self, model, tokenizer) -> None:
        from ..model import HookedRewardModel
        from .ladders import load_reward_like, resolve_features

        if tokenizer is None:
            raise PressureError("no tokenizer for the policy: pass tokenizer= or processing_class")
        prompts = self.prompts or list(dict.fromkeys(_prompts_of(self.groups)))
        check_sample_budget("samples_per_prompt", self.samples_per_prompt, len(prompts))
        check_tokenizer_fits(model, tokenizer)  # before any id reaches the policy's embeddings
        self._check_causal_lm(model, tokenizer)
        rm = self.reward_model = load_reward_like(self.reward_model)
        hooked = isinstance(rm, HookedRewardModel)
        probes = self._resolved_probes() if hooked else []
        singles = [(p, r) for p, r in _texts_of(self.groups)]
        hacks = [p for p in probes if p.kind == "hack"]
        self.hack_components = hack_components(rm, singles, hacks) if hacks and singles else {}
        features = resolve_features(self.features, prompts)
        self._policy_spec = PolicyProbe(
            prompts=prompts,
            samples_per_prompt=self.samples_per_prompt,
            max_new_tokens=self.max_new_tokens,
            seed=self.seed,
            probes=probes,
            hack_components=self.hack_components,
            gold=self.gold,
            features=features,
            max_probe_examples=self.max_probe_examples,
        )
        self.retokenizes = _vocab(tokenizer) != _vocab(getattr(rm, "tokenizer", None))
        if self.retokenizes:
            logger.info(
                "reward-lens monitor: the policy's and the reward model's tokenizers differ; "
                "samples are decoded to text and re-encoded with the reward model's own"
            )
        ref = self.reference
        self._reference = frozen_copy(model) if isinstance(ref, str) and ref == "initial" else ref
        if self._reference is not None:
            self._implicit_set = ImplicitSet.build(tokenizer, self.groups)

    def _check_causal_lm(self, model, tokenizer) -> None:
        try:
            ids = torch.tensor([render_prompt(tokenizer, "hello")])
            with torch.no_grad():
                next_token_logits(model, ids.to(model_device(model)))
        except Exception as err:  # noqa: BLE001 - reported as the typed error below
            raise UnsupportedTrainerModelError(
                f"the trainer's {type(model).__name__} cannot be sampled as a policy ({err}); "
                "for a reward model being trained, pass reward_model=None"
            ) from err

    def _record(self, state, model) -> None:
        step = state.global_step
        if step in self._recorded:
            return
        values = self._measure(model)
        self._recorded.add(step)
        self._rows += [(step, name, value) for name, value in values.items()]
        state.log_history.append({**{LOG_PREFIX + k: v for k, v in values.items()}, "step": step})
        self._pending = values

    def _measure(self, model) -> dict[str, float]:
        if self.resolved_mode == "reward_model":
            hooked = self._hooked(model, self._tokenizer)
            return measure_reward_model(
                hooked, self._probe_set, flag_boot=self.flag_boot, seed=self.seed
            )
        values = measure_policy(
            model, self._tokenizer, self.reward_model, self._policy_spec, flag_boot=self.flag_boot
        )
        if self._reference is not None:
            was_training = model.training
            model.eval()
            try:
                values.update(
                    implicit_margins(model, self._reference, self._implicit_set, self.beta)
                )
            finally:
                model.train(was_training)
        return values


def frozen_copy(model):
    """A copy of `model`'s current weights in a freshly built module of its class, in eval mode.

    Not `copy.deepcopy`: accelerate (under TRL) wraps `model.forward` in a closure over the
    original module, so a deep copy's forward would still run the model being trained.

    Args:
        model: an HF model (with `config`) or a TL model (with `cfg`).

    Returns:
        The copy, on the model's device.

    Raises:
        PressureError: if the model has neither `config` nor `cfg`.
    """
    config = getattr(model, "config", None)
    if config is None:
        config = getattr(model, "cfg", None)
    if config is None:
        raise PressureError(
            f"cannot rebuild a {type(model).__name__} for reference='initial': pass reference="
        )
    fresh = type(model)(copy.deepcopy(config))
    fresh.load_state_dict(model.state_dict())
    return fresh.to(model_device(model)).eval()


def is_headline(series: str) -> bool:
    """Whether the trainer's loggers get `series` (`state.log_history` gets all).

    They get everything but the per-site lens and per-component attribution series.

    Args:
        series: the series' name.

    Returns:
        `True` for a headline series.
    """
    return not series.startswith(("lens/", "attribution/"))


def _prompts_of(groups) -> list:
    out = []
    for examples in groups.values():
        for ex in examples:
            out.append(ex[0] if isinstance(ex, tuple) else getattr(ex, "prompt", ex))
    return out


def _texts_of(groups) -> list[tuple[Any, str]]:
    """`(prompt, response)` of every example (both sides of pairs)."""
    out = []
    for examples in groups.values():
        for ex in examples:
            if isinstance(ex, tuple):
                out.append(ex)
            elif hasattr(ex, "chosen"):
                out += [(ex.prompt, ex.chosen), (ex.prompt, ex.rejected)]
    return out


def _vocab(tokenizer) -> dict | None:
    return None if tokenizer is None else tokenizer.get_vocab()


def _cuda_devices() -> list[int]:
    return list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []


__all__ = ["DEFAULT_GROUP", "LOG_PREFIX", "RewardLensCallback"]
