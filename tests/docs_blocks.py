"""The code blocks of README.md and docs/**/*.md, found and run with Sybil (tests/test_docs.py).

Conventions (docs/development.md, "Writing docs"):

- A ```python, ```bash (or ```sh) or ```ipython block is run by the tests. A block that
  cannot run has a marker on the line right before it:
  ``<!-- docs: skip "why it cannot run" -->`` (the reason is required).
- A python block whose first statement sets ``c.<Class>.<name>`` is a
  ``jupyter_server_config.py``: it is loaded as a config file, and each setting must exist on
  a jupyter-ci or Jupyter class and take its value.
- Every other fence names a language that is never run: text, console, json, yaml, ...
  A fence without a language is refused, so a forgotten ``python`` never goes unrun.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sybil import Document, Example, Region, Sybil
from sybil.parsers.markdown.lexers import RawFencedCodeBlockLexer

ROOT = Path(__file__).resolve().parent.parent
#: The files whose blocks are run: the README and every page of the docs site.
FILES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
FILES = [p for p in FILES if "_build" not in p.parts]
RUN = {"python", "bash", "sh", "ipython"}
#: Fences that are never run (output samples, other formats, directives).
SHOWN = {"text", "console", "json", "javascript", "typescript", "yaml", "toml", "ini", "http",
         "diff", "html", "markdown", "mermaid"}
SKIP = re.compile(r'<!-- docs: skip "([^"]+)" -->\s*$')
INFO = re.compile(r"(?P<language>[^\n]*)$\n", re.MULTILINE)
#: What the docs' examples call their server; the tests put the test server's URL there.
DOCS_URL = "http://localhost:8888"


@dataclass
class DocsEnv:
    """What a block runs against: the server, its token, the fake model and a folder."""

    url: str
    token: str
    cwd: Path
    env: dict[str, str] = field(default_factory=dict)
    runners: dict[str, Any] = field(default_factory=dict)


@dataclass
class Block:
    """One fenced block of a file: its language, first line and the skip reason before it."""

    path: Path
    line: int
    language: str
    skip: str | None


def skip_reason(text: str, start: int) -> str | None:
    """Return the reason of a skip marker on the line right before offset `start`."""
    before = text[:start].rstrip("\n").rsplit("\n", 1)[-1]
    found = SKIP.match(before.strip())
    return found.group(1) if found else None


def blocks(path: Path) -> list[Block]:
    """List every fenced block of `path` with its language and skip marker."""
    text = path.read_text(encoding="utf-8")
    found, fence = [], False
    offset = 0
    for number, line in enumerate(text.split("\n"), 1):
        if line.startswith("```"):
            if not fence:
                language = line[3:].strip()
                found.append(Block(path, number, language, skip_reason(text, offset)))
            fence = not fence
        offset += len(line) + 1
    return found


def run(example: Example) -> None:
    """Run one block with the runner of its language (set by tests/test_docs.py)."""
    ctx: DocsEnv = example.namespace["__docs__"]
    language = example.region.lexemes["language"]
    source = str(example.parsed).replace(DOCS_URL, ctx.url)
    ctx.runners[language](example, source)


class RunnableBlocks:
    """A Sybil parser: every python/bash/sh/ipython fence not marked skip is a region."""

    def __init__(self) -> None:
        self.lexer = RawFencedCodeBlockLexer(info_pattern=INFO)

    def __call__(self, document: Document) -> list[Region]:
        """Yield the runnable blocks of `document`."""
        regions = []
        for region in self.lexer(document):
            language = str(region.lexemes["language"]).strip()
            if language in RUN and skip_reason(document.text, region.start) is None:
                region.lexemes["language"] = "bash" if language == "sh" else language
                region.parsed = region.lexemes["source"]
                region.evaluator = run
                regions.append(region)
        return regions


SYBIL = Sybil(parsers=[RunnableBlocks()])


def documents() -> dict[Path, Document]:
    """Parse every file once."""
    return {path: SYBIL.parse(path) for path in FILES}


def config_snippet(source: str) -> bool:
    """Tell whether a python block is a jupyter_server_config.py (it sets c.<Class>.<name>)."""
    code = [ln for ln in source.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return bool(code) and re.match(r"c\.[A-Z]\w*\.\w+\s*=", code[0]) is not None
