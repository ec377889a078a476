"""Attack: a step's outputs, shown again in the `%%ask` cell, run script there (issue 17, 1).

Without the labextension (Notebook 6, JupyterLab without it, VS Code, nbconvert) the kernel
shows each step's outputs in the `%%ask` cell, which the user ran, so a frontend renders them
trusted. What hostile code displays must arrive there as data only. The browser side, with
the labextension, is tests/security/browser/test_untrusted_outputs.py.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from jupyter_ci.kernel.safe_markdown import is_local_url
from jupyter_ci.kernel.safe_outputs import clean_html, inert_bundle
from tests.fakellm import FakeLLM, Turn
from tests.kernelrun import Kernel
from tests.security.test_answer_html import Elements, kernel, live_parts

__all__ = ["kernel"]  # the kernel fixture, shared with the answer tests

HOSTILE = """\
from IPython.display import HTML, Javascript, Markdown, SVG, display
import pandas as pd
display(HTML('<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'))
display(Javascript('window.__xss=3'))
display(SVG('<svg xmlns="http://www.w3.org/2000/svg" onload="window.__xss=4"><rect/></svg>'))
display(Markdown('<img src=x onerror="window.__xss=5"> **bold**'))
display(HTML('<img src="/\\\\evil.example/p.png"><img src="/\\t/evil.example/q.png">'
             '<div style="background:url(https://evil.example/b)">styled</div>'))
display(pd.DataFrame({'region': ['N', 'S'], 'revenue': [4, 2]}))
"""
#: Image sources a browser reads as another host (or as script), whatever they look like.
REMOTE_SOURCES = ["https://evil.example/p.png", "//evil.example/p.png", "/\\evil.example/p.png",
                  "/\t/evil.example/p.png", " //evil.example/p.png", "\x01//evil.example/p",
                  "\\\\evil.example/p.png", "JaVaScRiPt:alert(1)", "/\n/evil.example/p.png"]


def remote(src: str) -> bool:
    """Say whether a browser would fetch this image source from elsewhere (or run it)."""
    url = re.sub(r"[\t\n\r]", "", src).strip("".join(map(chr, range(33)))).replace("\\", "/")
    return bool(re.match(r"[a-zA-Z][\w+.-]*:", url) and not url.startswith("data:image/")
                ) or url.startswith("//")


def test_a_steps_outputs_shown_inline_carry_no_script(fake: FakeLLM, kernel: Kernel) -> None:
    fake.push(Turn(tool_calls=[("run_python", {"code": HOSTILE})]), Turn("Shown."))
    run = kernel.execute("%%ask\nshow the page")  # no frontend: everything inline
    bundles: list[dict[str, Any]] = [
        m["content"]["data"] for m in run.of_type("display_data", "execute_result")]
    assert bundles
    assert not [b for b in bundles if {"application/javascript", "image/svg+xml"} & set(b)]
    html = [str(b["text/html"]) for b in bundles if "text/html" in b]
    for shown in html:
        assert live_parts(shown) == [], shown
        for tag, attrs in Elements(shown).found:
            assert "style" not in attrs, shown
            assert not (tag == "img" and remote(attrs.get("src", ""))), shown
    # Data still shows: the table, the SVG as an image, the Markdown's bold text.
    assert any('class="dataframe"' in h and "<td>4</td>" in h for h in html)
    assert any('<img src="data:image/svg+xml;base64,' in h for h in html)
    assert any("<strong>bold</strong>" in h for h in html)


@pytest.mark.parametrize("src", REMOTE_SOURCES)
def test_image_sources_another_host_hides_in_are_not_local(src: str) -> None:
    assert remote(src)
    assert not is_local_url(src)
    assert "src=" not in clean_html(f'<img src="{src}">')


@pytest.mark.parametrize("src", ["plot.png", "data/plot.png", "/files/plot.png",
                                 "%09//evil.example/p.png"])
def test_local_image_sources_stay(src: str) -> None:
    assert is_local_url(src)
    assert f'src="{src}"' in clean_html(f'<img src="{src}">')


def test_widgets_and_unknown_types_are_left_out_with_a_note() -> None:
    assert inert_bundle({"application/vnd.jupyter.widget-view+json": {"model_id": "m"},
                         "text/plain": "IntSlider()"}) == {"text/plain": "IntSlider()"}
    assert inert_bundle({"application/x-evil": "run me"}) == {
        "text/plain": "(not shown here: application/x-evil)"}
    kept = {"image/png": "iVBOR", "application/vnd.plotly.v1+json": {"data": []},
            "application/vnd.vegalite.v5+json": {}, "text/latex": "$x$"}
    assert inert_bundle(kept) == kept
