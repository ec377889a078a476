"""What the fake model server says: script steps and the OpenAI and Anthropic wire formats."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

JSON = dict[str, Any]
#: One scripted tool call: (name, arguments as a dict, or as raw text that may be malformed).
ScriptedCall = tuple[str, "dict[str, Any] | str"]

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"

_OPENAI_ERRORS = {
    400: ("invalid_request_error", None, "Invalid request."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    403: ("invalid_request_error", "unsupported_country_region_territory", "Forbidden."),
    404: ("invalid_request_error", "model_not_found", "The model `{model}` does not exist "
          "or you do not have access to it."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests."),
}
_ANTHROPIC_ERRORS = {
    400: ("invalid_request_error", "Invalid request."),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Your API key does not have permission to use this resource."),
    404: ("not_found_error", "model: {model}"),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of request tokens has exceeded your rate limit."),
    529: ("overloaded_error", "Overloaded"),
}


@dataclass
class Turn:
    """One model answer: streamed text, then tool calls (args as dict, or raw text).

    `input_tokens` counts every prompt token, `cached_tokens` of them read from the prompt
    cache, as jupyter-ci reads both providers; on Anthropic's wire `input_tokens` leaves the
    cached ones out (they are `cache_read_input_tokens`), as the real API does.
    """

    text: str = ""
    tool_calls: Sequence[ScriptedCall] = ()
    input_tokens: int = 11
    output_tokens: int = 7
    cached_tokens: int = 0
    #: True: a misbehaving model that may call tools the request did not offer (otherwise
    #: the fake refuses such a script with an HTTP 400, so tests call only offered tools).
    unoffered_tools: bool = False
    chunk_chars: int = 4  # small pieces so every answer really streams in several chunks
    chunk_delay: float = 0.0  # seconds between chunks, to watch streaming in a browser
    first_delay: float = 0.0  # seconds before the first chunk: a model that thinks first
    usage: bool = True  # False: omit usage, as some OpenAI-compatible servers do


@dataclass
class Fail:
    """Answer `times` requests with HTTP `status` and the provider's JSON error body."""

    status: int = 500
    times: int = 1
    message: str = ""
    # The SDKs honour retry-after-ms, so a retried failure costs a millisecond, not 0.5 s.
    retry_after_ms: int | None = 1
    mid_stream: bool = False  # stream 200 and a first chunk, then the provider's error event


@dataclass
class Hang:
    """Wait `seconds` before answering (HTTP 504 if the client is still there)."""

    seconds: float
    times: int = 1


@dataclass
class Garbage:
    """Answer HTTP 200 with something that is not the provider's wire format.

    kind: "html" (a proxy's or portal's HTML page), "not_json" (plain text), "bad_chunk"
    (a stream whose second event's data is cut-off JSON; a non-streaming body that is
    cut-off JSON), "wrong_shape" (valid JSON that is no chunk, event or completion), "cut"
    (a stream that stops mid-reply with no end: no finish_reason, message_stop or [DONE];
    a non-streaming body shorter than its Content-Length), "broken" (a stream announced
    with a Content-Length it never delivers, so the client sees a protocol error), "stall"
    (a stream that starts and then sends nothing for `seconds`, then closes).
    """

    kind: str = "html"
    times: int = 1
    #: How long a "stall" stays silent mid-reply.
    seconds: float = 3.0
    #: Text streamed (in the provider's real format) before the garbage, if any.
    text: str = "Let me look at the data"


GARBAGE_KINDS = ("html", "not_json", "bad_chunk", "wrong_shape", "cut", "broken")


@dataclass(frozen=True)
class Recorded:
    """One request the fake received."""

    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: Any

    @property
    def messages(self) -> list[JSON]:
        """Return the request's `messages` list."""
        return list(self.body.get("messages", [])) if isinstance(self.body, dict) else []


Answer = Turn | Fail | Hang | Garbage
#: A script entry: an answer, or a function choosing one from the request it answers.
Step = Answer | Callable[[Recorded], Answer]


