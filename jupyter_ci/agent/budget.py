"""Cheap token estimates and trimming of text to fit a budget."""

from __future__ import annotations

#: Characters per token assumed by the estimate (English prose and code average about 4).
CHARS_PER_TOKEN = 4
_SECTION_SEPARATOR = "\n\n"
#: How far trim_middle may move a cut to land on a line boundary.
_SNAP_CHARS = 200


def estimate_tokens(text: str) -> int:
    """Estimate the tokens in text as characters / 4, rounded up; no tokenizer is loaded."""
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def trim_middle(text: str, max_chars: int) -> str:
    """Cut text to at most max_chars, keeping its head and tail around a trim marker."""
    if len(text) <= max_chars:
        return text
    # Reserve room for the longest marker (every character trimmed); the real one is no longer.
    kept = max_chars - len(_trim_marker(len(text)))
    if kept < 2:
        return text[:max_chars]
    head_end = _snap_back_to_newline(text, kept - kept // 2)
    tail_start = _snap_forward_past_newline(text, len(text) - kept // 2)
    return text[:head_end] + _trim_marker(tail_start - head_end) + text[tail_start:]


def _trim_marker(removed: int) -> str:
    """Say how many characters were cut out of the middle."""
    return f"\n[… {removed:,} characters trimmed …]\n"


def _snap_back_to_newline(text: str, end: int) -> int:
    """Move a head cut back to a nearby line end, so the head ends with a whole line."""
    newline = text.rfind("\n", max(0, end - _SNAP_CHARS), end)
    return newline if newline > 0 else end


def _snap_forward_past_newline(text: str, start: int) -> int:
    """Move a tail cut forward past a nearby line end, so the tail starts with a whole line."""
    newline = text.find("\n", start, min(len(text) - 1, start + _SNAP_CHARS))
    return newline + 1 if newline >= 0 else start


def fit_sections(sections: list[tuple[str, str]], budget_tokens: int) -> str:
    """Join titled sections, highest priority first, trimming the first one that overflows."""
    budget_chars = max(0, budget_tokens) * CHARS_PER_TOKEN
    parts: list[str] = []
    used = 0
    for title, body in sections:
        body = body.strip("\n")
        if not body.strip():
            continue
        separator = _SECTION_SEPARATOR if parts else ""
        room = budget_chars - used - len(separator)
        part = _fit_section(title, body, room)
        if part is None:
            continue
        parts.append(separator + part)
        used += len(separator) + len(part)
    return "".join(parts)


def _fit_section(title: str, body: str, room: int) -> str | None:
    """Render one section within room characters, trimmed at a line, or None if none fits."""
    heading = f"## {title}\n"
    whole = heading + body
    if len(whole) <= room:
        return whole
    lines = body.split("\n")
    kept: list[str] = []
    size = len(heading)
    for index, line in enumerate(lines):
        marker = f"\n… ({len(lines) - index} more lines)"
        if size + len(line) + 1 + len(marker) > room:
            break
        kept.append(line)
        size += len(line) + 1
    if not kept:
        return _first_line_cut(heading, lines, room)
    marker = f"… ({len(lines) - len(kept)} more lines)"
    return heading + "\n".join(kept) + "\n" + marker


def _first_line_cut(heading: str, lines: list[str], room: int) -> str | None:
    """Keep the start of an overlong first line when not even one whole line fits."""
    marker = f"… ({len(lines) - 1} more lines)" if len(lines) > 1 else ""
    cut = room - len(heading) - len(marker) - 2  # the ellipsis and a newline
    if cut < 20:  # a stub this short tells the model nothing
        return None
    text = heading + lines[0][:cut] + "…"
    return text + "\n" + marker if marker else text
