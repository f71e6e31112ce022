"""CircuitsVis views (issue 35, item 2): the numbers they are given, the reward-reading token
marked, pads left out, no network (no CDN script, no probe), the script once per page, and a real
browser drawing them."""

from __future__ import annotations

import json
import re
import shutil

import pytest
import torch

from reward_lens_tl import pad_batch
from reward_lens_tl.token_view import TokenAttribution, token_attribution
from reward_lens_tl.views import (
    View,
    attention_view,
    attribution_view,
    html_page,
    script_tag,
    tokens_view,
)

PROMPT = "explain how to bake bread"
LIBRARY = '<script type="text/javascript">'


@pytest.fixture
def model(zoo_scalar):
    return zoo_scalar


def rendered_props(html: str, element: str) -> dict:
    """The props object of the `CircuitsVis.render` call of `element` in `html` (parsed JSON)."""
    found = re.findall(rf"CircuitsVis\.{element}, (\{{.*?\}})\);", html)
    assert len(found) == 1, found
    return json.loads(found[0])


def test_attention_props_are_the_cached_patterns(model):
    conversation = model.encode(PROMPT, "great question the bomb")
    ids = torch.tensor([conversation.ids])
    _, cache = model.run_with_cache(ids)
    for layer in range(model.cfg.n_layers):
        view = attention_view(model, conversation, layer)
        assert view.element == "AttentionHeads"
        assert torch.equal(view.props["attention"], cache["pattern", layer][0])
        html = view.html(include_script=False)
        assert (
            rendered_props(html, "AttentionHeads")["attention"]
            == cache["pattern", layer][0].tolist()
        )
    some = attention_view(model, ids[0], -1, heads=[2, 0])  # ids, a negative layer, two heads
    assert torch.equal(some.props["attention"], cache["pattern", 2][0, [2, 0]])
    assert some.props["attentionHeadNames"] == ["L2H2", "L2H0"]
    assert some.props["maskUpperTri"] is True


def test_the_reading_token_is_marked(model):
    conversation = model.encode(PROMPT, "the oven")
    reading = int(model.pool_positions(torch.tensor([conversation.ids]))[0])
    tokens = attention_view(model, conversation, 0).props["tokens"]
    assert tokens[reading] == "⟦<eos>⟧"
    assert [i for i, t in enumerate(tokens) if t.startswith("⟦")] == [reading]
    assert tokens[:reading] == model.to_str_tokens(torch.tensor(conversation.ids))[:reading]


def test_a_padded_batch_row_is_shown_without_its_pads(model):
    short = model.encode(PROMPT, "the bomb")
    long = model.encode(PROMPT, "the oven and the flour and the water")
    ids, mask = pad_batch([short, long], model.pad_token_id)
    assert bool((mask[0] == 0).any())  # the short row is padded
    _, cache = model.run_with_cache(ids)
    keep = mask[0].bool()
    for view in (
        attention_view(model, ids, 1, row=0),
        attention_view(model, ids, 1, row=0, attention_mask=mask),
    ):
        expected = cache["pattern", 1][0][:, keep][:, :, keep]
        assert torch.equal(view.props["attention"], expected)
        assert len(view.props["tokens"]) == len(short.ids) and "<pad>" not in view.props["tokens"]
        assert view.props["tokens"][-1] == "⟦<eos>⟧"
        assert f"{int((~keep).sum())} pad positions left out" in view.header
    alone = attention_view(model, short, 1)  # the same conversation unpadded: the same patterns
    torch.testing.assert_close(alone.props["attention"], view.props["attention"])
    unpadded_row = attention_view(model, ids, 1, row=1)
    assert torch.equal(unpadded_row.props["attention"], cache["pattern", 1][1])
    assert "left out" not in unpadded_row.header


def test_attention_view_refuses_what_it_cannot_show(model):
    from reward_lens_tl.errors import InvalidArgumentError

    ids, _ = pad_batch([model.encode(PROMPT, "a"), model.encode(PROMPT, "b c")], 0)
    with pytest.raises(InvalidArgumentError, match="row="):
        attention_view(model, ids, 0)
    with pytest.raises(InvalidArgumentError, match="layer=3"):
        attention_view(model, ids, 3, row=0)
    with pytest.raises(InvalidArgumentError, match="heads="):
        attention_view(model, ids, 0, heads=[4], row=0)


def test_token_attribution_props_are_its_values(model):
    result = token_attribution(model, (PROMPT, "great question the bomb"))
    view = attribution_view(result)
    assert view.element == "ColoredTokens"
    assert torch.equal(view.props["values"], result.values)
    scale = float(result.values.abs().max())
    assert view.props["minValue"] == -scale and view.props["maxValue"] == scale  # symmetric
    assert view.props["positiveColor"] == "#4472c4" and view.props["negativeColor"] == "#c00000"
    shown = rendered_props(result.to_html(include_script=False), "ColoredTokens")
    assert shown["values"] == result.values.tolist()
    plain = [t.replace("\u2060", "") for t in shown["tokens"]]  # word joiners keep `<` text
    # the zoo's word-level tokens hold no space: each is shown with one after it
    assert plain[result.reward_position] == "⟦<eos>⟧ "
    assert plain[: result.reward_position] == [
        t + " " for t in result.tokens[: result.reward_position]
    ]
    # blue raises the reward: the most positive value gets the positive colour's end of the scale
    assert max(shown["values"]) > 0 and shown["maxValue"] > 0
    html = result.to_html(include_script=False)
    assert "reward by token" in html.partition("CircuitsVis.render")[0]  # the title comes first
    assert html.count("<tr>") == len(result.tokens) + 1  # the components, one row per token
    assert result.to_html(max_rows=2, include_script=False).count("<tr>") == 3