def turn_from_json(item: Any) -> Answer:
    """Build a step from its JSON form: "text", {"text", "tool_calls"}, {"fail"}, {"hang"},
    {"garbage": kind}."""
    if isinstance(item, str):
        return Turn(text=item)
    if "fail" in item:
        options = {k: v for k, v in item.items() if k != "fail"}
        return Fail(status=int(item["fail"]), **options)
    if "hang" in item:
        return Hang(seconds=float(item["hang"]), times=int(item.get("times", 1)))
    if "garbage" in item:
        options = {k: v for k, v in item.items() if k != "garbage"}
        return Garbage(kind=str(item["garbage"]), **options)
    calls = [(str(c["name"]), c["arguments"]) if isinstance(c, dict) else (str(c[0]), c[1])
             for c in item.get("tool_calls", [])]
    return Turn(**{**item, "tool_calls": calls})


def turn_to_json(step: Answer) -> Any:
    """Return the JSON form of a step (callables cannot be sent to another process)."""
    if isinstance(step, Fail):
        data = asdict(step)
        return {"fail": data.pop("status"), **data}
    if isinstance(step, Hang):
        return {"hang": step.seconds, "times": step.times}
    if isinstance(step, Garbage):
        data = asdict(step)
        return {"garbage": data.pop("kind"), **data}
    if isinstance(step, Turn):
        return {**asdict(step), "tool_calls": [list(call) for call in step.tool_calls]}
    raise TypeError(f"cannot send {step!r} to a fakellm process")


def raw_arguments(args: dict[str, Any] | str) -> str:
    """Return a scripted call's arguments as the JSON text the model would stream."""
    return args if isinstance(args, str) else json.dumps(args)


def pieces(text: str, size: int) -> list[str]:
    """Split text into chunks of `size` characters (at least one chunk if text is non-empty)."""
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def error_body(provider: str, status: int, message: str, model: str) -> JSON:
    """Build the JSON error body each provider sends with an HTTP error status."""
    if provider == "openai":
        kind, code, default = _OPENAI_ERRORS.get(
            status, ("server_error", None, "The server had an error while processing your request.")
        )
        text = message or default.format(model=model)
        return {"error": {"message": text, "type": kind, "param": None, "code": code}}
    fallback = ("api_error", "Internal server error") if status >= 500 else (
        "invalid_request_error", "Invalid request.")
    kind, default = _ANTHROPIC_ERRORS.get(status, fallback)
    text = message or default.format(model=model)
    return {"type": "error", "error": {"type": kind, "message": text}, "request_id": "req_fake"}


def usage_of(turn: Turn) -> tuple[int, int, int]:
    """Return a turn's (input, output, cached) tokens, as the wire builders take them."""
    return turn.input_tokens, turn.output_tokens, turn.cached_tokens


def openai_usage(usage: tuple[int, ...]) -> JSON:
    """Build Chat Completions' `usage`, cache reads in its prompt_tokens_details."""
    cached = usage[2] if len(usage) > 2 else 0
    return {"prompt_tokens": usage[0], "completion_tokens": usage[1],
            "total_tokens": usage[0] + usage[1],
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0,
                                          "rejected_prediction_tokens": 0}}


def anthropic_usage(usage: tuple[int, ...], output_tokens: int) -> JSON:
    """Build a Messages `usage`: its input_tokens leave out the tokens read from the cache."""
    cached = usage[2] if len(usage) > 2 else 0
    return {"input_tokens": usage[0] - cached, "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": cached}


def offered_tools(body: JSON) -> list[str]:
    """Return the names of the tools a request offers, in either wire format."""
    tools = body.get("tools") or []
    return [str((t.get("function") or {}).get("name") if "function" in t else t.get("name"))
            for t in tools if isinstance(t, dict)]


def unoffered_call(turn: Turn, body: JSON) -> str | None:
    """Say which scripted tool call names a tool the request does not offer, or None."""
    offered = offered_tools(body)
    if turn.unoffered_tools:
        return None
    for name, _ in turn.tool_calls:
        if name not in offered:
            return (f"the script calls tool {name!r}, which this request does not offer "
                    f"(offered: {', '.join(offered) or 'none'}): tool use names an "
                    "unknown tool")
    return None


