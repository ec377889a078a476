"""A scripted fake OpenAI + Anthropic HTTP server that the real SDKs talk to.

In a test::

    with FakeLLM([Turn("Hello", tool_calls=[("run_python", {"code": "1+1"})])]) as fake:
        client = openai.OpenAI(base_url=fake.openai_base_url, api_key="k")
        ...
        assert fake.requests[0].body["messages"][0]["role"] == "system"

As a process (browser tests, notebooks run by nbclient)::

    python -m tests.fakellm --port 0 --script turns.json   # prints the port, serves until killed

and from the test process: ``RemoteFakeLLM(f"http://127.0.0.1:{port}").push(Turn("hi"))``.
Script JSON: a list of ``"text"``, ``{"text": ..., "tool_calls": [[name, args], ...]}``
(args a JSON object, or a string sent as is, e.g. malformed JSON),
``{"fail": 500, "times": 2}``, ``{"hang": 3.0}`` or ``{"garbage": "html"}`` (a 200 that is
not the provider's wire format; see `Garbage` and `turn_from_json`).
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
import time
import urllib.request
from collections import deque
from collections.abc import Iterable
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakellm_garbage import send_garbage
from tests.fakellm_wire import (
    ANTHROPIC_PATH,
    JSON,
    OPENAI_PATH,
    Answer,
    Fail,
    Garbage,
    Hang,
    Recorded,
    ScriptedCall,
    Step,
    Turn,
    anthropic_events,
    anthropic_message,
    check_anthropic,
    check_openai,
    error_body,
    image_parts,
    openai_chunks,
    openai_completion,
    raw_arguments,
    turn_from_json,
    turn_to_json,
    unoffered_call,
    usage_of,
)

#: Where both APIs list their models.
MODELS_PATH = "/v1/models"

__all__ = ["ANTHROPIC_PATH", "OPENAI_PATH", "Answer", "Fail", "FakeLLM", "Garbage", "Hang",
           "Recorded", "RemoteFakeLLM", "ScriptedCall", "Step", "Turn", "turn_from_json",
           "turn_to_json"]


class FakeLLM:
    """Serve scripted turns on 127.0.0.1 in a background thread and record every request."""

    def __init__(self, script: Iterable[Step] = (), *, host: str = "127.0.0.1", port: int = 0,
                 strict: bool = True) -> None:
        self._queue: deque[list[Any]] = deque()  # [step, times left]
        self._requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._counter = 0
        self.strict = strict  # reject requests the real APIs would reject, with their 400
        #: Reject requests with image content with a 400, as a text-only model on vLLM does.
        self.text_only = False
        #: When set, requests with another key (bearer or x-api-key) get the providers' 401.
        self.api_key: str | None = None
        #: How many times the model list was asked for (`GET /v1/models`, not in `requests`).
        self.listings = 0
        #: When (time.monotonic()) each stream found its client gone: a write failed, so the
        #: client closed the connection before the stream's end; nothing more is sent to it.
        self.cut_streams: list[float] = []
        self._host = host
        self._server = _Server((host, port), _Handler)
        self._server.fake = self
        self._thread: threading.Thread | None = None
        self.push(*script)

    @property
    def port(self) -> int:
        """Return the port the server listens on."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """Return the server's root URL."""
        return f"http://{self._host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """Return the base URL for the OpenAI SDK (ends in /v1)."""
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """Return the base URL for the Anthropic SDK (it appends /v1/messages itself)."""
        return self.url

    def start(self) -> FakeLLM:
        """Start serving in a daemon thread."""
        # A short poll keeps stop() (and so every test's teardown) quick.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,),
                                        daemon=True, name=f"fakellm:{self.port}")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release any request held by a `Hang`."""
        self._stopping.set()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
        self._server.server_close()

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def push(self, *steps: Step) -> None:
        """Append steps to the script."""
        with self._lock:
            for step in steps:
                self._queue.append([step, getattr(step, "times", 1)])

    def reset(self) -> None:
        """Forget the remaining script, the recorded requests and any key required."""
        with self._lock:
            self._queue.clear()
            self._requests.clear()
            self.api_key = None
            self.listings = 0
            self.cut_streams.clear()

    def refuses(self, headers: dict[str, str]) -> bool:
        """Tell whether a request's key (headers in lower case) is not the one required."""
        bearer = headers.get("authorization", "").removeprefix("Bearer ").strip()
        return self.api_key is not None and self.api_key not in (
            bearer, headers.get("x-api-key", "").strip())

    @property
    def requests(self) -> list[Recorded]:
        """Return the model requests received so far, oldest first."""
        with self._lock:
            return list(self._requests)

    def calls(self, path: str | None = None) -> int:
        """Count the model requests received, optionally only those to `path`."""
        return sum(1 for r in self.requests if path is None or r.path == path)

    @property
    def remaining(self) -> int:
        """Count the script steps not used yet."""
        with self._lock:
            return len(self._queue)

    def _take(self, request: Recorded) -> tuple[Answer | None, int]:
        """Record `request` and take the next answer from the script; also return its number."""
        with self._lock:
            self._requests.append(request)
            self._counter += 1
            number, step = self._counter, None
            if self._queue:
                entry = self._queue[0]
                step = entry[0]
                entry[1] -= 1
                if entry[1] <= 0:
                    self._queue.popleft()
        if callable(step):
            return step(request), number
        return step, number

    def _answer(self, handler: _Handler, request: Recorded) -> None:
        """Answer one model request from the script."""
        provider = "openai" if request.path == OPENAI_PATH else "anthropic"
        body = request.body if isinstance(request.body, dict) else {}
        model = str(body.get("model", ""))
        check = check_openai if provider == "openai" else check_anthropic
        problem = check(body) if self.strict else None
        if self.text_only and image_parts(body):
            problem = (f"{model} is not a multimodal model: image input is not supported")
        if problem:
            with self._lock:
                self._requests.append(request)
            handler.send_json(400, error_body(provider, 400, f"fakellm: {problem}", model))
            return
        answer, number = self._take(request)
        refused = unoffered_call(answer, body) if isinstance(answer, Turn) else None
        if refused and self.strict:
            # As the real APIs do; a test must not make the model call a tool it was not given.
            handler.send_json(400, error_body(provider, 400, f"fakellm: {refused}", model))
        elif answer is None:
            text = f"fakellm: the script ran out of turns (request #{number} to {request.path})"
            # x-should-retry: false, so the SDK fails at once instead of retrying into the void.
            handler.send_json(500, error_body(provider, 500, text, model),
                              {"x-should-retry": "false"})
        elif isinstance(answer, Hang):
            self._stopping.wait(answer.seconds)
            handler.send_json(504, error_body(provider, 504, "fakellm: hung on purpose", model))
        elif isinstance(answer, Fail):
            self._fail(handler, provider, answer, model, bool(body.get("stream")))
        elif isinstance(answer, Garbage):
            send_garbage(handler, provider, answer, model, bool(body.get("stream")))
        else:
            self._turn(handler, provider, answer, body)

    def _fail(self, handler: _Handler, provider: str, fail: Fail, model: str,
              stream: bool) -> None:
        """Answer with an error status, or break a stream with the provider's error event."""
        err = error_body(provider, fail.status, fail.message, model)
        if not (fail.mid_stream and stream):
            headers = {} if fail.retry_after_ms is None else {
                "retry-after-ms": str(fail.retry_after_ms)}
            handler.send_json(fail.status, err, headers)
            return
        handler.start_sse()
        if provider == "openai":
            first = next(openai_chunks("", [], model=model, chunk_chars=4, usage=None))
            handler.send_event(None, first)
            handler.send_event(None, err)
        else:
            name, data = next(anthropic_events("", [], model=model, chunk_chars=4, usage=(1, 1)))
            handler.send_event(name, data)
            handler.send_event("error", err)

    def _turn(self, handler: _Handler, provider: str, turn: Turn, body: JSON) -> None:
        """Answer with one scripted turn, streamed or as one JSON body."""
        model = str(body.get("model", ""))
        prefix = "call_" if provider == "openai" else "toolu_"
        with self._lock:
            calls = []
            for name, args in turn.tool_calls:
                self._counter += 1
                calls.append((f"{prefix}{self._counter:04d}", name, raw_arguments(args)))
        usage = usage_of(turn)
        if not body.get("stream"):
            make = openai_completion if provider == "openai" else anthropic_message
            handler.send_json(200, make(turn.text, calls, model=model, usage=usage))
            return
        handler.start_sse()
        time.sleep(turn.first_delay)
        if provider == "openai":
            wants_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            for chunk in openai_chunks(turn.text, calls, model=model, chunk_chars=turn.chunk_chars,
                                       usage=usage if wants_usage and turn.usage else None):
                handler.send_event(None, chunk)
                if handler.gone:
                    break
                time.sleep(turn.chunk_delay)
            handler.send_raw(b"data: [DONE]\n\n")
        else:
            for name, data in anthropic_events(turn.text, calls, model=model,
                                               chunk_chars=turn.chunk_chars, usage=usage):
                handler.send_event(name, data)
                if handler.gone:
                    break
                time.sleep(turn.chunk_delay)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # a Hang must not keep stop() waiting
    # Many streams at once (a benchmark's hundreds): socketserver's backlog of 5 drops
    # connections, which the client retries only after seconds.
    request_queue_size = 256
    fake: FakeLLM


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"  # one request per connection; the end of a stream is EOF
    gone = False  # the client closed the connection while a stream was being sent

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        try:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"null")
        except ValueError:
            self.send_json(400, {"error": {"message": "fakellm: body is not JSON"}})
            return
        fake = self.server.fake
        if path == "/_script":
            steps = [turn_from_json(item) for item in body]
            fake.push(*steps)
            self.send_json(200, {"queued": len(steps), "remaining": fake.remaining})
        elif path == "/_reset":
            fake.reset()
            self.send_json(200, {"ok": True})
        elif path in (OPENAI_PATH, ANTHROPIC_PATH):
            headers = {k.lower(): v for k, v in self.headers.items()}
            if fake.refuses(headers):
                provider = "openai" if path == OPENAI_PATH else "anthropic"
                self.send_json(401, error_body(provider, 401, "fakellm: invalid API key", ""))
                return
            fake._answer(self, Recorded("POST", path, headers, body))
        else:
            self.send_json(404, {"error": {"message": f"fakellm: no route POST {path}"}})

    def do_GET(self) -> None:
        fake = self.server.fake
        if self.path == "/_requests":
            self.send_json(200, [asdict(r) for r in fake.requests])
        elif self.path == "/_health":
            self.send_json(200, {"ok": True, "remaining": fake.remaining})
        elif self.path.split("?", 1)[0] == MODELS_PATH:
            # Both APIs list models here (OpenAI's base URL ends in /v1, Anthropic's does not).
            with fake._lock:
                fake.listings += 1
            if fake.refuses({k.lower(): v for k, v in self.headers.items()}):
                self.send_json(401, error_body("openai", 401, "fakellm: invalid API key", ""))
                return
            model = {"id": "gpt-test", "object": "model", "created": 0, "owned_by": "fakellm",
                     "type": "model", "display_name": "gpt-test"}
            self.send_json(200, {"object": "list", "data": [model], "has_more": False})
        else:
            self.send_json(404, {"error": {"message": f"fakellm: no route GET {self.path}"}})

    def send_json(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
        payload = json.dumps(data).encode()
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
        except OSError:
            pass  # the client gave up (timeout test); nothing to tell it

    def start_sse(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()

    def send_event(self, name: str | None, data: JSON) -> None:
        head = f"event: {name}\n" if name else ""
        self.send_raw(f"{head}data: {json.dumps(data)}\n\n".encode())

    def send_raw(self, payload: bytes) -> None:
        if self.gone:
            return
        try:
            self.wfile.write(payload)
            self.wfile.flush()
        except OSError:
            self.gone = True
            fake = self.server.fake
            with fake._lock:
                fake.cut_streams.append(time.monotonic())

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean; every request is in `requests`


class RemoteFakeLLM:
    """Drive a fakellm running in another process (`python -m tests.fakellm`)."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def _call(self, method: str, path: str, data: Any = None) -> Any:
        payload = None if data is None else json.dumps(data).encode()
        req = urllib.request.Request(self.url + path, data=payload, method=method,
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def push(self, *steps: Answer) -> None:
        """Append steps to the remote script."""
        self._call("POST", "/_script", [turn_to_json(s) for s in steps])

    def reset(self) -> None:
        """Forget the remote script and recorded requests."""
        self._call("POST", "/_reset", {})

    @property
    def requests(self) -> list[Recorded]:
        """Return the model requests the remote server received."""
        return [Recorded(**r) for r in self._call("GET", "/_requests")]

    def calls(self, path: str | None = None) -> int:
        """Count the model requests received, optionally only those to `path`."""
        return sum(1 for r in self.requests if path is None or r.path == path)

    @property
    def remaining(self) -> int:
        """Count the remote script steps not used yet."""
        return int(self._call("GET", "/_health")["remaining"])


def main(argv: list[str] | None = None) -> None:
    """Serve a script until killed; print the port first so a parent can read it."""
    parser = argparse.ArgumentParser(prog="python -m tests.fakellm", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=0, help="port (default 0: any free port)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--script", help="JSON file with a list of turns")
    parser.add_argument("--lenient", action="store_true",
                        help="do not reject requests the real APIs would reject")
    parser.add_argument("--text-only", action="store_true",
                        help="reject image content with a 400, as a text-only model does")
    args = parser.parse_args(argv)
    steps: list[Step] = []
    if args.script:
        with open(args.script, encoding="utf-8") as f:
            steps = [turn_from_json(item) for item in json.load(f)]
    fake = FakeLLM(steps, host=args.host, port=args.port, strict=not args.lenient)
    fake.text_only = args.text_only
    print(fake.port, flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    fake.start()
    try:
        while not done.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        fake.stop()


if __name__ == "__main__":
    main()
