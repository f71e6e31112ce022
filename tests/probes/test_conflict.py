"""`reward_lens_tl.probes.conflict`: reward-term conflict on a multi-objective model and on
scalar terms given as directions."""

import numpy as np
import pytest
import torch

from reward_lens_tl.probes import ProbeError
from reward_lens_tl.probes.conflict import reward_term_conflict
from tests.figures import check_figure


def test_reward_term_conflict_multi_objective(zoo_multi, zoo_task):
    res = reward_term_conflict(zoo_multi, [e.input_ids for e in zoo_task.examples(24, 3)])
    assert res.terms == ("helpfulness", "harmlessness", "verbosity")
    assert res.completeness_error() < 1e-4
    torch.testing.assert_close(res.cosines.diagonal(), torch.ones(3), atol=1e-5, rtol=0)
    # which components carry each objective's own planted feature
    carried = {}
    for term, feature in (("harmlessness", "harmful"), ("helpfulness", "topic_match")):
        pairs = zoo_task.contrast_pairs(feature, 32, seed=1)
        diff = reward_term_conflict(zoo_multi, [p.edited.input_ids for p in pairs]) - (
            reward_term_conflict(zoo_multi, [p.base.input_ids for p in pairs])
        )
        carried[term] = diff
    harm = [c for c, _ in carried["harmlessness"].drivers("harmlessness", 2)]
    helpful = [c for c, _ in carried["helpfulness"].drivers("helpfulness", 2)]
    assert not set(harm) & set(helpful), (harm, helpful)
    # the harmlessness driver barely moves helpfulness on the same inputs
    d = carried["harmlessness"]
    j = d.components.index(harm[0])
    assert d.attribution[1, j].mean().abs() > 5 * d.attribution[0, j].mean().abs()
    assert len(res.top_k(3)) == 3
    fig = check_figure(res.plot(), static=res.plot(backend="matplotlib"),
                       x_labels=list(res.terms), diverging=True)  # fmt: skip
    np.testing.assert_allclose(fig.data[0].z, res.attribution.mean(2).T.numpy(), rtol=1e-6)
    assert list(fig.layout.yaxis.ticktext) == list(res.components)


def test_reward_term_conflict_scalar_terms(zoo_scalar, zoo_task):
    from reward_lens_tl.sae.concepts import concept_vectors

    site = "blocks.2.hook_resid_post"
    dirs = {
        f: concept_vectors(zoo_scalar, zoo_task.contrast_pairs(f, 24, seed=2), sites=[site])[site]
        for f in ("harmful", "topic_match")
    }
    res = reward_term_conflict(
        zoo_scalar, [e.input_ids for e in zoo_task.examples(12, 0)], directions=dirs
    )
    assert res.completeness_error() < 1e-4 and res.terms == ("harmful", "topic_match")
    with pytest.raises(ProbeError, match="directions"):
        reward_term_conflict(zoo_scalar, [zoo_task.examples(1, 0)[0].input_ids])
