"""Interactive views of a reward model (CircuitsVis), offline and with the script once per page.

The views TransformerLens users reach for, drawn by the `circuitsvis` package:

- `attention_view`: the attention patterns of one layer for one conversation
  (`circuitsvis.attention.attention_heads`), pads left out and the token the reward is read at
  marked `⟦…⟧`;
- `tokens_view`: tokens coloured by a signed value, the value on hover
  (`circuitsvis.tokens.colored_tokens`); `TokenAttribution` (`reward_lens_tl.token_view`)
  renders itself with it (`attribution_view`).

Each is a `View`: Jupyter shows it (`_repr_html_`), and `View.html(include_script=...)` gives
its HTML for a page of your own. Unlike circuitsvis's own `_repr_html_`, a view never touches
the network (circuitsvis 1.43 first probes `http://google.com` for up to a second, then loads
its script from a CDN when online): its script is the local copy that ships with circuitsvis,
written inline.

That script is 1.3 MB. A page with several views includes it once: `script_tag()` anywhere on
the page (it defines the global `CircuitsVis`) and each view's `html(include_script=False)`,
which is a `<div>` and the one-line call that renders into it. `html_page` does this for you.

Examples:
    >>> from reward_lens_tl import HookedRewardModel
    >>> from reward_lens_tl.zoo import zoo_path
    >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    >>> conversation = model.encode("explain how to bake bread", "the bomb")
    >>> view = attention_view(model, conversation, layer=1)
    >>> view.element, view.props["tokens"][-1], len(view.props["attention"])
    ('AttentionHeads', '⟦<eos>⟧', 4)
    >>> page = html_page(view, tokens_view(["a", "b"], [1.0, -1.0]))
    >>> page.count(script_tag()), "unpkg" in page
    (1, False)
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from .errors import InvalidArgumentError
from .html import STYLE, clean_text, escape
from .inputs import EncodedConversation
from .padding import reading_position_known

if TYPE_CHECKING:
    from .model import HookedRewardModel
    from .token_view import TokenAttribution

#: The colours of `tokens_view`: blue for values that raise the reward, red for those that
#: lower it (the palette of `reward_lens_tl.plotting`).
POSITIVE_COLOR, NEGATIVE_COLOR = "#4472c4", "#c00000"

#: How the token the reward is read at is marked in a view's token strings.
READING_MARK = "⟦{}⟧"

_WORD_JOINER = "\u2060"


# -- the script, once per page ---------------------------------------------------------------------
@functools.cache
def _library() -> str:
    """The script bundled with circuitsvis (`dist/cdn/iife.js`), safe inside `<script>`."""
    import circuitsvis

    path = Path(circuitsvis.__file__).parent / "dist" / "cdn" / "iife.js"
    code = path.read_text(encoding="utf-8")
    code = re.sub(r"//# sourceMappingURL=\S*", "", code)  # no request for a missing map
    # Inside JavaScript strings `\x3c` is `<` and `\/` is `/`: the same program, but no
    # `</script` can end the element early, and the page names no URL (the script's own strings
    # hold XML namespaces and error-page links, which it never fetches).
    code = re.sub(r"<(/?script)", r"\\x3c\1", code, flags=re.IGNORECASE)
    return re.sub(r"(https?:)//", r"\1\\/\\/", code)


def script_tag() -> str:
    """The inline `<script>` that defines `CircuitsVis`: once per page, before or after the views.

    Each view's `html(include_script=False)` renders once the page has loaded (its call is a
    module script, run after every classic script of the page), so this tag may sit anywhere
    on the page.

    Returns:
        The tag (about 1.3 MB; no external source).

    Examples:
        >>> tag = script_tag()
        >>> tag.startswith('<script type="text/javascript">'), "src=" in tag[:40]
        (True, False)
    """
    return f'<script type="text/javascript">{_library()}</script>'


def _props_json(props: Mapping[str, Any]) -> str:
    r"""The props as circuitsvis's `convert_props` writes them, made safe inside `<script>`.

    `convert_props` turns tensors and arrays to lists and drops `None`; `<`, `>` and `&` only
    occur in JSON strings, where `\u003c` is the same character.
    """
    from circuitsvis.utils.convert_props import convert_props

    text = convert_props(dict(props))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@dataclass(frozen=True, eq=False)  # props hold tensors: compared by identity
class View:
    """One circuitsvis element with its props, rendered offline.

    Built by `attention_view`, `tokens_view` and `attribution_view`.

    Attributes:
        element: The circuitsvis (React) element: `"AttentionHeads"`, `"ColoredTokens"`, ...
        props: Its props, as circuitsvis's Python functions pass them (camelCase names;
            tensors are turned into lists when rendered).
        header: HTML shown above the element (already escaped).
        footer: HTML shown below it (already escaped).

    Examples:
        >>> view = View("ColoredTokens", {"tokens": ["a", "b"], "values": [1.0, -1.0]})
        >>> html = view.html(include_script=False)
        >>> "CircuitsVis.ColoredTokens" in html, '<script type="text/javascript">' in html
        (True, False)
    """

    element: str
    props: Mapping[str, Any] = field(default_factory=dict)
    header: str = ""
    footer: str = ""

    def __post_init__(self) -> None:
        """Refuse an element name that is not a JavaScript identifier (it is written as code)."""
        if not re.fullmatch(r"[A-Za-z_]\w*", self.element):
            raise InvalidArgumentError(f"element={self.element!r}: not a circuitsvis element")

    def html(self, include_script: bool = True) -> str:
        """The view's HTML.

        Args:
            include_script: Include `script_tag()` (1.3 MB). Leave it out on a page that has it
                once already (see `html_page`).

        Returns:
            The HTML: the header, the script if asked, a `<div>` with the call that renders into
            it, the footer.

        Examples:
            >>> view = tokens_view(["a"], [1.0])
            >>> len(view.html()) > 1_000_000, len(view.html(include_script=False)) < 5_000
            (True, True)
        """
        # the same view gives the same page (reports are compared across runs)
        digest = hashlib.sha1(
            (self.element + _props_json(self.props) + self.header).encode()
        ).hexdigest()
        target = f"rl-view-{digest[:12]}"
        call = (
            f'if (window.CircuitsVis) CircuitsVis.render("{target}", '
            f"CircuitsVis.{self.element}, {_props_json(self.props)});"
            f' else document.getElementById("{target}").textContent = "This view needs the '
            'CircuitsVis script once on the page (reward_lens_tl.views.script_tag()).";'
        )
        parts = [
            f'<div class="rl-view" style="{STYLE}">',
            self.header,
            script_tag() if include_script else "",
            f'<div id="{target}" style="margin: 8px 0;"></div>',
            f'<script type="module">{call}</script>',
            self.footer,
            "</div>",
        ]
        return "".join(parts)

    def _repr_html_(self) -> str:
        """Jupyter's view: the HTML with its script, never probing the network."""
        return self.html(include_script=True)

    def __html__(self) -> str:
        """The HTML for tools that look for `__html__` (as `_repr_html_`)."""
        return self.html(include_script=True)


