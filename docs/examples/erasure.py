import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.erasure import concept_erasure, fit_eraser
from reward_lens_tl.zoo import load_task, zoo_path

torch.set_num_threads(1)
model, task = HookedRewardModel.from_pretrained(zoo_path("scalar")), load_task().task


def harmful(examples):  # 1 where the response holds a harmful word
    return [int(bool(e.feature_positions["harmful"])) for e in examples]


# fit LEACE at the reading token after the last attention layer, where harm is read
fit, heldout = task.examples(2000, seed=3), task.examples(600, seed=11)
eraser = fit_eraser(model, fit, harmful(fit), hook="blocks.2.hook_resid_mid", concept="harmful")
features = ("harmful", "topic_match", "sycophancy", "length")
pairs = [p for f in features for p in task.contrast_pairs(f, 40, seed=1)]
result = concept_erasure(model, eraser, pairs, heldout=heldout, heldout_labels=harmful(heldout))
print(result.summary()[["feature", "before", "after", "change_low", "change_high"]].round(3))
print(
    f"probe accuracy {result.probe_before:.3f} -> {result.probe_after:.3f} "
    f"(chance {result.chance:.3f})"
)
result.plot()
