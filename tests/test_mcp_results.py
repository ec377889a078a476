"""What the MCP tools give back, without a server: runs, files, notebooks, ask progress."""

from __future__ import annotations

import base64
import json

from mcp.types import EmbeddedResource, ImageContent, TextContent

from jupyter_ci.client import Execution
from jupyter_ci.mcp import results

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
