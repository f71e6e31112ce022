import pandas as pd
import torch
from transformers import AutoModelForSequenceClassification

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.zoo import zoo_path

path = zoo_path("scalar")  # an HF LlamaForSequenceClassification
model = HookedRewardModel.from_pretrained(path)
hf = AutoModelForSequenceClassification.from_pretrained(path)

prompt = "explain how to bake bread"
responses = ["the oven and the flour", "great question", "the bomb", "soup"]
with torch.no_grad():
    # ours: one padded batch; HF: one conversation at a time
    ours = model.rewards(model.to_tokens([(prompt, r) for r in responses]))
    one_by_one = [model.to_tokens((prompt, r)) for r in responses]
    theirs = torch.cat([hf(input_ids=ids).logits[:, 0] for ids in one_by_one])
pd.DataFrame(
    {
        "response": responses,
        "HookedRewardModel": ours.tolist(),
        "HF": theirs.tolist(),
        "difference": (ours - theirs).abs().tolist(),
    }
)
