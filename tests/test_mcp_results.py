"""What the MCP tools give back, without a server: runs, files, notebooks, ask progress, and
when the HTTP door's answer goes as JSON rather than as an event stream (framing.py)."""

from __future__ import annotations

import base64
import json

from mcp.types import EmbeddedResource, ImageContent, TextContent

from jupyter_ci.client import Execution
from jupyter_ci.mcp import results
from jupyter_ci.mcp.framing import Framer, accepts_json, request_id

PNG = base64.b64encode(b"\x89PNG" + b"0" * 8).decode()


def image(data: str = PNG) -> dict[str, object]:
    return {"output_type": "display_data", "data": {"image/png": data, "text/plain": "<F>"},
            "metadata": {}}


def test_a_run_gives_its_text_and_a_bounded_number_of_bounded_images() -> None:
    huge = "A" * (results.MAX_IMAGE_CHARS + 1)
    run = Execution("ok", [image(huge)] + [image()] * (results.MAX_IMAGES + 2))
    content = results.run_result(run).content
    assert isinstance(content[0], TextContent)
    assert isinstance(content[1], TextContent) and "too large to send" in content[1].text
    images = [c for c in content if isinstance(c, ImageContent)]
    assert len(images) == results.MAX_IMAGES - 1
    assert isinstance(content[-1], TextContent) and "3 more image(s)" in content[-1].text
    assert not results.run_result(run).is_error


def test_a_failed_run_is_an_error_result() -> None:
    run = Execution("error", [{"output_type": "error", "ename": "NameError",
                               "evalue": "name 'x' is not defined", "traceback": []}])
    result = results.run_result(run)
    assert result.is_error and "NameError" in result.content[0].text  # type: ignore[union-attr]


def test_files_come_back_as_text_images_or_blobs_and_big_ones_are_refused() -> None:
    assert results.file_result("a.txt", "héllo".encode()).content[0].text == "héllo"  # type: ignore[union-attr]
    png = results.file_result("p.png", b"\x89PNG").content[0]
    assert isinstance(png, ImageContent) and png.mime_type == "image/png"
    blob = results.file_result("x.bin", b"\xff\x00").content[0]
    assert isinstance(blob, EmbeddedResource)
    assert base64.b64decode(blob.resource.blob) == b"\xff\x00"  # type: ignore[union-attr]
    assert results.file_result("big.txt", b"x" * (results.MAX_FILE_BYTES + 1)).is_error


def test_a_long_notebook_drops_its_outputs_and_says_so() -> None:
    cell = {"cell_type": "code", "source": "print('x')", "metadata": {}, "outputs": [
        {"output_type": "stream", "name": "stdout", "text": "x" * results.MAX_TEXT_CHARS}]}
    short = json.loads(results.notebook_text({"cells": [{**cell, "outputs": []}]}))
    assert short["cells"][0]["source"] == "print('x')"
    long = json.loads(results.notebook_text({"nbformat": 4, "cells": [cell]}))
    assert "outputs dropped" in long["cells"][0]["source"]
    assert long["cells"][1] == {**cell, "outputs": []}


def test_an_asks_events_become_progress_messages_with_the_models_text_batched() -> None:
    narrator = results.Narrator()
    said = [m for event, data in [
        ("ask_start", {"model": "openai:x"}), ("thinking", {}), ("text", {"delta": "Let "}),
        ("text", {"delta": "me see."}), ("code_preview", {"step": 1, "code": "pr"}),
        ("step_start", {"step": 1, "code": "print(2)\nmore()"}),
        ("output", {"step": 1, "output": {"output_type": "stream", "name": "stdout",
                                          "text": "2\n"}}),
        ("output", {"step": 1, "output": {"output_type": "display_data",
                                          "data": {"image/png": ""}}}),
        ("step_end", {"step": 1, "status": "ok", "duration_ms": 1500}),
        ("usage", {}), ("ask_end", {"status": "done"})] for m in narrator.messages(event, data)]
    assert said == ["asking openai:x", "the model is thinking", "model: Let me see.",
                    "step 1: running print(2)", "step 1 stdout: 2", "step 1 displayed image/png",
                    "step 1 ended: ok (1.5 s)", "ask ended: done"]


def test_an_asks_result_says_how_it_ended() -> None:
    done = results.ask_result({"status": "done", "answer": "42", "steps": 2})
    assert not done.is_error and done.content[0].text.startswith("42")  # type: ignore[union-attr]
    failed = results.ask_result({"status": "failed", "answer": None, "error": {"kind": "x"}})
    assert failed.is_error and "ask failed" in failed.content[0].text  # type: ignore[union-attr]


def event(data: object, *, name: str = "message", ident: str | None = None) -> bytes:
    """An SSE event as the SDK's server writes it (sse-starlette, CRLF lines)."""
    lines = [f"event: {name}", *([f"id: {ident}"] if ident else []), f"data: {json.dumps(data)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


ANSWER = {"jsonrpc": "2.0", "id": 7, "result": {"content": [], "isError": False}}
PROGRESS = {"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": 1, "progress": 1}}


def test_a_stream_of_only_its_answer_is_that_answers_json() -> None:
    whole = event(ANSWER)
    for chunks in ([whole], [whole[:9], whole[9:-1], whole[-1:]], [whole, b""]):
        framer = Framer(7)
        assert all(framer.feed(chunk) for chunk in chunks)
        assert framer.reply() is not None and json.loads(framer.reply() or b"") == ANSWER


def test_anything_else_in_the_stream_sends_it_as_a_stream() -> None:
    others = [
        event(PROGRESS) + event(ANSWER),  # progress first (an ask's)
        event({"jsonrpc": "2.0", "id": 0, "method": "elicitation/create"}),  # a question
        b": ping - 2026-12-01\r\n\r\n",  # a long run's keep-alive
        event(ANSWER, ident="e1"),  # a resumable stream's event id
        event({**ANSWER, "id": 8}),  # another request's answer
        event(ANSWER, name="other"),
        event(ANSWER) + event(ANSWER),
        b"event: message\r\ndata: {not json\r\n\r\n",
    ]
    for stream in others:
        framer = Framer(7)
        assert not framer.feed(stream) and framer.reply() is None, stream
    held = Framer(7)
    assert held.feed(event(ANSWER)) and not held.feed(b"event: message\r\n")  # more after it
    assert held.reply() is None and bytes(held.buffered).startswith(b"event: message")


def test_a_json_answer_needs_a_client_that_takes_json_and_a_request_with_an_id() -> None:
    assert accepts_json("application/json, text/event-stream")
    assert accepts_json("*/*") and accepts_json("application/*;q=0.5")
    assert not accepts_json("text/event-stream") and not accepts_json("")
    assert request_id(b'{"jsonrpc": "2.0", "id": 3, "method": "ping"}') == 3
    assert request_id(b'{"jsonrpc": "2.0", "id": "a", "method": "ping"}') == "a"
    for body in (b'{"jsonrpc": "2.0", "method": "notifications/initialized"}',
                 b'{"jsonrpc": "2.0", "id": true, "method": "ping"}',
                 b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', b"{", b""):
        assert request_id(body) is None, body