def html_page(*parts: View | str, title: str = "reward-lens views") -> str:
    """A standalone HTML page of `parts` (views or HTML) with the script once.

    Args:
        *parts: `View`s (rendered without their script) and HTML strings, in order.
        title: The page's title.

    Returns:
        The page's HTML; it opens offline.

    Examples:
        >>> page = html_page(tokens_view(["a"], [1.0]), "<p>and</p>", tokens_view(["b"], [2.0]))
        >>> page.count("CircuitsVis.render("), page.count('<script type="text/javascript">')
        (2, 1)
    """
    body = "\n".join(p.html(include_script=False) if isinstance(p, View) else p for p in parts)
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{escape(title)}</title>{script_tag()}</head><body>{body}</body></html>"
    )


# -- coloured tokens -------------------------------------------------------------------------------
def _html_text(token: str) -> str:
    """`token` for circuitsvis's token views, which write token text as HTML.

    An (invisible) word joiner after each `<` and `&` keeps them text (no tag, no entity), shown
    as typed.
    """
    text = clean_text(token)
    return text.replace("<", "<" + _WORD_JOINER).replace("&", "&" + _WORD_JOINER)


def _spaced(tokens: Sequence[str]) -> list[str]:
    """Tokens as they read, so words stay apart.

    Byte-level markers become spaces (`Ġ`, `▁`) and line breaks (`Ċ`); when no token holds a
    space (a word-level tokenizer), each gets one after it.
    """
    shown = [t.replace("Ġ", " ").replace("▁", " ").replace("Ċ", "\n") for t in tokens]
    if not any(ch.isspace() for t in shown for ch in t):
        shown = [t + " " for t in shown]
    return shown


