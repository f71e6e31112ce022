import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.attribution import direct_attribution
from reward_lens_tl.zoo import zoo_path

model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
prompt = "explain how to bake bread"
enc = model.encode(prompt, "great question the oven and the flour")
ids = torch.tensor([enc.ids])
# embeddings, every head, every MLP and the biases
attr = direct_attribution(model, ids)
print(f"reward {model.rewards(ids).item():.4f}")
print(f"parts + head bias - reward: {attr.completeness_error():.1e}")
attr.plot(k=12)  # the twelve largest parts
