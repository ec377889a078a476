"""Finding 6: the model service cannot be made to buffer huge bodies or forge log lines.

A page in the user's browser (or any local process) can reach the service without a
credential: a 300 MB POST used to be read into memory before the 403. A `%0A` in a path
used to start a new line in the server log. And a provider's cookies or headers must not
travel on: to the kernel, or to the other provider.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any
from urllib.parse import urlsplit

import pytest

from jupyter_ci.models.broker import ENV_URL
from jupyter_ci.models.turn_wire import TURN_PATH
from jupyter_ci.server.broker.service_handlers import TurnHandler
from tests.service_fixtures import (
    Upstream,
    bearer,
    broker_of,
    hang_up_after_first_event,
    service_fetch,
    told,
    turn_body,
    turn_fetch,
)

# Under the test server's own body limit (tornado's default, 100 MB; Jupyter's is 512 MB),
# so only the service can refuse it early, and over it.
HUGE = 90 * 1024 * 1024
HUGER = 300 * 1024 * 1024


@pytest.fixture
def body_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record the size of every body chunk the turn handler is given."""
    seen: list[int] = []
    original = TurnHandler.data_received

    def spy(self: TurnHandler, chunk: bytes) -> Any:
        seen.append(len(chunk))
        return original(self, chunk)

    monkeypatch.setattr(TurnHandler, "data_received", spy)
    return seen


async def raw_request(path: str, headers: dict[str, str], body: list[bytes],
                      timeout: float = 30) -> tuple[int, dict[str, str], bytes, float]:
    """Send a request as given, reading the answer meanwhile; return it and seconds taken."""
    url = urlsplit(told().kernels[ENV_URL])
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    started = time.monotonic()
    sent = {"Host": url.netloc, "Connection": "close", **headers}
    head = "".join(f"{k}: {v}\r\n" for k, v in sent.items())
    received = bytearray()

    async def read() -> None:
        try:
            while data := await reader.read(65536):
                received.extend(data)
        except ConnectionError:
            pass  # a reset after the answer: the service hung up on the rest of the body

    reading = asyncio.ensure_future(read())
    try:
        writer.write(f"POST {url.path}/{path} HTTP/1.1\r\n{head}\r\n".encode())
        for part in body:
            writer.write(part)
            await writer.drain()
    except ConnectionError:
        pass  # answered and closed before taking the whole body: the point of the test
    await asyncio.wait_for(reading, timeout)  # the service closes after answering
    writer.close()
    status_line, _, rest = bytes(received).partition(b"\r\n")
    header_block, _, payload = rest.partition(b"\r\n\r\n")
    fields = dict(line.decode().split(": ", 1) for line in header_block.split(b"\r\n") if line)
    return int(status_line.split()[1]), fields, payload, time.monotonic() - started


@pytest.mark.parametrize("size", [HUGE, HUGER])
async def test_unauthenticated_huge_body_is_refused_before_it_is_read(
    live_server: Any, upstream: Upstream, body_reads: list[int], size: int, capture: Any
) -> None:
    status, headers, payload, _ = await raw_request(
        TURN_PATH, {"Content-Length": str(size), "Content-Type": "application/json"},
        [b"x" * 4096])
    assert status == 403 and headers["Content-Type"] == "application/json"
    assert "credential of a running kernel" in json.loads(payload)["error"]["message"]
    # Answered while most of the body was never sent: it did not wait for it (a hang guard,
    # raw_request's timeout, catches a server that would).
    assert body_reads == [] and upstream.requests == []


async def test_authenticated_body_over_the_cap_is_refused_before_it_is_read(
    live_server: Any, upstream: Upstream, token: str, body_reads: list[int], capture: Any
) -> None:
    status, _, payload, _ = await raw_request(
        TURN_PATH, {**bearer(token), "Content-Length": str(HUGE)}, [b"{}"])
    assert status == 413 and body_reads == []
    message = json.loads(payload)["error"]["message"]
    assert "c.JupyterCI.broker_max_body_bytes = 33554432" in message
    assert upstream.requests == []


