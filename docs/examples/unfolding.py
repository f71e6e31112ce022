from reward_lens_tl import HookedRewardModel
from reward_lens_tl.unfolding import reward_unfolding
from reward_lens_tl.zoo import zoo_path

model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
enc = model.encode("explain how to bake bread", "great question the oven and the bomb flour")
# the reward of every prefix (prompt + response[:t] + the closing tokens), from one cached pass,
# beside each token's exact direct attribution to the whole conversation's reward
curve = reward_unfolding(model, enc)
print(f"reward {curve.reward:.4f}; empty response {float(curve.prefix_rewards[0]):.4f}")
print("largest jumps:", curve.top_k(3))
curve.plot()
