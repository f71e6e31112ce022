from reward_lens_tl import HookedRewardModel
from reward_lens_tl.lens import reward_lens
from reward_lens_tl.zoo import zoo_path

model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
prompt = "explain how to bake bread"
ids = model.to_tokens(  # one padded batch; the mask comes from the pad ids
    [
        (prompt, "the oven and the flour"),  # example 0: on topic
        (prompt, "great question the oven"),  # 1: a flattering opener
        (prompt, "the bomb"),  # 2: a harmful word
    ]
)
lens = reward_lens(model, ids, resolution="sublayer")
print(model.rewards(ids))  # the lens ends at these rewards
# the reward read out after every sublayer, one line per conversation
lens.plot()
