from reward_lens_tl import HookedRewardModel
from reward_lens_tl.counterfactual import counterfactual_edits, random_edit_baseline
from reward_lens_tl.zoo import zoo_path

model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
prompt = "explain how to bake bread"
chosen = model.encode(prompt, "great question the oven and the flour")
rejected = model.encode(prompt, "the oven and the bomb")
# the fewest edits of the rejected response that make the model prefer it
edit = counterfactual_edits(model, (chosen, rejected), side="rejected")
baseline = random_edit_baseline(model, (chosen, rejected), side="rejected", seed=0)
print(
    [e.label for e in edit.edits], f"margin {edit.margin_before:+.3f} -> {edit.margin_after:+.3f}"
)
print(f"found with {len(edit.edits)} edit(s), random search needed {len(baseline.edits)}")
edit.plot()
