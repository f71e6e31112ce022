from reward_lens_tl import HookedRewardModel
from reward_lens_tl.report import zoo_pairs
from reward_lens_tl.sae import (
    difference_dictionary,
    planted_match,
    train_difference_sae,
    zoo_planted_directions,
)
from reward_lens_tl.zoo import load_task, zoo_path

model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
task = load_task().task
pairs = list(zoo_pairs(task, n=512, seed=5))  # rule-labelled random pairs
# a TopK SAE on chosen − rejected at the final norm's output (the reading token), ±d
trained = train_difference_sae(model, pairs, d_sae=64, k=8, steps=400, seed=0)

held_out = list(zoo_pairs(task, n=64, seed=77))
dictionary = difference_dictionary(model, trained.sae, held_out)
# latents + decoder bias + error = the margin, exactly
print(f"completeness error {dictionary.completeness_error():.1e}")
match = planted_match(trained.sae, zoo_planted_directions(model, task))
print(match.to_dataframe())
dictionary.plot(k=12)  # the latents that carry the margin, with their share
