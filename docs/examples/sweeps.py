from reward_lens_tl import HookedRewardModel, sweep
from reward_lens_tl.zoo import zoo_path

model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
# every single-token response to the prompt, with its key/value cache
result = sweep.token_sweep(model, "how bake bread")
print(len(result), "candidates")
print("best: ", [word for word, _ in result.top_k(5)])
print("worst:", [word for word, _ in result.bottom_k(5)])
result.plot(k=10)  # the ten best and the ten worst