def chunked(data: bytes, size: int) -> list[bytes]:
    """Encode `data` as HTTP/1.1 chunks of `size` bytes, with the closing chunk."""
    parts = [b"%x\r\n%s\r\n" % (len(data[i:i + size]), data[i:i + size])
             for i in range(0, len(data), size)]
    return [*parts, b"0\r\n\r\n"]


@pytest.mark.parametrize("ci_config", [{"broker_max_body_bytes": 1000}])
async def test_chunked_body_stops_at_the_cap(
    live_server: Any, upstream: Upstream, token: str, body_reads: list[int], ci_config: Any,
    capture: Any,
) -> None:
    headers = {**bearer(token), "Transfer-Encoding": "chunked"}
    status, _, payload, _ = await raw_request(
        TURN_PATH, headers, chunked(b"a" * (4 << 20), 4096))
    assert status == 413 and "broker_max_body_bytes = 1000" in payload.decode()
    # Tornado hands the body over in pieces of up to 64 KiB; none is taken after the cap.
    assert sum(body_reads) <= 1000 + 65536 and upstream.requests == []
    # Under the cap, a chunked body is taken whole.
    body = json.dumps(turn_body(content="b" * 300)).encode()
    status, _, payload, _ = await raw_request(TURN_PATH, headers, chunked(body, 100))
    assert status == 200 and b'"reply"' in payload
    assert json.loads(upstream.requests[-1]["body"])["messages"][-1]["content"] == "b" * 300


FORGED = "[W 2026-01-01 00:00:00.000 ServerApp] forged-line: admin logged in"


@pytest.mark.parametrize("with_token", [False, True])
@pytest.mark.parametrize("path", ["turn%0A{}", "turn%0D%0A{}", "_info%0A{}",
                                  "openai%0A{}/v1/messages"])
async def test_a_line_break_in_the_path_forges_no_log_line(
    live_server: Any, token: str, path: str, with_token: bool, capture: Any
) -> None:
    headers = bearer(token) if with_token else {}
    response = await service_fetch(path.format(FORGED.replace(" ", "%20")), headers,
                                   method="GET")
    assert response.code == 404
    assert "forged-line" in capture.text, "the attempt itself is logged"
    for record in capture.records:
        assert "\n" not in record.getMessage() or "forged-line" not in record.getMessage()
    assert not any(line.startswith("[W 2026-01-01") for line in capture.text.splitlines())


async def test_a_line_break_in_a_model_name_forges_no_log_line(
    live_server: Any, upstream: Upstream, token: str, capture: Any
) -> None:
    # The service logs the model of a turn the kernel hung up on.
    upstream.gate = asyncio.Event()  # never set: the kernel hangs up mid-stream
    await hang_up_after_first_event(turn_body(f"openai:gpt-test\n{FORGED}"), token)
    for _ in range(100):
        if "hung up" in capture.text:
            break
        await asyncio.sleep(0.02)
    assert "forged-line" in capture.text, "the turn itself is logged"
    assert not any(line.startswith("[W 2026-01-01") for line in capture.text.splitlines())


async def test_a_providers_cookies_and_headers_go_nowhere(
    live_server: Any, upstream: Upstream, token: str, capture: Any
) -> None:
    upstream.stream_headers = {"Set-Cookie": "upstream_session=abc123; Path=/",
                               "Retry-After": "7", "OpenAI-Organization": "org-of-the-server"}
    first = await service_fetch(TURN_PATH, bearer(token), json.dumps(turn_body()).encode())
    assert first.code == 200
    for name in upstream.stream_headers:
        assert name not in first.headers
    assert "org-of-the-server" not in first.body.decode()
    # Both fake providers live on 127.0.0.1: a cookie kept across providers would match.
    other = broker_of(live_server).issue("another-kernel")
    assert (await turn_fetch(turn_body("anthropic:claude-test"), other))[0] == 200
    assert ["Cookie" in r["headers"] for r in upstream.requests] == [False, False]