def tokens_view(
    tokens: Sequence[str],
    values: Sequence[float] | Tensor,
    *,
    scale: float | None = None,
    mark: int | None = None,
    title: str | None = None,
    caption: str | None = None,
) -> View:
    """Tokens coloured by a signed value, the value on hover (`circuitsvis.tokens.colored_tokens`).

    Blue for positive values, red for negative ones, on a scale symmetric around 0. Tokens
    read as text: byte-level markers become spaces, and word-level tokens (no token holds a
    space) get one after each.

    Args:
        tokens: The tokens' text.
        values: One value per token.
        scale: The |value| of full colour (default: the largest |value|).
        mark: A position to mark `⟦…⟧` (e.g. the token the reward is read at).
        title: A title above the tokens.
        caption: A line below them.

    Returns:
        The view.

    Raises:
        InvalidArgumentError: Not one value per token.

    Examples:
        >>> view = tokens_view(["the", "bomb"], [0.5, -2.0], mark=1)
        >>> view.props["tokens"], view.props["minValue"], view.props["maxValue"]
        (['the ', '⟦bomb⟧ '], -2.0, 2.0)
        >>> tokens_view(["Ġthe", "Ġbo", "mb"], [0.0, 1.0, 1.0]).props["tokens"]
        [' the', ' bo', 'mb']
    """
    values = torch.as_tensor(values, dtype=torch.float32).detach().cpu().reshape(-1)
    if len(tokens) != len(values):
        raise InvalidArgumentError(f"{len(tokens)} tokens but {len(values)} values")
    if scale is None:
        finite = values[values.isfinite()]
        scale = float(finite.abs().max()) if len(finite) else 0.0
    scale = scale if scale > 0 else 1.0  # all zero: white tokens, not a division by 0
    spaced = _spaced(tokens)
    shown = [
        READING_MARK.format(t.rstrip(" ")) + t[len(t.rstrip(" ")) :] if i == mark else t
        for i, t in enumerate(spaced)
    ]
    props = {
        "tokens": [_html_text(t) for t in shown],
        "values": values,
        "minValue": -scale,
        "maxValue": scale,
        "negativeColor": NEGATIVE_COLOR,
        "positiveColor": POSITIVE_COLOR,
    }
    header = f"<div><strong>{escape(title)}</strong></div>" if title else ""
    legend = (
        '<div style="font-size:11px;color:#555">blue raises, red lowers the value (full colour '
        f"at ±{scale:.3g}); hover a token for its value"
        + ("; ⟦…⟧ marks the token the reward is read at" if mark is not None else "")
        + "</div>"
    )
    foot = f'<div style="color:#555;font-size:11px">{escape(caption)}</div>' if caption else ""
    return View("ColoredTokens", props, header, legend + foot)


