from reward_lens_tl import HookedRewardModel
from reward_lens_tl.sae import (
    collect_activations,
    feature_attribution,
    model_batches,
    train_topk_sae,
)
from reward_lens_tl.zoo import load_task, zoo_path

model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
task = load_task().task
site = "blocks.2.hook_resid_post"  # the zoo model's final residual
acts = collect_activations(model, site, task.examples(256, seed=0))
trained = train_topk_sae(acts, site, d_sae=128, k=8, steps=300, seed=0)

batch = model_batches(model, task.examples(16, seed=1), batch_size=16)
ids, mask = next(batch)
# latents + error + decoder bias + head bias = the reward, exactly
attr = feature_attribution(model, trained.sae, ids, mask)
print(f"completeness error {attr.completeness_error():.1e}")
attr.plot(k=12)  # the latents that carry the reward (mean of 16)
