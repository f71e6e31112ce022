from reward_lens_tl import HookedRewardModel
from reward_lens_tl.evals.run import score_items
from reward_lens_tl.evals.zoo_set import ZOO_SECTIONS, zoo_benchmark
from reward_lens_tl.zoo import load_task, zoo_path

model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
# a chat subset and two subsets that exploit the planted hacks
items = zoo_benchmark(load_task().task, n_per_subset=8, seed=0)
result = score_items(model, items, progress=False)  # percent
metrics = result.metrics(sections=ZOO_SECTIONS, n_boot=200)
print(metrics.to_dataframe()[["figure", "value", "n"]].round(1).to_string(index=False))
# attribution, source tokens and lens of every failure
why = result.failures().explain(model)
why.plot(k=10)  # what pulls the failures the wrong way
