"""How the Hub tests reach users' servers: REST asks through the proxy, kernels over ZMQ."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_client.blocking.client import BlockingKernelClient

from tests.hub.harness import Hub, UnixUser
from tests.kernelrun import connection_file


def sse(text: str) -> list[tuple[str, Any]]:
    """Parse a server-sent event stream into (event, data) pairs."""
    events = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines()
                      if ": " in line and not line.startswith(":"))
        if "event" in fields:
            events.append((fields["event"], json.loads(fields["data"])))
    return events


def new_session(hub: Hub, user: str, token: str, body: dict[str, Any] | None = None
                ) -> dict[str, Any]:
    """Create a REST session on `user`'s server; return its info."""
    status, info = hub.request("POST", f"user/{user}/jupyter-ci/sessions", token, body or {})
    assert status == 201, (status, info)
    return dict(info)


def rest_ask(hub: Hub, user: str, token: str, sid: str, **body: Any) -> list[tuple[str, Any]]:
    """POST an ask to a session of `user`'s server; return its events."""
    status, text = hub.request("POST", f"user/{user}/jupyter-ci/sessions/{sid}/ask", token,
                               body, timeout=180)
    assert status == 200, (status, text)
    return sse(text)


@dataclass
class ServerKernel:
    """A kernel of a user's server (started through its REST API), driven over ZMQ."""

    kernel_id: str
    connection_file: Path
    client: BlockingKernelClient = field(init=False)

    def __post_init__(self) -> None:
        self.client = BlockingKernelClient()
        self.client.load_connection_file(str(self.connection_file))
        self.client.start_channels()
        self.client.wait_for_ready(timeout=120)

    def run(self, code: str, timeout: float = 120) -> tuple[str, list[dict[str, Any]]]:
        """Run a cell; return its status and its outputs' contents."""
        outputs: list[dict[str, Any]] = []

        def keep(msg: dict[str, Any]) -> None:
            if msg["msg_type"] in ("stream", "display_data", "execute_result", "error"):
                outputs.append(msg["content"])
            elif msg["msg_type"] == "update_display_data":
                # As a page does: the display of that id now shows this (an answer streams).
                shown = msg["content"].get("transient", {}).get("display_id")
                for i, out in enumerate(outputs):
                    if shown and out.get("transient", {}).get("display_id") == shown:
                        outputs[i] = msg["content"]

        reply = self.client.execute_interactive(code, timeout=timeout, output_hook=keep)
        return str(reply["content"]["status"]), outputs

    def close(self) -> None:
        """Stop the channels (the kernel stays the server's)."""
        self.client.stop_channels()


def start_kernel(hub: Hub, user: UnixUser, token: str) -> ServerKernel:
    """Start a notebook kernel in `user`'s server; connect to it as root does (its file)."""
    status, info = hub.request("POST", f"user/{user.name}/api/kernels", token, {})
    assert status == 201, (status, info)
    runtime = user.home / ".local" / "share" / "jupyter" / "runtime"
    return ServerKernel(info["id"], connection_file(runtime, info["id"], uid=user.uid))


def text_of(outputs: list[dict[str, Any]]) -> str:
    """Join the text of a cell's outputs."""
    parts = []
    for out in outputs:
        parts.append(out.get("text", ""))
        data = out.get("data") or {}
        parts.append(str(data.get("text/markdown", "")) + str(data.get("text/plain", "")))
        if "evalue" in out:
            parts.append(f"{out['ename']}: {out['evalue']}")
    return "".join(parts)


def processes_of(user: UnixUser) -> list[int]:
    """Return the pids of every process `user` runs (their server, its kernels)."""
    done = subprocess.run(["pgrep", "-u", user.name], capture_output=True, text=True)
    return [int(pid) for pid in done.stdout.split()]


def environ_of(pid: int) -> dict[str, str]:
    """Return a process's initial environment, as root reads it."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def command_of(pid: int) -> str:
    """Return a process's command line."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def files_holding(root: Path, secret: str) -> list[str]:
    """Return the files under `root` whose bytes hold `secret`."""
    found = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder, name)
            try:
                if path.is_file() and secret.encode() in path.read_bytes():
                    found.append(str(path))
            except OSError:
                continue
    return found


def rest_ask_answering(hub: Hub, user: str, token: str, sid: str, decision: str,
                       **body: Any) -> list[tuple[str, Any]]:
    """POST an ask, answer each question it waits on with `decision`; return its events."""
    import urllib.request

    request = urllib.request.Request(
        f"{hub.url}user/{user}/jupyter-ci/sessions/{sid}/ask", method="POST",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
    events: list[tuple[str, Any]] = []
    with urllib.request.urlopen(request, timeout=180) as response:
        block: list[str] = []
        for raw in response:
            line = raw.decode().rstrip("\n")
            if line:
                block.append(line)
                continue
            for event in sse("\n".join(block)):
                events.append(event)
                if event[0] == "waiting_for_user":
                    status, said = hub.request(
                        "POST", f"user/{user}/jupyter-ci/sessions/{sid}/approvals", token,
                        {"approval_id": event[1]["approval_id"], "decision": decision})
                    assert status == 200, (status, said)
            block = []
    return events


def write_user_config(user: UnixUser, text: str) -> Path:
    """Write `user`'s own jupyter_server_config.py, as they could from a terminal."""
    folder = user.home / ".jupyter"
    folder.mkdir(exist_ok=True)
    path = folder / "jupyter_server_config.py"
    path.write_text(text)
    for made in (folder, path):
        os.chown(made, user.uid, user.uid)
    return path
