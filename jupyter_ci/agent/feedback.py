"""Turn a code run's result into the tool result the model reads."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from jupyter_ci.agent.budget import trim_middle
from jupyter_ci.agent.chart_text import CHART_MIME, chart_text
from jupyter_ci.agent.images import ImagePicker, Picked
from jupyter_ci.agent.types import CodeResult, ErrorInfo, FileInfo, Output, ToolResult

#: Scrubs secrets out of text before it reaches the model.
Redact = Callable[[str], str]

# CSI sequences (colours) and OSC sequences (hyperlinks) that IPython puts in tracebacks.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
# Frames from IPython/ipykernel machinery tell the model nothing about its own code.
_NOISE = ("site-packages/IPython/", "site-packages/ipykernel/", "interactiveshell.py")
MAX_TRACEBACK_LINES = 40
#: Files listed in one tool result; a run that writes more gets a count of the rest.
MAX_FILES_LISTED = 30
#: Told to the model when a run's output lost values to redaction, so it does not chase them.
REDACTION_NOTE = ("[Values that looked like credentials were replaced with [redacted]; use "
                  "them through their variables and do not print them.]")

#: What a timed-out run whose kernel had to be restarted says (it ignored the interrupt).
KERNEL_RESTARTED = "kernel restarted, variables lost"


def strip_ansi(text: str) -> str:
    """Remove terminal colour codes."""
    return _ANSI.sub("", text)


def format_error(error: ErrorInfo) -> str:
    """Render an exception with the traceback frames that matter."""
    lines: list[str] = []
    for entry in error.traceback:
        chunk = strip_ansi(entry).rstrip()
        if chunk and not any(noise in chunk for noise in _NOISE):
            lines.extend(chunk.splitlines())
    if len(lines) > MAX_TRACEBACK_LINES:
        # The innermost frames and the exception line sit at the end.
        lines = ["[… earlier frames trimmed …]", *lines[-MAX_TRACEBACK_LINES:]]
    head = f"{error.ename}: {error.evalue}"
    body = "\n".join(lines)
    return f"{head}\nTraceback:\n{body}" if body else head


def _format_data(data: dict[str, object], image_note: str | None = None) -> str:
    plain = data.get("text/plain")
    notes = []
    if image_note is not None:
        notes.append(image_note)
    else:
        for mime in ("image/png", "image/jpeg", "image/svg+xml"):
            if mime in data:
                notes.append(f"[{mime} image shown to the user]")
    if "text/html" in data and plain is None:
        notes.append("[HTML output shown to the user]")
    if CHART_MIME in data:  # the chart's numbers, which its picture only shows
        notes.append(chart_text(data[CHART_MIME]))
    text = "".join(plain) if isinstance(plain, list) else str(plain or "")
    # A figure's text/plain is "<Figure size …>": the note says more.
    if notes and text.startswith("<Figure"):
        text = ""
    return "\n".join(part for part in (text, *notes) if part)


def format_output(output: Output, image_note: str | None = None) -> str:
    """Render one nbformat output as text; `image_note` replaces the default image note."""
    if output["output_type"] == "stream":
        text: object = output.get("text", "")  # a list of lines in a notebook's JSON
        return "".join(map(str, text)) if isinstance(text, list) else str(text)
    if output["output_type"] == "display_data":
        return _format_data(output.get("data", {}), image_note)
    if output["output_type"] == "execute_result":
        return f"Out: {_format_data(output.get('data', {}), image_note)}"
    return ""  # errors are rendered from CodeResult.error


def tool_result(result: CodeResult, timeout: float, max_chars: int,
                redact: Redact | None = None, images: ImagePicker | None = None,
                tokens_left: int = 0, note: str = "") -> ToolResult:
    """Build what the model is told: status, redacted capped text, images, files, our note."""
    picked = images.pick([*result.outputs, *result.updated], tokens_left) if images else Picked()
    text = format_result(result, timeout, max_chars, picked.notes)
    if result.files or result.files_cut:
        text = "\n".join(p for p in (text, format_files(result.files, result.files_cut)) if p)
    redacted = redact(text) if redact else text
    if redacted != text:
        redacted += f"\n{REDACTION_NOTE}"
    if note:  # ours (e.g. about a missing package): after the cap, so it is never cut
        redacted += f"\n{note}"
    return ToolResult(result.status, redacted, tuple(picked.images), tuple(result.files))


def format_files(files: Sequence[FileInfo], cut: bool = False) -> str:
    """List the files a run created or changed, for the model."""
    lines = [f"- {f.path} ({human_size(f.size)}, {f.mime})" for f in files[:MAX_FILES_LISTED]]
    if len(files) > MAX_FILES_LISTED:
        lines.append(f"- … and {len(files) - MAX_FILES_LISTED} more")
    if cut:
        lines.append("- (list cut: the directory holds more entries than are looked at; "
                     "list the files you need with code)")
    return ("[Files created or changed in the working directory (mention them by these "
            "relative paths):]\n" + "\n".join(lines))


def human_size(size: int) -> str:
    """Write a byte count the way a file browser does (units of 1000)."""
    value = float(size)
    for unit in ("kB", "MB", "GB"):
        value /= 1000
        if round(value, 1) < 1000 or unit == "GB":
            return f"{size} B" if size < 1000 else f"{value:.1f} {unit}"
    return f"{size} B"


def invalid_call(problem: str) -> ToolResult:
    """Tell the model its tool call could not be run, and why."""
    return ToolResult("invalid", problem)


def not_run() -> ToolResult:
    """Answer a tool call that was never run because the ask ended."""
    return ToolResult("not_run", "[not run: the ask ended]")


def format_result(result: CodeResult, timeout: float, max_chars: int,
                  image_notes: dict[int, str] | None = None) -> str:
    """Render a whole run for the model, capped at `max_chars` characters."""
    notes = image_notes or {}
    parts = [strip_ansi(format_output(o, notes.get(i))).rstrip("\n")
             for i, o in enumerate(result.outputs)]
    shown = len(result.outputs)
    for i, output in enumerate(result.updated, shown):
        now = strip_ansi(format_output(output, notes.get(i))).strip("\n") or "(nothing)"
        parts.append(f"[A display shown earlier was updated; it now shows:]\n{now}")
    text = "\n".join(p for p in parts if p)
    if result.status == "timeout" and result.error is not None and (
            KERNEL_RESTARTED in result.error.evalue):
        text += "\n" + format_error(result.error)  # the variables are gone: say so
    elif result.status == "timeout":
        text += (
            f"\n[Timed out after {timeout:g} s: the run was interrupted. The kernel and its "
            "variables are intact. Make the code faster or work on less data.]"
        )
    elif result.error is not None:
        text += "\n" + format_error(result.error)
    elif result.status == "ok" and not text and not result.files:
        text = "[ran without output]"
    return trim_middle(text.strip("\n"), max_chars)
