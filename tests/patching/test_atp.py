"""Attribution patching: exactness of AtP's linearisation and of the AtP* QK fix, AtP* on
saturated attention, GradDrop magnitudes."""

import pytest
import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.patching import (
    activation_patching,
    agreement,
    atp_agreement,
    atp_star,
    attribution_patching,
)
from reward_lens_tl.testing import tiny_reward_model
from tests.patching.conftest import pair


@pytest.mark.parametrize("site", ["resid_pre", "z", "mlp_out"])
def test_atp_is_the_exact_linearisation(model, site):
    """AtP = d metric(a + εΔ)/dε at 0, computed independently (autograd through a hook that
    adds εΔ), and close to a central finite difference."""
    clean, corrupted = pair(seed=7)
    est = attribution_patching(
        model, clean, corrupted, site=site, alignment="exact", by_position=True, metric=lambda r: r
    )
    _, clean_cache = model.run_with_cache(clean[None])
    _, corr_cache = model.run_with_cache(corrupted[None])
    effects = est.effects().reshape(est.shape)
    for layer, j in [(0, 3), (1, 8), (1, 0)]:
        name = f"blocks.{layer}.{'attn.hook_z' if site == 'z' else 'hook_' + site}"
        delta = clean_cache[name][0, j] - corr_cache[name][0, j]

        def run(eps, name=name, j=j, delta=delta):
            def add(act, hook):
                act = act.clone()
                act[0, j] = act[0, j] + eps * delta
                return act

            return model.run_with_hooks(
                corrupted[None], return_type="reward", fwd_hooks=[(name, add)]
            )[0]

        eps = torch.zeros((), requires_grad=True)
        (derivative,) = torch.autograd.grad(run(eps), eps)
        want = effects[layer, j].sum()  # heads: the whole position = sum over heads
        assert abs(float(derivative) - float(want)) <= 1e-4 * max(1, abs(float(want)))
        with torch.no_grad():
            fd = (run(torch.tensor(1e-2)) - run(torch.tensor(-1e-2))) / 2e-2
        assert abs(float(fd) - float(want)) <= 2e-3 + 2e-2 * abs(float(want))


def test_qk_fix_is_exact_for_queries_and_keys(model):
    """For q/k patches the QK-fixed estimate is Σ ∂m/∂A (A' − A) with A' the exactly patched
    pattern (checked by brute force); only the step from the pattern on is linear."""
    clean, corrupted = pair(seed=8)
    layer = 1
    pattern_name = f"blocks.{layer}.attn.hook_pattern"
    store = {}
    with (
        torch.enable_grad(),
        model.hooks(fwd_hooks=[(pattern_name, lambda a, hook: store.__setitem__("A", a))]),
    ):
        r = model(corrupted[None], return_type="reward")
        (g_pattern,) = torch.autograd.grad(r.sum(), store["A"])
    base = store["A"].detach()
    _, clean_cache = model.run_with_cache(clean[None])
    for site in ("q", "k"):
        est = attribution_patching(
            model,
            clean,
            corrupted,
            site=site,
            alignment="exact",
            by_position=True,
            layers=[layer],
            qk_fix=True,
            metric=lambda r: r,
        )
        name = f"blocks.{layer}.attn.hook_{site}"
        for j, h in [(0, 0), (4, 1), (8, 0)]:

            def write(act, hook, j=j, h=h, name=name):
                act = act.clone()
                act[0, j, h] = clean_cache[name][0, j, h]
                return act

            with (
                torch.no_grad(),
                model.hooks(
                    fwd_hooks=[(name, write), (pattern_name, lambda a, hook: store.update(A=a))]
                ),
            ):
                model(corrupted[None], return_type="reward")
            exact = float(((store["A"] - base) * g_pattern).sum())
            assert abs(float(est.effects().reshape(est.shape)[0, j, h]) - exact) <= 1e-5


def test_atp_star_beats_atp_on_saturated_attention():
    """Sharpened queries saturate every softmax: AtP's gradient through it vanishes and it
    misranks key patches; the QK fix recomputes the patterns and recovers the ranking."""
    model = HookedRewardModel.from_pretrained(tiny_reward_model("gpt2"))
    with torch.no_grad():
        for block in model.blocks:
            block.attn.W_Q.mul_(10)
    clean, corrupted = pair(length=12, seed=5)
    report = atp_agreement(
        model,
        clean,
        corrupted,
        site="k",
        by_position=True,
        alignment="exact",
        k=5,
        methods=("atp", "atp+qk"),
        metric=lambda r: r,
    )
    atp, fixed = report.rows
    assert fixed.spearman > atp.spearman + 0.05
    assert fixed.top_k_recall >= atp.top_k_recall
    assert fixed.spearman_abs > atp.spearman_abs


def test_graddrop_magnitudes(llama):
    clean, corrupted = pair(seed=6)
    plain = attribution_patching(llama, clean, corrupted, site="z", alignment="exact")
    star = atp_star(llama, clean, corrupted, site="z", alignment="exact")
    assert star.method == "atp*" and bool((star.magnitude >= 0).all())
    # heads of the last layer: every dropped layer but their own leaves their gradient alone,
    # their own zeroes it, so the GradDrop score is |AtP|
    assert torch.allclose(
        star.magnitude[-1], plain.effects().reshape(plain.shape)[-1].abs(), atol=1e-6
    )
    row = agreement(
        star, activation_patching(llama, clean, corrupted, site="z", alignment="exact"), k=3
    )
    assert row.n_cells == 8 and -1 <= row.spearman <= 1
