"""Count the tokens a provider reports in a relayed reply, for the broker's token budget.

OpenAI streams report usage in a last chunk (`usage`, when `stream_options.include_usage`
is set) and the Responses API in `response.completed`; Anthropic streams give input tokens
in `message_start` and a running output count in `message_delta`; non-streamed replies
carry a top-level `usage`. Counts are cumulative in every format, so the largest value of
each field seen is the reply's total.
"""

from __future__ import annotations

import json
from typing import Any

from jupyter_ci.server.errors import BadRequest
from jupyter_ci.server.jsonbody import BadJSON, NotJSON, parse_json

#: Bytes of a non-streamed JSON reply kept to read its usage; larger replies count as 0.
MAX_JSON_BYTES = 8 << 20
#: Longest unfinished SSE line kept between chunks (a usage line is a few hundred bytes).
MAX_LINE_BYTES = 1 << 20
#: Rough bytes of prompt per token, for streams that end without a usage report.
BYTES_PER_TOKEN = 4
_INPUT_FIELDS = ("prompt_tokens", "input_tokens", "cache_creation_input_tokens",
                 "cache_read_input_tokens")
_OUTPUT_FIELDS = ("completion_tokens", "output_tokens")


class UsageMeter:
    """Read token usage out of one relayed reply as its chunks pass by."""

    def __init__(self) -> None:
        self.input_tokens = 0
        self.output_tokens = 0
        self.reported = False
        self.streamed = False
        self._rest = b""
        self._json: bytearray | None = None

    def start(self, status: int, content_type: str) -> None:
        """Note the reply's status and type before its first chunk."""
        if status >= 400:
            return  # errors carry no usage; nothing to buffer
        if content_type.startswith("text/event-stream"):
            self.streamed = True
        elif "json" in content_type:
            self._json = bytearray()

    def feed(self, chunk: bytes) -> None:
        """Take one chunk of the reply."""
        if self.streamed:
            self._feed_stream(chunk)
        elif self._json is not None:
            self._json += chunk
            if len(self._json) > MAX_JSON_BYTES:
                self._json = None

    def finish(self, request_bytes: int = 0) -> int:
        """Return the tokens the reply used, as reported, or an estimate for a cut stream."""
        if self._json:
            self._read(bytes(self._json))
            self._json = None
        if self.streamed and not self.reported:
            # Cut before its usage came (or from a server that reports none): count the
            # prompt at about 4 bytes a token, so hanging up early is not free.
            return request_bytes // BYTES_PER_TOKEN
        return self.input_tokens + self.output_tokens

    def _feed_stream(self, chunk: bytes) -> None:
        """Read complete `data:` lines that mention usage; keep an unfinished last line."""
        data = self._rest + chunk
        # Fast path: most chunks are text deltas without usage.
        if b'"usage"' not in data:
            self._rest = data[data.rfind(b"\n") + 1:][-MAX_LINE_BYTES:]
            return
        *lines, rest = data.split(b"\n")
        self._rest = rest[-MAX_LINE_BYTES:]
        for line in lines:
            if line.startswith(b"data:") and b'"usage"' in line:
                self._read(line[5:])

    def _read(self, text: bytes) -> None:
        """Take the usage out of one JSON event or body, ignoring anything unreadable."""
        try:
            # surrogates: usage is read from the event whatever text it also carries.
            event = parse_json(text, surrogates=True)
        except BadJSON:
            return  # unreadable (or nested past the limit): it reports no usage we can read
        usage = _usage_of(event)
        if usage is None:
            return
        self.reported = True
        self.input_tokens = max(self.input_tokens, _sum(usage, _INPUT_FIELDS[:2])
                                + _sum(usage, _INPUT_FIELDS[2:]))
        self.output_tokens = max(self.output_tokens, _sum(usage, _OUTPUT_FIELDS))


def _usage_of(event: Any) -> dict[str, Any] | None:
    """Find the usage object of an event: its own, its message's or its response's."""
    if not isinstance(event, dict):
        return None
    for holder in (event, event.get("message"), event.get("response")):
        if isinstance(holder, dict) and isinstance(holder.get("usage"), dict):
            return dict(holder["usage"])
    return None


def _sum(usage: dict[str, Any], names: tuple[str, ...]) -> int:
    """Add the integer fields among `names` (providers send null for absent ones)."""
    return sum(v for name in names if isinstance(v := usage.get(name), int) and v > 0)


def ask_for_usage(body: bytes) -> bytes:
    """Make a streamed Chat Completions request report its usage (it is opt-in there).

    Raise BadRequest for a body parsed only to be refused (not UTF-8, nested too deep):
    passed on unchanged, it would not report its usage.
    """
    try:
        request = parse_json(body, surrogates=True)
    except NotJSON:
        return body  # the provider will refuse it; nothing to count
    except BadJSON as err:
        raise BadRequest(f"The request body is {err}.") from None
    if not isinstance(request, dict) or request.get("stream") is not True:
        return body
    options = request.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") is True:
        return body
    request["stream_options"] = {**(options if isinstance(options, dict) else {}),
                                 "include_usage": True}
    return json.dumps(request).encode()
