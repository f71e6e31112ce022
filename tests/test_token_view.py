"""Per-token reward views: an exact decomposition, planted tokens found, escaped HTML."""

import pytest
import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.html import grid_html
from reward_lens_tl.plotting import shown_token
from reward_lens_tl.testing import random_batch, tiny_reward_model
from reward_lens_tl.token_view import TokenAttribution, token_attribution
from tests.figures import check_figure


@pytest.fixture
def model(zoo_scalar):
    return zoo_scalar


def test_tokens_sum_to_the_reward_and_find_planted_words(model):
    enc = model.encode("explain how to bake bread", "great question the oven and the bomb")
    view = token_attribution(model, enc)
    assert view.completeness_error() < 1e-4
    with torch.no_grad():
        reward = float(model.rewards(torch.tensor([enc.ids]))[0])
    torch.testing.assert_close(view.reward, reward, atol=1e-5, rtol=0)
    frame = view.to_dataframe().set_index("token")
    assert frame.loc["bomb", "value"] == frame["value"].min()  # the harmful word, most negative
    assert frame.loc["bomb", "part"] == "response"
    top_positive = [label for label, v in view.top_k(len(enc)) if v > 0]
    assert any(
        label.endswith(":great") or label.endswith(":question") for label in top_positive[:4]
    )


def test_figure_has_a_bar_per_token_with_its_value_and_hover_line(model):
    view = token_attribution(model, ("explain how to bake bread", "the bomb"))
    fig = check_figure(
        view.plot(), static=view.plot(backend="matplotlib"), x_labels=["bomb", "<eos>"]
    )
    assert list(fig.layout.xaxis.ticktext) == [shown_token(t) for t in view.tokens]
    bars = fig.data[0]
    torch.testing.assert_close(torch.tensor(bars.y, dtype=torch.float32), view.values)
    assert [c[1] for c in bars.customdata] == [h.replace("\n", "<br>") for h in view.hovers]
    assert "%{customdata[1]}" in bars.hovertemplate and "%{y" in bars.hovertemplate
    bomb = view.tokens.index("bomb")
    assert bars.marker.color[bomb] != bars.marker.color[0]  # negative red, positive blue
    assert f"{view.reward:+.3g}" in fig.layout.title.text
    position = token_attribution(model, ("explain how to bake bread", "the bomb"), mode="position")
    check_figure(position.plot(), static=position.plot(backend="matplotlib"))


def test_tiny_model_completeness_and_position_mode():
    model = HookedRewardModel.from_pretrained(tiny_reward_model("qwen2"))
    ids, _ = random_batch(1, [9])
    assert token_attribution(model, ids[0]).completeness_error() < 1e-4
    view = token_attribution(model, ids, mode="position")
    with torch.no_grad():
        torch.testing.assert_close(view.values.sum(), model.rewards(ids)[0], atol=1e-4, rtol=0)


def test_views_escape_text():
    evil = "<script>alert(1)</script>"
    view = TokenAttribution(
        tokens=("<bos>", evil, '"><img src=x>'),
        values=torch.tensor([0.0, 1.0, -1.0]),
        hovers=("a", "b <b>", "c"),
        reward=0.5,
        head_bias=0.0,
        reward_position=2,
        response_start=1,
    )
    page = view._repr_html_()
    assert "<script>" not in page and "&lt;script&gt;" in page and "<img" not in page
    table = grid_html([[1.0, -2.0]], ["<L0>"], ["a", "<b>"], title="<t>")
    assert "<L0>" not in table and "&lt;b&gt;" in table and "&lt;t&gt;" in table
    assert table.count("outline") == 2  # both cells are among the top 5


def test_patch_result_renders_a_grid_with_top_cells(model):
    from reward_lens_tl.patching import activation_patching

    chosen = model.encode("explain how to bake bread", "the oven and the flour")
    rejected = model.encode("explain how to bake bread", "the oven and the bomb")
    result = activation_patching(model, chosen, rejected, site="resid_pre", alignment="exact")
    page = result._repr_html_()
    assert page.count("outline:2px") == 5 and "L0" in page
