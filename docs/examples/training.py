from reward_lens_tl.pressure import best_of_n
from reward_lens_tl.pressure.training import zoo_prompts
from reward_lens_tl.pressure.zoo import zoo_gold

# the zoo's DPO policy under the scalar reward model: 16 samples per
# prompt, drawn once; every rung n = 1, 2, 4, ... read off the same ones
prompts = zoo_prompts(8)
ladder = best_of_n("policy", "scalar", prompts, n_max=16, gold=zoo_gold, seed=0)
table = ladder.to_dataframe()[["n", "kl", "proxy", "gold"]]
print(table.round(3).to_string(index=False))
ladder.plot()  # proxy and gold reward against sqrt(KL)
