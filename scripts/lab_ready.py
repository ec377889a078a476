"""Wait for the Jupyter server of a pid to answer; print how to reach it (run by lab.sh)."""

from __future__ import annotations

import os
import shlex
import sys
import time
import urllib.error
import urllib.request
from typing import Any

from jupyter_server.serverapp import list_running_servers

WAIT_S = 600.0  # a hang guard: the first start of a loaded machine can take minutes


def main(pid: int, page: str) -> int:
    """Print the block once the server of `pid` answers; give up when that process ends."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline and alive(pid):
        info = next((i for i in list_running_servers() if i.get("pid") == pid), None)
        if info is not None and answers(info):
            print(block(info, page), flush=True)
            return 0
        time.sleep(0.3)
    return 1


def alive(pid: int) -> bool:
    """Tell whether the process still runs."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def answers(info: dict[str, Any]) -> bool:
    """Tell whether the server answers an authenticated request."""
    request = urllib.request.Request(info["url"].rstrip("/") + "/api/status",
                                     headers={"Authorization": f"token {info['token']}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return int(reply.status) == 200
    except (OSError, urllib.error.HTTPError):
        return False


def block(info: dict[str, Any], page: str) -> str:
    """Return what to open, and the lines that reach the REST API and MCP from elsewhere."""
    url, token = info["url"].rstrip("/"), info["token"]
    bar = "-" * 78
    return "\n".join([
        "", bar,
        f"jupyter-ci is ready: {url}{page}{'&' if '?' in page else '?'}token={token}",
        "REST API and MCP: paste these two lines in another terminal",
        f"  export URL={shlex.quote(url)} JUPYTER_TOKEN={shlex.quote(token)}",
        '  curl -s -H "Authorization: token $JUPYTER_TOKEN" $URL/jupyter-ci/sessions',
        "then, for Claude Code: claude mcp add --transport http jupyter-ci "
        '"$URL/jupyter-ci/mcp" --header "Authorization: token $JUPYTER_TOKEN"',
        "Stop the server with Ctrl-C here.", bar, ""])


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), sys.argv[2]))