def test_token_text_is_never_markup():
    evil = "<script>alert(1)</script>"
    result = TokenAttribution(
        tokens=("<bos>", evil, '"><img src=x onerror=alert(1)>', "&amp;"),
        values=torch.tensor([0.0, 1.0, -1.0, 0.5]),
        hovers=("a", "b <b>", "c", "d"),
        reward=0.5,
        head_bias=0.0,
        reward_position=3,
        response_start=1,
    )
    html = result._repr_html_()
    assert "alert(1)</script>" not in html and "<img" not in html and "<b>" not in html
    tokens = rendered_props(html, "ColoredTokens")["tokens"]
    # circuitsvis writes token text as HTML: no `<` or `&` may start a tag or an entity there
    assert all(re.search(r"[<&](?!\u2060)", t) is None for t in tokens)
    assert tokens[1].replace("\u2060", "") == evil


def test_no_network_script_and_no_probe(model, monkeypatch):
    import urllib.request

    import circuitsvis.utils.render as cv_render

    def offline(*args, **kwargs):
        raise AssertionError("the network was probed")

    monkeypatch.setattr(cv_render, "internet_on", offline)
    monkeypatch.setattr(urllib.request, "urlopen", offline)
    conversation = model.encode(PROMPT, "the bomb")
    pages = [
        attention_view(model, conversation, 0)._repr_html_(),
        token_attribution(model, conversation)._repr_html_(),
        tokens_view(["a"], [1.0]).__html__(),
    ]
    for html in pages:
        assert html.count(LIBRARY) == 1
        assert "unpkg" not in html and "http://" not in html and "https://" not in html
        tags = re.findall(r"<script\b[^>]*>", html, flags=re.IGNORECASE)
        assert tags and not [t for t in tags if "src" in t]
        assert html.count("</script>") == len(tags)  # no early end inside the inline script


def test_two_views_on_one_page_carry_the_script_once(model):
    conversation = model.encode(PROMPT, "the bomb")
    attention = attention_view(model, conversation, 1)
    tokens = token_attribution(model, conversation)
    page = html_page(attention, tokens.to_html(include_script=False))
    assert page.count(script_tag()) == 1 and page.count(LIBRARY) == 1
    assert page.count("CircuitsVis.render(") == 2
    by_hand = script_tag() + attention.html(False) + tokens.to_html(include_script=False)
    assert by_hand.count(LIBRARY) == 1
    ids = re.findall(r'<div id="(rl-view-[0-9a-f]+)"', page)
    assert len(set(ids)) == 2  # each view renders into its own element
    assert LIBRARY not in attention.html(include_script=False)
    assert len(View("Hello", {"name": "x"}).html(include_script=False)) < 2000


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.browser
def test_views_render_in_a_real_browser(model, tmp_path):
    playwright = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (see CONTRIBUTING)"
    )
    if CHROMIUM is None:
        pytest.skip("no chromium browser installed (apt-get install chromium; see CONTRIBUTING)")
    import matplotlib.image as mpimg

    conversation = model.encode(PROMPT, "great question the bomb")
    page = tmp_path / "views.html"
    page.write_text(
        html_page(
            attention_view(model, conversation, 1),
            token_attribution(model, conversation).to_html(include_script=False),
        ),
        encoding="utf-8",
    )
    shot = tmp_path / "views.png"
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        # tall enough for the whole page: a full-page screenshot resizes the viewport, and
        # chart.js redraws its canvases after a resize (they would be captured blank)
        tab = browser.new_page(viewport={"width": 1200, "height": 1800})
        problems, requests = [], []
        tab.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        tab.on("pageerror", lambda e: problems.append(str(e)))
        tab.on("request", lambda r: requests.append(r.url))
        tab.goto(page.resolve().as_uri())
        tab.wait_for_function(
            "Array.from(document.querySelectorAll('[id^=rl-view-]'))"
            ".every(d => d.childElementCount > 0)",
            timeout=10_000,
        )
        children = tab.evaluate(
            "Array.from(document.querySelectorAll('[id^=rl-view-]'))"
            ".map(d => d.querySelectorAll('*').length)"
        )
        canvases = tab.evaluate("document.querySelectorAll('canvas').length")
        zoomed = tab.evaluate(  # the share of coloured pixels of the zoomed pattern (the last)
            """(() => { const cs = document.querySelectorAll('canvas'), c = cs[cs.length - 1];
            const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let n = 0; for (let i = 3; i < px.length; i += 4) n += px[i] > 0;
            return n / (c.width * c.height); })()"""
        )
        text = tab.inner_text("body").replace("\u2060", "")
        tab.hover("text=bomb")  # the token's value on hover
        tab.wait_for_timeout(200)
        hovered = tab.inner_text("body")
        tab.screenshot(path=str(shot))
        browser.close()
    assert problems == []
    assert requests == [page.resolve().as_uri()]  # nothing fetched: no CDN, no probe
    assert len(children) == 2 and all(n > 5 for n in children)
    assert canvases >= 5 and zoomed > 0.3  # a small pattern per head and the zoomed one, drawn
    assert "⟦<eos>⟧" in text and "<bos>" in text  # special tokens shown as typed
    frame = token_attribution(model, conversation).to_dataframe().set_index("token")
    assert repr(float(frame.loc["bomb", "value"])) in hovered  # the exact value, as JS prints it
    pixels = mpimg.imread(shot)
    assert pixels.std() > 0.05
