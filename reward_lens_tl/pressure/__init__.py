"""Reward hacking as it happens.

Optimisation pressure against a reward model, watched from the inside:

- `best_of_n`: best-of-n ladders (proxy and gold reward, the analytic KL
  `log n - (n-1)/n`, planted-feature frequencies and probe verdicts for `n = 1, 2, 4, ...`)
  from one set of samples per prompt (`reward_lens_tl.pressure.ladders`);
- `RewardLensCallback`: a `transformers.TrainerCallback` for TRL trainers that records
  the reward lens, exact attribution and probe deltas of a reward model being trained, or the
  proxy/gold rewards, probe flags, attribution and implicit-reward features of a policy trained
  against one (`reward_lens_tl.pressure.callback`, `reward_lens_tl.pressure.monitor`);
- `detect_onset`: a one-sided CUSUM change-point detector whose false-alarm rate is stated
  as an average run length and calibrated on the series' warm-up
  (`reward_lens_tl.pressure.onset`);
- `reward_lens_tl.pressure.zoo`: the gold reward and planted features of the zoo task;
  `reward_lens_tl.pressure.training`: the end-to-end TRL runs (a reward model trained from
  scratch, a policy optimised against the zoo's reward model and against a control without
  the hack).

TRL is an optional extra (`pip install reward-lens-tl[trl]`); `best_of_n`,
`detect_onset` and the callback need only `transformers`.

Examples:
    >>> from reward_lens_tl.pressure import kl_best_of_n, detect_onset
    >>> round(kl_best_of_n(16), 4)
    1.8351
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

_EXPORTS = {
    "best_of_n": "ladders",
    "BestOfNResult": "ladders",
    "kl_best_of_n": "ladders",
    "best_of_n_kl_exact": "ladders",
    "order_weights": "ladders",
    "RewardLensCallback": "callback",
    "MonitorRecords": "monitor",
    "measure_reward_model": "monitor",
    "measure_policy": "monitor",
    "compile_probe_set": "monitor",
    "detect_onset": "onset",
    "Onset": "onset",
    "onset_table": "onset",
    "cusum_threshold": "onset",
    "sample_responses": "sampling",
    "score_texts": "sampling",
    "zoo_gold": "zoo",
    "zoo_features": "zoo",
    "GoldRule": "zoo",
}

__all__ = [
    "BestOfNResult",
    "GoldRule",
    "MonitorRecords",
    "Onset",
    "RewardLensCallback",
    "best_of_n",
    "best_of_n_kl_exact",
    "compile_probe_set",
    "cusum_threshold",
    "detect_onset",
    "kl_best_of_n",
    "measure_policy",
    "measure_reward_model",
    "onset_table",
    "order_weights",
    "sample_responses",
    "score_texts",
    "zoo_features",
    "zoo_gold",
]

if TYPE_CHECKING:  # pragma: no cover
    from .callback import RewardLensCallback
    from .ladders import (
        BestOfNResult,
        best_of_n,
        best_of_n_kl_exact,
        kl_best_of_n,
        order_weights,
    )
    from .monitor import MonitorRecords, compile_probe_set, measure_policy, measure_reward_model
    from .onset import Onset, cusum_threshold, detect_onset, onset_table
    from .sampling import sample_responses, score_texts
    from .zoo import GoldRule, zoo_features, zoo_gold

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
