"""The %%ask cell's log renders line by line (cached) exactly as mistune renders it whole."""

from __future__ import annotations

import random
import string

from jupyter_ci.kernel import safe_markdown

LINES = [
    "Asking openai:gpt-4.1…", "Step 1 · load the sales data: running…",
    "Step 2 (fix, attempt 2) · x: failed (NameError) → fixed (1.2 s)",
    "⚠ The step used a name no cell defines", "Done: openai:gpt-4.1 · 3 steps · 1,234 tokens",
    "Step 3 · **bold**, *it*, `code` and _u_", "a & b &amp; c", "Step 4 · x | y | z",
    "Step 5 · trailing  ", "Step 6 · back\\", "Step 7 · http://example.com/x?y=1",
    "Step 8 · ***", "Step · 1. two", "ünïcode ✓ 数据", "x *unclosed", "y `unclosed",
    "Step · ~~strike~~", "Step · #hash", "Step · - nested?", "Step · > quote",
    # Not plain: rendered whole, as before.
    "Step · [link](http://x)", "Step · <b>html</b>", "- - -", "1. first", "_x_ first",
]


def whole(markdown: str) -> str:
    """Render as the log was rendered before: the whole text at once."""
    return safe_markdown._clean(str(safe_markdown.renderer()(markdown)), safe_markdown._TAGS)


def test_each_log_renders_as_the_whole_text_does() -> None:
    rng = random.Random(7)
    alphabet = string.ascii_letters + string.digits + " *_`~|#>-+.!()&;:\\/\"'=·…⚠\t[]<"
    lines = LINES + [rng.choice(string.ascii_letters) + "".join(
        rng.choice(alphabet) for _ in range(rng.randint(0, 30))) for _ in range(500)]
    for _ in range(1500):
        log = "\n".join(f"- {rng.choice(lines)}" for _ in range(rng.randint(1, 8)))
        assert safe_markdown.to_html(log) == whole(log), log
