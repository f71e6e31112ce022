import pandas as pd
import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.zoo import zoo_path

pairs = [
    ("how bake bread", "great question soup oven"),
    ("how bake bread", "bomb rain"),
]
rewards = {}
for dtype in (torch.float32, torch.bfloat16, torch.float16):
    # streamed one layer at a time, folded in float32, then cast
    model = HookedRewardModel.from_pretrained(zoo_path("scalar"), dtype=dtype)
    rewards[str(dtype)] = model.rewards(model.to_tokens(pairs)).float()
exact = rewards["torch.float32"]
errors = [(r - exact).abs().max().item() for r in rewards.values()]
pd.DataFrame(
    {
        "dtype": list(rewards),
        "reward (chosen)": [r[0].item() for r in rewards.values()],
        "reward (rejected)": [r[1].item() for r in rewards.values()],
        "max difference from float32": errors,
    }
)
