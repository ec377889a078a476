"""Turn the file paths an answer mentions into links to those files, relative to the notebook.

The kernel runs in the notebook's folder, so a path relative to it is a link JupyterLab
opens in a new tab, and one that nbconvert's HTML keeps working beside the files. Models
trained on ChatGPT write `sandbox:/mnt/data/x.csv`: that becomes `x.csv` when the file is
there, and plain text otherwise. Only files that exist inside the folder are linked, and
every link is a relative path (never a scheme, never outside the folder); the Markdown is
still rendered through safe_markdown.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from urllib.parse import quote

# Fenced code blocks are code: nothing in them is linked.
_FENCE = re.compile(r"^(`{3,}|~{3,})[^\n]*\n.*?(?:^\1[^\n]*$|\Z)", re.M | re.S)
_SANDBOX = r"(?:sandbox:)?/mnt/data/"
_PIECES = re.compile(
    r"(?P<link>\[(?P<text>[^\]\n]*)\]\((?P<target><[^>\n]*>|[^)\s]*)\))"
    r"|(?P<url>\b[a-zA-Z][a-zA-Z0-9+.-]*://\S+)"
    r"|(?P<code>`(?P<inner>[^`\n]+)`)"
    rf"|(?P<sandbox>{_SANDBOX}[^\s)\]`'\"<>,;]+[^\s)\]`'\"<>,;.:!?])"
    r"|(?<![\w/.:\\-])(?P<path>(?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z0-9]{1,8})(?![\w/-])"
)


def link_files(markdown: str, folder: Path) -> str:
    """Link the files `markdown` mentions that exist in `folder`; rewrite sandbox paths."""
    parts = []
    last = 0
    for fence in _FENCE.finditer(markdown):
        parts.append(_PIECES.sub(lambda m: _replace(m, folder), markdown[last:fence.start()]))
        parts.append(fence.group(0))
        last = fence.end()
    parts.append(_PIECES.sub(lambda m: _replace(m, folder), markdown[last:]))
    return "".join(parts)


def _replace(match: re.Match[str], folder: Path) -> str:
    """Rewrite one link, code span or path mention; leave everything else as it was."""
    whole = match.group(0)
    if match["link"]:
        target = match["target"].removeprefix("<").removesuffix(">")
        sandboxed = re.match(_SANDBOX, target) is not None
        found = _local_file(target, folder)
        if found is not None:
            return f"[{match['text']}]({found})"
        # A link into ChatGPT's sandbox leads nowhere here: keep its words only.
        return match["text"] if sandboxed else whole
    if match["url"]:
        return whole
    mentioned = match["inner"] if match["code"] else match["sandbox"] or match["path"]
    found = _local_file(mentioned.strip(), folder)
    if found is None:
        return whole
    if match["code"]:
        return f"[{whole}]({found})"
    shown = re.sub(_SANDBOX, "", mentioned) if match["sandbox"] else mentioned
    return f"[{shown}]({found})"


def _local_file(mention: str, folder: Path) -> str | None:
    """Return the href of a file inside `folder` that `mention` names, or None."""
    path = re.sub(f"^{_SANDBOX}", "", mention)
    if not path or ":" in path.split("/", 1)[0] or "\x00" in path:
        return None  # a URL scheme (javascript:, http:) or nothing at all
    try:
        root = folder.resolve()
        candidate = Path(path) if PurePosixPath(path).is_absolute() else root / path
        target = candidate.resolve()
        if not target.is_relative_to(root) or not target.is_file():
            return None
    except (OSError, ValueError):
        return None
    return quote(target.relative_to(root).as_posix(), safe="/")
