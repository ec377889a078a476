"""A kernel's client of the model service goes through the proxy its environment names.

A box whose network is an allowlist reaches a remote server's model service only through
the server's egress proxy (HTTP_PROXY inside the box); the SDK honoured it, and so must the
small client that replaced it.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from jupyter_ci import providers
from jupyter_ci.agent.types import Message, ModelRequest
from jupyter_ci.models.base import Endpoint
from jupyter_ci.models.service import ServiceModel


class _Service(BaseHTTPRequestHandler):
    """Answer any POST with a one-line reply stream, as the model service does."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps({"reply": {"text": "through", "tool_calls": []}}).encode() + b"\n"
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Connect(socketserver.StreamRequestHandler):
    """A CONNECT-only proxy that notes each target and carries the bytes both ways."""

    server: _ProxyServer

    def handle(self) -> None:
        line = self.rfile.readline().decode()
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass
        method, target, _ = line.split(" ", 2)
        self.server.seen.append(f"{method} {target}")
        host, _, port = target.rpartition(":")
        with socket.create_connection((host, int(port))) as upstream:
            self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            self.wfile.flush()
            back = threading.Thread(target=_pipe, args=(upstream, self.connection), daemon=True)
            back.start()
            _pipe(self.connection, upstream)
            back.join(5)


class _ProxyServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    seen: list[str]


def _pipe(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
        target.shutdown(socket.SHUT_WR)
    except OSError:
        pass


@pytest.fixture
def service() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Service)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


@pytest.fixture
def proxy() -> Iterator[_ProxyServer]:
    server = _ProxyServer(("127.0.0.1", 0), _Connect)
    server.seen = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


def complete(port: int) -> str:
    model = ServiceModel(providers.PROVIDERS["openai"], "gpt-test",
                         Endpoint("credential", f"http://127.0.0.1:{port}/jupyter-ci/broker",
                                  timeout=5, max_retries=0))
    return model.complete(ModelRequest("", (Message("user", "hi"),), ()), lambda _: None).text


def test_the_client_tunnels_through_the_proxy_the_environment_names(
        service: int, proxy: _ProxyServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.server_address[1]}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert complete(service) == "through"
    assert proxy.seen == [f"CONNECT 127.0.0.1:{service}"]


def test_no_proxy_is_honoured_and_no_proxy_means_a_direct_connection(
        service: int, proxy: _ProxyServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.server_address[1]}")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert complete(service) == "through"
    for name in ("HTTP_PROXY", "http_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert complete(service) == "through"
    assert proxy.seen == []
