"""What the MCP tools give back: runs as text and image content, an ask's events as progress.

Pure: no I/O, so both transports (stdio and the server's Streamable HTTP) share it.
"""

from __future__ import annotations

import base64
import json
import mimetypes
from collections.abc import Mapping

from mcp.types import (
    BlobResourceContents,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    TextContent,
)

from jupyter_ci.agent.cost import AskUsage
from jupyter_ci.client import Execution
from jupyter_ci.mcp.shapes import Cell, Notebook

#: Images of one run given back (PNG or JPEG), and the base64 characters of one at most.
MAX_IMAGES = 8
MAX_IMAGE_CHARS = 4 * 1024 * 1024
#: Bytes of a downloaded file given back, and characters of a session's notebook.
MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_TEXT_CHARS = 200_000
#: Characters of the model's text or of an output that one progress message carries.
PROGRESS_CHARS = 200
#: How an MCP client goes on after a session's kernel died (client.results.DIED): no tool
#: restarts a session in place.
RESTART_SESSION = ("a new session is started with the MCP tool start_session (it becomes "
                   "the default; the dead session's files stay until close_session closes it)")
#: The same for a notebook's kernel (run_in_notebook): its user restarts it.
RESTART_NOTEBOOK = ("the notebook's kernel is restarted in JupyterLab (Kernel > Restart "
                    "Kernel), which only its user can do from there")


def text(value: str, error: bool = False) -> CallToolResult:
    """Return a tool result holding one text."""
    return CallToolResult(content=[TextContent(type="text", text=value)], is_error=error)


def run_result(run: Execution, restart: str = RESTART_SESSION) -> CallToolResult:
    """Give a run back as its text (what it printed, its value, its error) and its images;
    a dead kernel's says how to go on in `restart`'s words."""
    said = run.summarized(restart) or "(no output)"
    if run.status == "dead" and restart not in said:  # the server's words: "restart the session"
        said += f"\n(No code runs here until {restart}.)"
    content: list[ContentBlock] = [TextContent(type="text", text=said)]
    for index, (mime, data) in enumerate(run.images):
        if index >= MAX_IMAGES:
            content.append(TextContent(type="text", text=f"[{len(run.images) - index} more "
                                       f"image(s) not sent: at most {MAX_IMAGES} per run]"))
            break
        if len(data) > MAX_IMAGE_CHARS:
            content.append(TextContent(type="text", text=f"[a {mime} image of {len(data)} "
                                       "base64 characters, too large to send]"))
            continue
        content.append(ImageContent(type="image", data=data, mime_type=mime))
    return CallToolResult(content=content, is_error=run.status != "ok")


def file_result(path: str, data: bytes) -> CallToolResult:
    """Give a file back: an image as image content, UTF-8 text as text, else a blob."""
    if len(data) > MAX_FILE_BYTES:
        return text(f"{path} is {len(data)} bytes, over the {MAX_FILE_BYTES} this tool sends; "
                    "read a part of it with `execute` instead.", error=True)
    mime = mimetypes.guess_type(path)[0] or "application/octet-stream"
    if mime in ("image/png", "image/jpeg", "image/gif", "image/webp"):
        return CallToolResult(content=[ImageContent(
            type="image", data=base64.b64encode(data).decode(), mime_type=mime)])
    try:
        return text(data.decode("utf-8"))
    except UnicodeDecodeError:
        blob = BlobResourceContents(uri=f"file:///{path.lstrip('/')}", mime_type=mime,
                                    blob=base64.b64encode(data).decode())
        return CallToolResult(content=[EmbeddedResource(type="resource", resource=blob)])


def notebook_text(notebook: Notebook) -> str:
    """Return a session's notebook as JSON, its outputs dropped when it is too long to send."""
    whole = json.dumps(notebook)
    if len(whole) <= MAX_TEXT_CHARS:
        return whole
    cells: list[Cell] = [{**cell, "outputs": []} if cell.get("cell_type") == "code" else cell
                         for cell in notebook.get("cells", [])]
    # nbformat's markdown cell: its metadata is a key shapes.Cell does not read.
    note = {"cell_type": "markdown", "metadata": {}, "source":
            f"[outputs dropped: the notebook is {len(whole)} characters, over the "
            f"{MAX_TEXT_CHARS} this tool sends; download files or re-run code to see them]"}
    return json.dumps({**notebook, "cells": [note, *cells]})[:MAX_TEXT_CHARS]


