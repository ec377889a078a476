"""One answer, one JSON body: an MCP POST whose event stream holds only its response.

Streamable HTTP lets a server answer a JSON-RPC request with either `text/event-stream` or
`application/json`, and a client must take both. The SDK's server answers every request
with a stream, which lets a tool send progress and put questions (elicitation) before its
answer, and the SDK's client closes that stream once the answer came, before reading its
end, so each call costs a new TCP connection. The bridge (asgi.py) holds a POST's stream
back while it holds nothing but (the start of) the request's own response; once the stream
ends with that response alone, it goes as one JSON body, and the connection is kept. Anything
else first (a progress notification, a question, the keep-alive comment of a long run, an
event id) sends the stream as it is, from its start. Every check, the tool's run and its
result stay the SDK's: only the framing of a lone answer changes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

#: The end of an SSE event: a blank line (CRLF, LF or CR line endings).
EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
LINE_END = re.compile(r"\r\n|\n|\r")
#: The media types a client's Accept must allow for its answer to come as JSON.
JSON_TYPES = ("application/json", "application/*", "*/*")


def accepts_json(accept: str) -> bool:
    """Tell whether an Accept header allows `application/json` (as the SDK reads it)."""
    types = [part.split(";")[0].strip().lower() for part in accept.split(",")]
    return any(kind in JSON_TYPES for kind in types)


def request_id(body: bytes) -> str | int | None:
    """Return the id of the one JSON-RPC request in `body`, or None (anything else)."""
    try:
        message = json.loads(body or b"null")
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return None
    ident = message.get("id")
    return ident if isinstance(ident, str | int) and not isinstance(ident, bool) else None


def _fields(event: bytes) -> list[tuple[str, str]]:
    """Return an SSE event's field lines as (name, value) pairs."""
    lines = LINE_END.split(event.decode("utf-8"))
    pairs = []
    for line in lines:
        name, colon, value = line.partition(":")
        pairs.append((name, value[1:] if value.startswith(" ") else value) if colon
                     else (line, ""))
    return pairs


def response_of(event: bytes, ident: str | int) -> bytes | None:
    """Return the JSON of an event that is only the response to request `ident`, else None."""
    try:
        pairs = _fields(event)
    except UnicodeDecodeError:
        return None
    names = [name for name, _ in pairs]
    # `event: message` and one `data` line: no id (a resumable stream's), retry or comment.
    if sorted(names) != ["data", "event"] or ("event", "message") not in pairs:
        return None
    data = next(value for name, value in pairs if name == "data")
    try:
        message = json.loads(data)
    except ValueError:
        return None
    if not isinstance(message, dict) or "method" in message or message.get("id") != ident \
            or isinstance(message.get("id"), bool) or not ({"result", "error"} & message.keys()):
        return None
    return data.encode("utf-8")


@dataclass
class Framer:
    """Hold back one POST's event stream while it may still be a lone response."""

    ident: str | int
    buffered: bytearray = field(default_factory=bytearray)
    #: The response's JSON, once the stream holds exactly it.
    answer: bytes | None = None
    lone: bool = True

    def feed(self, chunk: bytes) -> bool:
        """Add a chunk; tell whether the stream may still be the response alone."""
        if chunk and self.answer is not None:  # anything after the response
            self.answer, self.lone = None, False
        self.buffered += chunk
        if self.lone and self.answer is None:
            end = EVENT_END.search(self.buffered)
            if end is not None:  # the first event is whole: the response, and only it?
                whole = end.end() == len(self.buffered)
                self.answer = response_of(bytes(self.buffered[:end.start()]), self.ident) \
                    if whole else None
                self.lone = self.answer is not None
        return self.lone

    def reply(self) -> bytes | None:
        """Return the response's JSON if the stream so far is that response alone."""
        return self.answer