def attribution_view(result: TokenAttribution, max_rows: int = 0) -> View:
    """A `TokenAttribution` as coloured tokens, with its per-token components in a table below.

    The tokens are coloured by their value (blue raises the reward, red lowers it; the scale
    is symmetric around 0), the value on hover; the token the reward is read at is marked
    `⟦…⟧`. circuitsvis has no view for each token's top components, so they follow as a table.

    Args:
        result: The per-token view (`token_attribution`).
        max_rows: List at most this many tokens in the table, those of the largest |value|
            (0: every token).

    Returns:
        The view.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.token_view import token_attribution
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> result = token_attribution(model, ("explain how to bake bread", "the bomb"))
        >>> view = attribution_view(result, max_rows=3)
        >>> view.props["tokens"][result.reward_position], view.footer.count("<tr>")
        ('⟦<\u2060eos>⟧ ', 4)
    """
    attribution = result.mode == "attribution"
    caption = (
        "direct contribution of each token (heads split by source token; the reward token also "
        "holds its embedding, MLPs and biases)"
        if attribution
        else "change of the reward read at each position from the previous one"
    )
    view = tokens_view(
        result.tokens,
        result.values,
        mark=result.reward_position,
        title=f"{result.title}: reward {result.reward:+.4f}",
        caption=caption,
    )
    values = result.values.tolist()
    order = list(range(len(values)))
    if max_rows > 0:
        order = sorted(sorted(order, key=lambda i: -abs(values[i]))[:max_rows])
    rows = "".join(
        f"<tr><td>{i}</td><td>{escape(result.tokens[i])}</td><td>{values[i]:+.4f}</td>"
        f"<td>{escape(result.hovers[i]).replace(chr(10), '<br>')}</td></tr>"
        for i in order
    )
    table = (
        '<details style="font-size:12px"><summary>the components behind each token</summary>'
        '<table style="border-collapse:collapse"><tr><th>pos</th><th>token</th>'
        f"<th>{'value' if attribution else 'Δ reward'}</th><th>components</th></tr>"
        f"{rows}</table></details>"
    )
    return View(view.element, view.props, view.header, view.footer + table)


