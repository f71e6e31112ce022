from reward_lens_tl import HookedRewardModel
from reward_lens_tl.probes import run_probes
from reward_lens_tl.probes.zoo import zoo_examples, zoo_probes
from reward_lens_tl.zoo import load_task, zoo_path

model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
# 32 (prompt, response) texts of the zoo task
examples = zoo_examples(load_task().task, 32, seed=0, max_words=8)
# each probe's reward deltas, with seeded bootstrap intervals
report = run_probes(model, examples, zoo_probes(), seed=0)
report.plot()  # mean delta per probe and its interval; flagged ones marked
