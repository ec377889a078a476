"""Show model-written Markdown so that no HTML in it is ever live.

JupyterLab renders the Markdown and HTML outputs of a cell run in the session as trusted:
`<img onerror>` in an answer would run JavaScript on Jupyter's origin, which can reach the
REST API and terminals. So the kernel renders the Markdown itself, with raw HTML escaped
(mistune), sanitises the result (nh3: no scripts, no event handlers, no `javascript:`
URLs, no remote images that could carry data out in their URL), and displays that HTML with
the Markdown source as text/plain. Every frontend then shows the same safe HTML, and a
headless notebook (nbconvert, VS Code) stays readable.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from html import escape
from typing import Any

#: Tags a model's Markdown renders to (mistune with the table and strikethrough plugins).
_TAGS = frozenset({
    "a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr",
    "img", "li", "ol", "p", "pre", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul",
})
_FOLDING = _TAGS | {"details", "summary"}
_ATTRIBUTES = {"a": {"href", "title"}, "img": {"src", "alt", "title"},
               "code": {"class"}, "ol": {"start"}, "td": {"align"}, "th": {"align"}}


# What a browser's URL parser ignores: C0 controls and spaces around a URL, tabs and
# line breaks anywhere; it also reads a backslash as a slash (`/\\host` is `//host`).
_URL_IGNORED = re.compile(r"[\t\n\r]")
_C0_AND_SPACE = "".join(map(chr, range(0x21)))
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def is_local_url(value: str) -> bool:
    """Say whether a URL stays on the page's own origin: no scheme, no `//host`."""
    url = _URL_IGNORED.sub("", value).strip(_C0_AND_SPACE).replace("\\", "/")
    return not _SCHEME.match(url) and not url.startswith("//")


def _local_images_only(tag: str, name: str, value: str) -> str | None:
    """Keep an image only when it is a file beside the notebook: a remote URL is a beacon."""
    if tag == "img" and name == "src" and not is_local_url(value):
        return None
    return value


@functools.cache
def renderer() -> Callable[[str], Any]:
    """Build the Markdown renderer once (mistune and nh3 are imported on first use)."""
    import mistune

    return mistune.create_markdown(escape=True, plugins=["table", "strikethrough"])


def to_html(markdown: str) -> str:
    """Render Markdown to sanitised HTML in which no raw HTML of the source is live."""
    lines = markdown.split("\n")
    if len(lines) > 1 and all(_PLAIN_ITEM.fullmatch(line) for line in lines):
        items = [_item_html(line) for line in lines]
        if all(items):
            return f"<ul>\n{''.join(items)}</ul>\n"
    return _clean(str(renderer()(markdown)), _TAGS)


#: A list item that renders alike alone and in a list of such items (the %%ask cell's log,
#: rendered again as each line is added): one line that starts with a letter (no thematic
#: break, no nested list) and holds no link, reference definition or HTML.
_PLAIN_ITEM = re.compile(r"- [^\W\d_][^\n\r\[\]<>]*")


@functools.lru_cache(maxsize=512)
def _item_html(line: str) -> str:
    """Render one plain list item as its `<li>` element ("" if it does not render as one)."""
    html = _clean(str(renderer()(line)), _TAGS)
    head, tail = "<ul>\n<li>", "</li>\n</ul>\n"
    if not (html.startswith(head) and html.endswith(tail)) or "<li>" in html[len(head):]:
        return ""
    return html.removeprefix("<ul>\n").removesuffix("</ul>\n")


def _clean(html: str, tags: frozenset[str]) -> str:
    """Keep only `tags` and their safe attributes (nh3)."""
    import nh3

    return nh3.clean(html, tags=set(tags), attributes={k: set(v) for k, v in _ATTRIBUTES.items()},
                     attribute_filter=_local_images_only,
                     url_schemes={"http", "https", "mailto"})


def collapsed(summary: str, markdown: str) -> dict[str, str]:
    """Return a display bundle folded under a one-line summary (<details>), both made safe."""
    # The summary is plain text, escaped; the body is rendered as any Markdown here; the
    # whole is cleaned again with <details> and <summary> as the only extra tags.
    html = (f"<details><summary>{escape(summary)}</summary>"
            f"{renderer()(markdown)}</details>")
    return {"text/html": f'<div class="jp-ci-markdown">{_clean(html, _FOLDING)}</div>',
            "text/plain": f"{summary}\n\n{markdown}"}


def bundle(markdown: str) -> dict[str, str]:
    """Return the display bundle of model-written Markdown: safe HTML, source as plain text."""
    return {"text/html": f'<div class="jp-ci-markdown">{to_html(markdown)}</div>',
            "text/plain": markdown}
