"""Kernel messages over websockets without Nagle's 40 ms (server/nodelay.py, gateway.py).

An execute over Jupyter Server's kernel websocket took ~44 ms against ~4 ms over ZMQ: the
handler's socket kept Nagle's algorithm on, and the client's delayed ACK held the reply's
second message back 40 ms. The server now sets TCP_NODELAY on it; the gateway clients it
opens acknowledge at once; REST sessions' gateway queues wake their readers, not poll.
"""

from __future__ import annotations

import asyncio
import json
import socket
import statistics
import threading
import time
import uuid
from pathlib import Path
from queue import Empty

import pytest
import websocket
from jupyter_server.gateway.connections import GatewayWebSocketConnection
from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection

from jupyter_ci.server import nodelay
from jupyter_ci.server.gateway import AuthenticatedGatewayKernelClient
from jupyter_ci.server.gateway_channels import WakingChannelQueue
from tests.ui.lab import LabServer, start_lab

ROUNDS = 12


def lab(base: Path, low_latency: bool) -> LabServer:
    """Start a server with the fix on or off."""
    (base / "config").mkdir(parents=True)
    (base / "config" / "jupyter_server_config.json").write_text(json.dumps({
        "KernelWebsockets": {"low_latency": low_latency},
        "JupyterCI": {"session_pool": 0}}))
    return start_lab(base, {})


def execute_over_websocket(server: LabServer, rounds: int) -> float:
    """Return the median ms of an execute over the server's kernel websocket."""
    kernel = server.api("POST", "/api/kernels", {"name": "python3"}, timeout=120)
    ws = websocket.create_connection(
        f"ws://127.0.0.1:{server.port}/api/kernels/{kernel['id']}/channels",
        header={"Authorization": f"token {server.token}"}, timeout=60)
    times = []
    try:
        for n in range(rounds + 3):  # the first ones warm up
            msg_id, start = uuid.uuid4().hex, time.perf_counter()
            ws.send(json.dumps({
                "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "",
                           "session": "s", "version": "5.3", "date": ""},
                "parent_header": {}, "metadata": {}, "channel": "shell",
                "content": {"code": "x = 1", "silent": False, "store_history": False,
                            "user_expressions": {}, "allow_stdin": False}}))
            replied = idle = False
            while not (replied and idle):
                msg = json.loads(ws.recv())
                if msg["parent_header"].get("msg_id") == msg_id:
                    replied |= msg["msg_type"] == "execute_reply"
                    idle |= msg["msg_type"] == "status" and \
                        msg["content"]["execution_state"] == "idle"
            if n >= 3:
                times.append(time.perf_counter() - start)
    finally:
        ws.close()
        server.api("DELETE", f"/api/kernels/{kernel['id']}")
    return statistics.median(times) * 1000


def test_an_execute_over_the_kernel_websocket_does_not_wait_for_a_delayed_ack(
    tmp_path: Path,
) -> None:
    fixed, plain = lab(tmp_path / "fixed", True), lab(tmp_path / "plain", False)
    try:
        before = execute_over_websocket(plain, ROUNDS)
        after = execute_over_websocket(fixed, ROUNDS)
    finally:
        fixed.stop()
        plain.stop()
    # Without the fix each execute waits for Linux's 40 ms delayed ACK; with it, a few ms.
    assert before > 35, (before, after)
    assert after < before / 3, (before, after)


def test_each_kind_of_kernel_websocket_connection_gets_the_fix_once() -> None:
    zmq = nodelay.without_nagle(ZMQChannelsWebsocketConnection)
    gateway = nodelay.without_nagle(GatewayWebSocketConnection)
    assert zmq is nodelay.NoDelayZMQChannelsWebsocketConnection
    assert gateway is nodelay.NoDelayGatewayWebSocketConnection
    assert nodelay.without_nagle(zmq) is zmq

    class Custom(GatewayWebSocketConnection):
        pass

    custom = nodelay.without_nagle(Custom)
    assert issubclass(custom, Custom) and custom.handle_outgoing_message is not \
        Custom.handle_outgoing_message
    # Settings an admin gave the class itself still apply to the subclass.
    assert "GatewayWebSocketConnection" in custom.section_names()
    settings = {"kernel_websocket_connection_class": Custom}
    nodelay.install_low_latency(settings, enabled=False)
    assert settings["kernel_websocket_connection_class"] is Custom
    assert AuthenticatedGatewayKernelClient.low_latency is False
    nodelay.install_low_latency(settings, enabled=True)
    assert settings["kernel_websocket_connection_class"].__mro__[1:3] == (
        nodelay._GatewayNoDelay, nodelay._NoDelay)
    assert AuthenticatedGatewayKernelClient.low_latency is True


def test_quick_ack_is_harmless_on_any_socket() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        client = socket.create_connection(server.getsockname())
        nodelay.quick_ack(client)
        client.close()
        nodelay.quick_ack(client)  # closed: nothing to acknowledge, no error
    nodelay.quick_ack(None)


def test_a_gateway_queue_wakes_its_reader_instead_of_spinning() -> None:
    async def scenario() -> tuple[float, float, float]:
        queue = WakingChannelQueue("iopub", None, None, asyncio.get_running_loop())  # type: ignore[arg-type]
        # Nothing comes: the timeout passes without the loop spinning (upstream's polling
        # queue burns a core here, and starves the websocket's reader thread of the GIL).
        cpu = time.process_time()
        with pytest.raises(Empty):
            await queue._async_get(timeout=0.3)
        idle_cpu = time.process_time() - cpu
        # A message put by another thread wakes the reader at once.
        threading.Timer(0.05, queue.put_nowait, [{"msg_type": "status"}]).start()
        start = time.monotonic()
        assert (await queue._async_get(timeout=5))["msg_type"] == "status"
        woke = time.monotonic() - start
        # The websocket ended: the waiting reader hears it, it does not wait out its timeout.
        def finish() -> None:
            queue.response_router_finished = True
            queue.wake()
        threading.Timer(0.05, finish).start()
        start = time.monotonic()
        with pytest.raises(RuntimeError, match="Response router had finished"):
            await queue._async_get(timeout=5)
        return idle_cpu, woke, time.monotonic() - start

    idle_cpu, woke, ended = asyncio.run(scenario())
    assert idle_cpu < 0.1, idle_cpu
    assert 0.04 < woke < 0.5 and ended < 0.5, (woke, ended)