def openai_chunks(
    text: str, calls: Sequence[tuple[str, str, str]], *, model: str, chunk_chars: int,
    usage: tuple[int, ...] | None,
) -> Iterator[JSON]:
    """Yield the `chat.completion.chunk`s of one streamed turn; calls are (id, name, args)."""
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model, "system_fingerprint": "fp_fake"}
    # With include_usage, every chunk carries "usage": null except the final usage-only one.
    extra = {"usage": None} if usage else {}

    def chunk(delta: JSON, finish: str | None = None) -> JSON:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**base, "choices": [choice], **extra}

    yield chunk({"role": "assistant", "content": "", "refusal": None})
    for piece in pieces(text, chunk_chars):
        yield chunk({"content": piece})
    for index, (call_id, name, args) in enumerate(calls):
        # The real API sends id, type and name once, then arguments in many small pieces.
        head = {"index": index, "id": call_id, "type": "function",
                "function": {"name": name, "arguments": ""}}
        yield chunk({"tool_calls": [head]})
        for piece in pieces(args, chunk_chars):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls" if calls else "stop")
    if usage:
        yield {**base, "choices": [], "usage": openai_usage(usage)}


def openai_completion(
    text: str, calls: Sequence[tuple[str, str, str]], *, model: str, usage: tuple[int, ...]
) -> JSON:
    """Build the non-streaming `chat.completion` object of one turn."""
    message: JSON = {"role": "assistant", "content": text or None, "refusal": None}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in calls
        ]
    choice = {"index": 0, "message": message, "logprobs": None,
              "finish_reason": "tool_calls" if calls else "stop"}
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [choice], "usage": openai_usage(usage)}


