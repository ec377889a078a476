"""The tornado → ASGI bridge (jupyter_ci/mcp/asgi.py) under a live Jupyter server.

A toy ASGI app behind the bridge: the scope and body it sees, a streamed response that
reaches the client chunk by chunk, `http.disconnect` when the client hangs up, and a stream
that holds only its answer sent as JSON (framing.py).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from jupyter_server.utils import url_path_join
from tornado import web

from jupyter_ci.mcp.asgi import ASGIHandler, Message, Receive, Scope, Send

seen: dict[str, Any] = {}


async def toy(scope: Scope, receive: Receive, send: Send) -> None:
    """Echo the request, or stream two chunks and wait for the client to go."""
    request = await receive()
    if scope["query_string"] != b"stream=1":
        seen["scope"] = scope
        body = json.dumps({"method": scope["method"], "path": scope["path"],
                           "query": scope["query_string"].decode(),
                           "body": request["body"].decode(),
                           "header": dict(scope["headers"]).get(b"x-test", b"").decode()})
        await send({"type": "http.response.start", "status": 202,
                    "headers": [(b"content-type", b"application/json"), (b"x-toy", b"1")]})
        await send({"type": "http.response.body", "body": body.encode()})
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream")]})
    await send({"type": "http.response.body", "body": b"data: one\n\n", "more_body": True})
    await seen["go_on"].wait()
    await send({"type": "http.response.body", "body": b"data: two\n\n", "more_body": True})
    message: Message = await receive()  # blocks until the client hangs up
    seen["last"] = message["type"]
    seen["gone"].set()


ANSWER = b'{"jsonrpc":"2.0","id":5,"result":{}}'
NOTE = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{}}'


async def answering(scope: Scope, receive: Receive, send: Send) -> None:
    """Answer as the SDK's transport does: an event stream, a note first if asked."""
    await receive()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), (b"x-toy", b"2")]})
    for data in ([NOTE] if scope["query_string"] == b"note=1" else []) + [ANSWER]:
        await send({"type": "http.response.body", "more_body": True,
                    "body": b"event: message\r\ndata: " + data + b"\r\n\r\n"})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


class ToyHandler(ASGIHandler):
    app = staticmethod(toy)

    @web.authenticated
    async def post(self) -> None:
        await self.serve()


class AnsweringHandler(ToyHandler):
    app = staticmethod(answering)
    json_replies = True


@pytest.fixture
def toy_url(jp_serverapp: Any, http_server_client: Any, http_server_port: tuple[Any, int],
            jp_base_url: str) -> tuple[str, dict[str, str]]:
    route = url_path_join(jp_base_url, "/toy-asgi")
    jp_serverapp.web_app.add_handlers(".*$", [(route, ToyHandler),
                                              (route + "-answers", AnsweringHandler)])
    token = str(jp_serverapp.identity_provider.token)
    return (f"http://127.0.0.1:{http_server_port[-1]}{route}",
            {"Authorization": f"token {token}"})


async def test_the_app_sees_the_request_and_its_reply_goes_back(
    toy_url: tuple[str, dict[str, str]],
) -> None:
    url, auth = toy_url
    async with httpx.AsyncClient() as client:
        reply = await client.post(f"{url}?a=1&b=2", content=b'{"x": 1}',
                                  headers={**auth, "X-Test": "yes"})
    assert reply.status_code == 202 and reply.headers["x-toy"] == "1"
    assert reply.headers["content-type"] == "application/json"
    assert reply.json() == {"method": "POST", "path": "/" + url.split("/", 3)[3],
                            "query": "a=1&b=2",
                            "body": '{"x": 1}', "header": "yes"}
    scope = seen["scope"]
    assert scope["type"] == "http" and scope["scheme"] == "http"
    assert scope["client"][0] == "127.0.0.1" and scope["server"][1] == int(
        url.split(":")[2].split("/")[0])


async def test_a_stream_is_flushed_chunk_by_chunk_and_a_hang_up_is_told(
    toy_url: tuple[str, dict[str, str]],
) -> None:
    url, auth = toy_url
    seen["go_on"], seen["gone"] = asyncio.Event(), asyncio.Event()
    async with httpx.AsyncClient() as client, client.stream(
            "POST", f"{url}?stream=1", headers=auth) as reply:
        assert reply.headers["content-type"] == "text/event-stream"
        chunks = reply.aiter_bytes()
        # The first chunk arrives while the app still waits: it was flushed, not buffered.
        assert await asyncio.wait_for(chunks.__anext__(), 10) == b"data: one\n\n"
        seen["go_on"].set()
        assert await asyncio.wait_for(chunks.__anext__(), 10) == b"data: two\n\n"
    await asyncio.wait_for(seen["gone"].wait(), 10)
    assert seen["last"] == "http.disconnect"


async def test_the_bridge_keeps_jupyters_auth(toy_url: tuple[str, dict[str, str]]) -> None:
    url, _ = toy_url
    async with httpx.AsyncClient() as client:
        refused = await client.post(url, content=b"{}")
    assert refused.status_code == 403


async def test_a_stream_holding_only_its_answer_goes_as_one_json_body(
    toy_url: tuple[str, dict[str, str]],
) -> None:
    url, auth = toy_url
    request = b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call"}'
    both = {**auth, "Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient() as client:
        lone = await client.post(f"{url}-answers", content=request, headers=both)
        noted = await client.post(f"{url}-answers?note=1", content=request, headers=both)
        streamed = await client.post(f"{url}-answers", content=request,
                                     headers={**auth, "Accept": "text/event-stream"})
    assert lone.headers["content-type"] == "application/json" and lone.content == ANSWER
    assert lone.headers["content-length"] == str(len(ANSWER))  # the connection is kept
    assert lone.headers["x-toy"] == "2"  # the app's other headers go too
    # Anything before the answer (an ask's progress), or a client that takes no JSON: the
    # stream as the app sent it.
    assert noted.headers["content-type"] == "text/event-stream"
    assert noted.text.count("event: message") == 2 and NOTE.decode() in noted.text
    assert streamed.headers["content-type"] == "text/event-stream"
    assert ANSWER.decode() in streamed.text