# -- attention -------------------------------------------------------------------------------------
def attention_view(
    model: HookedRewardModel,
    example: EncodedConversation | Tensor | tuple[str, str],
    layer: int,
    heads: int | Sequence[int] | None = None,
    *,
    row: int | None = None,
    attention_mask: Tensor | None = None,
) -> View:
    """The attention patterns of one layer for one conversation (`circuitsvis` `attention_heads`).

    The patterns are `run_with_cache`'s `blocks.{layer}.attn.hook_pattern` for the example,
    `[head, query, key]`; pads are left out (rows and columns) and the token the reward is
    read at (`model.pool_positions`) is marked `⟦…⟧`. Its row is what the reward position
    reads.

    Args:
        model: The reward model.
        example: A `model.encode(prompt, response)` result, a `(prompt, response)` pair, or token
            ids `[pos]` or `[batch, pos]` (a batch with `row=`).
        layer: The layer (negative counts from the last).
        heads: A head or heads to show (default: every head).
        row: The row of a batch of ids to show.
        attention_mask: The batch's attention mask (default: inferred from the pad id).

    Returns:
        The view; `props["attention"]` holds the patterns shown, `[head, query, key]`.

    Raises:
        InvalidArgumentError: A layer or head out of range, or a batch without `row`.

    Examples:
        >>> from reward_lens_tl import HookedRewardModel
        >>> from reward_lens_tl.zoo import zoo_path
        >>> model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
        >>> view = attention_view(model, ("explain how to bake bread", "the bomb"), 0, heads=[1])
        >>> view.props["attentionHeadNames"], tuple(view.props["attention"].shape)
        (['L0H1'], (1, 13, 13))
    """
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    if isinstance(layer, bool) or not isinstance(layer, int) or not -n_layers <= layer < n_layers:
        raise InvalidArgumentError(f"layer={layer!r}: the model has layers 0..{n_layers - 1}")
    layer %= n_layers
    chosen = list(range(n_heads)) if heads is None else [heads] if isinstance(heads, int) else heads
    chosen = [int(h) for h in chosen]
    if not chosen or any(not 0 <= h < n_heads for h in chosen):
        raise InvalidArgumentError(f"heads={heads!r}: layer {layer} has heads 0..{n_heads - 1}")
    ids, mask = _one_row(model, example, row, attention_mask)
    # every layer up to this one on TransformerLens's own attention path (pattern hooks turn the
    # fast path off), so the patterns are bit for bit those of a plain `run_with_cache`
    names = [f"blocks.{i}.attn.hook_pattern" for i in range(layer + 1)]
    name = names[-1]
    with torch.no_grad(), reading_position_known():
        _, cache = model.run_with_cache(
            ids, return_type=None, attention_mask=mask, names_filter=names, stop_at_layer=layer + 1
        )
        reading = int(model.pool_positions(ids, mask)[0])
    pattern = cache[name][0, chosen].detach().float().cpu()  # [head, query, key]
    keep = torch.ones(ids.shape[1], dtype=torch.bool) if mask is None else mask[0].cpu() != 0
    pattern = pattern[:, keep][:, :, keep]
    reading = int(keep[:reading].sum())
    tokens = _str_tokens(model, ids[0, keep.to(ids.device)])
    shown = [READING_MARK.format(t) if i == reading else t for i, t in enumerate(tokens)]
    props = {
        "attention": pattern,
        "tokens": shown,
        "attentionHeadNames": [f"L{layer}H{h}" for h in chosen],
        "maxValue": 1.0,
        "minValue": 0.0,
        "maskUpperTri": model.cfg.attention_dir == "causal",
    }
    pads = int((~keep).sum())
    header = (
        f"<div><strong>attention, layer {layer}</strong></div>"
        '<div style="font-size:11px;color:#555">'
        f"⟦{escape(tokens[reading])}⟧ (position {reading}) is the token the reward is read at; "
        "its row is what the reward position attends to"
        + (f"; {pads} pad position{'s' * (pads != 1)} left out" if pads else "")
        + "</div>"
    )
    return View("AttentionHeads", props, header)


def _one_row(model, example, row, attention_mask) -> tuple[Tensor, Tensor | None]:
    """The example's ids `[1, pos]` (on the model's device) and its mask (`None`: no pads)."""
    if isinstance(example, tuple) and len(example) == 2 and isinstance(example[1], str):
        example = model.encode(*example)
    if isinstance(example, EncodedConversation):
        ids = torch.tensor([example.ids], device=model.cfg.device)
    else:
        ids = model.check_tokens(torch.as_tensor(example, device=model.cfg.device))
    if attention_mask is None:
        mask = model.infer_attention_mask(ids)
    else:
        mask = torch.as_tensor(attention_mask, device=ids.device)
        mask = mask[None] if mask.ndim == 1 else mask
        model.check_tokens(ids, mask)
    n = ids.shape[0]
    if row is None and n != 1:
        raise InvalidArgumentError(
            f"attention_view shows one example; got a batch of {n}: pass row= (which one)"
        )
    index = 0 if row is None else row
    if isinstance(index, bool) or not isinstance(index, int) or not -n <= index < n:
        raise InvalidArgumentError(f"row={row!r}: the batch has rows 0..{n - 1}")
    index %= n
    ids = ids[index : index + 1]
    if mask is not None:
        mask = mask[index : index + 1]
        mask = None if bool((mask != 0).all()) else mask
    return ids, mask


def _str_tokens(model, ids: Tensor) -> list[str]:
    """Each token's text (`model.to_str_tokens`), or its id without a tokenizer."""
    if model.tokenizer is None:
        return [str(int(i)) for i in ids]
    return list(model.to_str_tokens(ids))


__all__ = [
    "NEGATIVE_COLOR",
    "POSITIVE_COLOR",
    "READING_MARK",
    "View",
    "attention_view",
    "attribution_view",
    "html_page",
    "script_tag",
    "tokens_view",
]
