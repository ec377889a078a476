"""A box whose network is an allowlist: the egress proxy and what it lets through.

`c.JupyterCI.sandbox_network = ["host", "host:port", ...]` lets a sandboxed kernel reach
those hosts through a proxy the server runs, and nothing else. Its forwarder, real boxed
kernels and a real server are tests/security/test_sandbox_network_boxes.py. Every
connection here goes to this machine's loopback only: two HTTP origins on different ports
(one allowed), a TCP echo server, a firehose and a sink; no test reaches any other address.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import logging
import os
import shutil
import socketserver
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_ci.models.broker import ENV_URL
from jupyter_ci.server.sandbox import proxy as proxy_module
from jupyter_ci.server.sandbox.allowlist import Allowlist, Rule, normal_host
from jupyter_ci.server.sandbox.egress import broker_rule
from jupyter_ci.server.sandbox.environ import ENV_BROKER_SOCKET
from jupyter_ci.server.sandbox.proxy import EgressProxy


class Origin(http.server.BaseHTTPRequestHandler):
    """Answer every GET with what it received: its port, the request's path and Host."""

    def do_GET(self) -> None:
        body = json.dumps({"port": self.server.server_address[1], "path": self.path,
                           "host": self.headers["Host"]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class Echo(socketserver.BaseRequestHandler):
    """Send back every byte until the client is done."""

    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


class Firehose(socketserver.BaseRequestHandler):
    """Send bytes until the client is gone."""

    def handle(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                self.request.sendall(b"x" * 65536)


class Sink(socketserver.BaseRequestHandler):
    """Read to the client's end, then keep the connection open without a word."""

    def handle(self) -> None:
        while self.request.recv(65536):
            pass
        RELEASED.wait(60)


RELEASED = threading.Event()


def serve(server: socketserver.TCPServer) -> int:
    """Serve on a daemon thread; return the port."""
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return int(server.server_address[1])


@pytest.fixture(scope="module")
def ports() -> Iterator[dict[str, int]]:
    """Loopback servers: an allowed origin `a`, another `b`, `echo`, `firehose`, `sink`."""
    socketserver.ThreadingTCPServer.daemon_threads = True
    RELEASED.clear()
    servers: dict[str, socketserver.TCPServer] = {
        "a": http.server.ThreadingHTTPServer(("127.0.0.1", 0), Origin),
        "b": http.server.ThreadingHTTPServer(("127.0.0.1", 0), Origin),
        "echo": socketserver.ThreadingTCPServer(("127.0.0.1", 0), Echo),
        "firehose": socketserver.ThreadingTCPServer(("127.0.0.1", 0), Firehose),
        "sink": socketserver.ThreadingTCPServer(("127.0.0.1", 0), Sink)}
    yield {name: serve(server) for name, server in servers.items()}
    RELEASED.set()
    for server in servers.values():
        server.shutdown()
        server.server_close()


@pytest.fixture
def folder() -> Iterator[Path]:
    """A short folder for Unix sockets (their paths are limited to 108 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="egress-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@contextlib.asynccontextmanager
async def running(entries: list[str], folder: Path, slots: int = 16
                  ) -> AsyncIterator[EgressProxy]:
    """Run a proxy for `entries` on this loop."""
    proxy = EgressProxy(Allowlist.parse(entries), folder / "p.sock",
                        threading.BoundedSemaphore(slots))
    await proxy.start()
    try:
        yield proxy
    finally:
        proxy.close()


async def ask(proxy: EgressProxy, raw: bytes) -> tuple[int, bytes]:
    """Send a raw request through the proxy; return the status and body of its answer."""
    reader, writer = await asyncio.open_unix_connection(str(proxy.path))
    writer.write(raw)
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


async def tunnel(proxy: EgressProxy, port: int
                 ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """CONNECT through the proxy to a loopback port; return the open tunnel."""
    reader, writer = await asyncio.open_unix_connection(str(proxy.path))
    writer.write(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert head.startswith(b"HTTP/1.1 200 "), head
    return reader, writer


async def settled(proxy: EgressProxy) -> None:
    """Wait until the proxy carries no connection (or fail saying one outlived its client)."""
    for _ in range(100):
        if proxy.active == 0:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("a connection outlived its client")


def get(url: str, *headers: str) -> bytes:
    """An absolute-form GET, as a client sends it to a proxy."""
    return "\r\n".join([f"GET {url} HTTP/1.1", *headers, "", ""]).encode()


def test_an_allowed_origin_answers_and_another_port_gets_403(
        ports: dict[str, int], folder: Path, caplog: pytest.LogCaptureFixture) -> None:
    a, b = ports["a"], ports["b"]

    async def main() -> None:
        async with running([f"127.0.0.1:{a}"], folder) as proxy:
            status, body = await ask(proxy, get(f"http://127.0.0.1:{a}/p?q=1",
                                                "Host: elsewhere.example", "Connection: x"))
            assert status == 200, body
            # Origin form to the origin, with the URL's own Host (not the client's).
            assert json.loads(body) == {"port": a, "path": "/p?q=1", "host": f"127.0.0.1:{a}"}
            status, body = await ask(proxy, get(f"http://127.0.0.1:{b}/secret-path"))
            assert status == 403 and b"c.JupyterCI.sandbox_network" in body, body

    with caplog.at_level(logging.INFO, "jupyter_ci.server.sandbox.proxy"):
        asyncio.run(main())
    refusals = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert len(refusals) == 1 and f"127.0.0.1:{b}" in refusals[0]
    assert "secret-path" not in caplog.text


def test_connect_to_an_allowed_port_splices_a_byte_stream(
        ports: dict[str, int], folder: Path) -> None:
    data = os.urandom(1 << 20)

    async def main() -> None:
        async with running([f"127.0.0.1:{ports['echo']}"], folder) as proxy:
            reader, writer = await tunnel(proxy, ports["echo"])
            writer.write(data)
            # The half-close passes through: the echo server ends, and so does the tunnel.
            writer.write_eof()
            assert await asyncio.wait_for(reader.read(), 20) == data
            writer.close()
            status, body = await ask(proxy, f"CONNECT 127.0.0.1:{ports['b']} HTTP/1.1\r\n\r\n"
                                     .encode())
            assert status == 403, body

    asyncio.run(main())


def test_a_listed_name_resolving_to_loopback_reaches_it_only_when_the_address_is_listed(
        ports: dict[str, int], folder: Path) -> None:
    a = ports["a"]

    async def main() -> None:
        async with running([f"localhost:{a}"], folder) as proxy:
            status, body = await ask(proxy, get(f"http://localhost:{a}/"))
            assert status == 403 and b"resolves to" in body, body
        async with running([f"localhost:{a}", "127.0.0.1"], folder) as proxy:
            status, body = await ask(proxy, get(f"http://LOCALHOST:{a}/"))
            assert status == 200 and json.loads(body)["port"] == a, body

    asyncio.run(main())


def test_private_and_metadata_addresses_are_refused_unless_listed_as_themselves() -> None:
    allowlist = Allowlist.parse(["pypi.org", "10.1.2.3:8080", "*.example.org"])
    rule = allowlist.rule_for("pypi.org", 443)
    assert rule is not None
    for address in ("127.0.0.1", "169.254.169.254", "10.0.0.1", "192.168.1.1", "::1",
                    "fe80::1", "::ffff:127.0.0.1", "0.0.0.0", "100.64.0.1"):
        assert not allowlist.reachable(rule, address), address
    assert allowlist.reachable(rule, "151.101.0.223") and allowlist.reachable(rule, "10.1.2.3")
    assert allowlist.rule_for("pypi.org", 8080) is None  # no port named: 80 and 443 only
    assert allowlist.rule_for(normal_host("PyPI.org.") or "", 80) == rule
    assert allowlist.rule_for("10.1.2.3", 8080) is not None
    assert allowlist.rule_for("10.1.2.3", 443) is None
    assert allowlist.rule_for("files.example.org", 443) is not None
    assert allowlist.rule_for("example.org", 443) is None  # a wildcard is subdomains only
    for bad in ("http://pypi.org", "pypi.org:0", "pypi.org:x", "*.10.0.0.1", "a b", ""):
        with pytest.raises(ValueError, match="sandbox_network"):
            Allowlist.parse([bad])


def test_malformed_requests_get_400(ports: dict[str, int], folder: Path) -> None:
    a = ports["a"]
    malformed = [b"GARBAGE\r\n\r\n", get("/", "Host: x"), get("ftp://127.0.0.1/"),
                 b"CONNECT 127.0.0.1 HTTP/1.1\r\n\r\n", get(f"http://u@127.0.0.1:{a}/"),
                 get(f"http://127.0.0.1:{a}/", "NoColon"), get(f"http://127.0.0.1:{a}/", "A B: c"),
                 get(f"http://127.0.0.1:{a}/", " folded"), get("http://bad_host!/"),
                 f"GET http://127.0.0.1:{a}/ HTTP/2\r\n\r\n".encode()]

    async def main() -> None:
        async with running([f"127.0.0.1:{a}"], folder) as proxy:
            for raw in malformed:
                status, body = await ask(proxy, raw)
                assert status == 400, (raw, body)
            assert (await ask(proxy, get(f"http://127.0.0.1:{a}/")))[0] == 200

    asyncio.run(main())


def test_the_proxy_survives_clients_that_hang_up_mid_splice(
        ports: dict[str, int], folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proxy_module, "HALF_CLOSED_SECONDS", 0.5)

    async def main() -> None:
        entries = [f"127.0.0.1:{port}" for port in ports.values()]
        async with running(entries, folder) as proxy:
            # One that streams to it, one that goes quiet once it echoed all it got, and
            # one that never closes: each connection ends with its client.
            for port in (ports["firehose"], ports["echo"], ports["sink"]):
                reader, writer = await tunnel(proxy, port)
                writer.write(b"y" * 1000)
                if port != ports["sink"]:
                    await reader.readexactly(1000)
                writer.transport.abort()
            await settled(proxy)
            assert (await ask(proxy, get(f"http://127.0.0.1:{ports['a']}/")))[0] == 200

    asyncio.run(main())


def test_connections_past_the_limit_get_503(ports: dict[str, int], folder: Path) -> None:
    async def main() -> None:
        async with running([f"127.0.0.1:{ports['echo']}"], folder, slots=1) as proxy:
            _, writer = await tunnel(proxy, ports["echo"])
            status, body = await ask(proxy, get(f"http://127.0.0.1:{ports['echo']}/"))
            assert status == 503, body
            writer.close()
            await settled(proxy)
            _, writer = await tunnel(proxy, ports["echo"])
            writer.close()
            await settled(proxy)

    asyncio.run(main())


def test_the_broker_url_is_allowed_when_no_socket_reaches_it(folder: Path) -> None:
    url = "http://gateway-host.internal:8888/jupyter-ci/broker"
    assert broker_rule({ENV_URL: url}) == Rule("gateway-host.internal", 8888, any_address=True)
    assert broker_rule({ENV_URL: "https://10.0.0.2/b"}) == Rule("10.0.0.2", 443,
                                                                 any_address=True)
    (folder / "broker.sock").touch()
    assert broker_rule({ENV_URL: url, ENV_BROKER_SOCKET: str(folder / "broker.sock")}) is None
    assert broker_rule({}) is None
