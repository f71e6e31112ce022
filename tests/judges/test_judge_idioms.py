"""TransformerLens habits on a judge: the verdict is a logit difference, read as TL users read
one (``logits[:, -1]``, ``tokens_to_residual_directions``, the cache's decompositions), and the
numbers equal plain HF's."""

import pytest
import torch
from transformers import AutoModelForCausalLM

from reward_lens_tl.errors import NotForRewardModelsError
from reward_lens_tl.judges import HookedJudge
from reward_lens_tl.zoo import zoo_path
from reward_lens_tl.zoo.judge import JUDGE_POINTWISE_TEMPLATE

PROMPT, RESPONSE = "how bake bread", "great question rain snow"


@pytest.fixture(scope="module")
def judge():
    return HookedJudge.from_pretrained(zoo_path("judge"), template=JUDGE_POINTWISE_TEMPLATE)


@pytest.fixture(scope="module")
def hf():
    return AutoModelForCausalLM.from_pretrained(zoo_path("judge"), trust_remote_code=False).eval()


def test_tokens_and_the_last_position_logit_difference(judge, hf):
    ids = judge.to_tokens((PROMPT, RESPONSE))
    assert torch.equal(ids, judge.item_ids(PROMPT, RESPONSE))
    assert torch.equal(judge.to_tokens(judge.render(PROMPT, RESPONSE)), ids)
    assert judge.to_str_tokens((PROMPT, RESPONSE))[-2:] == ["judge", "relevant"]
    yes, no = judge.verdict_ids
    with torch.no_grad():
        logits = hf(ids).logits[0, -1]
        ours = judge(ids)[:, -1, 0]  # TL: logits[:, -1] of the verdict head
    torch.testing.assert_close(ours[0], logits[yes] - logits[no], atol=1e-4, rtol=0)
    batch = judge.to_tokens([(PROMPT, RESPONSE), (PROMPT, "soup")])  # left padded: -1 reads both
    with torch.no_grad():
        torch.testing.assert_close(judge(batch)[:, -1, 0], judge.rewards(batch), atol=1e-5, rtol=0)


def test_the_verdict_direction_and_the_cache(judge, hf):
    yes, no = judge.verdict_ids
    direction = judge.tokens_to_residual_directions(0)
    W = hf.lm_head.weight.detach()
    want = (W[yes] - W[no]) * hf.model.norm.weight.detach()  # the final norm folded in
    torch.testing.assert_close(direction, want, atol=1e-5, rtol=1e-5)
    with pytest.raises(NotForRewardModelsError, match=r"W_U\[:, 0\]"):
        judge.tokens_to_residual_directions("yes")
    ids = judge.to_tokens((PROMPT, RESPONSE))
    verdict, cache = judge.run_with_cache(ids, return_type="reward")
    stack = cache.accumulated_resid(pos_slice=-1)
    lens = cache.residual_stack_to_reward(stack)
    torch.testing.assert_close(lens[-1] + cache.reward_bias(), verdict, atol=1e-4, rtol=0)
