from reward_lens_tl import HookedRewardModel
from reward_lens_tl.patching import activation_patching
from reward_lens_tl.zoo import zoo_path

model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
prompt = "explain how to bake bread"
clean = model.encode(prompt, "the oven and the flour")
corrupted = model.encode(prompt, "the bomb")  # fewer tokens

# denoising: each clean residual into the corrupted run, positions
# aligned back from the reading token; 1 = the clean reward restored
grid = activation_patching(
    model,
    clean,
    corrupted,
    site="resid_pre",
    alignment="end",
)
for cell, value in grid.top_k(3):
    print(f"{cell}: {value:.3f}")
grid.plot()  # layer x aligned position, columns labelled by their tokens
