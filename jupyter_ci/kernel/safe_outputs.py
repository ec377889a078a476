"""Make a step's outputs inert before the `%%ask` cell shows them again (no labextension).

Without the labextension (Notebook 6, JupyterLab without it, VS Code, nbconvert) each step's
outputs are shown again in the `%%ask` cell, which the user ran: its outputs are trusted,
and a step's `<img onerror>`, `<script>`, JavaScript or inline SVG would run there on
Jupyter's origin. So each display is cut to data: HTML sanitised (tables and text keep their
look), Markdown rendered safe, SVG put in an `<img>` (where it cannot run script), and
anything that is code (JavaScript, widgets, unknown types) left out with a note. The step's
own cell, when there is one, keeps its real outputs (the labextension shows them untrusted).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jupyter_ci.kernel.safe_markdown import is_local_url, to_html

if TYPE_CHECKING:
    from jupyter_ci.wire.nbformat import MimeBundle

#: MIME types that are data for a renderer, never code: kept as they are.
_DATA = re.compile(
    r"text/plain|text/latex|image/(png|jpeg|gif|webp|bmp)|application/(json|pdf|geo\+json)"
    r"|application/vnd\.(dataresource|plotly\.v1|vega\.v\d+|vegalite\.v\d+)\+json")
_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "caption", "code", "col", "colgroup", "dd", "del",
    "details", "div", "dl", "dt", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img",
    "ins", "kbd", "li", "ol", "p", "pre", "q", "s", "samp", "small", "span", "strong", "sub",
    "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u", "ul",
}
_ANY = {"class", "title", "align", "valign", "colspan", "rowspan", "border", "start"}


def _url_filter(tag: str, name: str, value: str) -> str | None:
    """Keep images that are local files or image data, links to the web or local files."""
    if tag == "img" and name == "src":
        return value if is_local_url(value) or value.startswith("data:image/") else None
    if name == "href" and value.lower().lstrip().startswith("data:"):
        return None
    return value


def clean_html(html: str) -> str:
    """Sanitise HTML output: no script, event handler, style or remote load."""
    import nh3

    attributes = {tag: set(_ANY) for tag in _TAGS}
    attributes["a"] |= {"href"}
    attributes["img"] |= {"src", "alt", "width", "height"}
    return nh3.clean(html, tags=_TAGS, attributes=attributes, attribute_filter=_url_filter,
                     url_schemes={"http", "https", "mailto", "data"}, link_rel="noopener")


def _svg_image(svg: str) -> str:
    """Put an SVG document in an `<img>`: shown as a picture, never as live markup."""
    data = base64.b64encode(svg.encode()).decode()
    return f'<img src="data:image/svg+xml;base64,{data}" alt="SVG image">'


def _text(value: Any) -> str:
    """Join a MIME value that nbformat may hold as a list of lines."""
    return "".join(value) if isinstance(value, list) else str(value)


def inert_bundle(data: Mapping[str, object]) -> MimeBundle:
    """Return a display's MIME bundle with nothing in it that runs as code."""
    kept = {mime: value for mime, value in data.items() if _DATA.fullmatch(mime)}
    if "text/html" in data:
        kept["text/html"] = clean_html(_text(data["text/html"]))
    elif "text/markdown" in data:
        kept["text/html"] = to_html(_text(data["text/markdown"]))
    elif "image/svg+xml" in data:
        kept["text/html"] = _svg_image(_text(data["image/svg+xml"]))
    left_out = sorted(set(data) - set(kept) - {"text/markdown", "image/svg+xml"})
    if left_out and "text/plain" not in kept and "text/html" not in kept:
        kept["text/plain"] = f"(not shown here: {', '.join(left_out)})"
    return kept