def ask_result(result: Mapping[str, object]) -> CallToolResult:
    """Give an ask's final `result` event back: the answer, and how it ended."""
    status = str(result.get("status", "failed"))
    answer = str(result.get("answer") or "")
    lines = [answer] if answer else []
    if status != "done":
        problem = result.get("error") or result.get("unresolved") or {}
        lines.append(f"[ask {status}: {_problem(problem)}]")
    steps = result.get("steps", 0)
    count = steps if isinstance(steps, int) else len(steps) if isinstance(steps, list) else 0
    lines.append(f"[{count} step(s) ran in the session]")
    usage = result.get("usage")
    spent = AskUsage.from_json(usage).line() if isinstance(usage, dict) else ""
    if spent:
        lines.append(f"[{spent}]")
    return text("\n".join(lines), error=status == "failed")


def _problem(problem: object) -> str:
    """Say why an ask did not end done: an error's type, message and hint as text."""
    if not isinstance(problem, dict) or not isinstance(problem.get("message"), str):
        return json.dumps(problem)
    kind, message, hint = problem.get("type"), str(problem["message"]), problem.get("hint")
    return (f"{kind}: " if isinstance(kind, str) and kind else "") + message + (
        f"\n{hint}" if isinstance(hint, str) and hint else "")


def _seconds(milliseconds: object) -> float:
    return milliseconds / 1000 if isinstance(milliseconds, int | float) else 0.0


def _clip(value: str) -> str:
    value = " ".join(value.split())
    return value if len(value) <= PROGRESS_CHARS else value[:PROGRESS_CHARS - 1] + "…"


def _output_message(data: Mapping[str, object]) -> str:
    output = data.get("output")
    output = output if isinstance(output, dict) else {}
    if output.get("output_type") == "stream":
        return f"step {data.get('step')} {output.get('name')}: {_clip(str(output['text']))}"
    if output.get("output_type") == "error":
        return f"step {data.get('step')} error: {output.get('ename')}: " \
            f"{_clip(str(output.get('evalue')))}"
    mimes = ", ".join(output.get("data") or {}) or "output"
    return f"step {data.get('step')} displayed {mimes}"


class Narrator:
    """Turn an ask's typed events into progress messages (the model's text batched)."""

    def __init__(self) -> None:
        self.pending = ""

    def messages(self, event: str, data: Mapping[str, object]) -> list[str]:
        """Return the progress messages this event makes (often none, a few at most)."""
        if event == "text":
            self.pending += str(data.get("delta", ""))
            return []
        said = [f"model: {_clip(self.pending)}"] if self.pending.strip() else []
        self.pending = ""
        message = self._message(event, data)
        return [*said, message] if message else said

    @staticmethod
    def _message(event: str, data: Mapping[str, object]) -> str | None:
        if event == "ask_start":
            return f"asking {data.get('model')}"
        if event == "thinking":
            return "the model is thinking"
        if event == "step_start":
            first = str(data.get("code", "")).strip().splitlines()[:1]
            return f"step {data.get('step')}: running {_clip(first[0]) if first else 'code'}"
        if event == "output":
            return _output_message(data)
        if event == "step_end":
            return f"step {data.get('step')} ended: {data.get('status')} " \
                f"({_seconds(data.get('duration_ms')):.1f} s)"
        if event == "warning":
            return f"warning: {_clip(str(data.get('message', '')))}"
        if event == "waiting_for_user":
            return f"waiting for the user: {_clip(str(data.get('question', '')))}"
        if event == "ask_end":
            return f"ask ended: {data.get('status')}"
        return None  # request_sent, code_preview, usage, clear_output, set_outputs, files
