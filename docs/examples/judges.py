from reward_lens_tl.judges import HookedPRM, first_error_analysis
from reward_lens_tl.zoo import zoo_path

# a Math-Shepherd style PRM: a step tag "ки", verdict tokens "+" / "-"
prm = HookedPRM.from_pretrained(zoo_path("prm"))
prompt = "what is 3 + 4 + 2"
steps = ["3 + 4 = 7", "7 + 2 = 8"]  # the second step is wrong
print(prm.step_rewards(prompt, steps))  # P("+") per step
fixed = ["3 + 4 = 7", "7 + 2 = 9"]
why = first_error_analysis(prm, prompt, steps, step=1, correct_steps=fixed)
# the wrong step's margin, split by the segment each head reads from
why.plot()