def anthropic_events(
    text: str, calls: Sequence[tuple[str, str, str]], *, model: str, chunk_chars: int,
    usage: tuple[int, ...],
) -> Iterator[tuple[str, JSON]]:
    """Yield the (event name, data) pairs of one streamed Messages turn."""
    start_usage = anthropic_usage(usage, 1)
    message: JSON = {"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
               "content": [], "stop_reason": None, "stop_sequence": None, "usage": start_usage}
    yield "message_start", {"type": "message_start", "message": message}
    yield "ping", {"type": "ping"}
    index = 0
    if text:
        yield "content_block_start", {"type": "content_block_start", "index": index,
                                      "content_block": {"type": "text", "text": ""}}
        for piece in pieces(text, chunk_chars):
            yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                          "delta": {"type": "text_delta", "text": piece}}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
        index += 1
    for call_id, name, args in calls:
        block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        yield "content_block_start", {"type": "content_block_start", "index": index,
                                      "content_block": block}
        # The real API opens every tool_use block with an empty partial_json.
        for piece in ["", *pieces(args, chunk_chars)]:
            delta = {"type": "input_json_delta", "partial_json": piece}
            yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                          "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
        index += 1
    stop: JSON = {"stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None}
    # Cumulative counts, input and cache reads included, as the current API sends them.
    yield "message_delta", {"type": "message_delta", "delta": stop,
                            "usage": anthropic_usage(usage, usage[1])}
    yield "message_stop", {"type": "message_stop"}


def anthropic_message(
    text: str, calls: Sequence[tuple[str, str, str]], *, model: str, usage: tuple[int, ...]
) -> JSON:
    """Build the non-streaming Messages response of one turn."""
    content: list[JSON] = [{"type": "text", "text": text}] if text else []
    for call_id, name, args in calls:
        try:
            parsed: Any = json.loads(args)
        except ValueError:
            parsed = args  # malformed input cannot be an object; hand it over as it was scripted
        content.append({"type": "tool_use", "id": call_id, "name": name, "input": parsed})
    return {"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": "tool_use" if calls else "end_turn",
            "stop_sequence": None, "usage": anthropic_usage(usage, usage[1])}


def check_openai(body: JSON) -> str | None:
    """Return what the real Chat Completions API would reject in `body`, or None."""
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "you must provide a model parameter"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty array"
    for tool in body.get("tools") or []:
        if tool.get("type") != "function" or "name" not in tool.get("function", {}):
            return "tools must be {type: function, function: {name, ...}}"
    pending: list[str] = []
    for n, msg in enumerate(messages):
        role = msg.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            return f"messages[{n}].role: invalid value {role!r}"
        problem = _check_openai_content(n, role, msg.get("content"))
        if problem:
            return problem
        if role == "tool":
            if msg.get("tool_call_id") not in pending:
                return (f"messages[{n}]: messages with role 'tool' must be a response to a "
                        "preceding message with 'tool_calls'.")
            pending.remove(msg["tool_call_id"])
            continue
        if pending:
            return ("An assistant message with 'tool_calls' must be followed by tool messages "
                    "responding to each 'tool_call_id'. The following tool_call_ids did not "
                    f"have response messages: {', '.join(pending)}")
        pending = [c["id"] for c in msg.get("tool_calls") or []] if role == "assistant" else []
    return None


def check_anthropic(body: JSON) -> str | None:
    """Return what the real Messages API would reject in `body`, or None."""
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: Field required"
    if not isinstance(body.get("max_tokens"), int):
        return "max_tokens: Field required"
    for tool in body.get("tools") or []:
        if "name" not in tool or "input_schema" not in tool:
            return "tools: each tool needs name and input_schema"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    expected_role, pending = "user", set[str]()
    for n, msg in enumerate(messages):
        if msg.get("role") != expected_role:
            return (f"messages.{n}: roles must alternate between \"user\" and \"assistant\", "
                    "starting with \"user\"")
        expected_role = "assistant" if expected_role == "user" else "user"
        blocks = msg.get("content")
        if isinstance(blocks, str):
            blocks = [{"type": "text", "text": blocks}]
        problem = _check_blocks(n, blocks, pending)
        if problem:
            return problem
        pending = {b["id"] for b in blocks if b.get("type") == "tool_use"}
    return None


def _check_blocks(n: int, blocks: list[JSON], pending: set[str]) -> str | None:
    """Check one message's content blocks against the tool_use ids left open before it."""
    answered = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
    if set(answered) - pending:
        return f"messages.{n}: unexpected `tool_use_id` found in `tool_result` blocks"
    if pending - set(answered):
        return (f"messages.{n}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(sorted(pending - set(answered)))}")
    kinds = [b.get("type") for b in blocks]
    if kinds[: len(answered)] != ["tool_result"] * len(answered):
        return f"messages.{n}: tool_result blocks must come before any other content"
    for block in [*blocks, *(b for r in blocks if r.get("type") == "tool_result"
                             and isinstance(r.get("content"), list) for b in r["content"])]:
        if block.get("type") == "image":
            problem = _check_image_block(n, block)
            if problem:
                return problem
        if block.get("type") == "text" and not block.get("text"):
            return f"messages.{n}: text content blocks must be non-empty"
        if block.get("type") == "tool_use" and not isinstance(block.get("input"), dict):
            return f"messages.{n}: tool_use.input: Input should be a valid dictionary"
    return None


_IMAGE_MEDIA = ("image/png", "image/jpeg", "image/gif", "image/webp")


def _check_openai_content(n: int, role: str, content: Any) -> str | None:
    """Check a Chat Completions message's content parts: images only in user messages."""
    if not isinstance(content, list):
        return None
    for part in content:
        kind = part.get("type")
        if kind == "image_url" and role != "user":
            return (f"messages[{n}]: Image URLs are only allowed for messages with role "
                    "'user'")
        if kind == "image_url":
            url = str((part.get("image_url") or {}).get("url", ""))
            media = url.split(";", 1)[0].removeprefix("data:")
            if not url.startswith(("http://", "https://")) and (
                    not url.startswith("data:") or media not in _IMAGE_MEDIA
                    or ";base64," not in url):
                return f"messages[{n}]: Invalid image URL: expected a base64 data URL"
        elif kind != "text":
            return f"messages[{n}]: invalid content part type {kind!r}"
    return None


def _check_image_block(n: int, block: JSON) -> str | None:
    """Check an Anthropic image block (top level or inside a tool_result)."""
    source = block.get("source") or {}
    if source.get("type") != "base64" or source.get("media_type") not in _IMAGE_MEDIA:
        return f"messages.{n}: image.source: expected base64 data with a supported media_type"
    if not isinstance(source.get("data"), str) or not source["data"]:
        return f"messages.{n}: image.source.data: Field required"
    return None


def image_parts(body: JSON) -> list[JSON]:
    """Return every image part of a request, in either wire format."""
    found: list[JSON] = []

    def walk(blocks: Any) -> None:
        if isinstance(blocks, list):
            for block in blocks:
                if isinstance(block, dict) and block.get("type") in ("image", "image_url"):
                    found.append(block)
                elif isinstance(block, dict):
                    walk(block.get("content"))

    for msg in body.get("messages") or []:
        walk(msg.get("content"))
    return found
