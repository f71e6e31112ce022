from reward_lens_tl.implicit import (
    ImplicitRewardModel,
    implicit_attribution,
)
from reward_lens_tl.zoo import zoo_path

# the zoo's DPO policy and its reference (β = 0.1 from the metadata)
policy, reference = zoo_path("policy"), zoo_path("reference")
irm = ImplicitRewardModel.from_pretrained(policy, reference)
responses = ("great question soup", "soup oven flour")
encoded = [irm.encode("how bake bread", r) for r in responses]
ids, attention, response = irm.batch(encoded)
print(irm.rewards(ids, response, attention))  # β Σ log π / π_ref
# exact: the policy's components + the log-sum-exp + the reference
attr = implicit_attribution(irm, ids, response, attention)
attr.plot(k=10)  # means over both responses
