"""Resolving a model is pure; asking the broker what it serves now is a separate, explicit call.

The broker here is a real listening socket that counts the connections it accepts (and
answers each as the broker's `_info` route would): no mock stands between the code and it.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterator

import pytest

from jupyter_ci.agent.errors import ModelConfigError
from jupyter_ci.models import broker
from jupyter_ci.models.broker import ENV_PROVIDERS, ENV_TOKEN, ENV_URL
from jupyter_ci.models.resolve import ModelSettings, resolve_model
from jupyter_ci.models.service import ServiceModel


class CountingBroker:
    """A TCP listener that counts connections and answers each: the broker serves openai."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.05)  # accept() wakes up to see `_stop`; close() would not
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """Return the broker URL a kernel would be given."""
        return f"http://127.0.0.1:{self.server.getsockname()[1]}/jupyter-ci/broker"

    def _serve(self) -> None:
        body = json.dumps({ENV_PROVIDERS: "openai"}).encode()
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            self.connections += 1  # counted before answering: the caller waits for it
            with conn:
                conn.recv(1 << 16)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\nConnection: close\r\n\r\n%s"
                             % (len(body), body))

    def close(self) -> None:
        """Stop listening."""
        self._stop.set()
        self._thread.join(5)
        self.server.close()


@pytest.fixture
def counting() -> Iterator[CountingBroker]:
    """Serve a counting broker for one test."""
    server = CountingBroker()
    yield server
    server.close()


def kernel_env(url: str, providers: str = "") -> dict[str, str]:
    """Return what a kernel started before any key was given finds in its environment."""
    return {ENV_URL: url, ENV_TOKEN: "kernel-credential", ENV_PROVIDERS: providers}


def test_resolving_with_an_explicit_env_connects_nowhere_and_writes_no_environ(
    counting: CountingBroker,
) -> None:
    env = kernel_env(counting.url)
    before = dict(os.environ)
    # The broker published no provider: resolving says so rather than asking it.
    with pytest.raises(ModelConfigError, match="no key for openai"):
        resolve_model("openai:gpt-x", ModelSettings(), env)
    with pytest.raises(ModelConfigError, match="No model is configured"):
        resolve_model(None, ModelSettings(), env)
    assert counting.connections == 0
    assert dict(os.environ) == before and env == kernel_env(counting.url)
    # Asking is the caller's explicit step; what it returns is resolved without I/O.
    refreshed = broker.refreshed_environ("openai:gpt-x", env)
    assert counting.connections == 1 and refreshed[ENV_PROVIDERS] == "openai"
    model = resolve_model("openai:gpt-x", ModelSettings(), refreshed)
    assert isinstance(model, ServiceModel) and model.endpoint.base_url == counting.url
    assert counting.connections == 1
    assert dict(os.environ) == before and env == kernel_env(counting.url)


def test_the_broker_is_asked_only_when_the_model_needs_it(counting: CountingBroker) -> None:
    listed = kernel_env(counting.url, "openai")
    assert broker.refreshed_environ("openai:gpt-x", listed) == listed
    assert broker.refreshed_environ(None, listed) == listed
    assert broker.refreshed_environ("nowhere:x", kernel_env(counting.url)) == kernel_env(
        counting.url)  # an unknown provider: parse_model_id says what is wrong
    assert broker.refreshed_environ("openai:gpt-x", {"OPENAI_API_KEY": "k"}) == {
        "OPENAI_API_KEY": "k"}  # no broker at all
    assert counting.connections == 0
    assert broker.needs_refresh("anthropic:claude-x", listed)
    assert broker.refreshed_environ("anthropic:claude-x", listed)[ENV_PROVIDERS] == "openai"
    assert counting.connections == 1
