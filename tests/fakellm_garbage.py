"""What the fake model server sends for a `Garbage` step: replies that break the wire format.

Each is HTTP 200, as a misconfigured base URL (a proxy's login page, a web server's
index), a broken proxy or a crashing compatible server gives: the SDKs see no error
status, so only the reply's content says something is wrong.
"""

from __future__ import annotations

import json
import time
from typing import Any, Protocol

from tests.fakellm_wire import JSON, Garbage, anthropic_events, openai_chunks

HTML_PAGE = ("<!DOCTYPE html>\n<html><head><title>Sign in - Example Corp Proxy</title></head>"
             "<body><h1>Please sign in to continue</h1><form method=post>"
             "<input name=user></form></body></html>\n")
PLAIN_TEXT = ("upstream connect error or disconnect/reset before headers. "
              "reset reason: connection termination\n")
#: Valid JSON that is neither a chunk, an event nor a completion.
WRONG_SHAPE: JSON = {"result": "ok", "output": "hello from somewhere else"}


class Handler(Protocol):
    """What of the fake's request handler a garbage answer uses."""

    gone: bool

    def send_response(self, code: int, message: str | None = None) -> None: ...

    def send_header(self, keyword: str, value: str) -> None: ...

    def end_headers(self) -> None: ...

    def send_raw(self, payload: bytes) -> None: ...


def send_garbage(handler: Handler, provider: str, garbage: Garbage, model: str,
                 stream: bool) -> None:
    """Answer one request with `garbage`, in `provider`'s format where it has one."""
    kind = garbage.kind
    if kind == "html":
        _whole(handler, "text/html; charset=utf-8", HTML_PAGE.encode())
    elif kind == "not_json":
        _whole(handler, "text/plain", PLAIN_TEXT.encode())
    elif not stream:
        _body(handler, provider, kind)
    else:
        _stream(handler, provider, garbage, model)


def _whole(handler: Handler, content_type: str, payload: bytes,
           length: int | None = None) -> None:
    """Send a 200 with `payload`, announcing `length` bytes (more: the client sees a cut)."""
    handler.send_response(200)
    handler.send_header("content-type", content_type)
    handler.send_header("content-length", str(len(payload) if length is None else length))
    handler.end_headers()
    handler.send_raw(payload)


def _body(handler: Handler, provider: str, kind: str) -> None:
    """A non-streaming answer: cut-off JSON, JSON of the wrong shape, or a short body."""
    whole = json.dumps({"id": "chatcmpl-fake", "object": "chat.completion", "choices": []}
                       if provider == "openai" else
                       {"id": "msg_fake", "type": "message", "role": "assistant",
                        "content": []}).encode()
    if kind == "bad_chunk":
        _whole(handler, "application/json", whole[: len(whole) // 2])
    elif kind == "wrong_shape":
        _whole(handler, "application/json", json.dumps(WRONG_SHAPE).encode())
    else:  # cut, broken: the body stops before its announced length
        _whole(handler, "application/json", whole[: len(whole) // 2], length=len(whole))


def _stream(handler: Handler, provider: str, garbage: Garbage, model: str) -> None:
    """A streamed answer that starts in the provider's format and then breaks it."""
    events = _events(provider, garbage.text, model)
    opening, ending = events[:-_tail(provider)], events[-_tail(provider):]
    handler.send_response(200)
    handler.send_header("content-type", "text/event-stream")
    handler.send_header("cache-control", "no-cache")
    if garbage.kind == "broken":
        handler.send_header("content-length", "100000")
    handler.end_headers()
    for name, data in opening:
        handler.send_raw(_event(name, json.dumps(data)))
    if garbage.kind == "stall":
        time.sleep(garbage.seconds)  # silent mid-reply, then the connection closes
        return
    if garbage.kind in ("cut", "broken"):
        return  # the connection closes here: no end of the reply
    name = None if provider == "openai" else "content_block_delta"
    if garbage.kind == "bad_chunk":
        whole = json.dumps(opening[-1][1])
        handler.send_raw(_event(name, whole[: len(whole) // 2]))
    else:
        handler.send_raw(_event(name, json.dumps(WRONG_SHAPE)))
    for name, data in ending:
        handler.send_raw(_event(name, json.dumps(data)))
    if provider == "openai":
        handler.send_raw(b"data: [DONE]\n\n")


def _events(provider: str, text: str, model: str) -> list[tuple[str | None, Any]]:
    """Return one real turn's events (name, data) of `text`, without tool calls."""
    if provider == "openai":
        return [(None, chunk) for chunk in openai_chunks(text, [], model=model, chunk_chars=4,
                                                         usage=(11, 7))]
    return list(anthropic_events(text, [], model=model, chunk_chars=4, usage=(11, 7)))


def _tail(provider: str) -> int:
    """Count the events that end a turn: finish + usage; block stop, delta and stop."""
    return 2 if provider == "openai" else 3


def _event(name: str | None, data: str) -> bytes:
    """Encode one server-sent event whose data is `data` as given."""
    return ((f"event: {name}\n" if name else "") + f"data: {data}\n\n").encode()
