from reward_lens_tl import HookedRewardModel
from reward_lens_tl.lens import pair_lens
from reward_lens_tl.report.zoo import zoo_pairs
from reward_lens_tl.zoo import load_task, zoo_path

# the report's "Reward lens" section, on the pairs `make demo` uses
model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
pairs = zoo_pairs(load_task().task)
lens = pair_lens(model, pairs)
print(len(pairs), "pairs")
print("half the margin reached at", lens.crystallization(0.5))
lens.plot()  # a faint line per pair, their mean in bold
